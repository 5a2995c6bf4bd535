"""``sqlcdc export dlt-meta``: the onboarding files in dlt-meta's format, accepted by dlt-meta's own
onboarding parser (it runs on local Spark + Delta, no workspace), and transformations that flatten
each producer's envelopes into the rows AUTO CDC applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sqlcdc.cli import main as cli_main
from sqlcdc.config import PipelineConfig, SourceConfig, TableConfig, load_pipeline
from sqlcdc.dlt_meta import build, export, transformation

FIX = Path(__file__).resolve().parent / "fixtures" / "config"


def test_cli_writes_onboarding_transformations_and_expectations(spark, tmp_path, capsys):
    out = tmp_path / "dlt-meta"
    assert cli_main(["export", "dlt-meta", "--config", str(FIX / "good" / "pipeline.yml"), "--out", str(out)]) == 0
    written = capsys.readouterr().out.split()
    assert written == [str(out / "onboarding.json"), str(out / "silver_transformations.json"),
                       str(out / "dqe" / "orders" / "silver_data_quality_expectations.json")]
    orders = load_pipeline(FIX / "good" / "pipeline.yml").table("orders")
    select, where = transformation(orders)
    assert json.loads((out / "silver_transformations.json").read_text())[1:] == [
        {"target_table": "gold_orders_scd1", "select_exp": select, "where_clause": where},
        {"target_table": "orders_history", "select_exp": select, "where_clause": where},
    ]
    assert [e.split(" AS ")[-1] for e in select] == [
        "`order_id`", "`customer_id`", "`amount`", "`status`", "`note`", "_op", "_sequence", "_commit_time"]
    assert json.loads((out / "dqe" / "orders" / "silver_data_quality_expectations.json").read_text()) == {
        "expect_or_drop": {"amount_not_negative": "amount >= 0"},
        "expect_or_quarantine": {"known_status": "status IN ('NEW', 'PAID', 'SHIPPED')"},
        "expect_or_fail": {"has_customer": "customer_id IS NOT NULL"},
    }


def test_broken_config_exports_nothing(tmp_path, capsys):
    assert cli_main(["export", "dlt-meta", "--config", str(FIX / "broken" / "pipeline.yml"), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists()
    assert "nothing was written" in capsys.readouterr().err


def test_what_dlt_meta_could_not_run_is_refused_naming_the_table(spark, tmp_path, capsys):
    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  crm:\n    format: qlik\n    landing: in\n")
    (tmp_path / "tables" / "customers.yml").write_text("table: dbo.customers\n")  # keys come from Qlik metadata
    (tmp_path / "tables" / "orders.yml").write_text(
        "table: dbo.orders\nkeys: [id]\nexpectations:\n  - {name: positive, constraint: \"amount >\"}\n")
    out = tmp_path / "o"
    assert cli_main(["export", "dlt-meta", "--config", str(tmp_path / "pipeline.yml"), "--out", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"{tmp_path / 'tables' / 'customers.yml'}:1: keys: table dbo.customers (customers) has none; "
                      "dlt-meta's silver_cdc_apply_changes needs them (sqlcdc discovers them from the producer at run "
                      "time): add `keys:`")
    assert err[1].startswith(f"{tmp_path / 'tables' / 'orders.yml'}:4: expectations[positive].constraint: ")
    assert err[-1] == "2 problem(s) dlt-meta could not run; nothing was written"
    assert not out.exists()


def test_onboarding_rows_carry_the_table_config():
    ex = build(load_pipeline(FIX / "good" / "pipeline.yml"), env="dev", catalog="main", conf_path="/Volumes/c")
    bronze = [r for r in ex.onboarding if "source_details" in r]
    silver = {r["silver_table"]: r for r in ex.onboarding if "silver_table" in r}
    # only sources with tables get a bronze flow; one silver flow per table and SCD type
    assert [(r["data_flow_id"], r["bronze_table"], r["source_format"]) for r in bronze] == [
        ("100", "bronze_inventory", "cloudFiles")]
    assert bronze[0]["bronze_reader_options"] == {"cloudFiles.format": "text"}
    assert bronze[0]["source_details"]["source_path_dev"] == str((FIX / "good" / "landing" / "inventory").resolve())
    assert sorted(silver) == ["gold_customers_scd1", "gold_orders_scd1", "orders_history"]

    o1, o2 = silver["gold_orders_scd1"], silver["orders_history"]
    assert o1["silver_cdc_apply_changes"] == {
        "keys": ["order_id"], "sequence_by": "_sequence", "scd_type": "1", "apply_as_deletes": "_op = 'DELETE'",
        "except_column_list": ["_op", "_sequence", "_commit_time", "note"], "ignore_null_updates": True,
    }
    assert o2["silver_cdc_apply_changes"]["scd_type"] == "2"
    assert o2["silver_cdc_apply_changes"]["track_history_column_list"] == ["status", "amount"]
    assert (o1["bronze_database_dev"], o1["bronze_table"], o1["silver_database_dev"]) == ("bronze", "bronze_inventory", "silver")
    assert (o1["bronze_catalog_dev"], o1["silver_catalog_dev"]) == ("main", "main")
    assert o1["silver_transformation_json_dev"] == "/Volumes/c/silver_transformations.json"
    assert o1["silver_data_quality_expectations_json_dev"] == "/Volumes/c/dqe/orders/silver_data_quality_expectations.json"
    assert o1["silver_quarantine_table"] == "quarantine_orders"
    assert o1["silver_cluster_by"] == ["customer_id"]
    assert o2["silver_table_comment"] == "Order history." and o1["silver_table_comment"] == "One row per order."
    assert o1["silver_table_properties"] == {"delta.enableChangeDataFeed": "true", "delta.appendOnly": "false", "owner": "sales"}
    assert "silver_data_quality_expectations_json_dev" not in silver["gold_customers_scd1"]
    assert ex.warnings == []


def test_kafka_and_event_hubs_sources_keep_secrets_as_references():
    cfg = load_pipeline(FIX / "good" / "pipeline.yml")
    tables = (
        TableConfig(name="a", source=cfg.sources["stream"], schema="dbo", table="a", keys=("id",), scd_types=(1,)),
        TableConfig(name="b", source=cfg.sources["hub"], schema="dbo", table="b", keys=("id",), scd_types=(1,)),
    )
    ex = build(PipelineConfig(name="p", sources=cfg.sources, tables=tables, file=cfg.file))
    kafka, hub = [r for r in ex.onboarding if "source_details" in r]
    assert kafka["source_format"] == "kafka"
    assert kafka["source_details"] == {
        "source_database": "stream", "source_table": "stream", "kafka.bootstrap.servers": "localhost:9092",
        "subscribe": "shop.ces", "kafka_source_secrets_scope_name": "sqlcdc", "kafka_source_secrets_scope_key": "kafka-password"}
    assert kafka["bronze_reader_options"] == {
        "startingOffsets": "earliest", "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"}
    assert hub["source_format"] == "eventhub"
    assert hub["source_details"]["eventhub.name"] == "qlik-changes"
    assert "EVENTHUB_CONNECTION_STRING" not in json.dumps(ex.onboarding)


def test_a_dotted_column_is_named_as_one_column():
    """dlt-meta hands ``keys`` and the column lists to ``apply_changes``, which reads each as
    ``col(name)``: ``row.id`` must be backtick-quoted or it is a struct's field."""
    cfg = load_pipeline(FIX / "good" / "pipeline.yml")
    table = TableConfig(name="a", source=cfg.sources["inventory"], schema="dbo", table="a", keys=("row.id",),
                        scd_types=(2,), track_history_column_list=("unit.price", "name"),
                        except_column_list=("e.mail",))
    ex = build(PipelineConfig(name="p", sources=cfg.sources, tables=(table,), file=cfg.file))
    (row,) = [r for r in ex.onboarding if "silver_cdc_apply_changes" in r]
    cdc = row["silver_cdc_apply_changes"]
    assert cdc["keys"] == ["`row.id`"]
    assert cdc["track_history_column_list"] == ["`unit.price`", "name"]
    assert cdc["except_column_list"] == ["_op", "_sequence", "_commit_time", "`e.mail`"]


def test_dlt_meta_onboarding_parser_accepts_the_export(spark, tmp_path):
    """dlt-meta's own OnboardDataflowspec reads our files and writes its bronze/silver dataflow specs."""
    onboard = pytest.importorskip("databricks.labs.sdp_meta.onboard_dataflowspec")
    spec = pytest.importorskip("databricks.labs.sdp_meta.dataflow_spec")
    out = tmp_path / "conf"
    export(load_pipeline(FIX / "good" / "pipeline.yml"), out, env="it", table_root=str(tmp_path / "tables"))
    o = onboard.OnboardDataflowspec(spark, {
        "onboarding_file_path": str(out / "onboarding.json"),
        "database": "sqlcdc_dltmeta_test",
        "env": "it",
        "bronze_dataflowspec_table": "bronze_dataflowspec",
        "silver_dataflowspec_table": "silver_dataflowspec",
        "bronze_dataflowspec_path": str(tmp_path / "spec" / "bronze"),
        "silver_dataflowspec_path": str(tmp_path / "spec" / "silver"),
        "import_author": "sqlcdc-tests",
        "version": "v1",
        "overwrite": "True",
    }, uc_enabled=False)
    # dlt-meta's onboarding, minus writing its spec tables to Delta (that part is storage, not parsing,
    # and costs a minute and a half on two cores): read the file, validate every row, build the specs.
    o._OnboardDataflowspec__pre_validate_onboarding_uc_names()
    rows = o._OnboardDataflowspec__get_onboarding_file_dataframe(str(out / "onboarding.json"))
    bronze = o._OnboardDataflowspec__get_bronze_dataflow_spec_dataframe(rows, "it").collect()
    assert [(r.dataFlowId, r.sourceFormat, r.targetDetails["table"]) for r in bronze] == [("100", "cloudFiles", "bronze_inventory")]
    assert r_dict(bronze[0].readerConfigOptions) == {"cloudFiles.format": "text"}

    silver_df = o._OnboardDataflowspec__get_silver_dataflow_spec_dataframe(rows, "it")
    silver = {r.targetDetails["table"]: r for r in silver_df.collect()}
    assert sorted(silver) == ["gold_customers_scd1", "gold_orders_scd1", "orders_history"]
    o = silver["orders_history"]
    assert (o.sourceDetails["database"], o.sourceDetails["table"]) == ("bronze", "bronze_inventory")
    cdc = spec.DataflowSpecUtils.get_cdc_apply_changes(o.cdcApplyChanges)
    assert (cdc.keys, cdc.sequence_by, cdc.scd_type, cdc.apply_as_deletes) == (["order_id"], "_sequence", "2", "_op = 'DELETE'")
    assert cdc.except_column_list == ["_op", "_sequence", "_commit_time", "note"]
    assert cdc.track_history_column_list == ["status", "amount"]
    assert json.loads(o.dataQualityExpectations)["expect_or_fail"] == {"has_customer": "customer_id IS NOT NULL"}
    assert o.quarantineTargetDetails["table"] == "quarantine_orders"
    assert silver["gold_customers_scd1"].dataQualityExpectations is None


def r_dict(m) -> dict:
    return dict(m) if m is not None else {}


# --- the transformations, run on envelopes of each producer --------------------------------------

COLS = ({"name": "id", "type": "int"}, {"name": "name", "type": "string"})


def _rows(spark, tmp_path, fmt: str, lines: list[str], reader=None) -> list[tuple]:
    src = SourceConfig(name="s", format=fmt, landing=str(tmp_path))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",), columns=COLS)
    select, where = transformation(table)
    f = tmp_path / "events.txt"
    f.write_text("\n".join(lines) + "\n")
    df = reader(str(f)) if reader else spark.read.text(str(f))
    rows = df.selectExpr(*select).where(" AND ".join(f"({w})" for w in where)).orderBy("_sequence").collect()
    return [(r.id, r.name, r._op, r._sequence) for r in rows]


def test_debezium_envelopes_with_and_without_schema(spark, tmp_path):
    def src(table, commit, change, serial):
        return {"schema": "dbo", "table": table, "commit_lsn": commit, "change_lsn": change,
                "event_serial_no": serial, "ts_ms": 1700000000000}

    lines = [
        json.dumps({"schema": {"type": "struct"}, "payload": {
            "before": None, "after": {"id": 1, "name": "ann"}, "op": "c",
            "source": src("customers", "00000025:00000d08:0025", "00000025:00000d08:0003", 1)}}),
        json.dumps({"before": {"id": 1, "name": "ann"}, "after": None, "op": "d",
                    "source": src("customers", "00000026:00000010:0002", "00000026:00000010:0001", "1")}),
        "null",  # tombstone
        json.dumps({"before": None, "after": {"id": 7, "name": "x"}, "op": "c",
                    "source": src("orders", "00000027:00000010:0002", "00000027:00000010:0001", 1)}),
        json.dumps({"before": None, "after": {"id": 2, "name": "bob"}, "op": "r",
                    "source": src("customers", "00000024:00000001:0001", None, 0)}),
    ]
    assert _rows(spark, tmp_path, "debezium", lines) == [
        (2, "bob", "SNAPSHOT", "00000024:00000001:0001:00000000:00000000:0000:0000000000"),
        (1, "ann", "INSERT", "00000025:00000d08:0025:00000025:00000d08:0003:0000000001"),
        (1, "ann", "DELETE", "00000026:00000010:0002:00000026:00000010:0001:0000000001"),
    ]


def test_qlik_wrapped_messages(spark, tmp_path):
    def msg(op, seq, data, before=None, typ="DT"):
        return json.dumps({"magic": "atMSG", "type": typ, "message": {
            "data": data, "beforeData": before,
            "headers": {"operation": op, "changeSequence": seq, "transactionEventCounter": 1}}})

    lines = [
        msg("UPDATE", "20240101000000000000000000002", {"id": "3", "name": "cy2"}, {"id": "3", "name": "cy"}),
        msg("REFRESH", "", {"id": "3", "name": "cy"}),
        json.dumps({"magic": "atMSG", "type": "MD", "message": {"tableStructure": {}}}),
        msg("DELETE", "20240101000000000000000000003", {"id": "3", "name": "cy2"}),
    ]
    assert _rows(spark, tmp_path, "qlik", lines) == [
        (3, "cy", "SNAPSHOT", "0::0000000001"),
        (3, "cy2", "UPDATE", "1:20240101000000000000000000002:0000000001"),
        (3, "cy2", "DELETE", "1:20240101000000000000000000003:0000000001"),
    ]


def test_ces_events(spark, tmp_path):
    def event(op, lsn, seq, old, cur, tbl="customers"):
        data = {"eventsource": {"db": "db1", "schema": "dbo", "tbl": tbl},
                "eventrow": {"old": json.dumps(old), "current": json.dumps(cur)}}
        return json.dumps({"operation": op, "logicalid": f"9c8d:{lsn}:{seq}", "time": "2025-03-14T16:45:20.650Z",
                           "data": json.dumps(data)})

    lines = [
        event("INS", "0000002C00000300017C", "00000000000000000001", {}, {"id": "5", "name": "eve"}),
        event("DEL", "0000002C00000400000A", "00000000000000000001", {"id": "5", "name": "eve"}, {}),
        event("INS", "0000002C00000300017C", "00000000000000000002", {}, {"id": "9", "name": "z"}, tbl="orders"),
    ]
    assert _rows(spark, tmp_path, "ces", lines) == [
        (5, "eve", "INSERT", "0000002C00000300017C:00000000000000000001"),
        (5, "eve", "DELETE", "0000002C00000400000A:00000000000000000001"),
    ]


def test_change_table_exports(spark, tmp_path):
    lines = [
        "__$start_lsn,__$seqval,__$operation,__$update_mask,id,name,__$command_id",
        "0x0000002C00000300017C,0x0000002C00000300017B,2,0x03,8,hal,1",
        "0x0000002C00000400000A,0x0000002C000004000009,3,0x02,8,hal,1",
        "0x0000002C00000400000A,0x0000002C000004000009,4,0x02,8,hank,1",
    ]
    rows = _rows(spark, tmp_path, "cdc_ct", lines, reader=lambda p: spark.read.option("header", "true").csv(p))
    assert rows == [
        (8, "hal", "INSERT", "0x0000002c00000300017c:0000000001"),
        (8, "hank", "UPDATE", "0x0000002c00000400000a:0000000001"),
    ]


def test_rules_on_the_canonical_change_are_flagged():
    src = SourceConfig(name="s", format="debezium", landing=None)
    t = TableConfig(name="t", source=src, schema="dbo", table="t", keys=("id",), file="t.yml",
                    expectations=({"name": "pos", "constraint": "after.amount > 0", "action": "warn"},
                                  {"name": "ok", "constraint": "amount > 0", "action": "warn"}))
    ex = build(PipelineConfig(name="p", sources={"s": src}, tables=(t,), file="p.yml"))
    assert ex.warnings == [
        "t.yml: expectations[pos]: names the canonical change (after./before./op); "
        "dlt-meta sees the flattened columns (amount, _op, _sequence, _commit_time)"]
    assert ex.expectations == {"dqe/t/silver_data_quality_expectations.json": {
        "expect": {"pos": "after.amount > 0", "ok": "amount > 0"}}}
