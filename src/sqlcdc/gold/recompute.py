"""Gold by recompute: SCD1 and SCD2 tables from a table's whole change history, in one query.

The reference path (:mod:`sqlcdc.gold.incremental` gives the same tables from per-key state;
``benchmarks/bench_apply_changes.py`` compares both). Locally, without ``sqlcdc run``, the
pipeline declares gold as materialized views over these (:mod:`sqlcdc.gold.graph`).
Everything is Spark column expressions and window functions; no Python UDFs.

Example::

    from sqlcdc.gold import ApplyChangesSpec, scd1, scd2
    spec = ApplyChangesSpec(keys=["id"], table="customers")
    current = scd1(frame, spec)            # data columns, one row per live key
    history = scd2(frame, spec)            # data columns + __START_AT / __END_AT (NULL = current)
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sqlcdc.gold.order import CID, IS_DEL, IS_TRUNC, RANK, SEQ, classified, col, q
from sqlcdc.gold.spec import END_AT, START_AT, ApplyChangesSpec

__all__ = ["scd1", "scd2"]

# Internal column names (double underscore + "ac_" so they cannot collide with data columns); the
# apply-order ones are sqlcdc.gold.order's, shared with sqlcdc.gold.incremental.
_SEQ, _RANK, _CID, _IS_DEL, _IS_TRUNC = SEQ, RANK, CID, IS_DEL, IS_TRUNC
_ALIVE, _RESET, _BOUNDARY = "__ac_alive", "__ac_reset", "__ac_boundary"
_RN, _TLAST, _TNEXT = "__ac_rn", "__ac_tlast", "__ac_tnext"


_q, _c, _classified = q, col, classified


def _events(frame: DataFrame, spec: ApplyChangesSpec, schema: StructType | None = None,
            classified: bool = False) -> tuple[DataFrame, list[str]]:
    """Per-key events, each with the truncates just before and just after it.

    ``__ac_tlast`` = the last truncate sequenced at or before the event, ``__ac_tnext`` = the first
    after it (NULL = none). Truncates are few: they travel as one broadcast array, so a table
    without truncates pays one cheap filtered scan and no shuffle for them.
    """
    schema = schema or frame.schema
    keys = list(spec.keys)
    values = [c for c in spec.output_columns(schema) if c not in keys]
    prov = _c(spec.provided_column) if spec.provided_column else F.lit(None).cast("array<string>")
    ev = frame if classified else _classified(frame, spec)
    cols = [_c(k) for k in keys] + [_c(c) for c in values]
    base = ev.where(~F.col(_IS_TRUNC)).select(
        *cols, prov.alias("__ac_prov"), _SEQ, _RANK, _CID, F.col(_IS_DEL)
    )
    if spec.apply_as_truncates:
        truncs = ev.where(F.col(_IS_TRUNC)).agg(F.collect_set(F.col(_SEQ)).alias("__ac_truncs"))
        base = base.crossJoin(F.broadcast(truncs))
        arr, seq = F.col("__ac_truncs"), F.col(_SEQ)
        # Column names written out, not base.columns: SDP query functions may not analyse a frame.
        base = base.select(
            *cols, F.col("__ac_prov"), F.col(_SEQ), F.col(_RANK), F.col(_CID), F.col(_IS_DEL),
            F.array_max(F.filter(arr, lambda t: t <= seq)).alias(_TLAST),
            F.array_min(F.filter(arr, lambda t: t > seq)).alias(_TNEXT),
        )
    else:
        none = F.lit(None).cast(schema[spec.sequence_by].dataType)
        base = base.select("*", none.alias(_TLAST), none.alias(_TNEXT))
    return base, values


def _key_window(spec: ApplyChangesSpec):
    return Window.partitionBy(*[_c(k) for k in spec.keys]).orderBy(F.col(_SEQ), F.col(_RANK), F.col(_CID))


def _state(frame: DataFrame, spec: ApplyChangesSpec, schema: StructType | None = None,
           classified: bool = False) -> tuple[DataFrame, list[str]]:
    """One row per event with the key's full state *after* it (``_ALIVE`` = key exists).

    A value column's state is the value of the last upsert (in apply order) that provided it,
    provided that upsert comes after the key's last delete and is not sequenced before a truncate
    that precedes the event; else NULL. All of it in one window pass over (key, apply order).
    """
    ev, values = _events(frame, spec, schema, classified)
    w = _key_window(spec)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ev = ev.withColumn(_RN, F.row_number().over(w))
    upsert = ~F.col(_IS_DEL)
    reset = F.last(F.when(F.col(_IS_DEL), F.col(_RN)), ignorenulls=True).over(upto)
    sel = [_c(k) for k in spec.keys]
    for c in values:
        provided = F.col("__ac_prov").isNull() | F.array_contains(F.col("__ac_prov"), F.lit(c))
        if spec.ignores_null(c):
            provided = provided & _c(c).isNotNull()
        last_set = F.last(
            F.when(upsert & provided, F.struct(F.col(_RN).alias("n"), F.col(_SEQ).alias("s"), _c(c).alias("v"))),
            ignorenulls=True,
        ).over(upto)
        sel.append(last_set.alias(c))
    sel += [reset.alias(_RESET), F.col(_SEQ), F.col(_RANK), F.col(_CID), upsert.alias(_ALIVE),
            F.col(_TLAST), F.col(_TNEXT)]
    st = ev.select(*sel)

    def valid(c: str) -> Column:
        after_delete = F.col(_RESET).isNull() | (_c(c)["n"] > F.col(_RESET))
        after_truncate = F.col(_TLAST).isNull() | (_c(c)["s"] >= F.col(_TLAST))
        return after_delete & after_truncate

    st = st.select(
        *[_c(k) for k in spec.keys],
        *[F.when(valid(c), _c(c)["v"]).alias(c) for c in values],
        _SEQ, _RANK, _CID, _ALIVE, _TLAST, _TNEXT,
    )
    return st, values


def scd1(frame: DataFrame, spec: ApplyChangesSpec, *, schema: StructType | None = None) -> DataFrame:
    """SCD type 1 recomputed from the whole apply frame: the current row of every live key.

    Returns the output data columns (frame order, after ``column_list``/``except_column_list``).
    ``schema``: the frame's schema when known statically (SDP query functions may not analyze a
    DataFrame, so the pipeline passes it; see :func:`sqlcdc.model.apply_frame_schema`).

    Example::

        >>> scd1(frame, ApplyChangesSpec(keys=["id"], table="customers")).show()  # doctest: +SKIP
    """
    schema = schema or frame.schema
    out_cols = spec.output_columns(schema)
    st, _ = _state(frame, spec, schema)
    w = _key_window(spec)
    last = st.withColumn("__ac_next", F.lead(F.lit(1)).over(w))
    live = F.col("__ac_next").isNull() & F.col(_ALIVE) & F.col(_TNEXT).isNull()
    return last.where(live).select(*[_c(c) for c in out_cols])


def scd2(frame: DataFrame, spec: ApplyChangesSpec, *, schema: StructType | None = None) -> DataFrame:
    """SCD type 2 recomputed from the whole apply frame: every version of every key.

    Returns the output data columns + ``__START_AT``, ``__END_AT`` (type of ``sequence_by``;
    ``__END_AT`` NULL = current version).

    Example::

        >>> scd2(frame, ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, table="customers"))  # doctest: +SKIP
    """
    return _scd2(frame, spec, schema or frame.schema)


def _scd2(frame: DataFrame, spec: ApplyChangesSpec, schema: StructType, classified: bool = False) -> DataFrame:
    out_cols = spec.output_columns(schema)
    tracked = spec.tracked_columns(schema)
    st, _ = _state(frame, spec, schema, classified)
    w = _key_window(spec)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    tuple_ = F.struct(*[_c(c) for c in tracked]) if tracked else F.lit(0)
    alive = F.col(_ALIVE)
    # The key existed just before this event: the previous event left it alive and no truncate
    # came in between.
    truncated_between = F.col(_TLAST).isNotNull() & (F.col(_TLAST) > F.lag(F.col(_SEQ)).over(w))
    prev_alive = F.coalesce(F.lag(alive).over(w), F.lit(False)) & ~F.coalesce(truncated_between, F.lit(False))
    same = tuple_.eqNullSafe(F.lag(tuple_).over(w))
    st = st.withColumn(_BOUNDARY, (alive & (~prev_alive | ~same)) | (~alive & prev_alive))
    next_seq = F.lead(F.col(_SEQ)).over(w)
    st = st.select(
        "*",
        F.last(F.when(F.col(_BOUNDARY), F.col(_SEQ)), ignorenulls=True).over(upto).alias(START_AT),
        F.lead(F.col(_BOUNDARY)).over(w).alias("__ac_next_boundary"),
        next_seq.alias("__ac_next_seq"),
    )
    nxt = F.col("__ac_next_seq")
    # A truncate before the key's next event (or after its last) closes the version.
    trunc_end = F.col(_TNEXT).isNotNull() & (nxt.isNull() | (F.col(_TNEXT) <= nxt))
    ends = st.where(alive & (nxt.isNull() | F.col("__ac_next_boundary") | trunc_end))
    end_at = F.when(trunc_end, F.col(_TNEXT)).otherwise(nxt)
    return ends.select(*[_c(c) for c in out_cols], F.col(START_AT), end_at.alias(END_AT))
