"""Pieces decoders share: reading landed files into bronze."""

from __future__ import annotations

import contextlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Callable, Hashable, Iterator
from urllib.parse import unquote

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming import DataStreamReader
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from sqlcdc import frames
from sqlcdc.config import TableConfig
from sqlcdc.formats._file_checks import (  # noqa: F401 -- re-exported: the landed-file checks' public names
    CHECKED_SUFFIXES, STATE_DIR_ENV, UNREADABLE_FILE, FileChecks, check_landed_files, compressed_file_problem,
    file_uri, kept_from_spark, landed_file_problem, landed_paths, name_problem, shown)
from sqlcdc.transport.files import LANDED_FILE_OPTIONS, file_read, open_files
from sqlcdc.transport.globs import without_names


def landed_files_reader(spark: SparkSession, *, streaming: bool = False) -> DataFrameReader | DataStreamReader:
    """``spark.read`` (or ``readStream``) set up for landed local files (see
    :data:`sqlcdc.transport.files.LANDED_FILE_OPTIONS`): change-table exports, read file by file."""
    return (spark.readStream if streaming else spark.read).options(**LANDED_FILE_OPTIONS)


_MARKER_SCHEMA = StructType([StructField("value", StringType()), StructField("source_file", StringType())])

#: Bronze rows of landed files. A StructType, not a DDL string: under Spark Connect
#: ``createDataFrame``/``schema`` with a DDL string asks the server to parse it, which SDP refuses
#: inside a query function (ATTEMPT_ANALYSIS_IN_PIPELINE_QUERY_FUNCTION).
BRONZE_SCHEMA = StructType([StructField(n, t) for n, t in (
    ("record_id", StringType()), ("value", StringType()), ("source_file", StringType()), ("ingest_time", TimestampType()))])


def read_text_lines(spark: SparkSession, landing: str, *, streaming: bool = True, glob: str | None = None,
                    blank_lines: bool = False) -> DataFrame:
    """Landed files, one envelope per line, as bronze rows: ``record_id, value, source_file, ingest_time``.
    A blank line (:func:`is_blank`) is no record, unless ``blank_lines`` (Debezium: a tombstone).

    ``record_id`` is a hash of file path and line text: stable across re-reads, so lineage
    from silver and quarantine back to bronze survives a full refresh.

    In a local run (:data:`STATE_DIR_ENV` set) a compressed file that cannot be read to its end
    (a ``.gz`` or ``.bz2`` cut short, or not compressed at all) does not stop the read: Spark
    keeps what it could read of it (``ignoreCorruptFiles``), and the streaming read adds one bronze
    row for the file (:data:`UNREADABLE_FILE`, with the reason) that the pipeline quarantines.
    """
    def rows(raw: DataFrame) -> DataFrame:
        lines = raw.select(without_bom(F.col("value")).alias("value"), F.col("_metadata.file_path").alias("source_file"))
        return bronze_columns(lines if blank_lines else lines.where(~is_blank(F.col("value"))))

    return read_landed_files(spark, landing, file_format="text", streaming=streaming, glob=glob, rows=rows)


def _checked_folder(landing: str) -> tuple[str, Path] | None:
    """(local folder, state folder) when this run checks the files of ``landing`` (a local run of
    a local landing, :data:`STATE_DIR_ENV`), else None."""
    state, root = os.environ.get(STATE_DIR_ENV), local_path(landing)
    return (root, Path(state)) if state and root is not None else None


def read_landed_files(spark: SparkSession, landing: str, *, file_format: str, streaming: bool,
                      rows: Callable[[DataFrame], DataFrame], glob: str | None = None,
                      schema: StructType | None = None, avro_schema: str | None = None) -> DataFrame:
    """Bronze rows of the landed files of ``landing``: Spark's read of them
    (:func:`sqlcdc.transport.files.file_read`) made bronze rows by ``rows``.

    Where this run checks the files (a local run, :func:`check_landed_files`, once per read) and
    found a damaged one, that file does not stop the read: Spark keeps what it could read of it
    (``ignoreCorruptFiles``) and a streaming read adds one bronze row per damaged file
    (:data:`UNREADABLE_FILE`). Only then: a file whose damage the check cannot see (an Avro block
    that decompresses but whose records do not decode) stops a read that has no damaged file known,
    naming the file, rather than losing the rest of that file without a trace. A file Spark must not
    open at all (:func:`~sqlcdc.formats._file_checks.kept_from_spark`) is left out of the read by name
    (:func:`sqlcdc.transport.globs.without_names`)."""
    checked = _checked_folder(landing)
    reader = json.loads(avro_schema) if avro_schema else None
    markers = check_landed_files(checked[0], glob, checked[1], reader) if checked else None
    damaged = markers is not None and any(markers.glob("*.json"))
    kept = kept_from_spark(markers) if damaged else set()
    names = without_names(glob, sorted(kept)) if kept else glob
    out = rows(open_files(spark, file_read(landing, file_format=file_format, streaming=streaming, glob=names,
                                           schema=schema, ignore_corrupt=damaged, avro_schema=avro_schema)))
    if not (streaming and markers is not None):
        return out
    found = spark.readStream.schema(_MARKER_SCHEMA).json(str(markers))
    return out.unionByName(bronze_columns(found))


def local_path(landing: str) -> str | None:
    """The local folder of a landing location (a path or ``file:`` URI), else None (remote)."""
    if landing.startswith("file://"):
        return unquote(landing[len("file://"):])
    if landing.startswith("file:"):
        return unquote(landing[len("file:"):])
    return None if "://" in landing else landing


#: What JSON counts as whitespace (RFC 8259); Spark's ``trim`` strips spaces only.
JSON_WHITESPACE = " \t\r\n"


def json_trim(text: Column) -> Column:
    """``text`` without the JSON whitespace at either end.

    A record that starts with ``{`` and ends with ``}`` (nearly every landed one) is returned as it
    is: Spark's ``trim`` with a character set scans the whole text and allocates two arrays of its
    length on each call (``UTF8String.trimRight``), ~10% of Debezium's silver in a profile."""
    return F.when(text.startswith("{") & text.endswith("}"), text).otherwise(F.trim(text, F.lit(JSON_WHITESPACE)))


def without_bom(line: Column) -> Column:
    """``line`` without a leading UTF-8 byte order mark (U+FEFF), which RFC 8259 lets a reader
    ignore: Spark's text reader drops one at a file's start, not at a line's, so the first record
    of each file in a concatenation of such files (``cat a.json b.json``) was "not a JSON object"."""
    return F.when(line.startswith("\ufeff"), line.substr(F.lit(2), F.length(line))).otherwise(line)


def is_blank(text: Column) -> Column:
    """True where ``text`` is NULL or JSON whitespace only (a line of tabs or a CR too): a blank
    line of a landed file, which is no record."""
    return F.coalesce(json_trim(text) == "", F.lit(True))


def is_unreadable_file() -> Column:
    """True for the bronze rows that stand for a landed file that could not be read to its end."""
    return F.coalesce(F.col("value").startswith('\n{"' + UNREADABLE_FILE + '"'), F.lit(False))


def is_not_utf8() -> Column:
    """True for the bronze records whose bytes are not UTF-8 text (a file landed in another encoding,
    a Kafka value that is not text). Spark keeps such bytes as they came; Python cannot take them
    (an Arrow UDF -- the JSON Schema explanations -- failed on one and stopped the whole run, and
    ``toPandas()`` or delta-rs would fail on any table holding one), so no decoder sees them."""
    return F.coalesce(~F.is_valid_utf8(F.col("value")), F.lit(False))


_HIGH = r"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
#: A ``\uD800``-``\uDFFF`` escape in JSON text without its pair (a lone UTF-16 surrogate; the escape
#: is group 1). An escape is a backslash that is not itself escaped: one after an even run of
#: backslashes (``\\ud800`` is the text ``\ud800``). A high half is lone unless a low escape
#: follows; a low half is lone unless an unescaped high one comes just before it.
LONE_SURROGATE_RE = (rf"(?<!\\)(?:\\\\)*({_HIGH}(?!{_LOW})|(?<!(?<!\\)(?:\\\\){{0,8}}{_HIGH}){_LOW})")


def has_lone_surrogate() -> Column:
    """True for the bronze records whose JSON text escapes half of a UTF-16 surrogate pair without
    its other half (``"\\ud800"``). JSON's grammar takes it, but it stands for no character: Spark's
    ``from_json`` reads it as ``?`` (a change-table row reached silver with its text silently
    changed), ``parse_json`` refuses the whole line, and Python keeps it, then cannot write it as
    UTF-8. So, like bytes that are not UTF-8, no decoder sees it. The regex runs only on the few
    records that hold a surrogate escape at all."""
    return _has_lone_surrogate(F.col("value"))


def _has_lone_surrogate(text: Column) -> Column:
    """JSON text ``text`` escapes a lone surrogate (:data:`LONE_SURROGATE_RE`; False, never NULL)."""
    return F.coalesce((text.contains("\\ud") | text.contains("\\uD")) & text.rlike(LONE_SURROGATE_RE), F.lit(False))


def lone_surrogate_reason(text: Column) -> Column:
    """Why JSON text ``text`` is no Unicode text, naming its first lone surrogate escape
    (:data:`LONE_SURROGATE_RE`); NULL when it has none.

    >>> # '{"name": "a\\ud800"}' -> 'not Unicode text: a JSON string escapes \\ud800, half of a UTF-16 ...'
    """
    return F.when(_has_lone_surrogate(text), F.format_string(
        "not Unicode text: a JSON string escapes %s, half of a UTF-16 surrogate pair without its other half "
        "(no character)", F.regexp_extract(text, LONE_SURROGATE_RE, 1)))


def is_rejected_before_decoding() -> Column:
    """True for the bronze rows the pipeline quarantines before any decoder
    (:func:`rejected_before_decoding`): unreadable files, records that are not UTF-8 text, and
    records whose JSON escapes a lone surrogate (:func:`has_lone_surrogate`)."""
    return is_unreadable_file() | is_not_utf8() | has_lone_surrogate()


def utf8_problem(raw: bytes | bytearray | None) -> str | None:
    """Why ``raw`` is not UTF-8 text, naming its first bad bytes and their offset; None when it is.

    >>> utf8_problem(b'{"name": "caf\\xe9"}')
    'not UTF-8 text: byte e9 at offset 13 (invalid continuation byte)'
    >>> utf8_problem('{"id": 1}'.encode("utf-16"))[:97]
    'not UTF-8 text: byte ff at offset 0 (invalid start byte); it begins with a UTF-16 byte order mark'
    """
    if raw is None:
        return None
    raw = bytes(raw)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = raw[e.start:e.end]
        why = f"not UTF-8 text: byte{'s' if len(bad) > 1 else ''} {bad.hex(' ')} at offset {e.start} ({e.reason})"
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # what Windows tools (PowerShell 5's Out-File) write
            why += f"; it begins with a UTF-16 byte order mark ({raw[:2].hex(' ')}): land the file as UTF-8"
        return why
    return None


@lru_cache(maxsize=None)
def _utf8_problem_udf():
    """:func:`utf8_problem` as an Arrow UDF over binary: only ever applied to the rows
    :func:`is_not_utf8` flagged (Arrow cannot pass their bytes as strings)."""

    @F.pandas_udf(StringType())
    def problem(raw: pd.Series) -> pd.Series:
        return raw.map(utf8_problem)

    return problem


def rejected_before_decoding(bronze: DataFrame, source_name: str, source_format: str) -> DataFrame:
    """Quarantine rows for the bronze rows no decoder sees (:func:`is_rejected_before_decoding`):
    rule ``unreadable_file`` for a landed file that could not be read to its end, rule ``not_utf8``
    for a record that is not UTF-8 text (its reason names the first bad bytes and their offset; its
    ``raw`` shows them as U+FFFD, so the quarantine table stays readable by every client, while
    ``bronze_<source>`` keeps the bytes as they came), rule ``lone_surrogate`` for JSON text that
    escapes half a surrogate pair (its reason names the escape)."""
    from sqlcdc import model

    unreadable, not_utf8 = is_unreadable_file(), is_not_utf8()
    return bronze.where(is_rejected_before_decoding()).select(
        *model.quarantine_row(
            source_name=source_name, source_format=source_format,
            reason=F.when(unreadable, F.get_json_object(F.expr("substr(value, 2)"), f"$.{UNREADABLE_FILE}"))
            .when(not_utf8, F.coalesce(_utf8_problem_udf()(F.when(not_utf8, F.col("value").cast("binary"))),
                                       F.lit("not UTF-8 text")))
            .otherwise(lone_surrogate_reason(F.col("value"))),
            rules=F.array(F.when(unreadable, F.lit("unreadable_file")).when(not_utf8, F.lit("not_utf8"))
                          .otherwise(F.lit("lone_surrogate"))),
            raw=F.make_valid_utf8(F.col("value")),
        )
    )


def bronze_columns(df: DataFrame) -> DataFrame:
    """Add ``record_id`` and ``ingest_time`` to a frame with ``value`` and ``source_file``."""
    return df.select(
        record_id(F.col("source_file"), F.col("value")).alias("record_id"),
        "value",
        "source_file",
        F.current_timestamp().alias("ingest_time"),
    )


def record_id(*parts: Column) -> Column:
    return F.sha2(F.concat_ws("\u0001", *[F.coalesce(p.cast("string"), F.lit("")) for p in parts]), 256).substr(1, 32)


# --- routing: a record belongs to the one table that claims it --------------------------------------


def sole_claim(claims: Callable[[TableConfig], Column], table: TableConfig,
               may_rival: Callable[[TableConfig], bool] = lambda peer: True) -> Column:
    """``claims(table)`` and no other table of the source (``TableConfig.peers``) claims the record
    too: a record two tables could take goes to quarantine (:func:`claimants` names them), never
    to both, which would count it twice. ``may_rival`` leaves out the peers that cannot claim what
    ``table`` does (a shorter predicate); ``claims`` must be false, not NULL, for no."""
    return claims(table) & ~frames.any_of([claims(p) for p in table.peers if may_rival(p)])


def claimants(claims: Callable[[TableConfig], Column], tables: list[TableConfig]) -> Column:
    """The qualified names of the ``tables`` that claim the record (an array): a source's records
    no table takes are those with other than exactly one (:func:`sole_claim` of each table)."""
    return frames.compact([F.when(claims(t), F.lit(t.qualified)) for t in tables])


def one_json_value(value: Column) -> Column:
    """True when ``value`` is exactly one JSON value; false for invalid JSON and for a line holding
    two documents (``{...}{...}``, ``{...} {...}``, ``{...},{...}``), which Spark's JSON readers
    (``from_json``, ``parse_json``) would read as the first alone, silently losing the rest.

    Wrapped in ``[...]``, one value is an array of one element; two are an array of two or no
    valid JSON at all. ``json_array_length`` skips over the elements without building them.

    >>> # spark.sql("SELECT json_array_length('[' || '{\\"a\\":1}{\\"b\\":2}' || ']')") -> NULL
    """
    return F.coalesce(F.json_array_length(F.concat(F.lit("["), value, F.lit("]"))) == 1, F.lit(False))


def landed_folder(path: Column) -> Column:
    """The name of the folder a landed file is in (URL-decoded), e.g. the capture instance or topic
    a landing names its folders after; empty when the path has no folder."""
    return F.url_decode(F.regexp_extract(path, r"([^/]+)/[^/]+/*$", 1))


# --- discovery: one scan of a source for all of its tables ---------------------------------------

_scans: dict[Hashable, DataFrame] | None = None


@contextlib.contextmanager
def one_scan_per_source() -> Iterator[None]:
    """Within this block, :func:`scanned` runs each discovery scan once and keeps its (few) rows.

    Decoders that find a table's columns or keys in what has landed (Qlik metadata messages, CES
    ``eventsource.cols``) scan the source's landing folder or topic for it. Without this, that was
    one whole scan per table at pipeline definition: a source of 40 tables over a long history read
    it 40 times before any flow started. ``pipeline.declare_silver`` and ``sqlcdc validate`` declare
    all tables inside one block; a call outside it scans each time (what was landed may change)."""
    global _scans
    outer = _scans
    _scans = {} if outer is None else outer
    try:
        yield
    finally:
        _scans = outer


def scanned(key: Hashable, scan: Callable[[], DataFrame], *, local: bool = False) -> DataFrame:
    """``scan()``, an aggregate of a source's landed records (a few rows per table). Inside
    :func:`one_scan_per_source`, computed once per ``key`` and held as a local relation, so each
    table's lookup afterwards reads those rows, not the landing (``local``: ``scan`` gives one)."""
    if _scans is None:
        return scan()
    if key not in _scans:
        frame = scan()
        _scans[key] = frame if local else frame.sparkSession.createDataFrame(frame.collect(), frame.schema)
    return _scans[key]


def nested_keys(values: Column, texts: Column) -> Column:
    """The keys of ``values`` (MAP<STRING,VARIANT>, an image as the document has it) whose value is
    a JSON object or array (ARRAY<STRING>), for :func:`sqlcdc.values.typed_struct`'s ``nested``.

    ``texts`` is the same image read as MAP<STRING,STRING>: only a row where one of its texts
    starts with ``{`` or ``[`` (how Spark writes an object or array) evaluates ``values``, so
    every other row pays one string test per value, not a second parse. NULL for those rows.
    """
    suspect = F.exists(F.map_values(texts), lambda t: t.startswith("{") | t.startswith("["))
    composite = F.map_filter(values, lambda _, v: F.try_variant_get(v, "$", "struct<>").isNotNull()
                             | F.try_variant_get(v, "$", "array<variant>").isNotNull())
    return F.when(suspect, F.map_keys(composite))


def nested_keys_in(doc: Column, path: str, texts: Column) -> Column:
    """:func:`nested_keys` of the object at JSONPath ``path`` (``$['after']``) of JSON text ``doc``."""
    return nested_keys(F.try_variant_get(F.try_parse_json(doc), path, "map<string,variant>"), texts)
