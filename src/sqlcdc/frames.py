"""Row filters that do not undo parse-once.

Spark's optimizer pushes a ``where(<expression>)`` below the projections it reads from and, on the
way, replaces each column it names by that column's expression. For a decoder that means the parse
(``from_json``, ``try_parse_json``) the projections computed once reappears inside the filter, once
per reference, and inside conditional branches where Spark does not share subexpressions: one
Debezium silver row was parsed ~70 times (``benchmarks/bench_validation.py``, before and after).

:func:`where` computes the condition as a column first and filters on that column alone, which
the optimizer leaves above the projection (``spark.sql.optimizer.avoidDoubleFilterEval``).

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
