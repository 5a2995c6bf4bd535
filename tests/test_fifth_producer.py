"""A fifth producer, added from outside sqlcdc: one decoder module, one JSON Schema, one test file.

The toy producer below lives in a package of its own (written to a temporary folder, installed by
an entry point of the ``sqlcdc.formats`` group, as ``pip install`` of such a package would). No
sqlcdc file names it, yet its config loads, ``sqlcdc validate`` checks it, the pipeline's
declarations read and decode it (bronze -> silver, quarantine, gold), and ``sqlcdc export
dlt-meta`` maps it. Its events are JSON lines::

    {"tbl": "dbo.widgets", "op": "c", "lsn": "00000027000001000010", "row": {"id": 1, "name": "a"}}
"""

from __future__ import annotations

import json
import textwrap

import pytest

from sqlcdc import dlt_meta, dq_metrics, formats, pipeline
from sqlcdc.cli import validate as v
from sqlcdc.config import ConfigError, load_pipeline
from sqlcdc.gold import graph as gold_graph
from test_metadata_reshape import RecordingDP

DECODER_MODULE = '''
"""The toy producer's decoder: JSON lines {tbl, op, lsn, row}."""
from pathlib import Path

from pyspark.sql import functions as F

from sqlcdc import lsn, model
from sqlcdc.formats import Decoded, Decoder
from sqlcdc.formats.base import read_text_lines
from sqlcdc.values import provided_columns, typed_struct

OPS = {"c": model.INSERT, "u": model.UPDATE, "d": model.DELETE}
SHAPE = "tbl string, op string, lsn string, row map<string,string>"


class Toy(Decoder):
    name, label, streaming = "toy", "SQL Server (toy)", False
    bronze_streaming = False
    envelope_schema = str(Path(__file__).with_name("toy-envelope.schema.json"))
    keys_required = "toy events do not mark the key"
    columns_required = "toy events carry no types"

    def read_bronze(self, spark, source, *, streaming=True):
        return read_text_lines(spark, source.landing, streaming=streaming)

    def columns_for(self, table, source, spark=None):
        return [self.config_column(c, i) for i, c in enumerate(table.columns, 1)]

    def _parsed(self, bronze):
        return bronze.select("*", F.from_json("value", SHAPE).alias("_e"))

    def decode(self, bronze, table, columns):
        e = F.col("_e")
        mine = self._parsed(bronze).where(e["tbl"] == f"{table.schema}.{table.table}")
        after, errors = typed_struct(e["row"], columns)
        key = F.struct(*[after[k].alias(k) for k in table.keys])
        seq = lsn.parse_lsn(e["lsn"], "hex")
        reasons = F.filter(F.concat(
            F.array(F.when(~e["op"].isin(*OPS), F.format_string("op %s is not c, u or d", e["op"])),
                    F.when(seq.isNull(), F.coalesce(lsn.lsn_problem(e["lsn"], "lsn", "hex"), F.lit("lsn missing")))),
            errors), lambda r: r.isNotNull())
        typed = mine.select("*", after.alias("_after"), key.alias("_key"), reasons.alias("_reasons"))
        op = F.element_at(F.create_map(*[x for k, o in OPS.items() for x in (F.lit(k), F.lit(o))]), e["op"])
        changes = typed.where(F.size("_reasons") == 0).select(*model.change_row(
            change_id=F.col("record_id"), source_format=self.name, table_name=table.name, op=op, key=F.col("_key"),
            before=F.lit(None).cast(after_type(columns)), after=F.when(e["op"] != "d", F.col("_after")),
            sequence=lsn.sequence(seq), provided_columns=provided_columns(e["row"], columns)))
        quarantine = typed.where(F.size("_reasons") > 0).select(*model.quarantine_row(
            source_name=table.source.name, source_format=self.name, table_name=table.name,
            reason=F.array_join("_reasons", "; "), rules=F.array(F.lit("decode"))))
        return Decoded(changes=changes, quarantine=quarantine)

    def unrouted(self, bronze, source, tables):
        names = [f"{t.schema}.{t.table}" for t in tables]
        tbl = F.col("_e")["tbl"]
        return self._parsed(bronze).where(tbl.isNull() | ~tbl.isin(*names)).select(*model.quarantine_row(
            source_name=source.name, source_format=self.name,
            reason=F.format_string("table %s is not onboarded", F.coalesce(tbl, F.lit("(none)"))),
            rules=F.array(F.lit("routing"))))

    def dlt_meta_select(self, table, columns):
        get = lambda path: f"get_json_object(value, '$.{path}')"  # noqa: E731
        values = [f"{get('row.' + c['name'])} AS `{c['name']}`" for c in columns]
        meta = [f"CASE {get('op')} WHEN 'c' THEN 'INSERT' WHEN 'u' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' END AS _op",
                f"upper({get('lsn')}) AS _sequence", "CAST(NULL AS timestamp) AS _commit_time"]
        return values + meta, [f"{get('tbl')} = '{table.schema}.{table.table}'"]


def after_type(columns):
    return "struct<" + ",".join(f"`{c.name}`:{c.spark_type}" for c in columns) + ">"


DECODER = Toy()
'''

ENVELOPE_SCHEMA = {
    "type": "object",
    "required": ["tbl", "op", "lsn", "row"],
    "properties": {"tbl": {"type": "string", "minLength": 1}, "op": {"type": "string"},
                   "lsn": {"type": "string"}, "row": {"type": "object"}},
}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy producer's package on sys.path, registered as an entry point (a dist-info folder)."""
    root = tmp_path / "site"
    pkg = root / "toy_cdc"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "decoder.py").write_text(DECODER_MODULE)
    (pkg / "toy-envelope.schema.json").write_text(json.dumps(ENVELOPE_SCHEMA))
    info = root / "toy_cdc-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-cdc\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{formats.ENTRY_POINT_GROUP}]\ntoy = toy_cdc.decoder\n")
    monkeypatch.syspath_prepend(str(root))
    yield formats.get("toy")
    for name in ("toy_cdc.decoder", "toy_cdc"):
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)


def _project(tmp_path, events, *, fmt="toy", rules=""):
    landing = tmp_path / "landing"
    landing.mkdir(parents=True, exist_ok=True)
    (landing / "events.json").write_text("".join(json.dumps(e) + "\n" if isinstance(e, dict) else e + "\n" for e in events))
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True, exist_ok=True)
    (base / "pipeline.yml").write_text(f"name: toys\nsources:\n  shop:\n    format: {fmt}\n    landing: {landing}\n")
    (base / "tables" / "widgets.yml").write_text(textwrap.dedent("""\
        source: shop
        table: dbo.widgets
        keys: [id]
        columns:
          - {name: id, type: int}
          - {name: name, type: string}
        """) + rules)
    return base / "pipeline.yml"


EVENTS = [
    {"tbl": "dbo.widgets", "op": "c", "lsn": "00000027000001000010", "row": {"id": "1", "name": "bolt"}},
    {"tbl": "dbo.widgets", "op": "c", "lsn": "00000027000001000020", "row": {"id": "2", "name": "nut"}},
    {"tbl": "dbo.widgets", "op": "u", "lsn": "00000027000001000030", "row": {"id": "1", "name": "big bolt"}},
    {"tbl": "dbo.widgets", "op": "d", "lsn": "00000027000001000040", "row": {"id": "2"}},
    {"tbl": "dbo.widgets", "op": "c", "lsn": "27:1:4", "row": {"id": "3", "name": "washer"}},  # not an LSN
    {"tbl": "dbo.gadgets", "op": "c", "lsn": "00000027000001000050", "row": {"id": "9"}},  # not onboarded
    {"tbl": "dbo.widgets", "op": "c"},  # breaks the toy's envelope schema
]


def test_the_registry_finds_an_installed_producer(toy):
    assert formats.available() == ["cdc_ct", "ces", "debezium", "debezium_flat", "qlik", "toy"]
    assert toy.label == "SQL Server (toy)" and formats.get("toy") is toy


def test_config_of_an_unknown_producer_names_the_installed_ones(tmp_path, toy):
    with pytest.raises(ConfigError, match=r"sources.shop.format: 'tay' is not one of 'cdc_ct', 'ces', 'debezium', 'debezium_flat', 'qlik', 'toy'$"):
        load_pipeline(_project(tmp_path, EVENTS, fmt="tay"))


def test_validate_checks_the_toy_producers_config(spark, tmp_path, toy):
    assert v.validate(_project(tmp_path / "ok", EVENTS), spark=spark) == []
    bad = _project(tmp_path / "bad", EVENTS, rules="expectations:\n  - {name: named, constraint: name, action: warn}\n")
    [problem] = v.validate(bad, spark=spark)
    assert "named" in problem and "boolean" in problem  # the rule is typed with the toy's columns


def test_the_pipeline_declarations_run_the_toy_producer(spark, tmp_path, monkeypatch, toy):
    cfg = load_pipeline(_project(tmp_path, EVENTS))
    dp = RecordingDP()
    for module in (pipeline, gold_graph, dq_metrics):
        monkeypatch.setattr(module, "dp", dp)
    monkeypatch.setattr(pipeline, "_columns", {})
    monkeypatch.setattr(pipeline, "_keys", {})
    pipeline.declare_bronze(cfg)
    pipeline.declare_silver(cfg)
    pipeline.declare_gold(cfg)
    assert {"bronze_shop", "silver_widgets", "quarantine_shop", "gold_widgets_scd1", "gold_widgets_scd2"} <= set(dp.queries)

    bronze = dp.queries["bronze_shop"]()
    assert bronze.count() == len(EVENTS)
    bronze.createOrReplaceTempView("bronze_shop")
    dp.queries["decoded_shop__widgets"]().createOrReplaceTempView("decoded_shop__widgets")  # read by name
    silver = dp.queries["silver_widgets"]()
    silver.createOrReplaceTempView("silver_widgets")
    assert sorted((r.op, r.key["id"]) for r in silver.collect()) == [
        ("DELETE", 2), ("INSERT", 1), ("INSERT", 2), ("UPDATE", 1)]
    dp.queries["quarantine_shop__widgets"]().createOrReplaceTempView("quarantine_shop__widgets")  # read by name
    reasons = sorted(r.reason for r in dp.queries["quarantine_shop"]().collect())
    assert len(reasons) == 3
    assert reasons[0].startswith("envelope (toy-envelope.schema.json): ") and "'lsn' is a required property" in reasons[0]
    assert reasons[1] == "lsn '27:1:4' is not an LSN (20 hex digits, optionally 0x-prefixed)"
    assert reasons[2] == "table dbo.gadgets is not onboarded"
    assert sorted(tuple(r) for r in dp.queries["gold_widgets_scd1"]().collect()) == [(1, "big bolt")]
    scd2 = sorted((r.id, r.name, r["__END_AT"] is None) for r in dp.queries["gold_widgets_scd2"]().collect())
    assert scd2 == [(1, "big bolt", True), (1, "bolt", False), (2, "nut", False)]


def test_dlt_meta_exports_the_toy_producer_with_its_own_mapping(tmp_path, toy):
    cfg = load_pipeline(_project(tmp_path, EVENTS))
    assert dlt_meta.refusals(cfg) == []
    out = dlt_meta.build(cfg)
    [source] = [r for r in out.onboarding if r.get("source_system")]
    assert source["source_system"] == "SQL Server (toy)"
    [t1, t2] = out.transformations
    assert t1["where_clause"] == ["get_json_object(value, '$.tbl') = 'dbo.widgets'"]
    assert "CASE get_json_object(value, '$.op') WHEN 'c' THEN 'INSERT'" in " ".join(t1["select_exp"])


def test_dlt_meta_refuses_a_producer_without_a_mapping(tmp_path, toy, monkeypatch):
    monkeypatch.setattr(type(toy), "dlt_meta_select", lambda self, table, columns: None)
    cfg = load_pipeline(_project(tmp_path, EVENTS))
    assert dlt_meta.refusals(cfg) == [
        "source shop: format toy: the producer's decoder has no dlt-meta mapping (Decoder.dlt_meta_select); "
        "its tables (widgets) are not exported"]
    assert dlt_meta.build(cfg).transformations == []
