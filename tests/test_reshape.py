"""sqlcdc.reshape: when a table's discovered columns change between runs, its views are rebuilt.
The whole path (the definitions ask, ``sqlcdc run`` drops, SDP creates the tables again in the same
run) runs in tests/test_e2e_pipeline.py's second run (a Qlik ``tableVersion`` adding TIER); here,
the change detection and both sides of the exchange (``cli.run._run`` answering a real client:
tests/test_run_output.py)."""

import json
import os
import threading

import pytest

from sqlcdc import reshape


def test_a_new_table_version_column_is_a_change():
    assert reshape.column_change([("ID", "int"), ("NAME", "string")],
                                 [("ID", "int"), ("NAME", "string"), ("TIER", "string")]) == "added TIER"


def test_spelling_of_the_same_type_is_not_a_change():
    assert reshape.column_change([("ID", "int"), ("AMOUNT", "decimal(10,2)")],
                                 [("ID", "INTEGER"), ("AMOUNT", "DECIMAL(10, 2)")]) is None


def test_removed_and_retyped_columns_are_named():
    got = reshape.column_change([("ID", "int"), ("OLD", "string")], [("ID", "bigint")])
    assert got == "removed OLD; retyped ID int->bigint"


def _silver(spark, name, after_ddl):
    spark.sql(f"DROP TABLE IF EXISTS `{name}`")
    spark.sql(f"CREATE TABLE `{name}` (op STRING, after STRUCT<{after_ddl}>) USING delta")


def test_the_run_drops_the_tables_of_a_changed_silver_and_leaves_the_rest(spark):
    _silver(spark, "silver_rs_customers", "ID: INT, NAME: STRING")
    _silver(spark, "decoded_rs_customers", "ID: INT, NAME: STRING")
    _silver(spark, "silver_rs_orders", "ID: INT, `unit.price`: DECIMAL(10,2)")
    checks = [
        reshape.Check("dbo.customers", "silver_rs_customers", ("decoded_rs_customers", "silver_rs_customers"),
                      (("ID", "int"), ("NAME", "string"), ("TIER", "string"))),
        reshape.Check("dbo.orders", "silver_rs_orders", ("silver_rs_orders",),
                      (("ID", "INTEGER"), ("unit.price", "DECIMAL(10, 2)"))),
        reshape.Check("dbo.new", "silver_rs_never_run", ("silver_rs_never_run",), (("ID", "int"),)),
    ]
    line = reshape.REQUEST + json.dumps([c.__dict__ for c in checks])
    reply, said = reshape.answer(spark, line)
    assert json.loads(reply) == ["dbo.customers"] and reply.endswith("\n")
    assert said == ["the columns of dbo.customers changed (added TIER): "
                    "rebuilding decoded_rs_customers, silver_rs_customers"]
    exists = {n: spark.catalog.tableExists(n) for n in ("silver_rs_customers", "decoded_rs_customers", "silver_rs_orders")}
    assert exists == {"silver_rs_customers": False, "decoded_rs_customers": False, "silver_rs_orders": True}


def test_a_debezium_silver_whose_envelopes_gained_a_column_is_dropped_with_its_stream_progress(spark, tmp_path):
    """A streaming silver's ``after`` struct cannot change in place, not even under a full refresh
    (``DELTA_CANNOT_UPDATE_STRUCT_FIELD``): the run after the connector's schema gained ``tier``
    failed. The run drops the table and its checkpoint, so SDP streams all of bronze into it anew;
    a table whose columns are spelled otherwise but store the same is left alone."""
    import sys
    from pathlib import Path

    from sqlcdc.config import SourceConfig, TableConfig

    sys.path.insert(0, str(Path(__file__).parent))
    from debezium_events import seed_event

    landing = tmp_path / "in"
    landing.mkdir()
    ev = seed_event()
    for f in ev["schema"]["fields"]:
        if f["field"] in ("before", "after"):
            f["fields"].append({"type": "string", "optional": True, "field": "tier"})
    (landing / "a.json").write_text(json.dumps(seed_event()) + "\n" + json.dumps(ev) + "\n")
    src = SourceConfig(name="inv", format="debezium", landing=str(landing))
    grown = TableConfig(name="rs_dbz_customers", source=src, schema="dbo", table="customers", keys=("id",))
    same = TableConfig(name="rs_dbz_orders", source=src, schema="dbo", table="orders", keys=("id",), columns=(
        {"name": "id", "type": "int32"}, {"name": "code", "type": "varchar(20)"},
        {"name": "amount", "type": "decimal(10, 2)"}, {"name": "at", "type": "datetime2(6)"}))
    _silver(spark, grown.silver_table, "id: INT, first_name: STRING, last_name: STRING, email: STRING")
    _silver(spark, same.silver_table, "id: INT, code: STRING, amount: DECIMAL(10,2), at: TIMESTAMP_NTZ")
    checkpoints = tmp_path / "_checkpoints"
    for t in (grown, same):
        (checkpoints / "spark_catalog" / "default" / t.silver_table / "offsets").mkdir(parents=True)
    said = []
    assert reshape.drop_streaming_changed(spark, [grown, same], checkpoints, echo=said.append) == [grown.silver_table]
    assert said == [f"the columns of dbo.customers changed (added tier): {grown.silver_table} is recomputed from bronze"]
    assert not spark.catalog.tableExists(grown.silver_table) and spark.catalog.tableExists(same.silver_table)
    assert sorted(p.name for p in (checkpoints / "spark_catalog" / "default").iterdir()) == [same.silver_table]


def test_the_definitions_ask_on_stdout_and_read_the_answer_from_the_runs_named_pipe(monkeypatch, capsys, tmp_path):
    check = reshape.Check("dbo.customers", "silver_c", ("silver_c",), (("ID", "int"),))
    monkeypatch.delenv(reshape.CHANNEL_ENV, raising=False)
    assert reshape.ask_run([check]) is None  # no sqlcdc run to answer: nothing asked
    assert capsys.readouterr().out == ""

    channel = tmp_path / "answer.fifo"
    os.mkfifo(channel)
    monkeypatch.setenv(reshape.CHANNEL_ENV, str(channel))

    def run_side(reply: str) -> threading.Thread:  # what sqlcdc run does on the request line
        def write():
            with open(channel, "w") as fh:  # waits for the definitions to open the pipe
                fh.write(reply)
        t = threading.Thread(target=write, daemon=True)
        t.start()
        return t

    writer = run_side('["dbo.customers"]\n')
    assert reshape.ask_run([check]) == ["dbo.customers"]
    writer.join(60)
    asked = capsys.readouterr().out
    assert asked.startswith(reshape.REQUEST) and asked.endswith("\n")
    assert json.loads(asked[len(reshape.REQUEST):]) == [
        {"table": "dbo.customers", "silver": "silver_c", "drop": ["silver_c"], "columns": [["ID", "int"]]}]

    writer = run_side("")  # the run closed the pipe without an answer: the definitions say so
    with pytest.raises(RuntimeError, match="did not answer the definitions' reshape check through"):
        reshape.ask_run([check])
    writer.join(60)

