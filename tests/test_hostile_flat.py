"""Hostile records for flattened Debezium (``debezium_flat``, the ``ExtractNewRecordState`` SMT):
each lands in exactly one place -- silver with its exact values, or quarantine with a reason that
names the problem -- as test_hostile_records asks of the four full formats.

The records are test_hostile_records' Debezium events of ``dbo.items`` flattened by
``debezium_events.flatten`` (the SMT as its documentation describes it, with the documented
``add.fields``), then spoiled one way each.
"""

from __future__ import annotations

import json

import pytest

import test_hostile_records as hr
from debezium_events import flatten
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats import debezium, debezium_flat

SOURCE = SourceConfig(name="flat", format="debezium_flat", landing=None)
TABLE = TableConfig(name="items", source=SOURCE, schema="dbo", table="items", keys=("id",))


def flat(id_: int, **after_changes) -> dict:
    return json.loads(flatten(json.dumps(hr.dbz_doc(id_, **after_changes))))


def spoiled(id_: int, **fields) -> str:
    """A flattened record of ``id_`` with ``fields`` set (a value None removes the field)."""
    row = flat(id_)
    for k, v in fields.items():
        if v is None:
            row.pop(k, None)
        else:
            row[k] = v
    return json.dumps(row)


C = hr.Case
CASES = [
    C("flat", "good", json.dumps(flat(1)), after=hr.dbz_typed(1), sequence=hr.dbz_seq(1)),
    C("flat", "good with the Connect schema", flatten(json.dumps(hr.dbz_doc(2)), with_schema=True),
      after=hr.dbz_typed(2)),
    C("flat", "good decimal.handling.mode=string", json.dumps(flat(3, price="10.50", rate="0.0000000001")),
      after=hr.dbz_typed(3, price=hr.Decimal("10.50"), rate=hr.Decimal("0.0000000001"))),
    C("flat", "no __commit_lsn", spoiled(10, __commit_lsn=None), "a flattened record without __commit_lsn cannot be ordered"),
    C("flat", "no __change_lsn", spoiled(11, __change_lsn=None), "a flattened record without __change_lsn cannot be ordered"),
    C("flat", "commit_lsn with short parts", spoiled(12, __commit_lsn="27:758:5"), "commit_lsn"),
    C("flat", "event_serial_no not an integer", spoiled(13, __event_serial_no="1.5"),
      "source.event_serial_no '1.5' is not an integer >= 0"),
    C("flat", "__op in upper case", spoiled(14, __op="C"), "unknown __op 'C' (expected one of c, u, d, r, t)"),
    C("flat", "commit time not a number", spoiled(15, __source_ts_ms="yesterday"), "source.ts_ms 'yesterday' is not a commit time"),
    C("flat", "no table, no topic folder", spoiled(16, __table=None, __schema=None), "cannot tell the table of a flattened record"),
    C("flat", "key NULL", spoiled(17, id=None), "key column id is NULL"),
    C("flat", "decimal unscaled beyond precision", json.dumps(flat(18, price=hr.b64_unscaled(10**12))),
      "unscaled value out of range for decimal(10,2)"),
    C("flat", "date beyond year 9999", json.dumps(flat(19, d=2932897)), "column d: cannot read"),
    C("flat", "a table not onboarded", spoiled(20, __schema="sales"), "no onboarded table for sales.items in source flat"),
    C("flat", "Connect schema: price at another scale", json.dumps({"schema": {"type": "struct", "fields": [
        {"field": "id", "type": "int32"}, {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                                            "parameters": {"scale": "3"}}]}, "payload": flat(21)}),
      "column price: the event's Connect schema gives it Decimal scale 3, and the table reads decimal(10,2)"),
    C("flat", "payload not an object", '{"schema": {"type": "struct"}, "payload": 5}', "`payload` is not a JSON object"),
    C("flat", "NaN literal", hr.with_raw(flat(21, f="@F@"), "@F@", "NaN"), "not JSON: NaN is not a JSON value"),
    C("flat", "JSON nested 5000 levels", '{"id": 22, "name": ' + hr.DEEP + "}", "not JSON: JSON nested too deeply (5001 levels"),
    C("flat", "two records on one line", json.dumps(flat(23)) + json.dumps(flat(24)), "more than one JSON document on one line"),
    C("flat", "a JSON array", "[1, 2]", "not a JSON object"),
    # a JSON number a double cannot hold (Spark reads it as 0.0 / 1.0), plain and under the Connect schema
    C("flat", "decimal number 1e-400", hr.with_raw(flat(25, price="@P@"), "@P@", "1e-400"),
      'column price: cannot read ["1e-400"] as decimal(10,2) (base64_decimal): more than 2 digits after the decimal point'),
    C("flat", "decimal number of 41 digits with the Connect schema",
      flatten(json.dumps(hr.dbz_doc(26, price="@P@")), with_schema=True).replace('"@P@"', "1." + "0" * 39 + "1"),
      "more than 2 digits after the decimal point (would be rounded)"),
    C("flat", "good decimal number of 20 digits (JsonConverter decimal.format=NUMERIC)",
      hr.with_raw(flat(28, rate="@R@"), "@R@", "1234567890.1234567891"),
      after=hr.dbz_typed(28, rate=hr.Decimal("1234567890.1234567891"))),
    C("flat", "good decimal number of 20 digits with the Connect schema",
      flatten(json.dumps(hr.dbz_doc(29, rate="@R@")), with_schema=True).replace('"@R@"', "1234567890.1234567891"),
      after=hr.dbz_typed(29, rate=hr.Decimal("1234567890.1234567891"))),
    C("flat", "good decimal number with an exponent", hr.with_raw(flat(27, price="@P@"), "@P@", "1.25e1"),
      after=hr.dbz_typed(27, price=hr.Decimal("12.50"))),
]


@pytest.fixture(scope="module")
def outcomes(spark):
    bronze = hr.bronze_of(spark, [c.record for c in CASES], "file:/landing/items.json").cache()
    d = debezium_flat.decode(bronze, TABLE, hr.DBZ_COLUMNS)
    return hr._outcomes(bronze, d.changes, [d.quarantine, debezium_flat.unrouted(bronze, SOURCE, [TABLE])])


def test_the_cases_are_distinct():
    assert len({c.record for c in CASES}) == len({c.kind for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_flattened_record_lands_in_the_expected_place(outcomes, case):
    hr.assert_in_place(outcomes[case.record], case)
