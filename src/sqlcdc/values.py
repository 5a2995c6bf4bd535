"""Raw value text -> typed Spark column, the one place where source values get their types.

Every decoder first gets each column's value as *text* (a JSON token rendered as a string, a CSV
field, a CES string) and a :class:`ColumnSpec` saying what it is: the Spark type it becomes and
how the text encodes it. :func:`typed_value` builds the Spark expression; :func:`value_error`
builds the matching error message (NULL when the value converted or was NULL to begin with), so a
decoder can quarantine a row whose value does not parse instead of storing a silent NULL.

Encodings (``ColumnSpec.encoding``):

==================  ========================================================================
``text``            the text is the value: ``try_cast`` to the Spark type
``base64``          base64 bytes (Kafka Connect ``bytes``)
``hex``             hex bytes, optional ``0x`` prefix (SQL Server binary/varbinary as text)
``base64_decimal``  Kafka Connect ``Decimal``: base64 big-endian two's-complement unscaled value
``epoch_day``       days since 1970-01-01 (``io.debezium.time.Date``)
``epoch_millis``    ms since epoch, no zone (``io.debezium.time.Timestamp``)
``epoch_micros``    µs since epoch (``MicroTimestamp``)
``epoch_nanos``     ns since epoch (``NanoTimestamp``)
``millis_of_day``   ms since midnight (``io.debezium.time.Time``) -> ``HH:mm:ss.SSSSSS`` text
``micros_of_day``   µs since midnight (``MicroTime``)
``nanos_of_day``    ns since midnight (``NanoTime``)
==================  ========================================================================

Times of day become ``string`` ``HH:mm:ss.SSSSSS`` from every producer (no TIME type in Delta 4.4).

Data never raises (Spark 4 runs with ANSI mode on: every conversion here is a ``try_``-style
expression, range-checked before any arithmetic that could overflow), and nothing is silently
changed. A value gets NULL -- and :func:`value_error` a reason naming the column and the
problem -- when it is outside SQL Server's domain for its type:

- decimal: more digits than the precision, or more digits after the point than the scale
  (``10.005`` into decimal(10,2) is refused, never rounded to 10.01; ``10.500`` is fine);
- date, datetime2, datetimeoffset (any encoding): outside year 1..9999;
- times of day: outside 0 .. 24:00 (exclusive);
- float/real: NaN and ±Infinity (an overflow such as ``1e400`` included);
- unsigned source types (CES ``tinyint``, Qlik ``UINT1..8``): negative or above their maximum;

Text is taken as it is, U+FFFD included; bytes that are not UTF-8 never reach a value (refused
before decoding, :func:`sqlcdc.formats.base.rejected_before_decoding`, also in rendered bronze).

Example::

    spec = ColumnSpec("price", "decimal(10,2)", "base64_decimal")
    df.select(typed_value(F.col("raw")["price"], spec).alias("price"))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc import frames, unscaled

ENCODINGS = frozenset(
    {
        "text",
        "base64",
        "hex",
        "base64_decimal",
        "epoch_day",
        "epoch_millis",
        "epoch_micros",
        "epoch_nanos",
        "millis_of_day",
        "micros_of_day",
        "nanos_of_day",
    }
)

_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"


@dataclass(frozen=True)
class ColumnSpec:
    """One source column: its name, the Spark SQL type it becomes, how its text encodes it.

    ``lob`` marks large-object columns (``varchar(max)`` etc.) whose value some producers omit
    when unchanged. ``ordinal`` is the producer's 1-based column position, where it has one.
    ``json_value``: the producer writes the value as a JSON object or array (a Debezium struct such
    as a geometry), kept as its JSON text; in any other string column such a value is refused.
    """

    name: str
    spark_type: str
    encoding: str = "text"
    lob: bool = False
    ordinal: int | None = None
    source_type: str | None = None
    json_value: bool = False

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ValueError(
                f"column {self.name!r}: unknown encoding {self.encoding!r}; expected one of {sorted(ENCODINGS)}"
            )


# SQL Server's domains (the checks every producer's values pass; see :func:`typed_value`).
_EPOCH_DAY_MIN, _EPOCH_DAY_MAX = -719162, 2932896  # 0001-01-01 .. 9999-12-31
_EPOCH_MS_MIN, _EPOCH_MS_MAX = -62135596800000, 253402300799999  # 0001-01-01 00:00 .. 9999-12-31 23:59:59.999
_UNIT_PER_MS = {"MILLISECOND": 1, "MICROSECOND": 1000, "NANOSECOND": 1000000}
_DAY_MS = 86400000
_DATE_RANGE = ("DATE'0001-01-01'", "DATE'9999-12-31'")
_TS_RANGE = {
    "timestamp_ntz": ("TIMESTAMP_NTZ'0001-01-01 00:00:00'", "TIMESTAMP_NTZ'9999-12-31 23:59:59.999999'"),
    "timestamp": ("TIMESTAMP'0001-01-01 00:00:00+00:00'", "TIMESTAMP'9999-12-31 23:59:59.999999+00:00'"),
}
_OUT_OF_RANGE_DATE = "outside SQL Server's range (year 1..9999)"
# Spark's cast reads much more than SQL Server writes, and drops what it cannot keep: "2024" is
# 2024-01-01, a time of day cast to a date is cut off, and a UTC offset cast to timestamp_ntz is
# ignored (13:14+05:00 becomes 13:14). Date and time text must therefore have SQL Server's shape
# first: a whole date (years of more than 4 digits reach the range check), a time of day only
# where the type keeps it (a date allows midnight), an offset only for ``timestamp``.
_YMD = r"^\s*[+-]?[0-9]{4,}-[0-9]{1,2}-[0-9]{1,2}"
_CLOCK = r"[ T][0-9]{1,2}:[0-9]{2}(:[0-9]{2}(\.[0-9]*)?)?"
_ZONE = r"\s*(Z|[+-](0[0-9]|1[0-3])(:?[0-5][0-9])?|[+-]14(:?00)?|UTC|GMT)"  # SQL Server: -14:00..+14:00
_TEMPORAL_TEXT = {
    "date": (_YMD + r"([ T]0{1,2}:00(:00(\.0*)?)?)?\s*$",
             "not a whole date yyyy-mm-dd (a partial date, a time of day or a UTC offset would be lost)"),
    "timestamp_ntz": (_YMD + f"({_CLOCK})?" + r"\s*$",
                      "not a date and time without offset, yyyy-mm-dd hh:mm:ss[.fffffff] (a partial date would "
                      "become January 1, a UTC offset would be dropped)"),
    # datetimeoffset: Spark would read one without offset in the session's zone; producers write it
    "timestamp": (_YMD + _CLOCK + _ZONE + r"\s*$",
                  "not a date and time with its UTC offset, yyyy-mm-dd hh:mm:ss[.fffffff] +hh:mm (without the "
                  "offset the instant is not known; a partial date would become January 1; offsets run -14:00..+14:00)"),
}
# a commit time: producers write one without an offset too (Qlik's header timestamp, in UTC)
_COMMIT_TIME_TEXT = _YMD + f"({_CLOCK}({_ZONE})?)?" + r"\s*$"
#: SQL Server types kept as text in silver (Delta has no TIME or GUID type) whose text has a shape:
#: other text there is not a value of the type, and is quarantined like an unreadable number.
_STRING_SHAPE = {
    "time": (r"^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,7})?)?$",
             "not a time of day hh:mm:ss[.fffffff] within 00:00:00..23:59:59.9999999"),
    "uniqueidentifier": (r"^\{?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\}?$",
                         "not a uniqueidentifier (8-4-4-4-12 hex digits)"),
}
#: Unsigned source types (CES ``tinyint``, Qlik ``UINT*``) land in a wider signed Spark type:
#: their range is checked, so -1 or 256 is a quarantine, not a value.
_UNSIGNED_MAX = {"tinyint": 255, "uint1": 255, "uint2": 65535, "uint4": 4294967295, "uint8": 18446744073709551615}
_DECIMAL_RE = re.compile(r"^\s*(?:decimal|numeric|dec)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$", re.I)
_INTEGRAL_TEXT = r"^\s*[+-]?[0-9]{1,38}\s*$"
_PLAIN_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$"
_SCI_NUMBER = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]{1,4}$"


def _dec(n: int) -> Column:
    """An integer literal of any size (``F.lit`` stops at 64 bits)."""
    return F.expr(f"CAST('{n}' AS DECIMAL(38,0))")


COMMIT_TIME_RANGE = "0001-01-02..9999-12-30"  #: what :func:`commit_time_in_range` keeps


def commit_time_in_range(ts: Column) -> Column:
    """``ts`` (a timestamp) when within :data:`COMMIT_TIME_RANGE`, else NULL: a commit time outside
    SQL Server's range (year 1..9999) is not a SQL Server time (and Python clients cannot read it
    back). Decoders quarantine a change whose commit time was given but is NULL here.

    The first and last day of that range are left out too: ``collect()`` turns a timestamp into a
    Python datetime in local time, and ``datetime.fromtimestamp`` raises "year 0 is out of range"
    for any instant of 0001-01-01 (it looks a day either side), so one change committed "then" (a
    Qlik header, found by fuzzing) stopped every Python reader of silver. No commit was then."""
    return F.when(ts.between(F.expr("TIMESTAMP'0001-01-02 00:00:00+00:00'"),
                             F.expr("TIMESTAMP'9999-12-30 23:59:59.999999+00:00'")), ts)


def time_text(text: Column) -> Column:
    """``text`` when it has the shape of a date and time (``yyyy-mm-dd[ hh:mm:ss[.f]][ +hh:mm]``), else
    NULL: Spark's cast would read "2024" as its January 1."""
    return F.when(text.rlike(_COMMIT_TIME_TEXT), text)


def commit_time(text: Column) -> Column:
    """A producer's commit-time text -> timestamp; NULL when it is not a date and time
    (:func:`time_text`), does not read, or is outside :data:`COMMIT_TIME_RANGE`."""
    return commit_time_in_range(time_text(text).try_cast("timestamp"))


def _integral(raw: Column) -> Column:
    """Integer text -> decimal(38,0), exactly; NULL for anything else (``1.5``, ``1e3``, 39+ digits)."""
    return F.when(raw.rlike(_INTEGRAL_TEXT), F.trim(raw).try_cast("decimal(38,0)"))


def _since_epoch(raw: Column, unit: str) -> Column:
    """Units since 1970-01-01 -> timestamp_ntz, NULL outside 0001-01-01 .. 9999-12-31 (no overflow)."""
    n = _integral(raw)
    per_ms = _UNIT_PER_MS[unit]
    in_range = n.between(_dec(_EPOCH_MS_MIN * per_ms), _dec(_EPOCH_MS_MAX * per_ms + per_ms - 1))
    if unit == "NANOSECOND":  # Spark timestamps hold microseconds
        n, unit = F.floor(F.try_divide(n, F.lit(1000))), "MICROSECOND"
    return F.when(in_range, F.timestamp_add(unit, n.try_cast("bigint"), F.expr(_EPOCH_NTZ)))


def _time_of_day(raw: Column, unit: str) -> Column:
    """Units since midnight -> ``HH:mm:ss.SSSSSS``; NULL outside one day (no wrapping into the next)."""
    n = _integral(raw)
    per_ms = _UNIT_PER_MS[unit]
    in_day = n.between(_dec(0), _dec(_DAY_MS * per_ms - 1))
    micros = F.floor(F.try_divide(n, F.lit(1000))) if unit == "NANOSECOND" else n
    unit = "MICROSECOND" if unit == "NANOSECOND" else unit
    return F.when(in_day, F.date_format(F.timestamp_add(unit, micros.try_cast("bigint"), F.expr(_EPOCH_NTZ)), "HH:mm:ss.SSSSSS"))


def decimal_type(spark_type: str) -> tuple[int, int] | None:
    """(precision, scale) of a decimal Spark type name, else None. ``decimal`` alone = (10, 0)."""
    m = _DECIMAL_RE.match(spark_type)
    if not m:
        return None
    return int(m.group(1) or 10), int(m.group(2) or 0)


def _decimal_scale(spark_type: str) -> int:
    return (decimal_type(spark_type) or (0, 0))[1]


def _exact_decimal(raw: Column, spark_type: str) -> Column:
    """Decimal text -> ``spark_type`` without rounding: NULL when the value has more significant
    digits after the point than the scale (``10.005`` into decimal(10,2)), or does not fit."""
    s = (decimal_type(spark_type) or (38, 0))[1]
    t = F.trim(raw)
    typed = t.try_cast(spark_type)
    excess = F.substring(F.regexp_extract(t, r"\.([0-9]*)$", 1), s + 1, 1 << 20)
    plain_ok = t.rlike(_PLAIN_NUMBER) & excess.rlike("^0*$")
    # 1.0005e1: its last nonzero digit, moved by the exponent, within the scale (a cast rounds 1e-400 to 0)
    whole, digits = F.regexp_extract(t, "^[+-]?([0-9]*)", 1), F.regexp_extract(t, r"^[+-]?([0-9.]*)", 1)
    significant = F.regexp_extract(F.translate(digits, ".", ""), "^([0-9]*[1-9])", 1)
    places = F.length(significant) - F.length(whole) - F.regexp_extract(t, "[eE](.*)$", 1).cast("int")
    sci_ok = t.rlike(_SCI_NUMBER) & ((significant == "") | (places <= s))
    return F.when(plain_ok | sci_ok, typed)


def _decimal_problem(raw: Column, spark_type: str) -> Column:
    p, s = decimal_type(spark_type) or (38, 0)
    t = F.trim(raw)
    number = t.rlike(_PLAIN_NUMBER) | t.rlike(_SCI_NUMBER)
    fits = t.try_cast(f"decimal(38,{38 - (p - s)})").isNotNull()
    return F.when(number & fits, F.lit(f"more than {s} digits after the decimal point (would be rounded)")).when(
        number, F.lit(f"out of range for decimal({p},{s})")
    )


def _base_type(spark_type: str) -> str:
    return spark_type.strip().lower()


_NUMBER = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"  # a base64_decimal value written as a number
_BASE64 = r"^[A-Za-z0-9+/]+={0,2}$"


def _in_domain(typed: Column, spec: ColumnSpec) -> Column:
    """True when a converted value is in SQL Server's domain for its type (NULL counts as True)."""
    t = _base_type(spec.spark_type)
    checks = []
    if t == "date":
        checks.append(typed.between(F.expr(_DATE_RANGE[0]), F.expr(_DATE_RANGE[1])))
    elif t in _TS_RANGE:
        lo, hi = _TS_RANGE[t]
        checks.append(typed.between(F.expr(lo), F.expr(hi)))
    elif t in ("float", "double", "real"):
        checks.append(~F.isnan(typed) & (F.abs(typed) != F.lit(float("inf"))))
    elif t == "string" and spec.encoding == "text":
        shape = _STRING_SHAPE.get(_source_base(spec))
        if shape is not None:
            checks.append(typed.rlike(shape[0]))
    unsigned = _UNSIGNED_MAX.get(_source_base(spec))
    if unsigned is not None:
        checks.append(typed.between(F.lit(0), _dec(unsigned)))
    return F.coalesce(frames.all_of(checks), F.lit(True))


def _source_base(spec: ColumnSpec) -> str:
    st = (spec.source_type or "").strip().lower()
    return re.split(r"[\s(]", st, maxsplit=1)[0] if st else ""


def _convert(raw: Column, spec: ColumnSpec, scale: Column | None = None) -> Column:
    """``raw`` -> ``spec.spark_type`` by its encoding, before the domain checks (NULL = unreadable);
    ``scale``: a ``base64_decimal``'s per row (at most the type's), else the type's."""
    enc, t = spec.encoding, spec.spark_type
    if enc == "text":
        if t.lower() == "binary":
            return F.try_to_binary(raw, F.lit("base64"))
        if t.lower() == "boolean":
            low = F.lower(F.trim(raw))
            return F.when(low.isin("true", "1"), F.lit(True)).when(low.isin("false", "0"), F.lit(False))
        if decimal_type(t):
            return _exact_decimal(raw, t)
        if _source_base(spec) == "time" and t.lower() == "string":  # one spelling: Debezium's, 7th digit floored
            secs = F.coalesce(F.nullif(F.substring(raw, 7, 2), F.lit("")), F.lit("00"))
            frac = F.rpad(F.substring(F.regexp_extract(raw, r"\.([0-9]+)$", 1), 1, 6), 6, "0")
            return F.when(raw.rlike(_STRING_SHAPE["time"][0]), F.concat(F.substring(raw, 1, 5), F.lit(":"), secs, F.lit("."), frac))
        shape = _TEMPORAL_TEXT.get(_base_type(t))
        if shape is not None:
            return F.when(raw.rlike(shape[0]), raw.try_cast(t))
        return raw.try_cast(t)
    if enc == "base64":
        return F.when(raw.rlike(r"^[A-Za-z0-9+/]*={0,2}$"), F.try_to_binary(raw, F.lit("base64")))
    if enc == "hex":
        digits = F.regexp_replace(raw, r"^0[xX]", "")
        return F.when(digits.rlike(r"^([0-9A-Fa-f]{2})*$"), F.unhex(digits))
    if enc == "base64_decimal":
        # decimal.handling.mode=precise gives base64; =string/=double gives plain numbers.
        return F.when(raw.rlike(_NUMBER), _exact_decimal(raw, t)).otherwise(
            F.when(raw.rlike(_BASE64), unscaled.decimal_from_base64(raw, t, _decimal_scale(t) if scale is None else scale))
        )
    if enc == "epoch_day":
        n = _integral(raw)
        return F.when(
            n.between(_dec(_EPOCH_DAY_MIN), _dec(_EPOCH_DAY_MAX)),
            F.date_add(F.lit("1970-01-01").cast("date"), n.try_cast("int")),
        )
    if enc == "epoch_millis":
        return _since_epoch(raw, "MILLISECOND")
    if enc == "epoch_micros":
        return _since_epoch(raw, "MICROSECOND")
    if enc == "epoch_nanos":
        return _since_epoch(raw, "NANOSECOND")
    if enc == "millis_of_day":
        return _time_of_day(raw, "MILLISECOND")
    if enc == "micros_of_day":
        return _time_of_day(raw, "MICROSECOND")
    if enc == "nanos_of_day":
        return _time_of_day(raw, "NANOSECOND")
    raise ValueError(f"column {spec.name!r}: unknown encoding {enc!r}")  # pragma: no cover


def typed_value(raw: Column, spec: ColumnSpec, scale: Column | None = None) -> Column:
    """The Spark expression that turns ``raw`` (text, or NULL) into ``spec.spark_type``.

    Data never raises here (ANSI mode or not): text that does not convert, a number that does
    not fit, a decimal with more digits after the point than the scale (never rounded), a date or
    time outside SQL Server's range (year 1..9999), a float NaN/±Infinity, an unsigned source value
    out of its range all give NULL, and :func:`value_error` says why. ``scale``: see :func:`_convert`."""
    typed = _convert(raw, spec, scale)
    return F.when(_in_domain(typed, spec), typed)


def shallow_typed_value(raw: Column, spec: ColumnSpec) -> Column:
    """:func:`typed_value`, or NULL where that needs a deep expression: never another value.

    A ``base64_decimal`` of more than 7 bytes (and one whose text reads as a number) is NULL
    here: the general path is ~42 plan levels deep (the short one 24), and a plan nested deeper than 100 is
    refused by Spark Connect and SDP. For a fast path's test (:mod:`sqlcdc.formats._debezium_fast`)
    that sends such values to the strict decode, which reads them with :func:`typed_value`."""
    if spec.encoding != "base64_decimal":
        return typed_value(raw, spec)
    t = spec.spark_type
    typed = F.when(~raw.rlike(_NUMBER) & raw.rlike(_BASE64), unscaled.decimal_from_short_base64(raw, t, _decimal_scale(t)))
    return F.when(_in_domain(typed, spec), typed)


def _problem(raw: Column, spec: ColumnSpec) -> Column:
    """Why ``raw`` has no typed value, where more can be said than "cannot read" (else NULL)."""
    t = _base_type(spec.spark_type)
    enc = spec.encoding
    unsigned = _UNSIGNED_MAX.get(_source_base(spec))
    ranged = unsigned is not None or t == "date" or t in _TS_RANGE or t in ("float", "double", "real")
    if ranged:
        converted = _convert(raw, spec)
        domain = _in_domain(converted, spec)
    out = F.lit(None).cast("string")
    if enc in ("epoch_day", "epoch_millis", "epoch_micros", "epoch_nanos"):
        out = F.when(_integral(raw).isNotNull(), F.lit(_OUT_OF_RANGE_DATE))
    elif enc in ("millis_of_day", "micros_of_day", "nanos_of_day"):
        out = F.when(_integral(raw).isNotNull(), F.lit("outside one day (negative, or 24:00:00 and later)"))
    elif decimal_type(spec.spark_type) and enc in ("text", "base64_decimal"):
        out = _decimal_problem(raw, spec.spark_type)
        if enc == "base64_decimal":
            out = F.coalesce(out, F.when(F.try_to_binary(raw, F.lit("base64")).isNotNull(),
                                         F.lit(f"unscaled value out of range for {spec.spark_type}")))
    elif t == "date" or t in _TS_RANGE:
        out = F.when(converted.isNotNull() & ~domain, F.lit(_OUT_OF_RANGE_DATE))
        if enc == "text" and t in _TEMPORAL_TEXT:
            pattern, message = _TEMPORAL_TEXT[t]
            out = F.when(~raw.rlike(pattern), F.lit(message)).otherwise(out)
    elif t in ("float", "double", "real"):
        out = F.when(F.isnan(converted), F.lit("NaN is not a SQL Server float value")).when(
            converted.isNotNull() & ~domain, F.lit("±Infinity (or an overflow) is not a SQL Server float value"))
    elif t == "string" and enc == "text":
        shape = _STRING_SHAPE.get(_source_base(spec))
        if shape is not None:
            out = F.when(~raw.rlike(shape[0]), F.lit(shape[1]))
    if unsigned is not None:
        out = F.coalesce(out, F.when(converted.isNotNull() & ~domain, F.lit(f"outside 0..{unsigned} for {spec.source_type}")))
    return out


def value_error(raw: Column, typed: Column, spec: ColumnSpec) -> Column:
    """A message when ``raw`` was given but did not convert to ``spec.spark_type``, else NULL.

    ``column price: cannot read ["10.005"] as decimal(10,2) (text): more than 2 digits after the
    decimal point (would be rounded)``; the part after the last colon is there when the value is
    out of SQL Server's domain rather than unreadable.
    """
    base = F.format_string(
        "column %s: cannot read %s as %s (%s)",
        F.lit(spec.name),
        F.substring(F.to_json(F.array(raw)), 1, 120),
        F.lit(spec.spark_type),
        F.lit(spec.encoding),
    )
    problem = _problem(raw, spec)
    return F.when(
        raw.isNotNull() & typed.isNull(),
        F.when(problem.isNotNull(), F.concat(base, F.lit(": "), problem)).otherwise(base),
    )


def typed_struct(raw_map: Column, columns: list[ColumnSpec], nested: Column | None = None,
                 scales: dict[str, Column] | None = None) -> tuple[Column, Column]:
    """``raw_map`` (MAP<STRING,STRING>) -> (typed struct, array of error messages).

    The struct has one field per column in ``columns`` order. A column missing from the map is
    NULL in the struct; use :func:`provided_columns` to tell it from a real NULL.

    ``nested``: the keys whose JSON value was an object or array (:func:`sqlcdc.formats.base.nested_keys`). Spark reads
    such a value into a MAP<STRING,STRING> as its JSON text, which a string column would take as a
    value; so a string column (not :attr:`ColumnSpec.json_value`) named there is an error.
    ``scales``: per column, the scale its ``base64_decimal`` is written at in each row.
    """
    fields, errors = [], []
    for spec in columns:
        raw = raw_map[spec.name]
        typed = typed_value(raw, spec, (scales or {}).get(spec.name))
        error = value_error(raw, typed, spec)
        if nested is not None and spec.spark_type == "string" and not spec.json_value:
            refused = F.coalesce(F.array_contains(nested, spec.name), F.lit(False))
            typed = F.when(~refused, typed)
            error = F.when(refused, F.format_string(
                "column %s: cannot read %s as string (%s): a JSON object or array, not a value of the column",
                F.lit(spec.name), F.substring(F.to_json(F.array(raw)), 1, 120), F.lit(spec.encoding))).otherwise(error)
        fields.append(typed.alias(spec.name))
        errors.append(error)
    return F.struct(*fields), frames.compact(errors)


def provided_columns(raw_map: Column, columns: list[ColumnSpec]) -> Column:
    """Names of the columns that are keys of ``raw_map`` (present, even if their value is NULL), in
    ``columns`` order; empty for a NULL map. One ``map_contains_key`` a column, in generated code
    (not ``filter`` over the names: a lambda, interpreted row by row)."""
    return frames.compact([F.when(F.map_contains_key(raw_map, c.name), F.lit(c.name)) for c in columns])


#: Prefix of the ``dq_warnings`` rule a table with ``bad_values: warn`` names for a column whose value
#: could not be read (``bad_value_price``).
BAD_VALUE_RULE = "bad_value_"
#: The column a decoder adds to its changes under ``bad_values: warn``: those rule names, per change.
VALUE_WARNINGS_COL = "_value_warnings"


def split_value_errors(errors: Column, columns: list[ColumnSpec], keys: list[str] | tuple[str, ...],
                       bad_values: str) -> tuple[Column, Column | None]:
    """A change's value errors (:func:`typed_struct`'s) -> (those that quarantine it, the warn rule
    names of those that do not -- or None when nothing is only warned).

    ``bad_values`` is the table's setting: ``quarantine`` (every error quarantines the change) or
    ``warn`` (a non-key column's error keeps the change, its value NULL, and names
    ``bad_value_<column>``; a key column's error still quarantines: the change could not be applied).

    >>> # price "10.005" into decimal(10,2), bad_values: warn -> ([], ["bad_value_price"])
    """
    if bad_values != "warn":
        return errors, None
    warned = [c.name for c in columns if c.name not in set(keys)]
    if not warned:
        return errors, F.array().cast("array<string>")

    def of(name: str):
        return lambda e: e.startswith(f"column {name}: cannot read ")

    def any_warned(e: Column) -> Column:
        return frames.any_of([of(name)(e) for name in warned])

    reasons = F.filter(errors, lambda e: ~any_warned(e))
    names = frames.compact([F.when(F.exists(errors, of(n)), F.lit(BAD_VALUE_RULE + n)) for n in warned])
    return reasons, names



def null_key_reasons(key: Column, keys: Sequence[str], *, where: Column | None = None,
                     suffix: Column | None = None) -> Column:
    """array<string> (NULL entries to compact): ``key column <k> is NULL`` for each field ``k`` of
    the struct ``key`` that is NULL (and ``where`` holds), followed by ``suffix`` when given: one
    wording of the reason every decoder gives a change it cannot apply to a key.

    >>> # null_key_reasons(F.col("_key"), ["id"]) -> ["key column id is NULL"] for a NULL id
    """
    def reason(k: str) -> Column:
        text = F.lit(f"key column {k} is NULL")
        return F.when(key[k].isNull() if where is None else where & key[k].isNull(),
                      text if suffix is None else F.concat(text, suffix))

    return F.array(*[reason(k) for k in keys]).cast("array<string>")
