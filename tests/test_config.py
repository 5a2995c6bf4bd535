"""The config loader: every field of the schemas lands in the dataclasses; every problem is reported at
once with file, line and field; adding a table is adding one YAML file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sqlcdc.assets import SCHEMAS_DIR
from sqlcdc.config import ConfigError, load_pipeline

FIX = Path(__file__).resolve().parent / "fixtures" / "config"
ROOT = Path(__file__).resolve().parent.parent


def _problems(path) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_pipeline(path)
    return e.value.problems


def _write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return folder / "pipeline.yml"


PIPELINE = "name: shop\nsources:\n  inventory:\n    format: debezium\n    landing: landing\n"


def test_good_config_loads_every_field():
    cfg = load_pipeline(FIX / "good" / "pipeline.yml")
    assert cfg.name == "shop"
    assert cfg.description == "Orders and customers from the shop database."
    assert sorted(cfg.sources) == ["hub", "inventory", "stream"]

    inv = cfg.sources["inventory"]
    assert (inv.format, inv.file_format, inv.location_kind) == ("debezium", "json", "files")
    assert inv.landing == str((FIX / "good" / "landing" / "inventory").resolve())
    assert inv.bronze_table == "bronze_inventory" and inv.quarantine_table == "quarantine_inventory"

    stream = cfg.sources["stream"]
    assert stream.location_kind == "kafka" and stream.landing is None
    assert stream.kafka["topic"] == "shop.ces"
    assert stream.kafka["password_secret"] == {"scope": "sqlcdc", "key": "kafka-password"}
    hub = cfg.sources["hub"]
    assert hub.location_kind == "event_hubs"
    assert hub.event_hubs["connection_string_secret"] == {"env": "EVENTHUB_CONNECTION_STRING"}

    assert [t.name for t in cfg.tables] == ["customers", "orders"]
    orders = cfg.table("orders")
    assert (orders.schema, orders.table, orders.keys) == ("sales", "orders", ("order_id",))
    assert orders.column_names == ("order_id", "customer_id", "amount", "status", "note")
    assert orders.scd_types == (1, 2)
    assert orders.sequence_by == "_sequence"
    assert orders.except_column_list == ("note",) and orders.column_list is None
    assert orders.track_history_column_list == ("status", "amount")
    assert orders.ignore_null_updates is True
    assert (orders.silver_table, orders.scd1_table, orders.scd2_table) == (
        "silver_orders", "gold_orders_scd1", "orders_history")
    assert orders.cluster_by == ("customer_id",) and orders.partition_cols is None
    # defaults merge under the table's own; YAML booleans become Delta's "true"/"false"
    assert orders.table_properties == {"delta.enableChangeDataFeed": "true", "delta.appendOnly": "false", "owner": "sales"}
    assert orders.comment_for("scd2") == "Order history."
    assert orders.comment_for("scd1") == "One row per order."  # falls back to description
    assert orders.expectations_file == "../expectations/orders.yml"


def test_expectations_inline_and_from_file_are_normalized_with_their_origin():
    orders = load_pipeline(FIX / "good" / "pipeline.yml").table("orders")
    assert list(orders.expectations) == [
        {"name": "amount_not_negative", "constraint": "amount >= 0", "action": "drop",
         "description": "Refunds come as separate rows."},
        {"name": "known_status", "constraint": "status IN ('NEW', 'PAID', 'SHIPPED')", "action": "quarantine"},
        {"name": "has_customer", "constraint": "customer_id IS NOT NULL", "action": "fail"},
    ]
    good = FIX / "good"
    assert list(orders.expectation_sources) == [
        f"{good / 'tables' / 'orders.yml'}:25",
        f"{good / 'tables' / '..' / 'expectations' / 'orders.yml'}:4",
        f"{good / 'tables' / '..' / 'expectations' / 'orders.yml'}:6",
    ]


def test_minimal_table_is_three_lines_and_gets_the_defaults():
    customers = load_pipeline(FIX / "good" / "pipeline.yml").table("customers")
    assert (FIX / "good" / "tables" / "customers.yml").read_text().count("\n") == 3
    assert (customers.name, customers.schema, customers.table, customers.keys) == ("customers", "dbo", "customers", ("id",))
    assert customers.scd_types == (1,)  # from defaults
    assert customers.table_properties == {"delta.enableChangeDataFeed": "true"}
    assert (customers.silver_table, customers.scd1_table, customers.scd2_table) == (
        "silver_customers", "gold_customers_scd1", "gold_customers_scd2")
    assert customers.expectations == () and customers.comment_for("silver") is None


def test_adding_a_table_is_one_new_yaml_file(tmp_path):
    shutil.copytree(FIX / "good", tmp_path / "cfg")
    before = load_pipeline(tmp_path / "cfg" / "pipeline.yml")
    (tmp_path / "cfg" / "tables" / "payments.yml").write_text("source: inventory\ntable: dbo.Payments\nkeys: [payment_id]\n")
    after = load_pipeline(tmp_path / "cfg" / "pipeline.yml")
    assert [t.name for t in before.tables] == ["customers", "orders"]
    assert [t.name for t in after.tables] == ["customers", "orders", "payments"]
    assert after.table("payments").keys == ("payment_id",)
    assert after.table("payments").table == "Payments"


def test_each_table_knows_the_other_tables_of_its_source(tmp_path):
    """``peers``: what a decoder's routing needs to refuse a record two tables could take."""
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE + "  crm:\n    format: debezium\n    landing: crm\n",
        "tables/a.yml": "source: inventory\ntable: dbo.a\nkeys: [id]\n",
        "tables/b.yml": "source: inventory\ntable: sales.a\nname: sales_a\nkeys: [id]\n",
        "tables/c.yml": "source: crm\ntable: dbo.c\nkeys: [id]\n",
    })
    cfg = load_pipeline(path)
    assert {t.name: [p.name for p in t.peers] for t in cfg.tables} == {"a": ["sales_a"], "sales_a": ["a"], "c": []}
    assert "peers" not in repr(cfg.table("a"))
    (tmp_path / "tables" / "d.yml").write_text("source: inventory\ntable: DBO.A\nname: again\nkeys: [id]\n")
    assert _problems(path) == [f"{tmp_path / 'tables' / 'd.yml'}:1: table: DBO.A of source inventory is also "
                               f"onboarded by {tmp_path / 'tables' / 'a.yml'}"]


def test_a_ces_table_may_be_onboarded_once_per_database(tmp_path):
    files = {"pipeline.yml": "name: p\nsources:\n  ev:\n    format: ces\n    landing: l\n",
             "tables/a.yml": "table: dbo.t\nkeys: [id]\noptions: {database: one}\n",
             "tables/b.yml": "table: dbo.t\nname: t_two\nkeys: [id]\noptions: {database: Two}\n"}
    assert [t.name for t in load_pipeline(_write(tmp_path, files)).tables] == ["t", "t_two"]
    # a table without a database takes the events of every database: also those of a.yml's
    (tmp_path / "tables" / "c.yml").write_text("table: dbo.T\nname: t_all\nkeys: [id]\n")
    assert _problems(tmp_path / "pipeline.yml") == [
        f"{tmp_path / 'tables' / 'c.yml'}:1: table: dbo.T of source ev is also onboarded by {tmp_path / 'tables' / 'a.yml'}"]


def test_a_change_table_is_onboarded_once_per_capture_instance(tmp_path):
    """Change-table files are routed by capture instance: one table under two (a schema change in
    progress) is two tables; two tables with one capture instance would take the same files."""
    table = "keys: [id]\ncolumns: [{name: id, type: int}]\n"
    files = {"pipeline.yml": "name: p\nsources:\n  ct:\n    format: cdc_ct\n    landing: l\n",
             "tables/a.yml": "table: dbo.orders\n" + table,
             "tables/b.yml": "table: dbo.orders\nname: orders_v2\noptions: {capture_instance: dbo_orders_v2}\n" + table}
    assert [t.name for t in load_pipeline(_write(tmp_path, files)).tables] == ["orders", "orders_v2"]
    # dbo.a_b and dbo_a.b: both capture instance dbo_a_b by default, the second says so in any case
    (tmp_path / "tables" / "c.yml").write_text("table: dbo.a_b\n" + table)
    (tmp_path / "tables" / "d.yml").write_text("table: dbo_a.b\nname: dbo_a_b2\noptions: {capture_instance: DBO_A_B}\n" + table)
    assert _problems(tmp_path / "pipeline.yml") == [
        f"{tmp_path / 'tables' / 'd.yml'}:1: table: dbo_a.b of source ct is also onboarded by "
        f"{tmp_path / 'tables' / 'c.yml'} (as dbo.a_b: the same records)"]


def test_broken_config_lists_every_problem_with_file_line_and_field():
    broken = FIX / "broken" / "tables"
    assert _problems(FIX / "broken" / "pipeline.yml") == [
        f"{broken / 'orders.yml'}:3: keys: expected a list, got a string ('order_id')",
        f"{broken / 'orders.yml'}:4: scd_types[1]: 3 is not one of 1, 2",
        f"{broken / 'orders.yml'}:5: keyz: unknown field (did you mean 'keys'?)",
        f"{broken / 'payments.yml'}:1: table: required field missing",
        f"{broken / 'payments.yml'}:3: ignore_null_updates: expected true or false, got a string ('yes')",
    ]


def test_pipeline_and_table_problems_are_reported_together(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": "name: shop\nsources:\n  inventory:\n    format: debzium\n",
        "tables/a.yml": "table: dbo.a\nkeys: [id]\nscd_types: 2\n",
    })
    assert _problems(path) == [
        f"{path}:4: sources.inventory.format: 'debzium' is not one of 'cdc_ct', 'ces', 'debezium', 'debezium_flat', 'qlik'",
        f"{tmp_path / 'tables' / 'a.yml'}:3: scd_types: expected a list, got a number (2)",
    ]


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = _write(tmp_path, {"pipeline.yml": PIPELINE, "tables/a.yml": "table: dbo.a\nkeys: [id\n"})
    (problem,) = _problems(path)
    assert problem.startswith(f"{tmp_path / 'tables' / 'a.yml'}:3: not valid YAML:")


def test_rules_a_schema_cannot_say(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE,
        "tables/a.yml": (
            "table: dbo.a\n"
            "keys: [id, nope]\n"
            "columns:\n"
            "  - {name: id, type: int}\n"
            "  - {name: v, type: string}\n"
            "scd_types: [1]\n"
            "track_history_column_list: [v]\n"
            "partition_cols: [v]\n"
            "cluster_by: [id]\n"
            "expectations:\n"
            "  - {name: r, constraint: v IS NOT NULL}\n"
            "  - {name: r, constraint: id > 0}\n"
        ),
    })
    a = tmp_path / "tables" / "a.yml"
    assert _problems(path) == [
        f"{a}:8: partition_cols: give partition_cols or cluster_by, not both",
        f"{a}:7: track_history_column_list: applies to SCD type 2 only, but scd_types is [1]",
        f"{a}:2: keys[1]: unknown column 'nope' (columns: id, v)",
        f"{a}:12: expectations: rule name 'r' is used twice (first at {a}:11)",
    ]


def test_sequence_by_other_than_the_lsn_order_is_refused_naming_file_and_line(tmp_path):
    # Gold orders by the canonical sequence; an expression would be accepted by the loader and
    # then fail (or be ignored) at run time, so the loader refuses it. `_sequence` is the default.
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE,
        "tables/a.yml": "table: dbo.a\nkeys: [id]\nsequence_by: commit_time\n",
        "tables/b.yml": "table: dbo.b\nkeys: [id]\nsequence_by: _sequence\n",
    })
    (problem,) = _problems(path)
    assert problem.startswith(f"{tmp_path / 'tables' / 'a.yml'}:3: sequence_by: ordering by 'commit_time' is not supported")


def test_a_column_name_delta_cannot_store_is_refused_naming_file_line_and_column(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE,
        "tables/a.yml": "table: dbo.a\nkeys: [id]\ncolumns:\n  - {name: id, type: int}\n  - {name: 'Order Date', type: date}\n",
    })
    (problem,) = _problems(path)
    assert problem.startswith(f"{tmp_path / 'tables' / 'a.yml'}:5: columns[1].name: 'Order Date' holds a character "
                              "Delta cannot store")


@pytest.mark.parametrize("name", ["_op", "_SEQUENCE", "__START_AT", "_dq_drop", "__ac_open"])
def test_a_column_named_as_one_of_sqlcdcs_own_is_refused_naming_file_line_and_column(tmp_path, name):
    """Gold's apply frame sets _op/_sequence/... beside the data columns and SCD2 adds __START_AT/
    __END_AT: a data column so named made every reference ambiguous and stopped the run at gold."""
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE,
        "tables/a.yml": f"table: dbo.a\nkeys: [id]\ncolumns:\n  - {{name: id, type: int}}\n  - {{name: {name}, type: string}}\n",
    })
    (problem,) = _problems(path)
    assert problem.startswith(f"{tmp_path / 'tables' / 'a.yml'}:5: columns[1].name: {name!r} is a name sqlcdc gives a "
                              "column of its own (_op _sequence")


def test_every_column_sqlcdc_sets_beside_data_columns_is_reserved():
    """A meta column added to the apply frame, SCD2 gold or the expectations frame must be a name no
    data column can have (sqlcdc.names.reserved), or a source column of that name breaks gold."""
    from sqlcdc import expectations, model, names
    from sqlcdc.gold import handoff, spec
    from sqlcdc.values import VALUE_WARNINGS_COL

    own = [*model.APPLY_META_COLUMNS, spec.START_AT, spec.END_AT, VALUE_WARNINGS_COL, handoff.RANK_COL,
           *(f"_dq_{a}" for a in expectations.ACTIONS)]
    assert [n for n in own if not names.reserved(n)] == []
    assert not names.reserved("op") and not names.reserved("sequence") and not names.reserved("ac_open")


def test_sources_one_location_a_topic_and_no_literal_secrets(tmp_path):
    path = _write(tmp_path, {"pipeline.yml": (
        "name: shop\n"
        "sources:\n"
        "  both:\n"
        "    format: debezium\n"
        "    landing: x\n"
        "    kafka:\n"
        "      bootstrap_servers: b:9092\n"
        "      topic: t\n"
        "  notopic:\n"
        "    format: qlik\n"
        "    kafka:\n"
        "      bootstrap_servers: b:9092\n"
        "      options:\n"
        "        kafka.sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule required password=\"hunter2\";\n"
        "        maxOffsetsPerTrigger: 1000\n"
        "  ok:\n"
        "    format: ces\n"
        "    kafka:\n"
        "      bootstrap_servers: b:9092\n"
        "      topic: t\n"
        "      options:\n"
        "        sas_token: '{{secrets/shop/sas}}'\n"
        "        password: ${SHOP_PASSWORD}\n"
    )})
    assert _problems(path) == [
        f"{path}:6: sources.both: give one location (landing, kafka or event_hubs), not landing and kafka",
        f"{path}:11: sources.notopic.kafka: give exactly one of topic, topics, topic_pattern (found none)",
        f"{path}:14: sources.notopic.kafka.options.kafka.sasl.jaas.config: looks like a secret written into "
        "the config; reference it instead ({{secrets/<scope>/<key>}} or ${ENV_VAR}, or a *_secret: {scope, key} field)",
    ]


def test_secret_reference_fields_refuse_values(tmp_path):
    path = _write(tmp_path, {"pipeline.yml": (
        "name: shop\nsources:\n  k:\n    format: debezium\n    kafka:\n      bootstrap_servers: b:9092\n"
        "      topic: t\n      password_secret: hunter2\n"
    )})
    assert _problems(path) == [f"{path}:8: sources.k.kafka.password_secret: expected a mapping, got a string ('hunter2')"]


def test_expectations_file_problems_point_into_that_file(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE,
        "tables/a.yml": "table: dbo.a\nkeys: [id]\nexpectations_file: ../rules/a.yml\n",
        "rules/a.yml": "expectations:\n  - name: r1\n    constraint: id > 0\n    action: stop\n",
        "tables/b.yml": "table: dbo.b\nkeys: [id]\nexpectations_file: missing.yml\n",
    })
    rules = tmp_path / "tables" / ".." / "rules" / "a.yml"
    assert _problems(path) == [
        f"{rules}:4: expectations[0].action: 'stop' is not one of 'warn', 'drop', 'fail', 'quarantine'",
        f"{tmp_path / 'tables' / 'b.yml'}:3: expectations_file: no such file {tmp_path / 'tables' / 'missing.yml'}",
    ]


def test_dlt_meta_style_expectations_file(tmp_path):
    shutil.copytree(FIX / "good", tmp_path / "cfg")
    t = tmp_path / "cfg" / "tables" / "orders.yml"
    t.write_text(t.read_text().replace("../expectations/orders.yml", "../expectations/dlt_meta_style.json"))
    orders = load_pipeline(tmp_path / "cfg" / "pipeline.yml").table("orders")
    assert [(r["name"], r["constraint"], r["action"]) for r in orders.expectations] == [
        ("amount_not_negative", "amount >= 0", "drop"),
        ("amount_small", "amount < 100000", "warn"),
        ("valid_id", "order_id IS NOT NULL", "drop"),
    ]


def test_the_projects_own_config_loads():
    cfg = load_pipeline(ROOT / "config" / "pipeline.yml")
    assert cfg.tables, "config/tables/ should onboard at least one table"


@pytest.mark.parametrize("schema", ["pipeline-config.schema.json", "table-config.schema.json", "expectations.schema.json"])
def test_every_config_field_has_a_description(schema):
    doc = json.loads((SCHEMAS_DIR / schema).read_text())
    missing = []

    def described(sub):
        if "description" in sub:
            return True
        if "$ref" in sub:  # described where it is defined
            file, _, pointer = sub["$ref"].partition("#")
            target = json.loads((SCHEMAS_DIR / file).read_text()) if file else doc
            for part in pointer.strip("/").split("/"):
                target = target[part]
            return "description" in target
        return False

    def walk(node, path):
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                if not described(sub):
                    missing.append(f"{path}.{name}")
                walk(sub, f"{path}.{name}")
            for key in ("$defs", "items", "additionalProperties"):
                if isinstance(node.get(key), dict):
                    if key == "$defs":
                        for n, d in node[key].items():
                            walk(d, f"{path}#{n}")
                    else:
                        walk(node[key], path + "[]")
            for key in ("oneOf", "anyOf"):
                for i, d in enumerate(node.get(key) or []):
                    walk(d, f"{path}|{i}")

    walk(doc, "")
    assert doc.get("description") and not missing, missing


# --- sqlcdc init: onboarding a table writes exactly one new file ---------------------------------

def _init(*argv: str) -> int:
    from sqlcdc.cli import main

    return main(["init", *argv])


def test_init_from_flags_writes_a_minimal_config_that_loads(tmp_path, capsys):
    path = _write(tmp_path, {"pipeline.yml": PIPELINE})
    assert _init("--config", str(path), "--source", "inventory", "--table", "sales.Orders", "--keys", "order_id, line",
                 "--scd", "2", "--no-input") == 0
    out = tmp_path / "tables" / "orders.yml"
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_text().splitlines()[:4] == [
        "source: inventory", "table: sales.Orders", "keys: [order_id, line]", "scd_types: [2]"]
    (t,) = load_pipeline(path).tables
    assert (t.name, t.schema, t.table, t.keys, t.scd_types) == ("orders", "sales", "Orders", ("order_id", "line"), (2,))


def test_init_refuses_to_overwrite_and_checks_what_it_writes(tmp_path, capsys):
    path = _write(tmp_path, {"pipeline.yml": PIPELINE, "tables/orders.yml": "source: inventory\ntable: dbo.orders\nkeys: [id]\n"})
    assert _init("--config", str(path), "--source", "inventory", "--table", "dbo.orders", "--keys", "x", "--no-input") == 1
    assert "already exists; not overwritten" in capsys.readouterr().err
    assert (tmp_path / "tables" / "orders.yml").read_text() == "source: inventory\ntable: dbo.orders\nkeys: [id]\n"

    assert _init("--config", str(path), "--source", "nope", "--table", "a.b.c", "--keys", "k", "--scd", "3", "--no-input") == 1
    assert capsys.readouterr().err.splitlines() == [
        f"source: unknown source 'nope'; {path} defines inventory",
        "table: 'a.b.c': expected schema.table or table",
        "scd_types[0]: 3 is not one of 1, 2",
    ]
    assert _init("--config", str(path), "--table", "dbo.x", "--no-input") == 2
    assert "missing --source, --keys" in capsys.readouterr().err


def test_init_asks_on_a_terminal(tmp_path):
    import os
    import subprocess
    import sys

    path = _write(tmp_path, {"pipeline.yml": PIPELINE})
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from sqlcdc.cli import main; sys.exit(main())", "init", "--config", str(path)],
        stdin=slave, stdout=slave, stderr=subprocess.PIPE,
    )
    os.close(slave)
    # source: accept the only one offered; table; keys; SCD types: default
    os.write(master, b"\ndbo.Payments\npayment_id\n\n")
    assert proc.wait(timeout=60) == 0
    prompts = proc.stderr.read()  # without GNU readline, input() writes its prompt to stderr
    screen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    os.close(master)
    screen += prompts
    assert b"source (inventory) [inventory]: " in screen and b"keys (comma-separated): " in screen
    (t,) = load_pipeline(path).tables
    assert (t.name, t.source.name, t.keys, t.scd_types) == ("payments", "inventory", ("payment_id",), (1, 2))


def test_docs_document_every_field_with_the_schemas_words():
    import importlib.util

    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docs = (ROOT / "docs" / "config.md").read_text()
    assert module.reference_markdown() in docs, (
        "docs/config.md is stale: regenerate its field reference with `python scripts/config_reference.py`")
    for field_name in ("sources.<name>.kafka.password_secret", "expectations_file", "cluster_by", "comments.scd2",
                       "columns[].description", "defaults.table_properties"):
        assert f"`{field_name}`" in docs


def test_keys_required_where_the_producer_does_not_carry_them(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": "name: p\nsources:\n  dbz:\n    format: debezium\n  ct:\n    format: cdc_ct\n  q:\n    format: qlik\n",
        "tables/a.yml": "source: dbz\ntable: dbo.a\n",
        "tables/b.yml": "source: ct\ntable: dbo.b\n",
        "tables/c.yml": "source: q\ntable: dbo.c\n",  # Qlik carries the key (primaryKeyPosition)
    })
    t = tmp_path / "tables"
    assert _problems(path) == [
        f"{t / 'a.yml'}:1: keys: required for a debezium source (a landed Debezium value does not carry the message key)",
        f"{t / 'b.yml'}:1: keys: required for a cdc_ct source (change tables do not mark the primary key)",
        f"{t / 'b.yml'}:1: columns: required for a cdc_ct source (name, type, lob in change-table order: "
        "change-table exports carry no types)",
    ]


def test_producer_options_are_checked_against_what_the_decoder_declares(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": (
            "name: shop\nsources:\n"
            "  sales:\n    format: ces\n    landing: a\n    options:\n"
            "      serialisation: json\n"             # a typo: CES knows `serialization`
            "      segment_index_base: 2\n"
            "  erp:\n    format: cdc_ct\n    landing: b\n    options: {binary_text: hex, csv_delimiter: 1}\n"
            "  inv:\n    format: debezium\n    landing: c\n    options: {glob: '*.json'}\n"
        ),
        "tables/orders.yml": (
            "source: erp\ntable: dbo.orders\nkeys: [id]\ncolumns: [{name: id, type: int}]\n"
            "options:\n  capture_instance: dbo_orders_v2\n  column_ordinals: {id: first}\n"
        ),
    })
    t = tmp_path / "tables" / "orders.yml"
    assert _problems(path) == [
        f"{path}:7: sources.sales.options.serialisation: unknown field (did you mean 'serialization'?)",
        f"{path}:8: sources.sales.options.segment_index_base: 2 is not one of 0, 1",
        f"{path}:12: sources.erp.options.csv_delimiter: expected a string, got a number (1)",
        f"{t}:7: options.column_ordinals.id: expected an integer, got a string ('first')",
    ]


def test_a_producer_without_options_refuses_any(tmp_path):
    path = _write(tmp_path, {"pipeline.yml": "name: shop\nsources:\n  inv:\n    format: debezium\n    landing: c\n"
                                             "    options: {serialization: json}\n"})
    assert _problems(path) == [f"{path}:6: sources.inv.options.serialization: unknown field (allowed: glob)"]


def test_a_key_given_twice_is_a_problem_not_a_silent_pick(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE + "    landing: elsewhere\n",
        "tables/customers.yml": "source: inventory\ntable: dbo.customers\nkeys: [id]\nkeys: [customer_id]\n",
    })
    assert _problems(path) == [
        f"{path}:6: sources.inventory.landing: given twice (first on line 5); YAML would keep only this one",
        f"{tmp_path / 'tables' / 'customers.yml'}:4: keys: given twice (first on line 3); YAML would keep only this one",
    ]


def test_ignore_null_update_lists_name_known_columns_and_exclude_each_other(tmp_path):
    path = _write(tmp_path, {
        "pipeline.yml": PIPELINE,
        "tables/a.yml": ("table: dbo.a\nkeys: [id]\ncolumns: [{name: id, type: int}, {name: name, type: string}]\n"
                         "ignore_null_updates_column_list: [nme]\n"),
        "tables/b.yml": "table: dbo.b\nkeys: [id]\nignore_null_updates: true\nignore_null_updates_except_column_list: [x]\n",
        "tables/c.yml": "table: dbo.c\nkeys: [id]\nignore_null_updates_except_column_list: [city]\n",
    })
    assert _problems(path) == [
        f"{tmp_path / 'tables' / 'a.yml'}:4: ignore_null_updates_column_list[0]: unknown column 'nme' (columns: id, name)",
        f"{tmp_path / 'tables' / 'b.yml'}:4: ignore_null_updates_except_column_list: give one of ignore_null_updates, "
        "ignore_null_updates_except_column_list, not several",
    ]
    (tmp_path / "tables" / "a.yml").unlink()
    (tmp_path / "tables" / "b.yml").unlink()
    (c,) = load_pipeline(path).tables
    assert c.ignore_null_updates_except_column_list == ("city",)
