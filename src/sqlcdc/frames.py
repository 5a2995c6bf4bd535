"""Plan-shape helpers: row filters that do not undo parse-once, and values computed once per row.

Spark's optimizer pushes a ``where(<expression>)`` below the projections it reads from and, on the
way, replaces each column it names by that column's expression. For a decoder that means the parse
(``from_json``, ``try_parse_json``) the projections computed once reappears inside the filter, once
per reference, and inside conditional branches where Spark does not share subexpressions: one
Debezium silver row was parsed ~70 times (``benchmarks/bench_validation.py``, before and after).

:func:`where` keeps the rows by ``explode(when(condition, array(true)))``: a generator, not a
Filter, so the optimizer has nothing to push down. (A Filter on a flag column is not enough: once the
flag is pruned, Spark pushes the inlined condition down again.) Each call adds a Generate node and
about two analyzer passes under ``spark-pipelines`` (Spark Connect resolves a whole plan within 100;
``tests/test_connect_resolution.py``), so use it where a filter reads parsed columns.

A Column is a tree: a Python expression that uses a column twice writes its whole expression twice,
and Spark neither shares it in the plan nor (inside conditional branches) at run time. :func:`let`
binds a value to a lambda variable instead, so it is written and computed once: Debezium's decimal
decode (base64 bytes -> unscaled integer -> text with the point) had its byte decode 52 times per
image in one silver plan.

Spark Connect (so SDP, locally and on Databricks) sends a plan as one protobuf message, and
Python's protobuf refuses one nested deeper than 100 levels (``Exceeded upb_DecodeOptions_MaxDepth``):
the run stops before any flow starts. A fold over the tables or columns of a config (``a | b | c``,
``df.union(x).union(y)``) nests one or two levels per item, so a config wide enough stops every run.
:func:`any_of`, :func:`all_of` and :func:`union_all` build balanced trees (depth log2 of the count)
instead; ``tests/test_connect_resolution.py`` checks every flow of a wide config.

Example::

    good = frames.where(typed, F.size("_reasons") == 0, "_good")
    text = frames.let(F.unbase64(raw), lambda b: F.when(F.length(b) > 0, F.hex(b)))
    taken = frames.any_of([matches(t) for t in tables])  # False for no tables
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["all_of", "any_of", "compact", "let", "union_all", "where"]

_T = TypeVar("_T")


def where(df: DataFrame, condition: Column, flag: str) -> DataFrame:
    """The rows of ``df`` where ``condition`` is true, with the condition kept as column ``flag``
    (no ``drop``: Spark Connect resolves a dropped frame's input, which an SDP query function may
    not do while its source table does not exist yet)."""
    return df.select("*", F.explode(F.when(condition, F.array(F.lit(True)))).alias(flag))


def let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)``, with ``value`` computed once per row however often ``body`` reads it.

    ``transform(array(value), v -> body(v))[0]``: the optimizer does not inline a lambda's argument,
    so the plan holds ``value``'s expression once. For expressions that ``body`` reads more than once
    (each read would otherwise copy the whole expression into the plan); a cheap value (a column
    reference, a literal) gains nothing.
    """
    return F.transform(F.array(value), body)[0]


def compact(items: Sequence[Column] | Column, element_type: str = "string") -> Column:
    """``array(*items)`` (or the array column ``items``) without its NULLs (``array<element_type>``),
    in order, each value once.

    Not ``filter(array(...), x -> x IS NOT NULL)`` (nor ``array_compact``, which Spark rewrites to
    it): a higher-order function has no generated code, so Spark evaluates its whole argument --
    here every check of a record -- row by row through the expression interpreter, several times
    slower, and re-creates a SQL configuration per call on executors. ``array_except(array(...),
    array(NULL))`` keeps the items in generated code; it also drops repeats, which for the reasons
    and rule names this builds (each naming its column or rule) never removes a distinct message.
    """
    if not isinstance(items, Column):
        if not items:
            return F.array().cast(f"array<{element_type}>")
        items = F.array(*items)
    return F.array_except(items, F.array(F.lit(None).cast(element_type)))


def _balanced(items: Sequence[_T], combine: Callable[[_T, _T], _T]) -> _T:
    """``items`` combined pairwise, level by level: a tree of depth log2(len(items)), not a chain."""
    level = list(items)
    while len(level) > 1:
        level = [combine(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0]


def any_of(conditions: Sequence[Column]) -> Column:
    """``c1 OR c2 OR ...`` (SQL's three-valued OR), as a balanced tree; ``false`` for none."""
    return _balanced(conditions, lambda a, b: a | b) if conditions else F.lit(False)


def all_of(conditions: Sequence[Column]) -> Column:
    """``c1 AND c2 AND ...`` (SQL's three-valued AND), as a balanced tree; ``true`` for none."""
    return _balanced(conditions, lambda a, b: a & b) if conditions else F.lit(True)


def union_all(frames: Sequence[DataFrame], by_name: bool = False) -> DataFrame:
    """The union (``UNION ALL``; ``by_name``: ``unionByName``) of one or more frames, as a balanced tree."""
    if not frames:
        raise ValueError("union_all needs at least one frame")
    return _balanced(frames, (lambda a, b: a.unionByName(b)) if by_name else (lambda a, b: a.union(b)))
