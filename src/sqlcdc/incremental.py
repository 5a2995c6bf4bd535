"""Gold, incrementally: apply a batch of changes to SCD1/SCD2 Delta tables with MERGE.

The semantics are :mod:`sqlcdc.apply_changes`' (its :func:`~sqlcdc.apply_changes.scd1` /
:func:`~sqlcdc.apply_changes.scd2` recompute is the reference path); this module only makes a run
cost what the batch touches::

    from sqlcdc.incremental import merge_scd1, merge_scd2
    merge_scd1(spark, "warehouse/gold/customers", batch, spec)       # "initial" | "merge" | "recompute"
    merge_scd2(spark, "warehouse/gold/customers_history", batch, spec2)

Beside each target it keeps (Delta tables at ``<target>__state``, ``<target>__changes``,
``<target>__truncates``):

* a **key state**, one row per key ever seen: for every column the latest upsert that set it,
  the key's last delete (the tombstone) and its last event, each with its place in apply order
  ``(sequence, deletes first, change id)``. A batch *folds* into it with a max per field, so the
  order, split and duplication of events do not matter. The state is append-only (a run appends
  the touched keys' folded rows as one file; reads fold; it is compacted past 16 files). SCD1
  needs nothing else: a run reads the batch and the state rows of the keys it touches, and
  replaces those keys' target rows.
* for SCD2 the state also holds ``__ac_open``: the ``__START_AT`` of the key's open version and a
  per-key write counter (the last written row wins: a late event can move an open version's start
  either way, so it cannot fold by apply order). And SCD2 keeps the **change log**: a key whose new
  events all sort after the last event applied to it replays them from its state (its open
  version re-enters as an upsert at its ``__START_AT``) and only its open version is replaced;
  a key with a *late* event (at or before its last applied one) re-reads its history from the log,
  because a late event can re-cut versions already written. The state is written before the
  target, so a run stopped in between and delivered again routes its keys through the log.
* the sequences of **truncates**: the latest one bounds every key (SCD1); an SCD2 table that has
  seen a truncate is recomputed from its log for the touched keys (truncates are rare).

Rows are replaced per key in one MERGE (a delete marker per key, then inserts): versions of a key
can share a ``__START_AT`` when sequences tie, so no finer match is unique. An in-order key
replaces only its open version; a late key only its versions that end at or after its first new
event (the earlier ones depend on earlier events only). The SCD2 target is laid out so Delta's
file statistics skip the rest (:func:`_write_layout`): closed versions sorted by ``__END_AT`` in
files apart from the open versions, and the MERGE condition carries a target-only bound
(:func:`_prune`); it is laid out again once MERGEs have inserted a quarter of its rows
(:func:`_relayout_if_mixed`).

Gold is read outside Spark too (pandas and Polars read Delta through delta-rs, ``deltalake``), so
no table this module writes carries a reader feature delta-rs lacks: the targets, the key states,
the change log and the truncates are Delta reader version 1 (in a session with Delta's default
table properties). Deletion vectors (reader version 3, ``deletionVectors``, which delta-rs cannot
read) are opt-in, per SCD2 target, and off even where the session enables them by default:
``merge_scd2(..., deletion_vectors=True)`` (table config ``deletion_vectors: true``) creates the
target with ``delta.enableDeletionVectors``, so a MERGE marks replaced rows instead of rewriting
the files they are in. The choice is made when the target is created; an existing target keeps
its protocol (:mod:`sqlcdc.gold` rebuilds a target whose feature no longer matches the config).

Cost (``benchmarks/bench_apply_changes.py``, 2 cores, 100k keys, 10% of each batch late; ratio =
recompute / incremental in the same process, batches 2-3 (batch 1 pays JIT warm-up); ``--steps``
prints where an SCD2 run goes). How far back late events reach decides what SCD2 reads:

* SCD1, 1M changes, 1% batches: 3.6-3.7 s vs recompute 4.0-4.7 s (1.1-1.3x); 4M: 1.8-1.9x
  (an earlier, slower machine: 1M 7.0-7.9 s vs 8.1-9.4 s).
* SCD2, late events within the last 1% of the history (``--late-window 0.01``): 1M changes, 1%
  batches: 5.9-6.6 s vs 7.0-7.2 s (1.1-1.2x; before the layout 8.1-8.9 s, 0.7-0.8x); 4M changes,
  10k-change batches: 7.6-8.4 s vs 16.5-17.2 s (2.1-2.2x; before 14.2-15.8 s, 1.2-1.3x). The target
  MERGE fell from 6.6-9.8 s to 2.4-2.7 s there.
* SCD2, late events anywhere in the second half of the history (the default): the MERGE reads
  every closed version that ended after the earliest one, about half the target: 1M, 1%:
  9.0-9.3 s vs 6.2-6.8 s (0.7-0.8x, as before the layout); 4M, 10k batches: 12.6-12.8 s vs
  16.4-17.6 s (1.3-1.4x).
* The SCD2 figures above were measured with deletion vectors on (then the default). Without them
  (``--deletion-vectors`` toggles it), 200k changes over 20k keys, 1% batches, two runs each on a
  loaded machine: batches 2-3 took 23.8-36.1 s without (target MERGE 8.3-16.2 s) and 24.1-27.8 s
  with (MERGE 8.7-10.3 s): within the noise at that size.
* What is left per SCD2 run (4M, 10k batches): state route 1.3-1.9 s and state append about 1 s
  (both follow the number of keys), late keys' log read and replay 2.2-2.6 s (reads the whole log:
  it follows the history), MERGE 2.4 s, log append 0.3-0.5 s.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import time as _time
from contextlib import contextmanager
from typing import Iterator, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from sqlcdc.apply_changes import END_AT, START_AT, ApplyChangesSpec, _scd2, scd2
from sqlcdc.apply_order import CID as _CID
from sqlcdc.apply_order import IS_DEL as _IS_DEL
from sqlcdc.apply_order import IS_TRUNC as _IS_TRUNC
from sqlcdc.apply_order import RANK as _RANK
from sqlcdc.apply_order import SEQ as _SEQ
from sqlcdc.apply_order import classified as _classified
from sqlcdc.apply_order import col as _c
from sqlcdc.apply_order import q as _q
from sqlcdc.config import ConfigError

__all__ = ["merge_scd1", "merge_scd2", "purge_tombstones", "state_location", "changes_log_location"]


#: Set to a list to collect ``(step, seconds)`` of each SCD2 merge (``bench_apply_changes.py --steps``).
STEP_TIMES: list[tuple[str, float]] | None = None


@contextmanager
def _step(name: str) -> Iterator[None]:
    t = _time.perf_counter()
    try:
        yield
    finally:
        if STEP_TIMES is not None:
            STEP_TIMES.append((name, _time.perf_counter() - t))


def changes_log_location(target: str) -> str:
    """Where :func:`merge_scd2` keeps the applied changes of ``target`` (SCD1 keeps a key state)."""
    return target.rstrip("/") + "__changes"


def _is_path(target: str) -> bool:
    return "/" in target or target.startswith(".")


def _exists(spark: SparkSession, target: str) -> bool:
    from delta.tables import DeltaTable

    if _is_path(target):
        return DeltaTable.isDeltaTable(spark, target)
    return spark.catalog.tableExists(target)


def _read(spark: SparkSession, target: str) -> DataFrame:
    return spark.read.format("delta").load(target) if _is_path(target) else spark.read.table(target)


def _write(df: DataFrame, target: str, mode: str, **options: object) -> None:
    w = df.write.format("delta").mode(mode).options(**{k: str(v) for k, v in options.items()})
    if mode == "overwrite":
        w = w.option("overwriteSchema", "true")
    if _is_path(target):
        w.save(target)
    else:
        w.saveAsTable(target)


def _delta(spark: SparkSession, target: str):
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, target) if _is_path(target) else DeltaTable.forName(spark, target)


def _null_safe_on(keys: Sequence[str], left: str, right: str) -> Column:
    cond = None
    for k in keys:
        c = F.col(f"{left}.{_q(k)}").eqNullSafe(F.col(f"{right}.{_q(k)}"))
        cond = c if cond is None else cond & c
    return cond


#: Up to this many touched keys, the history look-up broadcasts them (no shuffle of the log).
_BROADCAST_KEYS = 2_000_000


def _touched_keys(frame: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The distinct keys of a batch, materialized; broadcast when few (the usual case), so the
    look-ups they drive do not shuffle the table they filter."""
    touched = frame.select(*[_c(k) for k in keys]).distinct().localCheckpoint(eager=True)
    return F.broadcast(touched) if touched.count() <= _BROADCAST_KEYS else touched


def _markers(keys_df: DataFrame, keys: Sequence[str], action: str = "delete", since: Column | None = None) -> DataFrame:
    """Delete markers for :func:`_replace_keys`: ``delete`` (every row of the key) or ``delete_since``
    (the key's open SCD2 version, and with ``since`` the versions that end at or after it)."""
    return keys_df.select(*[_c(k) for k in keys], F.lit(action).alias("__ac_action"),
                          *([since.alias("__ac_since")] if since is not None else []))


def _replace_keys(spark: SparkSession, target: str, markers: DataFrame, rows: DataFrame, keys: Sequence[str],
                  prune: Column | None = None) -> None:
    """Replace the marked rows of ``target`` by ``rows``, in one MERGE (see :func:`_markers`).

    A marker matches the target rows of its key (all of them, or the versions since a point), and
    the new rows (which match nothing) are inserted. No finer match would do: when sequences tie,
    SCD2 versions of a key can share a ``__START_AT`` (a zero-length version [s, s) before [s, ...)).
    ``prune``: a condition on the target alone (alias ``g``) that every marked row meets; Delta
    skips the files whose statistics rule it out (see :func:`_since_filter`).
    """
    source = markers.unionByName(rows.withColumn("__ac_action", F.lit("insert")), allowMissingColumns=True)
    cols = [f.name for f in _read(spark, target).schema.fields]
    action = F.col("s.__ac_action")
    which = action == F.lit("delete")
    if END_AT in cols:
        since = F.col("s.__ac_since") if "__ac_since" in source.columns else F.lit(None)
        which = which | ((action == F.lit("delete_since")) & _since_filter(F.col(f"g.{_q(END_AT)}"), since))
    on = _null_safe_on(keys, "g", "s") & which
    (
        _delta(spark, target).alias("g")
        .merge(source.alias("s"), on if prune is None else prune & on)
        .whenMatchedDelete()
        .whenNotMatchedInsert(condition="s.__ac_action = 'insert'", values={_q(c): f"s.{_q(c)}" for c in cols})
        .execute()
    )


# ---------------------------------------------------------------------- SCD2 target layout
def _since_filter(end_at: Column, since: Column) -> Column:
    """The SCD2 versions a batch can change: the open one (``__END_AT`` NULL) and, for a key with
    events from ``since`` on, every version that ends at or after ``since``. A version that ended
    before the key's first new event cannot change: it depends only on earlier events."""
    return end_at.isNull() | (since.isNotNull() & (end_at >= since))


def _first_leaf(col: Column, dtype: DataType) -> Column:
    """The first atomic field of ``col`` (of the sequence type ``dtype``): Delta keeps min, max and
    null counts for atomic leaves only, so file pruning on ``__END_AT`` goes through it."""
    while isinstance(dtype, StructType) and dtype.fields:
        col, dtype = col.getField(dtype.fields[0].name), dtype.fields[0].dataType
    return col


def _prune(end_type: DataType, lowest: object | None, late: bool) -> Column:
    """A target-only condition implied by the markers of a batch (see :func:`_replace_keys`):
    ``__END_AT``'s first leaf is NULL (an open version; a struct sequence compares field by field,
    so the first leaf bounds the whole), or, when the batch has late keys, at or after ``lowest``,
    the lowest first leaf of their ``since``. Open and closed versions live in separate files and
    closed ones are sorted by end (:func:`_write_layout`), so the MERGE skips the closed files
    that ended before the batch's earliest late event."""
    leaf = _first_leaf(F.col(f"g.{_q(END_AT)}"), end_type)
    return leaf.isNull() if not late else leaf.isNull() | (leaf >= F.lit(lowest))


#: A layout write puts at most this many closed versions in a file (sorted by ``__END_AT``).
_LAYOUT_FILE_ROWS = 100_000
#: The target is laid out again once the MERGEs since its last layout have inserted this share of
#: its rows (their files mix open and closed versions, so every run reads them).
_RELAYOUT_SHARE = 0.25


def _write_layout(spark: SparkSession, versions: DataFrame, target: str, *, data_change: bool = True,
                  deletion_vectors: bool = False) -> None:
    """Overwrite the SCD2 ``target`` with ``versions``: closed versions sorted by ``__END_AT`` in files
    of at most :data:`_LAYOUT_FILE_ROWS` rows, open versions in files of their own. File statistics
    then let a MERGE skip what a batch cannot change (see :func:`_prune`). A new target gets
    deletion vectors when asked (a MERGE then marks replaced rows instead of rewriting the files
    they are in, but readers need Delta reader version 3: delta-rs cannot read it); otherwise it
    is created with them off, whatever the session's defaults."""
    end = F.col(END_AT)
    leaf = _first_leaf(end, versions.schema[END_AT].dataType)
    n = int(spark.conf.get("spark.sql.shuffle.partitions"))
    closed = versions.where(end.isNotNull()).repartitionByRange(n, leaf).sortWithinPartitions(leaf)
    laid = closed.unionByName(versions.where(end.isNull()).repartition(n))
    # A new target's protocol is chosen here, by a writer option (it beats the session's defaults).
    created = {} if _exists(spark, target) else {"delta.enableDeletionVectors": str(deletion_vectors).lower()}
    _write(laid, target, "overwrite", maxRecordsPerFile=_LAYOUT_FILE_ROWS, dataChange=str(data_change).lower(),
           **created)


def _relayout_if_mixed(spark: SparkSession, target: str) -> bool:
    """Lay the SCD2 ``target`` out again (:func:`_write_layout`, ``dataChange`` false) when the rows
    its MERGEs inserted since the last layout reach :data:`_RELAYOUT_SHARE` of it, or when the last
    layout is more than 64 commits back. Reads only the Delta log (the operation metrics of the
    recent commits). True when it did."""
    inserted, laid_out = 0, None
    for h in _delta(spark, target).history(64).select("operation", "operationParameters", "operationMetrics").collect():
        metrics = h["operationMetrics"] or {}
        if h["operation"] == "MERGE":
            inserted += int(metrics.get("numTargetRowsInserted", 0))
        elif h["operation"] == "WRITE" and (h["operationParameters"] or {}).get("mode") == "Overwrite":
            laid_out = int(metrics.get("numOutputRows", 0))
            break
    if laid_out is not None and inserted < _RELAYOUT_SHARE * max(laid_out, 1):
        return False
    _write_layout(spark, _read(spark, target), target, data_change=False)
    return True


def _record_truncates(spark: SparkSession, ev: DataFrame, spec: ApplyChangesSpec, target: str) -> bool:
    """Append the sequences of the classified batch ``ev``'s truncates to ``<target>__truncates``;
    True when the batch holds one."""
    if spec.apply_as_truncates is None or not ev.where(F.col(_IS_TRUNC)).limit(1).collect():
        return False
    loc = _truncates_location(target)
    _write(ev.where(F.col(_IS_TRUNC)).select(F.col(_SEQ).alias("seq")), loc,
           "append" if _exists(spark, loc) else "overwrite")
    return True


def _merge_scd2_from_log(spark: SparkSession, target: str, changes: DataFrame, spec: ApplyChangesSpec,
                         has_trunc: bool, deletion_vectors: bool = False) -> str:
    """SCD2 of a table that has seen a truncate: append ``changes`` to the log, recompute the keys
    they touch from it (all keys when the batch holds a truncate) and replace them in ``target``.

    Returns ``"initial"`` (the log and target are created), ``"recompute"`` or ``"merge"``.
    """
    log = changes_log_location(target)
    keys = list(spec.keys)
    if not _exists(spark, log) or not _exists(spark, target):
        _write(changes, log, "overwrite")
        _write_layout(spark, scd2(_read(spark, log), spec), target, deletion_vectors=deletion_vectors)
        return "initial"
    ev = _classified(changes, spec)
    _write(changes, log, "append")
    logdf = _read(spark, log)
    if has_trunc:
        _write_layout(spark, scd2(logdf, spec), target)
        return "recompute"
    # Keys this batch touches (few: at most the batch's rows, so broadcast); their whole history
    # (plus every truncate) decides their rows.
    touched = _touched_keys(ev, keys)
    hist = logdf.alias("l").join(touched.alias("t"), _null_safe_on(keys, "l", "t"), "left_semi")
    if spec.apply_as_truncates is not None:
        hist = hist.unionByName(logdf.where(F.expr(spec.apply_as_truncates)))
    _replace_keys(spark, target, _markers(touched, keys), scd2(hist, spec), keys)
    return "merge"


# ---------------------------------------------------------------------- SCD1: per-key state
def state_location(target: str) -> str:
    """Where :func:`merge_scd1` keeps the per-key state of ``target`` (one row per key ever seen)."""
    return target.rstrip("/") + "__state"


def _truncates_location(target: str) -> str:
    return target.rstrip("/") + "__truncates"


_DEL, _LAST = "__ac_del", "__ac_last"


def _order_key() -> Column:
    """An event's place in apply order: (sequence, rank, change id); total, arrival-independent."""
    return F.struct(F.col(_SEQ).alias("s"), F.col(_RANK).alias("r"), F.col(_CID).alias("c"))


def _partial_state(ev: DataFrame, spec: ApplyChangesSpec, values: Sequence[str]) -> DataFrame:
    """One state row per (non-truncate) event of the classified frame ``ev``; see :func:`_fold`.

    A value column becomes ``struct(o, v)``: the event's order key and value when the event sets
    the column (an upsert providing it; a non-NULL one where the spec ignores NULLs), else NULL.
    ``__ac_del`` is the order key of a delete; ``__ac_last`` the event's order key, whether it
    leaves the key alive, and its commit time (for tombstone retention).
    """
    o = _order_key()
    upsert = ~F.col(_IS_DEL)
    prov = _c(spec.provided_column) if spec.provided_column else F.lit(None).cast("array<string>")
    commit = _c(spec.commit_time_column) if spec.commit_time_column else F.lit(None).cast("timestamp")
    cols = [_c(k) for k in spec.keys]
    for c in values:
        sets = upsert & (prov.isNull() | F.array_contains(prov, F.lit(c)))
        if spec.ignores_null(c):
            sets = sets & _c(c).isNotNull()
        cols.append(F.when(sets, F.struct(o.alias("o"), _c(c).alias("v"))).alias(c))
    cols.append(F.when(F.col(_IS_DEL), o).alias(_DEL))
    cols.append(F.struct(o.alias("o"), upsert.alias("alive"), commit.alias("t")).alias(_LAST))
    return ev.where(~F.col(_IS_TRUNC)).select(*cols)


def _fold(rows: DataFrame, spec: ApplyChangesSpec, values: Sequence[str], extra: Sequence[str] = ()) -> DataFrame:
    """Fold state rows per key: each field keeps its latest entry in apply order.

    Every field is a max by order key, so folding is associative, commutative and idempotent: a
    key's state is the same whatever the order, split or duplication of its events. ``extra``
    fields (SCD2's ``__ac_open``) fold by plain max; rows that lack them count as NULL.
    """
    cols = set(rows.columns)
    aggs = [F.max_by(_c(c), _c(c)["o"]).alias(c) for c in values]
    aggs += [F.max(F.col(_DEL)).alias(_DEL), F.max_by(F.col(_LAST), F.col(_LAST)["o"]).alias(_LAST)]
    aggs += [F.max(_c(c)).alias(c) for c in extra if c in cols]
    return rows.groupBy(*[_c(k) for k in spec.keys]).agg(*aggs)


#: The SCD1 state is folded into one row per key again once it has this many files.
_STATE_MAX_FILES = 16


def _compact_state(spark: SparkSession, loc: str, spec: ApplyChangesSpec, values: Sequence[str], files: int,
                   extra: Sequence[str] = ()) -> None:
    """Rewrite the append-only state as one row per key when it has grown to many files.

    ``files``: how many it had when this run read it (one more was appended since). Counted on
    the snapshot already read: asking Delta again after the append costs a log replay (~1 s).
    """
    if files + 1 > _STATE_MAX_FILES:
        _write(_fold(_read(spark, loc), spec, values, extra).localCheckpoint(eager=True), loc, "overwrite")


def _current_rows(state: DataFrame, spec: ApplyChangesSpec, values: Sequence[str], truncated: Column,
                  keep: Sequence[str] = ()) -> DataFrame:
    """The SCD1 rows of the live keys of ``state``; ``truncated``: sequence of the latest truncate.

    A key is live when its last event is an upsert sequenced at or after the latest truncate. A
    column shows the value of its latest setting upsert if that came after the key's last delete
    and not before the latest truncate; else NULL (the key was re-created without it).
    """
    def after_truncate(o: Column) -> Column:
        return truncated.isNull() | (o["s"] >= truncated)

    live = F.col(_LAST)["alive"] & after_truncate(F.col(_LAST)["o"])
    out = [_c(k) for k in spec.keys]
    for c in values:
        o = _c(c)["o"]
        valid = (F.col(_DEL).isNull() | (o > F.col(_DEL))) & after_truncate(o)
        out.append(F.when(valid, _c(c)["v"]).alias(c))
    return state.where(live).select(*out, *[_c(c) for c in keep])


def _merge_scd1(spark: SparkSession, target: str, changes: DataFrame, spec: ApplyChangesSpec) -> str:
    """SCD1 from a per-key state instead of the change log: cost ~ batch + the state rows it touches."""
    spec.validate(changes.schema)
    keys = list(spec.keys)
    values = [c for c in spec.output_columns(changes.schema) if c not in keys]
    ev = _classified(changes, spec)
    state_loc, trunc_loc = state_location(target), _truncates_location(target)
    has_trunc = _record_truncates(spark, ev, spec, target)
    if spec.apply_as_truncates is not None and (has_trunc or _exists(spark, trunc_loc)):
        latest = F.broadcast(_read(spark, trunc_loc).agg(F.max("seq").alias("__ac_truncated")))
        truncated = F.col("__ac_truncated")

        def rows_of(state: DataFrame) -> DataFrame:
            return _current_rows(state.crossJoin(latest), spec, values, truncated)
    else:
        def rows_of(state: DataFrame) -> DataFrame:
            return _current_rows(state, spec, values, F.lit(None))
    batch = _partial_state(ev, spec, values)
    initial = not _exists(spark, state_loc) or not _exists(spark, target)
    if initial or has_trunc:
        # Every key may change (first run, or a truncate): fold the whole state, rewrite both.
        rows = batch if initial else _read(spark, state_loc).unionByName(batch)
        state = _fold(rows, spec, values).localCheckpoint(eager=True)
        _write(state, state_loc, "overwrite")
        _write(rows_of(state), target, "overwrite")
        return "initial" if initial else "recompute"
    touched = _touched_keys(batch, keys)
    state_df = _read(spark, state_loc)
    before = state_df.alias("s").join(touched.alias("t"), _null_safe_on(keys, "s", "t"), "left_semi")
    state = _fold(before.unionByName(batch), spec, values).localCheckpoint(eager=True)
    files = len(state_df.inputFiles())
    # Folding is idempotent, so the state is append-only: the touched keys' new rows go on top
    # (one small file) instead of a MERGE that would rewrite every state file; reads fold them.
    _write(state.coalesce(1), state_loc, "append")
    _compact_state(spark, state_loc, spec, values, files)
    _replace_keys(spark, target, _markers(touched, keys), rows_of(state), keys)
    return "merge"


# ---------------------------------------------------------------------- SCD2: state + change log
#: SCD2 state: ``struct(g, s)``, the ``__START_AT`` ``s`` of the key's open version (NULL: the key is
#: deleted) as of the ``g``-th state row written for the key. The rest of the state folds by apply
#: order; this field cannot (a late event can move an open version's start either way), so the
#: row written last, the highest ``g``, wins.
_OPEN = "__ac_open"


def _open_struct(gen: Column, start: Column) -> Column:
    return F.struct(gen.cast("long").alias("g"), start.alias("s"))


def _scd2_state_rows(folded: DataFrame, versions: DataFrame, keys: Sequence[str], gen: Column) -> DataFrame:
    """New SCD2 state rows: the folded key state with ``__ac_open`` = (``gen``, the ``__START_AT``
    of the key's open version in ``versions``)."""
    opens = versions.where(F.col(END_AT).isNull()).select(*[_c(k) for k in keys], F.col(START_AT).alias("__ac_s"))
    return folded.alias("f").join(opens.alias("o"), _null_safe_on(keys, "f", "o"), "left").select(
        "f.*", _open_struct(gen, F.col("o.__ac_s")).alias(_OPEN)
    ).drop("__ac_prev_gen")


def _merge_scd2(spark: SparkSession, target: str, changes: DataFrame, spec: ApplyChangesSpec,
                deletion_vectors: bool = False) -> str:
    """SCD2: keys whose new events all follow what was applied replay them from their state; only
    keys with a late event re-read their history from the change log."""
    spec.validate(changes.schema)
    schema = changes.schema
    keys = list(spec.keys)
    values = [c for c in spec.output_columns(schema) if c not in keys]
    log, state_loc, trunc_loc = changes_log_location(target), state_location(target), _truncates_location(target)
    changes = changes.select(*[_c(f.name) for f in schema.fields])
    ev = _classified(changes, spec)
    with _step("truncates"):
        has_trunc = _record_truncates(spark, ev, spec, target)
        if has_trunc or _exists(spark, trunc_loc):
            # A truncate cuts every key's history; from then on the log decides (truncates are rare).
            return _merge_scd2_from_log(spark, target, changes, spec, has_trunc, deletion_vectors)
    if not (_exists(spark, log) and _exists(spark, target) and _exists(spark, state_loc)):
        _write(changes, log, "overwrite")
        logdf = _read(spark, log)
        _write_layout(spark, scd2(logdf, spec), target, deletion_vectors=deletion_vectors)
        folded = _fold(_partial_state(_classified(logdf, spec), spec, values), spec, values)
        _write(_scd2_state_rows(folded, _read(spark, target), keys, F.lit(1)), state_loc, "overwrite")
        return "initial"
    with _step("log append"):
        _write(changes, log, "append")
    batch = _partial_state(ev, spec, values)
    with _step("route"):
        firsts = batch.groupBy(*[_c(k) for k in keys]).agg(F.min(F.col(_LAST)["o"]).alias("__ac_first"))
        # The touched keys' state, folded: the state is append-only (see _compact_state).
        state_df = _read(spark, state_loc)
        rows_before = state_df.alias("s").join(
            F.broadcast(firsts).alias("b"), _null_safe_on(keys, "s", "b"), "left_semi")
        folded_before = _fold(rows_before, spec, values, extra=(_OPEN,))
        # A key is late when one of its new events sorts at or before the last event applied to it
        # (at: a batch delivered again, maybe after a run that wrote the state but not the target).
        last = F.col(f"s.{_LAST}")["o"]
        route = (
            firsts.alias("b").join(folded_before.alias("s"), _null_safe_on(keys, "b", "s"), "left")
            .select(*[F.col(f"b.{_q(k)}").alias(k) for k in keys],
                    *[F.col(f"s.{_q(c)}").alias(c) for c in values],
                    F.col(f"s.{_DEL}").alias(_DEL), F.col(f"s.{_LAST}").alias(_LAST), F.col(f"s.{_OPEN}").alias(_OPEN),
                    (last.isNotNull() & (F.col("b.__ac_first") <= last)).alias("__ac_late"),
                    F.col("b.__ac_first")["s"].alias("__ac_since"))
            .localCheckpoint(eager=True)
        )
        before = route.where(F.col(_LAST).isNotNull()).drop("__ac_late", "__ac_since")
        late = route.where(F.col("__ac_late")).select(*[_c(k) for k in keys], F.col("__ac_since"))
        in_order = route.where(~F.col("__ac_late")).select(*[_c(k) for k in keys])
        # The earliest point a late key re-cuts from (first leaf of the sequence): the MERGE need
        # not read closed versions that ended before it (see _prune).
        end_type = late.schema["__ac_since"].dataType
        since_leaf = _first_leaf(F.col("__ac_since"), end_type)
        n_late, lowest, unbounded = late.agg(F.count(F.lit(1)), F.min(since_leaf),
                                             F.count_if(since_leaf.isNull())).first()
        has_late = n_late > 0
        files = len(state_df.inputFiles())
    with _step("rows"):
        # In-order keys: their open version, as an upsert at its __START_AT, then the new events.
        resumed = route.where(~F.col("__ac_late") & F.col(_OPEN)["s"].isNotNull())
        opened = _current_rows(resumed, spec, values, F.lit(None), keep=[_OPEN])
        synthetic = opened.select(
            *[_c(k) for k in keys], *[_c(c) for c in values],
            *([F.lit(None).cast("array<string>").alias(spec.provided_column)] if spec.provided_column else []),
            F.lit(False).alias(_IS_TRUNC), F.lit(False).alias(_IS_DEL), F.col(_OPEN)["s"].alias(_SEQ),
            F.lit(1).alias(_RANK), F.lit("").alias(_CID),
        )
        replay = ev.alias("e").join(F.broadcast(in_order).alias("k"), _null_safe_on(keys, "e", "k"), "left_semi")
        # No truncate was ever applied here (else the log path runs): skip the truncate look-ups.
        untruncated = dataclasses.replace(spec, apply_as_truncates=None)
        rows = _scd2(synthetic.unionByName(replay, allowMissingColumns=True), untruncated, schema, classified=True)
        markers = _markers(in_order, keys, "delete_since")
        if has_late:
            # A late key's versions from its first new event on are cut again from its history;
            # the versions that ended before stay as they are.
            hist = _read(spark, log).alias("l").join(F.broadcast(late).alias("t"), _null_safe_on(keys, "l", "t"),
                                                      "left_semi")
            recut = scd2(hist, untruncated).alias("v").join(F.broadcast(late).alias("t"),
                                                            _null_safe_on(keys, "v", "t"))
            recut = recut.where(_since_filter(F.col(f"v.{_q(END_AT)}"), F.col("t.__ac_since"))).select("v.*")
            rows = rows.unionByName(recut)
            markers = markers.unionByName(_markers(late, keys, "delete_since", F.col("__ac_since")),
                                          allowMissingColumns=True)
        rows = rows.localCheckpoint(eager=True)
    with _step("state append"):
        gens = before.select(*[_c(k) for k in keys], F.col(_OPEN)["g"].alias("__ac_prev_gen"))
        folded = _fold(before.drop(_OPEN).unionByName(batch), spec, values)
        folded = folded.alias("n").join(gens.alias("p"), _null_safe_on(keys, "n", "p"), "left").select(
            "n.*", F.col("p.__ac_prev_gen"))
        state = _scd2_state_rows(folded, rows, keys, F.coalesce(F.col("__ac_prev_gen"), F.lit(0)) + 1)
        # Written before the target: a run that stops in between leaves keys whose state is ahead
        # of the target, and delivering the batch again routes them all as late (re-read from the log).
        _write(state.coalesce(1), state_loc, "append")
        _compact_state(spark, state_loc, spec, values, files, extra=(_OPEN,))
    with _step("target merge"):
        prune = None if unbounded else _prune(end_type, lowest, has_late)
        _replace_keys(spark, target, markers, rows, keys, prune)
    with _step("relayout"):
        _relayout_if_mixed(spark, target)
    return "merge"


def purge_tombstones(spark: SparkSession, target: str, spec: ApplyChangesSpec, older_than: _dt.timedelta) -> int:
    """Forget deleted keys whose delete committed more than ``older_than`` ago (SCD1 targets).

    Their state rows leave ``state_location(target)``, so a later event for such a key is applied
    as if the key had never existed: a late event older than the forgotten delete *can* then
    resurrect the row. This is the retention trade-off of Databricks'
    ``pipelines.cdc.tombstoneGCThresholdInSeconds``. Returns the number of keys forgotten. SCD2
    keeps its change log: there it is the only record that lets a late event re-cut a key's history.
    """
    if spec.commit_time_column is None:
        raise ConfigError([f"{spec.table}: commit_time_column: tombstone retention needs a commit time column"])
    loc = state_location(target)
    if not _exists(spark, loc):
        return 0
    keys = set(spec.keys)
    values = [f.name for f in _read(spark, loc).schema.fields
              if f.name not in keys and f.name not in (_DEL, _LAST, _OPEN)]
    state = _fold(_read(spark, loc), spec, values).localCheckpoint(eager=True)
    cutoff = F.current_timestamp() - F.make_dt_interval(secs=F.lit(older_than.total_seconds()))
    dead = ~F.col(_LAST)["alive"] & (F.col(_LAST)["t"] < cutoff)
    forgotten = state.where(dead).count()
    if forgotten:
        _write(state.where(~dead), loc, "overwrite")
    return forgotten


def merge_scd1(spark: SparkSession, target: str, changes: DataFrame, spec: ApplyChangesSpec, *,
               tombstone_retention: _dt.timedelta | None = None) -> str:
    """Apply a batch of new changes to the SCD1 Delta table ``target`` (name or path).

    Beside the target, a per-key state (``state_location(target)``) keeps, for every key ever seen,
    each column's latest setting upsert, the key's last delete and its last event, each with its
    place in apply order. A batch folds into the state rows of the keys it touches (a max per
    field, so order, splits and duplicates do not matter) and those keys' rows are replaced in the
    target: the cost follows the batch and the touched keys, not the history. The delete order
    keys are the tombstones: a late event older than a delete does not resurrect the row.
    The result equals :func:`scd1` over every change applied so far, in any order and split.

    Example::

        merge_scd1(spark, "warehouse/gold/customers", batch, spec)    # -> "initial" | "merge" | "recompute"
    """
    mode = _merge_scd1(spark, target, changes, spec)
    if tombstone_retention is not None:
        purge_tombstones(spark, target, spec, tombstone_retention)
    return mode


def merge_scd2(spark: SparkSession, target: str, changes: DataFrame, spec: ApplyChangesSpec, *,
               deletion_vectors: bool = False) -> str:
    """Apply a batch of new changes to the SCD2 Delta table ``target`` (name or path).

    A key whose new events all follow the last event applied to it replays them from its state
    (``state_location(target)``; its open version re-enters as an upsert at its ``__START_AT``)
    and only its open version is replaced. A key with a late event re-reads its history from the
    change log (``changes_log_location(target)``), since a late event can re-cut versions already
    written, and all its versions are replaced. The result equals :func:`scd2` over every change
    applied so far, in any order and split.

    ``deletion_vectors``: create the target with deletion vectors (MERGEs mark replaced rows
    instead of rewriting files; readers need Delta reader version 3, which delta-rs, the reader of
    pandas and Polars, lacks). Off by default; it decides only when the target is created.

    Example::

        merge_scd2(spark, "warehouse/gold/customers_history", batch, spec)   # "initial" | "merge" | "recompute"
    """
    return _merge_scd2(spark, target, changes, spec, deletion_vectors)
