"""Debezium SQL Server events flattened by the ``ExtractNewRecordState`` SMT -> canonical changes.

The SMT (Debezium's "New Record State Extraction") replaces the envelope with the row itself: an
insert, update or snapshot read becomes the ``after`` row, a delete (``delete.handling.mode=rewrite``,
or ``delete.tombstone.handling.mode=rewrite``) the ``before`` row with ``"__deleted": "true"`` (every
other record gets ``"false"``). ``add.fields`` copies envelope and ``source`` fields in, each named with
``add.fields.prefix`` (default ``__``) + the field name (``source.ts_ms`` -> ``__source_ts_ms``).
Records land one per line, as the row alone or ``{"schema": ..., "payload": <row>}``.

A record is read into the same envelope as :mod:`sqlcdc.formats.debezium` decodes, so types, keys,
presence (a column the record does not carry is not provided, never NULL), change ids and
quarantine reasons are those of the full envelope:

==========================================  ===============================================
flattened record                            envelope
==========================================  ===============================================
``__op`` (``add.fields=op``)                ``op``; without it ``__deleted: true`` -> ``d``,
                                            anything else an upsert (``u``, before unknown)
the row (fields without the prefix)         ``before`` for a delete, ``after`` otherwise
``__commit_lsn``, ``__change_lsn``,         ``source.commit_lsn``, ``change_lsn``,
``__event_serial_no``                       ``event_serial_no`` (also as ``__source_<field>``)
``__source_ts_ms``                          ``source.ts_ms``: the commit time
``__table``, ``__schema``, ``__db``         ``source.table``, ... : which table; without them
                                            the Kafka topic (``kafka://<topic>/...``) or the
                                            landed file's folder named after its topic:
                                            ``<prefix>.<db>.<schema>.<table>`` (Debezium 2.x)
                                            or ``<server>.<schema>.<table>`` (1.x)
==========================================  ===============================================

Ordering needs the LSNs: configure ``add.fields=op,table,schema,commit_lsn,change_lsn,event_serial_no,
source.ts_ms``. A record without ``__commit_lsn`` (or ``__change_lsn``, except a snapshot read) is
quarantined saying so, never given a default position. Deletes need ``rewrite``: with the default
``drop`` the SMT removes them, and a tombstone (kept with ``drop.tombstones=false``) carries the key
only in the Kafka message key, which is not landed: tombstones are skipped, as for the full envelope.

Example source::

    sources:
      inventory:
        format: debezium_flat
        landing: landing/server1.dbo.customers  # one topic's files (its name routes them without __table)
        options: {add_fields_prefix: "__"}     # the SMT's add.fields.prefix (default __)
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import Decoded, Decoder
from sqlcdc.formats import debezium as dbz
from sqlcdc.formats._connect_discovery import Reader
from sqlcdc.formats._json_numbers import object_as_written
from sqlcdc.formats.base import json_trim, landed_folder, nested_keys_in, one_json_value
from sqlcdc.values import ColumnSpec

NAME = "debezium_flat"
_SOURCE = dbz._SOURCE_FIELDS


def prefix_of(source: SourceConfig) -> str:
    """The SMT's ``add.fields.prefix`` (option ``add_fields_prefix``, default ``__``)."""
    return str(source.options.get("add_fields_prefix", "__"))


def _topic_parts(source_file: Column) -> tuple[Column, Column, Column]:
    """``(db, schema, table)`` from the Kafka topic of a record (``kafka://<topic>/<partition>/<offset>``)
    or the name of the folder its file landed in; NULL where the name has fewer than three parts."""
    topic = F.when(source_file.startswith("kafka://"), F.regexp_extract(source_file, r"^kafka://([^/]+)/", 1)).otherwise(
        landed_folder(source_file))
    parts = F.split(topic, r"\.")
    named = F.size(parts) >= 3
    return (F.when(F.size(parts) >= 4, F.element_at(parts, -3)), F.when(named, F.element_at(parts, -2)),
            F.when(named, F.element_at(parts, -1)))


def _parsed(bronze: DataFrame, source: SourceConfig) -> DataFrame:
    """Bronze + ``_payload`` (the envelope :func:`sqlcdc.formats.debezium.decode_parsed` reads) +
    ``_envelope_error`` (NULL when the record is usable) + ``_connect_schema`` (a wrapper's schema, its JSON text)."""
    p = prefix_of(source)
    value = F.col("value")
    # one parse of the record; a {"schema", "payload"} wrapper's payload (kept as its JSON text) a second
    outer = F.from_json(value, "map<string,string>")
    wrapped = F.coalesce(F.map_contains_key(outer, "payload") & (
        (F.size(outer) == 1) | ((F.size(outer) == 2) & F.map_contains_key(outer, "schema"))), F.lit(False))
    m = F.when(wrapped, F.from_json(outer["payload"], "map<string,string>")).otherwise(outer)
    # its numbers exact (from_json wrote 1234567890.1234567891 through a double), in the rare record holding one
    m = object_as_written(m, value, lambda v: F.coalesce(
        F.when(wrapped, F.try_variant_get(v, "$['payload']", "map<string,variant>")),
        F.try_variant_get(v, "$", "map<string,variant>")))
    bronze = bronze.select("*", m.alias("_flat_row"))
    m = F.col("_flat_row")
    row = F.map_filter(m, lambda k, _: ~k.startswith(p)) if p else m

    def meta(field: str) -> Column:
        return F.coalesce(m[p + field], m[p + "source_" + field])

    deleted = F.lower(F.trim(m[p + "deleted"])) == "true"
    op = F.coalesce(m[p + "op"], F.when(deleted, F.lit("d")), F.lit("u"))
    db, schema, table = _topic_parts(F.col("source_file"))
    fields = {f: meta(f) for f in _SOURCE}
    fields.update(ts_ms=m[p + "source_ts_ms"], table=F.coalesce(meta("table"), table),
                  schema=F.coalesce(meta("schema"), schema), db=F.coalesce(meta("db"), db))
    payload = F.struct(
        F.when(op == "d", row).alias("before"),
        F.when(op != "d", row).alias("after"),
        F.struct(*[fields[f].alias(f) for f in _SOURCE]).alias("source"),
        op.alias("op"),
        m[p + "ts_ms"].alias("ts_ms"),
        F.struct(meta("transaction_id").alias("id")).alias("transaction"),
    )
    add_fields = "add.fields=op,table,schema,commit_lsn,change_lsn,event_serial_no,source.ts_ms"
    error = (
        F.when(~json_trim(value).startswith("{"), F.lit("not a JSON object"))
        .when(F.try_parse_json(value).isNull(), F.lit(dbz.NOT_JSON))
        .when(~one_json_value(value), F.lit(dbz.TWO_DOCUMENTS))
        .when(m.isNull(), F.lit("`payload` is not a JSON object (a flattened record is the row itself)"))
        .when(~op.isin(*dbz.OPS), F.format_string(f"unknown {p}op '%s' (expected one of c, u, d, r, t)", op))
        .when(meta("commit_lsn").isNull(), F.lit(
            f"a flattened record without {p}commit_lsn cannot be ordered (configure the SMT's {add_fields})"))
        .when(meta("change_lsn").isNull() & (op != "r"), F.lit(
            f"a flattened record without {p}change_lsn cannot be ordered (configure the SMT's {add_fields})"))
        .when(fields["table"].isNull(), F.lit(
            f"cannot tell the table of a flattened record: add table and schema to the SMT's add.fields ({p}table, "
            f"{p}schema), or land each topic in a folder named after it (<prefix>.<db>.<schema>.<table>)"))
    )
    doc = F.when(wrapped, outer["payload"]).otherwise(value)
    nested = nested_keys_in(doc, "$", row)  # values that were JSON objects or arrays
    nested = F.struct(F.when(op == "d", nested).alias("before"), F.when(op != "d", nested).alias("after"))
    return bronze.select("*", payload.alias("_payload"), error.alias("_envelope_error"), nested.alias("_nested"),
                         F.when(wrapped, outer["schema"]).alias("_connect_schema"))


def decode(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
    """Bronze rows of ``table`` -> canonical changes, as :func:`sqlcdc.formats.debezium.decode`."""
    return dbz.decode_parsed(_parsed(bronze, table.source), table, columns)


def unrouted(bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
    """Quarantine rows for records no table takes: unusable records and tables not onboarded."""
    return dbz.unrouted_parsed(_parsed(bronze, source), source, tables)


def columns_for(table: TableConfig, source: SourceConfig, spark: SparkSession | None = None) -> list[ColumnSpec]:
    """``columns:`` of the table config, else every column the Connect schemas of the table's records
    landed with one name (``{"schema": ..., "payload": ...}`` naming the table in ``<prefix>table``,
    or in a folder named after its topic), as :func:`sqlcdc.formats.debezium.discover_schema`."""
    if table.columns:
        return [dbz.spec_from_config(c) for c in table.columns]
    p = prefix_of(source)
    found = dbz.discover_schema(source.landing, table, _reader(p)) if source.landing else None
    if found is None:
        raise ConfigError([
            f"{table.file}:1: columns: table {table.qualified} has no `columns:` and no flattened record with a schema "
            f"and {p}table (or a topic folder) naming it was found under {source.landing}; add `columns:` (name and type "
            "per column) to the table config"])
    return found


def _reader(p: str) -> Reader:
    """Flattened records with a schema: the table named by ``<p>table`` (and ``<p>schema``) in the
    payload, else by the folder the file landed in (named after its topic); the row is the
    record's fields but the SMT's own (``<p>...``)."""
    def table_of(payload: dict, path: Path) -> tuple[str | None, str] | None:
        parts = path.parent.name.split(".")
        named = (parts[-2], parts[-1]) if len(parts) >= 3 else (None, None)
        name = payload.get(p + "table", payload.get(p + "source_table", named[1]))
        schema = payload.get(p + "schema", payload.get(p + "source_schema", named[0]))
        return None if name is None else (None if schema is None else str(schema).lower(), str(name).lower())

    def fields_of(schema: dict) -> list:
        return [f for f in schema.get("fields", []) if isinstance(f, dict) and not str(f.get("field", "")).startswith(p)]

    return Reader(f"flattened {p}", table_of, fields_of, dbz.spec_from_connect_field)


class DebeziumFlattened(dbz.Debezium):
    """Debezium SQL Server events flattened by ``ExtractNewRecordState`` (``add.fields`` with the LSNs)."""

    name = NAME
    label = "SQL Server (Debezium, flattened by ExtractNewRecordState)"
    envelope_schema = None  # the row is the record: checked here, field by field, as the full envelope's
    position_field = "__change_lsn (add.fields=change_lsn)"
    options = {
        **dbz.Debezium.options,
        "add_fields_prefix": {"type": "string", "description": "the SMT's add.fields.prefix (default '__')"},
    }
    read_bronze = staticmethod(dbz.read_bronze)
    columns_for = staticmethod(columns_for)
    decode = staticmethod(decode)
    decode_landed = Decoder.decode_landed  # no envelope schema, no fast path: Debezium's would stage the full envelope
    unrouted = staticmethod(unrouted)

    def dlt_meta_select(self, table: TableConfig, columns: list[dict]) -> tuple[list[str], list[str]] | None:
        return None  # dlt-meta's mapping reads the full envelope only

    def transaction_marks(self, bronze: DataFrame, source: SourceConfig) -> DataFrame | None:
        return None  # the SMT keeps no transaction block (total_order): nothing says a transaction is whole


DECODER = DebeziumFlattened()
