"""Local gold after a run (sqlcdc.gold): only new silver changes are merged, and the tables equal
the hand-written expectations of tests/test_debezium_gold.py whatever the split over runs.

Silver is made by the Debezium decoder and written where a run keeps it
(``<warehouse>/tables/silver_customers``): appended for streaming silver, overwritten with every
change so far for recomputed silver (CES and Qlik keep theirs that way).
"""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from sqlcdc import gold
from sqlcdc.config import ConfigError, SourceConfig
from sqlcdc.formats import base, debezium
from debezium_events import customer, event, line, lsn
from test_debezium_gold import COLS, EXPECTED_SCD1, EXPECTED_SCD2, HISTORY, TABLE


def silver_of(spark, lines, cols=COLS):
    bronze = base.bronze_columns(spark.createDataFrame([(v, "f") for v in lines], "value string, source_file string"))
    return debezium.decode(bronze, TABLE, cols).changes


def land(spark, wh, lines, mode="append", cols=COLS):
    silver_of(spark, lines, cols).write.format("delta").mode(mode).option("overwriteSchema", "true").save(
        str(wh / "tables" / "silver_customers"))


def scd1(spark, wh):
    rows = spark.read.format("delta").load(str(wh / "tables" / "gold_customers_scd1")).collect()
    return sorted((r.id, r.first_name, r.last_name) for r in rows)


def scd2(spark, wh):
    rows = spark.read.format("delta").load(str(wh / "tables" / "gold_customers_scd2")).collect()
    return sorted((r.id, r.last_name, r["__START_AT"].commit_lsn, r["__END_AT"].commit_lsn if r["__END_AT"] else None)
                  for r in rows)


def test_streaming_silver_over_three_runs_merges_only_what_is_new(spark, tmp_path):
    wh = tmp_path / "wh"
    runs = [HISTORY[:3], HISTORY[3:6], HISTORY[6:]]
    reports = []
    for lines in runs:
        land(spark, wh, lines)
        reports.append(gold.apply_table(spark, TABLE, wh))
    # Each run read its own changes only (Debezium's key change 2 -> 3 is a delete and a create).
    assert [r.changes for r in reports] == [3, 3, 2]
    assert reports[0].modes == {"gold_customers_scd1": "initial", "gold_customers_scd2": "initial"}
    assert reports[2].modes == {"gold_customers_scd1": "merge", "gold_customers_scd2": "merge"}
    assert not any(r.rebuilt for r in reports)
    assert scd1(spark, wh) == EXPECTED_SCD1
    assert scd2(spark, wh) == EXPECTED_SCD2

    again = gold.apply_table(spark, TABLE, wh)  # nothing landed: nothing read, nothing changed
    assert again.changes == 0 and again.modes == {} and again.unchanged
    assert scd1(spark, wh) == EXPECTED_SCD1


def test_a_batch_delivered_again_after_an_interrupted_run_changes_nothing(spark, tmp_path):
    wh = tmp_path / "wh"
    land(spark, wh, HISTORY[:4])
    gold.apply_table(spark, TABLE, wh)
    land(spark, wh, HISTORY[4:])
    gold.apply_table(spark, TABLE, wh)
    # A run killed after merging but before the stream committed its offsets: the batch comes again.
    # (Such a run never kept what it read: last_apply.json is written when an apply ends.)
    state = wh / "_sqlcdc" / "gold" / "customers"
    commits = state / "checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    (state / "last_apply.json").unlink()
    replayed = gold.apply_table(spark, TABLE, wh)
    assert replayed.changes == 4  # HISTORY[4:]
    assert scd1(spark, wh) == EXPECTED_SCD1
    assert scd2(spark, wh) == EXPECTED_SCD2


def test_an_apply_whose_silver_did_not_change_reads_nothing_and_anything_else_is_applied(spark, tmp_path, monkeypatch):
    """Nothing new since the last apply (same silver commit, config and code): no stream, no
    anti-join, no Spark job -- 3-7 s a table before. A new silver commit, a config change or a missing
    target is an apply as before."""
    from sqlcdc.gold import after_run

    qlik_like = replace(TABLE, source=SourceConfig(name="crm", format="qlik", landing=None))
    wh = tmp_path / "wh"
    for table in (TABLE, qlik_like):  # streaming silver, recomputed silver
        shutil.rmtree(wh, ignore_errors=True)
        land(spark, wh, HISTORY[:5], mode="overwrite")
        assert gold.apply_table(spark, table, wh).changes == 5
        with monkeypatch.context() as m:
            m.setattr(after_run, "changes_of", lambda *a: pytest.fail("an unchanged silver was read"))
            m.setattr(after_run, "_rebuild_reason", lambda *a: pytest.fail("an unchanged gold was inspected"))
            again = gold.apply_table(spark, table, wh)
        assert again.unchanged and again.changes == 0 and "silver unchanged since the last apply" in str(again)

        land(spark, wh, HISTORY if table is qlik_like else HISTORY[5:], mode="overwrite" if table is qlik_like else "append")
        new = gold.apply_table(spark, table, wh)
        assert (new.changes, new.unchanged) == (3, False)  # a new silver commit
        assert scd1(spark, wh) == EXPECTED_SCD1 and scd2(spark, wh) == EXPECTED_SCD2

        edited = gold.apply_table(spark, replace(table, tombstone_retention_days=30), wh)
        assert (edited.changes, edited.unchanged) == (0, False)  # another config: applied (nothing new)
        assert gold.apply_table(spark, replace(table, tombstone_retention_days=30), wh).unchanged
    shutil.rmtree(wh / "tables" / "gold_customers_scd2")  # (--full-refresh: the test below)
    missing = gold.apply_table(spark, replace(qlik_like, tombstone_retention_days=30), wh)  # as last applied
    assert missing.rebuilt and missing.rebuilt.startswith("missing") and not missing.unchanged
    assert scd1(spark, wh) == EXPECTED_SCD1 and scd2(spark, wh) == EXPECTED_SCD2


def test_recomputed_silver_applies_the_change_ids_not_yet_applied(spark, tmp_path):
    qlik_like = replace(TABLE, source=SourceConfig(name="crm", format="qlik", landing=None))
    wh = tmp_path / "wh"
    land(spark, wh, HISTORY[:5], mode="overwrite")  # silver recomputed from bronze: every change so far
    first = gold.apply_table(spark, qlik_like, wh)
    land(spark, wh, HISTORY, mode="overwrite")
    second = gold.apply_table(spark, qlik_like, wh)
    assert (first.changes, second.changes) == (5, 3)  # HISTORY[5:]: the three events not yet applied
    assert scd1(spark, wh) == EXPECTED_SCD1
    assert scd2(spark, wh) == EXPECTED_SCD2


def test_gold_is_rebuilt_from_silver_when_a_target_is_missing_or_columns_change(spark, tmp_path):
    wh = tmp_path / "wh"
    land(spark, wh, HISTORY[:4])
    gold.apply_table(spark, TABLE, wh)
    shutil.rmtree(wh / "tables" / "gold_customers_scd1")
    land(spark, wh, HISTORY[4:])
    rebuilt = gold.apply_table(spark, TABLE, wh)
    assert rebuilt.rebuilt == "missing gold_customers_scd1"
    assert rebuilt.changes == len(HISTORY)  # all of silver again
    assert scd1(spark, wh) == EXPECTED_SCD1
    assert scd2(spark, wh) == EXPECTED_SCD2

    # The table gains a column (silver rebuilt with it): gold is rebuilt with the column.
    tier = debezium.spec_from_config({"name": "tier", "type": "string"})
    land(spark, wh, HISTORY, mode="overwrite", cols=[*COLS, tier])
    widened = gold.apply_table(spark, TABLE, wh)
    assert widened.rebuilt == "the columns of dbo.customers changed (added tier)"
    assert spark.read.format("delta").load(str(wh / "tables" / "gold_customers_scd1")).columns == [
        "id", "first_name", "last_name", "email", "tier"]
    assert scd1(spark, wh) == EXPECTED_SCD1

    full = gold.apply_table(spark, TABLE, wh, full_refresh=True)
    assert full.rebuilt == "full refresh" and scd2(spark, wh) == EXPECTED_SCD2


def test_empty_silver_still_gives_empty_gold_tables(spark, tmp_path):
    wh = tmp_path / "wh"
    land(spark, wh, [])
    applied = gold.apply_table(spark, TABLE, wh)
    assert applied.changes == 0
    assert scd1(spark, wh) == [] and scd2(spark, wh) == []


def test_no_silver_yet_is_reported_not_an_error(spark, tmp_path):
    applied = gold.apply_table(spark, TABLE, tmp_path / "wh")
    assert applied.skipped.startswith("no silver table yet")


def test_a_gold_option_naming_an_unknown_column_is_refused_naming_table_and_field(spark, tmp_path):
    wh = tmp_path / "wh"
    land(spark, wh, HISTORY[:2])
    wrong = replace(TABLE, track_history_column_list=("emial",))
    with pytest.raises(ConfigError) as err:
        gold.apply_table(spark, wrong, wh)
    assert "customers: track_history_column_list: unknown column 'emial'" in str(err.value)
    assert not (wh / "tables" / "gold_customers_scd1").exists()  # refused before anything is written


LATE_UPDATE_OF_4 = line(event("u", before=customer(4, "cy", "c"), after=customer(4, "cy", "late"),
                              commit_lsn=lsn(0x14, 1, 5), change_lsn=lsn(0x14, 1, 5), serial=2))


def test_tombstones_are_kept_forever_by_default_and_forgotten_past_the_retention(spark, tmp_path):
    # Without retention: the update sequenced before key 4's delete, arriving a run later, changes nothing.
    # SCD1 only: retention is an SCD1 matter (SCD2 keeps its change log), and an SCD2 apply costs ~5 s.
    scd1_only = replace(TABLE, scd_types=(1,))
    kept = tmp_path / "kept"
    land(spark, kept, HISTORY)
    gold.apply_table(spark, scd1_only, kept)
    land(spark, kept, [LATE_UPDATE_OF_4])
    gold.apply_table(spark, scd1_only, kept)
    assert scd1(spark, kept) == EXPECTED_SCD1
    assert not (kept / "tables" / "gold_customers_scd2").exists()

    # A 1-day retention: both deletes (keys 2 and 4) committed in 2019, so their tombstones go; the
    # same late update then brings key 4 back: the trade-off tombstone_retention_days documents.
    short = tmp_path / "short"
    table = replace(scd1_only, tombstone_retention_days=1)
    land(spark, short, HISTORY)
    assert gold.apply_table(spark, table, short).forgotten == 2
    land(spark, short, [LATE_UPDATE_OF_4])
    gold.apply_table(spark, table, short)
    assert scd1(spark, short) == sorted(EXPECTED_SCD1 + [(4, "cy", "late")])


def test_tombstone_retention_is_the_auto_cdc_target_property_on_databricks(tmp_path):
    from sqlcdc.gold import auto_cdc_table_properties

    table = replace(TABLE, tombstone_retention_days=2, table_properties={"delta.appendOnly": "false"})
    assert auto_cdc_table_properties(table, 1) == {
        "delta.appendOnly": "false", "pipelines.cdc.tombstoneGCThresholdInSeconds": "172800"}
    assert auto_cdc_table_properties(table, 2) == {"delta.appendOnly": "false"}  # SCD2 keeps its history


def test_partition_and_cluster_columns_are_options_of_the_gold_tables():
    # They name data columns, which gold has at the top level (silver only inside before/after).
    from sqlcdc.gold import layout as gold_layout

    assert gold_layout(replace(TABLE, cluster_by=("name",))) == {"cluster_by": ["name"]}
    assert gold_layout(replace(TABLE, partition_cols=("city",))) == {"partition_cols": ["city"]}
    assert gold_layout(TABLE) == {}


def test_tombstone_retention_days_is_read_from_the_table_config(tmp_path):
    from sqlcdc.config import load_pipeline

    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  inv:\n    format: debezium\n    landing: x\n")
    (tmp_path / "tables" / "c.yml").write_text(
        "source: inv\ntable: dbo.customers\nkeys: [id]\ntombstone_retention_days: 0.5\n")
    assert load_pipeline(str(tmp_path / "pipeline.yml")).table("customers").tombstone_retention_days == 0.5
    (tmp_path / "tables" / "c.yml").write_text(
        "source: inv\ntable: dbo.customers\nkeys: [id]\ntombstone_retention_days: 0\n")
    with pytest.raises(ConfigError, match="tombstone_retention_days"):
        load_pipeline(str(tmp_path / "pipeline.yml"))


def _tables(*names: str):
    return tuple(replace(TABLE, name=n, table=n) for n in names)


def test_apply_all_applies_two_tables_at_once_and_says_them_in_config_order(monkeypatch, tmp_path):
    """No Spark: apply_table is replaced by a stand-in. ``a`` cannot finish before ``b`` has started
    (it waits on b's event, bounded), so it passes only when two tables run at once; lines still
    come in config order."""
    import threading

    from sqlcdc.config import PipelineConfig
    from sqlcdc.gold import after_run

    started = {n: threading.Event() for n in ("a", "b", "c")}

    def fake_apply(spark, table, warehouse, **kw):
        started[table.name].set()
        if table.name == "a":
            assert started["b"].wait(timeout=30), "b did not start while a was running"
        return after_run.Applied(table.name, changes=len(table.name))

    monkeypatch.setattr(after_run, "apply_table", fake_apply)
    cfg = PipelineConfig(name="p", sources={}, tables=_tables("a", "b", "c"), file="p.yml")
    lines: list[str] = []
    out = gold.apply_all(None, cfg, tmp_path, echo=lines.append, workers=2)
    assert [a.table for a in out] == ["a", "b", "c"]
    assert [line.split(":")[0] for line in lines] == ["a", "b", "c"]


def test_apply_all_stops_at_the_first_error_and_raises_it(monkeypatch, tmp_path):
    from sqlcdc.config import PipelineConfig
    from sqlcdc.gold import after_run

    applied: list[str] = []

    def fake_apply(spark, table, warehouse, **kw):
        if table.name == "a":
            raise ConfigError([f"{table.name}: scd2_track_history: no column 'nope'"])
        applied.append(table.name)
        return after_run.Applied(table.name)

    monkeypatch.setattr(after_run, "apply_table", fake_apply)
    cfg = PipelineConfig(name="p", sources={}, tables=_tables("a", "b", "c", "d"), file="p.yml")
    with pytest.raises(ConfigError, match="a: scd2_track_history"):
        gold.apply_all(None, cfg, tmp_path, workers=1)
    assert applied == []  # one at a time: a failed first, b, c and d never started
