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

Times of day become ``string`` (``HH:mm:ss.SSSSSS``): Delta 4.4 has no TIME type.

Example::

    spec = ColumnSpec("price", "decimal(10,2)", "base64_decimal")
    df.select(typed_value(F.col("raw")["price"], spec).alias("price"))
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

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
    """

    name: str
    spark_type: str
    encoding: str = "text"
    lob: bool = False
    ordinal: int | None = None
    source_type: str | None = None

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ValueError(
                f"column {self.name!r}: unknown encoding {self.encoding!r}; expected one of {sorted(ENCODINGS)}"
            )


def _integral(raw: Column) -> Column:
    return raw.try_cast("decimal(38,0)").cast("bigint")


def _since_epoch(raw: Column, unit: str) -> Column:
    return F.timestamp_add(unit, _integral(raw), F.expr(_EPOCH_NTZ))


def _time_of_day(raw: Column, unit: str) -> Column:
    return F.date_format(_since_epoch(raw, unit), "HH:mm:ss.SSSSSS")


def _decimal_from_base64(raw: Column, spark_type: str) -> Column:
    """Big-endian two's complement bytes (base64) -> unscaled integer -> decimal with the scale."""
    b = F.unbase64(raw)
    h = F.hex(b)
    n = F.length(b)
    unsigned = F.aggregate(
        F.sequence(F.lit(0), n - 1),
        F.lit(0).cast("decimal(38,0)"),
        lambda acc, i: (acc * F.lit(256) + F.conv(F.substring(h, i * 2 + 1, 2), 16, 10).cast("int")).cast(
            "decimal(38,0)"
        ),
    )
    negative = F.conv(F.substring(h, 1, 2), 16, 10).cast("int") >= 128
    signed = F.when(negative, unsigned - F.pow(F.lit(256), n).cast("decimal(38,0)")).otherwise(unsigned)
    scale = _decimal_scale(spark_type)
    return (signed.cast("decimal(38,0)") / F.pow(F.lit(10), F.lit(scale)).cast("decimal(38,0)")).cast(spark_type)


def _decimal_scale(spark_type: str) -> int:
    inside = spark_type[spark_type.find("(") + 1 : spark_type.find(")")] if "(" in spark_type else "10,0"
    parts = [p.strip() for p in inside.split(",")]
    return int(parts[1]) if len(parts) > 1 else 0


def typed_value(raw: Column, spec: ColumnSpec) -> Column:
    """The Spark expression that turns ``raw`` (text, or NULL) into ``spec.spark_type``."""
    enc, t = spec.encoding, spec.spark_type
    if enc == "text":
        if t.lower() == "binary":
            return F.unbase64(raw)
        if t.lower() == "boolean":
            low = F.lower(F.trim(raw))
            return F.when(low.isin("true", "1"), F.lit(True)).when(low.isin("false", "0"), F.lit(False))
        return raw.try_cast(t)
    if enc == "base64":
        return F.when(raw.rlike(r"^[A-Za-z0-9+/]*={0,2}$"), F.unbase64(raw))
    if enc == "hex":
        digits = F.regexp_replace(raw, r"^0[xX]", "")
        return F.when(digits.rlike(r"^([0-9A-Fa-f]{2})*$"), F.unhex(digits))
    if enc == "base64_decimal":
        # decimal.handling.mode=precise gives base64; =string/=double gives plain numbers.
        return F.when(raw.rlike(r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"), raw.try_cast(t)).otherwise(
            F.when(raw.rlike(r"^[A-Za-z0-9+/]+={0,2}$"), _decimal_from_base64(raw, t))
        )
    if enc == "epoch_day":
        return F.date_add(F.lit("1970-01-01").cast("date"), _integral(raw).cast("int"))
    if enc == "epoch_millis":
        return _since_epoch(raw, "MILLISECOND")
    if enc == "epoch_micros":
        return _since_epoch(raw, "MICROSECOND")
    if enc == "epoch_nanos":
        return _since_epoch(F.floor(_integral(raw) / F.lit(1000)).cast("string"), "MICROSECOND")
    if enc == "millis_of_day":
        return _time_of_day(raw, "MILLISECOND")
    if enc == "micros_of_day":
        return _time_of_day(raw, "MICROSECOND")
    if enc == "nanos_of_day":
        return _time_of_day(F.floor(_integral(raw) / F.lit(1000)).cast("string"), "MICROSECOND")
    raise ValueError(f"column {spec.name!r}: unknown encoding {enc!r}")  # pragma: no cover


def value_error(raw: Column, typed: Column, spec: ColumnSpec) -> Column:
    """A message when ``raw`` was given but did not convert to ``spec.spark_type``, else NULL."""
    return F.when(
        raw.isNotNull() & typed.isNull(),
        F.format_string(
            "column %s: cannot read %s as %s (%s)",
            F.lit(spec.name),
            F.substring(F.to_json(F.array(raw)), 1, 120),
            F.lit(spec.spark_type),
            F.lit(spec.encoding),
        ),
    )


def typed_struct(raw_map: Column, columns: list[ColumnSpec]) -> tuple[Column, Column]:
    """``raw_map`` (MAP<STRING,STRING>) -> (typed struct, array of error messages).

    The struct has one field per column in ``columns`` order. A column missing from the map is
    NULL in the struct; use :func:`provided_columns` to tell it from a real NULL.
    """
    fields, errors = [], []
    for spec in columns:
        raw = raw_map[spec.name]
        typed = typed_value(raw, spec)
        fields.append(typed.alias(spec.name))
        errors.append(value_error(raw, typed, spec))
    return F.struct(*fields), F.filter(F.array(*errors), lambda e: e.isNotNull())


def provided_columns(raw_map: Column, columns: list[ColumnSpec]) -> Column:
    """Names of the columns that are keys of ``raw_map`` (present, even if their value is NULL)."""
    names = F.array(*[F.lit(c.name) for c in columns])
    return F.filter(names, lambda name: F.array_contains(F.map_keys(raw_map), name))
