"""Column metadata of the CES decoder (:mod:`sqlcdc.formats.ces`): checking an event's
``eventsource.cols`` (:func:`cols_problem`: names, types) and discovering a table's columns and
keys from its landed events (``_shapes``, ``_discover``). What was discovered is remembered in
``sqlcdc.formats.ces._discovered``, which this module never reads: ``_metadata_problems`` is given it.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import frames
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats._ces_events import _routes, events
from sqlcdc.formats._column_names import name_arrays, name_problems
from sqlcdc.formats._discovery import incremental
from sqlcdc.formats.base import is_rejected_before_decoding
from sqlcdc.values import ColumnSpec

__all__ = ["cols_problem", "_ARGS_RE", "_discover", "_metadata_problems", "_shapes", "_type_problem"]

# ----------------------------------------------------------------------------- columns & keys

_ARGS_RE = r"^\s*[a-z][a-z0-9_ ]*?\s*(\(\s*([^)]*?)\s*\))?\s*$"


def _type_problem(t: Column) -> Column:
    """Why the SQL Server type name ``t`` (of ``eventsource.cols``) cannot type a column (NULL: it can).

    Unknown names (``geography``) are readable: they stay strings
    (:func:`~sqlcdc.formats._sqlserver.unknown_types`). Unreadable: text that is not ``name`` or ``name(args)``, a decimal/numeric whose precision is not 1..38 or
    whose scale is not 0..precision (SQL Server's own limits, and Spark's), a float(n) outside 1..53,
    and arguments that are neither digits nor ``max``."""
    shown = F.substring(t, 1, 60)

    def of(low: Column, args: Column) -> Column:  # both bound once (frames.let): each is read many times
        shape_ok = F.coalesce(low.rlike(_ARGS_RE), F.lit(False))
        base = F.trim(F.regexp_extract(low, r"^\s*([a-z][a-z0-9_ ]*?)\s*(\(|$)", 1))
        p = F.regexp_extract(args, r"^([0-9]{1,3})(,([0-9]{1,3}))?$", 1)
        sc_ = F.regexp_extract(args, r"^([0-9]{1,3})(,([0-9]{1,3}))?$", 3)
        p_i, s_i = p.try_cast("int"), F.coalesce(F.nullif(sc_, F.lit("")).try_cast("int"), F.lit(0))
        return (
            F.when(~shape_ok, F.format_string("type '%s' is not a SQL Server type name", shown))
            .when(base.isin("decimal", "numeric") & (args != "") & (
                (p == "") | (p_i < 1) | (p_i > 38) | (s_i > p_i)), F.format_string(
                "type '%s' cannot be held: decimal precision must be 1..38 and scale 0..precision", shown))
            .when((base == "float") & (args != "") & ~F.coalesce(args.rlike("^[0-9]{1,2}$") & (args.try_cast("int") >= 1)
                                                                    & (args.try_cast("int") <= 53), F.lit(False)),
                  F.format_string("type '%s' cannot be held: float(n) needs n in 1..53", shown))
            .when((args != "") & ~args.rlike("^(max|[0-9]{1,10}(,[0-9]{1,10})?)$"),
                  F.format_string("type '%s' has arguments that are neither digits nor max", shown))
        )

    return frames.let(F.lower(F.trim(t)), lambda low: frames.let(
        F.regexp_replace(F.regexp_extract(low, _ARGS_RE, 2), r"\s", ""), lambda args: of(low, args)))


def cols_problem(cols: Column) -> Column:
    """Why an event's ``eventsource.cols`` (``array<struct<name, type, index>>``) cannot define or
    type the table (NULL when it can): two names equal but for case (Delta and SQL Server's default
    collation compare names case-insensitively), a name Delta cannot store or sqlcdc gives a column
    of its own (:mod:`sqlcdc.formats._column_names`), or a type that cannot be read
    (:func:`_type_problem`)."""
    names = F.transform(cols, lambda c: c["name"])
    typed = F.transform(cols, lambda c: frames.let(_type_problem(c["type"]), lambda problem: F.when(
        problem.isNotNull(), F.format_string("column %s: %s", c["name"], problem))))
    bad_types = F.filter(typed, lambda x: x.isNotNull())
    problems = F.array(
        *name_problems(names, name_arrays(names), remedy=" or give the table `columns:`"),
        F.when(F.size(bad_types) > 0, F.array_join(bad_types, "; ")),
    )
    joined = F.array_join(problems, "; ")  # array_join skips NULLs
    return F.when(cols.isNotNull(), frames.let(joined, lambda j: F.when(j != "", j)))


def _source_shapes(bronze: DataFrame, source: SourceConfig) -> DataFrame:
    """One row per table name (``src_db``, ``src_schema``, ``src_table`` as the events spell them)
    and distinct ``eventsource.cols`` of the source's schema-valid events: the first and last commit
    position it was seen at and the ``pkkey`` names at the last. A scan of all of bronze, done once
    for all of the source's tables (:func:`sqlcdc.formats.base.scanned`); not of the events the
    pipeline quarantines before decoding (not UTF-8 text, whose names would stop the collect; a lone
    surrogate escape)."""
    decodable = bronze.where(~is_rejected_before_decoding())
    ev = frames.where(events(decodable, source), (F.size("_data_violations") == 0) & F.col("src_cols").isNotNull()
                      & F.col("commit_lsn").isNotNull(), "_shaped")
    pos = F.struct(F.col("commit_lsn").alias("lsn"), F.coalesce(F.col("seq_number"), F.lit(0)).alias("seq"))
    return (
        ev.select("src_db", "src_schema", "src_table", "src_cols", pos.alias("pos"),
                  F.transform("pkkey", lambda p: p["name"]).alias("pk_names"))
        .groupBy("src_db", "src_schema", "src_table", "src_cols")
        .agg(F.min("pos").alias("first"), F.max("pos").alias("last"), F.max_by("pk_names", "pos").alias("pk_names"))
    )


def _merged_shapes(shapes: DataFrame) -> DataFrame:
    """:func:`_source_shapes` of the files of several of its results (their union): each table's
    and cols' earliest first, latest last and the ``pkkey`` names at the latest."""
    return shapes.groupBy("src_db", "src_schema", "src_table", "src_cols").agg(
        F.min("first").alias("first"), F.max("last").alias("last"), F.max_by("pk_names", "last").alias("pk_names"))


def _shapes(bronze: DataFrame, table: TableConfig) -> list[Any]:
    """One row per distinct ``eventsource.cols`` of the table's schema-valid events: the first and
    last commit position it was seen at, its problem (:func:`cols_problem`) and the latest ``pkkey``
    names. One Spark job over the source's shapes (:func:`_source_shapes`, of only the files landed
    since the last run's in a local run: :mod:`sqlcdc.formats._discovery`); few rows."""
    source = table.source
    shapes = incremental(("ces-shapes", source.name), repr(source), lambda: bronze,
                         lambda b: _source_shapes(b, source), _merged_shapes)
    return (
        frames.where(shapes, _routes(table), "_routed")
        .groupBy("src_cols")
        .agg(F.min("first").alias("first"), F.max("last").alias("last"), F.max_by("pk_names", "last").alias("pk_names"))
        .select("src_cols", "first", "last", "pk_names", cols_problem(F.col("src_cols")).alias("problem"))
        .collect()
    )


def _discover(table: TableConfig, source: SourceConfig, spark: SparkSession) -> dict[str, Any]:
    """Columns, their first commit position and keys from the landed events (see
    :func:`~sqlcdc.formats.ces.columns_for`)."""
    from sqlcdc import transport

    shapes = sorted(_shapes(transport.read_bronze(spark, source, streaming=False), table), key=lambda r: (r["first"]["lsn"], r["first"]["seq"]))
    cols: list[Any] = []
    first_seen: dict[str, tuple[str, int]] = {}
    keys: list[str] = []
    problems: list[str] = []
    for shape in shapes:
        names = [c["name"] for c in shape["src_cols"]]
        dropped = [n for n in first_seen if n not in names]
        if shape["problem"] or dropped:
            problems.append(shape["problem"] or f"lacks column(s) {', '.join(dropped)} seen in earlier events")
            continue
        cols = sorted(shape["src_cols"], key=lambda c: (c["index"] if c["index"] is not None else 1 << 30))
        for n in names:
            first_seen.setdefault(n, (shape["first"]["lsn"], shape["first"]["seq"]))
        keys = list(shape["pk_names"] or [])
    found = {"cols": cols, "first_seen": first_seen, "keys": keys, "problems": problems}
    return found


def _metadata_problems(table: TableConfig, columns: list[ColumnSpec], found: dict[str, Any]) -> Column:
    """``array<string>`` of reasons the event's ``eventsource.cols`` cannot be taken, when the table's
    columns come from the events (not from config ``columns:``): :func:`cols_problem`; and a drop:
    the event lacks a table column that an event earlier in commit order listed. (An event older
    than a column's first appearance may lack it: that column was added later.) ``found`` is what
    :func:`~sqlcdc.formats.ces.columns_for` remembered for the table (``ces._discovered``), or ``{}``."""
    cols = F.col("src_cols")
    if table.columns:  # the config defines the table: the events' cols neither type nor shape it
        return F.array().cast("array<string>")
    out = [F.when(cols.isNotNull(), F.concat(F.lit("data.eventsource.cols: "), cols_problem(cols)))]
    # only for the columns columns_for discovered (not config columns, not a caller's own list)
    same = not table.columns and found.get("names") == [c.name for c in columns]
    first_seen = found.get("first_seen") if same else None
    if first_seen:
        names = F.transform(cols, lambda c: c["name"])
        pos = F.struct(F.col("commit_lsn").alias("lsn"), F.coalesce(F.col("seq_number"), F.lit(0)).cast("bigint").alias("seq"))
        missing = frames.compact([
            F.when(~F.array_contains(names, c.name) & (pos > F.struct(F.lit(first_seen[c.name][0]).alias("lsn"),
                                                                         F.lit(first_seen[c.name][1]).cast("bigint").alias("seq"))),
                   F.lit(c.name))
            for c in columns if c.name in first_seen
        ])
        out.append(F.when(cols.isNotNull() & (F.size(missing) > 0), F.format_string(
            "data.eventsource.cols lacks column(s) %s of %s, which earlier events list: the event is not taken "
            "to drop them; dropping a column needs an explicit config change (`columns:` in the table config "
            "without it)", F.array_join(missing, ", "), F.lit(table.qualified))))
    return F.array(*out)


