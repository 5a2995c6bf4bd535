"""The apply order of gold apply-changes, shared by the recompute and the incremental engine.

Per key, events apply in the order ``(sequence_by, deletes and truncates before upserts,
change id)``. :func:`classified` adds that order to an apply frame as columns, with the flags
that say what an event is::

    from sqlcdc.gold.order import SEQ, RANK, CID, classified
    ev = classified(frame, spec)          # + __ac_is_trunc, __ac_is_del, __ac_seq, __ac_rank, __ac_cid
    ev.orderBy(SEQ, RANK, CID)

:mod:`sqlcdc.gold.recompute` and :mod:`sqlcdc.gold.incremental` both use it, so they
cannot disagree on what the order is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sqlcdc.names import quote

if TYPE_CHECKING:
    from sqlcdc.gold.spec import ApplyChangesSpec

__all__ = ["SEQ", "RANK", "CID", "IS_DEL", "IS_TRUNC", "classified", "q", "col"]

# Internal column names (double underscore + "ac_" so they cannot collide with data columns).
SEQ, RANK, CID, IS_DEL, IS_TRUNC = "__ac_seq", "__ac_rank", "__ac_cid", "__ac_is_del", "__ac_is_trunc"


#: Quote an identifier for Spark (names are data: never paste them unquoted): :func:`sqlcdc.names.quote`.
q = quote


def col(name: str) -> Column:
    """The column ``name``, quoted."""
    return F.col(q(name))


def classified(frame: DataFrame, spec: "ApplyChangesSpec") -> DataFrame:
    """Add the sort columns: sequence, rank (0 = delete/truncate, 1 = upsert), change id, flags."""
    false = F.lit(False)
    is_trunc = F.coalesce(F.expr(spec.apply_as_truncates), false) if spec.apply_as_truncates else false
    is_del = F.coalesce(F.expr(spec.apply_as_deletes), false) if spec.apply_as_deletes else false
    cid = col(spec.change_id_column).cast("string") if spec.change_id_column else F.lit(None).cast("string")
    return (
        frame.withColumn(IS_TRUNC, is_trunc)
        .withColumn(IS_DEL, ~F.col(IS_TRUNC) & is_del)
        .withColumn(SEQ, col(spec.sequence_by))
        .withColumn(RANK, F.when(F.col(IS_DEL) | F.col(IS_TRUNC), F.lit(0)).otherwise(F.lit(1)))
        .withColumn(CID, F.coalesce(cid, F.lit("")))
    )
