"""Random change histories in every producer's format, delivered as at-least-once transports do
(shuffled, duplicated, spread over several `sqlcdc run`s), against ``reference_model``.

One history per producer (seeded): inserts, updates (some to the same values, some changing the
primary key), deletes and re-inserts of a few keys, in transactions of one to three changes. Each
producer renders it its own way -- Debezium events (a key change as one update or as a delete and
a create; a tombstone after some deletes), the same with transaction metadata and the transaction
topic's BEGIN/END records (``debezium_tx``: gold holds a transaction until all of it has landed),
the same flattened by ExtractNewRecordState, change-table rows (an update is two rows, 3 and 4, that
may land in different files and runs; a key change a 3/4 pair or a delete and an insert), CES
CloudEvents (some cut into segments that land apart; updates with or without their old image, a key
change as a delete and an insert), Qlik data messages bare or wrapped (``atMSG``, routed by
``externalSchemaId``) after a metadata message that may itself land in a later run. The records, with a share
duplicated, are shuffled and cut into runs of one to three files; after the last run, SCD1 and
SCD2 gold must equal the reference model replaying the history in commit order, and every run
must end with the balance holding (``sqlcdc run`` exits 0). A sixth table is a producer hand-off
(docs/handoff.md): its history up to commit X as change-table rows, from commit W < X on as Debezium
events, both delivered the same way; its gold must equal the reference of the whole history.

``--odd-names`` names the columns as SQL Server allows and Delta stores but SQL tools must quote
(``row.id`` as the key, ``unit.price``, ``Nachname-Ä``, ``qty#1``; Qlik upper-cases them).
``--composite-key`` keys every table on (region, id), a text and an int part. ``--wide-types`` adds
a date, datetime2(6), bit, float, bigint, varbinary(16), uniqueidentifier and time(7) column
(:data:`WIDE_TYPES`).
``--exact-types`` adds a datetimeoffset, money, decimal(38,10), tinyint, real and datetime column
(:data:`EXACT_TYPES`).
``--debezium-schema`` lands the Debezium events in the JSON converter's schema envelope and leaves
their tables' columns to be discovered from it; ``--decimal-numbers`` writes their decimals as bare
JSON numbers (``decimal.format=NUMERIC``). ``--nasty-text`` adds names a writer must escape
(quotes, commas, CR/LF, tabs, emoji, empty text, ``NULL``); ``--ct-export csv|parquet`` lands the
change-table exports as CSV (each file its header, CRLF or LF; ``--csv-sep`` its delimiter) or
typed Parquet; ``--ces-avro`` lands CES files as Avro or JSON lines. ``--snapshot`` lands the first
transactions of inserts as Debezium snapshot reads and Qlik full-load REFRESH records.
``--two-tables`` gives every source (not the hand-off) a second table, dbo.hist2, in the same landing:
Debezium, CES and Qlik records of both tables mixed in each file, change-table exports a file per
capture instance. Each table has its own history and its gold is checked against its own reference;
about a third of the transactions change both tables under one commit (a transaction topic's END
counts each table's events; sequence values, CES's and Qlik's transaction counters run across both).
``--add-column`` adds a column, ``note``, at the history's middle transaction: CES events list it
only from there, Qlik data messages from there are typed by a second metadata version that has it
(schema evolution, discovered while both shapes land shuffled); Debezium's events (full, flattened,
with the transaction topic) hold it only from there too, as the connector captures it once the new
capture instance is in place (with ``--debezium-schema`` their Connect schemas gain it there: the
table's columns are discovered from both shapes); change-table exports have it from the start, NULL
until then.

A real run costs minutes on two cores, so this is a script, not part of ``make test``::

    .venv/bin/python tests/histories.py /tmp/histories              # seed 1, 3 runs
    .venv/bin/python tests/histories.py /tmp/histories --seed 7 --runs 4 --changes 80
    .venv/bin/python tests/histories.py /tmp/histories --seed 54 --runs 2 --odd-names --composite-key
"""

from __future__ import annotations

import argparse
import base64
import bisect
import dataclasses
import json
import random
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Context, Decimal
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import reference_model as ref  # noqa: E402
from debezium_events import flatten, seed_event  # noqa: E402
from test_ces import event as ces_event, land_avro, split as ces_split  # noqa: E402
from watch_runs import WatchRuns  # noqa: E402

SQLCDC = str(Path(sys.executable).parent / "sqlcdc")
COLUMNS = ["name", "qty", "price"]  # non-key columns; the key is ``id`` (``--wide-types`` adds :data:`WIDE`)
NAMES = ["ann", "bob", "cy", None, "dee", "Émile", "x" * 40]
#: ``--nasty-text``: names a CSV, JSON or SQL writer must escape, and text that looks like something else.
NASTY_NAMES = ["", " ", "a,b", 'say "hi"', '"', "two\nlines", "crlf\r\nend", "tab\tin", "back\\slash", "🦆 duck",
               "  padded  ", "NULL", "null", "\\N", "it's", "0x00", '{"a": 1}', "line\u2028sep", "ctl\x01", "=1+2",
               ";semi;", "é" * 100, "repl\ufffdchar"]
#: Each column of the history: its type in ``columns:`` (config), in CES (SQL Server) and in Qlik.
TYPES = {
    "region": ("string", "nvarchar(10)", {"type": "WSTRING", "length": 10}),
    "id": ("int", "int", {"type": "INT4"}),
    "name": ("string", "nvarchar(100)", {"type": "WSTRING", "length": 100}),
    "qty": ("int", "int", {"type": "INT4"}),
    "price": ("decimal(10,2)", "decimal(10,2)", {"type": "NUMERIC", "precision": 10, "scale": 2}),
    "note": ("string", "nvarchar(20)", {"type": "WSTRING", "length": 20}),  # ``--add-column``
}
#: ``--wide-types``: one more column of each kind the producers render their own way (Debezium's
#: Connect logical types, a change-table export's JSON, CES's SQL Server text, Qlik's JSON values),
#: each value drawn from its type's edges. Its types: config (Debezium: Connect names; change tables
#: and the hand-off of both: SQL Server names, which both read as their producer writes them), CES, Qlik.
WIDE_TYPES = {
    "born": (("io.debezium.time.Date", "date"), "date", {"type": "DATE"}),
    "seen": (("io.debezium.time.MicroTimestamp", "datetime2(6)"), "datetime2(6)", {"type": "DATETIME"}),
    "flag": (("boolean", "bit"), "bit", {"type": "BOOLEAN"}),
    "ratio": (("float64", "float"), "float", {"type": "REAL8"}),
    "big": (("int64", "bigint"), "bigint", {"type": "INT8"}),
    "blob": (("bytes", "varbinary(16)"), "varbinary(16)", {"type": "BYTES", "length": 16}),
    "uid": (("io.debezium.data.Uuid", "uniqueidentifier"), "uniqueidentifier", {"type": "STRING", "length": 36}),
    "tod": (("io.debezium.time.NanoTime", "time(7)"), "time(7)", {"type": "TIME"}),
}
WIDE_VALUES = {
    "born": [None, date(2024, 2, 29), date(1, 1, 1), date(9999, 12, 31), date(1969, 12, 31)],
    "seen": [None, datetime(2024, 1, 2, 3, 4, 5, 123456), datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999),
             datetime(1969, 12, 31, 23, 59, 59, 500000)],
    "flag": [None, True, False],
    "ratio": [None, 0.1, -2.5e-10, 1.7976931348623157e308, 0.0, 5e-324],
    "big": [None, -2**63, 2**63 - 1, 0],
    "blob": [None, b"", b"\x00\xff", bytes(range(16))],
    "uid": [None, "6F9619FF-8B86-D011-B42D-00C04FC964FF"],
    "tod": [None, "00:00:00.0000000", "23:59:59.9999999", "16:45:01.1234567", "12:00:00.5000000"],  # SQL Server's text
}
#: ``--exact-types``: columns whose values a producer may round, widen or shift: a
#: datetimeoffset (its instant; Qlik maps it to STRING and keeps the text), money and a
#: decimal(38,10) at their limits (a change-table JSON export writes them as JSON numbers), an
#: unsigned tinyint up to 255, a 4-byte real at its limits and a legacy datetime (1/300 s). Config
#: types are SQL Server names for every producer (Debezium's as the connector writes them).
EXACT_TYPES = {
    "dto": (("datetimeoffset(7)", "datetimeoffset(7)"), "datetimeoffset(7)", {"type": "STRING", "length": 34}),
    "cash": (("money", "money"), "money", {"type": "NUMERIC", "precision": 19, "scale": 4}),
    "huge": (("decimal(38,10)", "decimal(38,10)"), "decimal(38,10)", {"type": "NUMERIC", "precision": 38, "scale": 10}),
    "tiny": (("tinyint", "tinyint"), "tinyint", {"type": "UINT1"}),
    "r4": (("real", "real"), "real", {"type": "REAL4"}),
    "dt": (("datetime", "datetime"), "datetime", {"type": "DATETIME"}),
}
EXACT_VALUES = {  # dto as SQL Server's text; the decimals as text with their scale's digits
    "dto": [None, "2024-01-02 03:04:05.1234567 +02:00", "0001-01-01 00:00:00.0000000 -05:00",
            "9999-12-31 23:59:59.9999999 +05:30", "1969-12-31 23:59:59.5000000 +00:00", "2024-03-31 01:30:00.0000001 -14:00",
            "2024-03-31 01:30:00.0000000 +14:00"],
    "cash": [None, "-922337203685477.5808", "922337203685477.5807", "0.0001", "12.3400", "0.0000"],
    "huge": [None, "9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999",
             "0.0000000001", "1234567890123456789.0123456789", "0.0000000000"],
    "tiny": [None, 0, 128, 255],
    "r4": [None, 1.5, -0.25, 3.4028234663852886e38, 1.401298464324817e-45, 0.1],
    "dt": [None, datetime(1753, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 997000), datetime(2024, 1, 2, 3, 4, 5, 3000)],
}
#: ``--add-column``: a column ``note`` the table gains at the history's middle transaction
#: (``ALTER TABLE ... ADD note nvarchar(20)``): every change before it has ``note`` NULL, and CES
#: events before it do not list it in ``eventsource.cols`` nor hold it in their images, nor do
#: Debezium's (nor their Connect schemas); change-table exports have it from the start, NULL until
#: then. Each change says which side of the ALTER it is on (:attr:`Change.noted`, set by
#: :func:`with_added_column`).
ADDED = {"on": False}
#: ``--rescale``: the ALTER of ``--add-column`` also makes ``price`` decimal(12,4); Debezium events from
#: there carry the new Connect schema and their unscaled values at scale 4.
RESCALED = {"on": False}
ADDED_VALUES = {"note": [None, "first", "ünïcode ✓", "", "x" * 20]}
_EPOCH = datetime(1970, 1, 1)
#: ``--debezium-schema``: Debezium events in the JSON converter's schema envelope
#: (``schemas.enable=true``), their tables' columns discovered from it (no ``columns:``).
DBZ_SCHEMA = {"on": False}
#: ``--decimal-numbers``: Debezium's decimals as bare JSON numbers (the JSON converter's
#: ``decimal.format=NUMERIC``), every digit. Rendered as a marked string (:func:`bare_decimal`) that
#: survives the re-serialisations of the schema envelope, the flattening and the transaction topic
#: (a Python float would not) and is written bare at the end of :func:`records`.
DECIMAL_NUMBERS = {"on": False}


def bare_decimal(text: str) -> str:
    return f"\x01dec:{text}\x01"


def with_bare_decimals(line: str) -> str:
    return re.sub(r'"\\u0001dec:([^"\\]*)\\u0001"', r"\1", line)
#: Each column's field in the envelope's Connect schema, as the JSON converter writes it.
CONNECT_FIELDS = {
    "region": {"type": "string"}, "id": {"type": "int32"}, "name": {"type": "string"}, "qty": {"type": "int32"},
    "price": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
              "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    "born": {"type": "int32", "name": "io.debezium.time.Date", "version": 1},
    "seen": {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1},
    "flag": {"type": "boolean"}, "ratio": {"type": "double"}, "big": {"type": "int64"}, "blob": {"type": "bytes"},
    "uid": {"type": "string"}, "tod": {"type": "int64", "name": "io.debezium.time.NanoTime", "version": 1},
    "dto": {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1},
    "cash": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
             "parameters": {"scale": "4", "connect.decimal.precision": "19"}},
    "huge": {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
             "parameters": {"scale": "10", "connect.decimal.precision": "38"}},
    "tiny": {"type": "int16"}, "r4": {"type": "float"}, "note": {"type": "string"},
    "dt": {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1},
}
#: The history's column -> the name the producers write and gold holds (``--odd-names``: names
#: Delta can store that SQL tools must quote; Qlik writes them upper-cased).
COL = {c: c for c in ("region", "id", *COLUMNS, *WIDE_TYPES, *EXACT_TYPES, "note")}
ODD_NAMES = {"region": "région/eu", "id": "row.id", "name": "Nachname-Ä", "qty": "qty#1",
             "price": "unit.price", "born": "born:on", "seen": "zuletzt_gesehen", "flag": "flag?",
             "ratio": "ratio%", "big": "big[0]", "blob": "blob$", "uid": "uid'x", "tod": "Uhrzeit~",
             "dto": "zeit+zone", "cash": "€cash", "huge": "huge.38", "tiny": "tiny!", "r4": "r@4", "dt": "dt-alt"}
#: ``--ct-export``: how change-table exports (and the hand-off's) land: JSON lines (``FOR JSON``);
#: ``csv``: each file its header, NULL an empty field and an empty string ``""`` (the reader's
#: default ``csv_null_value``), lines ended by ``\n`` or ``\r\n`` per file, values as SQL Server's
#: text (as CES writes them); ``parquet``: typed columns (LSNs and binary as bytes, a decimal, a
#: date, a timestamp without zone), as pyarrow writes a change table read over ODBC.
CT_EXPORT = {"as": "json", "sep": ","}
#: ``--ces-avro``: each CES file lands as an Avro container (the seed's ChangeEvent schema) or as
#: JSON lines, at random; the source reads both (``serialization: auto``).
CES_AVRO = {"on": False}
#: ``--snapshot``: the history's first transactions of inserts alone are an initial load: Debezium
#: snapshot reads (op ``r``, no ``change_lsn``, the snapshot's ``commit_lsn``, no transaction block),
#: Qlik full-load REFRESH records (no ``changeSequence``, as the seed's fixture); CES and change
#: tables have no initial load and render them as inserts. ``txs``: the current history's such
#: transactions (set by :func:`records`).
SNAPSHOT = {"on": False, "txs": frozenset()}
#: ``--composite-key``: the key is (region, id), region a text part that follows from id (so a key
#: change of id changes both parts).
COMPOSITE = {"on": False}
REGIONS = ["nord", "süd", "ost"]


def key_of(key: int) -> dict:
    """The key columns' values of the history's key ``key`` (history names)."""
    return {"region": REGIONS[key % 3], "id": key} if COMPOSITE["on"] else {"id": key}


def key_names() -> list[str]:
    return list(key_of(0))


def columns() -> list[str]:
    """The table's columns in order (history names): the key's, then :data:`COLUMNS`."""
    return key_names() + list(COLUMNS)


def gold_key(key: int):
    """How :func:`expected` and :func:`gold` name a key: ``id``, or ``region/id``."""
    return "/".join(map(str, key_of(key).values())) if COMPOSITE["on"] else key


def types_of(c: str, producer: str = "cdc_ct") -> tuple:
    """Column ``c``'s types: (config type for ``producer``, CES SQL Server type, Qlik type)."""
    if c in TYPES:
        return TYPES[c]
    config, sql, qlik_type = {**WIDE_TYPES, **EXACT_TYPES}[c]
    return (config[0] if producer.startswith("debezium") else config[1]), sql, qlik_type


def rendered(producer: str, row: dict) -> dict:
    """``row`` (history names and values) as ``producer`` writes its values into JSON: Debezium by
    Kafka Connect's JSON converter (a decimal base64, a date epoch days, a MicroTimestamp epoch
    microseconds, bytes base64), a change-table export as ``FOR JSON`` does (ISO dates, binary as
    0x hex), CES as SQL Server's text of each value (every value a string), Qlik as JSON values
    (dates and times as text, bytes as hex)."""
    def one(c, v):
        if v is None:
            return None
        if c == "tod" and producer == "debezium":  # NanoTime: nanoseconds since midnight
            return sum(int(x) * m for x, m in zip(v[:8].split(":"), (3600, 60, 1))) * 10**9 + int(v[9:]) * 100
        if c in ("price", "cash", "huge") and producer == "debezium" and DECIMAL_NUMBERS["on"]:
            return bare_decimal(v)
        if c == "price" and producer == "debezium":
            return _b64_decimal(v)
        if c in ("cash", "huge"):  # Connect Decimal; FOR JSON: a JSON number (see :func:`json_line`)
            return _b64_decimal(v, 4 if c == "cash" else 10) if producer == "debezium" else \
                JsonNumber(v) if producer == "cdc_ct" else v
        if c == "dto" and producer in ("debezium", "cdc_ct"):  # ZonedTimestamp, FOR JSON: ISO 8601 with its offset
            return v[:10] + "T" + v[11:27] + v[28:]
        if c == "dt" and producer == "debezium":  # io.debezium.time.Timestamp: epoch milliseconds
            return (v - _EPOCH) // timedelta(milliseconds=1)
        if c == "dt" and producer != "qlik":  # datetime's text: milliseconds
            return v.isoformat(sep="T" if producer == "cdc_ct" else " ", timespec="milliseconds")
        if c == "r4" and producer in ("debezium", "cdc_ct", "qlik"):
            return JsonNumber(repr(v))  # as written: 0.1, 3.4028234663852886e+38 (a 4-byte float reads it back)
        if isinstance(v, datetime):
            return v.isoformat(sep="T" if producer == "cdc_ct" else " ", timespec="microseconds") \
                if producer != "debezium" else (v - _EPOCH) // timedelta(microseconds=1)
        if isinstance(v, date):
            return (v - _EPOCH.date()).days if producer == "debezium" else v.isoformat()
        if isinstance(v, bytes):
            return (base64.b64encode(v).decode() if producer == "debezium"
                    else ("0x" if producer in ("cdc_ct", "ces") else "") + v.hex().upper())
        if producer == "ces":
            return ("1" if v else "0") if isinstance(v, bool) else (repr(v) if isinstance(v, float) else str(v))
        return v
    return {k: one(k, v) for k, v in row.items()}


class JsonNumber(str):
    """A number a producer writes into JSON as it is (38 digits, no float in between)."""


def json_line(obj, **kw) -> str:
    """``json.dumps`` writing :class:`JsonNumber` values as bare JSON numbers."""
    def mark(x):
        if isinstance(x, JsonNumber):
            return f"\x00num:{x}\x00"
        return {k: mark(v) for k, v in x.items()} if isinstance(x, dict) else x
    return re.sub(r'"\\u0000num:([^"\\]*)\\u0000"', r"\1", json.dumps(mark(obj), **kw))


def out_names(row: dict) -> dict:
    """``row`` (history names) with the names the producers write."""
    return {COL[k]: v for k, v in row.items()}


@dataclass(frozen=True)
class Change:
    op: str  # INSERT | UPDATE | DELETE
    key: int  # the row's key (after a key change: the new one)
    before: dict | None
    after: dict | None
    tx: int  # transaction number: commit order
    pos: int  # position in the transaction, from 1
    old_key: int | None = None  # an UPDATE that changes the primary key: the key before it
    form: float = 0.0  # a draw in [0, 1) a renderer may use to pick one of its producer's forms
    table: str = "hist"  # the source table (dbo.<table>); ``--two-tables``: hist or hist2
    noted: bool = False  # ``--add-column``: made after the ALTER (CES lists ``note``, Qlik's version 2 types it)

    @property
    def before_key(self) -> int:
        return self.old_key if self.old_key is not None else self.key


def history(rng: random.Random, keys: int, changes: int, repeat_rows: bool = False) -> list[Change]:
    """``changes`` row changes over ``keys`` keys, in commit order. A transaction changes a row at
    most once, unless ``repeat_rows`` (SQL Server gives each change of a row its own sequence value
    and command id under the transaction's one commit LSN)."""
    live: dict[int, dict] = {}
    out: list[Change] = []
    tx = 0
    every = range(1, keys + 1)
    # The keys not live, sorted. Draws index the sorted candidates minus the transaction's keys, as
    # ``rng.choice`` over a fresh list of them would (same seed, same history), without building
    # that O(keys) list per change: the benchmarks draw 1M changes.
    dead = list(every)

    def has(sorted_keys, k: int) -> bool:
        j = bisect.bisect_left(sorted_keys, k)
        return j < len(sorted_keys) and sorted_keys[j] == k

    def pick(candidates, skip: set[int]) -> int:
        """``rng.choice([k for k in candidates if k not in skip])``; ``candidates`` sorted."""
        i = rng.randrange(len(candidates) - sum(1 for k in skip if has(candidates, k)))
        for k in sorted(skip):  # step over the skipped keys at or before the index
            if has(candidates, k) and bisect.bisect_left(candidates, k) <= i:
                i += 1
        return candidates[i]

    while len(out) < changes:
        tx += 1
        touched: set[int] = set()
        for pos in range(1, rng.randint(1, 3) + 1):
            if len(touched) >= keys and not repeat_rows:  # a key change took the last free key (``--keys`` 2 or 3)
                break
            excluded = set() if repeat_rows else touched
            key = pick(every, excluded)
            touched.add(key)
            row = {"name": rng.choice(NAMES), "qty": rng.choice([None, 0, 1, 7, 2**31 - 1]),
                   "price": rng.choice([None, "0.00", "1.50", "19.99", "-3.25", "99999999.99"])}
            row.update({c: rng.choice({**WIDE_VALUES, **EXACT_VALUES, **ADDED_VALUES}[c]) for c in COLUMNS
                        if c in WIDE_VALUES or c in EXACT_VALUES or c in ADDED_VALUES})
            form = rng.random()
            any_free = len(dead) > sum(1 for k in excluded if has(dead, k))
            if key not in live:
                out.append(Change("INSERT", key, None, row, tx, pos, form=form))
                live[key] = row
                dead.remove(key)
            elif rng.random() < 0.25:
                out.append(Change("DELETE", key, live.pop(key), None, tx, pos, form=form))
                bisect.insort(dead, key)
            elif any_free and rng.random() < 0.12:  # the primary key changes: key -> new
                new = pick(dead, excluded)
                touched.add(new)
                out.append(Change("UPDATE", new, live.pop(key), row, tx, pos, old_key=key, form=form))
                live[new] = row
                dead.remove(new)
                bisect.insort(dead, key)
            else:
                if rng.random() < 0.15:
                    row = dict(live[key])  # an update that changes nothing
                out.append(Change("UPDATE", key, live[key], row, tx, pos, form=form))
                live[key] = row
    return out


#: ``--two-tables``: the tables each source of :data:`SOURCES` carries (CES, Qlik and Debezium in one
#: stream, routed by each record's table; change tables an export file per capture instance in one
#: landing, routed by the file name); one transaction may change both.
TABLES = ["hist"]


def tables_history(rng: random.Random, keys: int, changes: int, repeat_rows: bool = False) -> list[Change]:
    """:func:`history` of each table of :data:`TABLES` (``changes`` shared between them), merged by
    :func:`merge_tables`; with one table, that table's history as it is."""
    if len(TABLES) == 1:
        return history(rng, keys, changes, repeat_rows)
    return merge_tables(rng, {t: history(rng, keys, max(1, changes // len(TABLES)), repeat_rows) for t in TABLES})


def merge_tables(rng: random.Random, histories: dict[str, list[Change]]) -> list[Change]:
    """The tables' histories in one commit order: each transaction of a table stays one (its
    changes in order), and about a third of the merged transactions hold one transaction of each
    table, as one SQL Server transaction changing them all (one commit LSN; positions, and so
    sequence values, numbered across the tables)."""
    queues = []
    for table, changes in histories.items():
        txs: dict[int, list[Change]] = {}
        for c in changes:
            txs.setdefault(c.tx, []).append(dataclasses.replace(c, table=table))
        queues.append(list(txs.values()))
    out: list[Change] = []
    tx = 0
    while any(queues):
        ready = [q for q in queues if q]
        parts = [q.pop(0) for q in ready] if len(ready) > 1 and rng.random() < 0.35 else [rng.choice(ready).pop(0)]
        tx += 1
        out += [dataclasses.replace(c, tx=tx, pos=pos) for pos, c in enumerate((c for part in parts for c in part), 1)]
    return out


def added_from(changes: list[Change]) -> int:
    """``--add-column``: the transaction the column is added at, the middle one of ``changes``."""
    txs = sorted({c.tx for c in changes})
    return txs[len(txs) // 2]


def with_added_column(changes: list[Change]) -> list[Change]:
    """``changes`` with ``note`` NULL in every change before :func:`added_from`, and each change's
    before image the row as the changes before it left it (a key's before image is its last after)."""
    start = added_from(changes)
    rows: dict[tuple[str, int], dict] = {}
    out = []
    for c in changes:
        after = c.after if c.after is None or c.tx >= start else {**c.after, "note": None}
        before = None if c.before is None else rows[(c.table, c.before_key)]
        out.append(dataclasses.replace(c, before=before, after=after, noted=c.tx >= start))
        rows.pop((c.table, c.before_key), None)
        if after is not None:
            rows[(c.table, c.key)] = after
    return out


def commit_hex(c: Change) -> str:
    return f"00000031{c.tx:08X}0001"


def change_hex(c: Change, sub: int = 0) -> str:
    """The change's LSN within its transaction; ``sub`` 1 for the second record of a change a
    producer writes as two (a key change as a delete and an insert)."""
    return f"00000031{c.tx:08X}{(c.pos + 1) * 16 + sub:04X}"


# --- each producer's rendering ---------------------------------------------------------------------


def _b64_decimal(text: str | None, scale: int = 2) -> str | None:
    if text is None:
        return None
    unscaled = int(Decimal(text).scaleb(scale, context=Context(prec=80)))  # 38 digits: not the default 28  # Connect's Decimal: the unscaled value, two's complement
    return base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()


def _as_delete_and_insert(c: Change) -> list[Change]:
    """A key change as two changes of one position: the old key's delete, then the new key's insert
    (each keeping every other field of the change: its table, its side of an added column)."""
    return [dataclasses.replace(c, op="DELETE", key=c.before_key, after=None, old_key=None, form=0.0),
            dataclasses.replace(c, op="INSERT", before=None, old_key=None, form=0.0)]


def debezium(c: Change) -> list[str]:
    def image(row, key):
        if row is not None and ADDED["on"] and not c.noted:  # captured before the ALTER: no ``note``
            row = {k: v for k, v in row.items() if k != "note"}
        if row is None:
            return None
        out = rendered("debezium", {**key_of(key), **row})
        if RESCALED["on"] and c.noted and row.get("price") is not None and not DECIMAL_NUMBERS["on"]:
            out["price"] = _b64_decimal(row["price"], 4)  # the new capture instance's decimal(12,4)
        return out_names(out)

    def dbz_lsn(hex20: str) -> str:
        return f"{hex20[:8]}:{hex20[8:16]}:{hex20[16:]}".lower()

    if c.old_key is not None and c.form < 0.5:  # a key change as a delete (and its tombstone) and a create
        d, i = _as_delete_and_insert(c)
        return debezium(d)[:1] + ["null"] + [x.replace(dbz_lsn(change_hex(i)), dbz_lsn(change_hex(i, 1)))
                                              .replace('"event_serial_no": 1', '"event_serial_no": 2')
                                              .replace('"event_serial_no":1', '"event_serial_no":2') for x in debezium(i)]
    op = {"INSERT": "c", "UPDATE": "u", "DELETE": "d"}[c.op]
    snap = c.tx in SNAPSHOT["txs"]
    if snap:  # a snapshot read: ordered before every streamed change by its op, not an LSN of its own
        op, last = "r", max(SNAPSHOT["txs"])
    # Compact and UTF-8, as Debezium's JsonConverter writes (the fast path's canonical form,
    # docs/fast-path.md); one transaction in five spaced and ASCII-escaped, as a re-serialising
    # tool might land it (the strict decode's, with the same rows).
    spaced = c.tx % 5 == 0
    event = json_line({
        "before": image(c.before, c.before_key), "after": image(c.after, c.key), "op": op, "ts_ms": 1700000000000 + c.tx,
        "source": {"version": "2.7.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1700000000000 + c.tx,
                   "snapshot": "false", "db": "testDB", "schema": "dbo", "table": c.table,
                   "change_lsn": dbz_lsn(change_hex(c)), "commit_lsn": dbz_lsn(commit_hex(c)), "event_serial_no": 1}
        if not snap else {"version": "2.7.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1700000000000,
                          "snapshot": "last" if c.tx == last else "true", "db": "testDB", "schema": "dbo", "table": c.table,
                          "change_lsn": None, "commit_lsn": dbz_lsn(commit_hex(dataclasses.replace(c, tx=last))),
                          "event_serial_no": None},
    }, separators=(", ", ": ") if spaced else (",", ":"), ensure_ascii=spaced)
    # Kafka's log compaction tombstone after a delete (landed as the line "null"): skipped by definition
    return [event, "null"] if c.op == "DELETE" and c.form < 0.5 else [event]


def with_connect_schema(line: str) -> str:
    """An event value (payload only) in the JSON converter's schema envelope: the seed's ``source``
    schema, the row struct of :data:`CONNECT_FIELDS`, the ``transaction`` block when it has one."""
    if line == "null":
        return line
    payload = json.loads(line)
    table = payload["source"]["table"]
    image = payload["after"] or payload["before"]  # the row struct: the columns captured (``--add-column``)
    new_shape = image is not None and COL["note"] in image  # after the ALTER (``--add-column``)
    rescaled = {"parameters": {"scale": "4", "connect.decimal.precision": "12"}} if RESCALED["on"] and new_shape else {}
    row = {"type": "struct", "optional": True, "name": f"server1.dbo.{table}.Value", "fields": [
        {**CONNECT_FIELDS[c], **(rescaled if c == "price" else {}), "optional": c not in key_names(), "field": COL[c]}
        for c in columns() if c != "note" or new_shape]}
    seed = {f["field"]: f for f in seed_event()["schema"]["fields"]}
    fields = [{**row, "field": "before"}, {**row, "field": "after"}, seed["source"], seed["op"], seed["ts_ms"]]
    if "transaction" in payload:
        fields.append({"type": "struct", "optional": True, "name": "event.block", "version": 1, "field": "transaction",
                       "fields": [{"type": "string", "optional": False, "field": "id"},
                                  {"type": "int64", "optional": False, "field": "total_order"},
                                  {"type": "int64", "optional": False, "field": "data_collection_order"}]})
    schema = {"type": "struct", "optional": False, "name": f"server1.dbo.{table}.Envelope", "version": 1, "fields": fields}
    return json.dumps({"schema": schema, "payload": payload})


def debezium_flat(c: Change) -> list[str]:
    """The Debezium events flattened by ExtractNewRecordState (rewrite, the documented add.fields), a
    share with the Connect schema. A key change is Debezium's delete + tombstone + create: the
    flattened update would lose its old key."""
    lines = debezium(dataclasses.replace(c, form=0.0) if c.old_key is not None else c)
    return [flatten(x, with_schema=c.form > 0.7) for x in lines]


def debezium_with_metadata(changes: list[Change], rng: random.Random) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """Per transaction, (its events, its BEGIN and END records) as Debezium writes them with
    provide.transaction.metadata=true (its SQL Server documentation): each event gets the
    ``transaction`` block (id = commit LSN, total_order, data_collection_order, here as the strings
    of the documentation's example or as numbers); the boundary records, payload only or in the
    JSON converter's schema envelope, count the events (a key change's delete and create are two)."""
    events: dict[int, list[str]] = {}
    counts: dict[int, dict[str, int]] = {}  # per transaction, its events per table so far
    for c in changes:
        for line in debezium(c):
            if line == "null":  # a tombstone: not an event of the transaction
                events.setdefault(c.tx, []).append(line)
                continue
            doc = json.loads(line)
            if c.tx in SNAPSHOT["txs"]:  # a snapshot read: no transaction
                events.setdefault(c.tx, []).append(line)
                continue
            per_table = counts.setdefault(c.tx, {})
            per_table[c.table] = in_table = per_table.get(c.table, 0) + 1  # its place among its table's events
            n = sum(per_table.values())  # and in its transaction
            as_text = rng.random() < 0.5
            doc["transaction"] = {"id": doc["source"]["commit_lsn"], "total_order": str(n) if as_text else n,
                                  "data_collection_order": str(in_table) if as_text else in_table}
            events.setdefault(c.tx, []).append(json.dumps(doc))
    bounds: dict[int, list[str]] = {}
    for tx, lines in events.items():
        if tx in SNAPSHOT["txs"]:
            continue
        tid, per_table = json.loads(next(x for x in lines if x != "null"))["transaction"]["id"], counts[tx]
        n = sum(per_table.values())
        begin = {"status": "BEGIN", "id": tid, "ts_ms": 1700000000000 + tx, "event_count": None, "data_collections": None}
        end = {"status": "END", "id": tid, "ts_ms": 1700000000000 + tx, "event_count": n,
               "data_collections": [{"data_collection": f"testDB.dbo.{t}", "event_count": k} for t, k in per_table.items()]}
        bounds[tx] = [json.dumps({"schema": {"type": "struct", "name": "io.debezium.connector.common.TransactionMetadataValue"},
                                  "payload": b}) if rng.random() < 0.5 else json.dumps(b) for b in (begin, end)]
    return events, bounds


def _all_columns_mask() -> str:
    """``__$update_mask`` with every column's bit (ordinal 1 the lowest bit of the last byte)."""
    n = len(columns())
    return "0x" + ((1 << n) - 1).to_bytes((n + 7) // 8, "big").hex().upper()


CT_META = ["__$start_lsn", "__$end_lsn", "__$seqval", "__$operation", "__$update_mask", "__$command_id"]


def _csv_field(v) -> str:
    """One CSV field: NULL empty, text quoted when it must be (and always when empty)."""
    if v is None:
        return ""
    v = str(v)
    return '"' + v.replace('"', '""') + '"' if v == "" or any(ch in v for ch in '"\r\n' + CT_EXPORT["sep"]) else v


def ct_csv_header() -> str:
    return CT_EXPORT["sep"].join(map(_csv_field, CT_META + [COL[c] for c in columns()]))


def cdc_ct(c: Change) -> list[str]:
    def row(op: int, image: dict, key: int, sub: int = 0) -> str:
        if CT_EXPORT["as"] == "csv":
            values = out_names(rendered("ces", {**image, **key_of(key)}))
            return CT_EXPORT["sep"].join(map(_csv_field, ["0x" + commit_hex(c), None, "0x" + change_hex(c, sub), op,
                                             _all_columns_mask(), c.pos, *(values[COL[k]] for k in columns())]))
        return json_line({"__$start_lsn": "0x" + commit_hex(c), "__$end_lsn": None, "__$seqval": "0x" + change_hex(c, sub),
                           "__$operation": op, "__$update_mask": _all_columns_mask(),
                           # each change of the generator's transactions is a statement of its own
                           "__$command_id": c.pos, **out_names(rendered("cdc_ct", {**image, **key_of(key)}))})

    if c.op == "INSERT":
        return [row(2, c.after, c.key)]
    if c.op == "DELETE":
        return [row(1, c.before, c.key)]
    if c.old_key is not None and c.form < 0.5:  # a key change logged as a delete and an insert
        return [row(1, c.before, c.before_key), row(2, c.after, c.key, 1)]
    return [row(3, c.before, c.before_key), row(4, c.after, c.key)]


def ces(c: Change, rng: random.Random) -> list[str]:
    added = c.noted

    def image(row, key):
        if row is None:
            return None
        return out_names(rendered("ces", {k: v for k, v in {**key_of(key), **row}.items() if k != "note" or added}))

    if c.old_key is not None:  # a key change: a delete of the old key, then an insert of the new one
        return [line for part in _as_delete_and_insert(c) for line in ces(part, rng)]
    op = {"INSERT": "INS", "UPDATE": "UPD", "DELETE": "DEL"}[c.op]
    old = image(c.before, c.before_key)
    if c.op == "UPDATE" and c.form < 0.5:
        old = None  # as the seed's update: "old": "{}"
    seq = c.pos * 2 + (c.op == "INSERT")  # a key change's insert after its delete, at the same position
    cols = [(COL[k], types_of(k)[1]) for k in columns() if k != "note" or added]
    ev = ces_event(op, table=c.table, cols=cols, old=old,
                   current=image(c.after, c.key), pk={COL[k]: str(v) for k, v in key_of(c.key).items()},
                   lsn=commit_hex(c), seq=seq, eid=f"e-{c.tx}-{seq}")
    if rng.random() < 0.2:  # a large event cut into segments, which land apart
        return [json.dumps(s) for s in ces_split(ev, rng.randint(2, 3))]
    return [json.dumps(ev)]


def qlik_versions() -> list[int]:
    """The metadata versions of a Qlik table: 1, and with ``--add-column`` 2 (the one with ``note``)."""
    return [1, 2] if ADDED["on"] else [1]


def qlik_metadata(table: str = "hist", version: int = 1) -> str:
    """The metadata message of dbo.<table>, ``version`` (2: after ``--add-column``'s ALTER), with the
    column names in force."""
    cols = [c for c in columns() if c != "note" or version >= 2]
    return json.dumps({
        "magic": "atMSG", "type": "MD", "headers": None, "messageSchemaId": None, "messageSchema": None,
        "message": {
            "schemaId": f"s-{table}-{version}",
            "lineage": {"server": "qlik-srv", "task": "task", "schema": "dbo", "table": table, "tableVersion": version,
                        "timestamp": f"2025-01-0{version}T00:00:00.000"},
            "tableStructure": {"tableColumns": {
                COL[c].upper(): {"ordinal": i, **types_of(c)[2],
                                 **({"primaryKeyPosition": key_names().index(c) + 1} if c in key_names() else {})}
                for i, c in enumerate(cols, start=1)
            }},
        },
    })


QLIK_METADATA = qlik_metadata()  # with the history's own column names
CES_COLS = [(c, TYPES[c][1]) for c in ("id", *COLUMNS)]


def qlik(c: Change, last_of_tx: bool) -> list[str]:
    version = 2 if c.noted else 1  # typed by the metadata version in force

    def image(row, key):
        if row is None:
            return None
        row = {k: v for k, v in {**key_of(key), **row}.items() if k != "note" or version >= 2}
        return {k.upper(): v for k, v in out_names(rendered("qlik", row)).items()}

    data = image(c.before, c.key) if c.op == "DELETE" else image(c.after, c.key)
    headers = {"operation": c.op, "changeSequence": f"20250101{c.tx * 1000 + c.pos:027d}",
               "timestamp": "2025-01-01T10:00:01.000", "transactionId": f"T{c.tx}",
               "transactionEventCounter": c.pos, "transactionLastEvent": last_of_tx}
    if c.tx in SNAPSHOT["txs"]:  # a full-load record, as the seed's fixture 02_full_load.jsonl
        headers = {"operation": "REFRESH", "changeSequence": "", "timestamp": "", "streamPosition": "",
                   "transactionId": "", "transactionEventCounter": 0, "transactionLastEvent": True}
    before = image(c.before, c.before_key) if c.op == "UPDATE" else None
    if c.form < 0.5:  # the atMSG envelope, routed by the metadata's schemaId
        return [json_line({"magic": "atMSG", "type": "DT", "headers": None, "messageSchemaId": None,
                            "messageSchema": None, "message": {"data": data, "beforeData": before,
                                                               "headers": {**headers, "externalSchemaId": f"s-{c.table}-{version}"}}})]
    return [json_line({"schema": "dbo", "table": c.table, "data": data, "beforeData": before, "headers": headers})]


def snapshot_txs(changes: list[Change]) -> frozenset[int]:
    """The first transactions made of inserts alone (each key once: keys start absent)."""
    txs: set[int] = set()
    for c in changes:
        if c.op != "INSERT" or c.old_key is not None:
            break
        txs.add(c.tx)
    txs.discard(next((c.tx for c in changes if c.op != "INSERT" or c.old_key is not None), None))
    return frozenset(txs)


def records(producer: str, changes: list[Change], rng: random.Random, *, initial_load: bool = True) -> list[str]:
    """``changes`` in ``producer``'s format; ``initial_load``: with ``--snapshot``, the first
    transactions of inserts as its initial load (a hand-off's Debezium part, from a later commit on, has none)."""
    on = SNAPSHOT["on"] and initial_load and producer.startswith(("debezium", "qlik"))
    SNAPSHOT["txs"] = snapshot_txs(changes) if on else frozenset()
    last = {}
    for c in changes:
        last[c.tx] = max(last.get(c.tx, 0), c.pos)
    wrap = with_connect_schema if DBZ_SCHEMA["on"] else (lambda line: line)
    if producer == "debezium_tx":  # with provide.transaction.metadata: the events and the transaction topic
        events, bounds = debezium_with_metadata(changes, rng)
        return [with_bare_decimals(wrap(x)) for lines in events.values() for x in lines] + [
            x for lines in bounds.values() for x in lines]
    out: list[str] = []
    for c in changes:
        if producer == "debezium":
            out += map(wrap, debezium(c))
        elif producer == "debezium_flat":
            out += debezium_flat(c)
        elif producer == "cdc_ct":
            out += cdc_ct(c)
        elif producer == "ces":
            out += ces(c, rng)
        else:
            out += qlik(c, c.pos == last[c.tx])
    return [with_bare_decimals(x) for x in out] if producer.startswith("debezium") else out


# --- delivery: duplicated, shuffled, spread over runs and files ------------------------------------

SOURCES = {  # producer -> (source, table, file name pattern: run, file)
    "debezium": ("h_dbz", "h_dbz_hist", "events-{r}-{f}.json"),
    "debezium_flat": ("h_flat", "h_flat_hist", "events-{r}-{f}.json"),
    "cdc_ct": ("h_ct", "h_ct_hist", "cdc.dbo_hist_CT_{r}_{f}.jsonl"),
    "ces": ("h_ces", "h_ces_hist", "part-{r}-{f}.json"),
    "qlik": ("h_qlik", "h_qlik_hist", "part-{r}-{f}.jsonl"),
    "debezium_tx": ("h_dbztx", "h_dbztx_hist", "events-{r}-{f}.json"),  # whole-transaction apply (held)
}


#: Producer hand-off (docs/handoff.md): one table whose history up to commit X is a change-table
#: export and from commit W < X on Debezium events, the overlap delivered by both.
HANDOFF = ("h_ho_ct", "h_ho_dbz", "h_ho_hist", "cdc.dbo_hist_CT_{r}_{f}.jsonl", "events-{r}-{f}.json")


def handoff_records(changes: list[Change], rng: random.Random) -> tuple[list[str], list[str]]:
    """(change-table rows up to X, Debezium events from W on): W and X at about 35% and 65% of the commits."""
    txs = sorted({c.tx for c in changes})
    w, x = txs[len(txs) * 35 // 100], txs[len(txs) * 65 // 100]
    return (records("cdc_ct", [c for c in changes if c.tx <= x], rng),
            records("debezium", [c for c in changes if c.tx >= w], rng, initial_load=False))


def land(base: Path, producers: list[str], *, keys: int, changes: int, seed: int,
         per_file: int | None = None) -> tuple[Path, dict[str, int]]:
    """One history per producer written in order (no duplicates, one run) into its landing folder,
    ``per_file`` records a file (default: one file), Qlik's after its metadata message; the config
    written by :func:`write_config`. Returns (config path, records landed per producer)."""
    config = write_config(base, set(producers))
    rng = random.Random(seed)
    landed = {}
    for producer in producers:
        lines = records(producer, history(rng, keys, changes), rng)
        if producer == "qlik":
            lines.insert(0, qlik_metadata())
        source, _, pattern = SOURCES[producer]
        step = per_file or len(lines)
        for f in range(0, len(lines), step):
            (base / "landing" / source / pattern.format(r=0, f=f // step)).write_text("\n".join(lines[f:f + step]) + "\n")
        landed[producer] = len(lines)
    return config, landed


def file_text(source: str, part: list[str], rng: random.Random) -> str:
    """A landed file of ``source``'s records: JSON lines; with ``--ct-csv`` a change-table source's
    CSV export, its header first, every line ended by ``\n`` or (a file in two) ``\r\n``."""
    if CT_EXPORT["as"] == "csv" and source in (SOURCES["cdc_ct"][0], HANDOFF[0]):
        end = rng.choice(["\n", "\r\n"])
        return end.join([ct_csv_header(), *part]) + end
    return "\n".join(part) + "\n"


def write_ct_parquet(path: Path, part: list[str]) -> None:
    """Change-table rows (JSON lines as :func:`cdc_ct` renders them) as one typed Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "decimal(10,2)": pa.decimal128(10, 2),
             "date": pa.date32(), "datetime2(6)": pa.timestamp("us"), "bit": pa.bool_(), "float": pa.float64(),
             "varbinary(16)": pa.binary(), "uniqueidentifier": pa.string(), "nvarchar(10)": pa.string(),
             "time(7)": pa.string(),  # Spark reads no Parquet TIME: an export writes it as text
             "datetimeoffset(7)": pa.string(), "money": pa.decimal128(19, 4), "decimal(38,10)": pa.decimal128(38, 10),
             "tinyint": pa.uint8(), "real": pa.float32(), "datetime": pa.timestamp("ms")}
    binary = lambda v: None if v is None else bytes.fromhex(v[2:])  # noqa: E731
    exact = lambda v: None if v is None else Decimal(str(v))  # noqa: E731
    convert = {pa.binary(): binary, pa.decimal128(10, 2): exact, pa.decimal128(19, 4): exact, pa.decimal128(38, 10): exact,
               pa.float32(): lambda v: None if v is None else float(v), pa.float64(): lambda v: None if v is None else float(v),
               pa.timestamp("ms"): lambda v: None if v is None else
               datetime.fromisoformat(v),
               pa.date32(): lambda v: None if v is None else date.fromisoformat(v),
               pa.timestamp("us"): lambda v: None if v is None else datetime.fromisoformat(v)}
    fields = [pa.field("__$start_lsn", pa.binary()), pa.field("__$end_lsn", pa.binary()),
              pa.field("__$seqval", pa.binary()), pa.field("__$operation", pa.int32()),
              pa.field("__$update_mask", pa.binary()), pa.field("__$command_id", pa.int32())]
    fields += [pa.field(COL[c], arrow[types_of(c)[0]]) for c in columns()]
    rows = [json.loads(x, parse_float=Decimal) for x in part]  # 38 digits: no float in between
    table = pa.table({f.name: pa.array([convert.get(f.type, lambda v: v)(r[f.name]) for r in rows], f.type)
                      for f in fields})
    pq.write_table(table, path)


def deliveries(lines: list[str], runs: int, rng: random.Random) -> list[list[list[str]]]:
    """``lines`` with ~20% delivered twice, shuffled, cut into ``runs`` runs of 1-3 files each."""
    sent = lines + [x for x in lines if rng.random() < 0.2]
    rng.shuffle(sent)
    cuts = sorted(rng.sample(range(1, len(sent)), runs - 1))
    parts = [sent[a:b] for a, b in zip([0] + cuts, cuts + [len(sent)])]
    out = []
    for part in parts:
        n = rng.randint(1, min(3, max(1, len(part))))
        file_cuts = sorted(rng.sample(range(1, len(part)), n - 1)) if len(part) > n else []
        out.append([part[a:b] for a, b in zip([0] + file_cuts, file_cuts + [len(part)])])
    return out


def _keys_and_columns(producer: str) -> str:
    return (f"keys: [{', '.join(json.dumps(COL[k]) for k in key_names())}]\ncolumns:\n"  # JSON strings are YAML's
            + "".join(f"  - {{name: {json.dumps(COL[c])}, type: '{types_of(c, producer)[0]}'}}\n" for c in columns()))


def ct_options() -> str:
    """A change-table source's ``options:`` (``--csv-sep``: its CSV delimiter)."""
    return f"    options: {{csv_delimiter: {json.dumps(CT_EXPORT['sep'])}}}\n" if CT_EXPORT["sep"] != "," else ""


def table_name(producer: str, table: str = "hist") -> str:
    """The onboarded table of ``producer``'s source table dbo.<table> (its gold: gold_<name>_scd1/2)."""
    return SOURCES[producer][1] + table[len("hist"):]


def _write_table(base: Path, producer: str, source: str, name: str, table: str) -> None:
    body = f"name: {name}\nsource: {source}\ntable: dbo.{table}\n"
    if producer in ("debezium", "debezium_tx") and DBZ_SCHEMA["on"]:  # discovered from the envelopes
        body += f"keys: [{', '.join(json.dumps(COL[k]) for k in key_names())}]\n"
    elif producer in ("debezium", "debezium_tx", "debezium_flat", "cdc_ct"):
        body += _keys_and_columns(producer)
    elif producer == "ces":
        body += f"keys: [{', '.join(json.dumps(COL[k]) for k in key_names())}]\n"
    (base / "config" / "tables" / f"{name}.yml").write_text(body)


def write_config(base: Path, only: set[str]) -> Path:
    (base / "config" / "tables").mkdir(parents=True, exist_ok=True)
    sources = ""
    for producer, (source, _, _) in SOURCES.items():
        if producer not in only:
            continue
        landing = base / "landing" / source
        landing.mkdir(parents=True, exist_ok=True)
        opts = f"    options: {{serialization: {'auto' if CES_AVRO['on'] else 'json'}}}\n" if producer == "ces" else ""
        opts += ct_options() if producer == "cdc_ct" else ""
        fmt = "debezium" if producer == "debezium_tx" else producer
        sources += f"  {source}:\n    format: {fmt}\n    landing: {landing}\n{opts}"
        for t in TABLES:
            _write_table(base, producer, source, table_name(producer, t), t)
    ct, dbz, table, _, _ = HANDOFF
    for source, producer in ((ct, "cdc_ct"), (dbz, "debezium")) if "handoff" in only else ():
        (base / "landing" / source).mkdir(parents=True, exist_ok=True)
        sources += (f"  {source}:\n    format: {producer}\n    landing: {base / 'landing' / source}\n"
                    + (ct_options() if producer == "cdc_ct" else ""))
    if "handoff" in only:
        (base / "config" / "tables" / f"{table}.yml").write_text(
            f"name: {table}\nsources: [{ct}, {dbz}]\ntable: dbo.hist\n" + _keys_and_columns("cdc_ct"))
    (base / "config" / "pipeline.yml").write_text("name: histories\nsources:\n" + sources)
    return base / "config" / "pipeline.yml"


# --- the check -------------------------------------------------------------------------------------


def utc_instant(text: str) -> datetime:
    """SQL Server's datetimeoffset text -> its instant in UTC (no zone), the 7th digit floored."""
    local = datetime.fromisoformat(text[:26])
    sign, hh, mm = (-1 if text[28] == "-" else 1), int(text[29:31]), int(text[32:34])
    return local - sign * timedelta(hours=hh, minutes=mm)


def silver_values(row: dict) -> dict:
    """``row`` as silver holds it: a time of day ``HH:mm:ss.SSSSSS``, its 7th digit floored; a
    datetimeoffset as its UTC instant; a real as a 4-byte float."""
    def one(k, v):
        if v is None:
            return None
        if k == "tod":
            return v[:15]
        if k == "dto":
            return utc_instant(v)
        return struct.unpack("f", struct.pack("f", v))[0] if k == "r4" else v
    return {k: one(k, v) for k, v in row.items()}


def expected(changes: list[Change]) -> tuple[list[tuple], dict[int, list[tuple]]]:
    """By the reference model: SCD1 rows ``(id, name, qty, price, ...)``, and per key its SCD2
    versions ``(name, qty, price, ..., closed)`` in commit order (the columns of :data:`COLUMNS`)."""
    events = [{"op": "DELETE" if c.op == "DELETE" else "UPSERT", "seq": (c.tx, c.pos),
               "cid": f"{c.tx}.{c.pos}", "key": (c.key,), "values": silver_values(c.after or {}), "provided": None}
              for c in changes]
    events += [{"op": "DELETE", "seq": (c.tx, c.pos), "cid": f"{c.tx}.{c.pos}#old", "key": (c.old_key,),
                "values": {}, "provided": None} for c in changes if c.old_key is not None]  # a key change
    current, versions = ref.replay(events, COLUMNS)
    scd1 = sorted(((gold_key(k[0]), *(r[c] for c in COLUMNS)) for k, r in current.items()), key=ref._sort_key)
    scd2: dict[int, list[tuple]] = {}
    for v in sorted(versions, key=lambda v: v["start"]):
        scd2.setdefault(gold_key(v["key"][0]), []).append((*(v["values"][c] for c in COLUMNS), v["end"] is not None))
    return scd1, scd2


def gold(spark, tables: Path, producer: str, table: str) -> tuple[list[tuple], dict[int, list[tuple]]]:
    """The same shapes read from a run's gold tables."""
    from pyspark.sql import functions as F

    names = tuple(COL[c].upper() if producer == "qlik" else COL[c] for c in ("id", *COLUMNS))
    region = COL["region"].upper() if producer == "qlik" else COL["region"]

    def key(r):
        return f"{r[region]}/{r[names[0]]}" if COMPOSITE["on"] else r[names[0]]

    def text(v):  # as the history holds values: a decimal as its text, binary as bytes
        if isinstance(v, str) and producer == "qlik" and re.fullmatch(r"\d{4}-.* [+-]\d\d:\d\d", v):
            return utc_instant(v)  # Qlik's datetimeoffset is STRING: its text as written
        return format(v, "f") if isinstance(v, Decimal) else bytes(v) if isinstance(v, bytearray) else v

    def read(path):  # an instant (timestamp) as its UTC time: PySpark's local-time conversion fails near year 1;
        # a decimal as Spark's text, every digit of its scale (PySpark may hand 1E-10 over as 1.00E-10)
        df = spark.read.format("delta").load(str(path))
        as_type = {"timestamp": "timestamp_ntz", "decimal": "string"}
        return df.select([F.col(f"`{f.name}`").cast(as_type[f.dataType.typeName()]).alias(f.name)
                          if f.dataType.typeName() in as_type else F.col(f"`{f.name}`") for f in df.schema]).collect()

    def value(r, n):  # a column gold lacks (a discovery that missed it) differs, not stops the check
        if RESCALED["on"] and n == COL["price"] and n in r.__fields__ and r[n] is not None:  # 12,4 -> as written
            exact = Decimal(r[n]).quantize(Decimal("0.01"))
            return format(exact, "f") if exact == Decimal(r[n]) else r[n]
        return text(r[n]) if n in r.__fields__ else "<no such column in gold>"

    s1, s2 = read(tables / f"gold_{table}_scd1"), read(tables / f"gold_{table}_scd2")
    scd1 = sorted(((key(r), *(value(r, n) for n in names[1:])) for r in s1), key=ref._sort_key)
    scd2: dict[int, list[tuple]] = {}
    for r in sorted(s2, key=lambda r: tuple(r["__START_AT"])):
        scd2.setdefault(key(r), []).append((*(value(r, n) for n in names[1:]), r["__END_AT"] is not None))
    return scd1, scd2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--changes", type=int, default=40)
    ap.add_argument("--qlik-metadata", choices=("first", "any"), default="first",
                    help="the run the Qlik metadata message lands in: the first, or any (data may come first)")
    ap.add_argument("--odd-names", action="store_true",
                    help=f"columns named {', '.join(ODD_NAMES.values())} (dots, a dash, a non-ASCII letter, #)".replace("%", "%%"))
    ap.add_argument("--composite-key", action="store_true",
                    help="key every table on (region, id): a text and an int part")
    ap.add_argument("--wide-types", action="store_true",
                    help=f"add columns {', '.join(WIDE_TYPES)}: a date, datetime2, bit, float, bigint, varbinary, uniqueidentifier, time")
    ap.add_argument("--exact-types", action="store_true",
                    help=f"add columns {', '.join(EXACT_TYPES)}: datetimeoffset, money, decimal(38,10), tinyint, real, datetime")
    ap.add_argument("--debezium-schema", action="store_true",
                    help="Debezium events in the JSON converter's schema envelope, their columns discovered from it")
    ap.add_argument("--decimal-numbers", action="store_true",
                    help="Debezium's decimals as bare JSON numbers, every digit (the JSON converter's decimal.format=NUMERIC)")
    ap.add_argument("--nasty-text", action="store_true",
                    help="names with quotes, commas, line breaks, tabs, emoji, 'NULL', empty text and the like")
    ap.add_argument("--ct-export", choices=("json", "csv", "parquet"), default="json",
                    help="how change-table exports (and the hand-off's) land: JSON lines, CSV or typed Parquet")
    ap.add_argument("--ces-avro", action="store_true",
                    help="CES files land as Avro containers or JSON lines, at random (serialization: auto)")
    ap.add_argument("--csv-sep", choices=(",", ";", "tab", "|"), default=",",
                    help="the CSV exports' delimiter (with --ct-export csv; the sources' csv_delimiter)")
    ap.add_argument("--snapshot", action="store_true",
                    help="the first transactions of inserts land as Debezium snapshot reads and Qlik full-load REFRESH records")
    ap.add_argument("--repeat-rows", action="store_true",
                    help="a transaction may change one row several times (insert then update, update "
                    "then delete, delete then insert, a key change then an update of the new key)")
    ap.add_argument("--nested", action="store_true",
                    help="files land at random in folders below the landing (2026/12/<run>/, dt=2026-12-<run>/) or in it")
    ap.add_argument("--two-tables", action="store_true",
                    help="every source carries a second table, dbo.hist2, in the same landing (change tables: "
                    "files of its own capture instance); a third of the transactions change both")
    ap.add_argument("--add-column", action="store_true",
                    help="the tables gain a column, note, at the history's middle transaction; CES events and "
                    "Qlik's metadata version 2 and Debezium events have it only from there (schema evolution), "
                    "change-table exports from the start")
    ap.add_argument("--warm", action="store_true",
                    help="the runs as one `sqlcdc run --every ... --runs N`: each next run on Enter once its "
                         "files landed, in the Spark of the first")
    ap.add_argument("--rescale", action="store_true",
                    help="with --add-column: the same ALTER makes price decimal(12,4); Debezium events carry it "
                    "(schema scale 4) from there, the older ones stay at scale 2")
    ap.add_argument("--only", default=",".join([*SOURCES, "handoff"]),
                    help="comma-separated producers to land and check (default: all, and the hand-off)")
    args = ap.parse_args()
    if args.odd_names:
        COL.update(ODD_NAMES)
    COMPOSITE["on"] = args.composite_key
    if args.wide_types:
        COLUMNS.extend(WIDE_TYPES)
    if args.exact_types:
        COLUMNS.extend(EXACT_TYPES)
    DBZ_SCHEMA["on"] = args.debezium_schema
    DECIMAL_NUMBERS["on"] = args.decimal_numbers
    CT_EXPORT["as"] = args.ct_export
    SNAPSHOT["on"] = args.snapshot
    CT_EXPORT["sep"] = "\t" if args.csv_sep == "tab" else args.csv_sep
    CES_AVRO["on"] = args.ces_avro
    if args.nasty_text:
        NAMES.extend(NASTY_NAMES)
    if args.two_tables:
        TABLES.append("hist2")
    if args.add_column:
        ADDED["on"] = True
        COLUMNS.append("note")
    if args.rescale:
        others = set(args.only.split(",")) - {"debezium", "debezium_tx"}
        if not (args.add_column and args.debezium_schema) or others:
            ap.error("--rescale needs --add-column and --debezium-schema, and only debezium,debezium_tx (the other "
                     "sources name price's type in their config, or cannot tell an event's scale)")
        RESCALED["on"] = True
    only = set(args.only.split(","))
    base = args.folder.resolve()
    shutil.rmtree(base, ignore_errors=True)
    config = write_config(base, only)
    rng = random.Random(args.seed)
    plans, histories = {}, {}
    for producer in SOURCES:
        histories[producer] = tables_history(rng, args.keys, args.changes, args.repeat_rows)
        if ADDED["on"]:
            histories[producer] = with_added_column(histories[producer])
        if producer == "cdc_ct" and len(TABLES) > 1:  # an export file holds one capture instance
            plans[producer] = [deliveries(records(producer, [c for c in histories[producer] if c.table == t], rng),
                                          args.runs, rng) for t in TABLES]
            continue
        lines = records(producer, histories[producer], rng)
        plan = deliveries(lines, args.runs, rng)
        for t, v in ((t, v) for t in TABLES for v in qlik_versions()) if producer == "qlik" else ():
            # each metadata message lands in any run, before or after its data
            run = plan[rng.randrange(args.runs) if args.qlik_metadata == "any" else 0]
            run[rng.randrange(len(run))].insert(0, qlik_metadata(t, v))
        plans[producer] = plan
    histories["handoff"] = history(rng, args.keys, args.changes, args.repeat_rows)
    if ADDED["on"]:
        histories["handoff"] = with_added_column(histories["handoff"])
    ct_lines, dbz_lines = handoff_records(histories["handoff"], rng)
    ct, dbz, ho_table, ct_pattern, dbz_pattern = HANDOFF
    landings = {**{p: [(s, pat)] for p, (s, _, pat) in SOURCES.items()}, "handoff": [(ct, ct_pattern), (dbz, dbz_pattern)]}
    placed = {"handoff"}  # producers whose plans are one per place (a file name pattern)
    if len(TABLES) > 1:
        s, _, pat = SOURCES["cdc_ct"]
        landings["cdc_ct"] = [(s, pat.replace("_hist_", f"_{t}_")) for t in TABLES]
        placed.add("cdc_ct")
    plans["handoff"] = [deliveries(ct_lines, args.runs, rng), deliveries(dbz_lines, args.runs, rng)]
    watch = None
    for r in range(args.runs):
        for producer, places in ((p, x) for p, x in landings.items() if p in only):
            sent = plans[producer] if producer in placed else [plans[producer]]
            for (source, pattern), plan in zip(places, sent):
                for f, part in enumerate(plan[r]):
                    folder = base / "landing" / source
                    if args.nested:  # as date-partitioned landings are laid out (Auto Loader reads them all)
                        folder = folder / rng.choice(["", f"2026/12/{r + 1:02d}", f"dt=2026-12-{r + 1:02d}"])
                        folder.mkdir(parents=True, exist_ok=True)
                    if part and CES_AVRO["on"] and source == SOURCES["ces"][0] and rng.random() < 0.5:
                        land_avro(folder, pattern.format(r=r, f=f).replace(".json", ".avro"), [json.loads(x) for x in part])
                    elif part and CT_EXPORT["as"] == "parquet" and source in (SOURCES["cdc_ct"][0], ct):
                        write_ct_parquet(folder / pattern.format(r=r, f=f).replace(".jsonl", ".parquet"), part)
                    elif part:
                        name = pattern.format(r=r, f=f)
                        if source in (SOURCES["cdc_ct"][0], ct):  # a change-table export's suffix says its format
                            name = name.replace(".jsonl", "." + CT_EXPORT["as"].replace("json", "jsonl"))
                        (folder / name).write_bytes(file_text(source, part, rng).encode())
        if args.warm:  # the runs of one `sqlcdc run --every`: each next on Enter, in the first's Spark
            watch = watch or WatchRuns(config, base / "warehouse", args.runs)
            code, out = watch.run()
        else:
            res = subprocess.run([SQLCDC, "run", "--config", str(config), "--warehouse", str(base / "warehouse")],
                                 capture_output=True, text=True, timeout=3600)
            code, out = res.returncode, res.stdout[-4000:] + res.stderr[-4000:]
        print(f"run {r + 1}/{args.runs}: exit {code}")
        if code != 0:
            print(out[-8000:])
            if watch:
                watch.stop()
            return 1
    if watch:
        watch.finish()  # it stops after its last run
    sys.path.insert(0, str(TESTS.parent / "src"))
    from sqlcdc.runtime import local_spark

    spark = local_spark(app_name="histories")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    wrong = 0
    checks = [(p, table_name(p, t), t) for p in SOURCES for t in TABLES]
    for producer, table, source_table in [*checks, ("handoff", ho_table, "hist")]:
        if producer not in only:
            continue
        label = producer if table in (SOURCES.get(producer, ("", ""))[1], ho_table) else f"{producer} {source_table}"
        want = expected([c for c in histories[producer] if c.table == source_table])
        got = gold(spark, base / "warehouse" / "tables", producer, table)
        for what, w, g in (("SCD1", want[0], got[0]), ("SCD2", want[1], got[1])):
            if w != g:
                wrong += 1
                print(f"{label} {what}: differs from the reference")
                if isinstance(w, dict):
                    for k in sorted(set(w) | set(g)):
                        if w.get(k) != g.get(k):
                            print(f"  key {k}: expected {w.get(k)}\n  {' ' * len(str(k))}      got      {g.get(k)}")
                else:
                    print(f"  missing: {[x for x in w if x not in g]}\n  extra:   {[x for x in g if x not in w]}")
            else:
                size = f"{sum(map(len, g.values()))} versions of {len(g)} keys" if isinstance(g, dict) else f"{len(g)} rows"
                print(f"{label} {what}: {size}, equal to the reference")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
