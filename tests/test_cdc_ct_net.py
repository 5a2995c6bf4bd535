"""Exports of cdc.fn_cdc_get_net_changes_<ci> (option `function: net_changes`) -> silver -> gold.

The net-change rows below are written by hand from the fixture history
(tests/fixtures/cdc_ct/history/cdc.dbo_orders_CT.csv, transactions 1-6) the way SQL Server's
documentation (seed 001) describes the function: one row per changed source row and window, its
final content, ``__$start_lsn`` = the commit LSN of its last change in the window, no ``__$seqval``;
operation 1/2/4 (``all``, ``all with mask``) or 1/5 (``all with merge``). A row inserted and deleted
inside one window does not appear. The key change 3 -> 30 (transaction 3) nets to a delete of 3
and an insert of 30.
"""

from __future__ import annotations

import csv
import datetime as dt
from decimal import Decimal

import pytest

from sqlcdc.config import ConfigError
from sqlcdc.formats import cdc_ct
from test_cdc_ct import (NAMES, NET_CHANGES_TARGET, c, decode_landing, gold, history_rows, land_jsonl, make_source,
                         make_table)

D = Decimal
HEADER = ["__$start_lsn", "__$operation", "__$update_mask", *NAMES]


def net(n: int, op: int, row: tuple, mask: str | None = None) -> dict:
    return dict(zip(HEADER, ("0x" + c(n), str(op), mask, *[None if v is None else str(v) for v in row])))


ALICE_2 = (1, "alice", "15.00", "note one", "new")
ALICIA_5 = (1, "alicia", "15.00", "note one b", "new")
BOB_2 = (2, "bob", "20.00", "a long note", "new")
CAROL = (3, "carol", "30.00", "note three", "new")
CAROL_30 = (30, "carol", "30.00", "note three", "new")
DAVE_4 = (4, "dave", "45.00", None, "paid")

# fn_cdc_get_net_changes_dbo_orders(c(1), c(2), N'all'): transactions 1-2
WINDOW_A = [net(2, 2, ALICE_2), net(2, 2, BOB_2), net(1, 2, CAROL)]
# ... (c(3), c(6), N'all with mask'): transactions 3-6; 5 (erin) came and went inside the window;
# alice's two updates in transaction 5 touched customer (bit 2) and notes (bit 4): mask 0x0A
WINDOW_B = [net(3, 1, BOB_2), net(3, 1, CAROL), net(3, 2, CAROL_30), net(4, 2, DAVE_4), net(5, 4, ALICIA_5, "0x0A")]
# the same window with N'all with merge': inserts and updates are 5, masks NULL
WINDOW_B_MERGE = [dict(r, **{"__$operation": "1" if r["__$operation"] == "1" else "5", "__$update_mask": None})
                  for r in WINDOW_B]
# ... (c(1), c(6), N'all'): the whole history at once, overlapping both windows
WHOLE = [net(5, 2, ALICIA_5), net(4, 2, DAVE_4), net(3, 2, CAROL_30)]

# Hand-written SCD2 of windows A then B, by commit LSN: a version per window, not per change.
EXPECTED_SCD2 = sorted([
    ((1, "alice", D("15.00"), "note one", "new"), c(2), c(5)),
    ((1, "alicia", D("15.00"), "note one b", "new"), c(5), None),
    ((2, "bob", D("20.00"), "a long note", "new"), c(2), c(3)),
    ((3, "carol", D("30.00"), "note three", "new"), c(1), c(3)),
    ((30, "carol", D("30.00"), "note three", "new"), c(3), None),
    ((4, "dave", D("45.00"), None, "paid"), c(4), None),
], key=repr)


def land(folder, name: str, rows: list[dict]):
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / name).open("w", newline="") as fh:
        w = csv.DictWriter(fh, HEADER)
        w.writeheader()
        w.writerows(rows)
    return folder


def decode(spark, landing, **options):
    src = make_source(landing, function="net_changes", **options)
    table = make_table(src)
    bronze = cdc_ct.read_bronze(spark, src)
    cols = cdc_ct.columns_for(table, src, spark)
    return bronze, table, cols, cdc_ct.decode(bronze, table, cols)


def by_commit(history) -> list[tuple]:
    return sorted(((values, start[0], end[0] if end else None) for values, start, end in history), key=repr)


@pytest.mark.parametrize("window_b", [WINDOW_B, WINDOW_B_MERGE], ids=["all with mask", "all with merge"])
def test_net_windows_give_the_gold_of_all_changes(spark, tmp_path, window_b):
    land(tmp_path, "dbo_orders_CT.a.csv", WINDOW_A)
    land(tmp_path, "dbo_orders_CT.b.csv", window_b)
    _, _, _, decoded = decode(spark, tmp_path)
    assert decoded.quarantine.count() == 0
    current, history = gold(decoded.changes)
    # the all-changes export of the same history ends in the same current rows (test_cdc_ct)
    assert current == NET_CHANGES_TARGET
    assert by_commit(history) == EXPECTED_SCD2
    rows = {(r.key.id, r.sequence.commit_lsn): r for r in decoded.changes.collect()}
    assert len(rows) == 8
    alicia = rows[(1, c(5))]
    assert alicia.op == "UPDATE" and alicia.before is None
    merged = window_b is WINDOW_B_MERGE
    # the mask of the window (all with mask) lists what changed; all with merge has none
    assert alicia.changed_columns == (None if merged else ["customer", "notes"])
    assert rows[(4, c(4))].op == ("UPDATE" if merged else "INSERT")
    assert rows[(2, c(3))].op == "DELETE" and rows[(2, c(3))].before.customer == "bob"


def test_overlapping_windows_are_one_change_and_count_as_duplicates(spark, tmp_path):
    """The whole-history export repeats alicia, dave and carol 30 at the same commit LSNs, alicia as
    an insert (2) where window B says update (4): the same change (identity: commit LSN + key)."""
    land(tmp_path, "dbo_orders_CT.a.csv", WINDOW_A)
    land(tmp_path, "dbo_orders_CT.b.csv", WINDOW_B)
    land(tmp_path, "dbo_orders_CT.whole.csv", WHOLE)
    bronze, table, cols, decoded = decode(spark, tmp_path)
    assert decoded.quarantine.count() == 0
    current, history = gold(decoded.changes)
    assert current == NET_CHANGES_TARGET and by_commit(history) == EXPECTED_SCD2
    dups = cdc_ct.duplicates(bronze, table, cols)
    landed, silver, dup = bronze.count(), decoded.changes.count(), dups.count()
    assert (landed, silver, dup) == (11, 8, 3)  # landed = silver + duplicates
    files = {r.record_id: r.source_file.rsplit("/", 1)[-1] for r in bronze.collect()}
    # each duplicate pairs window B's row with the whole export's (which copy is kept: lowest record id)
    assert [sorted((files[r.record_id], files[r.kept_record_id])) for r in dups.collect()] == \
        [["dbo_orders_CT.b.csv", "dbo_orders_CT.whole.csv"]] * 3
    # the change id names the commit and the key, so a rerun keeps it
    assert sorted(r.change_id for r in decoded.changes.where("key.id = 1").collect()) == [
        f"cdc_ct:dbo_orders:{c(2)}:net:{{\"id\":1}}", f"cdc_ct:dbo_orders:{c(5)}:net:{{\"id\":1}}"]


def test_a_lob_the_window_did_not_change_is_kept_when_the_mask_says_so(spark, tmp_path):
    """An update whose notes (nvarchar(max), ordinal 4: bit 0x08) is NULL: with a mask that leaves
    bit 4 clear the value was not provided (gold keeps it); without a mask (row filter 'all') the
    NULL is all there is, and it is applied."""
    land(tmp_path, "dbo_orders_CT.a.csv", WINDOW_A)
    later = {**net(7, 4, (1, "alice", "16.00", None, "new"), "0x04")}
    land(tmp_path / "m", "dbo_orders_CT.c.csv", [later])
    _, _, _, decoded = decode(spark, tmp_path)
    current, _ = gold(decoded.changes)
    assert (1, "alice", D("16.00"), "note one", "new") in current
    land(tmp_path / "m", "dbo_orders_CT.c.csv", [dict(later, **{"__$update_mask": None})])
    _, _, _, decoded = decode(spark, tmp_path)
    assert (1, "alice", D("16.00"), None, "new") in gold(decoded.changes)[0]


def test_hostile_net_rows_are_quarantined_with_the_reason(spark, tmp_path):
    rows = [
        *WINDOW_A,
        net(4, 2, DAVE_4),
        net(4, 2, (4, "dave", "46.00", None, "paid")),  # the same row's final state twice, differently
        net(4, 3, (7, "x", "1.00", None, "new")),        # an all-changes before image in a net export
        {**net(4, 2, (8, "y", "1.00", None, "new")), "__$start_lsn": "0x01"},
    ]
    land(tmp_path, "dbo_orders_CT.csv", rows)
    bronze, table, cols, decoded = decode(spark, tmp_path)
    reasons = sorted(r.reason for r in decoded.quarantine.collect())
    assert len(reasons) == 4
    assert reasons[0].startswith("__$operation 3 is not 1, 2, 4 or 5 (a net-changes export)")
    assert reasons[1].startswith("__$start_lsn 0x01 is not an LSN")
    assert reasons[2].startswith(f"conflicting net-change rows at __$start_lsn 0x{c(4)} for key {{\"id\":4}}: 2 different")
    assert reasons[3] == reasons[2]
    assert sorted(r.key.id for r in decoded.changes.collect()) == [1, 2, 3]
    assert bronze.count() == decoded.changes.count() + len(reasons)  # nothing vanished
    assert cdc_ct.duplicates(bronze, table, cols).count() == 0


def test_row_filters_must_be_the_functions_own(tmp_path):
    src = make_source(tmp_path, function="net_changes", row_filter="all update old")
    with pytest.raises(ConfigError, match="options.row_filter: 'all update old' is not a row filter of net_changes"):
        cdc_ct.columns_for(make_table(src), src)
    src = make_source(tmp_path, row_filter="all with merge")
    with pytest.raises(ConfigError, match="'all with merge' is not a row filter of all_changes"):
        cdc_ct.columns_for(make_table(src), src)


def test_an_all_changes_export_without_seqval_points_at_the_option(spark, tmp_path):
    land(tmp_path, "dbo_orders_CT.csv", WINDOW_A)
    src = make_source(tmp_path)
    table = make_table(src)
    decoded = cdc_ct.decode(cdc_ct.read_bronze(spark, src), table, cdc_ct.columns_for(table, src))
    reasons = {r.reason.split(" (capture")[0] for r in decoded.quarantine.collect()}
    assert reasons == {"missing __$seqval (an export of fn_cdc_get_net_changes? then set options.function: net_changes)"}


def test_commit_time_from_an_exported_lsn_time_mapping(spark, tmp_path):
    """An export joined to ``cdc.lsn_time_mapping`` (seed 001: ``tran_end_time`` of the row's
    ``__$start_lsn``) gives each change its transaction's commit time; a row exported without the
    column keeps a NULL commit time (never a made-up one), ordered by its LSN as before."""
    rows = history_rows()
    lsns = sorted({r["__$start_lsn"] for r in rows})
    times = {lsn: dt.datetime(2024, 2, 29, 13, 14, 15) + dt.timedelta(seconds=i, microseconds=123000)
             for i, lsn in enumerate(lsns)}
    last = lsns[-1]  # the last transaction's rows are exported without the mapping
    mapped = [dict(r, tran_end_time=None if r["__$start_lsn"] == last else times[r["__$start_lsn"]].isoformat(" "))
              for r in rows]
    _, decoded = decode_landing(spark, land_jsonl(tmp_path / "mapped", mapped))
    assert decoded.quarantine.count() == 0
    got = [(r.sequence.commit_lsn, r.commit_time) for r in decoded.changes.collect()]
    assert len(got) == len({(r["__$start_lsn"], r["__$seqval"]) for r in rows if r["__$operation"] != "3"})
    for commit_lsn, commit_time in got:
        lsn = "0x" + commit_lsn
        assert commit_time == (None if lsn == last else times[lsn]), (commit_lsn, commit_time)
