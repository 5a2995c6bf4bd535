"""Presence on Databricks: partial updates reach AUTO CDC as ``columns_to_update``, and AUTO CDC's
documented semantics (``tests/auto_cdc_reference.py``) give the gold the local engine gives.

Inputs are the producers' own fixtures: Qlik's ``03_cdc.jsonl`` (``columnMask`` updates that leave
EMAIL/BALANCE, then NAME/EMAIL/BALANCE untouched) and the change-table history plus one transaction
(7: carol's status changes, her LOB ``notes`` 'note three' is NULL in both halves of the update, as
SQL Server writes an unchanged large-value column: not provided).
"""

from __future__ import annotations

import csv
from typing import NamedTuple

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import auto_cdc_reference as auto_cdc
from sqlcdc import model
from sqlcdc.config import TableConfig
from sqlcdc.formats import get
from sqlcdc.gold import ApplyChangesSpec, merge_scd1, merge_scd2, scd1, scd2
from test_cdc_ct import HISTORY, c, history_rows, make_source, make_table, s
from test_qlik import FIXTURES as QLIK_FIXTURES
from test_qlik import source as qlik_source
from test_qlik import table as qlik_table

META = ["_op", "_sequence", "_provided", "_change_id", "_commit_time"]


class Fixture(NamedTuple):
    table: TableConfig
    columns: list
    keys: list[str]
    silver: DataFrame
    frame: DataFrame  # silver's apply frame (sqlcdc.model.apply_frame)


@pytest.fixture(scope="module")
def frames(spark, tmp_path_factory) -> dict[str, Fixture]:
    """producer -> its fixture decoded: table config, columns, keys, silver, apply frame."""
    def fixture(t, src, decoder):
        cols, keys = decoder.columns_for(t, src, spark), list(t.keys or decoder.keys_for(t, src, spark))
        silver = decoder.decode(decoder.read_bronze(spark, src, streaming=False), t, cols).changes.cache()
        return Fixture(t, cols, keys, silver, model.apply_frame(silver, [c.name for c in cols], keys).cache())

    src = qlik_source(QLIK_FIXTURES)
    out = {"qlik": fixture(qlik_table(src), src, get("qlik"))}
    landing = tmp_path_factory.mktemp("ct_presence")
    rows = history_rows()
    for op, status in (("3", "new"), ("4", "paid")):  # transaction 7: status only (mask bit 5), notes NULL
        rows.append({**rows[0], "__$start_lsn": "0x" + c(7), "__$seqval": "0x" + s(7, 2), "__$operation": op,
                     "__$update_mask": "0x10", "id": "30", "customer": "carol", "amount": "30.00", "notes": None,
                     "status": status, "__$command_id": "1"})
    with (landing / HISTORY.name).open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    src = make_source(landing)
    out["cdc_ct"] = fixture(make_table(src), src, get("cdc_ct"))  # notes: a LOB column
    return out


def test_kwargs_name_the_presence_column_for_scd1_and_scd2():
    one = ApplyChangesSpec(keys=["ID"], table="customers").to_auto_cdc_kwargs("gold_customers_scd1", "changes_customers")
    assert one == {
        "target": "gold_customers_scd1",
        "source": "changes_customers",
        "keys": ["ID"],
        "sequence_by": "_sequence",
        "stored_as_scd_type": 1,
        "ignore_null_updates": False,
        "apply_as_deletes": "_op = 'DELETE'",
        "apply_as_truncates": "_op = 'TRUNCATE'",
        "except_column_list": META,
        "columns_to_update": "_provided",
    }
    two = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, table="orders").to_auto_cdc_kwargs("g", "s")
    assert two["columns_to_update"] == "_provided" and two["stored_as_scd_type"] == 2
    # a frame without presence (provided_column=None): no columns_to_update, every row sets every column
    assert "columns_to_update" not in ApplyChangesSpec(keys=["id"], provided_column=None).to_auto_cdc_kwargs("g", "s")


def test_the_source_names_every_rows_columns(frames):
    frame, keys = frames["qlik"].frame, frames["qlik"].keys
    spec = ApplyChangesSpec(keys=keys, except_column_list=["BALANCE"], table="customers")
    rows = spec.auto_cdc_source(frame).collect()
    assert all(r._provided is not None for r in rows)
    # changeSequence n -> the columns its upsert sets, in the target's column order (BALANCE excepted)
    by_seq = {int(r._sequence.commit_lsn) % 10_000: r._provided for r in rows if r._op == "UPSERT"}
    assert by_seq[2] == ["ID", "NAME"]  # columnMask 03
    assert by_seq[7] == ["ID", "TIER"]  # columnMask 11, tableVersion 2
    assert by_seq[1] == ["ID", "NAME", "EMAIL"]  # an insert under tableVersion 1: no TIER yet
    assert by_seq[6] == ["ID", "NAME", "EMAIL", "TIER"]  # an insert under tableVersion 2: every column


def _reference(spark, frame, spec: ApplyChangesSpec) -> list[tuple]:
    kwargs = spec.to_auto_cdc_kwargs("target", "source")
    source = spec.auto_cdc_source(frame).select(
        "*",
        F.expr(kwargs["apply_as_deletes"]).alias(auto_cdc.DELETE),
        (F.expr(kwargs["apply_as_truncates"]) if "apply_as_truncates" in kwargs else F.lit(False)).alias(auto_cdc.TRUNCATE),
    )
    return _canon(auto_cdc.apply(kwargs, [r.asDict() for r in source.collect()]))


def _canon(rows) -> list[tuple]:
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


def _local(spark, frame, spec: ApplyChangesSpec, path: str) -> tuple[list[tuple], list[tuple]]:
    """(recomputed, incrementally merged into Delta) gold for ``frame``."""
    recomputed = (scd1 if spec.stored_as_scd_type == 1 else scd2)(frame, spec)
    (merge_scd1 if spec.stored_as_scd_type == 1 else merge_scd2)(spark, path, frame, spec)
    merged = spark.read.format("delta").load(path)
    return (_canon(r.asDict() for r in recomputed.collect()),
            _canon(r.asDict() for r in merged.select(*recomputed.columns).collect()))


@pytest.mark.parametrize("producer, scd, options", [
    ("qlik", 1, {}), ("qlik", 2, {}), ("cdc_ct", 1, {}), ("cdc_ct", 2, {}),
    # with the ignore-null options as well (seq 3 of the Qlik story sets EMAIL to a real NULL)
    ("qlik", 1, {"ignore_null_updates_column_list": ["EMAIL"]}),
    ("qlik", 2, {"ignore_null_updates_except_column_list": ["NAME"]}),
    ("cdc_ct", 2, {"ignore_null_updates_column_list": ["status"]}),
])
def test_local_engine_equals_auto_cdc_with_columns_to_update(spark, frames, tmp_path, producer, scd, options):
    frame, keys = frames[producer].frame, frames[producer].keys
    spec = ApplyChangesSpec(keys=keys, stored_as_scd_type=scd, table=producer, **options)
    expected = _reference(spark, frame, spec)
    recomputed, merged = _local(spark, frame, spec, str(tmp_path / "gold"))
    assert recomputed == expected
    assert merged == expected
    # the fixture's partial updates matter: AUTO CDC without the mapping gives other gold
    without = ApplyChangesSpec(keys=keys, stored_as_scd_type=scd, provided_column=None, table=producer, **options)
    assert _reference(spark, frame.drop("_provided").withColumn("_provided", F.lit(None).cast("array<string>")),
                      without) != expected


def test_the_reference_keeps_what_a_mask_leaves_out(spark, frames):
    """Hand-written from fixtures/qlik/customers: Alice's update (seq 2, mask ID+NAME) keeps her
    EMAIL and BALANCE; the TIER update (seq 7, mask ID+TIER) keeps NAME, EMAIL, BALANCE."""
    frame, keys = frames["qlik"].frame, frames["qlik"].keys
    gold = {r["ID"]: r for r in (dict(t) for t in _reference(spark, frame, ApplyChangesSpec(keys=keys, table="c")))}
    alice = gold[1]
    assert (alice["NAME"], alice["EMAIL"], str(alice["BALANCE"]), alice["TIER"]) == ("Alicia", "a@x.org", "10.00", "silver")
    assert gold[2]["EMAIL"] is None  # seq 3: a provided NULL sets it
    kept = _reference(spark, frame, ApplyChangesSpec(keys=keys, ignore_null_updates_column_list=["EMAIL"], table="c"))
    assert {dict(t)["ID"]: dict(t)["EMAIL"] for t in kept}[2] == "b@x.org"  # ... unless EMAIL ignores NULLs


def test_the_reference_keeps_a_lob_the_update_did_not_provide(spark, frames):
    frame, keys = frames["cdc_ct"].frame, frames["cdc_ct"].keys
    gold = {r["id"]: r for r in (dict(t) for t in _reference(spark, frame, ApplyChangesSpec(keys=keys, table="o")))}
    assert (gold[30]["status"], gold[30]["notes"]) == ("paid", "note three")


class RecordingDP:
    """Stands in for ``pyspark.pipelines`` on Databricks: records what the gold graph declares."""

    def __init__(self):
        self.views, self.tables, self.flows = {}, {}, []

    def temporary_view(self, *, name, **_):
        def register(fn):
            self.views[name] = fn
            return fn
        return register

    def create_streaming_table(self, name, **kwargs):
        self.tables[name] = kwargs

    def create_auto_cdc_flow(self, **kwargs):
        self.flows.append(kwargs)


@pytest.mark.parametrize("producer", ["qlik", "cdc_ct"])
def test_databricks_graph_streams_presence_into_auto_cdc(frames, monkeypatch, producer):
    """What ``gold.declare`` declares on Databricks for a Qlik table with column masks and a change
    table with a LOB column: one AUTO CDC flow per SCD type naming the presence column, from a view
    whose every row names its columns."""
    from sqlcdc.gold import graph

    f = frames[producer]
    dp = RecordingDP()
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    monkeypatch.setattr(graph, "dp", dp)
    monkeypatch.setattr(graph, "_declared_views", set())
    # as once their silver is append-only (docs/append-only-silver.md); today it is a recomputed
    # view and their gold a materialized view (the next test)
    monkeypatch.setattr(graph, "silver_streams", lambda parts: True)
    for scd in (1, 2):
        graph.declare(f.table, scd, columns=f.columns, keys=f.keys)

    view = f"changes_{f.table.name}"
    assert [(k["target"], k["source"], k["stored_as_scd_type"], k["columns_to_update"]) for k in dp.flows] == [
        (f"gold_{f.table.name}_scd1", view, 1, "_provided"), (f"gold_{f.table.name}_scd2", view, 2, "_provided")]
    assert all("_provided" in k["except_column_list"] for k in dp.flows)  # the list itself never lands in gold
    assert set(dp.tables) == {f"gold_{f.table.name}_scd1", f"gold_{f.table.name}_scd2"}

    class Active:  # the view reads silver as a stream on Databricks; here the fixture's silver
        readStream = type("R", (), {"table": staticmethod(lambda name: f.silver)})()

    monkeypatch.setattr(graph.SparkSession, "active", staticmethod(lambda: Active))
    rows = dp.views[view]().collect()
    names = [c.name for c in f.columns]
    assert rows and all(r._provided and set(r._provided) <= set(names) for r in rows)
    partial = sorted(tuple(r._provided) for r in rows if r._op == "UPSERT" and len(r._provided) < len(names))
    v1 = ("ID", "NAME", "EMAIL", "BALANCE")  # tableVersion 1 rows: three full-load rows, seq 1, 3 and 4
    expected = {"qlik": [("ID", "NAME"), *[v1] * 6, ("ID", "TIER")],  # seq 2: mask 03; seq 7: mask 11
                # dave's two updates (tx 4) and carol's (tx 7): every column but the LOB notes
                "cdc_ct": [("id", "customer", "amount", "status")] * 3}
    assert partial == sorted(expected[producer])


@pytest.mark.parametrize("producer", ["qlik", "cdc_ct"])
def test_on_databricks_gold_over_recomputed_silver_is_a_view_not_auto_cdc(frames, monkeypatch, producer):
    """Qlik and change-table silver is a materialized view recomputed each run, which a streaming
    read (AUTO CDC's source) does not accept on Databricks: their gold is declared as materialized
    views recomputed from silver, with the presence the local engine applies; Debezium silver streams."""
    import dataclasses

    from sqlcdc.gold import graph

    from test_metadata_reshape import RecordingDP as ViewsDP  # records query functions; no AUTO CDC

    f = frames[producer]
    dp = ViewsDP()
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    monkeypatch.setattr(graph, "dp", dp)
    monkeypatch.setattr(graph, "_declared_views", set())
    for scd in (1, 2):  # an AUTO CDC flow would raise here: the stand-in has no create_auto_cdc_flow
        graph.declare(f.table, scd, columns=f.columns, keys=f.keys)
    assert set(dp.queries) == {f"gold_{f.table.name}_scd1", f"gold_{f.table.name}_scd2"}

    class Active:  # the views read silver in batch
        read = type("R", (), {"table": staticmethod(lambda name: f.silver)})()

    monkeypatch.setattr(graph.SparkSession, "active", staticmethod(lambda: Active))
    spec = ApplyChangesSpec.from_table_config(f.table, 1, keys=f.keys)
    assert sorted(map(str, dp.queries[f"gold_{f.table.name}_scd1"]().collect())) == \
        sorted(map(str, scd1(f.frame, spec).collect()))  # the same engine as a hand-run pipeline's

    debezium = dataclasses.replace(f.table, source=dataclasses.replace(f.table.source, format="debezium"))
    assert graph.silver_streams([debezium]) and not graph.silver_streams([debezium, f.table])
