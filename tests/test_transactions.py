"""Whole-transaction apply (issue 18, :mod:`sqlcdc.gold.transactions`): gold shows a Qlik Replicate
transaction only once every one of its records has landed (``transactionEventCounter`` /
``transactionLastEvent``); one that never completes is quarantined after ``transactions.timeout_hours``.

Histories are tests/histories.py's (random, seeded); gold is compared with the reference model of the
changes whose transactions are complete."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import histories as h
from sqlcdc import summary
from sqlcdc.config import Transactions, load_pipeline
from sqlcdc.formats import get
from sqlcdc.gold import after_run, transactions


def _project(tmp_path: Path, extra: str = "", fmt: str = "qlik") -> Path:
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    (tmp_path / "landing").mkdir()
    opts = ", options: {serialization: json}" if fmt == "ces" else ""
    (base / "pipeline.yml").write_text(
        f"name: tx\nsources:\n  q: {{format: {fmt}, landing: {tmp_path / 'landing'}{opts}}}\n{extra}")
    keys = "keys: [id]\n" if fmt == "ces" else ""
    (base / "tables" / "hist.yml").write_text(f"name: hist\nsource: q\ntable: dbo.hist\n{keys}")
    return base / "pipeline.yml"


def _land(tmp_path: Path, name: str, lines: list[str]) -> None:
    (tmp_path / "landing" / name).write_text("\n".join(lines) + "\n")


def _run(spark, cfg, warehouse: Path, policy: Transactions, new_file: str | None = None,
         run_time: dt.datetime | None = None) -> after_run.Applied:
    """One run's bronze (everything landed) and silver as the pipeline stores them -- recomputed
    from all of bronze, or with ``new_file`` (a streaming source) appended with that file's
    changes -- then the gold apply."""
    [table] = cfg.tables
    decoder = get(table.source.format)
    tables = after_run.tables_dir(warehouse)
    decoder.read_bronze(spark, table.source, streaming=False).write.format("delta").mode("overwrite").save(
        str(tables / table.source.bronze_table))
    bronze = spark.read.format("delta").load(str(tables / table.source.bronze_table))
    if new_file is not None:
        bronze = bronze.where(F.col("source_file").endswith(new_file))
        assert decoder.unrouted(bronze, table.source, [table]).count() == 0  # BEGIN/END records: not quarantined
    decoded = decoder.decode(bronze, table, decoder.columns_for(table, table.source, spark))
    assert decoded.quarantine.count() == 0, [r.reason for r in decoded.quarantine.collect()]
    decoded.changes.write.format("delta").mode("overwrite" if new_file is None else "append").save(
        str(tables / table.silver_table))
    return after_run.apply_table(spark, table, warehouse, policy=policy, run_time=run_time)


def _waiting_rows(spark, warehouse: Path) -> list[tuple]:
    """``dq_transactions``, oldest run first: (run_time in epoch microseconds, source, table,
    pending changes, pending transactions, oldest pending age is known, expired changes, expired
    transactions)."""
    rows = spark.read.format("delta").load(str(after_run.tables_dir(warehouse) / "dq_transactions")).select(
        F.unix_micros("run_time").alias("at"), "source_name", "table_name", "pending_changes", "pending_transactions",
        F.col("oldest_pending_seconds").isNotNull().alias("aged"), "expired_changes", "expired_transactions",
    ).orderBy("at", "measured_at").collect()
    return [tuple(r) for r in rows]


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

    at1 = dt.datetime(2026, 11, 24, 10, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))  # 09:00 UTC
    run1 = _run(spark, cfg, warehouse, cfg.transactions, run_time=at1)
    complete = [c for c in changes if c.tx not in (a, b)]
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(complete)
    assert "of 2 incomplete transaction(s) pending" in run1.waiting, run1.waiting
    n_waiting = sum(1 for c in changes if c.tx in (a, b)) - len(held)
    assert run1.waiting.startswith(f"; {n_waiting} changes of 2 incomplete"), run1.waiting
    micros1 = 1_795_510_800_000_000  # 2026-11-24T09:00:00Z
    assert _waiting_rows(spark, warehouse) == [(micros1, "q", "hist", n_waiting, 2, True, 0, 0)]
    [table] = cfg.tables  # a run with nothing new while changes wait: they are looked at again (they may expire)
    still = after_run.apply_table(spark, table, warehouse, policy=cfg.transactions, run_time=at1 + dt.timedelta(minutes=1))
    assert not still.unchanged and (still.held.pending, still.held.pending_transactions) == (n_waiting, 2)

    again = [lines[i] for i in held] + [line for line in first if rng.random() < 0.3]
    rng.shuffle(again)
    _land(tmp_path, "part-2.jsonl", again)
    run2 = _run(spark, cfg, warehouse, cfg.transactions, run_time=at1 + dt.timedelta(minutes=5))
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(changes)
    assert run2.waiting == ""
    assert _waiting_rows(spark, warehouse)[2:] == [(micros1 + 300_000_000, "q", "hist", 0, 0, False, 0, 0)]
    idle = after_run.apply_table(spark, table, warehouse, policy=cfg.transactions, run_time=at1 + dt.timedelta(minutes=9))
    assert idle.unchanged and idle.waiting == ""  # nothing new, nothing waits: nothing read, still a row
    assert _waiting_rows(spark, warehouse)[3:] == [(micros1 + 540_000_000, "q", "hist", 0, 0, False, 0, 0)]
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
    assert [r[3:] for r in _waiting_rows(spark, warehouse)] == [(n, 1, True, 0, 0), (0, 0, False, n, 1)]
    listed = {(layer, name): rows for layer, name, rows in summary.counts(spark, cfg, warehouse)}
    assert (listed[("quarantine", "quarantine_hist_transactions")], listed[("dq", "dq_transactions")]) == (n, 2)
    assert {r["reason"].split(", the first at")[0] for r in rows} == {
        f"transaction T{a} incomplete after 0 h: {n} of ? of its changes landed (the record that ends it has not landed)"}
    assert all(r["table_name"] == "hist" and r["bronze_record_id"] for r in rows)
    assert h.gold(spark, after_run.tables_dir(warehouse), "qlik", "hist") == h.expected(without_a)

    # Turned off: each change is applied as it lands (what lands of A included); the quarantine goes.
    off = _run(spark, cfg, warehouse, Transactions(whole=False))
    assert (off.changes, off.waiting, off.held) == (n, "", None)
    assert not quarantine.exists()
    assert len(_waiting_rows(spark, warehouse)) == 2  # off: nothing held, no row
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


def _events(changes: list[h.Change]) -> int:
    """CES events (silver rows) of ``changes``: a key change is a delete and an insert."""
    return sum(2 if c.old_key is not None else 1 for c in changes)


def test_ces_commits_wait_for_a_later_commit_with_later_commit_on(spark, tmp_path):
    """CES never says where a commit ends: with ``transactions.later_commit`` a commit is applied once
    an event of a later commit has landed. Run 1 lands the commits before A and A's first change: gold
    shows every commit before A and nothing of A. Run 2 lands the rest but the last commit Z (and a
    share again): gold shows all but the commit before Z, which is now the latest and waits. Past the
    timeout it is quarantined as unconfirmed; once Z lands it is applied from there. Turned off, each
    change is applied as it lands."""
    cfg = load_pipeline(_project(tmp_path, "transactions: {later_commit: true}\n", fmt="ces"))
    assert cfg.transactions == Transactions(later_commit=True)
    rng = random.Random(3)
    changes = h.history(rng, 5, 30)
    rendered = [(c, h.ces(c, rng)) for c in changes]  # a change's lines (a split event's segments) land together
    a = next(tx for tx in _multi(changes) if 2 < tx < changes[-1].tx - 2)
    z = changes[-1].tx
    warehouse, tables = tmp_path / "warehouse", after_run.tables_dir(tmp_path / "warehouse")
    quarantine = tables / "quarantine_hist_transactions"

    first = [line for c, lines in rendered if c.tx < a or (c.tx == a and c.pos == 1) for line in lines]
    _land(tmp_path, "part-1.json", first)
    run1 = _run(spark, cfg, warehouse, cfg.transactions)
    assert h.gold(spark, tables, "ces", "hist") == h.expected([c for c in changes if c.tx < a])
    n_a1 = _events([c for c in changes if c.tx == a and c.pos == 1])
    assert run1.waiting.startswith(f"; {n_a1} changes of 1 incomplete transaction(s) pending"), run1.waiting

    second = [line for c, lines in rendered if (c.tx == a and c.pos > 1) or a < c.tx < z for line in lines]
    second += [line for line in first if rng.random() < 0.3]
    _land(tmp_path, "part-2.json", second)
    run2 = _run(spark, cfg, warehouse, cfg.transactions)
    assert h.gold(spark, tables, "ces", "hist") == h.expected([c for c in changes if c.tx < z - 1])
    n_last = _events([c for c in changes if c.tx == z - 1])
    assert run2.waiting.startswith(f"; {n_last} changes of 1 incomplete transaction(s) pending"), run2.waiting

    expired = _run(spark, cfg, warehouse, Transactions(timeout_hours=0, later_commit=True))
    assert "1 transaction(s) incomplete past 0 h -> quarantine_hist_transactions" in expired.waiting
    rows = spark.read.format("delta").load(str(quarantine)).collect()
    lsn = h.commit_hex(next(c for c in changes if c.tx == z - 1))
    assert {r["transaction_id"] for r in rows} == {lsn} and len({r["change_id"] for r in rows}) == n_last
    assert {r["reason"].split(" since its first")[0] for r in rows} == {
        f"commit {lsn} unconfirmed after 0 h: the producer does not say where a transaction ends and no later "
        "commit of the source has landed"}
    assert h.gold(spark, tables, "ces", "hist") == h.expected([c for c in changes if c.tx < z - 1])

    _land(tmp_path, "part-3.json", [line for c, lines in rendered if c.tx == z for line in lines])
    run4 = _run(spark, cfg, warehouse, cfg.transactions)  # Z lands: the quarantined commit is applied, Z waits
    assert h.gold(spark, tables, "ces", "hist") == h.expected([c for c in changes if c.tx < z])
    assert "pending" in run4.waiting and "-> quarantine_hist_transactions" not in run4.waiting, run4.waiting
    assert spark.read.format("delta").load(str(quarantine)).count() == 0

    off = _run(spark, cfg, warehouse, Transactions())  # later_commit off (the default): applied as landed
    assert off.waiting == "" and not quarantine.exists()
    assert h.gold(spark, tables, "ces", "hist") == h.expected(changes)


def test_ces_marks_are_commit_lsns_of_every_table(spark, tmp_path):
    """Every complete event of the source marks its commit (any table); one without a readable commit
    LSN marks nothing; ``last`` is never said."""
    cfg = load_pipeline(_project(tmp_path, fmt="ces"))
    cols = h.CES_COLS
    lines = [
        h.ces_event("INS", table="hist", cols=cols, old=None, current={"id": "1"}, pk={"id": "1"},
                    lsn="0000003100000001000A", seq=2, eid="e1"),
        h.ces_event("INS", table="other", cols=cols, old=None, current={"id": "2"}, pk={"id": "2"},
                    lsn="0000003100000001000A", seq=3, eid="e2"),
        h.ces_event("INS", table="hist", cols=cols, old=None, current={"id": "3"}, pk={"id": "3"},
                    lsn="0x1A", seq=2, eid="e3"),  # not an LSN: no mark (the event is quarantined)
    ]
    _land(tmp_path, "part-1.json", [json.dumps(e) for e in lines])
    source = cfg.sources["q"]
    decoder = get("ces")
    assert decoder.transaction_end == "later_commit"
    marks = decoder.transaction_marks(decoder.read_bronze(spark, source, streaming=False), source)
    assert sorted((r["transaction_id"], r["position"], r["last"], r["commit"]) for r in marks.collect()) == [
        ("0000003100000001000A", 2, None, "0000003100000001000A"),
        ("0000003100000001000A", 3, None, "0000003100000001000A")]


def test_hold_by_later_commit(spark):
    """With ``later_commit``, a transaction whose marks carry a ``commit`` is complete once a mark of a
    later commit landed; counted marks (no ``commit``) keep their rule; off, the rule is not used."""
    silver = spark.createDataFrame([("c1", "01"), ("c2", "02"), ("c3", "03"), ("c4", "T1")],
                                   "change_id string, transaction_id string")
    marks = spark.createDataFrame(
        [("01", 1, None, "01"), ("02", 1, None, "02"), ("03", 4, None, "03"), ("T1", 1, False, None)],
        "transaction_id string, position bigint, last boolean, commit string").withColumn("landed", F.current_timestamp())
    ready, waiting = transactions.hold(silver, marks, Transactions(later_commit=True))
    assert sorted(r.change_id for r in ready.collect()) == ["c1", "c2"]
    assert sorted((r.change_id, r._state) for r in waiting.collect()) == [("c3", "pending"), ("c4", "pending")]
    ready, _ = transactions.hold(silver, marks, Transactions())
    assert ready.count() == 0


# --- Debezium with provide.transaction.metadata --------------------------------------------------

_DBZ_TABLE = ("keys: [id]\ncolumns:\n  - {name: id, type: int}\n  - {name: name, type: string}\n"
              "  - {name: qty, type: int}\n  - {name: price, type: 'decimal(10,2)'}\n")


def _dbz_project(tmp_path: Path, extra: str = "") -> Path:
    cfg = _project(tmp_path, extra, fmt="debezium")
    (cfg.parent / "tables" / "hist.yml").write_text("name: hist\nsource: q\ntable: dbo.hist\n" + _DBZ_TABLE)
    return cfg


def test_debezium_transactions_wait_for_their_end_record_and_every_event(spark, tmp_path):
    """Debezium with transaction metadata (streaming silver): run 1 lands every event of A but not
    its END, and B's END but not one of its events: gold shows neither. Run 2 lands them (and a
    share again): gold equals the whole history, SCD1 and SCD2. A transaction whose END never lands
    is quarantined past the timeout; turned off, what landed is applied."""
    cfg = load_pipeline(_dbz_project(tmp_path))
    rng = random.Random(5)
    changes = h.history(rng, 6, 36)
    events, bounds = h.debezium_with_metadata(changes, rng)
    a, b = rng.sample(_multi(changes), 2)
    held_b = next(x for x in events[b] if x != "null")
    first = [x for tx, lines in events.items() for x in lines if x != held_b]
    first += [x for tx, lines in bounds.items() for x in (lines if tx != a else lines[:1])]
    rng.shuffle(first)
    _land(tmp_path, "events-1.json", first)
    warehouse, tables = tmp_path / "warehouse", after_run.tables_dir(tmp_path / "warehouse")
    bronze_skipped = spark.read.text(str(tmp_path / "landing")).where(get("debezium").is_skipped(
        spark.read.text(str(tmp_path / "landing")))).count()
    assert bronze_skipped == sum(1 for x in first if x == "null") + 2 * len(bounds) - 1  # tombstones + BEGIN/END

    run1 = _run(spark, cfg, warehouse, cfg.transactions, "events-1.json")
    assert h.gold(spark, tables, "debezium", "hist") == h.expected([c for c in changes if c.tx not in (a, b)])
    assert "of 2 incomplete transaction(s) pending" in run1.waiting, run1.waiting
    n_held = sum(1 for x in events[a] + events[b] if x != "null") - 1  # B's held-back event has not landed
    assert [r[1:] for r in _waiting_rows(spark, warehouse)] == [("q", "hist", n_held, 2, True, 0, 0)]

    again = [held_b, bounds[a][1]] + [x for x in first if rng.random() < 0.3]
    rng.shuffle(again)
    _land(tmp_path, "events-2.json", again)
    run2 = _run(spark, cfg, warehouse, cfg.transactions, "events-2.json")
    assert h.gold(spark, tables, "debezium", "hist") == h.expected(changes)
    assert run2.waiting == ""
    assert not (tables / "quarantine_hist_transactions").exists()
    assert [r[3:] for r in _waiting_rows(spark, warehouse)] == [(n_held, 2, True, 0, 0), (0, 0, False, 0, 0)]

    # SCD2: a transaction's versions share its commit point, so the table as of any commit C is the
    # versions started at or before C and not ended by then (docs/transactions.md).
    scd2 = spark.read.format("delta").load(str(tables / "gold_hist_scd2"))
    for c in (x for x in changes if x.tx in (a, b)):  # opened (not by a no-op update) and closed there
        if c.op == "INSERT" or (c.op == "UPDATE" and (c.old_key is not None or c.after != c.before)):
            assert scd2.where((F.col("id") == c.key) & (F.upper("__START_AT.commit_lsn") == h.commit_hex(c))).count() == 1
        if c.op == "DELETE" or c.old_key is not None:
            assert scd2.where((F.col("id") == c.before_key) & (F.upper("__END_AT.commit_lsn") == h.commit_hex(c))).count() == 1
    for commit in rng.sample(sorted({c.tx for c in changes}), 4):
        lsn = h.commit_hex(next(c for c in changes if c.tx == commit))
        as_of = scd2.where((F.upper("__START_AT.commit_lsn") <= lsn) & (
            F.col("__END_AT").isNull() | (F.upper("__END_AT.commit_lsn") > lsn))).collect()
        got = sorted(((r["id"], r["name"], r["qty"], None if r["price"] is None else f"{r['price']:.2f}") for r in as_of),
                     key=h.ref._sort_key)
        assert got == h.expected([c for c in changes if c.tx <= commit])[0], commit


def test_debezium_transaction_without_end_is_quarantined_and_without_transaction_topic_nothing_waits(spark, tmp_path):
    cfg = load_pipeline(_dbz_project(tmp_path))
    rng = random.Random(9)
    changes = h.history(rng, 5, 20)
    events, bounds = h.debezium_with_metadata(changes, rng)
    z = changes[-1].tx  # the last transaction's END comes late (Debezium writes it after the next one starts)
    _land(tmp_path, "events-1.json", [x for lines in events.values() for x in lines]
          + [x for tx, lines in bounds.items() for x in (lines if tx != z else lines[:1])])
    warehouse, tables = tmp_path / "warehouse", after_run.tables_dir(tmp_path / "warehouse")
    run1 = _run(spark, cfg, warehouse, Transactions(timeout_hours=0), "events-1.json")
    n = sum(1 for c in changes if c.tx == z)
    n_events = sum(1 for x in events[z] if x != "null")
    assert f"{n_events} changes of 1 transaction(s) incomplete past 0 h -> quarantine_hist_transactions" in run1.waiting
    rows = spark.read.format("delta").load(str(tables / "quarantine_hist_transactions")).collect()
    tid = json.loads(bounds[z][0]).get("payload", json.loads(bounds[z][0]))["id"]
    assert {r["transaction_id"] for r in rows} == {tid} and len(rows) == n_events
    assert {r["reason"].split(", the first at")[0] for r in rows} == {
        f"transaction {tid} incomplete after 0 h: {n_events} of ? of its changes landed (the record that ends it "
        "has not landed)"}
    assert h.gold(spark, tables, "debezium", "hist") == h.expected([c for c in changes if c.tx != z])
    assert n >= 1

    off = _run(spark, cfg, warehouse, Transactions(whole=False), "none")  # off: the held ones are applied
    assert (off.changes, off.waiting) == (n_events, "")
    assert h.gold(spark, tables, "debezium", "hist") == h.expected(changes)
    assert not (tables / "quarantine_hist_transactions").exists()

    # A source without the transaction topic: the blocks alone say nothing of where a transaction ends.
    plain = tmp_path / "plain"
    cfg2 = load_pipeline(_dbz_project(plain))
    _land(plain, "events-1.json", [x for tx, lines in events.items() for x in lines if tx != z])
    run = _run(spark, cfg2, plain / "warehouse", Transactions(), "events-1.json")
    assert (run.waiting, run.held) == ("", None)
    assert not (after_run.tables_dir(plain / "warehouse") / "dq_transactions").exists()
    assert h.gold(spark, after_run.tables_dir(plain / "warehouse"), "debezium", "hist") == h.expected(
        [c for c in changes if c.tx != z])
