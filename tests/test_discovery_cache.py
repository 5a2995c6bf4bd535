"""A local run's discovery reads only the files landed since the last run's (formats._discovery).

CES tables without ``columns:`` find their columns and keys in every landed event's
``eventsource.cols``: each run scanned the source's whole history at pipeline definition (22 s of
a test run's 45 s of definitions, docs/testing.md). With a state folder (``sqlcdc run``'s
``<warehouse>/_sqlcdc``) the rows found are kept with the files they cover: nothing new reads no landed
file, a new file is the only file read, and a changed or removed file, a changed config or code
version is a full scan again. Each case is checked against a full scan without the state folder.
Qlik's metadata versions are kept the same way; a version sent twice with one timestamp must be
decided as a full scan decides it, not by which file was read later.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import shutil

import pytest
from pyspark.sql import functions as F

import test_ces as ces_events  # its event builders (a module import: its tests are not collected here)
import test_qlik as qlik_events  # its fixtures' source and table
from sqlcdc.formats import _ces_metadata, _discovery, _qlik_metadata, base, qlik

ORDER_COLS = [("order_id", "int"), ("amount", "decimal(10,2)")]
ORDER_COLS_2 = ORDER_COLS + [("note", "nvarchar(20)")]
#: A file name Spark's URIs spell half escaped: the space and % escaped, the é and + not.
ODD, ODD_URI = "b é+%#.json", "b%20é+%25%23.json"


@pytest.fixture
def landed(tmp_path, monkeypatch):
    """(source, orders table, landing folder, state folder), the state folder set as a local run's."""
    landing, state = tmp_path / "landing", tmp_path / "state"
    monkeypatch.setenv(base.STATE_DIR_ENV, str(state))
    src = ces_events.source(landing)
    orders = dataclasses.replace(ces_events.purchases(src), name="orders", table="Orders", keys=())
    ces_events.land_json(landing, "a.json", [
        ces_events.event("INS", table="Orders", cols=ORDER_COLS, current={"order_id": 5, "amount": "1.50"},
                         pk={"order_id": 5}, lsn="0000002C00000400000A", seq=1),
        ces_events.event("INS", current={"purchase_id": 1}, pk={"purchase_id": 1}, seq=2),
    ])
    return src, orders, landing, state


def _discover(table, spark):
    with base.one_scan_per_source():
        return _ces_metadata._discover(table, table.source, spark)


def _full(table, spark, monkeypatch):
    """What a scan of every landed file finds (no state folder: nothing kept, nothing read)."""
    with monkeypatch.context() as m:
        m.delenv(base.STATE_DIR_ENV)
        return _discover(table, spark)


def _aggregated_files(monkeypatch, module=_ces_metadata, name="_source_shapes") -> list[set[str]]:
    """The landed files each call of a discovery aggregate (CES shapes by default) reads, in call order."""
    seen: list[set[str]] = []
    real = getattr(module, name)

    def counted(bronze, *rest):
        seen.append({os.path.basename(r.source_file) for r in bronze.select("source_file").distinct().collect()})
        return real(bronze, *rest)

    monkeypatch.setattr(module, name, counted)
    return seen


_groups = itertools.count()


def _jobs_during(spark, action) -> tuple[object, list[int]]:
    sc, group = spark.sparkContext, f"sqlcdc-discovery-probe-{next(_groups)}"
    sc.setJobGroup(group, "discovery")
    try:
        out = action()
        jobs = list(sc.statusTracker().getJobIdsForGroup(group))
    finally:
        sc.setJobGroup("", "")
    return out, jobs


def test_second_scan_of_the_same_files_runs_no_job_and_a_new_file_is_the_only_one_read(spark, landed, monkeypatch):
    src, orders, landing, state = landed
    files = _aggregated_files(monkeypatch)
    first = _discover(orders, spark)
    assert files == [{"a.json"}]
    assert [c["name"] for c in first["cols"]] == ["order_id", "amount"] and first["keys"] == ["order_id"]
    assert len(list((state / _discovery.CACHE_DIR).glob("*.json"))) == 1

    again, jobs = _jobs_during(spark, lambda: _discover(orders, spark))
    assert again == first and files == [{"a.json"}]  # the landing is not aggregated again
    with base.one_scan_per_source():  # the jobs of a lookup in rows already scanned, for comparison
        _ces_metadata._discover(orders, src, spark)
        _, lookup = _jobs_during(spark, lambda: _ces_metadata._discover(orders, src, spark))
    assert len(jobs) == len(lookup)  # a kept scan costs what a second table of one scan does

    # a later event adds a column and changes the key; an earlier one (older lsn) comes in a new file too
    ces_events.land_json(landing, ODD, [
        ces_events.event("UPD", table="Orders", cols=ORDER_COLS_2, current={"order_id": 5, "amount": "2.00", "note": "x"},
                         pk={"order_id": 5, "amount": "2.00"}, lsn="0000002C00000500000A", seq=1),
        ces_events.event("INS", table="Orders", cols=ORDER_COLS, current={"order_id": 4, "amount": "1.00"},
                         pk={"order_id": 4}, lsn="0000002C00000300000A", seq=1),
    ])
    merged = _discover(orders, spark)
    assert files == [{"a.json"}, {ODD_URI}]  # only the new file was read, found by its URI spelling
    assert [c["name"] for c in merged["cols"]] == ["order_id", "amount", "note"]
    assert merged["keys"] == ["order_id", "amount"]
    assert merged["first_seen"]["order_id"] == ("0000002C00000300000A", 1)  # the older event in the new file
    assert merged["first_seen"]["note"] == ("0000002C00000500000A", 1)
    assert merged == _full(orders, spark, monkeypatch)


def test_a_changed_or_removed_file_or_config_is_a_full_scan(spark, landed, monkeypatch):
    src, orders, landing, state = landed
    ces_events.land_json(landing, "b.json", [
        ces_events.event("UPD", table="Orders", cols=ORDER_COLS_2, current={"order_id": 5, "note": "x"},
                         pk={"order_id": 5}, lsn="0000002C00000500000A", seq=1)])
    files = _aggregated_files(monkeypatch)
    assert [c["name"] for c in _discover(orders, spark)["cols"]] == ["order_id", "amount", "note"]

    # b.json rewritten without the added column: the kept rows no longer hold, both files are read
    ces_events.land_json(landing, "b.json", [
        ces_events.event("UPD", table="Orders", cols=ORDER_COLS, current={"order_id": 5, "amount": "3.00"},
                         pk={"order_id": 5}, lsn="0000002C00000500000A", seq=1)])
    edited = _discover(orders, spark)
    assert files[-1] == {"a.json", "b.json"}
    assert [c["name"] for c in edited["cols"]] == ["order_id", "amount"] and edited == _full(orders, spark, monkeypatch)

    (landing / "a.json").unlink()  # a file gone: its events no longer count
    gone = _discover(orders, spark)
    assert files[-1] == {"b.json"} and gone["first_seen"]["order_id"] == ("0000002C00000500000A", 1)
    assert gone == _full(orders, spark, monkeypatch)

    # another config of the same source name (here: another landing) is not served the kept rows
    other = landing.parent / "other"
    ces_events.land_json(other, "c.json", [
        ces_events.event("INS", table="Orders", cols=[("order_id", "int")], current={"order_id": 1},
                         pk={"order_id": 1}, lsn="0000002C00000100000A", seq=1)])
    moved = dataclasses.replace(orders, source=dataclasses.replace(src, landing=str(other)))
    assert [c["name"] for c in _discover(moved, spark)["cols"]] == ["order_id"] and files[-1] == {"c.json"}


def test_kept_rows_survive_a_new_process_and_nothing_is_kept_without_a_state_folder(spark, landed, monkeypatch):
    src, orders, landing, state = landed
    first = _discover(orders, spark)
    [kept] = (state / _discovery.CACHE_DIR).glob("*.json")
    data = json.loads(kept.read_text())
    assert data["key"] == ["ces-shapes", src.name] and list(data["files"]) == [(landing / "a.json").as_uri()]
    # what the JSON holds reads back as the same rows (another process starts from the file)
    files = _aggregated_files(monkeypatch)
    assert _discover(orders, spark) == first and files == []

    kept.write_text("{not json")  # a damaged cache is no cache: a full scan, then kept again
    assert _discover(orders, spark) == first and files == [{"a.json"}]
    assert json.loads(kept.read_text())["digest"] == data["digest"]
    kept.write_text(json.dumps({**data, "rows": "not rows", "schema": "{}"}))  # right digest, wrong rows
    assert _discover(orders, spark) == first and files == [{"a.json"}, {"a.json"}]

    monkeypatch.delenv(base.STATE_DIR_ENV)
    assert _discover(orders, spark) == first and files[-1] == {"a.json"}  # no state folder: read again


def test_a_full_refresh_drops_what_discovery_kept_and_an_incremental_run_keeps_it(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from sqlcdc.cli import run
    from sqlcdc.config import load_pipeline

    (tmp_path / "config" / "tables").mkdir(parents=True)
    (tmp_path / "landing").mkdir()
    (tmp_path / "config" / "pipeline.yml").write_text(f"name: t\nsources:\n  s:\n    format: ces\n    landing: {tmp_path / 'landing'}\n")
    (tmp_path / "config" / "tables" / "orders.yml").write_text("source: s\ntable: dbo.Orders\n")
    cfg, wh = load_pipeline(tmp_path / "config" / "pipeline.yml"), tmp_path / "warehouse"
    kept = wh / "_sqlcdc" / _discovery.CACHE_DIR / "k.json"
    commands: list[list[str]] = []
    monkeypatch.setattr(run, "_run", lambda cmd, *a, **k: commands.append(cmd) or 0)
    engine = SimpleNamespace(remote="sc://127.0.0.1:1", log=None, spark=None, stop_serving=lambda: None)
    for full_refresh in (False, True):
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text("{}")
        assert run.run_pipeline(cfg, wh, engine, wh / "_sqlcdc" / "spec.yml", {}, full_refresh=full_refresh) == 0
        assert kept.exists() is not full_refresh
    assert "--full-refresh-all" in commands[-1] and "--full-refresh-all" not in commands[0]


# --- Qlik: metadata versions --------------------------------------------------------------------


def _versions(src, spark) -> list[dict]:
    with base.one_scan_per_source():
        rows = _qlik_metadata.discover(spark, src).collect()
    return sorted((r.asDict(recursive=True) for r in rows), key=lambda v: (v["table"], v["version"]))


def _record_id(uri: str, line: str) -> str:
    """bronze's record_id (base.record_id of source_file and value), computed here independently."""
    return hashlib.sha256(f"{uri}\x01{line}".encode()).hexdigest()[:32]


def test_qlik_metadata_versions_are_kept_and_a_tie_is_broken_as_a_full_scan_breaks_it(spark, tmp_path, monkeypatch):
    """A version sent twice with one ``lineage.timestamp`` keeps the message with the greater record
    id; merged with kept rows, the newer file must not win because it was read later."""
    landing, state = tmp_path / "landing", tmp_path / "state"
    landing.mkdir()
    monkeypatch.setenv(base.STATE_DIR_ENV, str(state))
    for name in ("01_metadata_v1.jsonl", "02_full_load.jsonl"):
        shutil.copy(qlik_events.FIXTURES / name, landing / name)
    src = qlik_events.source(landing)
    customers = qlik_events.table(src)
    files = _aggregated_files(monkeypatch, _qlik_metadata, "_found")

    def names():
        return [c.name for c in qlik.columns_for(customers, src, spark)]

    assert names() == ["ID", "NAME", "EMAIL", "BALANCE"] and files == [{"01_metadata_v1.jsonl", "02_full_load.jsonl"}]
    assert names() == ["ID", "NAME", "EMAIL", "BALANCE"] and len(files) == 1  # kept: nothing read again
    shutil.copy(qlik_events.FIXTURES / "03_cdc.jsonl", landing / "03_cdc.jsonl")  # tableVersion 2 adds TIER
    assert names() == ["ID", "NAME", "EMAIL", "BALANCE", "TIER"] and files[-1] == {"03_cdc.jsonl"}

    # version 1 again, same timestamp, one more column, in a file whose record id is the smaller one
    old_line = (landing / "01_metadata_v1.jsonl").read_text().splitlines()[0]
    [old] = (base.read_text_lines(spark, str(landing), streaming=False)
             .where(F.col("value") == old_line).select("source_file", "record_id").collect())
    assert _record_id(old.source_file, old_line) == old.record_id
    doc = json.loads(old_line)
    doc["message"]["tableStructure"]["tableColumns"]["X"] = {"ordinal": 9, "type": "INT4"}
    line = json.dumps(doc)
    name = next(n for n in (f"resent-{i}.jsonl" for i in itertools.count())
                if _record_id(old.source_file.rsplit("/", 1)[0] + "/" + n, line) < old.record_id)
    (landing / name).write_text(line + "\n")
    assert "X" not in names() and files[-1] == {name}  # the older message keeps version 1
    kept = _versions(src, spark)
    monkeypatch.delenv(base.STATE_DIR_ENV)
    assert kept == _versions(src, spark)  # a full scan finds the same
    monkeypatch.setenv(base.STATE_DIR_ENV, str(state))

    doc["message"]["lineage"]["timestamp"] = "2025-01-01T09:00:00.001"  # a later timestamp wins
    (landing / "later.jsonl").write_text(json.dumps(doc) + "\n")
    assert "X" in names() and files[-1] == {"later.jsonl"}
    assert len(list((state / _discovery.CACHE_DIR).glob("*.json"))) == 1
