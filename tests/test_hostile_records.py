"""Hostile records, producer by producer: nothing raises, nothing is lost, nothing is silently wrong.

Issue 16. Each case is one landed record built from a seed-documented good record with one thing
made bad, and where it must end up: silver (with its exact values) or quarantine (with a reason
naming the problem, a substring written by hand). Good records, some at the edges of SQL Server's
domains, are mixed in with the bad ones and must reach silver exactly. All records of a producer
are decoded together, once (one Spark plan per producer), and every record must be in exactly one
place.

Kinds covered: ordering keys that do not read (Debezium ``xxxxxxxx:xxxxxxxx:xxxx`` LSNs,
change-table binary(10) LSNs, CES commit LSNs, Qlik changeSequence); values out of the column's
domain (decimal precision and scale -- never rounded --, dates and timestamps outside year
1..9999, Connect logical types that overflow, float NaN/±Infinity, unsigned ranges; U+FFFD in
text is a character, kept); and text that is not JSON (nested thousands of levels deep, NaN literals, duplicate keys).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats import _schema_check as sc
from sqlcdc import formats
from sqlcdc.formats import base, ces, cdc_ct, debezium, qlik
from sqlcdc.pipeline import Bronze, table_queries

from debezium_events import lsn as dbz_lsn
from test_ces import event as ces_event

DEEP = "[" * 5000 + "]" * 5000  # deeper than Python's recursion limit


@dataclass(frozen=True)
class Case:
    producer: str
    kind: str
    record: str
    reason: str | None = None  # quarantine when given; silver otherwise
    after: dict[str, Any] | None = None  # exact silver after image
    sequence: dict[str, Any] | None = None  # exact silver sequence, where the case is about it

    @property
    def place(self) -> str:
        return "quarantine" if self.reason is not None else "silver"


def bronze_of(spark, lines: list[str], file: str):
    df = spark.createDataFrame([(v, file) for v in lines], "value string, source_file string")
    return base.bronze_columns(df)


def as_the_pipeline_decodes(bronze, decoder, source, table, columns):
    """(silver, quarantines) as the pipeline makes them: records a check before any decoder
    rejects (not UTF-8, a lone surrogate escape: ``base.rejected_before_decoding``) are quarantined
    there, and the decoder sees the others through the table's flow queries (silver after the
    expectations; quarantine: the decoder's rejects and the default rules' failures, one decode)."""
    decoder = formats.get(source.format)  # the registered Decoder (callers name its module)
    seen = bronze.where(~base.is_rejected_before_decoding())
    flows = table_queries(decoder, table, columns, Bronze(decoder, lambda: seen))
    rejected = base.rejected_before_decoding(bronze, source.name, source.format)
    return flows["silver"](), [rejected, flows["quarantine"](), decoder.unrouted(seen, source, [table])]


def b64_unscaled(unscaled: int, width: int | None = None) -> str:
    """Kafka Connect Decimal: big-endian two's complement bytes of the unscaled value, base64."""
    n = width or (unscaled.bit_length() + 8) // 8
    return base64.b64encode(unscaled.to_bytes(n, "big", signed=True)).decode()


def with_raw(doc: dict, placeholder: str, raw: str) -> str:
    """``doc`` as JSON with the string ``placeholder`` replaced by raw JSON text (NaN, 1e400 ...)."""
    text = json.dumps(doc)
    assert f'"{placeholder}"' in text
    return text.replace(f'"{placeholder}"', raw)


# =============================================================================== Debezium

DBZ_SOURCE = SourceConfig(name="inventory", format="debezium", landing=None)
DBZ_TABLE = TableConfig(name="items", source=DBZ_SOURCE, schema="dbo", table="items", keys=("id",))
_DEC = "org.apache.kafka.connect.data.Decimal"
DBZ_FIELDS = [
    {"field": "id", "type": "int32"},
    {"field": "qty", "type": "int32"},
    {"field": "price", "type": "bytes", "name": _DEC, "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    {"field": "rate", "type": "bytes", "name": _DEC, "parameters": {"scale": "10", "connect.decimal.precision": "20"}},
    {"field": "d", "type": "int32", "name": "io.debezium.time.Date"},
    {"field": "t", "type": "int32", "name": "io.debezium.time.Time"},
    {"field": "ts", "type": "int64", "name": "io.debezium.time.Timestamp"},
    {"field": "mts", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"field": "nts", "type": "int64", "name": "io.debezium.time.NanoTimestamp"},
    {"field": "zts", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "f", "type": "float64"},
    {"field": "name", "type": "string"},
    {"field": "shape", "type": "struct", "name": "io.debezium.data.geometry.Geometry", "optional": True},
]
DBZ_COLUMNS = [debezium.spec_from_connect_field(f) for f in DBZ_FIELDS]

DBZ_GOOD_AFTER = {
    "qty": 3, "price": b64_unscaled(1999), "rate": b64_unscaled(123456789012), "d": 18052, "t": 37868470,
    "ts": 1559729468470, "mts": 1559729468470123, "nts": 1559729468470123456,
    "zts": "2019-06-05T12:11:08.47+02:00", "f": 1.5, "name": "ann",
}
DBZ_GOOD_TYPED = {
    "qty": 3, "price": Decimal("19.99"), "rate": Decimal("12.3456789012"), "d": dt.date(2019, 6, 5),
    "t": "10:31:08.470000", "ts": dt.datetime(2019, 6, 5, 10, 11, 8, 470000),
    "mts": dt.datetime(2019, 6, 5, 10, 11, 8, 470123), "nts": dt.datetime(2019, 6, 5, 10, 11, 8, 470123),
    "zts": dt.datetime(2019, 6, 5, 10, 11, 8, 470000), "f": 1.5, "name": "ann", "shape": None,
}
WKB = {"wkb": "AQEAAAAAAAAAAADwPwAAAAAAAABA", "srid": 4326}  # POINT(1 2), as Debezium writes a geometry


def dbz_doc(id_: int, op: str = "c", **after_changes) -> dict:
    """A payload-only event value (``schemas.enable=false``) of dbo.items, like the seed's."""
    after = {"id": id_, **DBZ_GOOD_AFTER, **after_changes}
    return {
        "before": None, "after": after, "op": op, "ts_ms": 1559729471470,
        "source": {"version": "2.7.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1559729468470,
                   "snapshot": "false", "db": "testDB", "schema": "dbo", "table": "items",
                   "change_lsn": dbz_lsn(0x27, 0x700 + id_, 3), "commit_lsn": dbz_lsn(0x27, 0x700 + id_, 5),
                   "event_serial_no": "1"},
    }


def _without(doc: dict, field: str) -> dict:
    return {k: v for k, v in doc.items() if k != field}


def _dbz_source_without(id_: int, field: str) -> dict:
    doc = dbz_doc(id_)
    doc["source"].pop(field)
    return doc


def dbz(id_: int, op: str = "c", source: dict | None = None, **after_changes) -> str:
    doc = dbz_doc(id_, op, **after_changes)
    doc["source"].update(source or {})
    return json.dumps(doc)


def dbz_typed(id_: int, **changes) -> dict:
    return {"id": id_, **DBZ_GOOD_TYPED, **changes}


def dbz_seq(id_: int) -> dict:
    return {"commit_lsn": f"00000027{0x700 + id_:08X}0005", "change_lsn": f"00000027{0x700 + id_:08X}0003", "serial": 1}


def dbz_with_schema(id_: int, schema: object = None, **field_changes: dict) -> str:
    """The event of :func:`dbz_doc` with its Connect schema (``schemas.enable=true``); a field of
    ``field_changes`` is that schema's field updated by it (``price={"parameters": {...}}``)."""
    if schema is None:
        row = [{**f, **field_changes.get(f["field"], {})} for f in DBZ_FIELDS]
        value = {"type": "struct", "fields": row, "optional": True, "name": "server1.dbo.items.Value"}
        schema = {"type": "struct", "name": "server1.dbo.items.Envelope", "fields": [
            {**value, "field": "before"}, {**value, "field": "after"},
            {"type": "struct", "fields": [], "field": "source"}, {"type": "string", "field": "op"}]}
    return json.dumps({"schema": schema, "payload": dbz_doc(id_)})


DBZ_OUT_OF_RANGE = "outside SQL Server's range (year 1..9999)"
DBZ_CASES = [
    # good records, some at the edges of the domains: all must reach silver exactly
    Case("debezium", "good", dbz(1), after=dbz_typed(1), sequence=dbz_seq(1)),
    Case("debezium", "good decimal -0.01 (one byte ff)", dbz(2, price=b64_unscaled(-1)), after=dbz_typed(2, price=Decimal("-0.01"))),
    Case("debezium", "good decimal at precision max", dbz(3, price=b64_unscaled(9999999999)),
         after=dbz_typed(3, price=Decimal("99999999.99"))),
    Case("debezium", "good decimal scale 10 not rounded", dbz(4, rate=b64_unscaled(-98765432109876543)),
         after=dbz_typed(4, rate=Decimal("-9876543.2109876543"))),
    Case("debezium", "good decimal.handling.mode=string", dbz(5, price="10.50", rate="0.0000000001"),
         after=dbz_typed(5, price=Decimal("10.50"), rate=Decimal("0.0000000001"))),
    Case("debezium", "good dates at SQL Server's bounds", dbz(6, d=-719162, ts=253402300799999),
         after=dbz_typed(6, d=dt.date(1, 1, 1), ts=dt.datetime(9999, 12, 31, 23, 59, 59, 999000))),
    Case("debezium", "good last millisecond of a day", dbz(7, t=86399999), after=dbz_typed(7, t="23:59:59.999000")),
    Case("debezium", "good snapshot read without change_lsn",
         dbz(8, op="r", source={"change_lsn": None, "event_serial_no": None, "snapshot": "true"}),
         after=dbz_typed(8), sequence={"commit_lsn": "00000027000007080005", "change_lsn": "0" * 20, "serial": 0}),
    Case("debezium", "good text with accents and emoji", dbz(9, name="Zoë 🚀"), after=dbz_typed(9, name="Zoë 🚀")),
    # ordering keys
    Case("debezium", "commit_lsn with short parts", dbz(20, source={"commit_lsn": "27:758:5"}),
         "source.commit_lsn '27:758:5' is not an LSN (xxxxxxxx:xxxxxxxx:xxxx, hex)"),
    Case("debezium", "commit_lsn not hex", dbz(21, source={"commit_lsn": "0000002g:00000758:0005"}),
         "source.commit_lsn '0000002g:00000758:0005' is not an LSN"),
    Case("debezium", "commit_lsn 24 digits", dbz(22, source={"commit_lsn": "000000270000075800050000"}),
         "source.commit_lsn '000000270000075800050000' is not an LSN"),
    Case("debezium", "commit_lsn 0x01", dbz(23, source={"commit_lsn": "0x01"}), "source.commit_lsn '0x01' is not an LSN"),
    Case("debezium", "commit_lsn 20 hex without colons", dbz(24, source={"commit_lsn": "00000027000007580005"}),
         "source.commit_lsn '00000027000007580005' is not an LSN"),
    Case("debezium", "commit_lsn a JSON number", dbz(25, source={"commit_lsn": 123456}), "source.commit_lsn '123456' is not an LSN"),
    Case("debezium", "commit_lsn zero", dbz(26, source={"commit_lsn": "00000000:00000000:0000"}),
         "source.commit_lsn '00000000:00000000:0000' is the zero LSN"),
    Case("debezium", "commit_lsn missing on an update", dbz(27, op="u", source={"commit_lsn": None}),
         "missing source.commit_lsn: a 'u' event cannot be ordered"),
    Case("debezium", "change_lsn missing on a create", dbz(28, source={"change_lsn": None}),
         "missing source.change_lsn: a 'c' event cannot be ordered"),
    Case("debezium", "change_lsn truncated", dbz(29, source={"change_lsn": "00000027:00000758"}),
         "source.change_lsn '00000027:00000758' is not an LSN"),
    Case("debezium", "event_serial_no not a number", dbz(30, source={"event_serial_no": "one"}),
         "source.event_serial_no 'one' is not an integer >= 0"),
    Case("debezium", "event_serial_no negative", dbz(31, source={"event_serial_no": -1}),
         "source.event_serial_no '-1' is not an integer >= 0"),
    Case("debezium", "source.ts_ms overflows a timestamp", dbz(32, source={"ts_ms": 9223372036854775807}),
         "source.ts_ms '9223372036854775807' is not a commit time"),
    # Connect Decimal
    Case("debezium", "decimal unscaled beyond precision", dbz(40, price=b64_unscaled(10**12)),
         f'column price: cannot read ["{b64_unscaled(10**12)}"] as decimal(10,2) (base64_decimal): unscaled value out of range'),
    Case("debezium", "decimal of 17 bytes", dbz(41, price=b64_unscaled(2**130)), "unscaled value out of range for decimal(10,2)"),
    Case("debezium", "decimal of 17 bytes negative", dbz(42, rate=b64_unscaled(-(2**130))),
         "column rate: cannot read"),
    Case("debezium", "decimal base64 with a bad last unit", dbz(43, price="A"),
         'column price: cannot read ["A"] as decimal(10,2) (base64_decimal)'),
    Case("debezium", "decimal number 1e-400 (0.0 as a double)", with_raw(dbz_doc(167, price="@P@"), "@P@", "1e-400"),
         'column price: cannot read ["1e-400"] as decimal(10,2) (base64_decimal): more than 2 digits after the decimal point'),
    Case("debezium", "decimal number of 41 digits (1.0 as a double)", with_raw(dbz_doc(168, price="@P@"), "@P@", "1." + "0" * 39 + "1"),
         "more than 2 digits after the decimal point (would be rounded)"),
    Case("debezium", "good decimal number with an exponent", with_raw(dbz_doc(169, price="@P@"), "@P@", "1.25e1"),
         after=dbz_typed(169, price=Decimal("12.50"))),
    Case("debezium", "good decimal number of 20 digits (JsonConverter decimal.format=NUMERIC), a double of 17",
         with_raw(dbz_doc(170, rate="@R@", f="@F@"), "@R@", "1234567890.1234567891").replace('"@F@"', "0.30000000000000004"),
         after=dbz_typed(170, rate=Decimal("1234567890.1234567891"), f=0.30000000000000004)),
    Case("debezium", "decimal number of 21 digits past the scale", with_raw(dbz_doc(171, rate="@R@"), "@R@", "1234567890.12345678912"),
         'column rate: cannot read ["1234567890.12345678912"] as decimal(20,10) (base64_decimal): more than 10 digits after'),
    Case("debezium", "decimal string past the scale by its exponent", dbz(166, price="1.00000000000000000000000000000000001e1"),
         'column price: cannot read ["1.00000000000000000000000000000000001e1"] as decimal(10,2) (base64_decimal): more than 2'),
    Case("debezium", "decimal string with excess scale", dbz(44, price="10.005"),
         "column price: cannot read [\"10.005\"] as decimal(10,2) (base64_decimal): more than 2 digits after the decimal point"),
    Case("debezium", "decimal string beyond precision", dbz(45, price="123456789012.5"),
         "column price: cannot read [\"123456789012.5\"] as decimal(10,2) (base64_decimal): out of range for decimal(10,2)"),
    # Connect Date / Time / Timestamp
    Case("debezium", "date in year 0", dbz(50, d=-719163), f"column d: cannot read [\"-719163\"] as date (epoch_day): {DBZ_OUT_OF_RANGE}"),
    Case("debezium", "date in year 275760", dbz(51, d=99999999), f"column d: cannot read [\"99999999\"] as date (epoch_day): {DBZ_OUT_OF_RANGE}"),
    Case("debezium", "date beyond int", dbz(52, d=99999999999999999999), DBZ_OUT_OF_RANGE),
    Case("debezium", "date with a fraction", dbz(53, d=1.5), 'column d: cannot read ["1.5"] as date (epoch_day)'),
    Case("debezium", "timestamp beyond bigint millis", dbz(54, ts=9223372036854775807), f"column ts: cannot read [\"9223372036854775807\"] as timestamp_ntz (epoch_millis): {DBZ_OUT_OF_RANGE}"),
    Case("debezium", "micro timestamp in year 10000", dbz(55, mts=253402300800000000), f"column mts: cannot read [\"253402300800000000\"] as timestamp_ntz (epoch_micros): {DBZ_OUT_OF_RANGE}"),
    Case("debezium", "nano timestamp far negative", dbz(56, nts=-99999999999999999999), f"column nts: cannot read [\"-99999999999999999999\"] as timestamp_ntz (epoch_nanos): {DBZ_OUT_OF_RANGE}"),
    Case("debezium", "time of 24:00:00", dbz(57, t=86400000), "column t: cannot read [\"86400000\"] as string (millis_of_day): outside one day"),
    Case("debezium", "time negative", dbz(58, t=-1), "column t: cannot read [\"-1\"] as string (millis_of_day): outside one day"),
    Case("debezium", "zoned timestamp in year 10000", dbz(59, zts="10000-01-01T00:00:00Z"), f"column zts: cannot read [\"10000-01-01T00:00:00Z\"] as timestamp (text): {DBZ_OUT_OF_RANGE}"),
    Case("debezium", "zoned timestamp a year alone", dbz(91, zts="2019"),
         'column zts: cannot read ["2019"] as timestamp (text): not a date and time'),
    # fuzzing found it: a date alone was read as midnight in the session's time zone, and 0001-01-01
    # then (a Python datetime of year 0 in local time) stopped every Python reader of silver
    Case("debezium", "zoned timestamp a date alone", dbz(190, zts="0001-01-01"),
         'column zts: cannot read ["0001-01-01"] as timestamp (text): not a date and time with its UTC offset'),
    Case("debezium", "zoned timestamp without its offset", dbz(191, zts="2019-06-05T10:11:08.47"),
         'column zts: cannot read ["2019-06-05T10:11:08.47"] as timestamp (text): not a date and time with its UTC '
         'offset, yyyy-mm-dd hh:mm:ss[.fffffff] +hh:mm (without the offset the instant is not known'),
    Case("debezium", "zoned timestamp 15 hours east of UTC", dbz(193, zts="2019-06-05T12:11:08.47+15:00"),
         'column zts: cannot read ["2019-06-05T12:11:08.47+15:00"] as timestamp (text): not a date and time with '
         'its UTC offset, yyyy-mm-dd hh:mm:ss[.fffffff] +hh:mm (without the offset the instant is not known; a '
         'partial date would become January 1; offsets run -14:00..+14:00)'),
    Case("debezium", "good zoned timestamp 14 hours west of UTC", dbz(194, zts="2019-06-05T12:11:08.47-14:00"),
         after=dbz_typed(194, zts=dt.datetime(2019, 6, 6, 2, 11, 8, 470000))),
    Case("debezium", "zoned timestamp with a space before Z", dbz(192, zts="2019-06-05 12:11:08.47 Z"),
         after=dbz_typed(192, zts=dt.datetime(2019, 6, 5, 12, 11, 8, 470000))),
    Case("debezium", "int beyond int32", dbz(60, qty=3000000000), 'column qty: cannot read ["3000000000"] as int (text)'),
    # floats and text
    Case("debezium", "float NaN as a string", dbz(70, f="NaN"), 'column f: cannot read ["NaN"] as double (text): NaN is not a SQL Server float value'),
    Case("debezium", "float Infinity as a string", dbz(71, f="-Infinity"), "column f: cannot read [\"-Infinity\"] as double (text): ±Infinity"),
    Case("debezium", "float 1e400 overflows", with_raw(dbz_doc(72, f="@F@"), "@F@", "1e400"), "column f: cannot read"),  # Spark's JSON reader renders 1e400 as "Infinity"
    Case("debezium", "text with U+FFFD (escaped)", dbz(73, name="caf\ufffd"), after=dbz_typed(73, name="caf\ufffd")),
    Case("debezium", "text with U+FFFD (as UTF-8)", dbz(195, name="caf\ufffd").replace("\\ufffd", "\ufffd"),
         after=dbz_typed(195, name="caf\ufffd")),
    # not JSON
    Case("debezium", "NaN literal", with_raw(dbz_doc(80, f="@F@"), "@F@", "NaN"), "not JSON: NaN is not a JSON value"),
    Case("debezium", "duplicate key", dbz(81).replace('{"before": null,', '{"op": "u", "before": null,', 1),
         "not JSON: duplicate key 'op' in one object"),
    Case("debezium", "JSON nested 5000 levels", '{"op": "c", "payload": ' + DEEP + "}", "not JSON: JSON nested too deeply (5001 levels"),
    Case("debezium", "raw tab inside a string", dbz(96, name="ANNE").replace("ANNE", "An\tne"),
         "not JSON: Invalid control character at: line 1 column"),
    Case("debezium", "deep JSON in after", with_raw(dbz_doc(83, name="@N@"), "@N@", DEEP), "not JSON: JSON nested too deeply (5002 levels"),
    # one line, one event: Spark's readers take the first of two documents and drop the second
    Case("debezium", "two events on one line", dbz(84) + dbz(184), "more than one JSON document on one line"),
    Case("debezium", "two events on one line, comma-separated", dbz(86) + "," + dbz(186), "more than one JSON document on one line"),
    Case("debezium", "trailing text after the event", dbz(87) + " x", "more than one JSON document on one line"),
    # a tombstone is {"payload": null} (with a schema at most), not any text that mentions "payload"
    Case("debezium", "no op, 'payload' in a value", json.dumps(_without(dbz_doc(88, name="payload"), "op")),
         "missing `payload` (and no payload-only fields"),
    # envelopes that do not route
    Case("debezium", "op in upper case", dbz(89, op="C"), "unknown op 'C' (expected one of c, u, d, r, t)"),
    Case("debezium", "source without table", json.dumps(_dbz_source_without(91, "table")), "missing `payload.source.table`"),
    Case("debezium", "a table not onboarded (other schema)", dbz(93, source={"schema": "sales"}),
         "no onboarded table for sales.items in source"),
    Case("debezium", "null payload beside another field", '{"schema": null, "payload": null, "op": "d"}', "missing `payload.source`"),
    # transaction-topic BEGIN/END records are skipped; only those (status BEGIN/END, an id, no op)
    Case("debezium", "an event with status END and an id beside op", json.dumps({**dbz_doc(94), "status": "END", "id": "x"}),
         after=dbz_typed(94)),
    Case("debezium", "END without an id", '{"status": "END", "event_count": 2}', "missing `payload` (and no payload-only fields"),
    Case("debezium", "status COMMIT", '{"status": "COMMIT", "id": "00000025:00000d08:0025"}', "missing `payload` (and no payload"),
    Case("debezium", "END nested 5000 levels", '{"status": "END", "id": "x", "data_collections": ' + DEEP + "}",
         "not JSON: JSON nested too deeply"),
    Case("debezium", "END and a second document", '{"status": "END", "id": "x"}{"status": "END", "id": "y"}',
         "more than one JSON document on one line"),
    # JSON escapes of half a surrogate pair: JSON's grammar takes them, but they are no character
    Case("debezium", "lone high surrogate escape", dbz(70, name="a\ud800b"), "escapes \\ud800, half of a UTF-16 surrogate pair without its other half"),
    Case("debezium", "lone low surrogate escape", dbz(71, name="\udc01"), "escapes \\udc01, half of a UTF-16 surrogate pair without its other half"),
    Case("debezium", "lone surrogate escape in a field name", dbz(72, **{"n\udbff": 1}), "escapes \\udbff, half of a UTF-16 surrogate pair without its other half"),
    Case("debezium", "lone surrogate escape in a field sqlcdc ignores", dbz(73, source={"version": "2.7\ud800"}), "half of a UTF-16 surrogate pair without its other half"),
    Case("debezium", "good surrogate pair escape", dbz(74, name="\ud83d\ude80 x"), after=dbz_typed(74, name="\U0001F680 x")),
    Case("debezium", "good escaped backslash before u-d800 text", dbz(75, name="a\\ud800"), after=dbz_typed(75, name="a\\ud800")),
    # Spark reads a JSON object or array into a string column as its JSON text: only a struct column takes one
    Case("debezium", "object in a string column", dbz(160, name={"a": 1}),
         'column name: cannot read ["{\\"a\\":1}"] as string (text): a JSON object or array, not a value of the column'),
    Case("debezium", "array in a string column", dbz(161, name=["ann"]), "column name: cannot read [\"[\\\"ann\\\"]\"] as string (text): a JSON object"),
    Case("debezium", "object in a string column of the before image", dbz(162, op="u").replace('"before": null', '"before": {"id": 162, "name": {"a": 1}}'),
         "column name: cannot read [\"{\\\"a\\\":1}\"] as string (text): a JSON object or array"),
    Case("debezium", "good JSON-looking text in a string column", dbz(163, name='{"a": 1}'), after=dbz_typed(163, name='{"a": 1}')),
    Case("debezium", "good text starting with [ beside an object in a struct column", dbz(164, name="[x]", shape=WKB),
         after=dbz_typed(164, name="[x]", shape=json.dumps(WKB, separators=(",", ":")))),
    Case("debezium", "object in an int column", dbz(165, qty={"a": 1}), 'column qty: cannot read ["{\\"a\\":1}"] as int'),
    # the event's own Connect schema: a value it writes otherwise than the table reads is not read wrong
    Case("debezium", "good with its Connect schema", dbz_with_schema(200), after=dbz_typed(200)),
    Case("debezium", "Connect schema: price at another scale", dbz_with_schema(
        201, price={"parameters": {"scale": "4", "connect.decimal.precision": "12"}}),
         "column price: the event's Connect schema gives it Decimal scale 4, and the table reads decimal(10,2) (scale 2)"),
    Case("debezium", "good Connect schema: price at a smaller scale, read at it", dbz_with_schema(
        209, price={"parameters": {"scale": "1", "connect.decimal.precision": "9"}}), after=dbz_typed(209, price=Decimal("199.90"))),
    Case("debezium", "Connect schema: a Decimal without its scale", dbz_with_schema(202, price={"parameters": {}}),
         "column price: the event's Connect schema gives it Decimal scale (none)"),
    Case("debezium", "Connect schema: ts in microseconds", dbz_with_schema(203, ts={"name": "io.debezium.time.MicroTimestamp"}),
         "column ts: the event's Connect schema types it io.debezium.time.MicroTimestamp (microseconds since 1970), "
         "and the table reads milliseconds since 1970"),
    Case("debezium", "Connect schema: t in nanoseconds", dbz_with_schema(204, t={"name": "io.debezium.time.NanoTime"}),
         "column t: the event's Connect schema types it io.debezium.time.NanoTime (nanoseconds of a day)"),
    Case("debezium", "good Connect schema giving the decimal as text", dbz_with_schema(
        205, price={"type": "string", "name": None, "parameters": None}), after=dbz_typed(205)),
    Case("debezium", "good Connect schema whose fields are not a list", dbz_with_schema(206, {"fields": 5}), after=dbz_typed(206)),
    Case("debezium", "good Connect schema naming price twice, first at its scale", dbz_with_schema(207, {"fields": [
        {"field": "after", "type": "struct", "fields": [DBZ_FIELDS[2], {**DBZ_FIELDS[2], "parameters": {"scale": "5"}}]}]}),
         after=dbz_typed(207)),
    Case("debezium", "good Connect schema nested deeply", dbz_with_schema(208, {"type": "struct", "x": json.loads("[" * 900 + "]" * 900)}),
         after=dbz_typed(208)),
]


def _dbz_outcomes(spark):
    bronze = bronze_of(spark, [c.record for c in DBZ_CASES], "file:/landing/items.json").cache()
    changes, quarantines = as_the_pipeline_decodes(bronze, debezium, DBZ_SOURCE, DBZ_TABLE, DBZ_COLUMNS)
    return _outcomes(bronze, changes, quarantines), changes


# =============================================================================== change tables

CT_SOURCE = SourceConfig(name="ct", format="cdc_ct", landing="/nowhere", options={}, file="pipeline.yml")
CT_COLUMNS_CONFIG = (
    {"name": "id", "type": "int"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "decimal(10,2)"},
    {"name": "created", "type": "date"},
    {"name": "updated", "type": "timestamp_ntz"},
    {"name": "ratio", "type": "double"},
    {"name": "notes", "type": "string", "lob": True},
)
CT_TABLE = TableConfig(name="orders", source=CT_SOURCE, schema="dbo", table="orders", keys=("id",),
                       columns=CT_COLUMNS_CONFIG, file="tables/orders.yml")
CT_FILE = "file:/landing/cdc.dbo_orders_CT.jsonl"


def ct_lsn(n: int, tail: str = "0010") -> str:
    return f"0x00000027{n:08X}{tail}"


def ct_row(n: int, **changes) -> dict:
    """An insert row of cdc.dbo_orders_CT (fn_cdc_get_all_changes + __$command_id), as exported."""
    row = {
        "__$start_lsn": ct_lsn(n), "__$end_lsn": None, "__$seqval": ct_lsn(n, "0002"), "__$operation": 2,
        "__$update_mask": "0x7F", "__$command_id": 1, "id": n, "customer": f"c{n}", "amount": "10.00",
        "created": "2024-02-29", "updated": "2024-02-29 13:14:15.123456", "ratio": 0.25, "notes": "n",
    }
    row.update(changes)
    return row


def ct(n: int, **changes) -> str:
    return json.dumps(ct_row(n, **changes))


CT_GOOD_TYPED = {"customer": None, "amount": Decimal("10.00"), "created": dt.date(2024, 2, 29),
                 "updated": dt.datetime(2024, 2, 29, 13, 14, 15, 123456), "ratio": 0.25, "notes": "n"}


def ct_typed(n: int, **changes) -> dict:
    return {**CT_GOOD_TYPED, "id": n, "customer": f"c{n}", **changes}


def ct_seq(n: int) -> dict:
    return {"commit_lsn": f"00000027{n:08X}0010", "change_lsn": f"00000027{n:08X}0002", "serial": 1}


def b64_lsn(hex20: str) -> str:
    return base64.b64encode(bytes.fromhex(hex20)).decode()


CT_CASES = [
    Case("cdc_ct", "good", ct(1), after=ct_typed(1), sequence=ct_seq(1)),
    Case("cdc_ct", "good LSNs in base64 (FOR JSON)", ct(2, **{"__$start_lsn": b64_lsn(ct_lsn(2)[2:]), "__$seqval": b64_lsn(ct_lsn(2, "0002")[2:])}),
         after=ct_typed(2), sequence=ct_seq(2)),
    Case("cdc_ct", "good LSNs in bare hex (bcp)", ct(3, **{"__$start_lsn": ct_lsn(3)[2:], "__$seqval": ct_lsn(3, "0002")[2:]}),
         after=ct_typed(3), sequence=ct_seq(3)),
    Case("cdc_ct", "good values at SQL Server's bounds",
         ct(4, amount="-99999999.99", created="0001-01-01", updated="9999-12-31 23:59:59.999999", ratio=-1.5e300),
         after=ct_typed(4, amount=Decimal("-99999999.99"), created=dt.date(1, 1, 1),
                        updated=dt.datetime(9999, 12, 31, 23, 59, 59, 999999), ratio=-1.5e300)),
    Case("cdc_ct", "good decimal with trailing zeros", ct(5, amount="10.500"), after=ct_typed(5, amount=Decimal("10.50"))),
    Case("cdc_ct", "good decimal as a JSON number", ct(6, amount=10.5), after=ct_typed(6, amount=Decimal("10.50"))),
    Case("cdc_ct", "good decimal in exponent form", ct(7, amount="1.05E1"), after=ct_typed(7, amount=Decimal("10.50"))),
    Case("cdc_ct", "good with tran_end_time", ct(8, tran_end_time="2024-02-29 13:14:16.123"), after=ct_typed(8)),
    # ordering keys
    Case("cdc_ct", "start_lsn 0x01", ct(20, **{"__$start_lsn": "0x01"}), "__$start_lsn 0x01 is not an LSN (binary(10), 0x hex or base64)"),
    Case("cdc_ct", "start_lsn 24 hex digits", ct(21, **{"__$start_lsn": "0x000000270000001500100000"}),
         "__$start_lsn 0x000000270000001500100000 is not an LSN"),
    Case("cdc_ct", "start_lsn not hex", ct(22, **{"__$start_lsn": "0x0000002700000016001G"}), "__$start_lsn 0x0000002700000016001G is not an LSN"),
    Case("cdc_ct", "start_lsn in Debezium's spelling", ct(23, **{"__$start_lsn": "27:758:5"}), "__$start_lsn 27:758:5 is not an LSN"),
    Case("cdc_ct", "start_lsn a JSON number", ct(24, **{"__$start_lsn": 27000000180010}), "__$start_lsn 27000000180010 is not an LSN"),
    Case("cdc_ct", "start_lsn a 20-digit JSON number", ct(25, **{"__$start_lsn": 10000000270000001900}),
         "__$start_lsn 10000000270000001900 is not an LSN"),
    Case("cdc_ct", "start_lsn zero", ct(26, **{"__$start_lsn": "0x00000000000000000000"}), "__$start_lsn 0x00000000000000000000 is not an LSN"),
    Case("cdc_ct", "start_lsn base64 of 8 bytes", ct(27, **{"__$start_lsn": "AAAAJwAAABs="}), "__$start_lsn AAAAJwAAABs= is not an LSN"),
    Case("cdc_ct", "seqval 0x02", ct(28, **{"__$seqval": "0x02"}), "__$seqval 0x02 is not an LSN"),
    Case("cdc_ct", "seqval missing", ct(29, **{"__$seqval": None}), "missing __$seqval"),
    Case("cdc_ct", "operation 9", ct(30, **{"__$operation": 9}), "__$operation 9 is not 1, 2, 3 or 4"),
    Case("cdc_ct", "command_id not an integer", ct(31, **{"__$command_id": "x"}), "__$command_id x is not an integer"),
    Case("cdc_ct", "update_mask not binary", ct(32, **{"__$update_mask": "0xZZ"}), "__$update_mask 0xZZ is not binary"),
    Case("cdc_ct", "tran_end_time in year 0", ct(33, tran_end_time="0000-01-01 00:00:00"),
         "tran_end_time 0000-01-01 00:00:00 is not a time within 0001-01-02..9999-12-30"),
    Case("cdc_ct", "tran_end_time not a time", ct(34, tran_end_time="yesterday"), "tran_end_time yesterday is not a time"),
    # values
    Case("cdc_ct", "decimal with excess scale", ct(40, amount="10.005"),
         'column amount: cannot read ["10.005"] as decimal(10,2) (text): more than 2 digits after the decimal point (would be rounded)'),
    Case("cdc_ct", "decimal excess scale in exponent form", ct(41, amount="1.0005E1"),
         "column amount: cannot read [\"1.0005E1\"] as decimal(10,2) (text): more than 2 digits after the decimal point"),
    Case("cdc_ct", "decimal beyond precision", ct(42, amount="123456789012.00"),
         "column amount: cannot read [\"123456789012.00\"] as decimal(10,2) (text): out of range for decimal(10,2)"),
    Case("cdc_ct", "decimal 1e400", with_raw(ct_row(43, amount="@A@"), "@A@", "1e400"), "column amount: cannot read"),
    Case("cdc_ct", "decimal number 1e-400 (0.0 as a double)", with_raw(ct_row(164, amount="@A@"), "@A@", "1e-400"),
         "column amount: cannot read [\"1e-400\"] as decimal(10,2) (text): more than 2 digits after the decimal point"),
    Case("cdc_ct", "decimal number of 41 digits (1.0 as a double)",
         with_raw(ct_row(165, amount="@A@"), "@A@", "1." + "0" * 39 + "1"), "digits after the decimal point (would be rounded)"),
    Case("cdc_ct", "good decimal number with an exponent", with_raw(ct_row(166, amount="@A@"), "@A@", "1.25E1"),
         after=ct_typed(166, amount=Decimal("12.50"))),
    # FOR JSON writes decimals as JSON numbers; Spark's from_json reads one into text through a double
    Case("cdc_ct", "decimal JSON number whose excess digits a double drops",
         with_raw(ct_row(96, amount="@A@"), "@A@", "10.0000000000000001"),
         'column amount: cannot read ["10.0000000000000001"] as decimal(10,2) (text): more than 2 digits after the decimal point'),
    Case("cdc_ct", "decimal JSON number of 19 digits beyond precision", with_raw(ct_row(97, amount="@A@"), "@A@", "12345678901234567.25"),
         'column amount: cannot read ["12345678901234567.25"] as decimal(10,2) (text): out of range for decimal(10,2)'),
    Case("cdc_ct", "good decimal JSON number at its precision", with_raw(ct_row(98, amount="@A@"), "@A@", "-99999999.99"),
         after=ct_typed(98, amount=Decimal("-99999999.99"))),
    Case("cdc_ct", "date in year 0", ct(44, created="0000-01-01"), "column created: cannot read [\"0000-01-01\"] as date (text): outside SQL Server's range"),
    Case("cdc_ct", "date in year 99999", ct(45, created="99999-01-01"), "column created: cannot read [\"99999-01-01\"] as date (text): outside SQL Server's range"),
    Case("cdc_ct", "datetime2 in year 10000", ct(46, updated="10000-01-01 00:00:00"), "column updated: cannot read [\"10000-01-01 00:00:00\"] as timestamp_ntz (text): outside SQL Server's range"),
    Case("cdc_ct", "datetime2 not a time", ct(47, updated="2024-02-30 25:00:00"), 'column updated: cannot read ["2024-02-30 25:00:00"] as timestamp_ntz (text)'),
    Case("cdc_ct", "good date with a midnight time", ct(90, created="2024-02-29 00:00:00.000"), after=ct_typed(90)),
    Case("cdc_ct", "date a year alone", ct(91, created="2024"),
         'column created: cannot read ["2024"] as date (text): not a whole date yyyy-mm-dd'),
    Case("cdc_ct", "date with a time of day", ct(92, created="2024-02-29 13:14:15"),
         'column created: cannot read ["2024-02-29 13:14:15"] as date (text): not a whole date'),
    Case("cdc_ct", "datetime2 with a UTC offset", ct(93, updated="2024-02-29T13:14:15+05:00"),
         'column updated: cannot read ["2024-02-29T13:14:15+05:00"] as timestamp_ntz (text): not a date and time '
         "without offset"),
    Case("cdc_ct", "datetime2 a year and month", ct(94, updated="2024-02"),
         'column updated: cannot read ["2024-02"] as timestamp_ntz (text): not a date and time'),
    Case("cdc_ct", "tran_end_time a year alone", ct(95, tran_end_time="2024"), "tran_end_time 2024 is not a time"),
    Case("cdc_ct", "float NaN", ct(48, ratio="NaN"), "column ratio: cannot read [\"NaN\"] as double (text): NaN is not a SQL Server float value"),
    Case("cdc_ct", "float -Infinity", ct(49, ratio="-Infinity"), "column ratio: cannot read [\"-Infinity\"] as double (text): ±Infinity"),
    Case("cdc_ct", "float 1e400 overflows", ct(50, ratio="1e400"), "column ratio: cannot read [\"1e400\"] as double (text): ±Infinity"),
    Case("cdc_ct", "text with U+FFFD (escaped)", ct(51, notes="a \ufffd char"), after=ct_typed(51, notes="a \ufffd char")),
    Case("cdc_ct", "text with U+FFFD (as UTF-8)", ct(180, notes="a \ufffd char").replace("\\ufffd", "\ufffd"),
         after=ct_typed(180, notes="a \ufffd char")),
    Case("cdc_ct", "key not an int", ct(52, id="x52"), 'column id: cannot read ["x52"] as int (text)'),
    # not JSON
    Case("cdc_ct", "not JSON", "garbage row 53", "not a JSON object"),
    Case("cdc_ct", "JSON nested 5000 levels", '{"__$start_lsn": ' + DEEP + "}", "not a JSON object"),
    Case("cdc_ct", "two rows on one line", ct(54) + ct(154), "more than one JSON document on one line"),
    Case("cdc_ct", "two rows on one line, comma-separated", ct(55) + "," + ct(155), "more than one JSON document on one line"),
    # a lone surrogate escape: Spark's from_json read it as '?' and the row reached silver changed
    Case("cdc_ct", "lone surrogate escape in a value", ct(56, notes="a\ud800"), "escapes \\ud800, half of a UTF-16 surrogate pair without its other half"),
    Case("cdc_ct", "lone surrogate escape in a column not configured", ct(57, extra="\udfff"), "escapes \\udfff, half of a UTF-16 surrogate pair without its other half"),
    Case("cdc_ct", "good surrogate pair escape", ct(58, notes="\ud83d\ude80"), after=ct_typed(58, notes="\U0001F680")),
    Case("cdc_ct", "good escaped backslash before u-d800 text", ct(59, notes="\\ud800"), after=ct_typed(59, notes="\\ud800")),
    # JSON that Spark's from_json took by default: a key twice (the first value won), 'single quotes', NaN
    Case("cdc_ct", "duplicate key", ct(60).replace('"customer": "c60"', '"customer": "c60", "customer": "c600"', 1),
         "duplicate key customer in one row"),
    Case("cdc_ct", "duplicate key column", ct(61).replace('"id": 61', '"id": 61, "id": 610', 1), "duplicate key id in one row"),
    Case("cdc_ct", "single-quoted JSON", ct(62).replace('"', "'"), "not a JSON object"),
    Case("cdc_ct", "NaN literal in a column not configured", with_raw(ct_row(63, extra="@X@"), "@X@", "NaN"), "not a JSON object"),
    Case("cdc_ct", "object in a string column", ct(160, notes={"a": [1]}),
         'column notes: cannot read ["{\\"a\\":[1]}"] as string (text): a JSON object or array, not a value of the column'),
    Case("cdc_ct", "array in a string key-adjacent column", ct(161, customer=[]), 'column customer: cannot read ["[]"] as string (text): a JSON object or array'),
    Case("cdc_ct", "good JSON-looking text in a string column", ct(162, notes="[1, 2]"), after=ct_typed(162, notes="[1, 2]")),
    Case("cdc_ct", "good object in a column not configured", ct(163, extra={"a": 1}), after=ct_typed(163)),
]


def _ct_outcomes(spark):
    bronze = bronze_of(spark, [c.record for c in CT_CASES], CT_FILE).cache()
    cols = cdc_ct.columns_for(CT_TABLE, CT_SOURCE)
    changes, quarantines = as_the_pipeline_decodes(bronze, cdc_ct, CT_SOURCE, CT_TABLE, cols)
    return _outcomes(bronze, changes, quarantines), changes


# =============================================================================== CES

CES_SOURCE = SourceConfig(name="ces_src", format="ces", landing="/nowhere", options={"serialization": "json"},
                          file="config/pipeline.yml")
CES_TABLE = TableConfig(name="purchases", source=CES_SOURCE, schema="dbo", table="Purchases", keys=("purchase_id",),
                        file="config/tables/purchases.yml")
CES_COLS = [("purchase_id", "int"), ("price", "decimal(10,2)"), ("qty", "tinyint"), ("d", "date"),
            ("ts", "datetime2"), ("f", "float"), ("name", "nvarchar(100)"), ("tm", "time(7)"),
            ("g", "uniqueidentifier")]
CES_COLUMNS = [ces.spec_for_sql_type(n, t, ordinal=i + 1) for i, (n, t) in enumerate(CES_COLS)]
_ROW_GUID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
CES_GOOD_CURRENT = {"price": "19.99", "qty": "3", "d": "2025-03-14", "ts": "2025-03-14 16:45:01.1234567",
                    "f": "1.5", "name": "Anna Doe", "tm": "16:45:01.1234567", "g": _ROW_GUID}
CES_GOOD_TYPED = {"price": Decimal("19.99"), "qty": 3, "d": dt.date(2025, 3, 14),
                  "ts": dt.datetime(2025, 3, 14, 16, 45, 1, 123456), "f": 1.5, "name": "Anna Doe",
                  "tm": "16:45:01.123456", "g": _ROW_GUID}


def ces_doc(n: int, transaction: dict | None = None, **current_changes) -> dict:
    current = {"purchase_id": str(n), **CES_GOOD_CURRENT, **current_changes}
    return ces_event("INS", cols=CES_COLS, current=current, pk={"purchase_id": str(n)},
                     lsn=f"0000002C{n:08X}0001", seq=n, transaction=transaction)


def ces_line(n: int, transaction: dict | None = None, **current_changes) -> str:
    return json.dumps(ces_doc(n, transaction, **current_changes))


def ces_number(n: int, raw: str) -> str:
    """An event whose ``current`` holds ``price`` as the JSON number ``raw`` (not text, as CES writes it)."""
    placeholder = '\\\\\\"@P@\\\\\\"'  # the string "@P@" inside current, inside data: escaped twice
    line = ces_line(n, price="@P@")
    assert placeholder in line
    return line.replace(placeholder, raw)


def ces_typed(n: int, **changes) -> dict:
    return {"purchase_id": n, **CES_GOOD_TYPED, **changes}


def ces_with_logicalid(n: int, logicalid: str) -> str:
    doc = ces_doc(n)
    doc["logicalid"] = logicalid
    return json.dumps(doc)


def ces_tx(lsn_text: str, seq: int = 1) -> dict:
    return {"commitlsn": lsn_text, "beginlsn": "0x0000002D000000080001", "sequencenumber": seq,
            "committime": "2025-03-14T18:00:00Z"}


_GUID = "9c8d4ad2-bf54-4f10-a96f-038af496997f"
CES_CASES = [
    Case("ces", "good", ces_line(1), after=ces_typed(1),
         sequence={"commit_lsn": "0000002C000000010001", "change_lsn": "0" * 20, "serial": 1}),
    Case("ces", "good values at SQL Server's bounds",
         ces_line(2, price="-99999999.99", qty="255", d="0001-01-01", ts="9999-12-31 23:59:59.999999", f="-1.5E300"),
         after=ces_typed(2, price=Decimal("-99999999.99"), qty=255, d=dt.date(1, 1, 1),
                         ts=dt.datetime(9999, 12, 31, 23, 59, 59, 999999), f=-1.5e300)),
    Case("ces", "good transaction commitlsn 0x + 20 hex", ces_line(3, transaction=ces_tx("0x0000002D000000100003", 7)),
         after=ces_typed(3), sequence={"commit_lsn": "0000002D000000100003", "change_lsn": "0" * 20, "serial": 7}),
    Case("ces", "good transaction commitlsn xxxxxxxx:xxxxxxxx:xxxx", ces_line(4, transaction=ces_tx("0000002D:00000010:0004", 2)),
         after=ces_typed(4), sequence={"commit_lsn": "0000002D000000100004", "change_lsn": "0" * 20, "serial": 2}),
    # ordering keys
    Case("ces", "transaction commitlsn 0x1A", ces_line(20, transaction=ces_tx("0x1A")),
         "data.eventsource.transaction.commitlsn '0x1A' is not an LSN"),
    Case("ces", "transaction commitlsn 21 hex digits", ces_line(21, transaction=ces_tx("0000002D0000001000010")),
         "data.eventsource.transaction.commitlsn '0000002D0000001000010' is not an LSN"),
    Case("ces", "transaction commitlsn 27:758:5", ces_line(22, transaction=ces_tx("27:758:5")),
         "data.eventsource.transaction.commitlsn '27:758:5' is not an LSN"),
    Case("ces", "transaction commitlsn zero", ces_line(23, transaction=ces_tx("0x00000000000000000000")),
         "data.eventsource.transaction.commitlsn '0x00000000000000000000' is the zero LSN"),
    Case("ces", "transaction commitlsn not hex", ces_line(24, transaction=ces_tx("nothex!")),
         "data: $.eventsource.transaction.commitlsn: 'nothex!' does not match"),
    Case("ces", "logicalid without an LSN", ces_with_logicalid(25, f"{_GUID}:1A:1"), "no commit LSN"),
    Case("ces", "logicalid with the zero LSN", ces_with_logicalid(26, f"{_GUID}:00000000000000000000:00000000000000000026"),
         "the commit LSN in logicalid '00000000000000000000' is the zero LSN"),
    Case("ces", "time in year 0", json.dumps(dict(ces_doc(27), time="0000-03-14T17:00:00.000Z")),
         "time '0000-03-14T17:00:00.000Z' is not a commit time within 0001-01-02..9999-12-30"),
    Case("ces", "time not a date", json.dumps(dict(ces_doc(28), time="2025-13-45T10:00:00Z")),
         "time '2025-13-45T10:00:00Z' is not a commit time"),
    # fuzzing found it: passed the envelope check, read as no segment position, and was in no place
    Case("ces", "segmentindex beyond an Avro int", json.dumps(dict(ces_doc(29), segmentindex=2147483648)),
         "2147483648 is greater than the maximum of 2147483647"),
    # values
    Case("ces", "decimal number of 17 digits past the scale", ces_number(169, "12345678.123456789"),
         'column price: cannot read ["12345678.123456789"] as decimal(10,2) (text): more than 2 digits after the decimal point'),
    Case("ces", "decimal number 1e-400 (0.0 as a double)", ces_number(166, "1e-400"),
         'column price: cannot read ["1e-400"] as decimal(10,2) (text): more than 2 digits after the decimal point'),
    Case("ces", "decimal number of 41 digits (1.0 as a double)", ces_number(167, "1." + "0" * 39 + "1"),
         "more than 2 digits after the decimal point (would be rounded)"),
    Case("ces", "good decimal number with an exponent", ces_number(168, "1.25e1"), after=ces_typed(168, price=Decimal("12.50"))),
    Case("ces", "decimal with excess scale", ces_line(40, price="10.005"),
         'column price: cannot read ["10.005"] as decimal(10,2) (text): more than 2 digits after the decimal point'),
    Case("ces", "decimal 1e40", ces_line(41, price="1e40"), 'column price: cannot read ["1e40"] as decimal(10,2) (text): out of range'),
    Case("ces", "tinyint 256", ces_line(42, qty="256"), 'column qty: cannot read ["256"] as smallint (text): outside 0..255 for tinyint'),
    Case("ces", "tinyint -1", ces_line(43, qty="-1"), 'column qty: cannot read ["-1"] as smallint (text): outside 0..255 for tinyint'),
    Case("ces", "date in year 0", ces_line(44, d="0000-01-01"), 'column d: cannot read ["0000-01-01"] as date (text): outside SQL Server'),
    Case("ces", "datetime2 in year 10000", ces_line(45, ts="10000-01-01 00:00:00"), "column ts: cannot read [\"10000-01-01 00:00:00\"] as timestamp_ntz (text): outside SQL Server"),
    Case("ces", "good time and uniqueidentifier at their bounds", ces_line(94, tm="23:59:59.9999999", g="{" + _GUID + "}"),
         after=ces_typed(94, tm="23:59:59.999999", g="{" + _GUID + "}")),
    Case("ces", "time of 24:00:00", ces_line(95, tm="24:00:00"), 'column tm: cannot read ["24:00:00"] as string (text): not a time of day'),
    Case("ces", "time not a time", ces_line(96, tm="noon"), 'column tm: cannot read ["noon"] as string (text): not a time of day'),
    Case("ces", "uniqueidentifier not a GUID", ces_line(97, g="6F9619FF-8B86-D011-B42D"),
         'column g: cannot read ["6F9619FF-8B86-D011-B42D"] as string (text): not a uniqueidentifier'),
    Case("ces", "date a year alone", ces_line(90, d="2025"), 'column d: cannot read ["2025"] as date (text): not a whole date'),
    Case("ces", "datetime2 with a UTC offset", ces_line(91, ts="2025-03-14T16:45:01+05:00"),
         'column ts: cannot read ["2025-03-14T16:45:01+05:00"] as timestamp_ntz (text): not a date and time without offset'),
    Case("ces", "key column NULL in current", ces_line(92, purchase_id=None),
         'key column purchase_id: pkkey gives ["92"], eventrow.current [null]'),
    Case("ces", "current's key is not pkkey's", ces_line(93, purchase_id="930"),
         'key column purchase_id: pkkey gives ["93"], eventrow.current ["930"]'),
    Case("ces", "float NaN", ces_line(46, f="NaN"), 'column f: cannot read ["NaN"] as double (text): NaN is not'),
    Case("ces", "float Infinity", ces_line(47, f="Infinity"), 'column f: cannot read ["Infinity"] as double (text): ±Infinity'),
    Case("ces", "text with U+FFFD (escaped)", ces_line(48, name="Anna \ufffd"), after=ces_typed(48, name="Anna \ufffd")),
    Case("ces", "text with U+FFFD (as UTF-8)", ces_line(181, name="Anna \ufffd").replace("\\\\\\\\ufffd", "\ufffd"),
         after=ces_typed(181, name="Anna \ufffd")),
    Case("ces", "pkkey value not an int", ces_line(49).replace('"value\\": \\"49\\"', '"value\\": \\"x49\\"'),
         'column purchase_id: cannot read ["x49"] as int (text)'),
    # not JSON
    Case("ces", "envelope nested 5000 levels", '{"specversion": "1.0", "data": ' + DEEP + "}", "envelope: not JSON: JSON nested too deeply"),
    Case("ces", "data nested 5000 levels", json.dumps(dict(ces_doc(61), data=DEEP)), "JSON nested too deeply"),
    Case("ces", "NaN literal in the envelope", with_raw(dict(ces_doc(62), segmentindex="@S@"), "@S@", "NaN"),
         "envelope: not JSON: NaN is not a JSON value"),
    Case("ces", "duplicate key in the envelope", ces_line(63).replace('"operation": "INS"', '"operation": "INS", "operation": "DEL"', 1),
         "envelope: not JSON: duplicate key 'operation'"),
    Case("ces", "two events on one line", ces_line(64) + ces_line(164), "envelope: not JSON: more than one JSON document on one line"),
    Case("ces", "two events on one line, comma-separated", ces_line(65) + ", " + ces_line(165),
         "envelope: not JSON: more than one JSON document on one line"),
    # a lone surrogate escape in the envelope, and one in data's text (an escape one level down)
    Case("ces", "lone surrogate escape in the envelope", json.dumps(dict(ces_doc(66), subject="s\ud800")), "escapes \\ud800, half of a UTF-16 surrogate pair without its other half"),
    Case("ces", "lone surrogate escape in eventrow.current", ces_line(67, name="a\ud800"),
         "data.eventrow.current: not Unicode text: a JSON string escapes \\ud800, half of a UTF-16 surrogate pair"),
    Case("ces", "good surrogate pair escape in eventrow.current", ces_line(68, name="\ud83d\ude80"), after=ces_typed(68, name="\U0001F680")),
    Case("ces", "good escaped backslash before u-d800 text", ces_line(69, name="\\ud800"), after=ces_typed(69, name="\\ud800")),
    Case("ces", "object in a string column of eventrow.current", ces_line(160, name={"a": 1}),
         'column name: cannot read ["{\\"a\\":1}"] as string (text): a JSON object or array, not a value of the column'),
    Case("ces", "array in a string column of eventrow.current", ces_line(161, name=[]), 'column name: cannot read ["[]"]'),
    Case("ces", "good JSON-looking text in a string column", ces_line(162, name="[1]"), after=ces_typed(162, name="[1]")),
]


def _ces_outcomes(spark):
    bronze = bronze_of(spark, [c.record for c in CES_CASES], "file:/landing/ces/part-0.json").cache()
    changes, quarantines = as_the_pipeline_decodes(bronze, ces, CES_SOURCE, CES_TABLE, CES_COLUMNS)
    return _outcomes(bronze, changes, quarantines), changes


# =============================================================================== Qlik

QLIK_SOURCE = SourceConfig(name="crm", format="qlik", landing="/nowhere")
QLIK_TABLE = TableConfig(name="t", source=QLIK_SOURCE, schema="dbo", table="t", keys=("ID",))
QLIK_METADATA = {
    "magic": "atMSG", "type": "MD", "headers": None, "messageSchemaId": None, "messageSchema": None,
    "message": {
        "schemaId": "s-t-1",
        "lineage": {"server": "qlik-srv", "task": "task", "schema": "dbo", "table": "t", "tableVersion": 1,
                    "timestamp": "2025-01-01T00:00:00.000"},
        "tableStructure": {"tableColumns": {
            "ID": {"ordinal": 1, "type": "INT4", "primaryKeyPosition": 1},
            "NAME": {"ordinal": 2, "type": "WSTRING", "length": 100},
            "BAL": {"ordinal": 3, "type": "NUMERIC", "precision": 10, "scale": 2},
            "D": {"ordinal": 4, "type": "DATE"},
            "TS": {"ordinal": 5, "type": "DATETIME"},
            "R": {"ordinal": 6, "type": "REAL8"},
            "U": {"ordinal": 7, "type": "UINT1"},
        }},
    },
}
QLIK_COLUMNS = [qlik.spec_for(n, q, precision=p, scale=s, ordinal=i) for i, (n, q, p, s) in enumerate([
    ("ID", "INT4", None, None), ("NAME", "WSTRING", None, None), ("BAL", "NUMERIC", 10, 2), ("D", "DATE", None, None),
    ("TS", "DATETIME", None, None), ("R", "REAL8", None, None), ("U", "UINT1", None, None)], start=1)]
QLIK_GOOD_DATA = {"NAME": "Alice", "BAL": "19.99", "D": "2025-01-01", "TS": "2025-01-01 10:00:01.123456", "R": 1.5, "U": 7}
QLIK_GOOD_TYPED = {"NAME": "Alice", "BAL": Decimal("19.99"), "D": dt.date(2025, 1, 1),
                   "TS": dt.datetime(2025, 1, 1, 10, 0, 1, 123456), "R": 1.5, "U": 7}


def qlik_seq(n: int) -> str:
    """A changeSequence as Replicate writes it (35 digits)."""
    return "20250101000000000000000000000%06d" % n


def qlik_doc(n: int, op: str = "INSERT", seq: Any = "default", headers: dict | None = None, **data_changes) -> dict:
    given = headers or {}
    headers = {"operation": op, "changeSequence": qlik_seq(n) if seq == "default" else seq,
               "timestamp": "2025-01-01T10:00:01.000", "transactionId": f"T{n}", "transactionEventCounter": 1,
               "transactionLastEvent": True, **given}
    if op == "REFRESH":
        headers = {"operation": op}
    return {"schema": "dbo", "table": "t", "data": {"ID": n, **QLIK_GOOD_DATA, **data_changes},
            "beforeData": None, "headers": headers}


def qk(n: int, op: str = "INSERT", seq: Any = "default", headers: dict | None = None, **data_changes) -> str:
    return json.dumps(qlik_doc(n, op, seq, headers, **data_changes))


def qlik_typed(n: int, **changes) -> dict:
    return {"ID": n, **QLIK_GOOD_TYPED, **changes}


QLIK_CASES = [
    Case("qlik", "good", qk(1), after=qlik_typed(1),
         sequence={"commit_lsn": "0" * 5 + qlik_seq(1), "change_lsn": "0" * 20, "serial": 1}),
    Case("qlik", "good full load without changeSequence", qk(2, op="REFRESH"), after=qlik_typed(2),
         sequence={"commit_lsn": "0" * 20, "change_lsn": "0" * 20, "serial": 0}),
    Case("qlik", "good changeSequence of 40 digits", qk(3, seq="1" * 40), after=qlik_typed(3),
         sequence={"commit_lsn": "1" * 40, "change_lsn": "0" * 20, "serial": 1}),
    Case("qlik", "good values at SQL Server's bounds",
         qk(4, BAL="-99999999.99", D="0001-01-01", TS="9999-12-31 23:59:59.999999", R=-1.5e300, U=255),
         after=qlik_typed(4, BAL=Decimal("-99999999.99"), D=dt.date(1, 1, 1),
                          TS=dt.datetime(9999, 12, 31, 23, 59, 59, 999999), R=-1.5e300, U=255)),
    # ordering keys
    Case("qlik", "changeSequence letters", qk(20, seq="abc"),
         "headers.changeSequence 'abc' is not a change sequence (1 to 40 digits): the change cannot be ordered"),
    Case("qlik", "changeSequence negative", qk(21, seq="-1"), "headers.changeSequence '-1' is not a change sequence"),
    Case("qlik", "changeSequence with a fraction", qk(22, seq="1.5"), "headers.changeSequence '1.5' is not a change sequence"),
    Case("qlik", "changeSequence of 41 digits", qk(23, seq="9" * 41), f"headers.changeSequence '{'9' * 41}' is not a change sequence"),
    Case("qlik", "changeSequence an LSN", qk(24, seq="0000002a:00000001:0001"),
         "headers.changeSequence '0000002a:00000001:0001' is not a change sequence"),
    Case("qlik", "changeSequence a JSON number", qk(25, seq=25), "changeSequence: 25 is not of type 'string'"),
    Case("qlik", "changeSequence empty", qk(26, seq=""), "$.headers: none of: '' should be non-empty"),
    Case("qlik", "transactionEventCounter beyond bigint", qk(27, headers={"transactionEventCounter": "99999999999999999999"}),
         "headers.transactionEventCounter '99999999999999999999' is not an integer"),
    Case("qlik", "timestamp in year 0", qk(28, headers={"timestamp": "0000-01-01T00:00:00.000"}),
         "headers.timestamp '0000-01-01T00:00:00.000' is not a UTC time within 0001-01-02..9999-12-30"),
    Case("qlik", "timestamp not a time", qk(29, headers={"timestamp": "yesterday"}), "headers.timestamp 'yesterday' is not a UTC time"),
    # fuzzing found it: in silver, it made collect()/toPandas() of the whole table raise "year 0 is out of range"
    Case("qlik", "timestamp on 0001-01-01", qk(30, headers={"timestamp": "0001-01-01T00:00:00.000"}),
         "headers.timestamp '0001-01-01T00:00:00.000' is not a UTC time within 0001-01-02..9999-12-30"),
    Case("qlik", "key NULL in an UPDATE", qk(70, op="UPDATE", ID=None), "key column ID is NULL in the UPDATE message"),
    # values
    Case("qlik", "numeric with excess scale", qk(40, BAL="10.005"),
         'column BAL: cannot read ["10.005"] as decimal(10,2) (text): more than 2 digits after the decimal point'),
    Case("qlik", "numeric beyond precision", qk(41, BAL="123456789012"), "out of range for decimal(10,2)"),
    Case("qlik", "numeric number of 17 digits past the scale", with_raw(qlik_doc(169, BAL="@B@"), "@B@", "12345678.123456789"),
         'column BAL: cannot read ["12345678.123456789"] as decimal(10,2) (text): more than 2 digits after the decimal point'),
    Case("qlik", "numeric number 1e-400 (0.0 as a double)", with_raw(qlik_doc(165, BAL="@B@"), "@B@", "1e-400"),
         'column BAL: cannot read ["1e-400"] as decimal(10,2) (text): more than 2 digits after the decimal point'),
    Case("qlik", "numeric number of 41 digits (1.0 as a double)", with_raw(qlik_doc(166, BAL="@B@"), "@B@", "1." + "0" * 39 + "1"),
         "more than 2 digits after the decimal point (would be rounded)"),
    Case("qlik", "good numeric numbers with exponents, beforeData written first",
         with_raw({"beforeData": {"ID": 168, **QLIK_GOOD_DATA, "BAL": "@A@"},
                   **{k: v for k, v in qlik_doc(168, op="UPDATE", BAL="@B@").items() if k != "beforeData"}},
                  "@A@", "2.5e1").replace('"@B@"', "1.25E1"), after=qlik_typed(168, BAL=Decimal("12.50"))),
    Case("qlik", "good numeric number with an exponent", with_raw(qlik_doc(167, BAL="@B@"), "@B@", "1.25E1"),
         after=qlik_typed(167, BAL=Decimal("12.50"))),
    Case("qlik", "date in year 0", qk(42, D="0000-01-01"), 'column D: cannot read ["0000-01-01"] as date (text): outside SQL Server'),
    Case("qlik", "datetime in year 10000", qk(43, TS="10000-01-01 00:00:00"), "column TS: cannot read [\"10000-01-01 00:00:00\"] as timestamp_ntz (text): outside SQL Server"),
    Case("qlik", "date a year alone", qk(90, D="2025"), 'column D: cannot read ["2025"] as date (text): not a whole date'),
    Case("qlik", "datetime with a UTC offset", qk(91, TS="2025-01-01T10:00:01+05:00"),
         'column TS: cannot read ["2025-01-01T10:00:01+05:00"] as timestamp_ntz (text): not a date and time without offset'),
    Case("qlik", "timestamp a year alone", qk(92, headers={"timestamp": "2025"}), "headers.timestamp '2025' is not a UTC time"),
    Case("qlik", "real NaN as a string", qk(44, R="NaN"), 'column R: cannot read ["NaN"] as double (text): NaN is not'),
    Case("qlik", "UINT1 256", qk(45, U=256), 'column U: cannot read ["256"] as smallint (text): outside 0..255 for UINT1'),
    Case("qlik", "UINT1 negative", qk(46, U=-1), 'column U: cannot read ["-1"] as smallint (text): outside 0..255 for UINT1'),
    Case("qlik", "text with U+FFFD (escaped)", qk(47, NAME="Al\ufffdce"), after=qlik_typed(47, NAME="Al\ufffdce")),
    Case("qlik", "text with U+FFFD (as UTF-8)", qk(182, NAME="Al\ufffdce").replace("\\ufffd", "\ufffd"),
         after=qlik_typed(182, NAME="Al\ufffdce")),
    # not JSON
    Case("qlik", "Infinity literal", with_raw(qlik_doc(60, R="@R@"), "@R@", "Infinity"), "not JSON: Infinity is not a JSON value"),
    Case("qlik", "NaN literal", with_raw(qlik_doc(61, R="@R@"), "@R@", "NaN"), "not JSON: NaN is not a JSON value"),
    Case("qlik", "duplicate key", qk(62).replace('{"schema": "dbo",', '{"schema": "dbo", "schema": "sales",', 1),
         "not JSON: duplicate key 'schema'"),
    Case("qlik", "JSON nested 5000 levels", '{"headers": {"operation": "INSERT"}, "data": ' + DEEP + "}",
         "not JSON: JSON nested too deeply"),
    Case("qlik", "two messages on one line", qk(64) + qk(164), "not JSON: more than one JSON document on one line"),
    Case("qlik", "a message and trailing text", qk(65) + " }", "not JSON: more than one JSON document on one line"),
    Case("qlik", "lone surrogate escape in data", qk(66, NAME="a\ud800"), "escapes \\ud800, half of a UTF-16 surrogate pair without its other half"),
    Case("qlik", "lone surrogate escape in a header", qk(67, headers={"transactionId": "T\udc00"}), "escapes \\udc00, half of a UTF-16 surrogate pair without its other half"),
    Case("qlik", "metadata message with a lone surrogate escape in a column name",
         json.dumps(QLIK_METADATA).replace('"table": "t"', '"table": "other"').replace('"NAME"', '"NAME\\ud800"'),
         "escapes \\ud800, half of a UTF-16 surrogate pair without its other half"),
    Case("qlik", "good surrogate pair escape", qk(68, NAME="\ud83d\ude80"), after=qlik_typed(68, NAME="\U0001F680")),
    Case("qlik", "good escaped backslash before u-d800 text", qk(69, NAME="\\ud800"), after=qlik_typed(69, NAME="\\ud800")),
    Case("qlik", "object in a string column", qk(160, NAME={"a": 1}),
         'column NAME: cannot read ["{\\"a\\":1}"] as string (text): a JSON object or array, not a value of the column'),
    Case("qlik", "array in a string column of beforeData", json.dumps(dict(qlik_doc(161, op="UPDATE"), beforeData={**qlik_doc(161)["data"], "NAME": [1]})),
         'column NAME: cannot read ["[1]"] as string (text): a JSON object or array'),
    Case("qlik", "object in a string column of a DELETE's data", qk(162, op="DELETE", NAME={}),
         'column NAME: cannot read ["{}"] as string (text): a JSON object or array'),
    Case("qlik", "good JSON-looking text in a string column", qk(163, NAME="{}"), after=qlik_typed(163, NAME="{}")),
]


def _qlik_outcomes(spark):
    lines = [json.dumps(QLIK_METADATA)] + [c.record for c in QLIK_CASES]
    bronze = bronze_of(spark, lines, "file:/landing/t/part-0.jsonl").cache()
    changes, quarantines = as_the_pipeline_decodes(bronze, qlik, QLIK_SOURCE, QLIK_TABLE, QLIK_COLUMNS)
    out = _outcomes(bronze, changes, quarantines)
    assert json.dumps(QLIK_METADATA) not in out  # metadata is skipped, not a change
    return out, changes


# =============================================================================== the table


def _outcomes(bronze, changes, quarantines) -> dict[str, list[tuple[str, Any]]]:
    """landed text -> [(place, silver row or quarantine reason)] over silver and quarantine (a
    change-table update's row names both halves: ``bronze_record_id``, the two record ids comma-separated)."""
    text = {r.record_id: r.value for r in bronze.select("record_id", "value").collect()}
    out: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for r in changes.collect():
        for rid in r.bronze_record_id.split(","):
            out[text[rid]].append(("silver", r))
    for q in quarantines:
        for r in q.select("bronze_record_id", "reason").collect():
            for rid in r.bronze_record_id.split(","):
                out[text[rid]].append(("quarantine", r.reason))
    return out


DECODERS = {"debezium": _dbz_outcomes, "cdc_ct": _ct_outcomes, "ces": _ces_outcomes, "qlik": _qlik_outcomes}
CASES = DBZ_CASES + CT_CASES + CES_CASES + QLIK_CASES


@pytest.fixture(scope="module")
def decoded(spark):
    cache: dict[str, dict] = {}

    def get(producer: str) -> dict:
        if producer not in cache:
            cache[producer] = DECODERS[producer](spark)
        return cache[producer]

    return get


def test_the_corpus_is_well_formed():
    """Every record is distinct (outcomes are looked up by text) and every kind named once."""
    assert len({c.record for c in CASES}) == len(CASES)
    assert len({(c.producer, c.kind) for c in CASES}) == len(CASES)
    assert len(CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=[f"{c.producer}: {c.kind}" for c in CASES])
def test_record_lands_in_the_expected_place(decoded, case):
    assert_in_place(decoded(case.producer)[0][case.record], case)


def assert_in_place(places: list[tuple[str, Any]], case: Case) -> None:
    """``places`` (of :func:`_outcomes`, for ``case.record``) is exactly the case's expected one."""
    assert len(places) == 1, f"{case.kind}: in {len(places)} places: {places}"
    place, what = places[0]
    if case.place == "quarantine":
        assert place == "quarantine", f"{case.kind}: reached silver: {what}"
        assert what is not None and case.reason in what, f"{case.kind}: reason {what!r}"
    else:
        assert place == "silver", f"{case.kind}: quarantined: {what}"
        after = what.after.asDict()
        assert after == case.after
        if case.sequence is not None:
            assert what.sequence.asDict() == case.sequence


@pytest.mark.parametrize("producer", sorted(DECODERS))
def test_silver_can_be_read_by_python_clients(decoded, producer):
    """An out-of-domain value in silver (year 0, year 99999) made collect() and toPandas() raise."""
    out, changes = decoded(producer)
    silver = [what for rows in out.values() for place, what in rows if place == "silver"]
    assert len(silver) == len([c for c in CASES if c.producer == producer and c.place == "silver"])
    assert len(changes.select("key", "after", "sequence").toPandas()) == len(silver)


# --- the Python explainers: deep, NaN and duplicate-key JSON give a reason, never an exception ---


@pytest.mark.parametrize(
    "text, expected",
    [
        (DEEP, "not JSON: JSON nested too deeply (5000 levels"),
        ('{"a": ' * 3000 + "1" + "}" * 3000, "not JSON: JSON nested too deeply (3000 levels"),
        ('{"specversion": NaN}', "not JSON: NaN is not a JSON value"),
        ('{"specversion": -Infinity}', "not JSON: -Infinity is not a JSON value"),
        ('{"id": "1", "id": "2"}', "not JSON: duplicate key 'id' in one object"),
    ],
)
def test_explainers_word_what_spark_refused(text, expected):
    assert sc.explain(ces.ENVELOPE_SCHEMA, text).startswith(expected)
    assert qlik.explain(text).startswith(expected)


def test_debezium_schema_discovery_skips_a_deeply_nested_line(tmp_path):
    from debezium_events import seed_event

    (tmp_path / "a.json").write_text('{"schema": ' + DEEP + ', "payload": {}}\n' + json.dumps(seed_event()) + "\n")
    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",))
    assert [c.name for c in debezium.columns_for(table, src)] == ["id", "first_name", "last_name", "email"]
