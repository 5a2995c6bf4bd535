"""Local gold: after a pipeline run, apply each table's new silver changes incrementally.

OSS Spark Declarative Pipelines have no AUTO CDC for Delta targets (nor SCD2), so locally
``sqlcdc run`` builds gold itself once ``spark-pipelines run`` has written silver: every onboarded
table's *new* changes go through :mod:`sqlcdc.gold.incremental` (``merge_scd1`` / ``merge_scd2``), so a
run costs what landed since the last one, not the whole history. On Databricks the same config
becomes ``dp.create_auto_cdc_flow`` inside the pipeline instead, or a recomputed view where silver
is not a streaming table (:mod:`sqlcdc.gold.graph`).

Which changes are new depends on how the producer's silver is kept:

* **streaming silver** (Debezium: append-only): a Delta stream over the silver
  table with a checkpoint, run with ``availableNow``; each micro-batch is merged into every gold
  table of the table. A batch interrupted half-way is delivered again, and merging is idempotent.
* **recomputed silver** (CES, Qlik, change tables: a materialized view rebuilt from bronze every
  run, because they reassemble or pair records across files): the changes whose ``change_id`` gold
  has not applied yet (a small Delta table of applied ids).
* **a producer hand-off** (``sources:``, :mod:`sqlcdc.gold.handoff`): the silvers of all its
  sources, each change once by its identity across producers; applied identities as above.

A table's gold is rebuilt from all of its silver, saying why, on ``--full-refresh``, when one of
its parts is missing, when its columns changed (a Qlik ``tableVersion``, CES columns, ``columns:``
edited), when its SCD2 table's deletion vectors do not match ``deletion_vectors`` (a Delta table
cannot drop them in place), or when streaming silver was re-created. A table whose silver has no
new commit since its last apply (nor its config, sqlcdc's code, or, under whole-transaction apply,
its bronze), with nothing waiting for its transaction, is not read at all
(:mod:`sqlcdc.gold.last_apply`). Run state lives under
``<warehouse>/_sqlcdc/gold/<table>/``; the engine's per-key state beside each target
(``gold_<t>_scd1__state`` ...).

Example::

    from sqlcdc import gold
    from sqlcdc.runtime import local_spark
    spark = local_spark(warehouse="warehouse")
    for applied in gold.apply_all(spark, cfg, Path("warehouse")):
        print(applied)        # customers: 2 new changes -> gold_customers_scd1 (merge), ...
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sqlcdc import checkpoints, formats, lsn, model, reshape
from sqlcdc.gold import handoff, incremental, last_apply, transactions
from sqlcdc.gold.spec import END_AT, START_AT, ApplyChangesSpec
from sqlcdc.gold.spec import target as gold_table
from sqlcdc.config import PipelineConfig, TableConfig, Transactions
from sqlcdc.names import literal, quote

__all__ = ["Applied", "apply_all", "apply_table", "default_workers", "gold_parts", "GOLD_CONF", "AFTER_RUN"]

_SHARED = threading.RLock()
"""Tables are applied at once (:func:`apply_all`): held while one writes what all share -- an
append to ``dq_transactions`` (two first appends would both create it), a metastore statement."""

GOLD_CONF, AFTER_RUN = "sqlcdc.gold", "after_run"
"""Spark conf set by ``sqlcdc run`` in the pipeline's configuration: gold is applied after the
run by this module, so the pipeline only checks gold's options. Unset (``spark-pipelines run``
by hand), the pipeline builds gold as materialized views recomputed from silver."""


@dataclass
class Applied:
    """What one ``apply_table`` did: new changes read, per target the engine's mode, why rebuilt."""

    table: str
    changes: int = 0
    modes: dict[str, str] = field(default_factory=dict)
    rebuilt: str | None = None
    seconds: float = 0.0
    skipped: str | None = None
    forgotten: int = 0
    """Deleted keys whose tombstone passed ``tombstone_retention_days`` this run (SCD1)."""
    waiting: str = ""
    """Changes held by whole-transaction apply (:mod:`sqlcdc.gold.transactions`), said in words."""
    held: transactions.Waiting | None = None
    """Their counts, zeros when nothing waits (None: the table's changes are not held --
    whole-transaction apply is off, the producer marks no transaction end, or a hand-off); also a
    row of ``dq_transactions``."""
    unchanged: bool = False
    """Silver (and what else the apply reads) unchanged since the last apply: nothing was read
    (:mod:`sqlcdc.gold.last_apply`)."""

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.table}: {self.skipped}"
        if self.unchanged:
            return f"{self.table}: silver unchanged since the last apply -> nothing to do in {self.seconds:.1f}s"
        targets = ", ".join(f"{t} ({m})" for t, m in self.modes.items()) or "nothing to do"
        why = f" [rebuilt: {self.rebuilt}]" if self.rebuilt else ""
        gone = f"; {self.forgotten} tombstones past retention forgotten" if self.forgotten else ""
        return f"{self.table}: {self.changes} new changes -> {targets} in {self.seconds:.1f}s{gone}{self.waiting}{why}"


def tables_dir(warehouse: Path) -> Path:
    return warehouse / "tables"


def run_state_dir(warehouse: Path, table: TableConfig) -> Path:
    """Where gold keeps what it has read of ``table``'s silver (stream checkpoint, applied ids)."""
    return warehouse / "_sqlcdc" / "gold" / table.name


def gold_parts(warehouse: Path, table: TableConfig) -> list[Path]:
    """Every folder that makes up ``table``'s gold: its targets, the engine's side tables beside
    them (``<target>__*``: key state, change log, ...) and the run state."""
    parts: list[Path] = []
    for scd in table.scd_types:
        target = tables_dir(warehouse) / gold_table(table, scd)
        parts += [target, *sorted(target.parent.glob(glob.escape(target.name) + "__*"))]
    return parts + [run_state_dir(warehouse, table)]


def _is_delta(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def apply_all(spark: SparkSession, cfg: PipelineConfig, warehouse: Path, *, full_refresh: bool = False,
              echo: Callable[[str], None] | None = None, run_time: dt.datetime | None = None,
              workers: int | None = None) -> list[Applied]:
    """Apply every table's new silver changes to its gold tables; ``echo`` gets a line per table, in
    config order; ``run_time``: the run's start (default now), for ``dq_transactions``.

    Tables are independent (their own targets, engine state and run state), so up to ``workers``
    of them (default :func:`default_workers`) are applied at once on the one session: a small
    table's apply is mostly driver-side planning and Delta commits, one core each, so on 2 cores
    two tables take about the time of one and a half. After an error, tables not started yet are
    not applied (those already running finish) and the error is raised."""
    groups = list(handoff.groups(cfg.tables))
    failed = threading.Event()

    def apply(group: tuple[TableConfig, list[TableConfig]]) -> Applied | None:
        if failed.is_set():
            return None  # a table before it failed: not started (the error is raised below)
        table, parts = group
        try:
            return apply_table(spark, table, warehouse, full_refresh=full_refresh, parts=parts,
                               policy=cfg.transactions, run_time=run_time)
        except BaseException:
            failed.set()
            raise

    out: list[Applied] = []
    with ThreadPoolExecutor(max_workers=min(workers or default_workers(), max(1, len(groups))),
                            thread_name_prefix="sqlcdc-gold") as pool:
        # Started in config order, so a table skipped after a failure comes after the failed one,
        # whose result() raises first.
        for future in [pool.submit(apply, group) for group in groups]:
            applied = future.result()
            assert applied is not None
            if echo:
                echo(str(applied))
            out.append(applied)
    return out


def default_workers() -> int:
    """Tables applied at once by :func:`apply_all`: the machine's cores, at most 4 (each apply also
    holds its micro-batch and engine state in the driver)."""
    return max(1, min(4, os.cpu_count() or 1))


def _silver_shape(silver_schema: StructType, table: TableConfig) -> tuple[list[str], list[str]]:
    """(columns, keys) of ``table`` as its silver has them: the ``after`` struct's fields; keys from
    config, else the ``key`` struct silver carries (Qlik's ``primaryKeyPosition`` and the like)."""
    columns = list(silver_schema["after"].dataType.fieldNames())
    keys = list(table.keys) if table.keys else list(silver_schema["key"].dataType.fieldNames())
    return columns, keys


def changes_of(silver: DataFrame, columns: list[str], keys: list[str]) -> DataFrame:
    """Silver rows -> the apply frame (:func:`sqlcdc.model.apply_frame`).

    The sequence is rebuilt with :func:`sqlcdc.lsn.sequence`: an identity for silver rows (a
    decoder builds it that way and the ``sequence_not_null`` rule quarantines the rest), which
    gives the frame the NOT NULL sequence the engine insists on (Delta reads it back as nullable).
    """
    seq = F.col("sequence")
    silver = silver.withColumn("sequence", lsn.sequence(seq["commit_lsn"], seq["change_lsn"], seq["serial"]))
    return model.apply_frame(silver, columns, keys)


def _specs(table: TableConfig, keys: list[str]) -> dict[int, ApplyChangesSpec]:
    return {scd: ApplyChangesSpec.from_table_config(table, scd, keys=keys) for scd in table.scd_types}


def _rebuild_reason(spark: SparkSession, table: TableConfig, warehouse: Path, silver: Path, streaming: bool,
                    wanted: dict[str, list[tuple[str, str]]], full_refresh: bool) -> str | None:
    """Why ``table``'s gold must be rebuilt from all of silver (None: apply only what is new)."""
    if full_refresh:
        return "full refresh"
    state = run_state_dir(warehouse, table)
    targets = [tables_dir(warehouse) / name for name in wanted]
    if not any(_is_delta(t) for t in targets) and not state.exists():
        return None  # first run: nothing to rebuild, everything is new
    missing = [t.name for t in targets if not _is_delta(t)] + ([] if state.exists() else [f"run state {state}"])
    if missing:
        return f"missing {', '.join(missing)}"
    for name, cols in wanted.items():
        have = [(f.name, f.dataType.simpleString()) for f in
                spark.read.format("delta").load(str(tables_dir(warehouse) / name)).schema.fields
                if f.name not in (START_AT, END_AT)]
        change = reshape.column_change(have, cols)
        if change is not None:
            return f"the columns of {table.qualified} changed ({change})"
    if 2 in table.scd_types:
        # The protocol of a Delta table cannot drop deletion vectors in place (and a table that has
        # them stays unreadable to delta-rs): a table whose feature differs from the config is rebuilt.
        has = "deletionVectors" in _table_features(spark, tables_dir(warehouse) / table.scd2_table)
        if has and not table.deletion_vectors:
            return f"{table.scd2_table} has deletion vectors (delta-rs cannot read it) and deletion_vectors is false"
        if table.deletion_vectors and not has:
            return f"deletion_vectors is true and {table.scd2_table} has no deletion vectors"
    if streaming:
        seen = state / "silver.json"
        if seen.exists() and json.loads(seen.read_text()).get("id") != _table_id(spark, silver):
            return f"{silver.name} was re-created"
    return None


def _sources_changed(state: Path, sources: list[str]) -> str | None:
    """Why gold must be rebuilt because the table's ``source``/``sources:`` changed since the run
    state was written (a hand-off tracks applied changes by identity, a single source by its own
    ids or stream: the two cannot continue each other), else None."""
    seen = state / "sources.json"
    if not state.exists() or (not seen.exists() and len(sources) == 1):
        return None  # a first run, or a run state from before sources were recorded
    before = json.loads(seen.read_text()) if seen.exists() else None
    if before == sources:
        return None
    return f"its sources changed ({', '.join(before or ['?'])} -> {', '.join(sources)})"


def _table_id(spark: SparkSession, path: Path) -> str:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, str(path)).detail().select("id").first()[0]


def _table_features(spark: SparkSession, path: Path) -> set[str]:
    """The Delta table features of the table at ``path`` (its protocol: ``deletionVectors``, ...)."""
    from delta.tables import DeltaTable

    return set(DeltaTable.forPath(spark, str(path)).detail().select("tableFeatures").first()[0] or ())


def apply_table(spark: SparkSession, table: TableConfig, warehouse: Path, *, full_refresh: bool = False,
                parts: Sequence[TableConfig] = (), policy: Transactions = Transactions(),
                run_time: dt.datetime | None = None) -> Applied:
    """Apply ``table``'s new silver changes to its SCD1/SCD2 tables (see the module doc). For a
    producer hand-off, ``table`` is :func:`sqlcdc.gold.handoff.gold_table` and ``parts`` the table
    configs of its sources, whose silvers are merged (:mod:`sqlcdc.gold.handoff`). ``policy``: the
    pipeline's ``transactions:`` (:mod:`sqlcdc.gold.transactions`); what waits is appended to
    ``dq_transactions`` with ``run_time`` (the run's start, default now)."""
    started = time.monotonic()
    result = Applied(table.name)
    parts = list(parts) or [table]
    paths = [(p, tables_dir(warehouse) / p.silver_table) for p in parts]
    state = run_state_dir(warehouse, table)
    holds = len(parts) == 1 and _holds(table, warehouse, policy)
    key = None if full_refresh or not all(_is_delta(path) for _, path in paths) else last_apply.fingerprint(
        [path for _, path in paths], tables_dir(warehouse) / table.source.bronze_table if holds else None,
        repr((table, parts, policy)))
    last = last_apply.unchanged(state, key)
    targets = [gold_table(table, scd) for scd in table.scd_types]
    if last is not None and all(_is_delta(tables_dir(warehouse) / t) for t in targets):
        result.unchanged = True  # no change is new, none can complete or expire: nothing is read
        if last.get("marks"):  # still a row of dq_transactions for the run: nothing waits
            _record_waiting(spark, warehouse, table, result, policy, run_time)
        _register(spark, warehouse, targets)
        result.seconds = time.monotonic() - started
        return result
    silvers = [(p, spark.read.format("delta").load(str(path))) for p, path in paths if _is_delta(path)]
    if not silvers:
        result.skipped = f"no silver table yet ({', '.join(str(path) for _, path in paths)})"
        return result
    silver_path = tables_dir(warehouse) / silvers[0][0].silver_table
    silver = silvers[0][1]
    handoff.same_shape(table, silvers)
    columns, keys = _silver_shape(silver.schema, table)
    frame_schema = changes_of(silver, columns, keys).schema
    specs = _specs(table, keys)
    for spec in specs.values():
        spec.validate(frame_schema)  # ConfigError naming table and field
    wanted = {
        gold_table(table, scd): [(f.name, f.dataType.simpleString()) for f in frame_schema.fields
                              if f.name in spec.output_columns(frame_schema)]
        for scd, spec in specs.items()
    }
    streaming = len(parts) == 1 and formats.get(table.source.format).streaming  # a hand-off: by identity
    sources = [p.source.name for p in parts]
    result.rebuilt = (_rebuild_reason(spark, table, warehouse, silver_path, streaming, wanted, full_refresh)
                      or _sources_changed(state, sources))
    if result.rebuilt:
        for part in gold_parts(warehouse, table):
            shutil.rmtree(part, ignore_errors=True)
    state.mkdir(parents=True, exist_ok=True)
    last_apply.forget(state)  # until this apply ends
    (state / "sources.json").write_text(json.dumps(sources))

    def merge(changes: DataFrame) -> None:
        for scd, spec in specs.items():
            target = str(tables_dir(warehouse) / gold_table(table, scd))
            result.modes[gold_table(table, scd)] = (
                incremental.merge_scd1(spark, target, changes, spec) if scd == 1 else
                incremental.merge_scd2(spark, target, changes, spec, deletion_vectors=table.deletion_vectors))

    marks = _marks(spark, table, warehouse) if holds else None  # a hand-off holds nothing
    if streaming:
        if marks is None and not _is_delta(state / "held"):
            _apply_stream(spark, silver_path, state, lambda batch: _merge_counted(
                changes_of(batch, columns, keys), merge, result))
        else:  # new changes join the held ones; the complete ones are applied, the rest held again
            _apply_stream(spark, silver_path, state, lambda batch: batch.write.format("delta").mode("append").save(
                str(state / "held")))
            _apply_held(spark, table, warehouse, state / "held", marks, policy, lambda ready: _merge_counted(
                changes_of(ready, columns, keys), merge, result), result)
    elif len(parts) == 1:
        # Unapplied first: the transaction check then joins only what gold has not taken yet.
        new, _ = _whole_transactions(spark, table, warehouse, _unapplied(spark, silver, "change_id", state),
                                     marks, policy, result)
        _apply_new_ids(changes_of(new, columns, keys), state, merge, result)
    else:
        union = handoff.merged(silvers, lambda s: changes_of(s, columns, keys), keys)
        _apply_new_ids(_unapplied(spark, handoff.first_copies(union), model.CHANGE_ID_COL, state), state, merge,
                       result)
    if marks is not None:  # changes are held: what waits (zeros when nothing did) is a row of dq_transactions
        _record_waiting(spark, warehouse, table, result, policy, run_time)
    # Gold tables exist after every run, if only empty (a first run whose silver is still empty).
    if any(not _is_delta(tables_dir(warehouse) / gold_table(table, scd)) for scd in specs):
        merge(changes_of(silver.limit(0), columns, keys))
    if 1 in specs and table.tombstone_retention_days is not None and result.changes:
        # Once per run, not per micro-batch: forgetting tombstones folds the whole key state.
        result.forgotten = incremental.purge_tombstones(
            spark, str(tables_dir(warehouse) / table.scd1_table), specs[1],
            dt.timedelta(days=table.tombstone_retention_days))
    _register(spark, warehouse, [gold_table(table, scd) for scd in specs])
    held = result.held or transactions.Waiting()
    last_apply.remember(state, key, waiting=bool(held.pending or held.expired), marks=marks is not None)
    result.seconds = time.monotonic() - started
    return result


def _record_waiting(spark: SparkSession, warehouse: Path, table: TableConfig, result: Applied, policy: Transactions,
                    run_time: dt.datetime | None) -> None:
    """What waits for its transaction (zeros when nothing did), a row of ``dq_transactions``."""
    result.held = result.held or transactions.Waiting()
    path = tables_dir(warehouse) / transactions.METRICS_TABLE
    with _SHARED:
        transactions.record(spark, str(path), table, result.held, policy, run_time or dt.datetime.now(dt.timezone.utc))
        _register_at(spark, transactions.METRICS_TABLE, path)


def _apply_stream(spark: SparkSession, silver_path: Path, state: Path, sink: Callable[[DataFrame], None]) -> None:
    """Streaming silver: every micro-batch of silver rows appended since the checkpoint, in order,
    to ``sink``."""
    (state / "silver.json").write_text(json.dumps({"id": _table_id(spark, silver_path)}))
    checkpoints.clear_interrupted_writes(state / "checkpoint")  # an apply killed as it logged its first batch
    query = (
        spark.readStream.format("delta").load(str(silver_path))
        .writeStream.foreachBatch(lambda batch, _batch_id: sink(batch))
        .option("checkpointLocation", str(state / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def _merge_counted(changes: DataFrame, merge: Callable[[DataFrame], None], result: Applied) -> DataFrame | None:
    """``changes`` materialized, merged and counted into ``result``; the materialized frame, or None
    when there was nothing to merge."""
    changes = changes.localCheckpoint(eager=True)
    n = changes.count()
    if not n:
        return None
    merge(changes)
    result.changes += n
    return changes


def _apply_held(spark: SparkSession, table: TableConfig, warehouse: Path, held: Path, marks: DataFrame | None,
                policy: Transactions, apply: Callable[[DataFrame], None], result: Applied) -> None:
    """Streaming silver under whole-transaction apply: ``held`` (the run state's silver rows not
    applied yet: the new ones and those still waiting) checked against the marks; the ready ones
    applied, the waiting ones written back. Applied before the write-back: a run killed in between
    applies them again, which merging tolerates. With no marks (turned off), all are applied."""
    if not _is_delta(held):
        return
    rows = spark.read.format("delta").load(str(held)).dropDuplicates(["change_id"])
    ready, waiting = _whole_transactions(spark, table, warehouse, rows, marks, policy, result)
    apply(ready)
    if waiting is None:
        shutil.rmtree(held, ignore_errors=True)
    else:
        waiting.select(*rows.columns).write.format("delta").mode("overwrite").save(str(held))


def _holds(table: TableConfig, warehouse: Path, policy: Transactions) -> bool:
    """The policy holds changes of incomplete transactions and the producer marks transaction ends
    (a producer that never marks an end, CES, only with ``later_commit``)."""
    decoder = formats.get(table.source.format)
    return (policy.whole and _is_delta(tables_dir(warehouse) / table.source.bronze_table)
            and (decoder.transaction_end != "later_commit" or policy.later_commit))


def _marks(spark: SparkSession, table: TableConfig, warehouse: Path) -> DataFrame | None:
    """The source's transaction marks (when :func:`_holds`), or None: its producer gives none."""
    bronze = tables_dir(warehouse) / table.source.bronze_table
    return formats.get(table.source.format).transaction_marks(spark.read.format("delta").load(str(bronze)), table.source)


def _whole_transactions(spark: SparkSession, table: TableConfig, warehouse: Path, silver: DataFrame,
                        marks: DataFrame | None, policy: Transactions,
                        result: Applied) -> tuple[DataFrame, DataFrame | None]:
    """(ready, waiting): ``silver`` split by ``marks`` (of :func:`_marks`; None, or no ``silver``
    row: all are ready and nothing waits) into the changes of complete transactions and those of
    incomplete ones (:mod:`sqlcdc.gold.transactions`, materialized); the expired ones rewritten into
    the table's transaction quarantine."""
    quarantine = tables_dir(warehouse) / transactions.quarantine_table(table)
    if marks is not None:  # materialized once: the emptiness test and the split read it, not its lineage
        silver = silver.localCheckpoint(eager=True)
    if marks is None or silver.isEmpty():  # the marks (a bronze parse) only when a change may wait
        if _is_delta(quarantine):  # turned off, or nothing unapplied: nothing waits, nothing is quarantined
            _metastore(spark, f"DROP TABLE IF EXISTS {quote(transactions.quarantine_table(table))}")
            shutil.rmtree(quarantine, ignore_errors=True)
        return silver, None
    ready, waiting = transactions.split(
        transactions.classify(silver, marks, policy).localCheckpoint(eager=True), silver.columns)
    counts = result.held = transactions.summary(waiting)
    result.waiting = counts.describe(table, policy)
    if counts.expired or _is_delta(quarantine):  # rewritten each run: a late completion leaves it
        transactions.expired_rows(waiting, policy).write.format("delta").mode("overwrite").option(
            "overwriteSchema", "true").save(str(quarantine))
        _register_at(spark, transactions.quarantine_table(table), quarantine)
    return ready, waiting


def _unapplied(spark: SparkSession, changes: DataFrame, id_column: str, state: Path) -> DataFrame:
    """``changes`` whose id (``id_column``) gold has not applied yet (the run state's ``applied``).
    A silver row's ``change_id`` covers its apply rows (``<id>`` and ``<id>#old-key``, recorded
    together)."""
    applied = state / "applied"
    if not _is_delta(applied):
        return changes
    done = spark.read.format("delta").load(str(applied))
    return changes.join(done, changes[id_column] == done["change_id"], "left_anti")


def _apply_new_ids(changes: DataFrame, state: Path, merge: Callable[[DataFrame], None], result: Applied) -> None:
    """Recomputed silver (or a hand-off's silvers, by identity): the new changes (of
    :func:`_unapplied`) merged; their ids are recorded after the merge (a run killed in between
    applies them again, which merging tolerates)."""
    merged = _merge_counted(changes, merge, result)
    if merged is not None:
        (merged.select(F.col(model.CHANGE_ID_COL).alias("change_id")).distinct()
         .write.format("delta").mode("append").save(str(state / "applied")))


def _register(spark: SparkSession, warehouse: Path, names: list[str]) -> None:
    """Name the gold tables in the warehouse's metastore (a Hive session), so ``spark.table`` finds
    them beside bronze and silver. Names are quoted; paths passed as string literals."""
    for name in names:
        _register_at(spark, name, tables_dir(warehouse) / name)


def _register_at(spark: SparkSession, name: str, path: Path) -> None:
    if spark.conf.get("spark.sql.catalogImplementation", "in-memory") != "hive":
        return
    _metastore(spark, f"CREATE TABLE IF NOT EXISTS {quote(name)} USING delta LOCATION {literal(str(path))}")


def _metastore(spark: SparkSession, statement: str) -> None:
    """A statement on the warehouse's embedded metastore, one at a time (:data:`_SHARED`)."""
    with _SHARED:
        spark.sql(statement)
