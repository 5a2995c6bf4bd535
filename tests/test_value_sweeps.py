"""Sweeps of values through every producer's decode, each compared with what Python reads.

A decimal column written as a JSON *number* reads with every digit, in every producer, or is
quarantined -- never rounded.

Each producer's good record of ``test_hostile_records`` carries, in its decimal column, one JSON
number drawn from a deterministic sweep: 1 to 40 digits, a point anywhere, trailing zeros, an
exponent, a sign. Python's ``Decimal`` says what the number is; the record must be in silver with
exactly that value when the column's type holds it (its scale without rounding, its precision),
and in quarantine otherwise. Two parsers Spark offers change such numbers on the way (``from_json``
into text through a double, a VARIANT beyond ``decimal(38)``): found this way, 2026-12-06,
``1234567890.1234567891`` in Debezium's ``decimal(20,10)`` read as ``1234567890.1234567000``.

A text column reaches silver as ``json.loads`` reads it, however the writer escaped it: short
escapes, ``\\uXXXX`` in either case, surrogate pairs for astral characters, ``\\/``, control
characters, NUL, U+2028 and a byte order mark inside the text. CES nests its images as
JSON text inside JSON text inside the event, so there an escape is escaped twice more.
"""

from __future__ import annotations

import json
import random
from decimal import Decimal, localcontext

import pytest

import test_hostile_records as h
from test_hostile_flat import SOURCE as FLAT_SOURCE, TABLE as FLAT_TABLE, flat
from sqlcdc.formats import cdc_ct

#: How many numbers each producer's decode takes (one decode of them all).
N = 160


def numbers(seed: int, n: int = N) -> list[str]:
    """JSON number texts: short and long (past a double's 15-17 digits, past 38), scales around a
    column's, trailing zeros (exact though long), exponents that move the point either way."""
    rnd = random.Random(seed)
    out = ["0", "-0", "0.0", "1.25e1", "1e-400", "12345678.12", "12345678.1200000000", "12345678.1200000001",
           "1234567890.1234567891", "9999999999.9999999999", "0.30000000000000004", "1" + "0" * 40]
    while len(out) < n:
        whole = "".join(rnd.choice("0123456789") for _ in range(rnd.choice((0, 1, 2, 5, 8, 9, 10, 11, 19, 30))))
        frac = "".join(rnd.choice("0123456789") for _ in range(rnd.choice((0, 1, 2, 3, 9, 10, 11, 17, 25))))
        frac += "0" * rnd.choice((0, 0, 3, 12))
        text = (whole.lstrip("0") or "0") + ("." + frac if frac else "")
        if rnd.random() < 0.2:
            text += rnd.choice(("e", "E")) + rnd.choice(("", "+", "-")) + str(rnd.randint(0, 12))
        out.append(("-" if rnd.random() < 0.3 else "") + text)
    return out


def fits(text: str, precision: int, scale: int) -> Decimal | None:
    """The value of ``text`` if ``decimal(precision, scale)`` holds it without rounding, else None."""
    with localcontext() as ctx:
        ctx.prec = 1000
        d = Decimal(text)
        at_scale = d.quantize(Decimal(1).scaleb(-scale)) if d.adjusted() < 500 else None
        if at_scale is None or at_scale != d or abs(d) >= Decimal(10) ** (precision - scale):
            return None
        return at_scale


def _raw(doc: dict, placeholder: str, text: str) -> str:
    return h.with_raw(doc, placeholder, text)


#: producer -> (record of id n with the number, decoder module, source, table, columns, file, column, p, s)
PRODUCERS = {
    "debezium": (lambda n, t: _raw(h.dbz_doc(n, rate="@R@"), "@R@", t), h.debezium, h.DBZ_SOURCE, h.DBZ_TABLE,
                 lambda: h.DBZ_COLUMNS, "file:/landing/items.json", "rate", 20, 10),
    "debezium_flat": (lambda n, t: _raw(flat(n, rate="@R@"), "@R@", t), h.debezium, FLAT_SOURCE, FLAT_TABLE,
                      lambda: h.DBZ_COLUMNS, "file:/landing/dbo.items/part-0.json", "rate", 20, 10),
    "cdc_ct": (lambda n, t: _raw(h.ct_row(n, amount="@A@"), "@A@", t), h.cdc_ct, h.CT_SOURCE, h.CT_TABLE,
               lambda: cdc_ct.columns_for(h.CT_TABLE, h.CT_SOURCE), h.CT_FILE, "amount", 10, 2),
    "ces": (h.ces_number, h.ces, h.CES_SOURCE, h.CES_TABLE, lambda: h.CES_COLUMNS, "file:/landing/ces/part-0.json",
            "price", 10, 2),
    "qlik": (lambda n, t: _raw(h.qlik_doc(n, BAL="@B@"), "@B@", t), h.qlik, h.QLIK_SOURCE, h.QLIK_TABLE,
             lambda: h.QLIK_COLUMNS, "file:/landing/t/part-0.jsonl", "BAL", 10, 2),
}


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_a_decimal_json_number_reads_with_every_digit_or_is_quarantined(spark, producer):
    record, decoder, source, table, columns, file, column, precision, scale = PRODUCERS[producer]
    texts = numbers(seed=sorted(PRODUCERS).index(producer))
    lines = {record(2000 + i, t): t for i, t in enumerate(texts)}
    landed = ([json.dumps(h.QLIK_METADATA)] if producer == "qlik" else []) + list(lines)
    bronze = h.bronze_of(spark, landed, file).cache()
    changes, quarantines = h.as_the_pipeline_decodes(bronze, decoder, source, table, columns())
    out = h._outcomes(bronze, changes, quarantines)

    wrong = []
    for line, text in lines.items():
        expected, places = fits(text, precision, scale), out.get(line, [])
        got = [(p, getattr(v, "after", None) and v.after[column] if p == "silver" else v) for p, v in places]
        if expected is None and not (len(got) == 1 and got[0][0] == "quarantine"):
            wrong.append((text, "expected quarantine", got))
        elif expected is not None and got != [("silver", expected)]:
            wrong.append((text, f"expected silver {expected}", got))
    assert not wrong, f"{len(wrong)} of {len(lines)} numbers misread:\n" + "\n".join(map(str, wrong[:20]))
    assert sum(fits(t, precision, scale) is not None for t in texts) >= 20  # the sweep reaches silver too


#: Characters a text value may hold, each written literally or escaped by :func:`written`.
ALPHABET = ["a", "Z", "0", " ", '"', "\\", "/", "\x00", "\x01", "\b", "\t", "\n", "\f", "\r", "\x1f", "\x7f", "é", "ß",
            "中", "\u2028", "\u2029", "\ufeff", "\ufffd", "\u0301", "😀", "\U0010ffff", "\U00010000"]
# U+FFFD too: until 2026-12-06 a text holding it was quarantined (a value Spark renders into JSON holds
# it where the source's bytes were not UTF-8); now those bytes are refused where bronze is rendered.


def written(text: str, rnd: random.Random) -> str:
    """``text`` as a JSON string literal, each character written one of the ways JSON allows."""
    out = []
    for ch in text:
        short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
        units = [ch] if ord(ch) < 0x10000 else [chr(0xD800 + ((ord(ch) - 0x10000) >> 10)), chr(0xDC00 + ((ord(ch) - 0x10000) & 0x3FF))]
        escaped = "".join(("\\u%04x" if rnd.random() < 0.5 else "\\u%04X") % ord(u) for u in units)
        ways = [escaped] + ([short[ch]] if ch in short else []) + ([ch] if ch >= " " and ch not in '"\\' else [])
        out.append(rnd.choice(ways))
    return '"' + "".join(out) + '"'


def texts(seed: int, n: int = N) -> list[tuple[str, str]]:
    """(value, its JSON literal): the empty text, each character alone, then random mixes."""
    rnd = random.Random(seed)
    values = ["", *ALPHABET] + ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(2, 14))) for _ in range(n)]
    return [(v, written(v, rnd)) for v in values]


def _ces_text(n: int, literal: str) -> str:
    """A CES event whose ``current`` holds ``name`` as the JSON literal ``literal`` (inside the image's
    text, inside ``data``'s text)."""
    doc = h.ces_doc(n, name="@T@")
    data = json.loads(doc["data"])
    data["eventrow"]["current"] = data["eventrow"]["current"].replace('"@T@"', literal)
    return json.dumps({**doc, "data": json.dumps(data)})


#: producer -> (record of id n with the literal, source, table, columns, file, column)
TEXT_PRODUCERS = {
    "debezium": (lambda n, t: _raw(h.dbz_doc(n, name="@T@"), "@T@", t), h.DBZ_SOURCE, h.DBZ_TABLE,
                 lambda: h.DBZ_COLUMNS, "file:/landing/items.json", "name"),
    "debezium_flat": (lambda n, t: _raw(flat(n, name="@T@"), "@T@", t), FLAT_SOURCE, FLAT_TABLE,
                      lambda: h.DBZ_COLUMNS, "file:/landing/dbo.items/part-0.json", "name"),
    "cdc_ct": (lambda n, t: _raw(h.ct_row(n, customer="@T@"), "@T@", t), h.CT_SOURCE, h.CT_TABLE,
               lambda: cdc_ct.columns_for(h.CT_TABLE, h.CT_SOURCE), h.CT_FILE, "customer"),
    "ces": (_ces_text, h.CES_SOURCE, h.CES_TABLE, lambda: h.CES_COLUMNS, "file:/landing/ces/part-0.json", "name"),
    "qlik": (lambda n, t: _raw(h.qlik_doc(n, NAME="@T@"), "@T@", t), h.QLIK_SOURCE, h.QLIK_TABLE,
             lambda: h.QLIK_COLUMNS, "file:/landing/t/part-0.jsonl", "NAME"),
}


@pytest.mark.parametrize("producer", sorted(TEXT_PRODUCERS))
def test_a_text_reaches_silver_as_json_reads_it_however_it_is_escaped(spark, producer):
    record, source, table, columns, file, column = TEXT_PRODUCERS[producer]
    sweep = texts(seed=10 + sorted(TEXT_PRODUCERS).index(producer))
    lines = {record(3000 + i, literal): value for i, (value, literal) in enumerate(sweep)}
    assert all(json.loads(json.loads(json.loads(x)["data"])["eventrow"]["current"])["name"] == v if producer == "ces"
               else True for x, v in lines.items())  # the CES nesting holds what it should
    landed = ([json.dumps(h.QLIK_METADATA)] if producer == "qlik" else []) + list(lines)
    bronze = h.bronze_of(spark, landed, file).cache()
    changes, quarantines = h.as_the_pipeline_decodes(bronze, None, source, table, columns())
    out = h._outcomes(bronze, changes, quarantines)
    wrong = [(repr(v), [(p, r.after[column] if p == "silver" else r) for p, r in out.get(x, [])])
             for x, v in lines.items()
             if [(p, r.after[column] if p == "silver" else None) for p, r in out.get(x, [])] != [("silver", v)]]
    assert not wrong, f"{len(wrong)} of {len(lines)} texts misread:\n" + "\n".join(map(str, wrong[:20]))
