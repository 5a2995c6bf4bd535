"""Expectations (warn / drop / fail / quarantine, default rules), envelope validation, Databricks mapping."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from debezium_events import customer, event, line, lsn, seed_event
from dq_feed import CUSTOMERS, SOURCE, bad_lines, snapshot_lines
from sqlcdc import expectations, model
from sqlcdc.config import TableConfig
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats import base, debezium

COLUMNS = [debezium.spec_from_connect_field(f) for f in seed_event()["schema"]["fields"][1]["fields"]]
SCHEMA = "debezium-envelope.schema.json"


def bronze_of(spark, lines, file="file:/landing/001-bad.json"):
    return base.bronze_columns(spark.createDataFrame([(v, file) for v in lines], "value string, source_file string"))


def checked_of(spark, lines, table=CUSTOMERS):
    bronze = bronze_of(spark, lines)
    valid = expectations.valid_envelopes(bronze, debezium.DECODER, SCHEMA)
    return bronze, expectations.check(debezium.decode(valid, table, COLUMNS).changes, table, COLUMNS)


def test_every_table_gets_the_default_rules_and_a_config_rule_can_replace_one():
    t = TableConfig(name="orders", source=SOURCE, schema="dbo", table="orders", keys=("id", "line"))
    rules = {r.name: r for r in expectations.rules_for(t)}
    assert list(rules) == ["key_not_null", "sequence_not_null", "known_operation"]
    assert rules["key_not_null"].constraint == "key.`id` IS NOT NULL AND key.`line` IS NOT NULL"
    assert rules["known_operation"].constraint == "op IN ('INSERT', 'UPDATE', 'DELETE', 'SNAPSHOT', 'TRUNCATE')"
    assert {r.action for r in rules.values()} == {"quarantine"}

    strict = TableConfig(name="orders", source=SOURCE, schema="dbo", table="orders", keys=("id",),
                         expectations=({"name": "key_not_null", "constraint": "key.id IS NOT NULL", "action": "fail"},))
    rules = expectations.rules_for(strict)
    assert [(r.name, r.action, r.default) for r in rules] == [
        ("sequence_not_null", "quarantine", True), ("known_operation", "quarantine", True),
        ("key_not_null", "fail", False),
    ]
    with pytest.raises(ValueError, match="action 'explode'"):
        expectations.Rule("x", "true", "explode")


def test_known_bad_feed_ends_quarantined_dropped_or_warned_as_configured(spark):
    bronze, checked = checked_of(spark, snapshot_lines() + bad_lines())
    silver = expectations.passed(checked, CUSTOMERS).collect()
    assert sorted((r.key.id, r.dq_warnings) for r in silver) == [
        (1001, []), (1002, []), (1003, []), (1004, []), (1005, []), (1007, ["not_a_test_name"]),
    ]
    assert [c for c in silver[0].asDict()] == list(model.CHANGE_COLUMNS) + ["dq_warnings"]

    q = expectations.quarantined(checked, CUSTOMERS).collect()
    assert [(json.loads(r.raw)["key"]["id"], r.rules, r.table_name, r.source_name) for r in q] == [
        (1006, ["email_has_at"], "customers", "inventory")
    ]
    assert q[0].reason == "quarantined by expectation(s): email_has_at (email LIKE '%@%')"
    d = expectations.dropped(checked, CUSTOMERS).collect()
    assert [(json.loads(r.raw)["key"]["id"], r.rules) for r in d] == [(9001, ["id_in_range"])]
    assert d[0].reason == "dropped by expectation(s): id_in_range (id < 5000)"
    # lineage back to bronze
    ids = {r.record_id: r.value for r in bronze.collect()}
    assert '"id":9001' in ids[d[0].bronze_record_id] and '"id":1006' in ids[q[0].bronze_record_id]
    assert all(r.bronze_file == "file:/landing/001-bad.json" for r in q + d)


def test_a_null_constraint_passes_like_a_sql_check(spark):
    # 1005's email set to NULL: `email LIKE '%@%'` is NULL -> passes (write `email IS NOT NULL` to require it)
    no_email = line(event("c", after={**customer(1005, "j", "d"), "email": None}, commit_lsn=lsn(1, 1, 1),
                          change_lsn=lsn(1, 1, 1)))
    _, checked = checked_of(spark, [no_email])
    assert [r.dq_warnings for r in expectations.passed(checked, CUSTOMERS).collect()] == [[]]


def test_default_rules_quarantine_null_keys_null_sequences_and_unknown_operations(spark):
    _, checked = checked_of(spark, snapshot_lines())  # 1001..1004, all good
    changes = checked.select(*model.CHANGE_COLUMNS)
    k = F.col("key.id")
    broken = changes.select(
        *[
            F.when(k == 1001, F.struct(F.lit(None).cast("int").alias("id"))).otherwise(F.col("key")).alias("key")
            if c == "key" else
            F.when(k == 1002, F.lit(None)).otherwise(F.col("sequence")).alias("sequence") if c == "sequence" else
            F.when(k == 1003, F.lit("MERGE")).otherwise(F.col("op")).alias("op") if c == "op" else F.col(c)
            for c in model.CHANGE_COLUMNS
        ]
    )
    again = expectations.check(broken, CUSTOMERS, COLUMNS)
    q = sorted((json.loads(r.raw)["change_id"], r.rules) for r in expectations.quarantined(again, CUSTOMERS).collect())
    by_id = {r.key.id: r.change_id for r in changes.collect()}
    assert q == sorted([(by_id[1001], ["key_not_null"]), (by_id[1002], ["sequence_not_null"]),
                        (by_id[1003], ["known_operation"])])
    assert [r.key.id for r in expectations.passed(again, CUSTOMERS).collect()] == [1004]


def test_expect_or_fail_stops_with_table_rule_and_key(spark):
    strict = TableConfig(name="customers", source=SOURCE, schema="dbo", table="customers", keys=("id",),
                         expectations=({"name": "no_test_users", "constraint": "first_name <> 'test'", "action": "fail"},))
    _, checked = checked_of(spark, snapshot_lines() + bad_lines(), strict)
    with pytest.raises(Exception) as err:
        expectations.passed(checked, strict).collect()
    msg = str(err.value)
    assert "expect_or_fail: table customers (dbo.customers): rule(s) no_test_users (first_name <> 'test')" in msg
    assert 'failed for key {"id":1007}' in msg
    # without the failing row, the same rules pass
    _, ok = checked_of(spark, snapshot_lines(), strict)
    assert len(expectations.passed(ok, strict).collect()) == 4


def test_invalid_envelopes_are_quarantined_with_json_path_and_message(spark):
    bronze = bronze_of(spark, snapshot_lines() + bad_lines())
    q = expectations.invalid_envelopes(bronze, debezium.DECODER, SCHEMA, SOURCE).collect()
    got = sorted((r.rules, r.reason) for r in q)
    assert [g[0] for g in got] == [["debezium-envelope $.payload.op: enum"], ["debezium-envelope $: not JSON"]]
    assert got[1][1].startswith("envelope (debezium-envelope.schema.json): not JSON: Expecting ',' delimiter")
    assert got[0][1] == ("envelope (debezium-envelope.schema.json): $.payload.op: 'x' is not one of "
                         "['c', 'u', 'd', 'r', 't']")
    assert all(r.table_name is None and r.source_format == "debezium" for r in q)
    # the decoder sees the rest: 4 snapshot rows, 5 well-formed events, 1 tombstone
    assert expectations.valid_envelopes(bronze, debezium.DECODER, SCHEMA).count() == 10


def test_compiled_envelope_rules_agree_with_jsonschema(spark):
    """Differential: the Spark predicates and jsonschema agree on good and bad Debezium envelopes."""
    good = json.loads(bad_lines()[0])
    docs = [good, good["payload"]]
    for mutate in (
        lambda p: p.pop("op"), lambda p: p.update(op="z"), lambda p: p.update(op=5), lambda p: p.pop("source"),
        lambda p: p["source"].pop("table"), lambda p: p["source"].update(table=""), lambda p: p.update(after="x"),
        lambda p: p.update(ts_ms="soon"), lambda p: p.update(ts_ms=1.5), lambda p: p["source"].update(commit_lsn=7),
        # where the one cast of the document (_schema_check._Shaped) reads an object as NULL: not one
        lambda p: p.update(source="dbo.t"), lambda p: p.update(source=[p["source"]]), lambda p: p.update(source=None),
        lambda p: p.update(OP=p.pop("op")), lambda p: p.update(before=[1]), lambda p: p.update(op=None),
        lambda p: p["source"].update(table=None), lambda p: p["source"].update(table={"name": "t"}),
        lambda p: p.update(ts_ms=1.0), lambda p: p["source"].update(commit_lsn=None, schema=["dbo"]),
    ):
        for wrapped in (True, False):
            doc = json.loads(json.dumps(good))
            mutate(doc["payload"])
            docs.append(doc if wrapped else doc["payload"])
    docs += [[1, 2], "text", {"schema": {}}, {"payload": 3}, {"payload": None, **good["payload"]}, {"payload": []}, None]
    lines = [json.dumps(d) for d in docs]
    lines.append(lines[0] + lines[0])  # two documents on one line: not one JSON value
    df = expectations.with_envelope_doc(spark.createDataFrame([(v,) for v in lines], "value string")).select(
        "value", expectations.envelope_violations(SCHEMA).alias("v"))
    compiled = {r.value: not r.v for r in df.collect()}
    with_jsonschema = {v: sc.explain(SCHEMA, v) is None for v in lines}
    assert compiled == with_jsonschema
    # only the two good shapes (with schema, payload only), and each with ts_ms 1.0 (an integer to JSON Schema)
    assert sum(compiled.values()) == 4


def test_databricks_mapping_of_actions():
    assert expectations.databricks_expectations(CUSTOMERS) == {
        "expect_all_or_drop": {
            "key_not_null": "COALESCE((key.`id` IS NOT NULL), TRUE)",
            "sequence_not_null": "COALESCE((sequence IS NOT NULL), TRUE)",
            "known_operation": "COALESCE((op IN ('INSERT', 'UPDATE', 'DELETE', 'SNAPSHOT', 'TRUNCATE')), TRUE)",
            "email_has_at": "COALESCE((email LIKE '%@%'), TRUE)",
            "id_in_range": "COALESCE((id < 5000), TRUE)",
        },
        "expect_all": {"not_a_test_name": "COALESCE((after.first_name <> 'test'), TRUE)"},
    }
    strict = TableConfig(name="t", source=SOURCE, schema="dbo", table="t", keys=("id",),
                         expectations=({"name": "positive", "constraint": "amount > 0", "action": "fail"},))
    assert expectations.databricks_expectations(strict)["expect_all_or_fail"] == {
        "positive": "COALESCE((amount > 0), TRUE)"}

    calls = []

    class FakeDp:
        def __getattr__(self, name):
            def decorator(rules):
                def wrap(fn):
                    calls.append((name, sorted(rules)))
                    return fn
                return wrap
            return decorator

    def query():
        return "frame"

    assert expectations.with_databricks_expectations(query, strict, FakeDp())() == "frame"
    assert calls == [("expect_all_or_drop", ["key_not_null", "known_operation", "sequence_not_null"]),
                     ("expect_all_or_fail", ["positive"])]


def test_envelope_schema_is_used_only_where_the_decoder_does_not_validate_itself():
    from sqlcdc.formats import ces

    assert expectations.envelope_schema(debezium.DECODER) == SCHEMA
    assert expectations.envelope_schema(ces.DECODER) is None


def test_the_quarantine_flow_takes_decode_rejects_and_rule_failures_from_one_decode(spark):
    """The quarantine flow (``pipeline.table_queries``) checks the quarantine rules on the frame the
    decoder split (``Decoded.split``) instead of a second decode: a record the decoder rejects and a
    change a rule fails both land there, each with its own reason, and the plan parses the records
    as often as the decoder's rejects alone."""
    bronze = bronze_of(spark, snapshot_lines() + bad_lines())
    decoded = debezium.decode(expectations.valid_envelopes(bronze, debezium.DECODER, SCHEMA), CUSTOMERS, COLUMNS)
    assert decoded.rows is not None
    flow = expectations.quarantine_of(decoded, CUSTOMERS, COLUMNS)
    got = sorted((r.rules, r.reason, r.bronze_file) for r in flow.collect())
    assert got == [
        (["decode"], "key column id is NULL", "file:/landing/001-bad.json"),
        (["email_has_at"], "quarantined by expectation(s): email_has_at (email LIKE '%@%')", "file:/landing/001-bad.json"),
    ]
    assert [json.loads(r.raw)["key"]["id"] for r in flow.collect() if r.rules != ["decode"]] == [1006]

    def parses(df):
        return df._jdf.queryExecution().optimizedPlan().toString().count("from_json(")

    assert parses(flow) == parses(decoded.quarantine) > 0
