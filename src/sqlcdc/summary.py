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

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import dq_metrics, formats
from sqlcdc.config import PipelineConfig
from sqlcdc.gold import transactions
from sqlcdc.gold.spec import target as gold_target


@dataclass
class Balance:
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


def counts(spark: SparkSession, cfg: PipelineConfig, warehouse: Path) -> list[tuple[str, str, int | None]]:
    """``(layer, table, rows)`` for every table of the pipeline (rows None if the table is missing)."""
    out: list[tuple[str, str, int | None]] = []

    def add(layer: str, name: str) -> None:
        df = _read(spark, warehouse, name)
        out.append((layer, name, None if df is None else df.count()))

    for s in cfg.sources.values():
        add("bronze", s.bronze_table)
    for t in cfg.tables:
        add("silver", t.silver_table)
    for s in cfg.sources.values():
        add("quarantine", s.quarantine_table)
    for s in cfg.sources.values():
        if cfg.tables_of(s.name):
            add("dropped", dq_metrics.dropped_table(s))
    add("dq", dq_metrics.TABLE)
    if _exists(warehouse, transactions.METRICS_TABLE):  # written by gold where changes are held
        add("dq", transactions.METRICS_TABLE)
    golds = [gold_target(t, scd) for t in cfg.tables for scd in t.scd_types]
    for name in dict.fromkeys(golds):  # the sources of a hand-off share their gold tables
        add("gold", name)
    for t in cfg.tables:  # changes of transactions incomplete past the timeout (sqlcdc.gold.transactions)
        if _exists(warehouse, transactions.quarantine_table(t)):
            add("quarantine", transactions.quarantine_table(t))
    return out


def balances(spark: SparkSession, cfg: PipelineConfig, warehouse: Path) -> list[Balance]:
    result = []
    for s in cfg.sources.values():
        bronze = _read(spark, warehouse, s.bronze_table)
        if bronze is None:
            continue
        decoder = formats.get(s.format)
        ids = bronze.select("record_id").distinct()
        skipped = bronze.where(decoder.skipped(bronze)).select("record_id").distinct()
        silver_ids = None
        for t in cfg.tables_of(s.name):
            df = _read(spark, warehouse, t.silver_table)
            if df is not None:
                part = df.select(F.explode(F.split(F.col("bronze_record_id"), ",")).alias("record_id"))
                silver_ids = part if silver_ids is None else silver_ids.unionByName(part)
        q = _read(spark, warehouse, s.quarantine_table)
        q_ids = q.select(F.explode(F.split(F.col("bronze_record_id"), ",")).alias("record_id")) if q is not None else None
        d = _read(spark, warehouse, dq_metrics.dropped_table(s))
        d_ids = d.select(F.explode(F.split(F.col("bronze_record_id"), ",")).alias("record_id")) if d is not None else None

        # Which record id's silver/quarantine row accounts for each record: itself, unless the
        # decoder says otherwise (CES: the segments of a split event ride on its final segment).
        # computed once: it may re-run the decoder's grouping, and three joins below read it
        disp = decoder.disposition(bronze, s).select(
            "record_id", F.col("carried_by").alias("carrier"), (F.col("status") == "pending").alias("pending")
        ).localCheckpoint()
        carriers = disp.select("record_id", "carrier")
        pending = disp.where("pending").select("record_id").distinct().count()

        def n_in(other: DataFrame | None) -> int:
            if other is None:
                return 0
            found = carriers.join(other.distinct().select(F.col("record_id").alias("carrier")), "carrier", "left_semi")
            return found.select("record_id").distinct().count()

        def n_own(other: DataFrame | None) -> int:
            return 0 if other is None else ids.join(other.distinct(), "record_id", "left_semi").count()

        dup_ids = decoder.duplicates(bronze, s, cfg.tables_of(s.name)).select("record_id")

        result.append(Balance(s.name, ids.count(), n_in(silver_ids), n_in(q_ids), n_own(skipped), n_in(d_ids), pending,
                              n_own(dup_ids)))
    return result


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
