"""Qlik Replicate / Talend Kafka target: metadata and data messages (JSON) -> canonical changes.

Replicate writes two kinds of message per source table, one JSON document per landed line:

* **metadata** (``MD``): ``lineage`` (``server``, ``task``, ``schema``, ``table``, ``tableVersion``,
  ``timestamp``), ``tableStructure.tableColumns`` (per column: ``ordinal``, ``type``, ``length``,
  ``precision``, ``scale``, ``primaryKeyPosition``) and ``dataSchema``. A DDL change on the source
  increments ``tableVersion`` and produces a new metadata message.
* **data** (``DT``): ``headers`` (``operation`` REFRESH | INSERT | UPDATE | DELETE,
  ``changeSequence``, ``timestamp``, ``streamPosition``, ``transactionId``, ``changeMask``,
  ``columnMask``, ``externalSchemaId``, ``transactionEventCounter``, ``transactionLastEvent``),
  ``data`` and ``beforeData``.

Both come bare or in the wrapper Replicate writes in JSON mode::

    {"magic": "atMSG", "type": "DT", "headers": null, "messageSchemaId": null,
     "messageSchema": null, "message": {"data": {...}, "beforeData": {...}, "headers": {...}}}

Decisions (each one tested in ``tests/test_qlik.py``)
-----------------------------------------------------

Validation
    ``schemas/qlik-data-message.schema.json`` and ``schemas/qlik-metadata-message.schema.json``
    are the definition. On the hot path they are compiled into Spark predicates over a VARIANT
    (:mod:`sqlcdc.formats._schema_check`); ``jsonschema`` runs only on the failing records, to word
    the quarantine reason. A differential test proves both agree on generated good and bad messages.

Which table a data message belongs to
    First the message's own ``schema``/``table`` fields (tasks that add them); else its
    ``headers.externalSchemaId`` equal to a metadata message's ``schemaId``; else the table
    config option ``path_regex`` matched against the landed file's path (one topic per table).
    Names compare case-insensitively (SQL Server's default collation). A message two tables could
    take (no schema, two tables of its name; a file two ``path_regex`` match) goes to quarantine.

Which metadata version types a data message
    The latest structure per (schema, table, tableVersion) is kept (a re-sent version: the latest
    ``lineage.timestamp``, then ingest time). A data message is read with, in this order: the
    version whose ``schemaId`` equals ``headers.externalSchemaId``; else the newest version whose
    column names are exactly the names in ``data``/``beforeData`` (Replicate always writes every
    column of the version, NULLs included); else the newest version that has all of them. A data
    message for a table with **no metadata at all** is quarantined with that reason, never guessed.
    As silver is recomputed from bronze each run (``STREAMING = False``), the record is decoded in
    the first run after its metadata lands: quarantine is a holding area here, not a grave.

Masks (``changeMask``, ``columnMask``)
    Hex digits, little-endian: the first two digits are byte 0 and hold ordinals 1-8 (bit 0 =
    ordinal 1), the next two hold ordinals 9-16, and so on. ``0B`` = bits 0, 1, 3 = ordinals
    1, 2, 4 (the seed's own example). An odd number of digits gets a leading ``0``. The option
    ``mask_byte_order: big`` (table or source ``options``) reads the bytes the other way round, for
    producers that print the mask as one big-endian number. Ordinals map to names through the
    metadata version that types the message. ``columnMask`` -> ``provided_columns`` (a column
    absent from the mask keeps its value in gold; a present NULL sets NULL); an empty or missing
    ``columnMask`` means every column the message carries. ``changeMask`` -> ``changed_columns``
    (empty/missing: unknown, NULL). LOB columns are never in ``changeMask`` (Replicate leaves them
    out), so ``changed_columns`` does not list them even when they changed.

Ordering (``sequence``, see :mod:`sqlcdc.lsn`)
    Qlik exposes no SQL Server LSN. ``commit_lsn`` = ``headers.changeSequence`` (fixed width,
    monotonic across the task; left-padded with zeros to 40 so a wider sequence still sorts after
    a narrower one; a CDC message whose changeSequence is not 1 to 40 digits is quarantined with
    the reason: it cannot be ordered, and is never given a default), ``change_lsn`` =
    :data:`sqlcdc.lsn.BEFORE_ALL`, ``serial`` = ``transactionEventCounter``. REFRESH (full load) records get
    ``commit_lsn = BEFORE_ALL``: they order before every CDC change, as the brief requires. A
    consequence: a *reload* after CDC started would order its REFRESH rows before the CDC rows
    (Replicate reloads truncate the target first; run a full refresh of the pipeline then). Since
    the sequence is not in LSN space, a Qlik table cannot be continued from another producer.

Keys
    ``keys:`` in the table config, else the columns with ``primaryKeyPosition > 0`` in the newest
    metadata version, in key-position order (:func:`keys_for`). :func:`columns_for` remembers
    them for :func:`decode` (no landing scan inside a query function). ``silver.key`` carries
    them, so gold can read them from the silver schema too; a pipeline building gold for a Qlik
    table without ``keys:`` in config must ask :func:`keys_for` rather than ``TableConfig.keys``.

Cost
    The schemas compile to large Spark expressions: building them costs seconds of py4j calls
    (done once per process and cached) and the first query pays whole-stage code generation.
    Data messages are validated against the data schema only and metadata messages (pre-filtered
    on the text ``tableStructure``) against the metadata schema only, to keep that code small.

Types (:func:`spec_for`)
    INT1/2/4/8 -> tinyint/smallint/int/bigint; UINT1/2/4 -> smallint/int/bigint; UINT8 ->
    decimal(20,0); NUMERIC(p,s) -> decimal(p,s) (p > 38 -> string, so no digit is lost); REAL4/8 ->
    float/double; STRING/WSTRING -> string; CLOB/NCLOB -> string (LOB); DATE -> date; TIME ->
    string ``HH:mm:ss.SSSSSS`` (Delta has no TIME; as every producer's); DATETIME -> timestamp_ntz
    (Replicate's DATETIME has no zone; fractions beyond microseconds are truncated); BOOLEAN ->
    boolean; BYTES/BLOB -> binary from hex digits (Replicate's JSON spelling of binary). An unknown
    type name is kept as string.

Schema evolution
    :func:`columns_for` returns the union of every version's columns (newest version first, in its
    ordinal order; then columns only older versions had). A column added by a later version reads
    NULL in rows typed by an earlier version and is not in their ``provided_columns``. Because
    ``columns_for`` runs at pipeline definition time it reads the metadata messages from the landing
    folder (a Spark scan filtered on ``"tableStructure"``; put them under
    ``options.metadata_landing`` to make that scan tiny). The next pipeline run after a new
    ``tableVersion`` lands sees the new column; silver and gold are recomputed, so earlier rows
    read NULL for it.

Metadata that must not reshape the table
    A version that drops a column an older usable version has (of the table's columns: a config
    ``columns:`` that leaves it out accepts the drop), names two columns equal but for case, names
    a column with a character Delta cannot store (space ``,;{}()`` newline tab ``=`` backtick), or
    has a NUMERIC/DECIMAL of precision above 38 or scale above precision is not usable: it adds no
    column and gives no key, and the data messages it types are quarantined with
    ``metadata version <n> of <schema.table> cannot type this message without reshaping the
    table: <why>`` (:func:`_versions_with_problems`). The metadata message itself is still skipped.

Options (source ``options``, overridable per table ``options``)
    ``metadata_landing``: extra folder with metadata messages; ``glob``: file name filter;
    ``path_regex`` (table only): landed files of this table; ``mask_byte_order``: little | big.

Example::

    from sqlcdc.formats import qlik
    bronze = qlik.read_bronze(spark, source, streaming=False)
    cols = qlik.columns_for(table, source, spark)
    out = qlik.decode(bronze, table, cols)
    out.changes.show(); out.quarantine.show()
"""

from __future__ import annotations

import logging
from typing import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import dlt_meta, frames, lsn, model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import Decoded, Decoder, NotYetDiscovered
from sqlcdc.formats._masks import BYTE_ORDERS, mask_has
from sqlcdc.formats._qlik_data import (
    _claims, _data_rows, _matches, _option, _padded_sequence, _sequence_problem, _utc, transaction_marks,
)
from sqlcdc.formats._qlik_messages import _explain_udf, _get, _inline, _parsed, valid
from sqlcdc.formats._qlik_metadata import (
    _metadata_cols, _metadata_parsed, _metadata_problem, _newest_keys, _table_versions, _usable, _versions_of,
    _versions_with_problems, _union_columns, metadata_landing, metadata_versions,
)
from sqlcdc.formats._qlik_types import spec_for
from sqlcdc.formats.base import claimants, read_text_lines, record_id
from sqlcdc.values import COMMIT_TIME_RANGE, ColumnSpec, null_key_reasons, provided_columns, split_value_errors, typed_struct

# Re-exported: the decoder is split into the private modules _qlik_*; these stay ``qlik.<name>``.
from sqlcdc.formats._qlik_data import SEQUENCE_WIDTH  # noqa: F401
from sqlcdc.formats._qlik_messages import DATA_SCHEMA, METADATA_SCHEMA, explain, is_valid  # noqa: F401
from sqlcdc.formats._qlik_metadata import COLUMN_STRUCT, discover  # noqa: F401

NAME = "qlik"
STREAMING = False  # silver needs the metadata messages (other rows) and is recomputed each run
OPERATIONS = {"REFRESH": model.SNAPSHOT, "INSERT": model.INSERT, "UPDATE": model.UPDATE, "DELETE": model.DELETE}

log = logging.getLogger(__name__)


# --- bronze ----------------------------------------------------------------------------------------


def read_bronze(spark: SparkSession, source: SourceConfig, *, streaming: bool = True) -> DataFrame:
    """Landed Qlik messages, one JSON document per line (data and metadata messages alike).

    With ``options.metadata_landing`` the metadata messages' folder is read too (union).
    """
    if not source.landing:
        raise ConfigError([f"{source.file}: sources.{source.name}.landing: required for a Qlik file source"])
    glob = source.options.get("glob")
    out = read_text_lines(spark, source.landing, streaming=streaming, glob=glob)
    extra = metadata_landing(source)
    if extra:
        out = out.unionByName(read_text_lines(spark, extra, streaming=streaming, glob=glob))
    return out


def is_skipped(bronze: DataFrame | None = None) -> Column:
    """Valid metadata messages: they are not changes (counted, not quarantined).

    Their content reaches silver as the typing of the data messages. A metadata message whose
    columns do not read is *not* skipped: :func:`unrouted` quarantines it with the reason.
    """
    valid, kind, inner = _inline(("MD",))
    problem = _metadata_problem(_metadata_cols(inner))
    # the kind first, in a CASE: a data message (most records) skips the metadata rules
    return F.coalesce(F.when(kind == "MD", valid & problem.isNull()), F.lit(False))


def unrouted(bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
    """Quarantine rows for what no table's :func:`decode` takes.

    Invalid messages (reason: the jsonschema message, rules: the compiled rules broken), metadata
    messages whose columns do not read, and data messages of no onboarded table (or whose table
    cannot be told).
    """
    tables = list(tables)
    # 1. invalid records and unusable metadata messages: one pass; jsonschema only on these rows
    parsed = _parsed(bronze)
    problem = _metadata_problem(_metadata_cols(F.col("_inner")))
    md_problem = F.when(
        valid() & (F.col("_kind") == "MD") & problem.isNotNull(),
        F.format_string(
            "metadata message for %s.%s version %s: %s",
            _get(F.col("_inner"), "lineage", "schema", as_type="string"),
            _get(F.col("_inner"), "lineage", "table", as_type="string"),
            _get(F.col("_inner"), "lineage", "tableVersion", as_type="string"),
            problem,
        ),
    )
    bad = parsed.select("*", md_problem.alias("_md_problem")).where(~valid() | F.col("_md_problem").isNotNull())
    bad = bad.select(
        *model.quarantine_row(
            source_name=source.name, source_format=NAME,
            reason=F.coalesce(F.col("_md_problem"), _explain_udf()(F.col("value")),
                              F.array_join(F.col("_rules"), "; ")),
            rules=F.when(valid(), F.array(F.lit("metadata"))).otherwise(F.col("_rules")),
        )
    )
    # 2. valid data messages no onboarded table takes
    versions = metadata_versions(_metadata_parsed(bronze))
    dt = _data_rows(_parsed(bronze, ("DT",)), versions)
    names = ", ".join(t.qualified for t in tables) or "none"
    reason = F.when(
        F.size("_claimants") > 1,
        F.format_string("more than one onboarded table could take this data message (%s): it %s; "
                        "name the schema in the message or make the tables' path_regex disjoint",
                        F.array_join("_claimants", ", "), F.when(F.col("_table").isNotNull(), F.format_string(
                            "names table %s but no schema", F.col("_table"))).otherwise(
                            "names no table and its file matches their options.path_regex")),
    ).when(
        F.col("_table").isNotNull(),
        F.format_string("no onboarded table for %s.%s in source %s (onboarded: %s)",
                        F.coalesce(F.col("_schema"), F.lit("?")), F.col("_table"), F.lit(source.name), F.lit(names)),
    ).otherwise(F.format_string(
        "cannot tell which table this data message belongs to: it has no schema/table fields, its "
        "headers.externalSchemaId (%s) matches no metadata message's schemaId, and no table's "
        "options.path_regex matches its file", F.coalesce(F.col("_ext_id"), F.lit("absent"))))
    orphans = dt.select("*", claimants(_claims, tables).alias("_claimants")).where(F.size("_claimants") != 1).select(
        *model.quarantine_row(source_name=source.name, source_format=NAME, reason=reason, rules=F.array(F.lit("routing")))
    )
    return bad.unionByName(orphans)


def routed(bronze: DataFrame, source: SourceConfig, table: TableConfig) -> DataFrame:
    """The data messages of ``table``: what waits in quarantine while no usable metadata message
    of it has landed (:meth:`Decoder.waiting`)."""
    return _data_rows(_parsed(bronze, ("DT",)), metadata_versions(_metadata_parsed(bronze))).where(_matches(table))


def decode(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
    """Bronze rows of ``table`` -> canonical changes + quarantine rows.

    ``bronze`` holds every landed record of the source (metadata messages included: they type the
    data messages). See the module docstring for routing, versions, masks, ordering and keys.
    """
    source = table.source
    byte_order = str(_option(table, source, "mask_byte_order", "little")).lower()
    keys = list(table.keys) or _keys_from_columns(table, columns)
    names = [c.name for c in columns]
    versions = metadata_versions(_metadata_parsed(bronze))
    dt = frames.where(_data_rows(_parsed(bronze, ("DT",)), versions), _matches(table), "_mine")

    # all versions of this table as one row (an empty array when none arrived): broadcast to every message
    catalog = _versions_with_problems(_table_versions(versions, table), ("version", "schema_id", "server", "task", "cols"),
                                      f"{table.schema}.{table.table}", names)
    dt = dt.crossJoin(F.broadcast(catalog))

    op_raw = F.col("_op")
    is_delete = op_raw == "DELETE"
    raw_after, raw_before = F.col("_raw_after"), F.col("_raw_before")  # the images (_qlik_data._data_rows)
    empty = F.array().cast("array<string>")
    msg_names = F.array_sort(F.array_union(
        F.coalesce(F.map_keys(raw_after), empty), F.coalesce(F.map_keys(raw_before), empty)))

    def rank(v: Column) -> Column:
        return (
            F.when(F.col("_ext_id").isNotNull() & (F.col("_ext_id") == v["schema_id"]), F.lit(1))
            .when(v["names"] == msg_names, F.lit(2))
            .when(F.size(F.array_except(msg_names, v["names"])) == 0, F.lit(3))
            .otherwise(F.lit(9))
        )

    ranked = F.transform("_versions", lambda v: F.struct(rank(v).alias("r"), (-v["version"]).alias("nv"), v.alias("m")))
    best = F.array_min(F.filter(ranked, lambda x: x["r"] < 9))
    dt = dt.select("*", msg_names.alias("_msg_names"), best["m"].alias("_meta"))

    after, after_errors = typed_struct(raw_after, columns, F.col("_nested_after"))
    before, before_errors = typed_struct(raw_before, columns, F.col("_nested_before"))
    meta_cols = F.col("_meta.cols")

    def mask_names(mask: Column) -> Column:
        hit = F.filter(meta_cols, lambda c: mask_has(mask, c["ordinal"], byte_order))
        return F.filter(F.transform(hit, lambda c: c["name"]), lambda n: n.isin(*names) if names else F.lit(False))

    has_col_mask = F.coalesce(F.length(F.trim(F.col("_column_mask"))) > 0, F.lit(False))
    has_change_mask = F.coalesce(F.length(F.trim(F.col("_change_mask"))) > 0, F.lit(False))
    provided = F.when(is_delete, F.lit(None).cast("array<string>")).when(
        has_col_mask, mask_names(F.col("_column_mask"))
    ).otherwise(provided_columns(raw_after, columns) if columns else empty)
    changed = F.when(has_change_mask, mask_names(F.col("_change_mask")))
    dt = dt.select(
        "*", after.alias("_after0"), before.alias("_before"), provided.alias("_provided"), changed.alias("_changed"),
        F.concat(after_errors, before_errors).alias("_value_errors"),
    )

    # An UPDATE whose columnMask leaves a key column out keeps that key value from beforeData.
    is_update = F.col("_op") == "UPDATE"
    after_values = {}
    for c in names:
        value = F.col("_after0")[c]
        if c in keys:
            value = F.when(
                is_update & F.col("_provided").isNotNull() & ~F.array_contains(F.col("_provided"), c), F.col("_before")[c]
            ).otherwise(value)
        after_values[c] = value
    after_s = F.struct(*[v.alias(c) for c, v in after_values.items()])
    provided_s = F.when(
        is_update & F.col("_provided").isNotNull(),
        F.array_union(F.col("_provided"), F.array(*[F.lit(k) for k in keys]) if keys else empty),
    ).otherwise(F.col("_provided"))
    # the key from the image's key fields, in the same select as the image (one select fewer)
    key_of = {k: F.when(is_delete, F.col("_before")[k]).otherwise(after_values.get(k, F.col("_after0")[k])) for k in keys}
    key = F.struct(*[key_of[k].alias(k) for k in keys]) if keys else F.struct()
    dt = dt.select("*", after_s.alias("_after"), provided_s.alias("_provided_k"), key.alias("_key"))

    unknown = F.array_except(F.col("_msg_names"), F.flatten(F.transform("_versions", lambda v: v["names"])))
    qualified = f"{table.schema}.{table.table}"
    problem = (
        F.when(F.size("_versions") == 0, F.lit(
            f"no metadata message for {qualified} has arrived yet: the data message is held in quarantine, not "
            "guessed; silver is recomputed from bronze each run, so it is decoded once the metadata lands"))
        .when(F.col("_meta").isNull() & (F.size(unknown) > 0), F.format_string(
            f"column(s) %s of the data message are in no metadata version of {qualified} (versions: %s)",
            F.array_join(unknown, ", "), F.array_join(F.transform("_versions", lambda v: v["version"].cast("string")), ", ")))
        .when(F.col("_meta").isNull(), F.format_string(
            f"no single metadata version of {qualified} has all the columns of the data message (%s)",
            F.array_join(F.col("_msg_names"), ", ")))
        .when(F.col("_meta.problem").isNotNull(), F.format_string(
            f"metadata version %s of {qualified} cannot type this message without reshaping the table: %s",
            F.col("_meta.version").cast("string"), F.col("_meta.problem")))
        .when(F.lit(not keys), F.lit(
            f"{qualified} has no key: no column with primaryKeyPosition > 0 in its metadata and no `keys` in config"))
    )
    problem = F.coalesce(
        problem,
        _sequence_problem(F.col("_op"), F.col("_change_seq")),
        F.when(F.col("_counter_text").isNotNull() & F.col("_counter").isNull(), F.format_string(
            "headers.transactionEventCounter '%s' is not an integer of at most 18 digits: the change cannot be "
            "ordered within its transaction", F.substring(F.col("_counter_text"), 1, 60))),
        F.when((F.col("_op") != "REFRESH") & F.col("_ts").isNotNull() & _utc(F.col("_ts")).isNull(), F.format_string(
            f"headers.timestamp '%s' is not a UTC time within {COMMIT_TIME_RANGE}", F.substring(F.col("_ts"), 1, 60))),
    )
    value_reasons, value_warnings = split_value_errors(F.col("_value_errors"), columns, keys, table.bad_values)
    reasons = frames.compact(
        F.concat(
            F.array(problem),
            F.when(problem.isNull(), value_reasons).otherwise(empty),
            F.when(problem.isNull(), null_key_reasons(F.col("_key"), keys, suffix=F.format_string(
                " in the %s message", F.col("_op")))).otherwise(empty),
        )
    )
    dt = dt.select("*", reasons.alias("_reasons"))

    op = F.element_at(F.create_map(*[x for k, v in OPERATIONS.items() for x in (F.lit(k), F.lit(v))]), F.col("_op"))
    is_refresh = F.col("_op") == "REFRESH"
    sequence = lsn.sequence(
        F.when(is_refresh, F.lit(lsn.BEFORE_ALL)).otherwise(_padded_sequence(F.col("_change_seq"))),
        F.lit(lsn.BEFORE_ALL),
        F.coalesce(F.col("_counter"), F.lit(0)),
    )
    inner = F.col("_inner")
    change_id = record_id(
        F.lit(NAME), F.lower(F.coalesce(F.col("_schema"), F.lit(table.schema))),
        F.lower(F.coalesce(F.col("_table"), F.lit(table.table))), F.col("_op"), F.col("_change_seq"),
        F.col("_counter"), F.col("_tx"), F.to_json(_get(inner, "data")), F.to_json(_get(inner, "beforeData")),
    )
    return Decoded.split(
        dt, F.size("_reasons") == 0,
        model.change_row(
            change_id=change_id,
            source_format=NAME,
            table_name=table.name,
            op=op,
            key=F.col("_key"),
            before=F.when(F.col("_op").isin("UPDATE", "DELETE") & raw_before.isNotNull(), F.col("_before")),
            after=F.when(~is_delete, F.col("_after")),
            sequence=sequence,
            source_server=F.concat_ws("/", F.col("_meta.server"), F.col("_meta.task")),
            source_schema=F.coalesce(F.col("_schema"), F.lit(table.schema)),
            source_table=F.coalesce(F.col("_table"), F.lit(table.table)),
            provided_columns=F.col("_provided_k"),
            changed_columns=F.col("_changed"),
            commit_time=F.when(~is_refresh, _utc(F.col("_ts"))),
            transaction_id=F.col("_tx"),
            value_warnings=value_warnings,
        ),
        model.quarantine_row(
            source_name=source.name, source_format=NAME, table_name=table.name,
            reason=F.array_join(F.col("_reasons"), "; "), rules=F.array(F.lit("decode")),
        ),
    )


# --- columns and keys (pipeline definition time) ----------------------------------------------------


def columns_for(table: TableConfig, source: SourceConfig, spark: SparkSession | None = None) -> list[ColumnSpec]:
    """The table's typed columns: the union of every metadata version's columns (see module doc).

    ``columns:`` in the table config override the type of a column by name (Spark SQL type); when
    no metadata message has landed yet they define the table, so it can be onboarded before its
    first metadata message (its data messages wait in quarantine until then). With neither,
    :class:`~sqlcdc.formats.NotYetDiscovered` says so: the pipeline declares no silver for the
    table this run and quarantines its data messages with that reason (:func:`waiting`).
    """
    overrides = {c["name"]: c for c in table.columns}
    every = _versions_of(table, source, spark)
    versions = _usable(every)
    if not versions:
        if table.columns:
            return [ColumnSpec(c["name"], c["type"], lob=bool(c.get("lob", False))) for c in table.columns]
        why = "; ".join(f"version {v['version']}: {v['problem']}" for v in every)
        raise NotYetDiscovered([
            f"{table.file}:1: table: no {'usable ' if every else ''}Qlik metadata message for {table.qualified} under "
            f"{', '.join(p for p in (source.landing, source.options.get('metadata_landing')) if p)} yet"
            f"{f' ({why[:1000]})' if why else ''}, and no "
            "`columns:` in the table config: its data messages wait in quarantine until a metadata message lands "
            "(or give `columns:` and `keys:`)"
        ])
    _discovered_keys[(source.name, table.name)] = list(table.keys) or _newest_keys(versions)
    newest = {c["name"] for c in max(versions, key=lambda v: v["version"])["cols"]}
    union = _union_columns(versions)
    if table.columns:  # a column the newest version dropped stays only if the config lists it
        union = [c for c in union if c["name"] in newest or c["name"] in overrides]
    specs = []
    for c in union:
        if c["name"] in overrides:
            o = overrides[c["name"]]
            specs.append(ColumnSpec(c["name"], o["type"], lob=bool(o.get("lob", False)), ordinal=c["ordinal"], source_type=c["type"]))
        else:
            specs.append(spec_for(c["name"], c["type"], precision=c["precision"], scale=c["scale"], ordinal=c["ordinal"]))
    return specs


_discovered_keys: dict[tuple[str, str], list[str]] = {}


def keys_for(table: TableConfig, source: SourceConfig | None = None, spark: SparkSession | None = None) -> list[str]:
    """Key columns: ``keys:`` from config, else ``primaryKeyPosition`` of the newest metadata version.

    >>> # metadata: ID (primaryKeyPosition 1), NAME (0)  ->  ["ID"]
    """
    if table.keys:
        return list(table.keys)
    source = source or table.source
    versions = _usable(_versions_of(table, source, spark))
    if not versions:
        return []
    keys = _newest_keys(versions)
    _discovered_keys[(source.name, table.name)] = keys
    return keys


def _keys_from_columns(table: TableConfig, columns: list[ColumnSpec]) -> list[str]:
    """Keys for :func:`decode`: remembered by :func:`columns_for` (pipeline definition time), so a
    query function never has to scan the landing folder itself."""
    found = _discovered_keys.get((table.source.name, table.name))
    if found is None:
        found = keys_for(table)
    return [k for k in found if k in {c.name for c in columns}]


class Qlik(Decoder):
    """Qlik Replicate Kafka-target messages (data and metadata, bare or atMSG-wrapped), one per line."""

    name, label = NAME, "SQL Server (Qlik Replicate)"
    dlt_meta_select = staticmethod(dlt_meta.qlik_select)
    streaming = STREAMING
    options = {
        "glob": {"type": "string", "description": "landed file names to read (Hadoop glob)"},
        "metadata_landing": {"type": "string", "description": "a second folder holding the metadata messages"},
        "mask_byte_order": {"enum": list(BYTE_ORDERS), "description": "byte order of changeMask/columnMask"},
        "path_regex": {"type": "string",
                       "description": "(table) the landed files of this table (a file two tables' regexes match is quarantined)"},
    }
    read_bronze = staticmethod(read_bronze)
    columns_for = staticmethod(columns_for)
    decode = staticmethod(decode)
    unrouted = staticmethod(unrouted)
    keys_for = staticmethod(keys_for)
    is_skipped = staticmethod(is_skipped)
    routed = staticmethod(routed)
    transaction_marks = staticmethod(transaction_marks)


DECODER = Qlik()
