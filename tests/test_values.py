"""Debezium's precise decimals (Kafka Connect ``Decimal``: the unscaled integer as big-endian two's
complement bytes, base64) read exactly, against Python's own ``int.to_bytes`` and ``Decimal``.

One DataFrame, one ``collect()``: widths 1..17 bytes (17 is beyond any decimal(38)), minimal and
sign-padded encodings, both signs, the edges of each byte width, scales 0 to 38.
"""

from __future__ import annotations

import base64
import random
from decimal import Context, Decimal

from pyspark.sql import functions as F

from sqlcdc.values import ColumnSpec, typed_value

TYPES = ["decimal(10,2)", "decimal(38,0)", "decimal(38,10)", "decimal(38,38)", "decimal(5,0)", "decimal(18,4)"]


def _b64(unscaled: int, pad: int = 0) -> str:
    width = (unscaled.bit_length() + 8) // 8 + pad  # minimal two's complement width, plus sign bytes
    return base64.b64encode(unscaled.to_bytes(width, "big", signed=True)).decode()


def _expected(unscaled: int, spark_type: str) -> Decimal | None:
    p, s = (int(x) for x in spark_type[len("decimal("):-1].split(","))
    return Decimal(unscaled).scaleb(-s, Context(prec=60)) if abs(unscaled) < 10 ** p else None


def _unscaled_values() -> list[int]:
    rng = random.Random(7)
    values = {0, 1, -1, 127, 128, -128, -129, 255, 256, 10**38 - 1, -(10**38 - 1), 10**38, -(10**38), 2**127 - 1,
              -(2**127), 2**130, -(2**130), 99999, -99999, 100000}
    for bits in range(1, 136, 3):
        values.add(rng.getrandbits(bits))
        values.add(-rng.getrandbits(bits))
    for width in range(1, 18):  # the edges of each byte width
        edge = 2 ** (8 * width - 1)
        values.update({edge - 1, -edge, edge, -edge - 1})
    return sorted(values)


def test_base64_decimals_read_exactly_or_null_when_out_of_range(spark):
    cases = dict(enumerate((u, pad, t) for u in _unscaled_values() for pad in (0, 1) for t in TYPES))
    rows = [(i, _b64(u, pad), t) for i, (u, pad, t) in cases.items()]
    df = spark.createDataFrame(rows, "i int, raw string, t string")
    typed = [F.when(F.col("t") == t, typed_value(F.col("raw"), ColumnSpec("v", t, encoding="base64_decimal")).cast("string"))
             for t in TYPES]
    got = {r.i: r.v for r in df.select("i", F.coalesce(*typed).alias("v")).collect()}
    wrong = []
    for i, (u, pad, t) in cases.items():
        want = _expected(u, t)
        if (Decimal(got[i]) if got[i] is not None else None) != want:
            wrong.append(f"{u} (pad {pad}) as {t}: got {got[i]}, expected {want}")
    assert not wrong, f"{len(wrong)} of {len(cases)} wrong, e.g. " + "; ".join(wrong[:5])


def test_a_decimal_decode_reads_its_byte_decode_a_few_times_not_dozens(spark):
    """Each reuse of a Column writes its whole tree again. The general path binds its significant
    bytes once (frames.let); the short path (up to 7 bytes, no lambda) reads the byte decode six
    times (sign, width twice, value, span, the general path), so a table's plan grows by a few byte
    decodes per decimal column, not dozens. Neither folds over the bytes (interpreted row by row)."""
    for t in ("decimal(10,2)", "decimal(38,0)"):
        expr = str(typed_value(F.col("raw"), ColumnSpec("v", t, encoding="base64_decimal")))
        assert expr.count("try_to_binary") <= 6, expr
        assert expr.count("aggregate") == 0 and expr.count("transform") == 1, expr
        assert "conv(hex(try_to_binary" in expr, expr  # the short path is there


def test_datetimeoffset_text_needs_its_offset(spark):
    """A datetimeoffset (CES/change-table text, Debezium ZonedTimestamp) is an instant only with its
    offset: without one Spark would read it in the session's time zone (another instant on a cluster
    set elsewhere), so it is not a value; with one it lands as that instant whatever the spelling."""
    import datetime as dt

    spec = ColumnSpec("v", "timestamp", encoding="text")
    utc = dt.timezone.utc
    cases = {
        "2025-03-14 16:45:01.1234567 +01:00": dt.datetime(2025, 3, 14, 15, 45, 1, 123456, utc),  # CES
        "2019-06-05T12:11:08.47+02:00": dt.datetime(2019, 6, 5, 10, 11, 8, 470000, utc),  # Debezium
        "2019-06-05T10:11:08.47Z": dt.datetime(2019, 6, 5, 10, 11, 8, 470000, utc),
        "2025-03-14T16:45:01-05:30": dt.datetime(2025, 3, 14, 22, 15, 1, 0, utc),
        "2025-03-14 16:45:01": None, "2025-03-14T16:45": None, "2025-03-14": None, "0001-01-01": None,
        "2025": None, "16:45:01+01:00": None,
        # SQL Server's offsets run -14:00..+14:00 (Spark would read up to 18 hours)
        "2025-03-14T16:45:01+14:00": dt.datetime(2025, 3, 14, 2, 45, 1, 0, utc),
        "2025-03-14T16:45:01-1400": dt.datetime(2025, 3, 15, 6, 45, 1, 0, utc),
        "2025-03-14T16:45:01+13:59": dt.datetime(2025, 3, 14, 2, 46, 1, 0, utc),
        "2025-03-14T16:45:01+14:01": None, "2025-03-14T16:45:01-15:00": None, "2025-03-14T16:45:01+10:75": None,
    }
    df = spark.createDataFrame([(k,) for k in cases], "raw string")
    # as UTC text: a Python datetime of a TIMESTAMP is in local time
    got = {r.raw: r.v for r in df.select(
        "raw", F.date_format(F.to_utc_timestamp(typed_value(F.col("raw"), spec), F.current_timezone()),
                             "yyyy-MM-dd HH:mm:ss.SSSSSS").alias("v")).collect()}
    want = {k: v.strftime("%Y-%m-%d %H:%M:%S.%f") if v else None for k, v in cases.items()}
    assert got == want


def test_a_time_of_day_has_one_spelling_from_every_producer(spark):
    """16:45:01.1234567 of a time(7) column, as each producer writes it, reaches silver as the same
    text: Debezium's Time (ms), MicroTime, NanoTime, and SQL Server's text (CES, change tables, Qlik's
    TIME) with 7, 3 or no fractional digits -- the 7th digit floored, as datetime2(7)'s is."""
    from sqlcdc.formats import _qlik_types, _sqlserver, debezium

    def dbz(logical: str) -> ColumnSpec:
        return debezium.spec_from_connect_field({"field": "t", "type": "int64", "name": f"io.debezium.time.{logical}"})

    cases = [  # (spec, raw, want)
        (dbz("NanoTime"), "60301123456700", "16:45:01.123456"),
        (dbz("MicroTime"), "60301123456", "16:45:01.123456"),
        (dbz("Time"), "60301123", "16:45:01.123000"),
        (_sqlserver.spec_for_sql_type("t", "time(7)"), "16:45:01.1234567", "16:45:01.123456"),
        (_sqlserver.spec_for_sql_type("t", "time(3)"), "16:45:01.123", "16:45:01.123000"),
        (_sqlserver.spec_for_sql_type("t", "time(0)"), "16:45:01", "16:45:01.000000"),
        (_sqlserver.spec_for_sql_type("t", "time"), "16:45", "16:45:00.000000"),
        (_qlik_types.spec_for("t", "TIME"), "16:45:01.123456", "16:45:01.123456"),
        (_sqlserver.spec_for_sql_type("t", "time(7)"), "24:00:00", None),
    ]
    df = spark.createDataFrame([(i, raw) for i, (_, raw, _) in enumerate(cases)], "i int, raw string")
    (row,) = df.groupBy().agg(*[F.max(F.when(F.col("i") == i, typed_value(F.col("raw"), spec))).alias(f"v{i}")
                               for i, (spec, _, _) in enumerate(cases)]).collect()
    assert list(row) == [want for _, _, want in cases]


#: Decimal texts at the edges of the exactness check: an exponent that moves the last nonzero digit
#: past the scale (until 2026-12-05 ``1e-400`` read as 0.00 and ``1.0...01e1`` as 10.00: a cast at
#: scale 30 rounded them before the comparison), trailing zeros either side of the point, zero.
DECIMAL_TEXTS = ["1e-400", "1.00000000000000000000000000000000001e1", "1200e-2", "1200E-4", "0e-9999", "-0.000e5",
                 "12.3400e0", "1.2345e2", "1.23456e2", ".5e1", "5.E0", "+1E+2", "9.999e2", "1e8", "1e7", "-1.5e-2",
                 "99999999.99", "99999999.995", "10.005", "10.0050", "-0", "007.10", "1e-2", "1e-3", "123e-3"]


def _decimal_texts() -> list[str]:
    rng = random.Random(11)
    out = list(DECIMAL_TEXTS)
    for _ in range(300):
        digits = "".join(rng.choice("0000123456789") for _ in range(rng.randint(1, 40)))
        point = rng.randint(0, len(digits))
        mantissa = digits[:point] + ("." if rng.random() < 0.7 else "") + digits[point:]
        if mantissa == ".":
            mantissa = "0"
        sign = rng.choice(["", "-", "+"])
        out.append(sign + mantissa + (f"{rng.choice('eE')}{rng.randint(-45, 45)}" if rng.random() < 0.6 else ""))
    return out


def test_decimal_text_reads_exactly_or_not_at_all(spark):
    """A number's text types as decimal(p,s) exactly when Python's ``Decimal`` of it has no nonzero
    digit beyond the scale and fits the precision; anything else is NULL (the decoders quarantine it
    as "would be rounded" or "out of range"), never a rounded value."""
    texts = _decimal_texts()
    cases = dict(enumerate((x, t) for x in texts for t in TYPES))
    df = spark.createDataFrame([(i, x, t) for i, (x, t) in cases.items()], "i int, raw string, t string")
    typed = [F.when(F.col("t") == t, typed_value(F.col("raw"), ColumnSpec("v", t, encoding="text")).cast("string"))
             for t in TYPES]
    got = {r.i: r.v for r in df.select("i", F.coalesce(*typed).alias("v")).collect()}
    wrong = []
    for i, (x, t) in cases.items():
        p, s = (int(n) for n in t[len("decimal("):-1].split(","))
        exact = Decimal(x)
        q = exact.quantize(Decimal(1).scaleb(-s), context=Context(prec=400))
        want = q if q == exact and abs(q) < 10 ** (p - s) else None
        if (Decimal(got[i]) if got[i] is not None else None) != want:
            wrong.append(f"{x} as {t}: got {got[i]}, expected {want}")
    assert not wrong, f"{len(wrong)} of {len(cases)} wrong, e.g. " + "; ".join(wrong[:5])
