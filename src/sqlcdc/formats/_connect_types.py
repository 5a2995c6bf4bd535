"""Kafka Connect schemas of Debezium events: a field's column type, and the values an event's own
schema says the table would read wrong.

:func:`spec_from_connect_field` maps one field of a Connect struct schema to the
:class:`~sqlcdc.values.ColumnSpec` a table reads it with (the table of :mod:`sqlcdc.formats.debezium`'s
docstring); column discovery and ``columns:`` both use it.

:func:`schema_check` reads an event that carries its schema (``schemas.enable=true``) against
the table's columns. A value is read by the *table's* column type, and for most types a schema that
disagrees shows in the value itself: text that does not read, a number out of range -- a value
error. Three disagreements do not, and would land a wrong value without a trace:

- a ``Decimal`` of another scale: the unscaled integer read at the table's scale (``ALTER COLUMN
  price decimal(12,4)`` and a new capture instance: 123.4500 is sent as 1234500, read as 12345.00).
  So each event's decimal is read at its own schema's scale (:func:`event_scales`): exactly when
  that is at most the table's (zeros appended), a conflict when it is more (it would be rounded);
- a time of another unit: epoch or time-of-day milliseconds, microseconds and nanoseconds are all
  integers (a ``datetime`` made ``datetime2(7)``: nanoseconds read as milliseconds);
- an 8-byte float (``float64``) read into a 4-byte ``float`` column: rounded.

Such an event is quarantined, naming the column and both types. A field the schema does not name,
a schema that does not parse, or a type that reads its value as written (a decimal sent as text,
``decimal.handling.mode=string``) is no conflict.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc import frames
from sqlcdc.values import ColumnSpec, decimal_type

__all__ = ["DECIMAL", "JSON_VALUED", "LOGICAL", "PRIMITIVE", "event_scales", "row_fields", "schema_check",
           "spec_from_connect_field"]

PRIMITIVE = {
    "int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint",
    "float32": "float", "float64": "double", "boolean": "boolean", "string": "string",
    # as the JSON converter names FLOAT32 / FLOAT64 in a schema envelope (its JsonSchema type names)
    "float": "float", "double": "double",
}
LOGICAL = {
    "io.debezium.time.Date": ("date", "epoch_day"),
    "org.apache.kafka.connect.data.Date": ("date", "epoch_day"),
    "io.debezium.time.Time": ("string", "millis_of_day"),
    "org.apache.kafka.connect.data.Time": ("string", "millis_of_day"),
    "io.debezium.time.MicroTime": ("string", "micros_of_day"),
    "io.debezium.time.NanoTime": ("string", "nanos_of_day"),
    "io.debezium.time.Timestamp": ("timestamp_ntz", "epoch_millis"),
    "org.apache.kafka.connect.data.Timestamp": ("timestamp_ntz", "epoch_millis"),
    "io.debezium.time.MicroTimestamp": ("timestamp_ntz", "epoch_micros"),
    "io.debezium.time.NanoTimestamp": ("timestamp_ntz", "epoch_nanos"),
    "io.debezium.time.ZonedTimestamp": ("timestamp", "text"),
    "io.debezium.time.ZonedTime": ("string", "text"),
    "io.debezium.data.Xml": ("string", "text"),
    "io.debezium.data.Uuid": ("string", "text"),
}
DECIMAL = "org.apache.kafka.connect.data.Decimal"
#: Logical types whose value is a JSON object (``{"wkb": ..., "srid": ...}``), as ``columns:`` may name them.
JSON_VALUED = ("io.debezium.data.geometry.Geometry", "io.debezium.data.geometry.Geography",
               "io.debezium.data.geometry.Point")

#: Encodings whose value is a bare integer in some unit: read in another unit, it is another time.
_UNITS = {
    "epoch_day": "days since 1970", "epoch_millis": "milliseconds since 1970",
    "epoch_micros": "microseconds since 1970", "epoch_nanos": "nanoseconds since 1970",
    "millis_of_day": "milliseconds of a day", "micros_of_day": "microseconds of a day",
    "nanos_of_day": "nanoseconds of a day",
}
_FIELD = "struct<field: string, type: string, name: string, parameters: map<string, string>>"
#: An envelope's schema (its ``before``/``after`` structs) or a flattened record's (the row's fields).
_SCHEMA = ("struct<fields: array<struct<field: string, type: string, name: string, "
           f"parameters: map<string, string>, fields: array<{_FIELD}>>>>")


def spec_from_connect_field(field: dict[str, Any]) -> ColumnSpec:
    """One field of a Kafka Connect struct schema -> :class:`ColumnSpec`.

    >>> spec_from_connect_field({"field": "id", "type": "int32"}).spark_type
    'int'
    """
    name, ctype, lname = field["field"], field.get("type"), field.get("name")
    if lname == DECIMAL:
        params = field.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        return ColumnSpec(name, f"decimal({precision},{scale})", "base64_decimal", source_type=lname)
    if lname in LOGICAL:
        spark_type, encoding = LOGICAL[lname]
        return ColumnSpec(name, spark_type, encoding, source_type=lname)
    if ctype == "bytes":
        return ColumnSpec(name, "binary", "base64", source_type=ctype)
    if ctype in PRIMITIVE:
        return ColumnSpec(name, PRIMITIVE[ctype], "text", source_type=lname or ctype)
    # struct/array/map values (rare for SQL Server: a geometry): keep their JSON text.
    return ColumnSpec(name, "string", "text", source_type=lname or ctype, json_value=True)


def row_fields(schema_text: Column) -> Column:
    """The row's fields in an event's Connect schema (its JSON text; NULL for a payload-only event):
    the envelope's ``after`` (else ``before``) struct, or a flattened record's own fields. NULL when
    the schema does not parse."""
    def fields(s: Column) -> Column:
        def image(which: str) -> Column:
            return _named(s["fields"], which)["fields"]

        top = F.transform(s["fields"], lambda f: F.struct(*[f[k].alias(k) for k in ("field", "type", "name", "parameters")]))
        return F.coalesce(image("after"), image("before"), top)

    return frames.let(F.from_json(schema_text, _SCHEMA), fields)  # one parse, looked into several times


def _named(fields: Column, name: str) -> Column:
    """The first entry of the schema ``fields`` named ``name`` (NULL for none)."""
    return F.try_element_at(F.filter(fields, lambda f: f["field"] == F.lit(name)), F.lit(1))


def _scale(spark_type: str) -> int:
    return (decimal_type(spark_type) or (0, 0))[1]


def _decimal_scale(field: Column) -> Column:
    """The scale a Connect ``Decimal`` field gives (NULL for another type, or a scale that does not read)."""
    return F.when(field["name"] == DECIMAL, field["parameters"]["scale"].try_cast("int"))


def schema_check(schema_text: Column, columns: Sequence[ColumnSpec]) -> Column | None:
    """What an event's own Connect schema (its JSON text, ``schema_text``) says of the table's
    ``columns``, to be staged as one column (one parse of the schema): ``scales``, per
    ``base64_decimal`` column the scale the event writes it at (:func:`event_scales`), and
    ``conflicts``, why a value would read wrong (``array<string>``, NULL entries where none). NULL
    for a payload-only event (nothing evaluated); None when no column of ``columns`` can read wrong
    (nothing to check)::

        check = schema_check(F.col("_connect_schema"), columns)
        staged = parsed.select("*", check.alias("_schema_check"))
    """
    rules = [(c, rule) for c in columns if (rule := _conflict_rule(c)) is not None]
    if not rules:
        return None
    decimals = [c for c in columns if c.encoding == "base64_decimal"]

    def body(fields: Column) -> Column:
        scales = [_decimal_scale(_named(fields, c.name)).alias(c.name) for c in decimals]
        conflicts = [rule(_named(fields, c.name)) for c, rule in rules]
        return F.struct(F.struct(*scales).alias("scales"), F.array(*conflicts).alias("conflicts"))

    return F.when(schema_text.isNotNull(), frames.let(row_fields(schema_text), body))


def event_scales(check: Column, columns: Sequence[ColumnSpec]) -> dict[str, Column]:
    """Per ``base64_decimal`` column, the scale each event writes it at, from the staged
    :func:`schema_check` ``check``: its own schema's when that gives one from 0 to the table's
    scale -- read exactly, the value padded with zeros (a column made ``decimal(12,4)`` reads the
    events written at scale 2 before the ALTER) --, else the table's (a payload-only event; a larger
    scale is a conflict)."""
    return {c.name: F.coalesce(F.when(_readable(check["scales"][c.name], c), check["scales"][c.name]),
                               F.lit(_scale(c.spark_type)))
            for c in columns if c.encoding == "base64_decimal"}


def _readable(scale: Column, spec: ColumnSpec) -> Column:
    """Whether a value written at ``scale`` reads exactly into ``spec``'s decimal: 0 to its scale."""
    return scale.between(0, _scale(spec.spark_type))


def _conflict_rule(spec: ColumnSpec) -> Callable[[Column], Column] | None:
    """For ``spec``'s column, the function from the event schema's entry for it (NULL when it names
    none) to why the table would read the value wrong (NULL when it would not); None when no schema
    can make it read wrong (the column's type is read as written)."""
    if spec.encoding == "base64_decimal":
        scale = _scale(spec.spark_type)

        def decimal(field: Column) -> Column:
            given = F.coalesce(field["parameters"]["scale"], F.lit("(none)"))
            return F.when((field["name"] == DECIMAL) & ~F.coalesce(_readable(_decimal_scale(field), spec), F.lit(False)),
                          F.format_string(
                f"column %s: the event's Connect schema gives it Decimal scale %s, and the table reads "
                f"{spec.spark_type} (scale {scale}): a value of that scale is not read exactly (give `columns:` a "
                "decimal of that scale)", F.lit(spec.name), F.substring(given, 1, 20)))
        return decimal
    if spec.encoding in _UNITS:
        other = {n: enc for n, (_, enc) in LOGICAL.items() if enc in _UNITS and enc != spec.encoding}
        if not other:
            return None

        def unit(field: Column) -> Column:
            name = field["name"]
            said = F.try_element_at(F.create_map(*[x for n, enc in other.items() for x in (F.lit(n), F.lit(_UNITS[enc]))]), name)
            return F.when(name.isin(*other), F.format_string(
                f"column %s: the event's Connect schema types it %s (%s), and the table reads "
                f"{_UNITS[spec.encoding]} ({spec.source_type or spec.spark_type}): the value would be another time",
                F.lit(spec.name), name, said))
        return unit
    if spec.spark_type == "float" and spec.encoding == "text":
        def double(field: Column) -> Column:
            return F.when(field["type"].isin("float64", "double") & field["name"].isNull(), F.format_string(
                "column %s: the event's Connect schema types it %s (8 bytes), and the table reads a 4-byte float "
                "(real): the value would be rounded", F.lit(spec.name), field["type"]))
        return double
    return None
