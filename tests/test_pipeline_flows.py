"""The flows a streaming source declares into its quarantine and dropped tables, and what they read.

SDP resolves every flow into a table again whenever one of them starts
(``DataflowGraph.reanalyzeFlow``), so ``n`` flows into ``quarantine_<source>`` cost ``n * n`` flow
resolutions per run, each of a full decode plan. A source therefore declares one quarantine flow
per table (decode rejects and quarantine-rule failures together) and one for the source's own
rejects (unrouted records, envelope failures, unreadable files). On Spark Connect (SDP) each part
reads bronze as a streaming source of its own, so the merged flows' checkpoints count more sources
than the flows before them, and Spark refuses to resume from those: ``sqlcdc run`` recomputes a
quarantine table that holds checkpoints of the old flows (:func:`sqlcdc.cli.run.earlier_flow_layout`).

The declarations go through pyspark's own ``pipelines`` API into a recording registry; the flows
then run as streaming queries over a real Debezium landing.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from pyspark.pipelines.graph_element_registry import GraphElementRegistry, graph_element_registration_context

import debezium_events as dbz
import test_ces as ces_events  # its event builders (a module import: its tests are not collected here)
from sqlcdc import pipeline, transport
from sqlcdc.cli.run import earlier_flow_layout
from sqlcdc.config import load_pipeline
from sqlcdc.formats.base import read_text_lines


class Recorded(GraphElementRegistry):
    """What the definitions register: outputs by name, flows in order."""

    def __init__(self) -> None:
        self.outputs: dict = {}
        self.flows: list = []

    def register_output(self, output) -> None:
        self.outputs[output.name] = output

    def register_flow(self, flow) -> None:
        self.flows.append(flow)

    def register_auto_cdc_flow(self, flow) -> None:  # pragma: no cover - gold is not declared here
        self.flows.append(flow)

    def register_sql(self, sql_text, file_path) -> None:  # pragma: no cover
        raise AssertionError(f"unexpected SQL from {file_path}")


def _create(table: str, id_: int, email: str | None, lsn_slot: int, *, commit_lsn: str | None = None) -> str:
    row = {"id": id_, "first_name": "Ann", "last_name": "Lee", "email": email}
    lsn = dbz.lsn(39, 100, lsn_slot)
    return dbz.line(dbz.event("c", after=row, commit_lsn=commit_lsn or lsn, change_lsn=lsn, table=table))


RECORDS = [
    _create("customers", 1, "ann@example.com", 1),  # silver
    _create("customers", 2, None, 2),  # quarantined by the rule has_email
    _create("customers", 3, "cy@example.com", 3),  # dropped by the rule not_three
    _create("customers", 4, "di@example.com", 4, commit_lsn="zz"),  # no LSN: the decode rejects it
    _create("orders", 10, "ed@example.com", 5),  # silver of the second table
    _create("suppliers", 20, "fay@example.com", 6),  # no table takes it
    json.dumps({"payload": {"op": 7}}),  # not a Debezium envelope
]


def _config(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "events-1.json").write_text("\n".join(RECORDS) + "\n")
    return _project(tmp_path / "config", f"name: flows\nsources:\n  flowsrc:\n    format: debezium\n    landing: {landing}\n", {
        "fl_customers": """\
            source: flowsrc
            name: fl_customers
            table: dbo.customers
            keys: [id]
            expectations:
              - {name: has_email, constraint: "email IS NOT NULL", action: quarantine}
              - {name: not_three, constraint: "id <> 3", action: drop}
            """,
        "fl_orders": "source: flowsrc\nname: fl_orders\ntable: dbo.orders\nkeys: [id]\n"})


def _project(base, pipeline_yml: str, tables: dict[str, str]):
    """A config folder at ``base``: ``pipeline.yml`` and ``tables/<name>.yml`` (name -> YAML text)."""
    (base / "tables").mkdir(parents=True)
    (base / "pipeline.yml").write_text(pipeline_yml)
    for name, text in tables.items():
        (base / "tables" / f"{name}.yml").write_text(textwrap.dedent(text))
    return base / "pipeline.yml"


def _declare(config, monkeypatch) -> Recorded:
    """What ``declare_silver`` registers for ``config``, declared afresh (the pipeline's per-table
    caches cleared)."""
    for cache in ("_columns", "_keys", "_waiting"):
        monkeypatch.setattr(pipeline, cache, {})
    registry = Recorded()
    with graph_element_registration_context(registry):
        pipeline.declare_silver(load_pipeline(config))
    return registry


@pytest.fixture
def declared(spark, tmp_path, monkeypatch):
    config = _config(tmp_path)
    registry = _declare(config, monkeypatch)
    source = load_pipeline(config).sources["flowsrc"]
    spark.sql(f"DROP TABLE IF EXISTS {source.bronze_table}")
    transport.read_bronze(spark, source, streaming=False).write.format("delta").saveAsTable(source.bronze_table)
    yield registry, tmp_path
    spark.sql(f"DROP TABLE IF EXISTS {source.bronze_table}")


def _run(spark, flow, checkpoint) -> list:
    """The flow's query run as a streaming query into the memory sink: its rows."""
    query = (flow.func().writeStream.format("memory").queryName(flow.name).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.table(flow.name).collect()
    spark.catalog.dropTempView(flow.name)
    return rows


def test_a_streaming_source_has_one_quarantine_flow_per_table_and_one_for_its_own_rejects(spark, declared):
    registry, tmp_path = declared
    into: dict[str, set[str]] = {}
    for flow in registry.flows:
        into.setdefault(flow.target, set()).add(flow.name)
    assert into["quarantine_flowsrc"] == {"quarantine_fl_customers", "quarantine_fl_orders", "unrouted_flowsrc"}
    assert into["dropped_flowsrc"] == {"dropped_fl_customers", "dropped_fl_orders"}
    assert into["silver_fl_customers"] == {"silver_fl_customers"}

    flows = {f.name: f for f in registry.flows}
    rows = _run(spark, flows["quarantine_fl_customers"], tmp_path / "ck1")
    assert sorted((r.rules, r.reason) for r in rows) == [
        (["decode"], "source.commit_lsn 'zz' is not an LSN (xxxxxxxx:xxxxxxxx:xxxx, hex)"),
        (["has_email"], "quarantined by expectation(s): has_email (email IS NOT NULL)"),
    ]

    rows = _run(spark, flows["unrouted_flowsrc"], tmp_path / "ck2")
    assert sorted(r.rules[0] for r in rows) == ["debezium-envelope $.payload: required", "envelope"], [r.reason for r in rows]
    assert any(r.reason.startswith("no onboarded table for dbo.suppliers") for r in rows)

    rows = _run(spark, flows["dropped_fl_customers"], tmp_path / "ck3")
    assert [r.rules for r in rows] == [["not_three"]]
    rows = _run(spark, flows["silver_fl_orders"], tmp_path / "ck4")
    assert [r.key["id"] for r in rows] == [10]


def _run_into_delta(spark, flow, checkpoint, path) -> list:
    """The flow's query run as a streaming query into a Delta table at ``path`` (a sink that resumes
    from ``checkpoint``, as SDP's do): every row the table holds."""
    query = (flow.func().writeStream.format("delta").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start(str(path)))
    query.awaitTermination()
    return spark.read.format("delta").load(str(path)).collect()


def test_a_table_without_drop_rules_decodes_nothing_for_dropped_and_its_flow_resumes_when_rules_change(
        spark, declared, monkeypatch):
    # A dropped_<table> flow of a table without drop rules is a filter over bronze, not a decode: SDP
    # resolves and plans each flow several times a run. It still reads bronze once, as the decode
    # does, so its checkpoint is resumed when a drop rule is added or taken away.
    registry, tmp_path = declared
    flows = {f.name: f for f in registry.flows}
    shown = spark.conf.get("spark.sql.debug.maxToStringFields")
    spark.conf.set("spark.sql.debug.maxToStringFields", "1000")  # a plan's text names 25 columns, then "... more fields"
    try:
        plan = {name: flows[name].func()._jdf.queryExecution().analyzed().toString()
                for name in ("dropped_fl_orders", "dropped_fl_customers")}
    finally:
        spark.conf.set("spark.sql.debug.maxToStringFields", shown)
    assert "_reasons" not in plan["dropped_fl_orders"] and "_reasons" in plan["dropped_fl_customers"]  # the decode's
    config, table_file = tmp_path / "config" / "pipeline.yml", tmp_path / "config" / "tables" / "fl_orders.yml"
    ck, out = tmp_path / "ck_dropped", tmp_path / "dropped_out"
    assert _run_into_delta(spark, flows["dropped_fl_orders"], ck, out) == []

    def land(name: str, rows: list[str]) -> None:  # more records in bronze, as the next run's bronze flow appends them
        landing = tmp_path / name
        landing.mkdir()
        (landing / "events.json").write_text("\n".join(rows) + "\n")
        read_text_lines(spark, str(landing), streaming=False).write.format("delta").mode("append").saveAsTable("bronze_flowsrc")

    table_file.write_text(table_file.read_text() + "expectations:\n  - {name: not_eleven, constraint: \"id <> 11\", action: drop}\n")
    land("more1", [_create("orders", 11, "x@example.com", 11), _create("orders", 12, "y@example.com", 12)])
    flows = {f.name: f for f in _declare(config, monkeypatch).flows}
    rows = _run_into_delta(spark, flows["dropped_fl_orders"], ck, out)  # resumes: order 10 is not read again
    assert [(r.rules, json.loads(r.raw)["key"]["id"]) for r in rows] == [(["not_eleven"], 11)]

    table_file.write_text(table_file.read_text().split("expectations:")[0])
    land("more2", [_create("orders", 13, "z@example.com", 13), _create("orders", 11, "x@example.com", 14)])
    flows = {f.name: f for f in _declare(config, monkeypatch).flows}
    assert len(_run_into_delta(spark, flows["dropped_fl_orders"], ck, out)) == 1  # and back: nothing more dropped


def test_a_warehouse_with_the_earlier_quarantine_flows_is_found_for_a_refresh(tmp_path):
    cfg = load_pipeline(_config(tmp_path))
    checkpoints = tmp_path / "wh" / "_storage" / "_checkpoints" / "spark_catalog" / "default"
    for table, flow in (("quarantine_flowsrc", "quarantine_fl_customers"), ("quarantine_flowsrc", "unrouted_flowsrc"),
                        ("dropped_flowsrc", "dropped_fl_customers")):
        (checkpoints / table / flow / "0").mkdir(parents=True)
    assert earlier_flow_layout(cfg, tmp_path / "wh") == []  # today's flows only: nothing to refresh
    for flow in ("expectations_fl_customers", "envelope_flowsrc"):
        (checkpoints / "quarantine_flowsrc" / flow / "0").mkdir(parents=True)
    assert [p.name for p in earlier_flow_layout(cfg, tmp_path / "wh")] == ["envelope_flowsrc", "expectations_fl_customers"]


# ----------------------------------------------------------------------------- a batch source (CES)

PURCHASE = dict(purchase_id=1, customer_name="Ann", product_id=7, product_name="Pen", price_per_item=3, quantity=1,
                purchase_date="2025-03-14 17:00:00", payment_method="card")


def _ces_config(tmp_path):
    """A CES source of two tables, one with a quarantine and a drop rule, and its landed events."""
    landing = tmp_path / "ces_landing"

    def ins(seq: int, table: str = "Purchases", **values) -> dict:
        row = {**PURCHASE, **values}
        return ces_events.event("INS", table=table, current=row, pk={"purchase_id": row["purchase_id"]},
                                lsn=f"0000002C0000040000{seq:02X}")

    ces_events.land_json(landing, "events.json", [
        ins(1),  # silver
        ins(2, purchase_id=2, price_per_item=-1),  # quarantined by the rule positive_price
        ins(3, purchase_id=3, quantity=3),  # dropped by the rule not_three
        ins(4, purchase_id="four"),  # not an int: the decode rejects it
        ins(5, table="Orders", purchase_id=10),  # silver of the second table
        ins(6, table="Suppliers", purchase_id=20),  # no table takes it
    ])
    return _project(tmp_path / "ces_config", f"name: cesflows\nsources:\n  cesflows:\n    format: ces\n"
                    f"    landing: {landing}\n    options: {{serialization: json}}\n", {
        "cf_purchases": """\
            source: cesflows
            name: cf_purchases
            table: dbo.Purchases
            keys: [purchase_id]
            expectations:
              - {name: positive_price, constraint: "price_per_item > 0", action: quarantine}
              - {name: not_three, constraint: "quantity <> 3", action: drop}
            """,
        "cf_orders": "source: cesflows\nname: cf_orders\ntable: dbo.Orders\nkeys: [purchase_id]\n"})


def test_a_batch_sources_views_read_each_tables_part_by_name(spark, tmp_path, monkeypatch):
    # quarantine_<source> and dropped_<source> of a batch source (CES here) read each table's part
    # from a temporary view: as one union of every table's decode, their plans grew past what SDP can
    # define (a CES source of ~30 tables: tests/test_connect_resolution.py)
    config = _ces_config(tmp_path)
    registry = _declare(config, monkeypatch)
    source = load_pipeline(config).sources["cesflows"]
    views = {name for name, out in registry.outputs.items() if type(out).__name__ == "TemporaryView"}
    assert views == {"quarantine_cesflows__cf_purchases", "quarantine_cesflows__cf_orders",
                     "dropped_cesflows__cf_purchases"}  # a dropped part only for the table with drop rules
    decoded = {name for name, out in registry.outputs.items() if name.startswith("decoded_")}
    assert decoded == {"decoded_cesflows__cf_purchases", "decoded_cesflows__cf_orders"}
    assert {type(registry.outputs[name]).__name__ for name in decoded} == {"MaterializedView"}
    spark.sql(f"DROP TABLE IF EXISTS {source.bronze_table}")
    transport.read_bronze(spark, source, streaming=False).write.format("delta").saveAsTable(source.bronze_table)
    flows = {f.name: f for f in registry.flows}

    def tables_parts() -> dict:
        """Each table's silver keys and quarantine part (rules, reason)."""
        return {t: ([r.key["purchase_id"] for r in flows[f"silver_{t}"].func().collect()],
                    sorted((r.rules, r.reason) for r in spark.table(f"quarantine_cesflows__{t}").collect()))
                for t in ("cf_purchases", "cf_orders")}

    try:
        for name in sorted(decoded):  # stored once, as the pipeline does before silver and the parts read it
            spark.sql(f"DROP TABLE IF EXISTS {name}")
            flows[name].func().write.format("delta").saveAsTable(name)
        for view in views:  # the views as SDP would resolve them, for the source's views to read by name
            flows[view].func().createOrReplaceTempView(view)
        quarantine = flows["quarantine_cesflows"].func().collect()
        dropped = flows["dropped_cesflows"].func().collect()
        parts = tables_parts()
        # silver and the parts read the stored decode, not bronze: bronze emptied, they are the same
        spark.sql(f"DELETE FROM {source.bronze_table}")
        assert tables_parts() == parts
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
        for name in (*decoded, source.bronze_table):
            spark.sql(f"DROP TABLE IF EXISTS {name}")
    silver = {t: keys for t, (keys, _) in parts.items()}
    assert [rules for rules, _ in parts["cf_purchases"][1]] == [["ces-decode"], ["positive_price"]]
    by_rule = sorted((r.rules[0], r.table_name or "") for r in quarantine)
    assert by_rule == [("ces-decode", "cf_purchases"), ("ces-unrouted", ""), ("positive_price", "cf_purchases")], \
        [(r.rules, r.table_name, r.reason) for r in quarantine]
    [decode] = [r.reason for r in quarantine if r.rules == ["ces-decode"]]
    assert decode.endswith('(dbo.Purchases): column purchase_id: cannot read ["four"] as int (text)'), decode  # said once
    # (pkkey and eventrow.current both hold the bad value)
    assert any("dbo.Suppliers" in r.reason for r in quarantine if r.rules == ["ces-unrouted"])
    assert [r.rules for r in dropped] == [["not_three"]]
    assert silver == {"cf_purchases": [1], "cf_orders": [10]}
