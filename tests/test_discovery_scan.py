"""Discovery reads a source once for all of its tables.

CES tables without ``columns:`` take their columns and keys from the events' ``eventsource.cols``;
Qlik tables from metadata messages. Each lookup scanned all of the source's landing: a source of 40
tables over a long history was read 40 times at pipeline definition, before any flow ran (measured
in one process, 5 CES tables over a 40,000-change history: 69 s of per-table scans against
18 s; issue 15's closing note). Inside ``one_scan_per_source`` (``declare_silver``, ``validate``) the
source is scanned once and each table's lookup reads the few rows it left; outside, every call reads
what has landed now.
"""

from __future__ import annotations

import dataclasses

import pytest

import histories
import test_ces as ces_events  # its event builders (a module import: its tests are not collected here)
from sqlcdc import formats
from sqlcdc.config import load_pipeline
from sqlcdc.formats import _ces_metadata, _qlik_metadata, base, ces

ORDER_COLS = [("order_id", "int"), ("amount", "decimal(10,2)")]


@pytest.fixture(autouse=True)
def _no_kept_discovery(monkeypatch):
    """These count full scans: no local run's kept rows (test_discovery_cache.py tests those)."""
    monkeypatch.delenv(base.STATE_DIR_ENV, raising=False)


def _counting(monkeypatch, module, name: str) -> list:
    calls: list = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _columns(decoder, tables, source, spark):
    out = []
    for t in tables:
        try:
            out.append([(c.name, c.spark_type) for c in decoder.columns_for(t, source, spark)])
        except formats.NotYetDiscovered:
            out.append(None)
    return out


def test_ces_tables_are_discovered_from_one_scan_of_their_source(spark, tmp_path, monkeypatch):
    landing = tmp_path / "landing"
    src = ces_events.source(landing)
    purchases = ces_events.purchases(src)
    orders = dataclasses.replace(purchases, name="orders", table="Orders", keys=())
    waiting = dataclasses.replace(purchases, name="returns", table="Returns", keys=())
    ces_events.land_json(landing, "events.json", [
        ces_events.event("INS", current={"purchase_id": 1}, pk={"purchase_id": 1}, seq=1),
        ces_events.event("INS", table="Orders", cols=ORDER_COLS, current={"order_id": 5, "amount": "1.50"},
                         pk={"order_id": 5}, seq=2),
    ])
    tables = [purchases, orders, waiting]
    scans = _counting(monkeypatch, _ces_metadata, "_source_shapes")
    monkeypatch.setattr(ces, "_discovered", {})
    each = _columns(ces, tables, src, spark)
    assert len(scans) == 3  # outside the block: a scan per table
    monkeypatch.setattr(ces, "_discovered", {})
    with base.one_scan_per_source():
        once = _columns(ces, tables, src, spark)
        assert ces.keys_for(orders, src, spark) == ["order_id"]  # found from pkkey in the same scan
    assert len(scans) == 4
    assert once == each
    assert once[1] == [("order_id", "int"), ("amount", "decimal(10,2)")] and once[2] is None
    assert [n for n, _ in once[0]] == [n for n, _ in ces_events.PURCHASE_COLS]

    # after the block, what lands next is seen: the waiting table gets its columns
    ces_events.land_json(landing, "more.json", [
        ces_events.event("INS", table="Returns", cols=ORDER_COLS, current={"order_id": 6}, pk={"order_id": 6}, seq=3)])
    assert _columns(ces, [waiting], src, spark) == [[("order_id", "int"), ("amount", "decimal(10,2)")]]


def test_qlik_tables_are_discovered_from_one_scan_of_their_metadata(spark, tmp_path, monkeypatch):
    config, _ = histories.land(tmp_path, ["qlik"], keys=3, changes=6, seed=2)
    cfg = load_pipeline(config)
    [source] = cfg.sources.values()
    [table] = cfg.tables_of(source.name)
    tables = [table] + [dataclasses.replace(table, name=f"{table.name}_{i}", table=f"{table.table}_{i}", keys=())
                        for i in range(2)]
    decoder = formats.get("qlik")
    scans = _counting(monkeypatch, _qlik_metadata, "_found")
    each = _columns(decoder, tables, source, spark)
    assert len(scans) == 3
    with base.one_scan_per_source():
        once = _columns(decoder, tables, source, spark)
    assert len(scans) == 4 and once == each
    assert once[0] is not None and once[1] is None and once[2] is None  # only the landed table has metadata


def test_one_scan_blocks_nest_and_end():
    with base.one_scan_per_source():
        with base.one_scan_per_source():
            assert base._scans is not None
        assert base._scans is not None  # the outer block's scans are kept
    assert base._scans is None
    with pytest.raises(RuntimeError), base.one_scan_per_source():
        raise RuntimeError("a failed declaration")
    assert base._scans is None
