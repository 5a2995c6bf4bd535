"""Rows per table after a run, and the conservation check: every landed record is accounted for.

For each source: ``landed`` (bronze records) must equal the records found in silver plus those in
quarantine plus those dropped by ``expect_or_drop`` rules (``dropped_<source>``, which keeps their
lineage and rule names) plus those skipped by definition (Debezium tombstones) plus duplicates (another
copy of a record already taken: the same change-table row in two overlapping exports, which
at-least-once delivery makes normal; a decoder lists them with ``duplicates(bronze, table, columns)``).
Records are matched by bronze record id, so a decoder that makes one change out of several records
(CT update pairs, CES segments) still balances.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import dq_metrics, formats, frames
from sqlcdc.config import PipelineConfig
from sqlcdc.gold import transactions
from sqlcdc.gold.spec import target as gold_target


@dataclass(frozen=True)
class Balance:
    """Where the records a source landed went, as counted after a run by :func:`balances`."""

    source: str
    landed: int
    in_silver: int
    quarantined: int
    skipped: int
    dropped: int = 0
    pending: int = 0
    """Records waiting for the rest of a group (CES split-event segments within their timeout)."""
    duplicate: int = 0
    """Further copies of a record already taken (change-table rows landed twice)."""

    @property
    def ok(self) -> bool:
        return self.landed == (self.in_silver + self.quarantined + self.skipped + self.dropped + self.pending
                               + self.duplicate)


def table_path(warehouse: Path, table: str) -> Path:
    """Where the local runtime keeps table ``table`` (Hive warehouse layout, default database)."""
    return warehouse / "tables" / table


def _exists(warehouse: Path, table: str) -> bool:
    return (table_path(warehouse, table) / "_delta_log").is_dir()


def _read(spark: SparkSession, warehouse: Path, table: str) -> DataFrame | None:
    if not _exists(warehouse, table):
        return None
    return spark.read.format("delta").load(str(table_path(warehouse, table)))


def _carriers(spark: SparkSession, warehouse: Path, table: str) -> DataFrame | None:
    """``carried_by``: the bronze record ids that ``table``'s rows name (a row made of several
    records lists them all, comma-separated); None if the table is missing."""
    df = _read(spark, warehouse, table)
    return None if df is None else df.select(F.explode(F.split(F.col("bronze_record_id"), ",")).alias("carried_by"))


def counts(spark: SparkSession, cfg: PipelineConfig, warehouse: Path) -> list[tuple[str, str, int | None]]:
    """``(layer, table, rows)`` for every table of the pipeline (rows None if the table is missing).

    All tables are counted by one query (a union of their scans grouped by table), not one count
    each: the demo's 26 tables took 52 Spark jobs that way, 28 now (docs/testing.md)."""
    listed: list[tuple[str, str]] = []
    for s in cfg.sources.values():
        listed.append(("bronze", s.bronze_table))
    for t in cfg.tables:
        listed.append(("silver", t.silver_table))
    for s in cfg.sources.values():
        listed.append(("quarantine", s.quarantine_table))
    for s in cfg.sources.values():
        if cfg.tables_of(s.name):
            listed.append(("dropped", dq_metrics.dropped_table(s)))
    listed.append(("dq", dq_metrics.TABLE))
    if _exists(warehouse, transactions.METRICS_TABLE):  # written by gold where changes are held
        listed.append(("dq", transactions.METRICS_TABLE))
    golds = [gold_target(t, scd) for t in cfg.tables for scd in t.scd_types]
    listed += [("gold", name) for name in dict.fromkeys(golds)]  # the sources of a hand-off share their gold tables
    for t in cfg.tables:  # changes of transactions incomplete past the timeout (sqlcdc.gold.transactions)
        if _exists(warehouse, transactions.quarantine_table(t)):
            listed.append(("quarantine", transactions.quarantine_table(t)))
    scans = {name: df for _, name in listed if (df := _read(spark, warehouse, name)) is not None}
    found: dict[str, int] = {}
    if scans:  # an empty table has no group: 0 below
        tagged = [df.select(F.lit(name).alias("_table")) for name, df in scans.items()]
        found = dict(frames.union_all(tagged).groupBy("_table").count().collect())
    return [(layer, name, found.get(name, 0) if name in scans else None) for layer, name in listed]


def balances(spark: SparkSession, cfg: PipelineConfig, warehouse: Path) -> list[Balance]:
    """Each source's :class:`Balance`: one aggregate over every source's records and where each one
    went, not a count per place nor a query per source (the demo's four sources: 107 Spark jobs as
    a count per place, 57 as a query per source, 48 now)."""
    found_in: list[DataFrame] = []
    sources: list[str] = []
    for s in cfg.sources.values():
        bronze = _read(spark, warehouse, s.bronze_table)
        if bronze is None:
            continue
        decoder = formats.get(s.format)

        # Which record id's silver/quarantine row accounts for each record: itself, unless the
        # decoder says otherwise (CES: the segments of a split event ride on its final segment).
        # computed once: it may re-run the decoder's grouping, and the parts below read it
        disp = decoder.disposition(bronze, s).select("record_id", "carried_by", "status").localCheckpoint()
        ids = bronze.select("record_id")

        def carried(where: str, tables: list[str]) -> list[DataFrame]:
            """The records whose carrier has a row in one of ``tables`` (those that exist), as ``where``."""
            found = [df for t in tables if (df := _carriers(spark, warehouse, t)) is not None]
            if not found:
                return []
            rows = disp.join(frames.union_all(found).distinct(), "carried_by", "left_semi")
            return [rows.select("record_id", F.lit(where).alias("where"))]

        dup_ids = decoder.duplicates(bronze, s, cfg.tables_of(s.name)).select("record_id").distinct()
        parts = [
            ids.select("record_id", F.lit("landed").alias("where")),  # each part's where: the Balance field it counts
            disp.where(F.col("status") == "pending").select("record_id", F.lit("pending").alias("where")),
            bronze.where(decoder.skipped(bronze)).select("record_id", F.lit("skipped").alias("where")),
            ids.join(dup_ids, "record_id", "left_semi").select("record_id", F.lit("duplicate").alias("where")),
            *carried("in_silver", [t.silver_table for t in cfg.tables_of(s.name)]),
            *carried("quarantined", [s.quarantine_table]),
            *carried("dropped", [dq_metrics.dropped_table(s)]),
        ]
        found_in.append(frames.union_all(parts).select(F.lit(s.name).alias("source"), "record_id", "where"))
        sources.append(s.name)
    if not sources:
        return []
    counted = frames.union_all(found_in).groupBy("source", "where").agg(F.count_distinct("record_id").alias("n"))
    n = {(r["source"], r["where"]): r["n"] for r in counted.collect()}
    places = [f.name for f in fields(Balance) if f.name != "source"]
    return [Balance(name, **{field: n.get((name, field), 0) for field in places}) for name in sources]


def print_summary(cfg: PipelineConfig, warehouse: Path, spark: SparkSession) -> list[Balance]:
    """Print rows per table and the per-source balance; return the balances (a MISMATCH is one
    whose ``ok`` is False)."""
    rows = counts(spark, cfg, warehouse)
    width = max(len(name) for _, name, _ in rows)
    print(f"\n{'layer':<11}{'table':<{width + 2}}{'rows':>8}")
    for layer, name, n in rows:
        print(f"{layer:<11}{name:<{width + 2}}{'-' if n is None else n:>8}")
    found = balances(spark, cfg, warehouse)
    for b in found:
        status = "ok" if b.ok else "MISMATCH"
        print(
            f"\nsource {b.source}: landed {b.landed} = silver {b.in_silver} + quarantine {b.quarantined}"
            + (f" + dropped {b.dropped}" if b.dropped else "")
            + f" + skipped {b.skipped}"
            + (f" + duplicate {b.duplicate}" if b.duplicate else "")
            + (f" + pending {b.pending} (segments awaiting the rest of their split event)" if b.pending else "")
            + f" ({status})"
        )
    return found
