"""A Debezium feed with known bad rows, for the data-quality tests (expectations, metrics, dashboard).

Lines of ``001-bad.json`` (after the bundled snapshot, 4 good rows in ``000-snapshot.json``):

====  =========================================  ===================================================
id    what                                       expected outcome (config below)
====  =========================================  ===================================================
1005  good insert (the Debezium docs' seed)      silver
1006  email without '@'                          quarantine, rule email_has_at (custom, quarantine)
9001  id out of range                            dropped, rule id_in_range (custom, drop)
1007  first_name 'test'                          silver, dq_warnings [not_a_test_name] (custom, warn)
-     after.id NULL                              quarantine, rule decode (the decoder: key is NULL)
1008  op 'x'                                     quarantine, envelope rule ``$.payload.op: enum``
-     truncated JSON                             quarantine, envelope rule ``$: not JSON``
-     blank line (a tombstone)                   skipped by definition
====  =========================================  ===================================================
"""

from __future__ import annotations

from pathlib import Path

from debezium_events import customer, event, line, lsn, sample_files
from sqlcdc.config import SourceConfig, TableConfig

RULES = (
    {"name": "email_has_at", "constraint": "email LIKE '%@%'", "action": "quarantine"},
    {"name": "id_in_range", "constraint": "id < 5000", "action": "drop"},
    {"name": "not_a_test_name", "constraint": "after.first_name <> 'test'", "action": "warn"},
)
RULES_YAML = """expectations:
  - {name: email_has_at, constraint: "email LIKE '%@%'", action: quarantine}
  - {name: id_in_range, constraint: "id < 5000", action: drop}
  - {name: not_a_test_name, constraint: "after.first_name <> 'test'", action: warn}
"""

SOURCE = SourceConfig(name="inventory", format="debezium", landing=None)
CUSTOMERS = TableConfig(name="customers", source=SOURCE, schema="dbo", table="customers", keys=("id",),
                        expectations=RULES)


def _c(op: str, after: dict, n: int) -> str:
    return line(event(op, after=after, commit_lsn=lsn(0x30, n, 5), change_lsn=lsn(0x30, n, 2), serial=1,
                      ts_ms=1559729600000 + n * 1000))


def bad_lines() -> list[str]:
    good = sample_files()["001-changes.json"][0]  # 1005 john doe: the seed event
    null_key = _c("c", customer(1, "no", "key"), 3).replace('"after":{"id":1,', '"after":{"id":null,')
    return [
        good,
        _c("c", customer(1006, "ann", "lee", email="ann.lee.example.org"), 1),
        _c("c", customer(9001, "big", "id"), 2),
        _c("c", customer(1007, "test", "user"), 4),
        null_key,
        _c("x", customer(1008, "bad", "op"), 5),
        '{"payload": {"op": "c", "after": {"id": 1009}',
        "",
    ]


def snapshot_lines() -> list[str]:
    return sample_files()["000-snapshot.json"]


def write_landing(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "000-snapshot.json").write_text("\n".join(snapshot_lines()) + "\n")
    (folder / "001-bad.json").write_text("\n".join(bad_lines()) + "\n")
    return folder


RUN1, RUN2 = "2026-11-21 10:00:00", "2026-11-21 11:00:00"


def pipeline_config():
    from sqlcdc.config import PipelineConfig

    return PipelineConfig(name="dq", sources={"inventory": SOURCE}, tables=(CUSTOMERS,), file="dq.yml")


def build_warehouse(spark, warehouse: Path) -> dict[str, "object"]:
    """The tables a pipeline run on this feed keeps, computed with the pipeline's own functions
    (no SDP), written as Delta under ``warehouse/tables/``: the snapshot lands in run 1, the bad
    file in run 2. Returns ``{table name: DataFrame read back}``."""
    from pyspark.sql import functions as F

    from debezium_events import seed_event
    from sqlcdc import dq_metrics, expectations
    from sqlcdc.formats import base, debezium

    cols = [debezium.spec_from_connect_field(f) for f in seed_event()["schema"]["fields"][1]["fields"]]
    rows = [(v, "file:/landing/000-snapshot.json") for v in snapshot_lines()]
    rows += [(v, "file:/landing/001-bad.json") for v in bad_lines()]
    raw = spark.createDataFrame(rows, "value string, source_file string")
    bronze = raw.select(
        base.record_id(F.col("source_file"), F.col("value")).alias("record_id"), "value", "source_file",
        F.when(F.col("source_file").endswith("000-snapshot.json"), F.lit(RUN1)).otherwise(F.lit(RUN2))
        .cast("timestamp").alias("ingest_time"),
    )
    schema = "debezium-envelope.schema.json"
    valid = expectations.valid_envelopes(bronze, debezium.DECODER, schema)
    decoded = debezium.decode(valid, CUSTOMERS, cols)
    checked = expectations.check(decoded.changes, CUSTOMERS, cols)
    tables = {
        "bronze_inventory": bronze,
        "silver_customers": expectations.passed(checked, CUSTOMERS),
        "quarantine_inventory": debezium.unrouted(valid, SOURCE, [CUSTOMERS])
        .union(expectations.invalid_envelopes(bronze, debezium.DECODER, schema, SOURCE))
        .union(decoded.quarantine)
        .union(expectations.quarantined(checked, CUSTOMERS)),
        "dropped_inventory": expectations.dropped(checked, CUSTOMERS),
    }
    out = {}
    for name, df in tables.items():
        path = str(warehouse / "tables" / name)
        df.write.format("delta").mode("overwrite").save(path)
        out[name] = spark.read.format("delta").load(path)
    metrics = dq_metrics.metrics(pipeline_config(), lambda n: out[n])
    path = str(warehouse / "tables" / dq_metrics.TABLE)
    metrics.write.format("delta").mode("overwrite").save(path)
    out[dq_metrics.TABLE] = spark.read.format("delta").load(path)
    return out
