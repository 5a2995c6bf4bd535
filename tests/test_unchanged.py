"""Which tables a `sqlcdc run` refreshes: only those of sources with something new since the last
successful run (`sqlcdc.cli.unchanged`). The end-to-end pipeline (test_e2e_pipeline.py) runs it:
its second run lands nothing for the hostile corpus's four sources, which keep their tables."""

from __future__ import annotations

import os
from pathlib import Path

from sqlcdc.cli import unchanged
from sqlcdc.config import load_pipeline


def _project(tmp_path: Path):
    """Two file-landed sources (one table each) and one read from Kafka, with every table of the
    file sources present in the warehouse, as after a run."""
    for d in ("dbz", "qlik"):
        (tmp_path / "landing" / d).mkdir(parents=True)
    (tmp_path / "landing" / "dbz" / "000.json").write_text("{}\n")
    (tmp_path / "landing" / "qlik" / "a.jsonl").write_text("{}\n")
    (tmp_path / "config" / "tables").mkdir(parents=True)
    (tmp_path / "config" / "pipeline.yml").write_text(
        "name: t\nsources:\n"
        f"  inventory:\n    format: debezium\n    landing: {tmp_path / 'landing' / 'dbz'}\n"
        f"  erp:\n    format: qlik\n    landing: {tmp_path / 'landing' / 'qlik'}\n"
        "  events:\n    format: debezium\n    kafka:\n      bootstrap_servers: b:9092\n      topic: t\n")
    tables = tmp_path / "config" / "tables"
    (tables / "customers.yml").write_text("source: inventory\ntable: dbo.customers\nkeys: [id]\n")
    (tables / "orders.yml").write_text("source: erp\ntable: dbo.orders\nkeys: [id]\n")
    (tables / "clicks.yml").write_text("source: events\ntable: dbo.clicks\nkeys: [id]\n")
    wh = tmp_path / "warehouse"
    for name in ("bronze_inventory", "quarantine_inventory", "dropped_inventory", "silver_customers",
                 "bronze_erp", "quarantine_erp", "dropped_erp", "decoded_erp__orders", "silver_orders"):
        (wh / "tables" / name).mkdir(parents=True)
    return (lambda: load_pipeline(tmp_path / "config" / "pipeline.yml")), wh


def _record(cfg, wh: Path) -> None:
    """What `sqlcdc run` does around a run that succeeds: plan, run, record the plan's fingerprints."""
    unchanged.record(wh, unchanged.plan(cfg, wh).fingerprints)


# a batch source's silver reads its table's records decoded once: refreshed with it (else the run
# excludes the decoded view's flow and silver cannot resolve)
ERP = ["bronze_erp", "quarantine_erp", "dropped_erp", "decoded_erp__orders", "silver_orders"]
INVENTORY = ["bronze_inventory", "quarantine_inventory", "dropped_inventory", "silver_customers"]
KAFKA = ["bronze_events", "quarantine_events", "dropped_events", "silver_clicks"]


def test_a_source_with_nothing_new_is_left_out_of_the_refresh(tmp_path):
    cfg, wh = _project(tmp_path)
    assert unchanged.plan(cfg(), wh).refresh is None  # nothing recorded: every table
    _record(cfg(), wh)
    # nothing landed: the file sources are left as they are; the topic cannot tell, so it is refreshed
    planned = unchanged.plan(cfg(), wh)
    assert planned.refresh == KAFKA + ["dq_metrics"]
    assert list(planned.left_out) == ["inventory", "erp"]
    # a new file in one landing folder: that source's tables
    (tmp_path / "landing" / "qlik" / "b.jsonl").write_text("y\n")
    assert unchanged.plan(cfg(), wh).refresh == ERP + KAFKA + ["dq_metrics"]
    # one named in another encoding (Latin-1): new too -- its name stopped the plan (UnicodeEncodeError)
    _record(cfg(), wh)
    with open(os.fsencode(tmp_path / "landing" / "dbz") + b"/caf\xe9.json", "wb") as fh:
        fh.write(b"{}\n")
    assert unchanged.plan(cfg(), wh).refresh == INVENTORY + KAFKA + ["dq_metrics"]


def test_a_file_rewritten_in_place_a_table_config_edited_or_a_table_gone_count_as_new(tmp_path):
    cfg, wh = _project(tmp_path)
    _record(cfg(), wh)
    dbz_file = tmp_path / "landing" / "dbz" / "000.json"
    dbz_file.write_text("{}\n{}\n")  # appended to in place
    assert unchanged.plan(cfg(), wh).refresh == INVENTORY + KAFKA + ["dq_metrics"]
    _record(cfg(), wh)
    st = dbz_file.stat()
    dbz_file.write_text("[]\n{}\n")  # same size, rewritten later
    os.utime(dbz_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert unchanged.plan(cfg(), wh).refresh == INVENTORY + KAFKA + ["dq_metrics"]
    _record(cfg(), wh)
    (tmp_path / "config" / "tables" / "orders.yml").write_text("source: erp\ntable: dbo.orders\nkeys: [id, line]\n")
    assert unchanged.plan(cfg(), wh).refresh == ERP + KAFKA + ["dq_metrics"]
    _record(cfg(), wh)
    (wh / "tables" / "silver_customers").rmdir()
    assert unchanged.plan(cfg(), wh).refresh == INVENTORY + KAFKA + ["dq_metrics"]


def test_a_run_that_starts_forgets_what_was_recorded(tmp_path):
    """A run that fails may leave any table half-written: the one after it refreshes every table."""
    cfg, wh = _project(tmp_path)
    _record(cfg(), wh)
    unchanged.forget(wh)
    assert unchanged.plan(cfg(), wh).refresh is None
    (wh / "_sqlcdc" / unchanged.STATE_FILE).write_text("not json")
    assert unchanged.plan(cfg(), wh).refresh is None


def test_a_ces_source_runs_every_time_as_its_split_segments_time_out_by_the_clock(tmp_path):
    (tmp_path / "landing").mkdir()
    (tmp_path / "landing" / "a.json").write_text("{}\n")
    (tmp_path / "pipeline.yml").write_text(f"name: t\nsources:\n  shop:\n    format: ces\n    landing: {tmp_path / 'landing'}\n")
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "purchases.yml").write_text("source: shop\ntable: dbo.Purchases\nkeys: [purchase_id]\n")
    cfg = load_pipeline(tmp_path / "pipeline.yml")
    wh = tmp_path / "warehouse"
    for name in ("bronze_shop", "quarantine_shop", "dropped_shop", "silver_purchases"):
        (wh / "tables" / name).mkdir(parents=True)
    _record(cfg, wh)
    assert unchanged.fingerprint(cfg, cfg.sources["shop"]) is None
    assert unchanged.plan(cfg, wh).refresh is None  # its only source runs: a whole run


def test_a_file_that_lands_while_a_run_runs_is_new_for_the_next_run(tmp_path):
    """The run may not have read it: what is recorded is what the plan saw before the run."""
    cfg, wh = _project(tmp_path)
    _record(cfg(), wh)
    planned = unchanged.plan(cfg(), wh)
    (tmp_path / "landing" / "dbz" / "001.json").write_text("{}\n")  # lands during the run
    unchanged.record(wh, planned.fingerprints)  # the run succeeded
    assert unchanged.plan(cfg(), wh).refresh == INVENTORY + KAFKA + ["dq_metrics"]
