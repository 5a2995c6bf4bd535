"""Why the column names a producer's records declare cannot become a table's columns, as Spark
expressions: shared by the decoders that read the names from the records themselves (CES
``eventsource.cols``, Qlik metadata messages). Debezium's schemas are read in Python
(:func:`sqlcdc.names.reserved_problem`); a table's ``columns:`` are checked with its config.

A name cannot be a column when another differs from it only in case (Delta and SQL Server's default
collation compare names case-insensitively), when it holds a character Delta cannot store in a
column name (:data:`sqlcdc.names.DELTA_BAD_NAME_CHARS`), or when it is one sqlcdc gives a column of
its own (:func:`sqlcdc.names.reserved`).
"""

from __future__ import annotations

from typing import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc.names import DELTA_BAD_NAME_RE, RESERVED_RE, RESERVED_WHY

__all__ = ["ARRAYS", "name_arrays", "name_problems"]

#: The names of :func:`name_arrays`' arrays.
ARRAYS = ("_lowered", "_bad_names", "_own_names")


def name_arrays(names: Column) -> dict[str, Column]:
    """The arrays :func:`name_problems` reads, by the names a staged select may give them (a plan
    sent over Spark Connect must stay shallow: Qlik computes them a select before the problems)."""
    return dict(zip(ARRAYS, (
        F.transform(names, lambda n: F.lower(n)),
        F.filter(names, lambda n: n.rlike(DELTA_BAD_NAME_RE)),
        F.filter(names, lambda n: n.rlike(RESERVED_RE)),
    )))


def name_problems(names: Column, arrays: Mapping[str, Column], remedy: str = "") -> list[Column]:
    """One problem text per kind (NULL when there is none) for the array of column ``names``;
    ``remedy`` ends the texts that say what to do (e.g. " or give the table `columns:`")."""
    lowered, bad, own = (arrays[k] for k in ARRAYS)

    def listed(a: Column) -> Column:
        return F.array_join(F.transform(a, lambda n: F.to_json(F.array(n))), ", ")

    return [
        F.when(F.size(F.array_distinct(lowered)) < F.size(lowered), F.format_string(
            "column names equal but for case (%s): Delta cannot hold both",
            F.array_join(F.filter(names, lambda n: F.size(F.filter(lowered, lambda m: m == F.lower(n))) > 1), ", "))),
        F.when(F.size(bad) > 0, F.format_string(
            "column name(s) %s hold a character Delta cannot store in a column name (one of space , ; { } ( ) "
            f"newline tab = backtick); rename the column at the source{remedy}", listed(bad))),
        F.when(F.size(own) > 0, F.format_string(f"column name(s) %s {RESERVED_WHY}{remedy}", listed(own))),
    ]
