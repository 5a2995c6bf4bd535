"""Whole-transaction apply (issue 18, :mod:`sqlcdc.gold.transactions`): gold shows a Qlik Replicate
transaction only once every one of its records has landed (``transactionEventCounter`` /
``transactionLastEvent``); one that never completes is quarantined after ``transactions.timeout_hours``.

Histories are tests/histories.py's (random, seeded); gold is compared with the reference model of the
changes whose transactions are complete."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import histories as h
from sqlcdc.config import Transactions, load_pipeline
from sqlcdc.formats import get
from sqlcdc.gold import after_run, transactions


def _project(tmp_path: Path, extra: str = "") -> Path:
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    (tmp_path / "landing").mkdir()
    (base / "pipeline.yml").write_text(
        f"name: tx\nsources:\n  q: {{format: qlik, landing: {tmp_path / 'landing'}}}\n{extra}")
    (base / "tables" / "hist.yml").write_text("name: hist\nsource: q\ntable: dbo.hist\n")
    return base / "pipeline.yml"


def _land(tmp_path: Path, name: str, lines: list[str]) -> None:
    (tmp_path / "landing" / name).write_text("\n".join(lines) + "\n")


def _run(spark, cfg, warehouse: Path, policy: Transactions) -> after_run.Applied:
    """One run's bronze and silver (as the pipeline stores them), then the gold apply."""
    [table] = cfg.tables
    decoder = get("qlik")
    tables = after_run.tables_dir(warehouse)
    decoder.read_bronze(spark, table.source, streaming=False).write.format("delta").mode("overwrite").save(
        str(tables / table.source.bronze_table))
    bronze = spark.read.format("delta").load(str(tables / table.source.bronze_table))
    decoded = decoder.decode(bronze, table, decoder.columns_for(table, table.source, spark))
    assert decoded.quarantine.count() == 0, [r.reason for r in decoded.quarantine.collect()]
    decoded.changes.write.format("delta").mode("overwrite").save(str(tables / table.silver_table))
    return after_run.apply_table(spark, table, warehouse, policy=policy)


def _multi(changes: list[h.Change]) -> list[int]:
    """Transactions of two changes or more."""
    sizes: dict[int, int] = {}
    for c in changes:
        sizes[c.tx] = sizes.get(c.tx, 0) + 1
    return [tx for tx, n in sorted(sizes.items()) if n >= 2]


@pytest.mark.parametrize("seed", [4, 11])
def test_a_transaction_split_over_two_runs_reaches_gold_whole(spark, tmp_path, seed):
    """Run 1 lands every record but the last of transaction A and the first of transaction B: gold
    equals the reference of the history without A and B (none of their changes), and the run says
    two transactions wait. Run 2 lands the missing records (and a share of the others again): gold
    equals the reference of the whole history, SCD1 and SCD2."""
    cfg = load_pipeline(_project(tmp_path))
    rng = random.Random(seed)
    changes = h.history(rng, 6, 36)
    a, b = rng.sample(_multi(changes), 2)
    lines = dict(enumerate(h.records("qlik", changes, rng)))  # one line per change
    held = {i for i, c in enumerate(changes) if (c.tx == a and c.pos == max(x.pos for x in changes if x.tx == a))
            or (c.tx == b and c.pos == 1)}
    first = [h.QLIK_METADATA] + [line for i, line in lines.items() if i not in held]
    rng.shuffle(first)
    _land(tmp_path, "part-1.jsonl", first)
    warehouse = tmp_path / "warehouse"

    run1 = _run(spark, cfg, warehouse, cfg.transactions)
    complete = [c for c in changes if c.tx not in (a, b)]
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(complete)
    assert "of 2 incomplete transaction(s) pending" in run1.waiting, run1.waiting
    n_waiting = sum(1 for c in changes if c.tx in (a, b)) - len(held)
    assert run1.waiting.startswith(f"; {n_waiting} changes of 2 incomplete"), run1.waiting

    again = [lines[i] for i in held] + [line for line in first if rng.random() < 0.3]
    rng.shuffle(again)
    _land(tmp_path, "part-2.jsonl", again)
    run2 = _run(spark, cfg, warehouse, cfg.transactions)
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(changes)
    assert run2.waiting == ""
    assert not (after_run.tables_dir(warehouse) / "quarantine_hist_transactions").exists()


def test_a_transaction_that_never_completes_is_quarantined_after_the_timeout(spark, tmp_path):
    cfg = load_pipeline(_project(tmp_path, "transactions: {timeout_hours: 24}\n"))
    assert cfg.transactions == Transactions(whole=True, timeout_hours=24)
    rng = random.Random(7)
    changes = h.history(rng, 5, 24)
    a = _multi(changes)[0]
    lines = h.records("qlik", changes, rng)
    last_of_a = max(c.pos for c in changes if c.tx == a)
    kept = [line for c, line in zip(changes, lines) if not (c.tx == a and c.pos == last_of_a)]
    _land(tmp_path, "part-1.jsonl", [h.QLIK_METADATA] + kept)
    warehouse = tmp_path / "warehouse"
    [table] = cfg.tables
    quarantine = after_run.tables_dir(warehouse) / "quarantine_hist_transactions"
    without_a = [c for c in changes if c.tx != a]

    waiting = _run(spark, cfg, warehouse, cfg.transactions)  # within the timeout: pending
    assert "pending" in waiting.waiting and not quarantine.exists()
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(without_a)

    expired = _run(spark, cfg, warehouse, Transactions(timeout_hours=0))  # past it: quarantined, not applied
    n = last_of_a - 1
    assert f"; {n} changes of 1 transaction(s) incomplete past 0 h -> quarantine_hist_transactions" in expired.waiting
    rows = spark.read.format("delta").load(str(quarantine)).collect()
    assert sorted(r["transaction_id"] for r in rows) == [f"T{a}"] * n
    assert {r["reason"].split(", the first at")[0] for r in rows} == {
        f"transaction T{a} incomplete after 0 h: {n} of ? of its changes landed (the last one has not landed)"}
    assert all(r["table_name"] == "hist" and r["bronze_record_id"] for r in rows)
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(without_a)

    # Turned off: each change is applied as it lands (what lands of A included); the quarantine goes.
    off = _run(spark, cfg, warehouse, Transactions(whole=False))
    assert (off.changes, off.waiting) == (n, "")
    assert not quarantine.exists()
    landed = [c for c in changes if not (c.tx == a and c.pos == last_of_a)]
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(landed)


def test_marks_count_every_table_and_skip_full_load_and_broken_records(spark, tmp_path):
    """A transaction spans tables: a record of a table not onboarded still counts towards it; a
    full-load record, a record that is not a valid data message and one without
    ``transactionLastEvent`` (the producer does not say where the transaction ends) give no mark."""
    cfg = load_pipeline(_project(tmp_path))
    headers = {"operation": "INSERT", "changeSequence": "20250101" + "0" * 26 + "1", "timestamp": "2025-01-01T10:00:01.000"}
    lines = [
        json.dumps({"schema": "dbo", "table": "hist", "data": {"ID": 1}, "beforeData": None,
                    "headers": {**headers, "transactionId": "T9", "transactionEventCounter": 1, "transactionLastEvent": False}}),
        json.dumps({"schema": "dbo", "table": "other", "data": {"X": 1}, "beforeData": None,
                    "headers": {**headers, "transactionId": "T9", "transactionEventCounter": 2, "transactionLastEvent": True}}),
        json.dumps({"schema": "dbo", "table": "hist", "data": {"ID": 2}, "beforeData": None,
                    "headers": {**headers, "operation": "REFRESH", "transactionId": "", "transactionEventCounter": 0,
                                "transactionLastEvent": True}}),
        '{"schema": "dbo", "table": "hist", "data": {"ID": 3}',  # cut short
        json.dumps({"schema": "dbo", "table": "hist", "data": {"ID": 4}, "beforeData": None,  # no end marked
                    "headers": {**headers, "transactionId": "T10", "transactionEventCounter": 1}}),
    ]
    _land(tmp_path, "part-1.jsonl", lines)
    source = cfg.sources["q"]
    marks = get("qlik").transaction_marks(get("qlik").read_bronze(spark, source, streaming=False), source)
    assert sorted((r["transaction_id"], r["position"], r["last"]) for r in marks.collect()) == [
        ("T9", 1, False), ("T9", 2, True)]
    assert get("debezium").transaction_marks(marks, source) is None  # a producer without marks: the default


def test_hold_by_counts(spark):
    """Complete = the last record landed and as many distinct places as its counter; duplicates once."""
    silver = spark.createDataFrame(
        [("c1", "A"), ("c2", "A"), ("c3", "B"), ("c4", "C"), ("c5", None), ("c6", "D")],
        "change_id string, transaction_id string")
    marks = spark.createDataFrame(
        [("A", 1, False), ("A", 2, True), ("A", 2, True),  # complete, a duplicate
         ("B", 1, False), ("B", 1, False), ("B", 3, True),  # 2 of 3 places, twice the first
         ("C", 1, False)],  # the last has not landed
        "transaction_id string, position bigint, last boolean").withColumn("landed", F.current_timestamp())
    ready, waiting = transactions.hold(silver, marks, Transactions())
    assert sorted(r.change_id for r in ready.collect()) == ["c1", "c2", "c5", "c6"]  # D: no marks
    assert sorted((r.change_id, r._have, r._size, r._state) for r in waiting.collect()) == [
        ("c3", 2, 3, "pending"), ("c4", 1, None, "pending")]
