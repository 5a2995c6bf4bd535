"""Qlik metadata messages -> table versions, which versions may shape a table, and discovery.

Private to :mod:`sqlcdc.formats.qlik` (which re-exports :func:`metadata_versions`,
:func:`discover`, :func:`metadata_landing` and :data:`COLUMN_STRUCT`); see its docstring,
"Which metadata version types a data message", "Schema evolution" and "Metadata that must not
reshape the table".
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import frames
from sqlcdc.config import SourceConfig, TableConfig, resolve_path
from sqlcdc.formats._column_names import ARRAYS, name_arrays, name_problems
from sqlcdc.formats._discovery import incremental
from sqlcdc.formats._qlik_messages import _get, _parsed, valid
from sqlcdc.formats.base import BRONZE_SCHEMA, is_rejected_before_decoding, read_text_lines, scanned

__all__ = ["COLUMN_STRUCT", "discover", "metadata_landing", "metadata_versions"]

log = logging.getLogger("sqlcdc.formats.qlik")

_COLUMN_DDL = "ordinal:int,type:string,length:bigint,precision:int,scale:int,primaryKeyPosition:int"
#: One column of one metadata version, sorted by ordinal (the struct's first field).
COLUMN_STRUCT = "struct<ordinal:int,name:string,type:string,length:bigint,precision:int,scale:int,pk:int>"


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


_MD_FIELDS = ("_md_schema", "_md_table", "_md_version", "_md_server", "_md_task", "_md_timestamp", "_md_schema_id", "_md_cols")


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
    """Every valid metadata message: ``ingest_time``, ``record_id``, the ``_md_*`` columns and
    ``_md_problem`` (NULL = usable). Explicit column lists, not ``select("*", ...)``: under Spark
    Connect each star costs analyzer passes, and a Qlik plan has few to spare."""
    md = frames.where(parsed, valid() & (F.col("_kind") == "MD"), "_is_md")
    md = md.select("ingest_time", "record_id", *_metadata_fields(F.col("_inner")))
    return md.select("ingest_time", "record_id", *_MD_FIELDS, _metadata_problem(F.col("_md_cols")).alias("_md_problem"))


def _metadata_parsed(bronze: DataFrame) -> DataFrame:
    """The metadata messages of ``bronze``, parsed and validated as such.

    Pre-filtered on the text ``tableStructure`` (a required key of every metadata message) so
    the data messages, nearly all of bronze, skip the parse here. A message the pipeline quarantines
    before decoding gives no version (not UTF-8 text, whose names would stop the discovery's collect;
    a lone surrogate escape).
    """
    return _parsed(bronze.where(F.col("value").contains("tableStructure") & ~is_rejected_before_decoding()), ("MD",))


_VERSION_FIELDS = ("schema", "table", "version", "schema_id", "server", "task", "timestamp", "cols")


def metadata_versions(parsed: DataFrame) -> DataFrame:
    """The latest structure per (schema, table, tableVersion), one row each.

    Columns: ``schema, table, version, schema_id, server, task, timestamp, cols`` where ``cols``
    is ``array<struct<ordinal, name, type, length, precision, scale, pk>>`` sorted by ordinal. A
    version sent twice keeps the message with the latest ``lineage.timestamp``, then ingest time
    (then record id, so a tie picks one message, the same each time).
    """
    md = _metadata_rows(parsed).where(F.col("_md_problem").isNull())
    return _latest(md, "_md_", F.struct(F.col("_md_timestamp"), F.col("ingest_time"), F.col("record_id")), keep_pick=False)


def _latest(rows: DataFrame, prefix: str, pick: Column, *, keep_pick: bool = True) -> DataFrame:
    """One row per (schema, table, version) of ``rows``, whose columns are the version's fields
    (:data:`_VERSION_FIELDS`) named with ``prefix``: the row with the greatest ``pick``, kept as
    ``_pick`` (one select after the aggregate either way: a Qlik plan has few analyzer passes to
    spare under Spark Connect)."""
    version = F.struct(*[F.col(prefix + f).alias(f) for f in _VERSION_FIELDS])
    grouped = rows.groupBy(F.lower(prefix + "schema").alias("_s"), F.lower(prefix + "table").alias("_t"),
                           F.col(prefix + "version").alias("_v"))
    found = grouped.agg(F.max_by(version, pick).alias("_m"), *([F.max(pick).alias("_pick")] if keep_pick else []))
    return found.select("_m.*", *(["_pick"] if keep_pick else []))


def _found(bronze: DataFrame) -> DataFrame:
    """:func:`metadata_versions` of ``bronze`` for discovery, with ``_pick`` (``lineage.timestamp``,
    record id) so that :func:`_merged` of the results of some files and of others is the result of
    all. Ingest time is left out: a discovery scan reads every file at once, so it is one instant
    in a scan and a later one in the next, and would make the newer scan win a tie."""
    md = _metadata_rows(_metadata_parsed(bronze)).where(F.col("_md_problem").isNull())
    return _latest(md, "_md_", F.struct(F.col("_md_timestamp").alias("timestamp"), F.col("record_id").alias("record_id")))


def _merged(found: DataFrame) -> DataFrame:
    """:func:`_found` over the union of several of its results (the files of each)."""
    return _latest(found, "", F.col("_pick"))


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

    Built in a select, an aggregate and a select, each a shallow expression: Spark Connect sends a
    plan as nested protobuf messages and refuses one nested deeper than 100 (one expression doing
    all of it did), and resolves it within 100 analyzer passes, each stacked select and lambda level
    costing some (``tests/test_connect_resolution.py``). Each version also has ``_names`` (its
    column names in ordinal order) and ``names`` (sorted).
    """
    staged = tv.select(
        *fields,
        F.transform("cols", lambda c: c["name"]).alias("_names"),
        F.array_sort(F.transform("cols", lambda c: c["name"])).alias("names"),
        *[a.alias(k) for k, a in name_arrays(F.transform("cols", lambda c: c["name"])).items()],
        F.filter(F.transform("cols", _numeric_problem), lambda x: x.isNotNull()).alias("_bad_types"),
    )
    problems = F.array(
        *name_problems(F.col("_names"), {k: F.col(k) for k in ARRAYS}),
        F.when(F.size("_bad_types") > 0, F.array_join("_bad_types", "; ")),
    )
    problem = F.nullif(F.array_join(problems, "; "), F.lit(""))  # array_join skips NULLs
    catalog = staged.agg(F.collect_list(F.struct(*fields, F.col("_names"), F.col("names"), problem.alias("problem"))).alias("_staged"))

    def with_drop(v: Column) -> Column:
        older = F.filter("_staged", lambda o: (o["version"] < v["version"]) & o["problem"].isNull())
        dropped = F.array_except(F.array_distinct(F.flatten(F.transform(older, lambda o: o["_names"]))), v["_names"])
        if relevant is not None:
            dropped = F.filter(dropped, lambda n: n.isin(*relevant) if relevant else F.lit(False))
        drop = F.when(F.size(dropped) > 0, F.format_string(
            f"it drops column(s) %s of {qualified}, which older versions have: the message is not taken to drop "
            "them; dropping a column needs an explicit config change (`columns:` in the table config without it)",
            F.array_join(dropped, ", ")))
        return v.withField("problem", F.coalesce(v["problem"], drop))

    return catalog.select(F.transform("_staged", with_drop).alias("_versions"))


# --- discovery (pipeline definition time) -----------------------------------------------------------


def metadata_landing(source: SourceConfig) -> str | None:
    """``options.metadata_landing``, a relative path resolved from the pipeline config's folder
    (as ``landing`` is)."""
    extra = source.options.get("metadata_landing")
    if not extra:
        return None
    return resolve_path(Path(source.file).parent, str(extra)) if source.file else str(extra)


def discover(spark: SparkSession, source: SourceConfig) -> DataFrame:
    """Metadata versions (:func:`metadata_versions`, with ``_pick``) found in what the source has landed.

    A batch scan of the landed lines that contain ``"tableStructure"`` (metadata messages are
    few and small); folders that do not exist yet give no versions. A Kafka source is scanned on
    its topic(s) instead (a batch read of what is there now). Once per source inside
    :func:`~sqlcdc.formats.base.one_scan_per_source`; in a local run, of only the files landed
    since the last run's scan (:mod:`sqlcdc.formats._discovery`: the versions found are kept, and
    :func:`_merged` with those of the new files).
    """
    from sqlcdc import transport

    key = ("qlik-metadata", source.name)
    if transport.is_stream(source):
        return scanned(key, lambda: _found(transport.read_bronze(spark, source, streaming=False)))
    return incremental(key, repr(source), lambda: _landed(spark, source), _found, _merged)


def _landed(spark: SparkSession, source: SourceConfig) -> DataFrame:
    """The lines landed in the source's landing and metadata landing folders (bronze rows)."""
    frames = []
    for p in (p for p in (source.landing, metadata_landing(source)) if p):
        try:
            frames.append(read_text_lines(spark, p, streaming=False, glob=source.options.get("glob")))
        except AnalysisException as e:  # PATH_NOT_FOUND: nothing landed yet
            log.info("qlik: no metadata under %s yet (%s)", p, e.getCondition() if hasattr(e, "getCondition") else e)
    bronze = frames[0] if frames else spark.createDataFrame([], BRONZE_SCHEMA)
    for f in frames[1:]:
        bronze = bronze.unionByName(f)
    return bronze


def _versions_of(table: TableConfig, source: SourceConfig, spark: SparkSession | None) -> list[dict[str, Any]]:
    """Every metadata version of ``table``, oldest first, each with its ``problem`` (NULL: usable)."""
    tv = _table_versions(discover(spark or SparkSession.active(), source), table)
    relevant = [c["name"] for c in table.columns] if table.columns else None
    cat = _versions_with_problems(tv, _VERSION_FIELDS, table.qualified, relevant).select(F.explode("_versions").alias("v"))
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


def _newest_keys(versions: list[dict[str, Any]]) -> list[str]:
    newest = max(versions, key=lambda v: v["version"])
    return [c["name"] for c in sorted((c for c in newest["cols"] if (c["pk"] or 0) > 0), key=lambda c: c["pk"])]
