"""Hostile rows of ``cdc.fn_cdc_get_net_changes_<ci>`` exports (``options.function: net_changes``):
each lands in exactly one place -- silver with its exact values, or quarantine with a reason that
names the problem -- as test_hostile_records asks of the all-changes exports.

Rows are JSON lines of ``dbo.orders`` (test_cdc_ct's table), landed in one file named after the
capture instance.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

import test_hostile_records as hr
from sqlcdc.formats import cdc_ct
from test_cdc_ct import c, make_source, make_table


def row(n: int, op: int, id_: int | None, **values) -> dict:
    base = {"__$start_lsn": "0x" + c(n), "__$operation": op, "__$update_mask": "0x1F", "id": id_,
            "customer": f"c{id_}", "amount": "10.00", "notes": None, "status": "new"}
    return {**base, **values}


def good_after(id_: int, **values) -> dict:
    return {"id": id_, "customer": f"c{id_}", "amount": Decimal("10.00"), "notes": None, "status": "new", **values}


C = hr.Case
CASES = [
    C("net", "good insert (2)", json.dumps(row(1, 2, 1)), after=good_after(1)),
    C("net", "good update (4), all with mask", json.dumps(row(2, 4, 2, customer="x")), after=good_after(2, customer="x")),
    C("net", "good upsert (5), all with merge", json.dumps(row(3, 5, 3, **{"__$update_mask": None})), after=good_after(3)),
    C("net", "good at the largest LSN", json.dumps(row(4, 2, 4, **{"__$start_lsn": "0x" + "F" * 20})), after=good_after(4)),
    C("net", "operation 3 (no before images in net changes)", json.dumps(row(5, 3, 5)),
      "__$operation 3 is not 1, 2, 4 or 5 (a net-changes export)"),
    C("net", "operation text", json.dumps(row(6, "insert", 6)), "__$operation insert is not 1, 2, 4 or 5"),
    C("net", "no __$start_lsn", json.dumps({k: v for k, v in row(7, 2, 7).items() if k != "__$start_lsn"}),
      "missing __$start_lsn"),
    C("net", "__$start_lsn too short", json.dumps(row(8, 2, 8, **{"__$start_lsn": "0x0027"})), "__$start_lsn 0x0027 is not an LSN"),
    C("net", "__$start_lsn as a 20-digit JSON number", json.dumps(row(9, 2, 9)).replace(f'"0x{c(9)}"', "12345678901234567890"),
      "__$start_lsn"),
    C("net", "update mask not binary", json.dumps(row(10, 4, 10, **{"__$update_mask": "0xZZ"})),
      "__$update_mask 0xZZ is not binary"),
    C("net", "key NULL", json.dumps(row(11, 2, None)), "key column id is NULL"),
    C("net", "decimal beyond precision", json.dumps(row(12, 2, 12, amount="123456789012.00")), "column amount: cannot read"),
    C("net", "tran_end_time beyond year 9999", json.dumps(row(13, 2, 13, tran_end_time="10000-01-01T00:00:00")),
      "tran_end_time 10000-01-01T00:00:00 is not a time within 0001-01-02..9999-12-30"),
    C("net", "two rows on one line", json.dumps(row(14, 2, 14)) + json.dumps(row(15, 2, 15)),
      "more than one JSON document on one line"),
    C("net", "not an object", '["0x00000027000001000010", 2]', "not a JSON object"),
    C("net", "JSON nested 5000 levels", '{"id": 16, "notes": ' + hr.DEEP + "}", "not a JSON object"),
    # one row's final state landed twice with different values: both quarantined, neither applied
    C("net", "conflict: first variant", json.dumps(row(17, 2, 17, customer="a")), "conflicting net-change rows"),
    C("net", "conflict: second variant", json.dumps(row(17, 4, 17, customer="b")), "conflicting net-change rows"),
]


@pytest.fixture(scope="module")
def outcomes(spark, tmp_path_factory):
    landing = tmp_path_factory.mktemp("net")
    (landing / "cdc.dbo_orders_CT_1.jsonl").write_text("\n".join(x.record for x in CASES) + "\n")
    source = make_source(landing, function="net_changes")
    table = make_table(source)
    bronze = cdc_ct.read_bronze(spark, source, streaming=False).cache()
    d = cdc_ct.decode(bronze, table, cdc_ct.columns_for(table, source, spark))
    return hr._outcomes(bronze, d.changes, [d.quarantine, cdc_ct.unrouted(bronze, source, [table])])


def test_the_cases_are_distinct():
    assert len({x.record for x in CASES}) == len({x.kind for x in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[x.kind for x in CASES])
def test_net_change_row_lands_in_the_expected_place(outcomes, case):
    hr.assert_in_place(outcomes[case.record], case)
