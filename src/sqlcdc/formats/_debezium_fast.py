"""A fast path for plain Debezium records: one typed parse, proven exact, straight to silver rows.

Most records are plain -- canonical JSON from one writer, every column there, every value of the
kind and range its type reads, a known op, readable LSNs. :func:`stage` proves that cheaply and
builds their silver rows from one typed ``from_json``; everything else goes through the strict
decode (:func:`sqlcdc.formats.debezium.decode_parsed`) unchanged, so quarantine reasons, presence,
nested values, tombstones and odd spellings keep their meaning. Design, measurements and limits:
docs/fast-path.md.

1. **Gate** -- the record parsed into the table's *typed* columns and Debezium's ``source``
   fields, kept only where ``to_json`` of the parse (NULLs written) is exactly its text. Equal
   text means canonical JSON in this layout: no unknown, duplicate or absent key (absent and NULL
   differ in the text), every value of the JSON kind its type reads, the fields in the writer's
   order, no escapes the writer would not make. A record that does not match is only slower.
2. **Plain** -- op ``c``/``u``/``d``, the image the op needs, key not NULL, both LSNs and
   ``ts_ms`` readable, no value error, the table's own ``source`` and no rival table's
   (:func:`~sqlcdc.formats._debezium_events.matches`).
3. **Rows** -- each value is typed from its text as the strict decode's own
   :func:`~sqlcdc.values.typed_value` types it (a canonical record's values, as text, are what the
   strict decode reads from its map; :func:`~sqlcdc.values.shallow_typed_value`, which leaves the
   rare values whose expression is deep to the strict decode), except an integer
   column with no source type: the gate has proven it a JSON integer in range, written back digit
   for digit, which is all the strict path checks. ``change_id`` is computed from the same texts,
   so a record gets the same id whichever path takes it (duplicates across runs are found).

Each typed value and test is staged as a column of its own behind :func:`sqlcdc.frames.where`, so
the optimizer does not copy them into every read (one ``Filter`` took nearly twice as long).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sqlcdc import frames, lsn, model
from sqlcdc.config import TableConfig
from sqlcdc.formats._debezium_events import SOURCE_FIELDS, changed_columns, epoch_millis, matches, op_name
from sqlcdc.formats.base import record_id
from sqlcdc.values import ColumnSpec, shallow_typed_value

_PAYLOAD = "_fast_payload"
#: Spark type -> the type the gate parses its JSON value into (the JSON kind Debezium writes).
_INTEGRAL = {"tinyint": T.ByteType(), "smallint": T.ShortType(), "int": T.IntegerType(), "bigint": T.LongType()}

#: The ``source`` layout the gate proves (:data:`~sqlcdc.formats._debezium_events.SOURCE_FIELDS`).
#: Another layout is not wrong, only strict-decoded.
_SOURCE = T.StructType([
    T.StructField(name, T.LongType() if kind == "long" else T.StringType()) for name, kind in SOURCE_FIELDS
])


@dataclass(frozen=True)
class Staged:
    """One table's bronze with the fast path's columns (:func:`stage`)."""

    frame: DataFrame
    """Bronze's rows and columns, and the fast path's (named ``_fast_*``, and ``_plain``)."""
    plain: Column
    """True for a record the fast path takes (never NULL)."""
    change: dict[str, Column]
    """:func:`sqlcdc.model.change_row`'s arguments over ``frame`` for those records (all but the
    table's and format's names and the bronze columns)."""


def _json_type(spec: ColumnSpec) -> T.DataType | None:
    """The type the gate parses ``spec``'s value into; None when the fast path does not read it."""
    if spec.json_value:
        return None
    if spec.spark_type in _INTEGRAL and spec.encoding == "text":
        return _INTEGRAL[spec.spark_type]
    if spec.spark_type == "string" and spec.encoding == "text":
        return T.StringType()
    if spec.spark_type.startswith("decimal(") and spec.encoding in ("base64_decimal", "text"):
        return T.StringType()  # base64 of the unscaled integer, or the digits (decimal.handling.mode=string)
    return None


def supports(columns: list[ColumnSpec]) -> bool:
    """Whether the fast path reads every one of ``columns`` (else the table is strict-decoded)."""
    return bool(columns) and all(_json_type(c) is not None for c in columns)


def _typed_image(img: Column, columns: list[ColumnSpec]) -> Column:
    """The image's typed struct, each value as the strict decode's ``typed_struct`` gives it, or
    NULL where that needs its deep expression (:func:`~sqlcdc.values.shallow_typed_value`)."""
    fields = []
    for c in columns:
        if c.spark_type in _INTEGRAL and not c.source_type:
            fields.append(img[c.name].alias(c.name))
        else:
            fields.append(shallow_typed_value(img[c.name].cast("string"), c).alias(c.name))
    return F.struct(*fields)


def _values_read(img: Column, typed: Column, columns: list[ColumnSpec]) -> Column:
    """Every value of the image given is typed (the strict decode has no value error for it)."""
    return frames.all_of([img[c.name].isNull() | typed[c.name].isNotNull() for c in columns])


def stage(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Staged | None:
    """``bronze`` (one landed event per ``value``) with the fast path's test and typed values, and
    the silver row of a plain record as :func:`sqlcdc.model.change_row`'s arguments; None when
    ``columns`` has a type the fast path does not read (:func:`supports`). The strict decode takes
    the other records from the same frame (:func:`sqlcdc.formats.debezium.decode`): one read.

    >>> # s = stage(bronze, table, cols); s.frame.where(s.plain).select(*model.change_row(..., **s.change))
    """
    if not supports(columns):
        return None
    names = [c.name for c in columns]
    image = T.StructType([T.StructField(c.name, _json_type(c)) for c in columns])
    layout = T.StructType([
        T.StructField("before", image), T.StructField("after", image), T.StructField("op", T.StringType()),
        T.StructField("ts_ms", T.LongType()), T.StructField("source", _SOURCE)])
    p, src = F.col(_PAYLOAD), F.col(f"{_PAYLOAD}.source")
    parsed = bronze.select("*", F.from_json("value", layout).alias(_PAYLOAD))
    gate = F.coalesce(F.to_json(p, {"ignoreNullFields": "false"}) == F.col("value"), F.lit(False))
    staged = parsed.select(
        "*", gate.alias("_fast_gate"), _typed_image(p["before"], columns).alias("_fast_before"),
        _typed_image(p["after"], columns).alias("_fast_after"),
        lsn.parse_lsn(src["commit_lsn"], "debezium").alias("_fast_commit"),
        lsn.parse_lsn(src["change_lsn"], "debezium").alias("_fast_change"),
        epoch_millis(src["ts_ms"].cast("string")).alias("_fast_ts"))
    before, after = F.col("_fast_before"), F.col("_fast_after")
    is_delete = p["op"] == "d"
    typed_image = F.when(is_delete, before).otherwise(after)
    plain = F.coalesce(frames.all_of([
        F.col("_fast_gate"), p["op"].isin("c", "u", "d"),
        F.when(is_delete, p["before"]).otherwise(p["after"]).isNotNull(),
        *[typed_image[k].isNotNull() for k in table.keys], _values_read(p["before"], before, columns),
        _values_read(p["after"], after, columns), matches(table, _PAYLOAD),
        F.col("_fast_commit").isNotNull(), F.col("_fast_change").isNotNull(), src["event_serial_no"] >= 0,
        F.col("_fast_ts").isNotNull()]), F.lit(False))
    # Behind a filter that keeps every row, as frames.where does: without it the optimizer inlined
    # ``_plain`` (and the typed values under it) into each strict expression guarded by it.
    staged = frames.where(staged.select("*", plain.alias("_plain")), F.col("_plain").isNotNull(), "_fast_staged")

    def text_map(img: Column) -> Column:  # the image as the strict decode's map<string,string> of texts
        return F.when(img.isNotNull(), F.create_map(*[x for n in names for x in (F.lit(n), img[n].cast("string"))]))

    change = dict(
        change_id=record_id(src["name"], src["db"], src["schema"], src["table"], p["op"], src["commit_lsn"],
                            src["change_lsn"], src["event_serial_no"], F.to_json(text_map(p["before"])),
                            F.to_json(text_map(p["after"]))),
        op=op_name(p["op"]), key=F.struct(*[typed_image[k].alias(k) for k in table.keys]),
        before=F.when(p["before"].isNotNull(), before), after=F.when(~is_delete & p["after"].isNotNull(), after),
        sequence=lsn.sequence(F.col("_fast_commit"), F.col("_fast_change"), src["event_serial_no"]),
        source_server=src["name"], source_database=src["db"], source_schema=src["schema"], source_table=src["table"],
        provided_columns=F.when(~is_delete, F.when(p["after"].isNotNull(), F.array(*[F.lit(n) for n in names]))
                                .otherwise(F.array().cast("array<string>"))),
        changed_columns=changed_columns(p, names), commit_time=F.col("_fast_ts"),
        transaction_id=F.lit(None).cast("string"))
    return Staged(staged, F.col("_plain"), change)


def changes(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> DataFrame | None:
    """The silver rows of the records the fast path takes, alone (for tests and benchmarks: the
    pipeline's decode takes them with the others, :func:`sqlcdc.formats.debezium.decode`)."""
    staged = stage(bronze, table, columns)
    if staged is None:
        return None
    return frames.where(staged.frame, staged.plain, "_fast").select(*model.change_row(
        source_format=table.source.format, table_name=table.name, **staged.change))
