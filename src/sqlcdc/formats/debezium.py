"""Debezium SQL Server connector: change event values (JSON converter) -> canonical changes.

An event value comes in one of two shapes, both accepted:

- with schema: ``{"schema": {...Kafka Connect schema...}, "payload": {"before", "after", "source", "op", "ts_ms"}}``
- payload only (``value.converter.schemas.enable=false``): ``{"before", "after", "source", "op", "ts_ms"}``

A tombstone (a null value after a delete; in a landed file an empty line, ``null``, or
``{"schema": null, "payload": null}``) is not a change and not an error: it is skipped and counted.

``op``: ``c`` create -> INSERT, ``u`` -> UPDATE, ``d`` -> DELETE, ``r`` snapshot read -> SNAPSHOT,
``t`` -> TRUNCATE. Anything else is quarantined.

Ordering (:mod:`sqlcdc.lsn`): ``source.commit_lsn``, then ``source.change_lsn``, then
``source.event_serial_no`` (given as a number or, as in Debezium's own documentation example, a
string). Snapshot events carry the snapshot's ``commit_lsn`` and no ``change_lsn``, so they order
before every change committed after the snapshot. The LSNs are validated, not padded: exactly
``xxxxxxxx:xxxxxxxx:xxxx`` (hex), never zero; a streamed event (c, u, d, t) without both, or with one
that does not read (``27:758:5``, a JSON number), or an ``event_serial_no`` that is not an integer,
is quarantined with the reason, never given a default sequence. A primary-key update arrives as DELETE(old key)
serial 1 + INSERT(new key) serial 2 in the same commit; gold ends with the old key gone and the new
key present.

Types: each column's value is read as JSON text and typed from its Kafka Connect schema, taken from
the table config's ``columns:`` or, when absent, from the envelopes in the landing folder that
carry a schema for the table, every column any of them names (:func:`columns_for`). An event
carrying its schema has its decimals read at that schema's scale; one that would make a value read
wrong (a Decimal of a larger scale than the table's, a time in another unit) is quarantined naming
the column (:mod:`._connect_types`). Logical types:

======================================================  ================  ==================
Connect schema (type / name)                            Spark type        encoding
======================================================  ================  ==================
int8 / int16 / int32 / int64                            tinyint ... bigint  text
float32 / float64 (a JSON schema's float / double)      float, double     text
boolean, string                                         boolean, string   text
bytes                                                   binary            base64
``org.apache.kafka.connect.data.Decimal`` (scale, p)    decimal(p,s)      base64_decimal
``io.debezium.time.Date``, Connect ``Date``             date              epoch_day
``io.debezium.time.Time``, Connect ``Time``             string            millis_of_day
``io.debezium.time.MicroTime`` / ``NanoTime``           string            micros/nanos_of_day
``io.debezium.time.Timestamp``, Connect ``Timestamp``   timestamp_ntz     epoch_millis
``io.debezium.time.MicroTimestamp`` / ``NanoTimestamp`` timestamp_ntz     epoch_micros/nanos
``io.debezium.time.ZonedTimestamp``                     timestamp         text (ISO-8601)
======================================================  ================  ==================

Example::

    from sqlcdc.formats import debezium
    bronze = debezium.read_bronze(spark, source)            # streaming text lines
    cols = debezium.columns_for(table, source, spark)       # typed column specs
    decoded = debezium.decode(bronze, table, cols)          # .changes, .quarantine
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import dlt_meta, frames, lsn, model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import Decoded, Decoder, _debezium_fast, _debezium_tx
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats._debezium_events import OPS, SOURCE_FIELDS, changed_columns, claims, epoch_millis, matches, op_name
from sqlcdc.formats._connect_types import JSON_VALUED, LOGICAL, PRIMITIVE, event_scales, schema_check
from sqlcdc.formats._connect_types import spec_from_connect_field
from sqlcdc.formats._connect_discovery import Reader, landed_shapes, no_usable_schema, shapes_of, union_of
from sqlcdc.formats._sqlserver import means_sql_server_type, spec_for_sql_type
from sqlcdc.formats._json_numbers import images_as_written
from sqlcdc.formats.base import claimants, json_trim, nested_keys_in, one_json_value, read_text_lines, record_id
from sqlcdc.values import COMMIT_TIME_RANGE, ColumnSpec, null_key_reasons, provided_columns, split_value_errors, typed_struct

NAME = "debezium"
STREAMING = True

NOT_JSON = (
    "not a JSON object: the text does not parse (a syntax error, a NaN/Infinity literal, a duplicate "
    "key, or JSON nested deeper than the parser's limit)"
)

TWO_DOCUMENTS = "more than one JSON document on one line (each landed line must hold exactly one event)"

_SOURCE_FIELDS = tuple(name for name, _ in SOURCE_FIELDS)
_PAYLOAD_DDL = (
    "before map<string,string>, after map<string,string>, "
    f"source struct<{', '.join(f'`{f}`: string' for f in _SOURCE_FIELDS)}>, "
    "op string, ts_ms string, transaction struct<id: string, total_order: string>"
)

# --- columns: config -> ColumnSpec -----------------------------------------------------------


def spec_from_config(column: dict[str, Any]) -> ColumnSpec:
    """A ``columns:`` entry -> :class:`ColumnSpec`. ``type`` is a Connect type or logical name
    (``int32``, ``io.debezium.time.MicroTimestamp``, ``decimal(10,2)`` for Connect Decimal), a
    SQL Server type name as the connector writes its values (``datetime2(6)``, ``bit``,
    ``varbinary(16)``: :func:`_spec_of_sql_type`; ``date`` is Connect's Date) or another Spark SQL
    type read from the JSON text as is."""
    name, ctype = column["name"], str(column["type"]).strip()
    low = ctype.lower()
    if low == "float":  # SQL Server's float is 8 bytes (FLOAT64): never narrowed to Spark's 4-byte float
        return ColumnSpec(name, "double", "text", lob=bool(column.get("lob", False)), source_type=ctype)
    if low in ("struct", "array", "map") or ctype in JSON_VALUED:  # kept as JSON text
        return spec_from_connect_field({"field": name, "type": low if low in ("array", "map") else "struct", "name": ctype})
    if ctype in LOGICAL or ctype in PRIMITIVE or ctype == "bytes":
        return spec_from_connect_field({"field": name, "type": ctype, "name": ctype})
    if low.startswith("decimal") or low.startswith("numeric"):
        return ColumnSpec(name, "decimal" + low[low.index("(") :] if "(" in low else "decimal(38,0)", "base64_decimal")
    if low == "binary":
        return ColumnSpec(name, "binary", "base64")
    if low == "date":  # Connect's Date: the connector writes every date as days since 1970
        return spec_from_connect_field({"field": name, "type": "int32", "name": "io.debezium.time.Date"})
    if means_sql_server_type(low):  # tinyint too: SQL Server's 0..255 (the connector's INT16)
        return _spec_of_sql_type(name, low, bool(column.get("lob", False)))
    return ColumnSpec(name, low, "text", lob=bool(column.get("lob", False)))


def _spec_of_sql_type(name: str, sql_type: str, lob: bool) -> ColumnSpec:
    """A SQL Server type name as the SQL Server connector writes its values with its default
    ``time.precision.mode=adaptive`` (datetime2(0-3) milliseconds, (4-6) microseconds, (7)
    nanoseconds; the same for time), ``decimal.handling.mode=precise`` and ``binary.handling.mode=bytes``.

    >>> _spec_of_sql_type("seen", "datetime2(6)", False).encoding
    'epoch_micros'
    """
    spec = spec_for_sql_type(name, sql_type, lob=lob)
    base, _, args = sql_type.partition("(")
    digits = int(args.rstrip(") ")) if args.rstrip(") ").isdigit() else 7  # SQL Server's default precision
    unit = "Micro" if 4 <= digits <= 6 else "Nano" if digits >= 7 else ""
    logical = {"datetime2": f"io.debezium.time.{unit}Timestamp", "datetime": "io.debezium.time.Timestamp",
               "smalldatetime": "io.debezium.time.Timestamp", "time": f"io.debezium.time.{unit}Time",
               "datetimeoffset": "io.debezium.time.ZonedTimestamp"}.get(base.strip())
    if logical:
        return replace(spec_from_connect_field({"field": name, "type": "int64", "name": logical}), lob=lob)
    if spec.spark_type.startswith("decimal"):  # money, smallmoney: Connect Decimal
        return replace(spec, encoding="base64_decimal")
    if spec.encoding == "hex":  # binary, varbinary, image, rowversion: Connect bytes
        return replace(spec, encoding="base64")
    return spec


# --- bronze -------------------------------------------------------------------------------------


def read_bronze(spark: SparkSession, source: SourceConfig, *, streaming: bool = True) -> DataFrame:
    """Landed files of Debezium event values, one JSON document per line."""
    if not source.landing:
        raise ConfigError([f"{source.file}: sources.{source.name}.landing: required for a file source"])
    return read_text_lines(spark, source.landing, streaming=streaming, glob=source.options.get("glob"), blank_lines=True)


def is_skipped(bronze: DataFrame | None = None) -> Column:
    """Tombstones: blank line, ``null``, or ``{"payload": null}`` with at most a ``schema`` beside it;
    and the BEGIN/END records of the transaction topic (:mod:`sqlcdc.formats._debezium_tx`).

    Only those: an object with any other field (an event without ``op`` whose text merely contains
    ``"payload"``) is an event that does not read, and is quarantined with the reason.
    """
    v = json_trim(F.col("value"))
    env = F.from_json(F.col("value"), "schema string, payload string")
    keys = F.json_object_keys(F.col("value"))
    # The text tests guard the parses in a CASE, not an AND: Spark hoists an expression read twice
    # (``keys``) out of an AND chain and computed it for every row (half of this predicate's cost).
    null_payload = F.when(
        v.startswith("{") & v.rlike(r'"payload"\s*:\s*null'),
        F.array_contains(keys, "payload") & (F.size(F.array_except(keys, F.array(F.lit("schema"), F.lit("payload")))) == 0)
        & env["payload"].isNull() & one_json_value(F.col("value")),
    )
    return (F.col("value").isNull() | (v == "") | (v == "null") | F.coalesce(null_payload, F.lit(False))
            | _debezium_tx.is_boundary(F.col("value")))


# --- envelope parsing ----------------------------------------------------------------------------


def _parsed(bronze: DataFrame, skip: Column | None = None) -> DataFrame:
    """Bronze + ``_payload`` (struct) + ``_envelope_error`` (NULL when the envelope is usable), and
    ``_env`` (the outer envelope's ``payload`` text and ``op``), ``_connect_schema`` (its Connect
    schema's JSON text). Rows where ``skip`` is true (the fast path's, :func:`decode`) are not parsed: all NULL.

    Staged: each parse is a column the next step reads. Written as one expression, the checks in
    ``_envelope_error``'s conditional branches each parsed the record again (Spark shares
    subexpressions only where they are always evaluated): the parse ran ~6 times per record."""
    value = F.col("value") if skip is None else F.when(~skip, F.col("value"))
    env = F.from_json(value, "schema string, payload string, op string")  # schema: the event's own (its JSON text)
    staged = bronze.select("*", env.alias("_env"))
    payload_text = F.when(F.col("_env.payload").isNotNull(), F.col("_env.payload")).when(
        F.col("_env.op").isNotNull(), value)
    staged = staged.select("*", F.from_json(payload_text, _PAYLOAD_DDL).alias("_payload_read"),
                           F.col("_env.schema").alias("_connect_schema"))
    staged = staged.select("*", images_as_written(F.col("_payload_read"), value, ("before", "after"), "payload").alias("_payload"))
    payload = F.col("_payload")
    # which image values were JSON objects or arrays (read as their JSON text into the maps)
    staged = staged.select("*", F.struct(
        nested_keys_in(payload_text, "$['before']", payload["before"]).alias("before"),
        nested_keys_in(payload_text, "$['after']", payload["after"]).alias("after")).alias("_nested"))
    not_object = ~json_trim(F.col("value")).startswith("{")
    error = (
        F.when(not_object, F.lit("not a JSON object"))
        .when(F.try_parse_json(F.col("value")).isNull(), F.lit(NOT_JSON))
        .when(~one_json_value(F.col("value")), F.lit(TWO_DOCUMENTS))
        .when(payload_text.isNull(), F.lit("missing `payload` (and no payload-only fields `op`/`source`)"))
        .when(payload["op"].isNull(), F.lit("missing `payload.op`"))
        .when(~payload["op"].isin(*OPS), F.format_string("unknown op '%s' (expected one of c, u, d, r, t)", payload["op"]))
        .when(payload["source"].isNull(), F.lit("missing `payload.source`"))
        .when(payload["source"]["table"].isNull(), F.lit("missing `payload.source.table`"))
    )
    if skip is not None:
        error = F.when(~skip, error)
    return staged.select("*", error.alias("_envelope_error"))


def unrouted(bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
    """Quarantine rows for records that no table takes: bad envelopes and tables not onboarded."""
    return unrouted_parsed(_parsed(bronze), source, tables)


def unrouted_parsed(parsed: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
    """:func:`unrouted` of rows with ``_payload`` and ``_envelope_error`` (as :func:`_parsed` gives)."""
    tables = list(tables)
    parsed = parsed.where(~is_skipped())
    claiming = claimants(claims, tables)
    names = ", ".join(t.qualified for t in tables) or "none"
    error = F.col("_envelope_error")
    # why it does not parse, from Python for the rows Spark's parser refused only (else the general words)
    said = sc.not_json_udf()(F.when(error == F.lit(NOT_JSON), F.col("value")))  # NULL for any other row
    reason = F.coalesce(
        said,
        error,
        F.when(F.size(claiming) > 1, F.format_string(
            "more than one onboarded table could take this event (%s): its source names table %s but no schema",
            F.array_join(claiming, ", "), F.col("_payload.source.table"))),
        F.format_string(
            "no onboarded table for %s.%s in source %s (onboarded: %s)",
            F.col("_payload.source.schema"), F.col("_payload.source.table"), F.lit(source.name), F.lit(names),
        ),
    )
    bad = frames.where(parsed, F.col("_envelope_error").isNotNull() | (F.size(claiming) != 1), "_unrouted")
    return bad.select(*model.quarantine_row(source_name=source.name, source_format=source.format, reason=reason))


# --- decoding ------------------------------------------------------------------------------------


def _ordering_problems(op: Column, src: Column) -> Column:
    """Why the event cannot be ordered (``array<string>``, NULLs for what is fine).

    ``commit_lsn`` and ``change_lsn`` are exactly ``xxxxxxxx:xxxxxxxx:xxxx`` (hex), never zero;
    streamed events (c, u, d, t) must carry both; a snapshot read (r) may lack them (it orders
    before every change, :mod:`sqlcdc.lsn`). ``event_serial_no``, when given, is an integer >= 0.
    """
    streamed = op != "r"
    serial = src["event_serial_no"]
    return F.array(
        F.when(streamed & src["commit_lsn"].isNull(), F.format_string(
            "missing source.commit_lsn: a '%s' event cannot be ordered without it", op)),
        lsn.lsn_problem(src["commit_lsn"], "source.commit_lsn", "debezium"),
        F.when(streamed & src["change_lsn"].isNull(), F.format_string(
            "missing source.change_lsn: a '%s' event cannot be ordered without it", op)),
        lsn.lsn_problem(src["change_lsn"], "source.change_lsn", "debezium"),
        F.when(serial.isNotNull() & ~F.trim(serial).rlike(r"^[0-9]{1,18}$"), F.format_string(
            "source.event_serial_no '%s' is not an integer >= 0", F.substring(serial, 1, 40))),
    )


def decode(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
    """Bronze rows of ``table`` -> canonical changes; rows whose values or keys don't read -> quarantine."""
    return decode_landed(bronze, table, columns, lambda frame, proven: frame)


def decode_landed(landed: DataFrame, table: TableConfig, columns: list[ColumnSpec],
                  admit: Callable[[DataFrame, Column | None], DataFrame]) -> Decoded:
    """:meth:`sqlcdc.formats.Decoder.decode_landed`: the fast path's plain records are admitted
    without the envelope check, which their gate implies (the layout is the payload-only branch of
    ``debezium-envelope.schema.json``, each key once and of its JSON kind; the plain test adds the
    op and the table: docs/fast-path.md). ``tests/test_debezium_fast.py`` checks that the schema's
    rules are the ones this covers and that every plain record of its histories passes the check."""
    fast = _debezium_fast.stage(landed, table, columns)  # plain records: one typed parse (docs/fast-path.md)
    if fast is None:
        return decode_parsed(_parsed(admit(landed, None)), table, columns)
    return decode_parsed(_parsed(admit(fast.frame, fast.plain), skip=fast.plain), table, columns, fast)


def decode_parsed(parsed: DataFrame, table: TableConfig, columns: list[ColumnSpec],
                  fast: _debezium_fast.Staged | None = None) -> Decoded:
    """:func:`decode` of rows with ``_payload``, ``_envelope_error`` and ``_nested`` (as :func:`_parsed` gives;
    :mod:`sqlcdc.formats.debezium_flat` builds the same from flattened records). With ``fast``, its
    plain records are changes made of its columns (each strict expression NULL for them)."""
    keys = list(table.keys)
    name = table.source.format
    plain = fast.plain if fast is not None else F.lit(False)
    taken = plain | (~is_skipped() & F.col("_envelope_error").isNull() & matches(table))
    parsed = frames.where(parsed, taken, "_taken")
    p, src = F.col("_payload"), F.col("_payload.source")
    op = op_name(p["op"])
    check = schema_check(F.col("_connect_schema"), columns)  # what the event's own Connect schema says
    if check is not None:
        parsed = parsed.select("*", check.alias("_schema_check"))
    scales = event_scales(F.col("_schema_check"), columns) if check is not None else None  # each decimal at its own scale
    before, before_errors = typed_struct(p["before"], columns, F.col("_nested.before"), scales)
    after, after_errors = typed_struct(p["after"], columns, F.col("_nested.after"), scales)
    is_delete = p["op"] == "d"
    image = F.when(is_delete, F.col("_before")).otherwise(F.col("_after"))
    key = F.struct(*[image[k].alias(k) for k in keys])
    names = [c.name for c in columns]
    changed = changed_columns(p, names)
    serial = F.coalesce(src["event_serial_no"].try_cast("bigint"), F.lit(0))
    ts_ms = epoch_millis(src["ts_ms"])
    change_id = record_id(
        src["name"], src["db"], src["schema"], src["table"], p["op"], src["commit_lsn"], src["change_lsn"],
        src["event_serial_no"], F.to_json(p["before"]), F.to_json(p["after"]),
    )
    value_reasons, value_warnings = split_value_errors(F.col("_value_errors"), columns, keys, table.bad_values)
    typed = parsed.select(
        "*",
        before.alias("_before"),
        after.alias("_after"),
        F.concat(before_errors, after_errors).alias("_value_errors"),
    ).select("*", key.alias("_key"))
    missing_image = F.when(
        p["op"].isin("c", "u", "r") & p["after"].isNull(), F.format_string("op '%s' without `after`", p["op"])
    ).when(is_delete & p["before"].isNull(), F.lit("op 'd' without `before`"))
    reasons = frames.compact(
        F.concat(
            F.array(missing_image),
            _ordering_problems(p["op"], src),
            F.array(F.when(src["ts_ms"].isNotNull() & ts_ms.isNull(), F.format_string(
                f"source.ts_ms '%s' is not a commit time (milliseconds since 1970, within {COMMIT_TIME_RANGE})",
                F.substring(src["ts_ms"], 1, 40)))),
            value_reasons,
            *([F.coalesce(F.col("_schema_check.conflicts"), F.array().cast("array<string>"))] if check is not None else []),
            null_key_reasons(F.col("_key"), keys),
        )
    )
    typed = typed.select("*", F.when(~plain, reasons).otherwise(F.array().cast("array<string>")).alias("_reasons"))
    change = dict(
        change_id=change_id,
        op=op,
        key=F.col("_key"),
        before=F.when(p["before"].isNotNull(), F.col("_before")),
        after=F.when(~is_delete & p["after"].isNotNull(), F.col("_after")),
        sequence=lsn.sequence(
            lsn.parse_lsn(src["commit_lsn"], "debezium"), lsn.parse_lsn(src["change_lsn"], "debezium"), serial
        ),
        source_server=src["name"],
        source_database=src["db"],
        source_schema=src["schema"],
        source_table=src["table"],
        provided_columns=F.when(~is_delete, provided_columns(p["after"], columns)),
        changed_columns=changed,
        commit_time=ts_ms,
        transaction_id=p["transaction"]["id"],
    )
    if fast is not None:  # a CASE evaluates only its taken branch: a plain record pays for the fast one alone
        change = {k: F.when(plain, fast.change[k]).otherwise(v) for k, v in change.items()}
    return Decoded.split(
        typed, F.size("_reasons") == 0,
        model.change_row(source_format=name, table_name=table.name, value_warnings=value_warnings, **change),
        model.quarantine_row(
            source_name=table.source.name,
            source_format=name,
            table_name=table.name,
            reason=F.array_join(F.col("_reasons"), "; "),
            rules=F.array(F.lit("decode")),
        ),
    )


# --- columns --------------------------------------------------------------------------------------


def columns_for(table: TableConfig, source: SourceConfig, spark: SparkSession | None = None) -> list[ColumnSpec]:
    """The table's typed columns: from ``columns:`` in its config, else from the envelopes in the
    landing folder that carry a usable Kafka Connect schema for it, every column any of them names
    (:mod:`._connect_discovery`: a column the source added later is landed from there on)."""
    if table.columns:
        return [spec_from_config(c) for c in table.columns]
    found = discover_schema(source.landing, table) if source.landing else None
    if found is None:
        raise ConfigError(
            [
                f"{table.file}:1: columns: table {table.qualified} has no `columns:` and no Debezium "
                f"envelope with a schema for it was found under {source.landing}; add `columns:` "
                "(name and type per column) to the table config"
            ]
        )
    return found


def discover_schema(landing: str, table: TableConfig, reader: Reader | None = None) -> list[ColumnSpec] | None:
    """The union of the columns of ``table``'s schema-bearing envelopes landed (local folders):
    :func:`~._connect_discovery.union_of`; ``reader`` reads the lines (default: :data:`ENVELOPES`).
    None when none has a schema; unusable schemas are passed over, and if every one found is
    unusable, :class:`ConfigError` names the first."""
    shapes, rejected = shapes_of(table, landed_shapes(landing, reader or ENVELOPES))
    found = union_of(shapes, rejected=rejected)
    if found is None and rejected:
        raise no_usable_schema(table, rejected)
    return found


def _table_of(payload: dict, _: Path) -> tuple[str | None, str] | None:
    src = payload.get("source") or {}
    name, schema = src.get("table"), src.get("schema")
    return None if name is None else (None if schema is None else str(schema).lower(), str(name).lower())


def _row_fields(schema: dict) -> list | None:
    for f in schema.get("fields", []):
        if f.get("field") in ("after", "before") and f.get("type") == "struct":
            return f.get("fields", [])
    return None


#: A full envelope's table (``source.schema``, ``source.table``) and row (its ``before``/``after`` struct).
ENVELOPES = Reader("envelope", _table_of, _row_fields, spec_from_connect_field)


class Debezium(Decoder):
    """Debezium SQL Server connector event values (schema envelope or payload only), one per line."""

    name = NAME
    label = "SQL Server (Debezium)"
    dlt_meta_select = staticmethod(dlt_meta.debezium_select)
    streaming = STREAMING
    envelope_schema = "debezium-envelope.schema.json"
    keys_required = "a landed Debezium value does not carry the message key"
    position_field = "source.change_lsn"
    options = {
        "glob": {"type": "string", "description": "landed file names to read (Hadoop glob, e.g. '*.json')"},
    }
    read_bronze = staticmethod(read_bronze)
    columns_for = staticmethod(columns_for)
    decode = staticmethod(decode)
    decode_landed = staticmethod(decode_landed)
    unrouted = staticmethod(unrouted)
    is_skipped = staticmethod(is_skipped)

    config_types = (", a SQL Server type as the connector writes it (datetime2(6), bit, varbinary(16), money, ...) "
                    "or a Kafka Connect type (int32, io.debezium.time.MicroTimestamp, ...)")

    def config_column(self, column: dict, ordinal: int) -> ColumnSpec:
        """A Connect type or logical name, ``decimal(p,s)`` (Connect Decimal), a SQL Server type or a Spark SQL type."""
        return spec_from_config(column)

    def transaction_marks(self, bronze: DataFrame, source: SourceConfig) -> DataFrame | None:
        """The ``transaction`` blocks of the events and the END records of the transaction topic
        (:mod:`sqlcdc.formats._debezium_tx`); None when no BEGIN/END record has landed in the
        source (the transaction topic is not landed: nothing says where a transaction ends)."""
        if not _debezium_tx.has_boundaries(bronze):
            return None
        events = _parsed(bronze).where(~is_skipped() & F.col("_envelope_error").isNull())
        return _debezium_tx.marks(events, bronze)


DECODER = Debezium()
