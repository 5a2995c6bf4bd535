"""Row filters that do not undo parse-once.

Spark's optimizer pushes a ``where(<expression>)`` below the projections it reads from and, on the
way, replaces each column it names by that column's expression. For a decoder that means the parse
(``from_json``, ``try_parse_json``) the projections computed once reappears inside the filter, once
per reference, and inside conditional branches where Spark does not share subexpressions: one
Debezium silver row was parsed ~70 times (``benchmarks/bench_validation.py``, before and after).

:func:`where` keeps the rows by ``explode(when(condition, array(true)))``: a generator, not a
Filter, so the optimizer has nothing to push down. (A Filter on a flag column is not enough: once the
flag is pruned, Spark pushes the inlined condition down again.) Each call adds a Generate node and
some analyzer iterations; a Qlik plan with a dozen of them exceeded Spark's 100 under
``spark-pipelines``, so use it where a split reads parsed columns, not for every filter.

Example::

    good = frames.where(typed, F.size("_reasons") == 0, "_good")
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["where"]


def where(df: DataFrame, condition: Column, flag: str) -> DataFrame:
    """The rows of ``df`` where ``condition`` is true, with the condition kept as column ``flag``
    (no ``drop``: Spark Connect resolves a dropped frame's input, which an SDP query function may
    not do while its source table does not exist yet)."""
    return df.select("*", F.explode(F.when(condition, F.array(F.lit(True)))).alias(flag))
