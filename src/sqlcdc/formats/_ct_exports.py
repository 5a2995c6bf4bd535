"""Change-table exports (CSV, JSON lines, Parquet files of ``cdc.<capture_instance>_CT`` rows) read
into bronze rows: the landing folder's files (:func:`landed_files`), each local file read with its
own header or schema, the files and CSV lines that cannot be read as :data:`UNREADABLE` rows, and
:func:`read_bronze`.

Private to :mod:`sqlcdc.formats.cdc_ct` (which re-exports the names in ``__all__``); see its
docstring, "Bronze".
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import os
import re
from collections import defaultdict
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sqlcdc.config import ConfigError, SourceConfig
from sqlcdc.frames import all_of, union_all
from sqlcdc.names import quote
from sqlcdc.formats._ct_headers import csv_header, parquet_data_problem, parquet_schema
from sqlcdc.formats._ct_names import META_COLUMNS, REQUIRED_COLUMNS, capture_instance_of
from sqlcdc.formats.base import (BRONZE_SCHEMA, FileChecks, file_uri, is_blank, landed_files_reader, landed_paths,
                                 local_path, name_problem, record_id, shown, without_bom)

__all__ = [
    "BINARY_HINT",
    "RAW_TEXT",
    "REQUIRED_COLUMNS",
    "UNREADABLE",
    "WHOLE_ROW_HINT",
    "landed_files",
    "read_bronze",
]

# --- bronze --------------------------------------------------------------------------------------

#: Key added to the JSON of rows read from Parquet: Spark writes binary values into JSON as
#: base64, and bare base64 can look like hex (``AAAf``), so the row says which it is.
BINARY_HINT = "__sqlcdc_binary"

_EXTENSIONS = {
    "parquet": (".parquet",),
    "csv": (".csv", ".csv.gz", ".csv.bz2"),
    "json": tuple(e + c for e in (".json", ".jsonl", ".ndjson") for c in ("", ".gz", ".bz2", ".zst", ".deflate", ".lz4", ".snappy")),
}
#: the rows of unreadable files: bronze without record_id (a StructType, see BRONZE_SCHEMA: a DDL
#: string here stopped every run that had an unreadable export, or an empty landing folder)
_UNREADABLE_SCHEMA = StructType(BRONZE_SCHEMA.fields[1:])


def _file_format(source: SourceConfig) -> str | None:
    forced = source.options.get("file_format")
    if forced is None:
        return None
    forced = {"jsonl": "json", "ndjson": "json"}.get(str(forced).lower(), str(forced).lower())
    if forced not in _EXTENSIONS:
        raise ConfigError(
            [f"{source.file}: sources.{source.name}.options.file_format: {forced!r} is not one of "
             f"{', '.join(_EXTENSIONS)}"]
        )
    return forced


def landed_files(landing: str, forced: str | None = None, glob: str | None = None) -> dict[str, dict[str, list[str]]]:
    """Local landing folder -> ``{format: {capture instance: [files]}}`` (plain Python, no Spark job).

    Hidden and ``_``-prefixed files and folders are skipped, as Spark's file sources do.
    """
    out: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    if not os.path.isdir(landing):
        raise FileNotFoundError(f"landing folder {landing} does not exist")
    for path in landed_paths(landing):
        name = os.path.basename(path)
        if glob and not fnmatch.fnmatch(name, glob):
            continue
        fmt = forced or next((f for f, exts in _EXTENSIONS.items() if name.lower().endswith(exts)), None)
        if fmt is not None:
            out[fmt][capture_instance_of(path)].append(path)
    return out


def _to_bronze(df: DataFrame, hint: bool = False, texts: Sequence[str] = (), replaced: bool = False) -> DataFrame:
    """Any change-table frame -> ``value`` (the row as JSON) + file lineage, without analysing it.
    ``to_json`` writes bytes that are not UTF-8 as U+FFFD: a row whose ``texts`` columns hold such
    bytes stays bytes (``column: value, ...``), refused before any decoder with the first bad byte
    named. ``replaced``: Spark's CSV reader has replaced them already (a remote landing, read
    whole), so a row holding U+FFFD is unreadable: it cannot be told from a byte that was not UTF-8."""
    row = F.struct(F.col("*"), F.lit("base64").alias(BINARY_HINT)) if hint else F.struct(F.col("*"))
    value = F.to_json(row, {"ignoreNullFields": "false", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
                            "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"})
    if texts:
        as_landed = F.concat_ws(", ", *[F.concat(F.lit(f"{name}: "), F.col(quote(name))) for name in texts])
        value = F.when(all_of([F.coalesce(F.is_valid_utf8(F.col(quote(n))), F.lit(True)) for n in texts]),
                       value).otherwise(as_landed)
    if replaced:  # every column of a CSV read is text: the row cast to text holds each value
        value = F.when(F.struct(F.col("*")).cast("string").contains("\ufffd"), F.to_json(F.struct(
            F.lit(_REPLACED).alias(UNREADABLE), F.struct(F.col("*")).cast("string").alias(RAW_TEXT)))).otherwise(value)
    return df.select(
        value.alias("value"),
        F.col("_metadata.file_path").alias("source_file"),
        F.col("_metadata.file_modification_time").alias("ingest_time"),
    )


_REPLACED = ("a value holds U+FFFD, which Spark's CSV reader makes of bytes that are not UTF-8 (a remote landing "
             "cannot tell the two apart); land the export as UTF-8, or as Parquet or JSON lines")


def _read(spark: SparkSession, fmt: str, paths: list[str] | str, source: SourceConfig, glob: str | None) -> DataFrame:
    """A whole remote landing folder of one format (files read together), or local JSON-lines files."""
    reader = landed_files_reader(spark)
    if isinstance(paths, str):  # a whole (remote) landing folder
        reader = reader.option("recursiveFileLookup", "true")
        if glob:
            reader = reader.option("pathGlobFilter", glob)
    many = [paths] if isinstance(paths, str) else [_spark_path(p) for p in paths]
    if fmt == "json":
        lines = reader.format("text").load(many).select(
            without_bom(F.col("value")).alias("value"),
            F.col("_metadata.file_path").alias("source_file"),
            F.col("_metadata.file_modification_time").alias("ingest_time"),
        )
        return lines.where(~is_blank(F.col("value")))
    if fmt == "csv":
        raw = (
            reader.option("header", "true")
            .option("inferSchema", "false")
            .option("sep", source.options.get("csv_delimiter", ","))
            .option("nullValue", source.options.get("csv_null_value", ""))
            .option("multiLine", "true")
            .option("escape", '"')
            .csv(many)
        )
        return _to_bronze(raw, replaced=True)
    return _to_bronze(reader.option("mergeSchema", "true").parquet(*many), hint=True)


# --- local exports: each file read with its own header / schema ------------------------------------

#: Key of a bronze row that stands for a file, or a CSV line, that could not be read as change-table
#: rows: ``{"__sqlcdc_unreadable": <reason>, "__sqlcdc_raw": <text or null>}``. The decoder
#: quarantines it with that reason; nothing is read from it (no value is ever defaulted).
UNREADABLE = "__sqlcdc_unreadable"
RAW_TEXT = "__sqlcdc_raw"
#: Key added to the JSON of a CSV row: the row has every column of its file's header, so a column
#: missing from it is missing from the file (a Parquet row says so with :data:`BINARY_HINT`); in
#: JSON lines a missing column is NULL (``FOR JSON`` leaves NULLs out).
WHOLE_ROW_HINT = "__sqlcdc_format"
#: The metadata columns a file must have for its rows to be read (``__$seqval`` is checked per row:
#: exports of ``fn_cdc_get_net_changes`` have none).
_GLOB_CHARS = re.compile(r"([\[\]{}*?\\])")


def _spark_path(path: str) -> str:
    """A local path as Spark reads it literally (glob characters escaped: ``d[1].csv`` is a name)."""
    return _GLOB_CHARS.sub(r"\\\1", path)


def _unreadable_files(spark: SparkSession, root: str, found: list[tuple[str, str, str]]) -> DataFrame:
    """One bronze row per landed file that cannot be read at all: ``(path, problem, raw text)``, the
    file named by its path below the landing folder ``root``."""
    rows = []
    for path, problem, raw in found:
        try:
            mtime = dt.datetime.fromtimestamp(os.stat(path).st_mtime, tz=dt.timezone.utc)
        except OSError:
            mtime = dt.datetime.now(tz=dt.timezone.utc)
        value = json.dumps({UNREADABLE: f"file {shown(os.path.relpath(path, root))} {problem}", RAW_TEXT: raw or None})
        rows.append((value, file_uri(path), mtime))
    return spark.createDataFrame(rows, _UNREADABLE_SCHEMA)


def _regex_char(ch: str) -> str:
    return ch if ch.isalnum() else "\\" + ch


#: What Spark's CSV parser gives for a quoted empty field (``""``), told apart from an empty field
#: (NULL; Spark reads both as NULL when ``nullValue`` is empty): a change table's text column may
#: hold empty text. The decoder reads it as NULL in any other column (an export quoting every
#: field, as PowerShell's ``Export-Csv`` does, writes NULL as ``""``).
_QUOTED_EMPTY = "\u0000sqlcdc:quoted-empty\u0000"


def _csv_record_regex(sep: str) -> str:
    """One whole CSV record: fields split by ``sep``; a quoted field is ``"..."`` with ``""`` inside
    and may span lines; an unquoted one holds no line break and does not start with ``"``.
    Possessive loops over character classes: no backtracking, no deep regex stacks on long values."""
    quoted = '"(?:[^"]++|"")*+"'
    s = "".join(_regex_char(c) for c in sep)
    if len(sep) == 1:
        unquoted = f'[^"{s}\\r\\n][^{s}\\r\\n]*+'
    else:
        unquoted = f'(?!"|{s})[^\\r\\n](?:(?!{s})[^\\r\\n])*+'
    field = f"(?:{quoted}|{unquoted})?"
    return f"^{field}(?:{s}{field})*+$"


def _read_csv(spark: SparkSession, paths: list[str], header: list[str], source: SourceConfig, skip: int = 0) -> DataFrame:
    """CSV exports sharing ``header`` (one read): lines assembled into records in Spark, each record
    parsed with ``from_csv`` against the header's positions, so a file's own header names its values.

    A record is the physical lines up to the one where the count of ``"`` since it began is even (a
    quoted value may span lines). A record that is not well-formed CSV -- a quote left open runs on
    into the following lines, which Spark's CSV reader returns as one silently wrong value or
    drops -- is taken apart into its lines: the first (where the quote was opened) is unreadable,
    every following line that is a whole record on its own is read, the rest are unreadable, with
    a reason naming the open quote's line. A record without the header's field count is unreadable.
    Unreadable lines become :data:`UNREADABLE` bronze rows (quarantined by the decoder). ``skip``:
    the empty lines before the header (each is a record of its own).
    """
    sep = str(source.options.get("csv_delimiter", ","))
    null_value = str(source.options.get("csv_null_value", ""))
    shape = _csv_record_regex(sep)
    # Lines split at "\n" alone: a "\r" before it is the line's end (CRLF) where the record ends
    # there, and part of the quoted value where it does not (a value holding "\r\n" or a lone "\r";
    # Spark's default split at either would turn them into "\n" or split the line).
    raw = landed_files_reader(spark).format("text").option("lineSep", "\n").load([_spark_path(p) for p in paths])
    lines = raw.select(
        # a line that is not UTF-8 keeps its bytes (and a CR): a regex would make them U+FFFD
        F.when(F.is_valid_utf8("value"), F.regexp_replace("value", "\r\\z", "")).otherwise(F.col("value")).alias("_line"),
        F.col("value").endswith("\r").alias("_cr"),  # the CR a record's end drops, kept inside one
        F.col("_metadata.file_path").alias("source_file"),
        F.col("_metadata.file_modification_time").alias("ingest_time"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_mid"),  # increasing within a split of a file
    )
    in_file = Window.partitionBy("source_file").orderBy("_block", "_mid")
    n_quotes = F.length("_line") - F.length(F.regexp_replace("_line", '"', ""))
    lines = lines.select(
        "_line", "_cr", "source_file", "ingest_time", "_block", "_mid",
        F.row_number().over(in_file).alias("_n"),
        (F.sum(n_quotes).over(in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)) % 2 == 0).alias("_end"),
    )
    lines = lines.select(
        "_line", "_cr", "source_file", "ingest_time", "_block", "_mid", "_n", "_end",
        F.coalesce(F.lag("_end").over(in_file), F.lit(True)).alias("_starts"),  # the line begins a record
        F.coalesce(F.sum(F.col("_end").cast("int")).over(in_file.rowsBetween(Window.unboundedPreceding, -1)),
                   F.lit(0)).alias("_rec"),  # record `skip` is the header
    )
    lines = lines.where(F.col("_rec") > skip)
    # Most records are one line: they need no grouping (no shuffle).
    one_line = F.col("_starts") & F.col("_end")
    single = lines.where(one_line & (F.col("_line") != "")).select(  # Spark's CSV reader skips empty lines too
        "source_file", "ingest_time", "_n", F.col("_line").alias("_cand"),
        F.when(~F.col("_line").rlike(shape), F.format_string(
            'line %d: not well-formed CSV (a quoted value is followed by text before the next delimiter)', F.col("_n"))
        ).alias("_why"),
    )
    records = lines.where(~one_line).groupBy("source_file", "_rec").agg(
        F.sort_array(F.collect_list(F.struct("_n", "_line", "_end", "_cr"))).alias("_lines"),
        F.max("ingest_time").alias("ingest_time"),
    )
    # inside the record a line keeps its "\r" (the quoted value's), its last line ends the record
    text = F.array_join(F.transform("_lines", lambda x, i: F.when(i == F.size("_lines") - 1, x["_line"])
                                    .when(x["_cr"], F.concat(x["_line"], F.lit("\r"))).otherwise(x["_line"])), "\n")
    records = records.select(
        "source_file", "ingest_time", "_lines", text.alias("_text"),
        F.element_at("_lines", -1)["_end"].alias("_closed"),
    )
    # a well-formed record is one candidate; one that is not is taken apart into its lines
    well_formed = F.col("_closed") & F.col("_text").rlike(shape)
    open_n, last_n = F.col("_lines")[0]["_n"], F.element_at("_lines", -1)["_n"]

    def line_of(x: Column, i: Column) -> Column:
        line = x["_line"]
        on_its_own = ((F.length(line) - F.length(F.regexp_replace(line, '"', ""))) % 2 == 0) & line.rlike(shape)
        why = F.when(
            (i == 0) & (last_n == open_n),
            F.format_string('line %d: a quote (") is not closed (unterminated or stray quote)', x["_n"]),
        ).when(
            i == 0,
            F.format_string(
                'line %d: a quote (") is not closed where the record should end (unterminated or stray quote); '
                "lines %d-%d would have been read as one value: they are read line by line instead",
                x["_n"], x["_n"], last_n),
        ).when(
            ~on_its_own,
            F.format_string("line %d: not a CSV record on its own (it follows the quote left open at line %d)",
                            x["_n"], open_n),
        )
        return F.struct(x["_n"].alias("_n"), line.alias("_cand"), why.alias("_why"), ((i == 0) | (line != "")).alias("_keep"))

    pieces = F.when(
        well_formed,
        F.array(F.struct(open_n.alias("_n"), F.col("_text").alias("_cand"), F.lit(None).cast("string").alias("_why"),
                         F.lit(True).alias("_keep"))),
    ).otherwise(F.transform("_lines", line_of))
    multi = records.select("source_file", "ingest_time", F.explode(pieces).alias("_c")).where(F.col("_c._keep")).select(
        "source_file", "ingest_time", F.col("_c._n").alias("_n"), F.col("_c._cand").alias("_cand"), F.col("_c._why").alias("_why"),
    )
    cands = single.unionByName(multi)
    ddl = ", ".join(f"c{i} string" for i in range(len(header))) + ", _bad string"
    parsed = F.from_csv(
        F.col("_cand"), ddl,
        {"sep": sep, "nullValue": null_value, "emptyValue": _QUOTED_EMPTY, "escape": '"', "mode": "PERMISSIVE",
         "columnNameOfCorruptRecord": "_bad"},
    )
    cands = cands.select("source_file", "ingest_time", "_cand", "_n", "_why", F.when(F.col("_why").isNull(), parsed).alias("_p"))
    why = F.coalesce(
        F.col("_why"),
        F.when(F.col("_p._bad").isNotNull(), F.format_string(
            "line %d: the record does not have the %d fields of the file's header", F.col("_n"), F.lit(len(header)))),
    )
    def value_of(i: int, name: str) -> Column:  # "" (quoted) is empty text, a metadata column's NULL
        v = F.col(f"_p.c{i}")
        return F.when(v == _QUOTED_EMPTY, F.lit(None if name in META_COLUMNS else "")).otherwise(v).alias(name)

    row = F.struct(*[value_of(i, name) for i, name in enumerate(header)], F.lit("csv").alias(WHOLE_ROW_HINT))
    bad = F.struct(why.alias(UNREADABLE), F.col("_cand").alias(RAW_TEXT))
    # A record that is not UTF-8 stays its bytes: bronze keeps what landed, and the pipeline's check
    # before any decoder names the first bad byte (from_csv and to_json would turn it into U+FFFD).
    value = F.when(~F.is_valid_utf8(F.col("_cand")), F.col("_cand")).when(
        why.isNull(), F.to_json(row, {"ignoreNullFields": "false"})).otherwise(F.to_json(bad, {"ignoreNullFields": "false"}))
    return cands.select(value.alias("value"), "source_file", "ingest_time")


def _read_local(spark: SparkSession, root: str, source: SourceConfig, forced: str | None, glob: str | None) -> list[DataFrame]:
    """Bronze frames of a local landing: JSON lines read together (a line is a record), CSV files
    grouped by their own header and Parquet files by their own schema (one read per group, so a
    file's columns are read by name, whatever their order or types in other files), and a frame
    of the files that cannot be read at all (see :data:`UNREADABLE`)."""
    frames: list[DataFrame] = []
    unreadable: list[tuple[str, str, str]] = []
    sep = str(source.options.get("csv_delimiter", ","))
    checks = FileChecks.of_this_run()  # a whole .gz is decompressed once, not on every run
    for fmt, groups in sorted(landed_files(root, forced, glob).items()):
        files = []
        for path in (p for _, ps in sorted(groups.items()) for p in ps):
            problem = name_problem(path) or checks.problem(path, lines=fmt != "parquet")  # a line too long to read
            if problem:
                unreadable.append((path, problem, ""))
            else:
                files.append(path)
        if fmt == "json":
            if files:
                frames.append(_read(spark, fmt, files, source, None))
            continue
        by_columns: dict[tuple, list[str]] = defaultdict(list)
        for path in files:
            if fmt == "csv":
                names, problem, raw, blank = csv_header(path, sep)
                key = (tuple(names), blank) if names is not None else None
            else:
                key, problem = parquet_schema(path)
                problem = problem or checks.problem(path, whole=parquet_data_problem)
                raw = ""
            if problem:
                unreadable.append((path, problem, raw))
            elif key is not None:
                by_columns[key].append(path)
        for key, paths in by_columns.items():
            if fmt == "csv":
                frames.append(_read_csv(spark, paths, list(key[0]), source, key[1]))
            else:
                texts = [name for name, _, is_text in key if is_text]
                frames.append(_to_bronze(landed_files_reader(spark).parquet(*[_spark_path(p) for p in paths]), hint=True,
                                         texts=texts))
    checks.save()
    if unreadable:
        frames.append(_unreadable_files(spark, root, unreadable))
    return frames


def read_bronze(spark: SparkSession, source: SourceConfig, *, streaming: bool = False) -> DataFrame:
    """Landed change-table exports (Parquet, CSV, JSON lines) as bronze rows (a batch read).

    Columns: ``record_id, value, source_file, ingest_time`` (the file's modification time). A local
    landing folder is listed in Python; each CSV or Parquet file is read with its own header or
    schema (:func:`_read_local`), and a file or CSV line that cannot be read is a bronze row that
    says why (:data:`UNREADABLE`). A remote one (``abfss://...``) needs ``options.file_format`` and is
    read whole. Nothing is analysed or executed here (SDP query functions must stay lazy).
    ``streaming=True`` is refused: see the module docstring.
    """
    if streaming:
        raise ValueError(f"source {source.name}: cdc_ct bronze is a batch read (STREAMING = False)")
    if not source.landing:
        raise ConfigError([f"{source.file}: sources.{source.name}.landing: required for a file source"])
    forced, glob = _file_format(source), source.options.get("glob")
    root = local_path(source.landing)
    frames: list[DataFrame] = []
    if root is None:
        if forced is None:
            raise ConfigError(
                [f"{source.file}: sources.{source.name}.options.file_format: required for a remote landing "
                 f"({source.landing}): one of {', '.join(_EXTENSIONS)}"]
            )
        frames.append(_read(spark, forced, source.landing, source, glob))
    else:
        if not os.path.isdir(root):
            raise FileNotFoundError(
                f"{source.file}: sources.{source.name}.landing: folder {root} does not exist (create it, or "
                "export change-table rows into it)"
            )
        frames = _read_local(spark, root, source, forced, glob)
    if not frames:
        return spark.createDataFrame([], BRONZE_SCHEMA)
    return union_all(frames, by_name=True).select(
        record_id(F.col("source_file"), F.col("value")).alias("record_id"),
        "value",
        "source_file",
        "ingest_time",
    )
