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
    Names compare case-insensitively (SQL Server's default collation).

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
    string ``HH:MM:SS`` (Delta has no TIME); DATETIME -> timestamp_ntz (Replicate's DATETIME has no
    zone; fractions beyond microseconds are truncated); BOOLEAN -> boolean; BYTES/BLOB -> binary
    from hex digits (Replicate's JSON spelling of binary). An unknown type name is kept as string.

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
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
from jsonschema import Draft202012Validator
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from sqlcdc import lsn, model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig, resolve_path
from sqlcdc.formats import Decoded, Decoder, NotYetDiscovered
from sqlcdc.names import DELTA_BAD_NAME_RE
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats._masks import BYTE_ORDERS, mask_has
from sqlcdc.formats.base import BRONZE_SCHEMA, read_text_lines, record_id
from sqlcdc.values import ColumnSpec, in_sql_server_range, provided_columns, typed_struct

NAME = "qlik"
STREAMING = False  # silver needs the metadata messages (other rows) and is recomputed each run

DATA_SCHEMA = "qlik-data-message.schema.json"
METADATA_SCHEMA = "qlik-metadata-message.schema.json"
OPERATIONS = {"REFRESH": model.SNAPSHOT, "INSERT": model.INSERT, "UPDATE": model.UPDATE, "DELETE": model.DELETE}
SEQUENCE_WIDTH = 40

log = logging.getLogger(__name__)

_COLUMN_DDL = "ordinal:int,type:string,length:bigint,precision:int,scale:int,primaryKeyPosition:int"
#: One column of one metadata version, sorted by ordinal (the struct's first field).
COLUMN_STRUCT = "struct<ordinal:int,name:string,type:string,length:bigint,precision:int,scale:int,pk:int>"


# --- types ---------------------------------------------------------------------------------------

_SIMPLE_TYPES: dict[str, tuple[str, str, bool]] = {
    # Qlik type: (Spark type, encoding, lob)
    "INT1": ("tinyint", "text", False),
    "INT2": ("smallint", "text", False),
    "INT4": ("int", "text", False),
    "INT8": ("bigint", "text", False),
    "UINT1": ("smallint", "text", False),
    "UINT2": ("int", "text", False),
    "UINT4": ("bigint", "text", False),
    "UINT8": ("decimal(20,0)", "text", False),
    "REAL4": ("float", "text", False),
    "REAL8": ("double", "text", False),
    "STRING": ("string", "text", False),
    "WSTRING": ("string", "text", False),
    "CLOB": ("string", "text", True),
    "NCLOB": ("string", "text", True),
    "DATE": ("date", "text", False),
    "TIME": ("string", "text", False),
    "DATETIME": ("timestamp_ntz", "text", False),
    "TIMESTAMP": ("timestamp_ntz", "text", False),
    "BOOLEAN": ("boolean", "text", False),
    "BYTES": ("binary", "hex", False),
    "BLOB": ("binary", "hex", True),
}
_TYPE_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")


def spec_for(
    name: str,
    qlik_type: str,
    *,
    precision: int | None = None,
    scale: int | None = None,
    ordinal: int | None = None,
) -> ColumnSpec:
    """The :class:`ColumnSpec` of a Qlik column.

    >>> spec_for("price", "NUMERIC", precision=10, scale=2).spark_type
    'decimal(10,2)'
    >>> spec_for("price", "NUMERIC(12,3)").spark_type
    'decimal(12,3)'
    >>> spec_for("photo", "BLOB").encoding, spec_for("photo", "BLOB").lob
    ('hex', True)
    """
    m = _TYPE_RE.match(qlik_type or "")
    base = m.group(1).upper() if m else (qlik_type or "").upper()
    if m and m.group(2) is not None:
        precision = int(m.group(2))
        scale = int(m.group(3)) if m.group(3) is not None else 0
    if base in ("NUMERIC", "DECIMAL"):
        p = precision or 38
        s = scale or 0
        if p > 38:
            return ColumnSpec(name, "string", ordinal=ordinal, source_type=qlik_type)
        return ColumnSpec(name, f"decimal({max(p, s)},{s})", ordinal=ordinal, source_type=qlik_type)
    if base in _SIMPLE_TYPES:
        t, enc, lob = _SIMPLE_TYPES[base]
        return ColumnSpec(name, t, enc, lob=lob, ordinal=ordinal, source_type=qlik_type)
    log.warning("qlik: column %s has type %r, unknown to sqlcdc: kept as string", name, qlik_type)
    return ColumnSpec(name, "string", ordinal=ordinal, source_type=qlik_type)


# --- parsing and validation ----------------------------------------------------------------------


def _get(node: Column, *path: str, as_type: str = "variant") -> Column:
    p = "$" + "".join(f"['{name}']" for name in path)
    return F.try_variant_get(node, p, as_type)


@lru_cache(maxsize=None)
def _branches(schema_file: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(wrapped, bare) branches of a Qlik schema's top-level ``anyOf``."""
    schema = sc.load(schema_file)
    wrapped, bare = schema["anyOf"]
    assert "magic" in wrapped["required"], f"{schema_file}: anyOf[0] must be the atMSG wrapper"
    return wrapped, bare



_NOT_A_MESSAGE = "$: neither a Qlik data message (headers/data) nor a metadata message (lineage/tableStructure)"
_BAD_WRAPPER_TYPE = "$.type: the atMSG wrapper's type is neither DT (data) nor MD (metadata)"


def _vget(doc: str, name: str, as_type: str = "variant") -> str:
    return f"try_variant_get({doc}, '$[\\'{name}\\']', '{as_type}')"


def _shape(doc: str) -> tuple[str, str, str]:
    """(is-wrapped, kind ``DT``/``MD``/other/NULL, the message) of a parsed document, as SQL over
    ``doc`` (SQL text of a VARIANT).

    A document is a wrapper when it has a non-null ``magic`` (the bare schemas allow only a null
    one, so this equals the schemas' ``anyOf(wrapper, bare)``); its kind is then its ``type``.
    A bare document is metadata when it has ``lineage`` or ``tableStructure``, else data when it
    has ``headers``, ``data`` or ``beforeData``.
    """
    magic = _vget(doc, "magic")
    wrapped = f"coalesce({magic} IS NOT NULL AND NOT is_variant_null({magic}), false)"
    has = lambda *names: " OR ".join(f"{_vget(doc, n)} IS NOT NULL" for n in names)  # noqa: E731
    bare = f"CASE WHEN {has('lineage', 'tableStructure')} THEN 'MD' WHEN {has('headers', 'data', 'beforeData')} THEN 'DT' END"
    kind = f"CASE WHEN {wrapped} THEN {_vget(doc, 'type', 'string')} ELSE {bare} END"
    msg = f"CASE WHEN {wrapped} THEN {_vget(doc, 'message')} ELSE {doc} END"
    return wrapped, kind, msg


def _rules(doc: str, wrapped: str, kind: str, msg: str, kinds: tuple[str, ...] = ("DT", "MD")) -> str:
    """SQL ``array<string>`` of the schema rules the document breaks (empty = valid).

    The bare schema is compiled once and applied to the message (the document, or a wrapper's
    ``message``); a wrapper adds the rules of its own fields. Rule names inside a wrapper's
    message read ``$.message....``. Only the schemas of ``kinds`` are compiled (smaller code);
    a record of another kind then gets the rule ``$: not a <kind> message``. One SQL string, not
    nested Columns: Spark Connect limits a plan's protobuf nesting to 100 levels.
    """
    no_rules = "CAST(array() AS array<string>)"
    per_kind = {}
    for k, schema_file in (("DT", DATA_SCHEMA), ("MD", METADATA_SCHEMA)):
        if k not in kinds:
            per_kind[k] = f"array('$: not a {k} message')"
            continue
        wrapper, bare = _branches(schema_file)
        shallow = dict(wrapper, properties={n: v for n, v in wrapper["properties"].items() if n != "message"})
        in_msg = sc.violations_sql(bare, msg)
        nested = f"transform({in_msg}, _r -> concat('$.message', substring(_r, 2, 10000)))"
        as_wrapper = f"concat({sc.violations_sql(shallow, doc)}, CASE WHEN {msg} IS NOT NULL THEN {nested} ELSE {no_rules} END)"
        per_kind[k] = f"CASE WHEN {wrapped} THEN {as_wrapper} ELSE {in_msg} END"
    return (
        f"CASE WHEN {doc} IS NULL THEN array({sc._lit(sc.NOT_JSON)})"
        f" WHEN {wrapped} AND NOT coalesce({kind} IN ('DT', 'MD'), false) THEN array({sc._lit(_BAD_WRAPPER_TYPE)})"
        f" WHEN {kind} IS NULL THEN array({sc._lit(_NOT_A_MESSAGE)})"
        f" WHEN {kind} = 'DT' THEN {per_kind['DT']}"
        f" ELSE {per_kind['MD']} END"
    )


@lru_cache(maxsize=None)
def _staged_rules(kinds: tuple[str, ...] = ("DT", "MD")) -> str:
    """:func:`_rules` over the columns ``_doc``, ``_wrapped``, ``_kind``, ``_inner``."""
    return _rules("_doc", "_wrapped", "_kind", "_inner", kinds)


def _parsed(bronze: DataFrame, kinds: tuple[str, ...] = ("DT", "MD")) -> DataFrame:
    """Bronze + ``_doc`` (VARIANT), ``_wrapped``, ``_kind`` (DT/MD), ``_inner`` (the message),
    ``_rules`` (broken schema rules) and ``_valid`` (only records of ``kinds`` can be valid).

    Only ``select`` here: Spark Connect plans ``drop`` by resolving its input, which inside an
    SDP query function fails while the bronze table does not exist yet."""
    df = bronze.select("*", F.expr(sc.ONE_DOCUMENT).alias("_doc"))  # two documents on a line: not JSON
    wrapped, kind, msg = _shape("_doc")
    df = df.select("*", F.expr(wrapped).alias("_wrapped"), F.expr(kind).alias("_kind"), F.expr(msg).alias("_inner"))
    df = df.select("*", F.expr(_staged_rules(tuple(kinds))).alias("_rules"))
    return df.select("*", F.coalesce(F.size("_rules") == 0, F.lit(False)).alias("_valid"))


@lru_cache(maxsize=None)
def _inline(kinds: tuple[str, ...] = ("DT", "MD"), value: str = "value") -> tuple[Column, Column, Column]:
    """(valid, kind, message) as expressions over the column ``value`` alone (for :func:`is_skipped`)."""
    doc = sc.one_document(value)
    wrapped, kind, msg = _shape(doc)
    valid = F.expr(f"coalesce(size({_rules(doc, wrapped, kind, msg, kinds)}) = 0, false)")
    return valid, F.expr(kind), F.expr(msg)


def is_valid(value: str = "value") -> Column:
    """The hot-path verdict (compiled schema predicates) on the landed line in the column ``value``.

    Example::

        bronze.select("value", qlik.is_valid("value").alias("ok"))
    """
    return _inline(value=value)[0]


# --- jsonschema, for the reason of failing records only ---------------------------------------------


@lru_cache(maxsize=None)
def _validators() -> dict[tuple[str, int], Draft202012Validator]:
    out = {}
    for kind, schema_file in (("DT", DATA_SCHEMA), ("MD", METADATA_SCHEMA)):
        for i, branch in enumerate(_branches(schema_file)):
            out[(kind, i)] = Draft202012Validator(branch)
    return out


def _py_kind(doc: dict[str, Any]) -> tuple[str | None, bool]:
    if doc.get("magic") is not None:
        t = doc.get("type")
        return (t if isinstance(t, str) else None), True
    if "lineage" in doc or "tableStructure" in doc:
        return "MD", False
    if "headers" in doc or "data" in doc or "beforeData" in doc:
        return "DT", False
    return None, False


def explain(text: str | None, *, limit: int = 2000) -> str | None:
    """Why a landed line is not a valid Qlik message, in words (``None`` when it is valid).

    >>> explain('{"headers": {"operation": "MERGE"}, "data": {}}').split("; ")[-1]
    "$.headers.operation: 'MERGE' is not one of ['REFRESH', 'INSERT', 'UPDATE', 'DELETE']"
    """
    if text is None:
        return "empty record (NULL line)"
    try:
        doc = sc.loads(text)  # strict: NaN literals, duplicate keys, deep nesting give a reason
    except ValueError as e:
        return text[:limit] if text.startswith(sc.UNDECODABLE) else f"not JSON: {e}"[:limit]
    if not isinstance(doc, dict):
        return f"not a JSON object but {type(doc).__name__}"
    kind, wrapped = _py_kind(doc)
    if kind not in ("DT", "MD"):
        return _BAD_WRAPPER_TYPE + f" (got {doc.get('type')!r})" if wrapped else _NOT_A_MESSAGE
    what, schema_file = ("data", DATA_SCHEMA) if kind == "DT" else ("metadata", METADATA_SCHEMA)
    vals = _validators()
    try:
        if any(vals[(kind, i)].is_valid(doc) for i in (0, 1)):
            return None
        errors = list(vals[(kind, 0 if wrapped else 1)].iter_errors(doc))
    except RecursionError:  # a valid but very deep document the validator walks into
        return f"JSON nested too deeply ({sc._depth(text)} levels) to validate"
    return f"invalid Qlik {what} message ({schema_file}): " + sc.describe(errors)[:limit]


@lru_cache(maxsize=None)
def _explain_udf():
    """A vectorized (Arrow) UDF ``text -> reason``; apply it only to rows the predicates failed."""

    @F.pandas_udf(StringType())
    def _explain(texts: pd.Series) -> pd.Series:
        return texts.map(lambda t: explain(t) if isinstance(t, str) else explain(None))

    return _explain


# --- metadata --------------------------------------------------------------------------------------


def _version_number(node: Column) -> Column:
    return F.try_variant_get(node, "$", "bigint")


def _metadata_cols(inner: Column) -> Column:
    """``array<COLUMN_STRUCT>`` of a metadata message, sorted by ordinal (NULL when unreadable)."""
    tc = _get(inner, "tableStructure", "tableColumns")
    as_map = F.try_variant_get(tc, "$", f"map<string,struct<{_COLUMN_DDL}>>")
    as_list = F.try_variant_get(tc, "$", f"array<struct<name:string,{_COLUMN_DDL}>>")

    def col(name: Column, c: Column) -> Column:
        return F.struct(
            c["ordinal"].alias("ordinal"), name.alias("name"), F.upper(F.trim(c["type"])).alias("type"),
            c["length"].alias("length"), c["precision"].alias("precision"), c["scale"].alias("scale"),
            F.coalesce(c["primaryKeyPosition"], F.lit(0)).alias("pk"),
        )

    cols = F.coalesce(
        F.transform(F.map_entries(as_map), lambda e: col(e["key"], e["value"])),
        F.transform(as_list, lambda c: col(c["name"], c)),
    )
    return F.array_sort(cols)


def _metadata_fields(inner: Column) -> list[Column]:
    """Columns of one metadata message (``inner`` = the bare message)."""
    lineage = _get(inner, "lineage")
    return [
        _get(lineage, "schema", as_type="string").alias("_md_schema"),
        _get(lineage, "table", as_type="string").alias("_md_table"),
        _version_number(_get(lineage, "tableVersion")).alias("_md_version"),
        _get(lineage, "server", as_type="string").alias("_md_server"),
        _get(lineage, "task", as_type="string").alias("_md_task"),
        _get(lineage, "timestamp", as_type="string").alias("_md_timestamp"),
        _get(inner, "schemaId", as_type="string").alias("_md_schema_id"),
        _metadata_cols(inner).alias("_md_cols"),
    ]


def _metadata_problem(cols: Column) -> Column:
    """Why a metadata message's columns are unusable (NULL when usable)."""
    bad = F.filter(cols, lambda c: c["ordinal"].isNull() | (c["ordinal"] < 1) | c["type"].isNull() | (c["type"] == ""))
    ordinals = F.transform(cols, lambda c: c["ordinal"])
    return (
        F.when(cols.isNull(), F.lit("tableStructure.tableColumns: a column's properties do not read "
                                    "(ordinal, precision, scale, primaryKeyPosition must be integers)"))
        .when(F.size(cols) == 0, F.lit("tableStructure.tableColumns: no columns"))
        .when(F.size(bad) > 0, F.format_string(
            "tableStructure.tableColumns: column(s) %s lack an ordinal >= 1 or a type",
            F.array_join(F.transform(bad, lambda c: c["name"]), ", ")))
        .when(F.size(F.array_distinct(ordinals)) < F.size(ordinals), F.lit("tableStructure.tableColumns: duplicate ordinals"))
    )


def _metadata_rows(parsed: DataFrame) -> DataFrame:
    """Every valid metadata message: ``_md_*`` columns + ``_md_problem`` (NULL = usable)."""
    md = parsed.where(F.col("_valid") & (F.col("_kind") == "MD"))
    md = md.select("*", *_metadata_fields(F.col("_inner")))
    return md.select("*", _metadata_problem(F.col("_md_cols")).alias("_md_problem"))


def _metadata_parsed(bronze: DataFrame) -> DataFrame:
    """The metadata messages of ``bronze``, parsed and validated as such.

    Pre-filtered on the text ``tableStructure`` (a required key of every metadata message) so
    the data messages, nearly all of bronze, skip the parse here.
    """
    return _parsed(bronze.where(F.col("value").contains("tableStructure")), ("MD",))


def metadata_versions(parsed: DataFrame) -> DataFrame:
    """The latest structure per (schema, table, tableVersion), one row each.

    Columns: ``schema, table, version, schema_id, server, task, timestamp, cols`` where ``cols``
    is ``array<struct<ordinal, name, type, length, precision, scale, pk>>`` sorted by ordinal. A
    version sent twice keeps the message with the latest ``lineage.timestamp``, then ingest time.
    """
    md = _metadata_rows(parsed).where(F.col("_md_problem").isNull())
    latest = F.max_by(
        F.struct(
            F.col("_md_schema").alias("schema"), F.col("_md_table").alias("table"), F.col("_md_schema_id").alias("schema_id"),
            F.col("_md_server").alias("server"), F.col("_md_task").alias("task"), F.col("_md_timestamp").alias("timestamp"),
            F.col("_md_cols").alias("cols"),
        ),
        F.struct(F.col("_md_timestamp"), F.col("ingest_time"), F.col("record_id")),
    )
    grouped = md.groupBy(F.lower("_md_schema").alias("_s"), F.lower("_md_table").alias("_t"), F.col("_md_version").alias("version"))
    return grouped.agg(latest.alias("_m")).select(
        F.col("_m.schema").alias("schema"), F.col("_m.table").alias("table"), "version",
        F.col("_m.schema_id").alias("schema_id"), F.col("_m.server").alias("server"), F.col("_m.task").alias("task"),
        F.col("_m.timestamp").alias("timestamp"), F.col("_m.cols").alias("cols"),
    )


# --- routing ---------------------------------------------------------------------------------------


def _option(table: TableConfig | None, source: SourceConfig, name: str, default: Any = None) -> Any:
    if table is not None and name in (table.options or {}):
        return table.options[name]
    return (source.options or {}).get(name, default)


def _data_rows(parsed: DataFrame, versions: DataFrame) -> DataFrame:
    """Valid data messages + the header fields + identity (``_schema``, ``_table``) where known."""
    dt = parsed.where(F.col("_valid") & (F.col("_kind") == "DT"))
    inner, h = F.col("_inner"), _get(F.col("_inner"), "headers")
    dt = dt.select(
        "*",
        _get(inner, "schema", as_type="string").alias("_msg_schema"),
        _get(inner, "table", as_type="string").alias("_msg_table"),
        _get(h, "operation", as_type="string").alias("_op"),
        _get(h, "changeSequence", as_type="string").alias("_change_seq"),
        _get(h, "timestamp", as_type="string").alias("_ts"),
        _get(h, "transactionId", as_type="string").alias("_tx"),
        _get(h, "changeMask", as_type="string").alias("_change_mask"),
        _get(h, "columnMask", as_type="string").alias("_column_mask"),
        _get(h, "externalSchemaId", as_type="string").alias("_ext_id"),
        _get(h, "transactionEventCounter", as_type="bigint").alias("_counter"),
        _get(h, "transactionEventCounter", as_type="string").alias("_counter_text"),
        F.try_variant_get(inner, "$['data']", "map<string,string>").alias("_data"),
        F.try_variant_get(inner, "$['beforeData']", "map<string,string>").alias("_before_data"),
    )
    ids = versions.where(F.col("schema_id").isNotNull()).groupBy(F.col("schema_id").alias("_by_schema_id")).agg(
        F.max_by(F.struct("schema", "table"), "version").alias("_by_id")
    )
    # no drop() of the join's helper columns: see _parsed
    dt = dt.join(F.broadcast(ids), F.col("_ext_id") == F.col("_by_schema_id"), "left")
    by_msg = F.col("_msg_table").isNotNull()
    return dt.select(
        "*",
        F.when(by_msg, F.col("_msg_schema")).otherwise(F.col("_by_id.schema")).alias("_schema"),
        F.when(by_msg, F.col("_msg_table")).otherwise(F.col("_by_id.table")).alias("_table"),
    )


def _matches(table: TableConfig) -> Column:
    """The data message (of :func:`_data_rows`) belongs to ``table``."""
    by_name = (F.lower(F.col("_table")) == table.table.lower()) & (
        F.col("_schema").isNull() | (F.lower(F.col("_schema")) == table.schema.lower())
    )
    regex = (table.options or {}).get("path_regex")
    by_path = F.col("_table").isNull() & F.col("source_file").rlike(regex) if regex else F.lit(False)
    return F.coalesce(by_name, F.lit(False)) | F.coalesce(by_path, F.lit(False))


def _table_versions(versions: DataFrame, table: TableConfig) -> DataFrame:
    return versions.where(
        (F.lower(F.col("schema")) == table.schema.lower()) & (F.lower(F.col("table")) == table.table.lower())
    )


# --- metadata that must not reshape a table -------------------------------------------------------



def _numeric_problem(c: Column) -> Column:
    """Why a column struct's NUMERIC/DECIMAL cannot be held by Spark (NULL when it can)."""
    t = F.upper(F.trim(c["type"]))
    shape = r"^(NUMERIC|DECIMAL)\s*\(\s*(\d+)\s*(,\s*(\d+)\s*)?\)\s*$"
    args, args_s = F.regexp_extract(t, shape, 2), F.regexp_extract(t, shape, 4)
    in_type = args != ""
    p = F.when(in_type, args.try_cast("bigint")).otherwise(F.coalesce(F.nullif(c["precision"].cast("bigint"), F.lit(0)), F.lit(38)))
    sc_ = F.when(in_type, F.coalesce(F.nullif(args_s, F.lit("")).try_cast("bigint"), F.lit(0))).otherwise(
        F.coalesce(c["scale"].cast("bigint"), F.lit(0)))
    return F.when(t.rlike("^(NUMERIC|DECIMAL)\\b") & ((p > 38) | (sc_ > p) | (sc_ < 0)), F.format_string(
        "column %s: %s with precision %s and scale %s cannot be held (decimal precision 1..38, scale 0..precision)",
        c["name"], c["type"], p.cast("string"), sc_.cast("string")))


def _versions_with_problems(tv: DataFrame, fields: tuple[str, ...], qualified: str, relevant: list[str] | None) -> DataFrame:
    """All versions of ``tv`` (one row per version, with ``cols``) as one row: ``_versions``, an
    array of ``struct(<fields>, problem)``, ``problem`` NULL when the version can define the table.

    A version cannot when it names two columns equal but for case, a name Delta cannot store, a
    NUMERIC/DECIMAL Spark cannot hold (precision above 38, or scale above precision), or drops a
    column that an older usable version has (of ``relevant`` when given: the table's columns).

    Built in several selects, each a shallow expression: Spark Connect sends a plan as nested
    protobuf messages and refuses one nested deeper than 100 (one expression doing all of it did).
    """
    names_of = lambda v: F.transform(v["cols"], lambda c: c["name"])  # noqa: E731
    staged = tv.select(*fields, F.transform("cols", lambda c: c["name"]).alias("_names"))
    staged = staged.select(
        "*",
        F.transform("_names", lambda n: F.lower(n)).alias("_lowered"),
        F.filter("_names", lambda n: n.rlike(DELTA_BAD_NAME_RE)).alias("_bad_names"),
        F.filter(F.transform("cols", _numeric_problem), lambda x: x.isNotNull()).alias("_bad_types"),
    )
    staged = staged.select(
        "*", F.filter(F.array_distinct("_lowered"), lambda n: F.size(F.filter("_lowered", lambda m: m == n)) > 1).alias("_collide"))
    problems = F.array(
        F.when(F.size("_collide") > 0, F.format_string(
            "column names equal but for case (%s): Delta cannot hold both",
            F.array_join(F.filter("_names", lambda n: F.array_contains(F.col("_collide"), F.lower(n))), ", "))),
        F.when(F.size("_bad_names") > 0, F.format_string(
            "column name(s) %s hold a character Delta cannot store in a column name (one of space , ; { } ( ) "
            "newline tab = backtick); rename the column at the source",
            F.array_join(F.transform("_bad_names", lambda n: F.to_json(F.array(n))), ", "))),
        F.when(F.size("_bad_types") > 0, F.array_join("_bad_types", "; ")),
    )
    problem = F.nullif(F.array_join(F.filter(problems, lambda x: x.isNotNull()), "; "), F.lit(""))
    catalog = staged.select(F.struct(*fields, problem.alias("problem")).alias("v")).agg(
        F.collect_list("v").alias("_staged"))

    def with_drop(v: Column) -> Column:
        older = F.filter("_staged", lambda o: (o["version"] < v["version"]) & o["problem"].isNull())
        dropped = F.array_except(F.array_distinct(F.flatten(F.transform(older, names_of))), names_of(v))
        if relevant is not None:
            dropped = F.filter(dropped, lambda n: n.isin(*relevant) if relevant else F.lit(False))
        drop = F.when(F.size(dropped) > 0, F.format_string(
            f"it drops column(s) %s of {qualified}, which older versions have: the message is not taken to drop "
            "them; dropping a column needs an explicit config change (`columns:` in the table config without it)",
            F.array_join(dropped, ", ")))
        return v.withField("problem", F.coalesce(v["problem"], drop))

    return catalog.select(F.transform("_staged", with_drop).alias("_versions"))


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


def metadata_landing(source: SourceConfig) -> str | None:
    """``options.metadata_landing``, a relative path resolved from the pipeline config's folder
    (as ``landing`` is)."""
    extra = source.options.get("metadata_landing")
    if not extra:
        return None
    return resolve_path(Path(source.file).parent, str(extra)) if source.file else str(extra)


def is_skipped(bronze: DataFrame | None = None) -> Column:
    """Valid metadata messages: they are not changes (counted, not quarantined).

    Their content reaches silver as the typing of the data messages. A metadata message whose
    columns do not read is *not* skipped: :func:`unrouted` quarantines it with the reason.
    """
    valid, kind, inner = _inline(("MD",))
    problem = _metadata_problem(_metadata_cols(inner))
    return F.coalesce(valid & (kind == "MD") & problem.isNull(), F.lit(False))


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
        F.col("_valid") & (F.col("_kind") == "MD") & problem.isNotNull(),
        F.format_string(
            "metadata message for %s.%s version %s: %s",
            _get(F.col("_inner"), "lineage", "schema", as_type="string"),
            _get(F.col("_inner"), "lineage", "table", as_type="string"),
            _get(F.col("_inner"), "lineage", "tableVersion", as_type="string"),
            problem,
        ),
    )
    bad = parsed.select("*", md_problem.alias("_md_problem")).where(~F.col("_valid") | F.col("_md_problem").isNotNull())
    bad = bad.select(
        *model.quarantine_row(
            source_name=source.name, source_format=NAME,
            reason=F.coalesce(F.col("_md_problem"), _explain_udf()(F.col("value")),
                              F.array_join(F.col("_rules"), "; ")),
            rules=F.when(F.col("_valid"), F.array(F.lit("metadata"))).otherwise(F.col("_rules")),
        )
    )
    # 2. valid data messages no onboarded table takes
    versions = metadata_versions(_metadata_parsed(bronze))
    dt = _data_rows(_parsed(bronze, ("DT",)), versions)
    taken = F.lit(False)
    for t in tables:
        taken = taken | _matches(t)
    names = ", ".join(t.qualified for t in tables) or "none"
    reason = F.when(
        F.col("_table").isNotNull(),
        F.format_string("no onboarded table for %s.%s in source %s (onboarded: %s)",
                        F.coalesce(F.col("_schema"), F.lit("?")), F.col("_table"), F.lit(source.name), F.lit(names)),
    ).otherwise(F.format_string(
        "cannot tell which table this data message belongs to: it has no schema/table fields, its "
        "headers.externalSchemaId (%s) matches no metadata message's schemaId, and no table's "
        "options.path_regex matches its file", F.coalesce(F.col("_ext_id"), F.lit("absent"))))
    orphans = dt.where(~taken).select(
        *model.quarantine_row(source_name=source.name, source_format=NAME, reason=reason, rules=F.array(F.lit("routing")))
    )
    return bad.unionByName(orphans)


def routed(bronze: DataFrame, source: SourceConfig, table: TableConfig) -> DataFrame:
    """The data messages of ``table``: what waits in quarantine while no usable metadata message
    of it has landed (:meth:`Decoder.waiting`)."""
    return _data_rows(_parsed(bronze, ("DT",)), metadata_versions(_metadata_parsed(bronze))).where(_matches(table))


# --- decoding --------------------------------------------------------------------------------------


def _padded_sequence(seq: Column) -> Column:
    """``changeSequence`` (1 to :data:`SEQUENCE_WIDTH` digits) left-padded with zeros; NULL otherwise."""
    s = F.trim(seq)
    return F.when(s.rlike(_SEQUENCE_RE), F.lpad(s, SEQUENCE_WIDTH, "0"))


_SEQUENCE_RE = f"^[0-9]{{1,{SEQUENCE_WIDTH}}}$"


def _sequence_problem(op: Column, seq: Column) -> Column:
    """Why a CDC message cannot be ordered (NULL when it can; REFRESH needs no changeSequence).

    The seed documents ``changeSequence`` as a string, monotonic across the task, to order records
    by; Replicate writes it as fixed-width digits. Anything else (``abc``, ``-1``, ``1.5``, more
    than :data:`SEQUENCE_WIDTH` digits) would sort somewhere arbitrary, so it is refused.
    """
    return F.when(
        (op != "REFRESH") & ~F.coalesce(F.trim(seq).rlike(_SEQUENCE_RE), F.lit(False)),
        F.format_string(
            f"headers.changeSequence '%s' is not a change sequence (1 to {SEQUENCE_WIDTH} digits): "
            "the change cannot be ordered", F.substring(F.coalesce(seq, F.lit("NULL")), 1, 60)),
    )


def _utc(ts: Column) -> Column:
    """Replicate's UTC time text (``2023-09-11T03:23:25.000``) -> timestamp, whatever the session zone."""
    ntz = ts.try_cast("timestamp_ntz")
    out = F.coalesce(
        F.convert_timezone(F.lit("UTC"), F.current_timezone(), ntz).try_cast("timestamp"),
        ts.try_cast("timestamp"),
    )
    # outside year 1..9999 is not a SQL Server time (and Python clients cannot read it): NULL,
    # and decode() quarantines the message
    return in_sql_server_range(out)


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
    dt = _data_rows(_parsed(bronze, ("DT",)), versions).where(_matches(table))

    # all versions of this table as one row (an empty array when none arrived): broadcast to every message
    tv = _table_versions(versions, table).select(
        "version", "schema_id", "server", "task", "cols",
        F.array_sort(F.transform("cols", lambda c: c["name"])).alias("names"),
    )
    catalog = _versions_with_problems(
        tv, ("version", "schema_id", "server", "task", "cols", "names"), f"{table.schema}.{table.table}", names)
    dt = dt.crossJoin(F.broadcast(catalog))

    op_raw = F.col("_op")
    is_delete = op_raw == "DELETE"
    raw_after = F.when(~is_delete, F.col("_data"))
    raw_before = F.when(is_delete, F.coalesce(F.col("_before_data"), F.col("_data"))).otherwise(F.col("_before_data"))
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

    after, after_errors = typed_struct(raw_after, columns)
    before, before_errors = typed_struct(raw_before, columns)
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
    after_fields = []
    for c in names:
        value = F.col("_after0")[c]
        if c in keys:
            value = F.when(
                is_update & F.col("_provided").isNotNull() & ~F.array_contains(F.col("_provided"), c), F.col("_before")[c]
            ).otherwise(value)
        after_fields.append(value.alias(c))
    after_s = F.struct(*after_fields) if after_fields else F.struct()
    provided_s = F.when(
        is_update & F.col("_provided").isNotNull(),
        F.array_union(F.col("_provided"), F.array(*[F.lit(k) for k in keys]) if keys else empty),
    ).otherwise(F.col("_provided"))
    image = F.when(F.col("_op") == "DELETE", F.col("_before")).otherwise(F.col("_after"))
    dt = dt.select("*", after_s.alias("_after"), provided_s.alias("_provided_k"))
    key = F.struct(*[image[k].alias(k) for k in keys]) if keys else F.struct()
    key_nulls = F.filter(F.array(*[F.when(image[k].isNull(), F.lit(k)) for k in keys]), lambda x: x.isNotNull()) if keys else empty
    dt = dt.select("*", key.alias("_key"), key_nulls.alias("_key_nulls"))

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
            "headers.timestamp '%s' is not a UTC time within year 1..9999", F.substring(F.col("_ts"), 1, 60))),
    )
    reasons = F.filter(
        F.concat(
            F.array(problem),
            F.when(problem.isNull(), F.col("_value_errors")).otherwise(empty),
            F.when(problem.isNull(), F.transform("_key_nulls", lambda k: F.format_string(
                "key column %s is NULL in the %s message", k, F.col("_op")))).otherwise(empty),
        ),
        lambda r: r.isNotNull(),
    )
    dt = dt.select("*", reasons.alias("_reasons"))
    good, bad = dt.where(F.size("_reasons") == 0), dt.where(F.size("_reasons") > 0)

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
    changes = good.select(
        *model.change_row(
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
        )
    )
    quarantine = bad.select(
        *model.quarantine_row(
            source_name=source.name, source_format=NAME, table_name=table.name,
            reason=F.array_join(F.col("_reasons"), "; "), rules=F.array(F.lit("decode")),
        )
    )
    return Decoded(changes=changes, quarantine=quarantine)


# --- columns and keys (pipeline definition time) ----------------------------------------------------


def discover(spark: SparkSession, source: SourceConfig) -> DataFrame:
    """Metadata versions (:func:`metadata_versions`) found in the source's landing folders.

    A batch scan of the landed lines that contain ``"tableStructure"`` (metadata messages are
    few and small); folders that do not exist yet give no versions. A Kafka source is scanned on
    its topic(s) instead (a batch read of what is there now).
    """
    from sqlcdc import transport

    if transport.is_stream(source):
        return metadata_versions(_metadata_parsed(transport.read_bronze(spark, source, streaming=False)))
    paths = [p for p in (source.landing, metadata_landing(source)) if p]
    frames = []
    for p in paths:
        try:
            frames.append(read_text_lines(spark, p, streaming=False, glob=source.options.get("glob")))
        except AnalysisException as e:  # PATH_NOT_FOUND: nothing landed yet
            log.info("qlik: no metadata under %s yet (%s)", p, e.getCondition() if hasattr(e, "getCondition") else e)
    if not frames:
        empty = spark.createDataFrame([], BRONZE_SCHEMA)
        return metadata_versions(_metadata_parsed(empty))
    bronze = frames[0]
    for f in frames[1:]:
        bronze = bronze.unionByName(f)
    return metadata_versions(_metadata_parsed(bronze))


def _versions_of(table: TableConfig, source: SourceConfig, spark: SparkSession | None) -> list[dict[str, Any]]:
    """Every metadata version of ``table``, oldest first, each with its ``problem`` (NULL: usable)."""
    spark = spark or SparkSession.active()
    tv = _table_versions(discover(spark, source), table)
    fields = ("schema", "table", "version", "schema_id", "server", "task", "timestamp", "cols")
    relevant = [c["name"] for c in table.columns] if table.columns else None
    cat = _versions_with_problems(tv, fields, table.qualified, relevant).select(F.explode("_versions").alias("v"))
    rows = cat.select("v.*").orderBy("version").collect()
    return [r.asDict(recursive=True) for r in rows]


def _usable(versions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in versions if v.get("problem") is None]


def _union_columns(versions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Newest version's columns in ordinal order, then columns only older versions had."""
    out: dict[str, dict[str, Any]] = {}
    for v in sorted(versions, key=lambda v: -v["version"]):
        for c in sorted(v["cols"], key=lambda c: c["ordinal"]):
            out.setdefault(c["name"], c)
    return list(out.values())


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


def _newest_keys(versions: list[dict[str, Any]]) -> list[str]:
    newest = max(versions, key=lambda v: v["version"])
    return [c["name"] for c in sorted((c for c in newest["cols"] if (c["pk"] or 0) > 0), key=lambda c: c["pk"])]


def _keys_from_columns(table: TableConfig, columns: list[ColumnSpec]) -> list[str]:
    """Keys for :func:`decode`: remembered by :func:`columns_for` (pipeline definition time), so a
    query function never has to scan the landing folder itself."""
    found = _discovered_keys.get((table.source.name, table.name))
    if found is None:
        found = keys_for(table)
    return [k for k in found if k in {c.name for c in columns}]


class Qlik(Decoder):
    """Qlik Replicate Kafka-target messages (data and metadata, bare or atMSG-wrapped), one per line."""

    name = NAME
    label = "SQL Server (Qlik Replicate)"
    streaming = STREAMING
    options = {
        "glob": {"type": "string", "description": "landed file names to read (Hadoop glob)"},
        "metadata_landing": {"type": "string", "description": "a second folder holding the metadata messages"},
        "mask_byte_order": {"enum": list(BYTE_ORDERS), "description": "byte order of changeMask/columnMask"},
        "path_regex": {"type": "string", "description": "(table) the landed files of this table"},
    }
    read_bronze = staticmethod(read_bronze)
    columns_for = staticmethod(columns_for)
    decode = staticmethod(decode)
    unrouted = staticmethod(unrouted)
    keys_for = staticmethod(keys_for)
    is_skipped = staticmethod(is_skipped)
    routed = staticmethod(routed)


DECODER = Qlik()
