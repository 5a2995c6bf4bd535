"""Gold, incrementally: apply a batch of changes to SCD1/SCD2 Delta tables with MERGE.

The semantics are :mod:`sqlcdc.gold.spec`'s (the :func:`~sqlcdc.gold.recompute.scd1` /
:func:`~sqlcdc.gold.recompute.scd2` recompute is the reference path); this module only makes a run
cost what the batch touches::

    from sqlcdc.gold import merge_scd1, merge_scd2
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
file statistics skip the rest (:func:`~sqlcdc.gold.delta_io.write_layout`): closed versions sorted by ``__END_AT`` in
files apart from the open versions, and the MERGE condition carries a target-only bound
(:func:`~sqlcdc.gold.delta_io.prune`); it is laid out again once MERGEs have inserted a quarter of its rows
and at least a layout file's worth (:func:`~sqlcdc.gold.delta_io.relayout_if_mixed`; a small table is not
rewritten every run).

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

from sqlcdc.gold.recompute import _scd2, scd2
from sqlcdc.gold.spec import END_AT, START_AT, ApplyChangesSpec
from sqlcdc.gold.order import CID as _CID
from sqlcdc.gold.order import IS_DEL as _IS_DEL
from sqlcdc.gold.order import IS_TRUNC as _IS_TRUNC
from sqlcdc.gold.order import RANK as _RANK
from sqlcdc.gold.order import SEQ as _SEQ
from sqlcdc.gold.order import classified as _classified
from sqlcdc.gold.order import col as _c
from sqlcdc.gold.order import q as _q
from sqlcdc.config import ConfigError
from sqlcdc.gold import delta_io as dio

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


def _record_truncates(spark: SparkSession, ev: DataFrame, spec: ApplyChangesSpec, target: str) -> bool:
    """Append the sequences of the classified batch ``ev``'s truncates to ``<target>__truncates``;
    True when the batch holds one."""
    if spec.apply_as_truncates is None or not ev.where(F.col(_IS_TRUNC)).limit(1).collect():
        return False
    loc = _truncates_location(target)
    dio.write(ev.where(F.col(_IS_TRUNC)).select(F.col(_SEQ).alias("seq")), loc,
           "append" if dio.exists(spark, loc) else "overwrite")
    return True


def _merge_scd2_from_log(spark: SparkSession, target: str, changes: DataFrame, spec: ApplyChangesSpec,
                         has_trunc: bool, deletion_vectors: bool = False) -> str:
    """SCD2 of a table that has seen a truncate: append ``changes`` to the log, recompute the keys
    they touch from it (all keys when the batch holds a truncate) and replace them in ``target``.

    Returns ``"initial"`` (the log and target are created), ``"recompute"`` or ``"merge"``.
    """
    log = changes_log_location(target)
    keys = list(spec.keys)
    if not dio.exists(spark, log) or not dio.exists(spark, target):
        dio.write(changes, log, "overwrite")
        dio.write_layout(spark, scd2(dio.read(spark, log), spec), target, deletion_vectors=deletion_vectors)
        return "initial"
    ev = _classified(changes, spec)
    dio.write(changes, log, "append")
    logdf = dio.read(spark, log)
    if has_trunc:
        dio.write_layout(spark, scd2(logdf, spec), target)
        return "recompute"
    # Keys this batch touches (few: at most the batch's rows, so broadcast); their whole history
    # (plus every truncate) decides their rows.
    touched = dio.touched_keys(ev, keys)
    hist = logdf.alias("l").join(touched.alias("t"), dio.null_safe_on(keys, "l", "t"), "left_semi")
    if spec.apply_as_truncates is not None:
        hist = hist.unionByName(logdf.where(F.expr(spec.apply_as_truncates)))
    dio.replace_keys(spark, target, dio.markers(touched, keys), scd2(hist, spec), keys)
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
        dio.write(_fold(dio.read(spark, loc), spec, values, extra).localCheckpoint(eager=True), loc, "overwrite")


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
    if spec.apply_as_truncates is not None and (has_trunc or dio.exists(spark, trunc_loc)):
        latest = F.broadcast(dio.read(spark, trunc_loc).agg(F.max("seq").alias("__ac_truncated")))
        truncated = F.col("__ac_truncated")

        def rows_of(state: DataFrame) -> DataFrame:
            return _current_rows(state.crossJoin(latest), spec, values, truncated)
    else:
        def rows_of(state: DataFrame) -> DataFrame:
            return _current_rows(state, spec, values, F.lit(None))
    batch = _partial_state(ev, spec, values)
    initial = not dio.exists(spark, state_loc) or not dio.exists(spark, target)
    if initial or has_trunc:
        # Every key may change (first run, or a truncate): fold the whole state, rewrite both.
        rows = batch if initial else dio.read(spark, state_loc).unionByName(batch)
        state = _fold(rows, spec, values).localCheckpoint(eager=True)
        dio.write(state, state_loc, "overwrite")
        dio.write(rows_of(state), target, "overwrite")
        return "initial" if initial else "recompute"
    touched = dio.touched_keys(batch, keys)
    state_df = dio.read(spark, state_loc)
    before = state_df.alias("s").join(touched.alias("t"), dio.null_safe_on(keys, "s", "t"), "left_semi")
    state = _fold(before.unionByName(batch), spec, values).localCheckpoint(eager=True)
    files = len(state_df.inputFiles())
    # Folding is idempotent, so the state is append-only: the touched keys' new rows go on top
    # (one small file) instead of a MERGE that would rewrite every state file; reads fold them.
    dio.write(state.coalesce(1), state_loc, "append")
    _compact_state(spark, state_loc, spec, values, files)
    dio.replace_keys(spark, target, dio.markers(touched, keys), rows_of(state), keys)
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
    return folded.alias("f").join(opens.alias("o"), dio.null_safe_on(keys, "f", "o"), "left").select(
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
        if has_trunc or dio.exists(spark, trunc_loc):
            # A truncate cuts every key's history; from then on the log decides (truncates are rare).
            return _merge_scd2_from_log(spark, target, changes, spec, has_trunc, deletion_vectors)
    if not (dio.exists(spark, log) and dio.exists(spark, target) and dio.exists(spark, state_loc)):
        dio.write(changes, log, "overwrite")
        logdf = dio.read(spark, log)
        dio.write_layout(spark, scd2(logdf, spec), target, deletion_vectors=deletion_vectors)
        folded = _fold(_partial_state(_classified(logdf, spec), spec, values), spec, values)
        dio.write(_scd2_state_rows(folded, dio.read(spark, target), keys, F.lit(1)), state_loc, "overwrite")
        return "initial"
    with _step("log append"):
        dio.write(changes, log, "append")
    batch = _partial_state(ev, spec, values)
    with _step("route"):
        firsts = batch.groupBy(*[_c(k) for k in keys]).agg(F.min(F.col(_LAST)["o"]).alias("__ac_first"))
        # The touched keys' state, folded: the state is append-only (see _compact_state).
        state_df = dio.read(spark, state_loc)
        rows_before = state_df.alias("s").join(
            F.broadcast(firsts).alias("b"), dio.null_safe_on(keys, "s", "b"), "left_semi")
        folded_before = _fold(rows_before, spec, values, extra=(_OPEN,))
        # A key is late when one of its new events sorts at or before the last event applied to it
        # (at: a batch delivered again, maybe after a run that wrote the state but not the target).
        last = F.col(f"s.{_LAST}")["o"]
        route = (
            firsts.alias("b").join(folded_before.alias("s"), dio.null_safe_on(keys, "b", "s"), "left")
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
        # not read closed versions that ended before it (see dio.prune).
        end_type = late.schema["__ac_since"].dataType
        since_leaf = dio.first_leaf(F.col("__ac_since"), end_type)
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
        replay = ev.alias("e").join(F.broadcast(in_order).alias("k"), dio.null_safe_on(keys, "e", "k"), "left_semi")
        # No truncate was ever applied here (else the log path runs): skip the truncate look-ups.
        untruncated = dataclasses.replace(spec, apply_as_truncates=None)
        rows = _scd2(synthetic.unionByName(replay, allowMissingColumns=True), untruncated, schema, classified=True)
        markers = dio.markers(in_order, keys, "delete_since")
        if has_late:
            # A late key's versions from its first new event on are cut again from its history;
            # the versions that ended before stay as they are.
            hist = dio.read(spark, log).alias("l").join(F.broadcast(late).alias("t"), dio.null_safe_on(keys, "l", "t"),
                                                      "left_semi")
            recut = scd2(hist, untruncated).alias("v").join(F.broadcast(late).alias("t"),
                                                            dio.null_safe_on(keys, "v", "t"))
            recut = recut.where(dio.since_filter(F.col(f"v.{_q(END_AT)}"), F.col("t.__ac_since"))).select("v.*")
            rows = rows.unionByName(recut)
            markers = markers.unionByName(dio.markers(late, keys, "delete_since", F.col("__ac_since")),
                                          allowMissingColumns=True)
        rows = rows.localCheckpoint(eager=True)
    with _step("state append"):
        gens = before.select(*[_c(k) for k in keys], F.col(_OPEN)["g"].alias("__ac_prev_gen"))
        folded = _fold(before.drop(_OPEN).unionByName(batch), spec, values)
        folded = folded.alias("n").join(gens.alias("p"), dio.null_safe_on(keys, "n", "p"), "left").select(
            "n.*", F.col("p.__ac_prev_gen"))
        state = _scd2_state_rows(folded, rows, keys, F.coalesce(F.col("__ac_prev_gen"), F.lit(0)) + 1)
        # Written before the target: a run that stops in between leaves keys whose state is ahead
        # of the target, and delivering the batch again routes them all as late (re-read from the log).
        dio.write(state.coalesce(1), state_loc, "append")
        _compact_state(spark, state_loc, spec, values, files, extra=(_OPEN,))
    with _step("target merge"):
        prune = None if unbounded else dio.prune(end_type, lowest, has_late)
        dio.replace_keys(spark, target, markers, rows, keys, prune)
    with _step("relayout"):
        dio.relayout_if_mixed(spark, target)
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
    if not dio.exists(spark, loc):
        return 0
    keys = set(spec.keys)
    values = [f.name for f in dio.read(spark, loc).schema.fields
              if f.name not in keys and f.name not in (_DEL, _LAST, _OPEN)]
    state = _fold(dio.read(spark, loc), spec, values).localCheckpoint(eager=True)
    cutoff = F.current_timestamp() - F.make_dt_interval(secs=F.lit(older_than.total_seconds()))
    dead = ~F.col(_LAST)["alive"] & (F.col(_LAST)["t"] < cutoff)
    forgotten = state.where(dead).count()
    if forgotten:
        dio.write(state.where(~dead), loc, "overwrite")
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
