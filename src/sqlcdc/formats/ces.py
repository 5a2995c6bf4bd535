"""SQL Server 2025 Change Event Streaming (CES): CloudEvents in JSON or Avro -> canonical changes.

What CES sends (Microsoft, "JSON message format - change event streaming")::

    {"specversion": "1.0", "type": "com.microsoft.SQL.CES.DML.V1", "source": "/",
     "id": "d43f09a6-...", "logicalid": "9c8d4ad2-...:0000002C00000300017C:00000000000000000001",
     "time": "2025-03-14T16:45:20.650Z", "datacontenttype": "application/json",
     "operation": "INS", "segmentindex": 0, "finalsegment": true,
     "data": "{\\"eventsource\\": {\\"db\\": \\"db1\\", \\"schema\\": \\"dbo\\", \\"tbl\\": \\"Purchases\\",
               \\"cols\\": [{\\"name\\": \\"purchase_id\\", \\"type\\": \\"int\\", \\"index\\": 0}, ...],
               \\"pkkey\\": [{\\"columnname\\": \\"purchase_id\\", \\"value\\": \\"105\\"}]},
              \\"eventrow\\": {\\"old\\": \\"{}\\", \\"current\\": \\"{\\\\\\"purchase_id\\\\\\": \\\\\\"105\\\\\\", ...}\\"}}"}

``data`` is a JSON string; inside it ``eventrow.old``/``current`` are JSON strings again whose
values are all strings, typed here from ``eventsource.cols[].type`` (SQL Server type names, see
:func:`spec_for_sql_type`). ``old`` = ``"{}"`` on an update means *before image unknown*: ``before``
is NULL, not a row of NULLs.

Bronze (:func:`read_bronze`)
    JSON files, one event per line (``*.json``/``*.jsonl``/``*.ndjson``), and Avro container files
    (``*.avro``, record ``ChangeEvent``; read with spark-avro). An Avro record is rendered as
    JSON text (``data`` bytes as a UTF-8 string), so bronze ``value`` is uniform: the envelope text.

Validation
    ``schemas/ces-cloudevent.schema.json`` (envelope) and ``schemas/ces-data.schema.json`` (``data``)
    compiled into Spark predicates (:mod:`sqlcdc.formats._schema_check`); jsonschema writes the
    quarantine message for the failing rows only.

Ordering
    ``sequence = (commit LSN, 20 zeros, sequence number)``: from ``data.eventsource.transaction``
    (``commitlsn``, ``sequencenumber``) when present, else parsed from ``logicalid``
    ``<guid>:<20-hex commit LSN>:<20-digit sequence>``. The commit LSN is validated, not padded
    (``0x1A``, 21 digits, non-hex text or the zero LSN: the event is quarantined with the reason;
    so is a ``time`` outside year 1..9999). CES gives no change LSN, so ``change_lsn`` is
    :data:`sqlcdc.lsn.BEFORE_ALL`. ``commit_time`` from ``time`` (else ``transaction.committime``).
    CES carries no transaction id: ``transaction_id`` is the commit LSN, which identifies the
    transaction. ``change_id`` is ``logicalid``: shared by the segments of a split event and by
    redeliveries of one event, distinct for distinct changes.

Split events
    A large event is split into segments sharing ``logicalid``, with ``segmentindex`` +
    ``finalsegment`` (or, as in the doc's own examples, ``splitindex`` + ``splittotalcnt``; a total of
    0 or 1 = not split). Segments are grouped by ``logicalid``, de-duplicated by index, and their
    ``data`` pieces joined in index order once the group is complete (final segment seen and every
    index from ``segment_index_base`` to it present). Source options:

    ``split_timeout`` (default ``"1 hour"``; seconds or ``"<n> seconds|minutes|hours|days"``)
        a group still incomplete this long after its first segment landed (bronze ``ingest_time``)
        is quarantined, one quarantine row per landed segment, by :func:`unrouted`.
    ``segment_index_base`` (default 0)
        the index of the first segment.

    Because reassembly needs rows from several runs, ``STREAMING = False``: silver *and* this
    source's quarantine are recomputed from all of bronze on every run (materialized views). A group
    that completes after it had timed out therefore moves from quarantine to silver: never lost,
    never decoded twice.

Columns and keys (:func:`columns_for`, when the pipeline is defined)
    Config ``columns:``/``keys:``, else the events': ``pkkey`` names give the keys and the distinct
    ``eventsource.cols`` in commit order give the columns. A set of columns that drops a column an
    earlier event listed, names two columns equal but for case, a name Delta cannot store (space
    ``,;{}()`` newline tab ``=`` backtick) or a type that cannot be read (``decimal(40,2)``,
    ``varchar(10``) never reshapes the table: :func:`decode` quarantines its events with the reason.
    Added columns are taken (schema evolution). What was found is remembered for :func:`decode`,
    which then runs no Spark job (inside a pipeline query function that is an error).

Conservation (every bronze record is accounted for; :func:`disposition` lists each one)
    ``invalid_envelope`` and ``timed_out`` records are one quarantine row each; an ``event`` (an
    unsplit event) is one silver or quarantine row; the records of a complete split group
    (``segment``, plus ``duplicate_segment`` redeliveries) are together one silver or quarantine row,
    whose lineage (``bronze_record_id``/``bronze_file``) is the group's final segment; ``pending``
    records belong to a group still within its timeout and are in neither yet. So
    ``silver + quarantine = invalid_envelope + timed_out + event + distinct complete groups``.
    Redeliveries of an unsplit event are each a silver row, sharing ``change_id`` (gold collapses
    them).

Example::

    from sqlcdc.formats import ces
    bronze = ces.read_bronze(spark, source, streaming=False)
    cols = ces.columns_for(table, source, spark)          # from config, else from the events
    d = ces.decode(bronze, table, cols)                   # d.changes, d.quarantine
    q = ces.unrouted(bronze, source, [table])             # bad envelopes, timeouts, other tables
    ces.unknown_types(cols)                               # [('shape', 'geography')] -> DQ metrics
"""

from __future__ import annotations

import functools
import json
from typing import Any, Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, BooleanType, IntegerType, StringType, StructField, StructType

from sqlcdc import dlt_meta, frames, lsn, model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import Decoded, Decoder, NotYetDiscovered
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats._ces_events import DATA_SCHEMA, DEFAULT_SPLIT_TIMEOUT, ENVELOPE_SCHEMA, _groups  # noqa: F401
from sqlcdc.formats._ces_events import _image_problem, _with_images
from sqlcdc.formats._ces_events import _key_disagrees, _pk_value, _routes, disposition, envelopes, events, split_timeout_seconds
from sqlcdc.formats._ces_events import routed, same_records, transaction_marks
from sqlcdc.formats._ces_metadata import _discover, _metadata_problems, cols_problem  # noqa: F401
from sqlcdc.formats._sqlserver import is_spark_type, is_sql_server_type, spec_for_sql_type, unknown_types
from sqlcdc.formats.base import bronze_columns, read_landed_files, read_text_lines
from sqlcdc.values import ColumnSpec, provided_columns, split_value_errors, typed_struct, typed_value, value_error

NAME = "ces"
STREAMING = False

DEFAULT_JSON_GLOB = "*.{json,jsonl,ndjson}"
DEFAULT_AVRO_GLOB = "*.avro"

OPERATIONS = {"INS": model.INSERT, "UPD": model.UPDATE, "DEL": model.DELETE}

#: The Avro record ``ChangeEvent`` of the CES doc: its fields (order kept) and Avro types.
_AVRO_FIELDS = (("specversion", "string"), ("type", "string"), ("source", "string"), ("id", "string"),
                ("logicalid", "string"), ("time", "string"), ("datacontenttype", "string"), ("operation", "string"),
                ("segmentindex", "int"), ("finalsegment", "boolean"), ("data", "bytes"))
_SPARK_OF = {"string": StringType(), "int": IntegerType(), "boolean": BooleanType(), "bytes": BinaryType()}
#: ... as a Spark schema.
AVRO_SCHEMA = StructType([StructField(n, _SPARK_OF[t]) for n, t in _AVRO_FIELDS])
#: ... as the reader schema of Avro's schema resolution: each field may be missing (NULL, the decoder
#: says what is), and what Avro promotes is read (``data`` written as a string); a file whose writer
#: schema it cannot read is quarantined as a file (:func:`sqlcdc.formats._avro_check.resolution_problem`).
AVRO_READER_SCHEMA = json.dumps({"type": "record", "name": "ChangeEvent",
                                 "fields": [{"name": n, "type": ["null", t], "default": None} for n, t in _AVRO_FIELDS]})

# ----------------------------------------------------------------------------- bronze


def read_bronze(spark: SparkSession, source: SourceConfig, *, streaming: bool = True) -> DataFrame:
    """Bronze rows (``record_id, value, source_file, ingest_time``) from the landing folder.

    Options: ``serialization`` = ``auto`` (default: JSON lines and Avro files side by side) |
    ``json`` | ``avro``; ``json_glob`` / ``avro_glob`` select the files. Blank lines are not events.
    """
    if not source.landing:
        raise ValueError(f"{source.file or 'pipeline config'}: sources.{source.name}: `landing` is required for ces")
    ser = str(source.options.get("serialization", "auto")).lower()
    if ser not in ("auto", "json", "avro"):
        raise ValueError(
            f"{source.file or 'pipeline config'}: sources.{source.name}.options.serialization: "
            f"{ser!r} is not one of auto, json, avro"
        )
    parts = []
    if ser in ("auto", "json"):
        parts.append(read_text_lines(  # (a blank line is no event)
            spark, source.landing, streaming=streaming, glob=source.options.get("json_glob", DEFAULT_JSON_GLOB)
        ))
    if ser in ("auto", "avro"):
        parts.append(read_avro(spark, source.landing, streaming=streaming,
                               glob=source.options.get("avro_glob", DEFAULT_AVRO_GLOB)))
    return functools.reduce(DataFrame.unionByName, parts)


def read_avro(spark: SparkSession, landing: str, *, streaming: bool = True, glob: str = DEFAULT_AVRO_GLOB) -> DataFrame:
    """Avro container files of ``ChangeEvent`` records as bronze rows, each rendered as JSON text.

    ``data`` (Avro ``bytes``) becomes a UTF-8 string, so the text equals the JSON serialization; a
    record whose ``data`` or text fields are not UTF-8 is kept as its bytes (refused as ``not_utf8``).
    A damaged file in a local run: as a damaged ``.gz`` (:func:`sqlcdc.formats.base.read_text_lines`),
    what Spark could read lands, plus one bronze row for the file, which is quarantined.
    """
    fields = [F.col(f.name) for f in AVRO_SCHEMA.fields if f.name != "data"]
    data = F.col("data").cast("string")
    # text that is not UTF-8 stays bytes (to_json would write U+FFFD): refused before any decoder
    texts = [(f.name, F.col(f.name)) for f in AVRO_SCHEMA.fields if f.dataType == StringType()] + [("data", data)]
    as_landed = F.concat(F.lit("{"), F.concat_ws(",", *[F.concat(F.lit(f'"{n}":"'), c, F.lit('"')) for n, c in texts]),
                         F.lit("}"))
    utf8 = frames.all_of([F.coalesce(F.is_valid_utf8(c), F.lit(True)) for _, c in texts])
    value = F.when(utf8, F.to_json(F.struct(*fields, data.alias("data")))).otherwise(as_landed)
    path = F.col("_metadata.file_path").alias("source_file")
    return read_landed_files(spark, landing, file_format="avro", streaming=streaming, glob=glob, schema=AVRO_SCHEMA,
                             avro_schema=AVRO_READER_SCHEMA, rows=lambda raw: bronze_columns(raw.select(value.alias("value"), path)))


# ----------------------------------------------------------------------------- columns & keys

#: What :func:`columns_for` / :func:`keys_for` found in the events, for :func:`decode` (definition
#: time: a query function must not scan or collect): ``{(source, table): {"keys": [...],
#: "first_seen": {column: (commit_lsn, sequence)} or None}}`` (by source, its location and table).
_discovered: dict[tuple[str, ...], dict[str, Any]] = {}


def _key(table: TableConfig, source: SourceConfig) -> tuple[str, ...]:
    return (source.name, str(source.landing or source.kafka or source.event_hubs), table.name, table.qualified)


def columns_for(table: TableConfig, source: SourceConfig, spark: SparkSession | None = None) -> list[ColumnSpec]:
    """The table's columns: from config ``columns:`` (SQL Server type names), else discovered from
    the ``eventsource.cols`` of the table's landed events.

    Discovery takes the events' distinct ``cols`` in commit order. A set of columns that lacks a
    column an earlier event had (a drop), names two columns equal but for case, a name Delta cannot
    store or a type that cannot be read does not define the table (its events are quarantined by
    :func:`decode`); otherwise it may add columns (schema evolution). The table is the latest such
    set, in its ``index`` order. Dropping a column needs an explicit change: ``columns:`` in config.
    The keys (``pkkey`` names of the latest event) are remembered for :func:`decode`.

    Raises :class:`sqlcdc.config.ConfigError` naming the table config when neither gives any column.
    """
    key = _key(table, source)
    if table.columns:
        if not table.keys and spark is not None:
            keys_for(table, source, spark)  # at definition time: decode() must not scan
        return [DECODER.config_column(c, i) for i, c in enumerate(table.columns, start=1)]
    found = _discover(table, source, spark) if spark is not None else None
    if not found or not found["cols"]:
        why = f" (events seen, none usable: {'; '.join(found['problems'])[:1000]})" if found and found["problems"] else ""
        raise NotYetDiscovered([
            f"{table.file or 'table config'}:1: columns: table {table.qualified} has no `columns:` and no valid "
            f"CES event for it was found in {source.landing or 'its Kafka topic'}{why}: its events wait in "
            "quarantine until one lands (or add `columns:`, name and SQL Server type per column)"
        ])
    specs = [spec_for_sql_type(c["name"], c["type"], ordinal=(c["index"] + 1 if c["index"] is not None else None))
             for c in found["cols"]]
    _discovered[key] = {"keys": list(table.keys) or found["keys"], "first_seen": found["first_seen"],
                        "names": [c.name for c in specs]}
    return specs


def keys_for(table: TableConfig, source: SourceConfig, spark: SparkSession | None = None,
             bronze: DataFrame | None = None) -> list[str]:
    """Key columns: config ``keys``, else the ``pkkey`` column names of the table's latest usable
    event (found by :func:`columns_for` when it ran; else looked up here: one Spark job, at
    pipeline definition time only). ``bronze`` is accepted for compatibility and not read."""
    if table.keys:
        return list(table.keys)
    key = _key(table, source)
    if _discovered.get(key, {}).get("keys"):
        return list(_discovered[key]["keys"])
    if spark is None:
        raise ConfigError([f"{table.file or 'table config'}:1: keys: table {table.qualified} has no `keys:`"])
    found = _discover(table, source, spark)
    if not found["keys"]:
        raise NotYetDiscovered([
            f"{table.file or 'table config'}:1: keys: table {table.qualified} has no `keys:` and no CES event "
            f"with a pkkey for it was found in {source.landing or 'its Kafka topic'}: its events wait in "
            "quarantine until one lands (or add `keys:`)"
        ])
    prev = _discovered.get(key, {})
    _discovered[key] = {**prev, "keys": found["keys"]}
    return list(found["keys"])


# ----------------------------------------------------------------------------- decode


def _decode_keys(table: TableConfig) -> list[str]:
    """Keys for :func:`decode`: config ``keys``, else what :func:`columns_for`/:func:`keys_for` found
    at definition time. Never a scan here: inside a pipeline query function that is an error."""
    if table.keys:
        return list(table.keys)
    found = _discovered.get(_key(table, table.source), {}).get("keys")
    if not found:
        raise ConfigError([
            f"{table.file or 'table config'}:1: keys: table {table.qualified} has no `keys:` and its pkkey "
            "columns were not looked up before decoding: call ces.columns_for or ces.keys_for with a "
            "SparkSession first (the pipeline does, when it is defined), or add `keys:`"
        ])
    return list(found)


def decode(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
    """Bronze of the table's source -> the table's canonical changes + quarantine rows.

    Only complete events of this table (``eventsource.schema``/``tbl``, case-insensitive) are
    decoded; pending and timed-out segments and other tables are :func:`unrouted`'s. Keys are the
    config's ``keys``, else the ``pkkey`` names :func:`columns_for` found when the pipeline was
    defined (no Spark job here: a pipeline query function may not run one).

    An event whose ``eventsource.cols`` cannot define the table is quarantined, never allowed to
    reshape it: a drop of a column earlier events have, names equal but for case, a name Delta
    cannot store, a type that cannot be read (:func:`cols_problem`).

    Quarantine reasons: the ``data`` schema message (jsonschema), images that are not JSON objects,
    an operation without the image it needs, values that do not read as their SQL Server type,
    a missing key value, no commit LSN. For example an ``INS`` whose ``current`` has
    ``"quantity": "two"`` for an ``int`` column gives
    ``event <logicalid> (dbo.Purchases): column quantity: cannot read ["two"] as int (text)``.
    """
    source = table.source
    if not columns:
        raise ValueError(f"{table.file or 'table config'}: table {table.qualified}: no columns to decode")
    keys = _decode_keys(table)
    by_name = {c.name: c for c in columns}
    key_specs = [by_name.get(k, ColumnSpec(k, "string", source_type=None)) for k in keys]

    ev = frames.where(events(bronze, source), _routes(table), "_routed")
    ev = _with_images(ev)
    old, cur, op_raw = F.col("_old"), F.col("_cur"), F.col("operation")
    op = F.when(op_raw == "INS", F.lit(model.INSERT)).when(op_raw == "UPD", F.lit(model.UPDATE)).when(
        op_raw == "DEL", F.lit(model.DELETE))
    has_old = old.isNotNull() & (F.size(old) > 0)
    has_cur = cur.isNotNull() & (F.size(cur) > 0)

    after_s, after_e = typed_struct(cur, columns, F.col("_cur_nested"))
    before_s, before_e = typed_struct(old, columns, F.col("_old_nested"))
    key_raw = [_pk_value(k) for k in keys]
    key_typed = [typed_value(r, s) for r, s in zip(key_raw, key_specs)]
    # Materialize the typed images once: later expressions read fields of these columns instead
    # of repeating the whole typing expression per column (that made planning take ~20 s).
    ev = ev.select(
        "*",
        after_s.alias("_after"), after_e.alias("_after_err"),
        before_s.alias("_before"), before_e.alias("_before_err"),
        F.struct(*[t.alias(k) for t, k in zip(key_typed, keys)]).alias("_key"),
        F.array(*[value_error(r, t, s) for r, t, s in zip(key_raw, key_typed, key_specs)]).alias("_key_err"),
        F.array(*[F.when(r.isNull(), F.lit(f"pkkey: no value for key column {k}")) for r, k in zip(key_raw, keys)]).alias("_key_missing"),
    )
    after, before = F.col("_after"), F.col("_before")
    after_err, before_err = F.col("_after_err"), F.col("_before_err")
    none = F.array().cast("array<string>")
    value_errors = F.concat(F.when(has_cur, after_err).otherwise(none), F.when(has_old, before_err).otherwise(none))
    value_reasons, value_warnings = split_value_errors(value_errors, columns, keys, table.bad_values)

    problems = F.concat(
        _metadata_problems(table, columns, _discovered.get(_key(table, table.source), {})),
        F.array(
            _image_problem("old"),
            _image_problem("current"),
            F.when((op_raw == "INS") & cur.isNotNull() & ~has_cur, F.lit("INS event with an empty eventrow.current")),
            F.when((op_raw == "UPD") & cur.isNotNull() & ~has_cur, F.lit("UPD event with an empty eventrow.current")),
            F.when((op_raw == "DEL") & old.isNotNull() & ~has_old, F.lit("DEL event with an empty eventrow.old")),
            F.when(F.col("commit_lsn_problem").isNotNull(), F.col("commit_lsn_problem")).when(
                F.col("commit_lsn").isNull(), F.lit(
                "no commit LSN: neither data.eventsource.transaction.commitlsn nor a logicalid "
                "<guid>:<20-hex commit LSN>:<20-digit sequence>")),
            F.col("commit_ts_problem"),
            F.when(F.col("commit_lsn").isNotNull() & F.col("seq_number").isNull(), F.lit(
                "no sequence number: neither data.eventsource.transaction.sequencenumber nor a logicalid "
                "<guid>:<20-hex commit LSN>:<20-digit sequence>")),
        ),
        F.col("_key_missing"),
        F.col("_key_err"),
        F.array(*[_key_disagrees(k) for k in keys if k in by_name]),
        value_reasons,
    )
    problems = frames.compact(problems)
    ev = ev.select("*", problems.alias("_problems"))
    schema_ok = F.size("_data_violations") == 0

    is_del = F.col("operation") == "DEL"
    before_c = F.when(has_old, before)
    after_c = F.when(~is_del & has_cur, after)
    provided = F.when(~is_del, provided_columns(cur, columns))
    # INSERT: every provided column is new; UPDATE: derived when both images are known, else
    # NULL (unknown: old = "{}"); DELETE: NULL.
    changed = F.when(F.col("operation") == "INS", provided).when(
        (F.col("operation") == "UPD") & has_old & has_cur,
        frames.compact([
            F.when(F.array_contains(F.map_keys(cur), c.name) & ~before[c.name].eqNullSafe(after[c.name]), F.lit(c.name))
            for c in columns
        ]),
    )
    change = model.change_row(
        change_id=F.col("logicalid"),
        source_format=NAME,
        table_name=table.name,
        op=op,
        key=F.col("_key"),
        before=before_c,
        after=after_c,
        sequence=lsn.sequence(F.col("commit_lsn"), F.lit(lsn.BEFORE_ALL), F.col("seq_number")),
        source_database=F.col("src_db"),
        source_schema=F.col("src_schema"),
        source_table=F.col("src_table"),
        provided_columns=provided,
        changed_columns=changed,
        commit_time=F.col("commit_ts"),
        transaction_id=F.col("commit_lsn"),
        value_warnings=value_warnings,
    )
    schema_msg = sc.explain_udf(DATA_SCHEMA)(F.when(~schema_ok, F.col("data")))
    reason = F.when(
        ~schema_ok,
        F.concat(F.lit("data: "), F.coalesce(schema_msg, F.array_join(F.col("_data_violations"), "; "))),
    ).otherwise(F.array_join(F.array_distinct(F.col("_problems")), "; "))  # pkkey and current may say the same
    rules = F.when(~schema_ok, F.transform(F.col("_data_violations"), lambda r: F.concat(F.lit("ces-data "), r))).otherwise(
        F.array(F.lit("ces-decode"))
    )
    return Decoded.split(ev, schema_ok & (F.size("_problems") == 0), change, model.quarantine_row(
        source_name=source.name,
        source_format=NAME,
        reason=F.format_string("event %s (%s.%s): %s", F.col("logicalid"), F.col("src_schema"), F.col("src_table"), reason),
        table_name=table.name,
        rules=rules,
    ))


# ----------------------------------------------------------------------------- unrouted


def unrouted(bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
    """Quarantine rows no table's :func:`decode` produces: envelopes that fail the CloudEvent
    schema, segments of split groups past ``split_timeout``, and complete events of tables that
    are not onboarded (or whose ``data`` names no table)."""
    tables = list(tables)
    env = envelopes(bronze, source)
    invalid = frames.where(env, F.size("_violations") > 0, "_invalid")
    env_msg = sc.explain_udf(ENVELOPE_SCHEMA)(F.col("value"))
    q_invalid = invalid.select(
        *model.quarantine_row(
            source_name=source.name,
            source_format=NAME,
            reason=F.concat(F.lit("envelope: "), F.coalesce(env_msg, F.array_join(F.col("_violations"), "; "))),
            rules=F.transform(F.col("_violations"), lambda r: F.concat(F.lit("ces-cloudevent "), r)),
        )
    )

    groups = _groups(env, source)
    late = groups.where("timed_out").select(
        "logicalid", "indexes", "expected_segments", "first_seen", F.explode("all_segs").alias("s")
    )
    timeout = split_timeout_seconds(source)
    late_reason = F.format_string(
        "split event %s incomplete after split_timeout (%d s): segments %s of %s landed since %s; "
        "the final segment or a middle one never arrived",
        F.col("logicalid"),
        F.lit(timeout),
        F.array_join(F.col("indexes").cast("array<string>"), ","),
        F.coalesce(F.col("expected_segments").cast("string"), F.lit("unknown (final segment not seen)")),
        F.col("first_seen").cast("string"),
    )
    q_late = late.select(
        F.col("s.record_id").alias("record_id"),
        F.col("s.value").alias("value"),
        F.col("s.source_file").alias("source_file"),
        F.col("s.ingest_time").alias("ingest_time"),
        late_reason.alias("_reason"),
    ).select(
        *model.quarantine_row(source_name=source.name, source_format=NAME, reason=F.col("_reason"),
                              rules=F.array(F.lit("ces-split-timeout")))
    )

    ev = events(bronze, source)
    routed = frames.any_of([_routes(t) for t in tables])
    stray = frames.where(ev, ~routed, "_stray")
    schema_ok = F.size("_data_violations") == 0
    data_msg = sc.explain_udf(DATA_SCHEMA)(F.when(~schema_ok, F.col("data")))
    stray_reason = F.when(
        F.col("src_table").isNull(),
        F.concat(F.lit("event "), F.col("logicalid"), F.lit(": data names no table: "),
                 F.coalesce(data_msg, F.array_join(F.col("_data_violations"), "; "))),
    ).otherwise(
        F.format_string("event %s: table %s.%s.%s is not onboarded for source %s", F.col("logicalid"),
                        F.coalesce(F.col("src_db"), F.lit("?")), F.col("src_schema"), F.col("src_table"),
                        F.lit(source.name))
    )
    q_stray = stray.select(
        *model.quarantine_row(source_name=source.name, source_format=NAME, reason=stray_reason,
                              rules=F.array(F.lit("ces-unrouted")))
    )
    return q_invalid.unionByName(q_late).unionByName(q_stray)


class Ces(Decoder):
    """SQL Server 2025 Change Event Streaming CloudEvents (JSON lines or Avro), split events reassembled."""

    name, label = NAME, "SQL Server (Change Event Streaming)"
    dlt_meta_select = staticmethod(dlt_meta.ces_select)
    streaming = STREAMING
    options = {
        "serialization": {"enum": ["auto", "json", "avro"], "description": "what lands: JSON lines, Avro, or both"},
        "json_glob": {"type": "string", "description": "JSON-lines file names (Hadoop glob)"},
        "avro_glob": {"type": "string", "description": "Avro file names (Hadoop glob)"},
        "segment_index_base": {"enum": [0, 1], "description": "index of a split event's first segment"},
        "split_timeout": {"type": ["string", "integer"], "description": "how long split segments wait for the rest (seconds, or '15 minutes')"},
        "database": {"type": "string", "description": "the source database, when events do not say"},
    }
    read_bronze = staticmethod(read_bronze)
    columns_for = staticmethod(columns_for)
    decode = staticmethod(decode)
    unrouted = staticmethod(unrouted)
    keys_for = staticmethod(keys_for)
    unknown_types = staticmethod(unknown_types)
    disposition = staticmethod(disposition)
    routed = staticmethod(routed)
    transaction_marks = staticmethod(transaction_marks)
    same_records = staticmethod(same_records)
    transaction_end = "later_commit"  # CES says no event count per commit
    depends_on_time = True  # split segments time out (split_timeout) with nothing new landed

    def config_column(self, column: dict, ordinal: int) -> ColumnSpec:
        """A SQL Server type name, as CES's ``eventsource.cols`` spell them (:func:`spec_for_sql_type`),
        or a Spark SQL type that is none (``boolean``, ``timestamp_ntz``, ``double``: read from the text)."""
        low = str(column["type"]).strip().lower()
        if is_spark_type(low) and not is_sql_server_type(low):
            return ColumnSpec(column["name"], low, lob=bool(column.get("lob", False)), ordinal=ordinal,
                              source_type=str(column["type"]))
        return spec_for_sql_type(column["name"], column["type"], ordinal=ordinal, lob=column.get("lob"))


DECODER = Ces()
