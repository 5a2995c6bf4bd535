"""Producer hand-off (issue 18): one table back-filled from change-table exports and continued from
Debezium, listed as ``sources:`` in its table config (:mod:`sqlcdc.gold.handoff`).

The histories are tests/histories.py's (random, seeded): the change-table export holds every change
up to commit X, the Debezium stream every change from commit W < X on, so the stretch W..X reaches
gold twice; gold must equal the reference model of the whole history, each change applied once.
"""

from __future__ import annotations

import base64
import json
import random
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import histories as h
from sqlcdc import dlt_meta
from sqlcdc.config import ConfigError, load_pipeline
from sqlcdc.formats import get
from sqlcdc.gold import after_run, graph, handoff
from sqlcdc.names import quote
from test_metadata_reshape import RecordingDP

COLUMNS = ("columns:\n  - {name: id, type: int}\n  - {name: name, type: string}\n"
           "  - {name: qty, type: int}\n  - {name: price, type: 'decimal(10,2)'}\n")


def _project(tmp_path: Path, table: str) -> Path:
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    landing = tmp_path / "landing"
    for name in ("backfill", "stream", "events", "net"):
        (landing / name).mkdir(parents=True, exist_ok=True)
    (base / "pipeline.yml").write_text(
        "name: handoff\nsources:\n"
        f"  backfill: {{format: cdc_ct, landing: {landing / 'backfill'}}}\n"
        f"  stream: {{format: debezium, landing: {landing / 'stream'}}}\n"
        f"  events: {{format: ces, landing: {landing / 'events'}, options: {{serialization: json}}}}\n"
        f"  net: {{format: cdc_ct, landing: {landing / 'net'}, options: {{function: net_changes}}}}\n")
    (base / "tables" / "hist.yml").write_text(table)
    return base / "pipeline.yml"


def test_sources_make_one_table_per_source_sharing_the_gold_tables(tmp_path):
    cfg = load_pipeline(_project(tmp_path, "table: dbo.hist\nkeys: [id]\n" + COLUMNS + "sources: [backfill, stream]\n"))
    parts = cfg.tables
    assert [(t.name, t.source.name, t.silver_table, t.handoff, t.handoff_rank) for t in parts] == [
        ("hist__backfill", "backfill", "silver_hist__backfill", "hist", 0),
        ("hist__stream", "stream", "silver_hist__stream", "hist", 1)]
    assert {(t.scd1_table, t.scd2_table) for t in parts} == {("gold_hist_scd1", "gold_hist_scd2")}
    [(gold, grouped)] = handoff.groups(parts)
    assert (gold.name, gold.scd1_table, [p.name for p in grouped]) == ("hist", "gold_hist_scd1", ["hist__backfill", "hist__stream"])


@pytest.mark.parametrize("sources, why", [
    ("[backfill, events]", "sources[1]: source events (ces) cannot share a table with another producer: its changes "
                           "carry no position in the SQL Server log beside their commit LSN"),
    ("[net, stream]", "sources[0]: source net (cdc_ct) cannot share a table with another producer: net changes give "
                      "a row's final state per query window"),
    ("[backfill, backfill]", "sources: a source is listed twice (backfill, backfill)"),
])
def test_a_source_whose_changes_cannot_be_matched_is_refused_by_name(tmp_path, sources, why):
    with pytest.raises(ConfigError) as e:
        load_pipeline(_project(tmp_path, "table: dbo.hist\nkeys: [id]\n" + COLUMNS + f"sources: {sources}\n"))
    assert why in str(e.value)


def test_source_and_sources_together_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="give source or sources, not both"):
        load_pipeline(_project(tmp_path, "table: dbo.hist\nkeys: [id]\n" + COLUMNS + "source: stream\nsources: [backfill, stream]\n"))


def test_dlt_meta_does_not_export_a_handoff_and_says_why(tmp_path):
    cfg = load_pipeline(_project(tmp_path, "table: dbo.hist\nkeys: [id]\n" + COLUMNS + "sources: [backfill, stream]\n"))
    assert [r for r in dlt_meta.refusals(cfg) if "several sources" in r] and not dlt_meta.build(cfg).transformations


def _land(folder: Path, name: str, lines: list[str]) -> None:
    (folder / name).write_text("\n".join(lines) + "\n")


def _write_silver(spark, part, warehouse: Path) -> None:
    decoder = get(part.source.format)
    bronze = decoder.read_bronze(spark, part.source, streaming=False)
    decoded = decoder.decode(bronze, part, decoder.columns_for(part, part.source, spark))
    assert decoded.quarantine.count() == 0, [r.reason for r in decoded.quarantine.collect()]
    decoded.changes.write.format("delta").mode("overwrite").save(str(after_run.tables_dir(warehouse) / part.silver_table))


def _apply_rows(changes) -> int:
    """Rows the apply frame has for ``changes``: a key change is a delete and an upsert."""
    return sum(2 if c.old_key is not None else 1 for c in changes)


@pytest.mark.parametrize("seed, odd_names", [(3, False), (8, True)])
def test_backfill_then_stream_gives_the_single_producer_gold(spark, tmp_path, monkeypatch, seed, odd_names):
    """Run 1: the change-table export up to X and the Debezium events up to X (the overlap W..X in
    both). Run 2: the rest of the stream, shuffled, a share twice. Gold after each run equals the
    reference model of the history so far; run 2 applies only the changes after X. With
    ``odd_names`` the columns are named ``row.id`` (the key), ``unit.price``, ... (a change's
    identity across producers named the key unquoted: ``row.id`` was a struct's field)."""
    if odd_names:
        monkeypatch.setattr(h, "COL", {**h.COL, **h.ODD_NAMES})
    cfg = load_pipeline(_project(tmp_path, "table: dbo.hist\n" + h._keys_and_columns("cdc_ct") + "sources: [backfill, stream]\n"))
    [(gold, parts)] = handoff.groups(cfg.tables)
    rng = random.Random(seed)
    changes = h.history(rng, 8, 40)
    txs = sorted({c.tx for c in changes})
    w, x = txs[len(txs) * 35 // 100], txs[len(txs) * 65 // 100]
    landing, warehouse = tmp_path / "landing", tmp_path / "warehouse"

    _land(landing / "backfill", "cdc.dbo_hist_CT_1.jsonl", h.records("cdc_ct", [c for c in changes if c.tx <= x], rng))
    _land(landing / "stream", "events-1.json", h.records("debezium", [c for c in changes if w <= c.tx <= x], rng))
    for part in parts:
        _write_silver(spark, part, warehouse)
    first = after_run.apply_table(spark, gold, warehouse, parts=parts)
    assert first.changes == _apply_rows(c for c in changes if c.tx <= x)  # the overlap once
    assert h.gold(spark, after_run.tables_dir(warehouse), "debezium", "hist") == h.expected([c for c in changes if c.tx <= x])

    rest = h.records("debezium", [c for c in changes if c.tx > x], rng)
    rest += [line for line in rest if rng.random() < 0.3]
    rng.shuffle(rest)
    _land(landing / "stream", "events-2.json", rest)
    _write_silver(spark, parts[1], warehouse)
    second = after_run.apply_table(spark, gold, warehouse, parts=parts)
    assert second.changes == _apply_rows(c for c in changes if c.tx > x)
    assert h.gold(spark, after_run.tables_dir(warehouse), "debezium", "hist") == h.expected(changes)
    assert json.loads((after_run.run_state_dir(warehouse, gold) / "sources.json").read_text()) == ["backfill", "stream"]

    again = after_run.apply_table(spark, gold, warehouse, parts=parts)  # nothing new: nothing applied
    assert (again.changes, again.rebuilt) == (0, None)

    # `spark-pipelines run` by hand: gold is a materialized view over both silvers, the same tables.
    dp = RecordingDP()
    monkeypatch.setattr(graph, "dp", dp)
    for part in parts:
        spark.read.format("delta").load(str(after_run.tables_dir(warehouse) / part.silver_table)).createOrReplaceTempView(part.silver_table)
    columns = get("cdc_ct").columns_for(parts[0], parts[0].source, spark)
    for scd in (1, 2):
        graph.declare(gold, scd, columns=columns, keys=[h.COL["id"]], parts=parts)
        view = dp.queries[f"gold_hist_scd{scd}"]()
        applied = spark.read.format("delta").load(str(after_run.tables_dir(warehouse) / f"gold_hist_scd{scd}"))
        same_order = applied.select(*[F.col(quote(c)) for c in view.columns])  # `row.id`, not a field
        assert sorted(map(str, view.collect())) == sorted(map(str, same_order.collect()))


@pytest.mark.parametrize("keys", [1, 2, 3])
def test_a_history_over_very_few_keys_is_drawn_and_touches_each_key_once_a_transaction(keys):
    """tests/histories.py over one to three keys (every change contends for the same rows): it drew
    a transaction's third change after a key change had taken the last free key, and stopped
    (`--keys 3`). Each key is still touched at most once per transaction, as the renderers assume."""
    for seed in range(40):
        changes = h.history(random.Random(seed), keys, 120)
        assert 120 <= len(changes) <= 122  # whole transactions: the last may overrun by two
        by_tx: dict[int, list[int]] = {}
        for c in changes:
            by_tx.setdefault(c.tx, []).extend({c.key, c.before_key})
        assert all(len(ks) == len(set(ks)) for ks in by_tx.values()), seed
        assert {c.key for c in changes} <= set(range(1, keys + 1))




def test_a_two_table_history_keeps_each_tables_order_and_shares_some_commits():
    """tests/histories.py ``--two-tables``: each table's own history survives the merge (same
    changes, same order, each of its transactions whole), positions number a transaction's changes
    across both tables, and some transactions change both -- the case a transaction topic's
    per-table counts and CES's sequence numbers must get right."""
    shared = 0
    for seed in range(20):
        own = {"hist": h.history(random.Random(seed), 4, 30, True), "hist2": h.history(random.Random(seed + 100), 4, 30)}
        merged = h.merge_tables(random.Random(seed), own)
        assert len(merged) == sum(map(len, own.values()))
        for table, changes in own.items():
            mine = [c for c in merged if c.table == table]
            assert [(c.op, c.key, c.old_key, c.before, c.after) for c in mine] == \
                [(c.op, c.key, c.old_key, c.before, c.after) for c in changes], (seed, table)
            for (a, b), (x, y) in zip(zip(changes, changes[1:]), zip(mine, mine[1:])):
                assert (a.tx == b.tx) == (x.tx == y.tx) and x.tx <= y.tx, (seed, table)
        order = [(c.tx, c.pos) for c in merged]
        assert order == sorted(order)
        for tx in {c.tx for c in merged}:
            assert sorted(c.pos for c in merged if c.tx == tx) == list(range(1, sum(c.tx == tx for c in merged) + 1))
        shared += sum(len({c.table for c in merged if c.tx == tx}) == 2 for tx in {c.tx for c in merged})
        for c in merged:  # every record names its change's table (a key change's delete and insert too)
            assert {json.loads(x)["source"]["table"] for x in h.debezium(c) if x != "null"} == {c.table}, c
            data: dict[str, str] = {}  # a split event's segments, in order, share its logicalid
            for x in map(json.loads, h.ces(c, random.Random(c.tx))):
                data[x["logicalid"]] = data.get(x["logicalid"], "") + x["data"]
            assert {json.loads(d)["eventsource"]["tbl"] for d in data.values()} == {c.table}, c
            assert json.loads(h.qlik(c, False)[0]).get("table", c.table) == c.table
            flat = [json.loads(x) for x in h.debezium_flat(c) if x != "null"]
            assert {x.get("payload", x)["__table"] for x in flat} == {c.table}, c
    assert shared >= 20, shared


def test_an_added_column_is_null_before_its_transaction_and_before_images_follow():
    """tests/histories.py ``--add-column``: ``note`` is NULL in every change before the middle
    transaction and drawn after it, and every before image is what the changes before it left
    (else the reference and the rendered old images would disagree about the row); Debezium's
    events hold it, in their images and Connect schemas, only from that transaction on."""
    h.COLUMNS.append("note")
    try:
        for seed in range(10):
            changes = h.with_added_column(h.history(random.Random(seed), 3, 80, True))
            start = h.added_from(changes)
            assert all(c.after is None or c.after["note"] is None for c in changes if c.tx < start)
            assert any(c.after and c.after["note"] for c in changes if c.tx >= start), seed
            rows: dict[int, dict] = {}
            for c in changes:
                assert c.before == rows.pop(c.before_key, None), (seed, c)
                if c.after is not None:
                    rows[c.key] = c.after
            # Debezium captures it from the ALTER on (a new capture instance): images and Connect schema;
            # with --rescale (seeds 5-9) the same ALTER makes price decimal(12,4), sent at scale 4 from there
            h.ADDED["on"], h.DBZ_SCHEMA["on"], h.RESCALED["on"] = True, True, seed >= 5
            try:
                events = [(c, json.loads(x)) for c in changes for x in map(h.with_connect_schema, h.debezium(c)) if x != "null"]
            finally:
                h.ADDED["on"], h.DBZ_SCHEMA["on"], h.RESCALED["on"] = False, False, False
            for c, ev in events:
                images = [i for i in (ev["payload"]["before"], ev["payload"]["after"]) if i is not None]
                row = next(f for f in ev["schema"]["fields"] if f["field"] == "after")
                assert all(("note" in i) == (c.tx >= start) for i in images), (seed, c)
                assert ("note" in [f["field"] for f in row["fields"]]) == (c.tx >= start), (seed, c)
                scale = 4 if seed >= 5 and c.tx >= start else 2
                price = next(f for f in row["fields"] if f["field"] == "price")
                assert price["parameters"]["scale"] == str(scale), (seed, c)
                after = ev["payload"]["after"]
                if after is not None and after["price"] is not None:
                    unscaled = int.from_bytes(base64.b64decode(after["price"]), "big", signed=True)
                    assert Decimal(unscaled).scaleb(-scale) == Decimal(c.after["price"]), (seed, c)
    finally:
        h.COLUMNS.remove("note")
