"""Producer metadata cannot silently reshape a table (issue 16), and a CES table without ``keys:`` runs.

CES (``eventsource.cols`` of each event) and Qlik (metadata messages, one per ``tableVersion``)
carry the table's columns. A set of columns that drops a column the table has, names two columns
equal but for case, holds a type Spark cannot hold or a name Delta cannot store must not redefine
the table: the records that depend on it are quarantined with the reason, the good ones keep every
column. Adding a column (schema evolution) still works. Events are built in the seeds' shapes with
the helpers of tests/test_ces.py and tests/test_qlik.py; every expected value is written by hand.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from sqlcdc import pipeline
from sqlcdc.cli import validate as v
from sqlcdc.config import ConfigError, TableConfig, load_pipeline
from sqlcdc.formats import ces, qlik
from sqlcdc.gold import graph as gold_graph

from test_ces import GUID, PURCHASE_COLS, event, land_json
from test_ces import source as ces_source
from test_qlik import FIXTURES as QLIK_FIXTURES
from test_qlik import seq as qlik_seq
from test_qlik import source as qlik_source
from test_qlik import table as qlik_table

# ============================================================================= CES

ROW = {"purchase_id": "1", "customer_name": "Anna Doe", "product_id": "101", "product_name": "Game 2077",
       "price_per_item": "60", "quantity": "1", "purchase_date": "2025-03-14 16:45:01.000", "payment_method": "Cash"}
NAMES = [n for n, _ in PURCHASE_COLS]


def lsn(n: int) -> str:
    return f"0000002C{n:012X}"


def ins(n: int, cols=PURCHASE_COLS, **extra) -> dict:
    """INS of purchase ``n`` at commit LSN ``lsn(n)``, with ``cols`` and a current image of those columns."""
    names = [c for c, _ in cols]
    current = {k: v for k, v in {**ROW, "purchase_id": str(n), **extra}.items() if k in names}
    return event("INS", cols=cols, pk={"purchase_id": str(n)}, current=current, lsn=lsn(n))


def logicalid(n: int) -> str:
    return f"{GUID}:{lsn(n)}:00000000000000000001"


def no_keys(src, **kw) -> TableConfig:
    return TableConfig(name="purchases", source=src, schema="dbo", table="Purchases", file="config/tables/purchases.yml", **kw)


# landed in one file, not in commit order
CES_EVENTS = [
    ins(9, PURCHASE_COLS + [("tier", "varchar(10)")], tier="gold"),   # adds tier: evolution, kept
    ins(2),                                                           # before tier existed: kept, tier not provided
    ins(1),
    ins(3, PURCHASE_COLS[:-1]),                                       # drops payment_method
    ins(4, PURCHASE_COLS + [("Quantity", "int")], Quantity="7"),      # quantity and Quantity
    ins(5, PURCHASE_COLS + [("rate", "decimal(40,2)")], rate="1.5"),  # a type Spark cannot hold
    ins(6, PURCHASE_COLS + [("rate", "decimal(5,9)")], rate="1.5"),   # scale > precision
    ins(7, PURCHASE_COLS + [("x", "varchar(10")], x="a"),             # not a type name
    ins(8, PURCHASE_COLS + [("order date", "date")], **{"order date": "2025-01-01"}),  # a name Delta cannot store
    ins(10, PURCHASE_COLS),                                           # after tier was added: drops tier
    ins(11, PURCHASE_COLS + [("tier", "varchar(10)")], tier="silver"),
    ins(12, PURCHASE_COLS + [("tier", "varchar(10)"), ("a=b", "int"), ("c;d", "int")], **{"a=b": "1", "c;d": "2"}),
    ins(13, PURCHASE_COLS + [("tier", "varchar(10)"), ("_op", "varchar(10)")], tier="gold", _op="x"),  # a name of sqlcdc's own
]
DROP = ("data.eventsource.cols lacks column(s) {cols} of dbo.Purchases, which earlier events list: the event is "
        "not taken to drop them; dropping a column needs an explicit config change (`columns:` in the table config "
        "without it)")
DELTA_NAMES = ("hold a character Delta cannot store in a column name (one of space , ; { } ( ) newline tab = backtick); "
               "rename the column at the source or give the table `columns:`")
CES_QUARANTINED = {
    3: DROP.format(cols="payment_method"),
    4: "data.eventsource.cols: column names equal but for case (quantity, Quantity): Delta cannot hold both",
    5: "data.eventsource.cols: column rate: type 'decimal(40,2)' cannot be held: decimal precision must be 1..38 "
       "and scale 0..precision",
    6: "data.eventsource.cols: column rate: type 'decimal(5,9)' cannot be held: decimal precision must be 1..38 "
       "and scale 0..precision",
    7: "data.eventsource.cols: column x: type 'varchar(10' is not a SQL Server type name",
    8: f'data.eventsource.cols: column name(s) ["order date"] {DELTA_NAMES}',
    10: DROP.format(cols="tier"),
    12: f'data.eventsource.cols: column name(s) ["a=b"], ["c;d"] {DELTA_NAMES}',
    13: 'data.eventsource.cols: column name(s) ["_op"] are ones sqlcdc gives columns of its own (_op _sequence _provided '
        '_change_id _commit_time __START_AT __END_AT _value_warnings _dq_<action> __ac_*); rename the column at the source '
        'or give the table `columns:`',
}


def after(n: int, tier=None) -> dict:
    return {"purchase_id": n, "customer_name": "Anna Doe", "product_id": 101, "product_name": "Game 2077",
            "price_per_item": 60, "quantity": 1, "purchase_date": dt.datetime(2025, 3, 14, 16, 45, 1),
            "payment_method": "Cash", "tier": tier}


@pytest.fixture(scope="module")
def ces_run(spark, tmp_path_factory):
    landing = tmp_path_factory.mktemp("ces-reshape")
    land_json(landing, "events.json", CES_EVENTS)
    src = ces_source(landing)
    table = no_keys(src)  # neither keys: nor columns:: both come from the events
    cols = ces.columns_for(table, src, spark)
    bronze = ces.read_bronze(spark, src, streaming=False)
    d = ces.decode(bronze, table, cols)
    return src, table, cols, bronze, d


def test_ces_columns_and_keys_come_from_the_usable_events(ces_run):
    src, table, cols, *_ = ces_run
    assert [(c.name, c.spark_type, c.ordinal) for c in cols] == [
        ("purchase_id", "int", 1), ("customer_name", "string", 2), ("product_id", "int", 3),
        ("product_name", "string", 4), ("price_per_item", "int", 5), ("quantity", "int", 6),
        ("purchase_date", "timestamp_ntz", 7), ("payment_method", "string", 8), ("tier", "string", 9)]
    assert ces.keys_for(table, src) == ["purchase_id"]


def test_ces_good_events_keep_every_column_bad_metadata_is_quarantined(ces_run):
    src, table, cols, bronze, d = ces_run
    silver = {r.key["purchase_id"]: r for r in d.changes.collect()}
    assert sorted(silver) == [1, 2, 9, 11]
    assert silver[1].after.asDict() == after(1)
    assert silver[2].after.asDict() == after(2)
    assert silver[2].provided_columns == NAMES  # tier did not exist yet: not provided, not NULLed in gold
    assert silver[9].after.asDict() == after(9, "gold")
    assert silver[11].after.asDict() == after(11, "silver")
    assert silver[11].provided_columns == NAMES + ["tier"]
    q = {r.bronze_record_id: r for r in d.quarantine.collect()}
    by_lid = {json.loads(r.raw)["logicalid"]: r for r in q.values()}
    assert sorted(by_lid) == sorted(logicalid(n) for n in CES_QUARANTINED)
    for n, reason in CES_QUARANTINED.items():
        r = by_lid[logicalid(n)]
        assert r.reason == f"event {logicalid(n)} (dbo.Purchases): {reason}", n
        assert (r.table_name, r.rules) == ("purchases", ["ces-decode"])
    assert ces.unrouted(bronze, src, [table]).count() == 0  # every event is in exactly one place


def test_ces_a_drop_is_taken_once_the_config_lists_the_columns(spark, ces_run):
    """The explicit change: `columns:` without payment_method. Then the events' cols neither type nor
    shape the table: the event that dropped it decodes; a column not in the config is not landed."""
    src, _, _, bronze, _ = ces_run
    kept = [{"name": n, "type": t} for n, t in PURCHASE_COLS[:-1]]
    table = no_keys(src, keys=("purchase_id",), columns=tuple(kept))
    cols = ces.columns_for(table, src, spark)
    d = ces.decode(bronze, table, cols)
    got = {r.key["purchase_id"]: r.after.asDict() for r in d.changes.collect()}
    assert sorted(got) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    assert list(got[3]) == NAMES[:-1]
    assert d.quarantine.count() == 0


def test_ces_only_unusable_events_is_a_config_error_with_the_reasons(spark, tmp_path):
    land_json(tmp_path, "e.json", [ins(4, PURCHASE_COLS + [("Quantity", "int")], Quantity="7")])
    src = ces_source(tmp_path)
    with pytest.raises(ConfigError, match=r"none usable: column names equal but for case \(quantity, Quantity\)"):
        ces.columns_for(no_keys(src), src, spark)


# ----------------------------------------------------------------------------- a CES table without keys: in the pipeline


class RecordingDP:
    """Stands in for ``pyspark.pipelines``: records the query functions instead of running them."""

    def __init__(self):
        self.queries: dict[str, object] = {}

    def _decorator(self, name):
        def register(fn):
            self.queries[name or fn.__name__] = fn
            return fn
        return register

    def materialized_view(self, fn=None, *, name=None, **_):
        return self._decorator(name) if fn is None else self._decorator(None)(fn)

    table = temporary_view = materialized_view

    def append_flow(self, *, target, name=None, **_):
        return self._decorator(name)

    def create_streaming_table(self, *_, **__):
        pass


def _ces_config(tmp_path, landing, keys_line=""):
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    (base / "pipeline.yml").write_text(
        f"name: nokeys\nsources:\n  sales:\n    format: ces\n    landing: {landing}\n    options: {{serialization: json}}\n")
    (base / "tables" / "purchases.yml").write_text(f"source: sales\ntable: dbo.Purchases\n{keys_line}")
    return base / "pipeline.yml"


def test_ces_table_without_keys_query_functions_run_no_spark_job(spark, tmp_path, monkeypatch):
    """The pipeline's query functions (silver, quarantine, dropped, gold) of a CES table without
    `keys:` plan without any Spark job: the keys were found from pkkey when the graph was defined.
    (SDP refuses a job inside a query function: ATTEMPT_ANALYSIS_IN_PIPELINE_QUERY_FUNCTION.)"""
    landing = tmp_path / "landing"
    land_json(landing, "events.json", [ins(1), ins(2), ins(9, PURCHASE_COLS + [("tier", "varchar(10)")], tier="gold")])
    cfg = load_pipeline(_ces_config(tmp_path, landing))
    (table,) = cfg.tables
    assert table.keys == ()
    src = cfg.sources["sales"]
    ces.read_bronze(spark, src, streaming=False).createOrReplaceTempView(src.bronze_table)
    dp = RecordingDP()
    monkeypatch.setattr(pipeline, "dp", dp)
    monkeypatch.setattr(gold_graph, "dp", dp)  # gold is declared by sqlcdc.gold.graph
    monkeypatch.setattr(pipeline, "_columns", {})
    monkeypatch.setattr(pipeline, "_keys", {})
    monkeypatch.setattr(ces, "_discovered", {})
    # definition time: columns and keys are looked up here (Spark jobs are allowed)
    pipeline._batch_silver(src, cfg.tables)
    pipeline.declare_gold(cfg)
    assert pipeline.keys(table) == ["purchase_id"]
    assert sorted(dp.queries) == ["decoded_sales__purchases", "dropped_sales", "gold_purchases_scd1", "gold_purchases_scd2", "quarantine_sales",
                                  "quarantine_sales__purchases", "silver_purchases"]

    sc = spark.sparkContext
    sc.setJobGroup("sqlcdc-query-functions", "query functions must not run Spark jobs")
    try:
        # the table's records decoded once, and its part of quarantine_sales: read by name
        for part in ("decoded_sales__purchases", "quarantine_sales__purchases"):
            dp.queries[part]().createOrReplaceTempView(part)
        frames = {name: dp.queries[name]() for name in ("silver_purchases", "quarantine_sales", "dropped_sales")}
        frames["silver_purchases"].createOrReplaceTempView(table.silver_table)
        for name in ("gold_purchases_scd1", "gold_purchases_scd2"):
            frames[name] = dp.queries[name]()
        jobs = sc.statusTracker().getJobIdsForGroup("sqlcdc-query-functions")
    finally:
        sc.setJobGroup("", "")
    assert jobs == []
    # and what they plan is right
    assert sorted(r.key["purchase_id"] for r in frames["silver_purchases"].collect()) == [1, 2, 9]
    assert frames["quarantine_sales"].count() == 0
    assert sorted((r.purchase_id, r.tier) for r in frames["gold_purchases_scd1"].collect()) == [
        (1, None), (2, None), (9, "gold")]


def test_job_group_probe_sees_a_collect(spark):
    """The probe above is real: a collect in the group is seen."""
    sc = spark.sparkContext
    sc.setJobGroup("sqlcdc-probe", "probe")
    try:
        spark.range(3).collect()
        jobs = sc.statusTracker().getJobIdsForGroup("sqlcdc-probe")
    finally:
        sc.setJobGroup("", "")
    assert len(jobs) >= 1


def test_validate_checks_what_a_ces_table_without_keys_needs(spark, tmp_path, monkeypatch):
    """What stops a run is a problem; a table whose events have not landed yet is a note: a run
    goes on without it and its events wait in quarantine (sqlcdc.formats.NotYetDiscovered)."""
    monkeypatch.setattr(ces, "_discovered", {})
    landing = tmp_path / "landing"
    land_json(landing, "events.json", [ins(1)])
    notes: list[str] = []
    assert v.validate(_ces_config(tmp_path / "ok", landing), spark=spark, notes=notes) == [] and notes == []

    empty = tmp_path / "empty"
    land_json(empty, "events.json", [])
    cfg = _ces_config(tmp_path / "none", empty)
    tables = tmp_path / "none" / "config" / "tables" / "purchases.yml"
    assert v.validate(cfg, spark=spark, notes=notes) == []
    assert notes == [
        f"{tables}:1: columns: table dbo.Purchases has no `columns:` and no valid CES event for it was found "
        f"in {empty}: its events wait in quarantine until one lands (or add `columns:`, name and SQL Server type "
        "per column)"]

    cols = "columns:\n  - {name: purchase_id, type: int}\n"
    cfg = _ces_config(tmp_path / "cols", empty, cols)
    tables = tmp_path / "cols" / "config" / "tables" / "purchases.yml"
    notes.clear()
    assert v.validate(cfg, spark=spark, notes=notes) == []
    assert notes == [
        f"{tables}:1: keys: table dbo.Purchases has no `keys:` and no CES event with a pkkey for it was found "
        f"in {empty}: its events wait in quarantine until one lands (or add `keys:`)"]

    missing = tmp_path / "no-such-folder"
    cfg = _ces_config(tmp_path / "missing", missing)
    [problem] = v.validate(cfg, spark=spark)
    assert problem.startswith(f"{tmp_path / 'missing' / 'config' / 'pipeline.yml'}:") and \
        problem.endswith(f"sources.sales.landing: no such folder {missing}")

    base = tmp_path / "kafka" / "config"
    (base / "tables").mkdir(parents=True)
    (base / "pipeline.yml").write_text(
        "name: k\nsources:\n  sales:\n    format: ces\n    kafka: {bootstrap_servers: 'b:9092', topic: t}\n")
    (base / "tables" / "purchases.yml").write_text(f"source: sales\ntable: dbo.Purchases\n{cols}")
    notes.clear()
    assert v.validate(base / "pipeline.yml", spark=spark, notes=notes) == []
    assert notes == [
        f"{base / 'tables' / 'purchases.yml'}:1: keys: dbo.Purchases takes its keys from the pkkey of its events in "
        "the topic when a run starts (validate does not read topics); until one lands, its events wait in quarantine"]


# ============================================================================= Qlik

V2_COLS = {
    "ID": {"ordinal": 1, "type": "INT4", "length": 0, "precision": 0, "scale": 0, "primaryKeyPosition": 1},
    "NAME": {"ordinal": 2, "type": "WSTRING", "length": 100, "precision": 0, "scale": 0, "primaryKeyPosition": 0},
    "EMAIL": {"ordinal": 3, "type": "STRING", "length": 200, "precision": 0, "scale": 0, "primaryKeyPosition": 0},
    "BALANCE": {"ordinal": 4, "type": "NUMERIC", "length": 0, "precision": 10, "scale": 2, "primaryKeyPosition": 0},
    "TIER": {"ordinal": 5, "type": "STRING", "length": 10, "precision": 0, "scale": 0, "primaryKeyPosition": 0},
}
V2_ROW = {"ID": 6, "NAME": "Fay", "EMAIL": "f@x.org", "BALANCE": "60.00", "TIER": "gold"}


def qlik_metadata(version: int, cols: dict) -> str:
    """A bare metadata message shaped like the fixture's tableVersion 2 (and the seed's fields)."""
    return json.dumps({
        "schemaId": f"s-cust-{version}",
        "lineage": {"class": "attunity.cdc.metadata", "type": "metadata", "server": "qlik-srv-1", "task": "crm-to-kafka",
                    "schema": "dbo", "table": "customers", "tableVersion": version,
                    "timestamp": f"2025-01-01T11:00:{version:02d}.000"},
        "tableStructure": {"tableColumns": cols},
        "dataSchema": "{\"type\":\"record\",\"name\":\"DataRecord\"}",
    })


def qlik_insert(n: int, data: dict, schema_id: str | None = None) -> str:
    """A bare INSERT data message with schema/table fields, like the fixture's last record."""
    headers = {"operation": "INSERT", "changeSequence": "2025010100000000000000000000000%04d" % n,
               "timestamp": "2025-01-01T11:00:%02d.000" % (n % 60), "streamPosition": "0000002a:00000010:0001",
               "transactionId": f"T{n}", "changeMask": "", "columnMask": "", "transactionEventCounter": 1,
               "transactionLastEvent": True}
    if schema_id:
        headers["externalSchemaId"] = schema_id
    return json.dumps({"schema": "dbo", "table": "customers", "data": data, "beforeData": None, "headers": headers})


def _without(d: dict, key: str) -> dict:
    return {k: v for k, v in d.items() if k != key}


QLIK_BAD_VERSIONS = {
    # version: (its columns, the data message that depends on it, the reason)
    3: ({**_without(V2_COLS, "EMAIL")}, {**_without(V2_ROW, "EMAIL"), "ID": 33},
        "it drops column(s) EMAIL of dbo.customers, which older versions have: the message is not taken to drop "
        "them; dropping a column needs an explicit config change (`columns:` in the table config without it)"),
    4: ({**V2_COLS, "tier": {"ordinal": 6, "type": "STRING", "length": 10, "precision": 0, "scale": 0, "primaryKeyPosition": 0}},
        {**V2_ROW, "ID": 40, "tier": "x"},
        "column names equal but for case (TIER, tier): Delta cannot hold both"),
    5: ({**V2_COLS, "RATE": {"ordinal": 6, "type": "NUMERIC", "length": 0, "precision": 40, "scale": 2, "primaryKeyPosition": 0}},
        {**V2_ROW, "ID": 50, "RATE": "1.50"},
        "column RATE: NUMERIC with precision 40 and scale 2 cannot be held (decimal precision 1..38, scale 0..precision)"),
    6: ({**V2_COLS, "FEE": {"ordinal": 6, "type": "NUMERIC", "length": 0, "precision": 5, "scale": 9, "primaryKeyPosition": 0}},
        {**V2_ROW, "ID": 60, "FEE": "0.5"},
        "column FEE: NUMERIC with precision 5 and scale 9 cannot be held (decimal precision 1..38, scale 0..precision)"),
    7: ({**V2_COLS, "ORDER DATE": {"ordinal": 6, "type": "DATE", "length": 0, "precision": 0, "scale": 0, "primaryKeyPosition": 0},
         "A=B": {"ordinal": 7, "type": "INT4", "length": 0, "precision": 0, "scale": 0, "primaryKeyPosition": 0}},
        {**V2_ROW, "ID": 70, "ORDER DATE": "2025-01-01", "A=B": 1},
        'column name(s) ["ORDER DATE"], ["A=B"] hold a character Delta cannot store in a column name (one of space , ; '
        '{ } ( ) newline tab = backtick); rename the column at the source'),
    8: ({**V2_COLS, "__END_AT": {"ordinal": 6, "type": "STRING", "length": 10, "precision": 0, "scale": 0, "primaryKeyPosition": 0}},
        {**V2_ROW, "ID": 80, "__END_AT": "x"},
        'column name(s) ["__END_AT"] are ones sqlcdc gives columns of its own (_op _sequence _provided _change_id '
        '_commit_time __START_AT __END_AT _value_warnings _dq_<action> __ac_*); rename the column at the source'),
}


@pytest.fixture(scope="module")
def qlik_run(spark, tmp_path_factory):
    landing = tmp_path_factory.mktemp("qlik-reshape")
    for f in QLIK_FIXTURES.iterdir():
        (landing / f.name).write_text(f.read_text())
    lines = []
    for version, (cols, row, _) in QLIK_BAD_VERSIONS.items():
        lines += [qlik_metadata(version, cols), qlik_insert(version * 10, row)]
    lines.append(qlik_insert(99, V2_ROW))  # written with version 2's columns after all of them: decoded
    (landing / "04_more.jsonl").write_text("\n".join(lines) + "\n")
    src = qlik_source(landing)
    t = qlik_table(src)
    cols = qlik.columns_for(t, src, spark)
    bronze = qlik.read_bronze(spark, src, streaming=False)
    return src, t, cols, bronze, qlik.decode(bronze, t, cols)


def test_qlik_bad_metadata_versions_do_not_reshape_the_table(qlik_run):
    src, t, cols, *_ = qlik_run
    assert [(c.name, c.spark_type, c.ordinal) for c in cols] == [
        ("ID", "int", 1), ("NAME", "string", 2), ("EMAIL", "string", 3), ("BALANCE", "decimal(10,2)", 4),
        ("TIER", "string", 5)]  # as with versions 1 and 2 alone (tests/test_qlik.py)
    assert qlik.keys_for(t, src) == ["ID"]


def test_qlik_messages_of_bad_versions_are_quarantined_good_ones_keep_every_column(qlik_run):
    src, t, cols, bronze, d = qlik_run
    silver = d.changes
    assert silver.count() == 11  # the fixture's 10 changes (tests/test_qlik.py) + ID 6
    (fay,) = [r for r in silver.collect() if r.key["ID"] == 6]
    assert fay.after.asDict() == {"ID": 6, "NAME": "Fay", "EMAIL": "f@x.org", "BALANCE": Decimal("60.00"), "TIER": "gold"}
    assert fay.sequence["commit_lsn"] == qlik_seq(99)
    q = {json.loads(r.raw)["data"]["ID"]: r for r in d.quarantine.collect()}
    assert sorted(q) == [33, 40, 50, 60, 70, 80]
    for version, (_, row, reason) in QLIK_BAD_VERSIONS.items():
        r = q[row["ID"]]
        assert r.reason == f"metadata version {version} of dbo.customers cannot type this message without reshaping " \
                           f"the table: {reason}", version
        assert (r.table_name, r.rules) == ("customers", ["decode"])
    assert qlik.unrouted(bronze, src, [t]).count() == 0  # the metadata messages themselves are skipped, not lost


def test_qlik_a_drop_is_taken_once_the_config_lists_the_columns(spark, qlik_run):
    """The explicit change: `columns:` without EMAIL. Version 3 then types its message (ID 33)."""
    src, _, _, bronze, _ = qlik_run
    listed = tuple({"name": n, "type": ty} for n, ty in
                   (("ID", "int"), ("NAME", "string"), ("BALANCE", "decimal(10,2)"), ("TIER", "string")))
    t = qlik_table(src, columns=listed)
    cols = qlik.columns_for(t, src, spark)
    assert [c.name for c in cols] == ["ID", "NAME", "BALANCE", "TIER"]
    d = qlik.decode(bronze, t, cols)
    (r,) = [r for r in d.changes.collect() if r.key["ID"] == 33]
    assert r.after.asDict() == {"ID": 33, "NAME": "Fay", "BALANCE": Decimal("60.00"), "TIER": "gold"}
    assert sorted(json.loads(x.raw)["data"]["ID"] for x in d.quarantine.collect()) == [40, 50, 60, 70, 80]


def test_qlik_only_bad_metadata_is_a_config_error_with_the_reason(spark, tmp_path):
    (tmp_path / "md.jsonl").write_text(qlik_metadata(1, QLIK_BAD_VERSIONS[4][0]) + "\n")
    src = qlik_source(tmp_path)
    with pytest.raises(ConfigError, match=r"version 1: column names equal but for case \(TIER, tier\)"):
        qlik.columns_for(qlik_table(src), src, spark)
