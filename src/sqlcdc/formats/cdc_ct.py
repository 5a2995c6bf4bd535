"""SQL Server native change tables (``cdc.<capture_instance>_CT``) exported to files -> canonical changes.

What lands
==========

Rows of a change table, or of ``cdc.fn_cdc_get_all_changes_<ci>(@from, @to, N'all update old')``
(its four metadata columns; :mod:`sqlcdc.ct_jdbc` lands those plus ``__$command_id`` joined from
the change table; ``__$end_lsn`` is never needed), exported as **Parquet**, **CSV** (with a
header line) or **JSON lines**. The format is taken from the file extension (``.parquet``;
``.csv``; ``.json``/``.jsonl``/``.ndjson``; optionally ``.gz``); other files are skipped. The source
option ``file_format`` makes every file that format (narrow with ``glob``, e.g. ``*.txt``).
Each row has the metadata columns ``__$start_lsn``, ``__$end_lsn``, ``__$seqval``,
``__$operation``, ``__$update_mask``, ``__$command_id`` (absent before the 2012-2016 cumulative
updates that introduced it: then the order inside a transaction falls back to ``__$seqval``), then
the captured columns. An optional ``tran_end_time`` column (the ``cdc.lsn_time_mapping`` join the
documentation describes) becomes the commit time.

Binary values (LSNs, the update mask, ``binary``/``varbinary`` columns) may be native binary
(Parquet), ``0x``-hex text, bare hex text (``bcp``), or base64 (``FOR JSON`` exports). A 10-byte LSN
is recognised in every spelling (20 hex digits, or 16 base64 characters ending ``==``); for other
binary text without ``0x`` the source option ``binary_text: hex|base64`` decides (default ``hex``).

Which capture instance a file belongs to comes from its path: the file name
``[cdc.]<ci>_CT[.|_|-]anything`` (``cdc.dbo_orders_CT.csv``, ``dbo_orders_CT_0001.parquet``), else
the parent folder ``[cdc.]<ci>_CT[.|_|-]anything`` or ``[cdc.]<ci>[_CT]``
(``landing/dbo_orders/part-0.parquet``, ``landing/dbo_orders_CT.<window>/part-0.parquet`` as
:func:`sqlcdc.ct_jdbc.parquet_lander` writes). A table's capture
instance is its ``options.capture_instance``, default ``<schema>_<table>`` (SQL Server's default).

Bronze
======

Uniform across formats: one row per change-table row, ``value`` = the row as a JSON object (a
JSON line is kept as landed; a CSV row becomes an object of its text fields; a Parquet row is
rendered by Spark, binary as base64, marked ``"__sqlcdc_binary": "base64"``), ``source_file``,
``record_id`` (hash of file and row) and ``ingest_time`` = the file's modification time, so a
recomputed bronze keeps its ingest metadata. A local landing folder is listed in Python (no Spark
job: SDP query functions must stay lazy); a remote landing (``abfss://...``) needs
``options.file_format`` and is read whole (one header/schema for all its files: the checks below
are for local landings). Bronze is a *batch* read (:data:`STREAMING` is False, below), because
Parquet and CSV exports of different capture instances have different columns and Spark's
streaming file source needs one schema.

Every local file is read with its **own** header (CSV) or schema (Parquet): Python reads each CSV
header and each Parquet footer (pyarrow), files with the same columns are read together, and a
value is named by its own file's column, whatever the column order or the types in other exports.
What cannot be read becomes a bronze row ``{"__sqlcdc_unreadable": <reason>, "__sqlcdc_raw": ...}``
that the decoder quarantines with that reason (rule ``decode``; ``bronze_file`` = the file), while the
rest of the source lands:

- a file that does not open, a ``.gz`` that is not gzip or is cut short (checked to its end in
  Python: Spark would fail the whole read), a file that is not Parquet (names are
  read literally: ``[1]`` is not a glob, ``:`` is read through :data:`~sqlcdc.transport.files.LANDED_FILE_OPTIONS`);
- a header or schema that cannot be mapped to change-table columns: no ``__$start_lsn``,
  ``__$seqval`` or ``__$operation`` (e.g. an export without a header line), a ``__$`` name that is
  not a change-table column, an empty or repeated name, a ``__sqlcdc`` name, a Parquet type Spark
  cannot read (``time``, nanosecond timestamps);
- in CSV, records are assembled from lines in Spark (a record ends at the line where the count of
  ``"`` since it began is even) and checked against RFC 4180's shape. A quote left open (Spark's own
  reader turns it into one value that silently swallows the following rows, or drops them) makes
  the record be taken apart line by line: the line that opened the quote is quarantined, each
  following line that is a whole record on its own lands, the others are quarantined naming the
  open quote's line. A record without the header's number of fields is quarantined. (One ``"``
  inside an unquoted value, as ``bcp`` may write it, is such an open quote: that line is
  quarantined, not guessed.) This costs about twice Spark's own CSV reader (300k one-line rows on
  a loaded 2-core machine: 6.6 s against 2.5-3.3 s, half of it the per-file line order), the price
  of never letting a quote swallow rows.

A CSV or Parquet file without one of the table's configured columns has each row quarantined
(``column amount is not in the file's header or schema``): the value was not exported, it is not
NULL. Values of different types in different Parquet files (``amount`` decimal here, text there) are
each rendered to JSON text and typed by the decoder, which quarantines a value that does not read.

Decoding
========

- ``__$operation`` 1 -> DELETE (before image), 2 -> INSERT (after image), 3 + 4 -> one UPDATE: the
  rows sharing ``__$start_lsn`` and ``__$seqval`` are paired, 3 is the before image, 4 the after.
  A 3 or 4 whose partner is missing goes to quarantine with the reason; so does a row whose LSNs,
  operation, key or values do not read. The same change-table row landed twice (overlapping
  exports: at-least-once delivery) is one change: its ``change_id``
  (``cdc_ct:<ci>:<start_lsn>:<seqval>:<op>``) is stable, the copy with the lowest record id is used
  and the others are *duplicates*, listed by :func:`duplicates` and counted by the run's balance
  (``landed = silver + quarantine + dropped + skipped + duplicate``). Rows at one
  (``__$start_lsn``, ``__$seqval``, ``__$operation``) that differ (update mask, values or
  ``__$command_id``; a missing command id or ``tran_end_time`` is not a difference) are a
  *conflict*: every one of them is quarantined with a reason naming the position and the files,
  none is picked; the other half of an update whose half is in conflict is quarantined saying so.
- Pairing needs both rows of an update, which may sit in different files or exports, so
  :data:`STREAMING` is False: silver is recomputed from bronze.
- ``changed_columns``: the ``__$update_mask`` bits of the captured-column ordinals. Ordinals are
  the positions in the table config's ``columns:`` (the change table's column order), or
  ``options.column_ordinals: {name: ordinal}`` when the config lists a subset or another order. The
  mask follows ``sys.fn_cdc_is_bit_set``: ordinal *p* is bit ``(p-1) % 8`` of the byte
  ``(p-1) // 8`` counted **from the end** of the varbinary, i.e. the mask is a big-endian number
  whose bit ``p-1`` is set (the reverse byte order of Qlik's little-endian ``changeMask``). Inserts
  and deletes have every bit set, so they list every column.
- Large objects (config ``lob: true``; ``varchar(max)``, ``nvarchar(max)``, ``varbinary(max)``)
  are NULL in operation 3 unless the update changed them. Such a NULL is *not provided*, not NULL:
  when the mask says the column did not change, the before image takes the after image's value
  (unchanged means equal); and an after-image LOB that is NULL while its mask bit is clear is left
  out of ``provided_columns``, so gold keeps the value it has (which is right whether the NULL was
  real or omitted). ``image``/``text``/``ntext`` are NULL in operations 1 and 3: deletes only
  remove the key in gold, and the before-image rule above covers updates.

Ordering: the ``sequence`` decision
===================================

The documented order is commit LSN (``__$start_lsn``), then ``__$command_id``, then operation;
``__$seqval`` is "not for ordering". Debezium reads these same change tables and stamps its events
``commit_lsn = __$start_lsn``, ``change_lsn = __$seqval`` and ``event_serial_no`` = the count of
change-table rows consumed at that (commit, seqval) position (``SqlServerOffsetContext.
setChangePosition``): 1 for an insert or delete, 2 for an update (rows 3 and 4), 1 and 2 for a
delete + insert that share a position. Gold's SCD2 ``__START_AT``/``__END_AT`` are the sequence
values, so for CT and Debezium to give identical gold tables the CT sequence must be that same
triple. It is, with one adjustment that makes the documented rule win where the two disagree:

1. each change gets Debezium's ``(seqval, serial)``;
2. inside each commit, changes are ranked by ``(__$command_id, operation, seqval, serial)`` (the
   documented order; seqval only breaks ties) and, separately, their ``(seqval, serial)`` pairs
   are sorted; the change of rank *k* gets the *k*-th pair.

When seqval order agrees with command order (the normal case) step 2 changes nothing and the
sequence equals Debezium's exactly. When it does not (the change-table ordering bug that
``__$command_id`` was added to fix, KB 3030352), the changes still sort in command order, with
values from the same LSN space, so back-fill from CT and continuation from Debezium or CES still
interleave correctly. A primary-key change recorded as one 3+4 pair is one UPDATE here;
:func:`sqlcdc.model.apply_frame` turns it into DELETE(old key) + UPSERT(new key) at the pair's
sequence, which is what Debezium emits for it (both events carry the same offset).

Example table config (``config/tables/orders.yml``)::

    source: ct                    # a source with format: cdc_ct
    table: dbo.orders
    keys: [id]
    columns:                      # the captured columns, in change-table order
      - {name: id, type: int}
      - {name: customer, type: string}
      - {name: amount, type: "decimal(10,2)"}
      - {name: notes, type: string, lob: true}      # nvarchar(max)
      - {name: status, type: string}
    options: {capture_instance: dbo_orders}          # the default for dbo.orders anyway

and in Python::

    from sqlcdc.formats import cdc_ct
    bronze = cdc_ct.read_bronze(spark, source)          # batch: Parquet + CSV + JSON lines
    cols = cdc_ct.columns_for(table, source, spark)     # from the table config
    decoded = cdc_ct.decode(bronze, table, cols)        # .changes, .quarantine
"""

from __future__ import annotations

import csv
import datetime as dt
import fnmatch
import gzip
import io
import json
import os
import re
from collections import defaultdict
from typing import Iterable
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sqlcdc import lsn, model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import Decoded, Decoder
from sqlcdc.formats._masks import mask_has
from sqlcdc.formats.base import BRONZE_SCHEMA, FileChecks, file_uri, landed_files_reader, local_path, one_json_value, record_id
from sqlcdc.values import ColumnSpec, commit_time, typed_struct

NAME = "cdc_ct"
STREAMING = False
#: Exports are read as a batch (per-file formats and schemas): bronze is a materialized view.
BRONZE_STREAMING = False

START_LSN, END_LSN, SEQVAL = "__$start_lsn", "__$end_lsn", "__$seqval"
OPERATION, UPDATE_MASK, COMMAND_ID = "__$operation", "__$update_mask", "__$command_id"
META_COLUMNS = (START_LSN, END_LSN, SEQVAL, OPERATION, UPDATE_MASK, COMMAND_ID)
COMMIT_TIME_COLUMN = "tran_end_time"

OP_DELETE, OP_INSERT, OP_UPDATE_OLD, OP_UPDATE_NEW = 1, 2, 3, 4

# Capture instance from a file path (see the module docstring). Same patterns in Python and Spark.
_CI_FROM_NAME = r"^(?:cdc\.)?(.+)_CT(?:[._-].*)?$"
_CI_FROM_FOLDER = r"^(?:cdc\.)?(.+?)(?:_CT)?$"


# --- capture instance of a landed file -----------------------------------------------------------


def capture_instance_of(path: str) -> str:
    """The capture instance a landed file belongs to, from its path ('' when none can be told).

    >>> capture_instance_of("file:///landing/cdc.dbo_orders_CT.csv")
    'dbo_orders'
    >>> capture_instance_of("/landing/dbo_orders_CT_0001.parquet")
    'dbo_orders'
    >>> capture_instance_of("/landing/sales_Order%20Lines/part-0.json")
    'sales_Order Lines'
    """
    parts = [unquote(p) for p in path.rstrip("/").split("/")]
    m = re.match(_CI_FROM_NAME, parts[-1])
    if m:
        return m.group(1)
    if len(parts) >= 2:
        m = re.match(_CI_FROM_NAME, parts[-2]) or re.match(_CI_FROM_FOLDER, parts[-2])
        if m:
            return m.group(1)
    return ""


def capture_instance_col(path: Column) -> Column:
    """Spark version of :func:`capture_instance_of`."""
    name = F.url_decode(F.regexp_extract(path, r"([^/]+)/*$", 1))
    folder = F.url_decode(F.regexp_extract(path, r"([^/]+)/[^/]+/*$", 1))
    from_name = F.regexp_extract(name, _CI_FROM_NAME, 1)
    folder_ct = F.regexp_extract(folder, _CI_FROM_NAME, 1)
    from_folder = F.regexp_extract(folder, _CI_FROM_FOLDER, 1)
    return F.when(from_name != "", from_name).when(folder_ct != "", folder_ct).otherwise(from_folder)


def table_capture_instance(table: TableConfig) -> str:
    """``options.capture_instance``, default ``<schema>_<table>``."""
    return str(table.options.get("capture_instance") or f"{table.schema}_{table.table}")


# --- bronze --------------------------------------------------------------------------------------

#: Key added to the JSON of rows read from Parquet: Spark writes binary values into JSON as
#: base64, and bare base64 can look like hex (``AAAf``), so the row says which it is.
BINARY_HINT = "__sqlcdc_binary"

_EXTENSIONS = {
    "parquet": (".parquet",),
    "csv": (".csv", ".csv.gz"),
    "json": (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz"),
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
    for folder, dirs, files in os.walk(landing):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        for name in sorted(files):
            if name.startswith(("_", ".")) or (glob and not fnmatch.fnmatch(name, glob)):
                continue
            low = name.lower()
            fmt = forced or next((f for f, exts in _EXTENSIONS.items() if low.endswith(exts)), None)
            if fmt is None:
                continue
            path = os.path.join(folder, name)
            out[fmt][capture_instance_of(path)].append(path)
    return out


def _to_bronze(df: DataFrame, hint: bool = False) -> DataFrame:
    """Any change-table frame -> ``value`` (the row as JSON) + file lineage, without analysing it."""
    row = F.struct(F.col("*"), F.lit("base64").alias(BINARY_HINT)) if hint else F.struct(F.col("*"))
    value = F.to_json(
        row,
        {
            "ignoreNullFields": "false",
            "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
            "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
        },
    )
    return df.select(
        value.alias("value"),
        F.col("_metadata.file_path").alias("source_file"),
        F.col("_metadata.file_modification_time").alias("ingest_time"),
    )


def _read(spark: SparkSession, fmt: str, paths: list[str] | str, source: SourceConfig, glob: str | None) -> DataFrame:
    """A whole remote landing folder of one format (files read together), or local JSON-lines files."""
    reader = landed_files_reader(spark)
    if isinstance(paths, str):  # a whole (remote) landing folder
        reader = reader.option("recursiveFileLookup", "true")
        if glob:
            reader = reader.option("pathGlobFilter", glob)
    many = [paths] if isinstance(paths, str) else [_spark_path(p) for p in paths]
    if fmt == "json":
        lines = reader.format("text").load(many)
        return lines.where(F.trim("value") != "").select(
            "value",
            F.col("_metadata.file_path").alias("source_file"),
            F.col("_metadata.file_modification_time").alias("ingest_time"),
        )
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
        return _to_bronze(raw)
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
#: The metadata columns a file must have for its rows to be read.
REQUIRED_COLUMNS = (START_LSN, SEQVAL, OPERATION)
_GLOB_CHARS = re.compile(r"([\[\]{}*?\\])")


def _spark_path(path: str) -> str:
    """A local path as Spark reads it literally (glob characters escaped: ``d[1].csv`` is a name)."""
    return _GLOB_CHARS.sub(r"\\\1", path)


def _columns_problem(names: list[str], what: str) -> str | None:
    """Why a file's columns cannot be mapped to change-table columns (None: they can)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:  # the first problem to tell: the rest is noise when this is not a header at all
        shown = ", ".join(repr(n[:40]) for n in names[:6]) + (", ..." if len(names) > 6 else "")
        return (f"its {what} lacks {', '.join(missing)} (it has {shown}): not a change-table export, "
                "or its first line is not a header")
    problems, seen = [], set()
    for i, n in enumerate(names, 1):
        if n.strip() == "":
            problems.append(f"column {i} of its {what} has no name")
        elif n.lower() in seen:
            problems.append(f"its {what} names column {n[:60]!r} twice")
        elif n.startswith("__$") and n not in META_COLUMNS:
            problems.append(f"its {what} has {n[:60]!r}, which is not a change-table column ({', '.join(META_COLUMNS)})")
        elif n.startswith("__sqlcdc"):
            problems.append(f"its {what} has {n[:60]!r}, a name sqlcdc reserves")
        seen.add(n.lower())
    return "; ".join(problems) or None


def _csv_header(path: str, sep: str) -> tuple[list[str] | None, str | None, str, int]:
    """``(names, problem, header text, empty lines before it)`` of a CSV export: its first record
    that is not an empty line, taken by the rule the Spark side uses (physical lines until the count
    of ``"`` is even). ``names`` and ``problem`` None: an empty file (no records at all)."""
    taken: list[str] = []
    quotes = blank = 0
    try:
        opener = gzip.open if path.lower().endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace", newline="") as fh:
            for line in fh:
                if not taken and line.rstrip("\r\n") == "":
                    blank += 1
                    continue
                taken.append(line.rstrip("\r\n"))
                quotes += line.count('"')
                if quotes % 2 == 0 or len(taken) >= 1000:
                    break
    except (OSError, EOFError, ValueError) as e:  # unreadable, truncated or not-gzip .gz, ...
        return None, f"cannot be read ({type(e).__name__}: {str(e)[:200]})", "", blank
    text = "\n".join(taken)
    if not taken:
        return None, None, "", blank
    if quotes % 2:
        return None, "cannot be read: a quote in its header line is not closed", text[:2000], blank
    try:
        names = next(csv.reader(io.StringIO(text), delimiter=sep, quotechar='"', doublequote=True, strict=True))
    except (csv.Error, StopIteration, TypeError) as e:
        return None, f"cannot be read: its header line is not CSV ({e})", text[:2000], blank
    if names:
        names[0] = names[0].lstrip("\ufeff")  # a UTF-8 byte order mark
    problem = _columns_problem(names, "header")
    return names, problem and f"cannot be mapped to change-table columns: {problem}", text[:2000], blank


def _parquet_schema(path: str) -> tuple[tuple | None, str | None]:
    """``(schema key, problem)`` of a Parquet export, from its footer (pyarrow: no Spark job)."""
    import pyarrow.parquet as pq
    import pyarrow.types as pat

    try:
        schema = pq.read_schema(path)
    except Exception as e:  # noqa: BLE001 - whatever pyarrow raises, the file is not readable Parquet
        return None, f"is not a readable Parquet file ({type(e).__name__}: {str(e)[:200]})"
    unreadable: list[str] = []

    def walk(name: str, t) -> None:  # types Spark's Parquet reader refuses
        if pat.is_time(t) or (pat.is_timestamp(t) and t.unit == "ns"):
            unreadable.append(f"{name} ({t})")
        for i in range(getattr(t, "num_fields", 0) if pat.is_struct(t) else 0):
            walk(f"{name}.{t.field(i).name}", t.field(i).type)
        if pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t):
            walk(f"{name}[]", t.value_type)
        if pat.is_map(t):
            walk(f"{name}{{key}}", t.key_type)
            walk(f"{name}{{value}}", t.item_type)

    for f in schema:
        walk(f.name, f.type)
    problems = [p for p in (_columns_problem(list(schema.names), "schema"),) if p]
    if unreadable:
        problems.append(f"it has column(s) of a type Spark cannot read: {', '.join(unreadable)}")
    problem = "; ".join(problems)
    return tuple((f.name, str(f.type)) for f in schema), problem and f"cannot be mapped to change-table columns: {problem}"


def _unreadable_files(spark: SparkSession, found: list[tuple[str, str, str]]) -> DataFrame:
    """One bronze row per landed file that cannot be read at all: ``(path, problem, raw text)``."""
    rows = []
    for path, problem, raw in found:
        try:
            mtime = dt.datetime.fromtimestamp(os.stat(path).st_mtime, tz=dt.timezone.utc)
        except OSError:
            mtime = dt.datetime.now(tz=dt.timezone.utc)
        value = json.dumps({UNREADABLE: f"file {os.path.basename(path)} {problem}", RAW_TEXT: raw or None})
        rows.append((value, file_uri(path), mtime))
    return spark.createDataFrame(rows, _UNREADABLE_SCHEMA)


def _regex_char(ch: str) -> str:
    return ch if ch.isalnum() else "\\" + ch


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
    lines = landed_files_reader(spark).format("text").load([_spark_path(p) for p in paths]).select(
        F.col("value").alias("_line"),
        F.col("_metadata.file_path").alias("source_file"),
        F.col("_metadata.file_modification_time").alias("ingest_time"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_mid"),  # increasing within a split of a file
    )
    in_file = Window.partitionBy("source_file").orderBy("_block", "_mid")
    n_quotes = F.length("_line") - F.length(F.regexp_replace("_line", '"', ""))
    lines = lines.select(
        "_line", "source_file", "ingest_time", "_block", "_mid",
        F.row_number().over(in_file).alias("_n"),
        (F.sum(n_quotes).over(in_file.rowsBetween(Window.unboundedPreceding, Window.currentRow)) % 2 == 0).alias("_end"),
    )
    lines = lines.select(
        "_line", "source_file", "ingest_time", "_block", "_mid", "_n", "_end",
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
        F.sort_array(F.collect_list(F.struct("_n", "_line", "_end"))).alias("_lines"),
        F.max("ingest_time").alias("ingest_time"),
    )
    text = F.array_join(F.transform("_lines", lambda x: x["_line"]), "\n")
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
        {"sep": sep, "nullValue": null_value, "escape": '"', "mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_bad"},
    )
    cands = cands.select("source_file", "ingest_time", "_cand", "_n", "_why", F.when(F.col("_why").isNull(), parsed).alias("_p"))
    why = F.coalesce(
        F.col("_why"),
        F.when(F.col("_p._bad").isNotNull(), F.format_string(
            "line %d: the record does not have the %d fields of the file's header", F.col("_n"), F.lit(len(header)))),
    )
    row = F.struct(*[F.col(f"_p.c{i}").alias(name) for i, name in enumerate(header)], F.lit("csv").alias(WHOLE_ROW_HINT))
    bad = F.struct(why.alias(UNREADABLE), F.col("_cand").alias(RAW_TEXT))
    value = F.when(why.isNull(), F.to_json(row, {"ignoreNullFields": "false"})).otherwise(
        F.to_json(bad, {"ignoreNullFields": "false"}))
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
            problem = checks.problem(path)
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
                names, problem, raw, blank = _csv_header(path, sep)
                key = (tuple(names), blank) if names is not None else None
            else:
                key, problem = _parquet_schema(path)
                raw = ""
            if problem:
                unreadable.append((path, problem, raw))
            elif key is not None:
                by_columns[key].append(path)
        for key, paths in by_columns.items():
            if fmt == "csv":
                frames.append(_read_csv(spark, paths, list(key[0]), source, key[1]))
            else:
                frames.append(_to_bronze(landed_files_reader(spark).parquet(*[_spark_path(p) for p in paths]), hint=True))
    checks.save()
    if unreadable:
        frames.append(_unreadable_files(spark, unreadable))
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
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out.select(
        record_id(F.col("source_file"), F.col("value")).alias("record_id"),
        "value",
        "source_file",
        "ingest_time",
    )


# --- columns -------------------------------------------------------------------------------------


def columns_for(table: TableConfig, source: SourceConfig, spark: SparkSession | None = None) -> list[ColumnSpec]:
    """Typed captured columns from the table config, with their change-table ordinals.

    ``columns:`` lists the captured columns in change-table order (``type`` a Spark SQL type;
    ``binary``/``varbinary`` for binary columns; ``lob: true`` for ``(max)`` types). Ordinals are the
    1-based positions, or ``options.column_ordinals`` (``{name: ordinal}``) where given.
    """
    where = f"{table.file}:1"
    if not table.columns:
        raise ConfigError(
            [f"{where}: columns: table {table.qualified} (format cdc_ct) needs `columns:` (name, type, "
             "lob) in change-table order: change-table exports carry no types"]
        )
    if not table.keys:
        raise ConfigError([f"{where}: keys: table {table.qualified} (format cdc_ct) needs `keys:`"])
    ordinals = table.options.get("column_ordinals") or {}
    names = [c["name"] for c in table.columns]
    problems = []
    for name in ordinals:
        if name not in names:
            problems.append(f"{where}: options.column_ordinals: {name!r} is not in columns ({', '.join(names)})")
    for k in table.keys:
        if k not in names:
            problems.append(f"{where}: keys: {k!r} is not in columns ({', '.join(names)})")
    specs = []
    for i, c in enumerate(table.columns, start=1):
        try:
            ordinal = int(ordinals.get(c["name"], i))
        except (TypeError, ValueError):
            problems.append(f"{where}: options.column_ordinals.{c['name']}: not an integer")
            continue
        specs.append(config_column(c, ordinal))
    seen: dict[int, str] = {}
    for s in specs:
        if s.ordinal in seen:
            problems.append(f"{where}: options.column_ordinals: ordinal {s.ordinal} given to both {seen[s.ordinal]!r} and {s.name!r}")
        seen[s.ordinal] = s.name
    if problems:
        raise ConfigError(problems)
    return specs


def config_column(column: dict, ordinal: int) -> ColumnSpec:
    """A ``columns:`` entry: ``type`` a Spark SQL type, or ``binary``/``varbinary`` (hex text in the exports).

    >>> config_column({"name": "photo", "type": "varbinary(max)", "lob": True}, 3)
    ColumnSpec(name='photo', spark_type='binary', encoding='hex', lob=True, ordinal=3, source_type='varbinary(max)')
    """
    t = str(column["type"]).strip().lower()
    is_binary = t in ("binary", "varbinary") or t.startswith(("binary(", "varbinary("))
    return ColumnSpec(column["name"], "binary" if is_binary else t, "hex" if is_binary else "text",
                      lob=bool(column.get("lob", False)), ordinal=ordinal, source_type=str(column["type"]))


# --- value spellings -----------------------------------------------------------------------------


def lsn_text(raw: Column) -> Column:
    """An LSN in an export spelling -> 20 hex digits; NULL unless it is exactly a binary(10).

    Spellings: ``0x`` + 20 hex digits, 20 bare hex digits (``bcp``), or base64 of the 10 bytes
    (16 characters ending ``==``: ``FOR JSON``, and Parquet binary as bronze renders it). A short
    or long value (``0x01``, 24 digits), non-hex text or the zero LSN is NULL: never padded.
    """
    t = F.trim(raw)
    return F.when(
        t.rlike(r"^[A-Za-z0-9+/]{14}==$"), lsn.binary_lsn(F.try_to_binary(t, F.lit("base64")))
    ).otherwise(lsn.parse_lsn(t, "hex"))


def _json_number(value: Column, name: str) -> Column:
    """True when ``name`` in the JSON row ``value`` is a JSON number, not text (LSNs are text or
    binary: 12345678901234567890 as a number is not the LSN 0x12345678901234567890)."""
    field = F.try_variant_get(F.try_parse_json(value), "$['" + name + "']", "variant")
    return F.coalesce(F.schema_of_variant(field) != F.lit("STRING"), F.lit(False))


def binary_hex(raw: Column, prefer_base64: bool | Column = False) -> Column:
    """Binary text (``0x`` hex, bare hex, base64) -> upper-case hex digits, NULL when unreadable.

    Text that reads both ways (``AAAf``) is hex unless ``prefer_base64`` (a flag or a per-row
    condition) says base64; ``0x`` always means hex (``0xZZ`` is NULL, not base64), unless
    ``prefer_base64`` says the row's binary is base64 (Parquet).
    """
    t = F.trim(raw)
    prefixed = t.rlike(r"^0[xX]([0-9A-Fa-f]{2})*$")
    bare_hex = t.rlike(r"^([0-9A-Fa-f]{2})*$")
    b64 = t.rlike(r"^[A-Za-z0-9+/]*={0,2}$") & (F.length(t) % 4 == 0)
    from_hex = F.upper(F.regexp_replace(t, r"^0[xX]", ""))
    from_b64 = F.hex(F.try_to_binary(t, F.lit("base64")))
    prefer = prefer_base64 if isinstance(prefer_base64, Column) else F.lit(bool(prefer_base64))
    return (
        F.when(prefixed, from_hex)
        .when(F.coalesce(prefer, F.lit(False)) & b64, from_b64)
        .when(t.rlike(r"^0[xX]"), F.lit(None))  # 0x + non-hex (0xZZ): not binary, never base64
        .when(bare_hex, from_hex)
        .when(b64, from_b64)
    )


def changed_from_mask(mask_hex: Column, columns: list[ColumnSpec]) -> Column:
    """The names of the columns whose mask bit is set, in column order; NULL when no mask."""
    flagged = F.array(*[F.when(mask_has(mask_hex, c.ordinal or i, "big"), F.lit(c.name)) for i, c in enumerate(columns, 1)])
    return F.when(mask_hex.isNotNull(), F.filter(flagged, lambda x: x.isNotNull()))


# --- decoding ------------------------------------------------------------------------------------


def _raw_map(m: Column, columns: list[ColumnSpec], prefer_base64: Column) -> Column:
    """The configured columns' text, binary normalised to ``0x`` hex (kept as is when unreadable)."""
    entries = []
    for c in columns:
        v = m[c.name]
        if c.encoding == "hex":
            h = binary_hex(v, prefer_base64)
            v = F.when(v.isNull(), v).when(h.isNotNull(), F.concat(F.lit("0x"), h)).otherwise(v)
        entries += [F.lit(c.name), v]
    return F.create_map(*entries)


def _parsed(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> DataFrame:
    """Bronze rows of ``table`` + parsed metadata, typed image, and ``_reasons`` (empty = good)."""
    ci = table_capture_instance(table)
    option_b64 = str(table.source.options.get("binary_text", "hex")).lower() == "base64"
    rows = bronze.where(F.lower(capture_instance_col(F.col("source_file"))) == ci.lower())
    first = F.from_json(F.col("value"), "map<string,string>")  # of '{...}{...}' Spark reads the first alone
    rows = rows.select("*", F.when(one_json_value(F.col("value")), first).alias("_m"), first.isNotNull().alias("_an_object"))
    m = F.col("_m")
    prefer_b64 = F.lit(True) if option_b64 else F.coalesce(m[BINARY_HINT] == "base64", F.lit(False))
    image, value_errors = typed_struct(_raw_map(m, columns, prefer_b64), columns)
    mask_raw = m[UPDATE_MASK]
    mask = binary_hex(mask_raw, prefer_b64)
    # A 20-digit LSN must be JSON text: the same digits as a JSON number are a number (rare: only
    # then is the row parsed a second time, as a variant, to tell).
    def lsn_of(raw: Column, name: str) -> Column:
        v = lsn_text(raw)
        return F.when(F.trim(raw).rlike(r"^[0-9]{20}$") & _json_number(F.col("value"), name), F.lit(None)).otherwise(v)

    rows = rows.select(
        "*",
        lsn_of(m[START_LSN], START_LSN).alias("_start"),
        lsn_of(m[SEQVAL], SEQVAL).alias("_seq"),
        m[OPERATION].try_cast("int").alias("_op"),
        m[COMMAND_ID].try_cast("int").alias("_cmd"),
        mask.alias("_mask"),
        image.alias("_img"),
        commit_time(m[COMMIT_TIME_COLUMN]).alias("_commit_time"),
        value_errors.alias("_value_errors"),
    )
    keys = list(table.keys)
    reasons = F.filter(
        F.concat(
            F.array(
                F.when(m.isNull() & F.col("_an_object"), F.lit(
                    "more than one JSON document on one line (each landed line must hold exactly one change-table row)")),
                F.when(~F.col("_an_object"), F.lit("not a JSON object")),
                F.when(m.isNotNull() & m[START_LSN].isNull(), F.lit(f"missing {START_LSN}")),
                F.when(m[START_LSN].isNotNull() & F.col("_start").isNull(),
                       F.format_string(f"{START_LSN} %s is not an LSN ({_LSN_SHAPES})", F.substring(m[START_LSN], 1, 60))),
                F.when(m.isNotNull() & m[SEQVAL].isNull(), F.lit(f"missing {SEQVAL}")),
                F.when(m[SEQVAL].isNotNull() & F.col("_seq").isNull(),
                       F.format_string(f"{SEQVAL} %s is not an LSN ({_LSN_SHAPES})", F.substring(m[SEQVAL], 1, 60))),
                F.when(m.isNotNull() & ~F.coalesce(F.col("_op").isin(1, 2, 3, 4), F.lit(False)),
                       F.format_string(f"{OPERATION} %s is not 1, 2, 3 or 4", F.coalesce(m[OPERATION], F.lit("NULL")))),
                F.when(m[COMMAND_ID].isNotNull() & F.col("_cmd").isNull(),
                       F.format_string(f"{COMMAND_ID} %s is not an integer", m[COMMAND_ID])),
                F.when(mask_raw.isNotNull() & mask.isNull(),
                       F.format_string(f"{UPDATE_MASK} %s is not binary (0x hex or base64)", mask_raw)),
                F.when(m[COMMIT_TIME_COLUMN].isNotNull() & F.col("_commit_time").isNull(), F.format_string(
                    f"{COMMIT_TIME_COLUMN} %s is not a time within year 1..9999", F.substring(m[COMMIT_TIME_COLUMN], 1, 60))),
            ),
            F.col("_value_errors"),
            # a CSV/Parquet file without a configured column: its value was not exported, never NULL
            F.array(*[F.when((m[BINARY_HINT].isNotNull() | m[WHOLE_ROW_HINT].isNotNull()) & ~F.map_contains_key(m, c.name),
                             F.lit(f"column {c.name} is not in the file's header or schema")) for c in columns]),
            F.array(*[F.when(m.isNotNull() & F.col("_img")[k].isNull(), F.lit(f"key column {k} is NULL")) for k in keys]),
        ),
        lambda r: r.isNotNull(),
    )
    # a file or CSV line bronze could not read (UNREADABLE): its reason, and nothing read from it
    reasons = F.when(m[UNREADABLE].isNotNull(), F.array(m[UNREADABLE])).otherwise(reasons)
    return rows.select("*", reasons.alias("_reasons"))


_LSN_SHAPES = "binary(10), 0x hex or base64"


def _quarantine(df: DataFrame, table: TableConfig, reason: Column) -> DataFrame:
    return df.select(
        *model.quarantine_row(
            source_name=table.source.name,
            source_format=NAME,
            table_name=table.name,
            reason=F.format_string("%s (capture instance %s, file %s)", reason, F.lit(table_capture_instance(table)), F.col("source_file")),
            rules=F.array(F.lit("decode")),
        )
    )


def decode(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
    """Bronze rows of ``table``'s capture instance -> canonical changes + quarantine.

    Example::

        decoded = decode(bronze, table, columns_for(table, table.source))
        decoded.changes.select("op", "key", "changed_columns", "sequence").show()
    """
    keys = list(table.keys)
    ci = table_capture_instance(table)
    parsed = _parsed(bronze, table, columns)
    bad = _quarantine(parsed.where(F.size("_reasons") > 0), table, F.array_join(F.col("_reasons"), "; "))

    # One row per change-table row: the same row landed twice is kept once (lowest record_id), the
    # other copies are duplicates (counted by the run's balance, see duplicates()); different rows
    # at one (start_lsn, seqval, operation) are a conflict: all of them go to quarantine.
    # (no .drop(): Spark Connect resolves drop() eagerly, which fails inside SDP flow registration;
    # later selects are explicit, so the helper columns go no further.)
    checked = _deduplicated(parsed.where(F.size("_reasons") == 0))
    conflicts = checked.where(F.col("_conflict") & (F.col("_copy") == 1))
    conflict_q = _quarantine(
        conflicts,
        table,
        F.format_string(
            f"conflicting rows at {START_LSN} 0x%s, {SEQVAL} 0x%s, {OPERATION} %d: %d different rows landed for "
            "one change-table row (in %s); none of them is applied",
            F.col("_start"), F.col("_seq"), F.col("_op"), F.col("_variants"), F.array_join(F.col("_files"), ", ")),
    )
    good = checked.where(~F.col("_conflict") & (F.col("_dup") == 1))

    # Debezium's event_serial_no: rows consumed so far at this (commit LSN, seqval) position.
    at_position = Window.partitionBy("_start", "_seq").orderBy(F.col("_cmd").asc_nulls_first(), "_op", "record_id")
    whole_position = Window.partitionBy("_start", "_seq").rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    old_image = F.struct(F.col("_img").alias("img"), F.col("_mask").alias("mask"), F.col("record_id").alias("rid"))
    good = good.select(
        "*",
        F.row_number().over(at_position).alias("_serial"),
        F.max((F.col("_op") == OP_UPDATE_OLD).cast("int")).over(whole_position).alias("_has_old"),
        F.max((F.col("_op") == OP_UPDATE_NEW).cast("int")).over(whole_position).alias("_has_new"),
        F.first(F.when(F.col("_op") == OP_UPDATE_OLD, old_image), ignorenulls=True).over(whole_position).alias("_old"),
    )
    lone_old = good.where((F.col("_op") == OP_UPDATE_OLD) & (F.col("_has_new") == 0))
    lone_new = good.where((F.col("_op") == OP_UPDATE_NEW) & (F.col("_has_old") == 0))
    lone = _quarantine(
        lone_old,
        table,
        F.when(F.col("_new_conflict"), F.format_string(
            f"update before-image ({OPERATION} 3) at {START_LSN} 0x%s, {SEQVAL} 0x%s: its after-image rows "
            "(operation 4) conflict (quarantined)", F.col("_start"), F.col("_seq")),
        ).otherwise(F.format_string(
            f"update before-image ({OPERATION} 3) at {START_LSN} 0x%s, {SEQVAL} 0x%s has no after-image "
            "(operation 4) in the landed exports", F.col("_start"), F.col("_seq"))),
    ).unionByName(
        _quarantine(
            lone_new,
            table,
            F.when(F.col("_old_conflict"), F.format_string(
                f"update after-image ({OPERATION} 4) at {START_LSN} 0x%s, {SEQVAL} 0x%s: its before-image rows "
                "(operation 3) conflict (quarantined)", F.col("_start"), F.col("_seq")),
            ).otherwise(F.format_string(
                f"update after-image ({OPERATION} 4) at {START_LSN} 0x%s, {SEQVAL} 0x%s has no before-image "
                "(operation 3) in the landed exports (exported with row filter 'all' instead of 'all update old'?)",
                F.col("_start"), F.col("_seq"))),
        )
    )

    changes = good.where(F.col("_op").isin(OP_DELETE, OP_INSERT) | ((F.col("_op") == OP_UPDATE_NEW) & (F.col("_has_old") == 1)))
    op = F.col("_op")
    is_update = op == OP_UPDATE_NEW
    mask = F.when(is_update, F.coalesce(F.col("_mask"), F.col("_old.mask"))).otherwise(F.col("_mask"))
    changes = changes.select("*", mask.alias("_change_mask"))
    cm = F.col("_change_mask")

    # LOBs: NULL in operation 3 (or 4) with a clear mask bit = not provided (see the module docstring).
    def unchanged(c: ColumnSpec, i: int) -> Column:
        return cm.isNotNull() & ~mask_has(cm, c.ordinal or i, "big")

    before_fields, not_provided = [], []
    for i, c in enumerate(columns, start=1):
        old_v = F.col("_old.img")[c.name]
        new_v = F.col("_img")[c.name]
        if c.lob:
            before_fields.append(F.when(old_v.isNull() & unchanged(c, i), new_v).otherwise(old_v).alias(c.name))
            not_provided.append(F.when(is_update & new_v.isNull() & unchanged(c, i), F.lit(c.name)))
        else:
            before_fields.append(old_v.alias(c.name))
    lob_missing = F.filter(F.array(*not_provided), lambda x: x.isNotNull()) if not_provided else None
    provided = None
    if lob_missing is not None:
        names = F.array(*[F.lit(c.name) for c in columns])
        provided = F.when(
            is_update & (F.size(lob_missing) > 0), F.array_except(names, lob_missing)
        )
    before = F.when(op == OP_DELETE, F.col("_img")).when(is_update, F.struct(*before_fields))
    after = F.when(op != OP_DELETE, F.col("_img"))
    image = F.col("_img")  # the before image for a delete, the after image otherwise
    canon_op = F.when(op == OP_DELETE, F.lit(model.DELETE)).when(op == OP_INSERT, F.lit(model.INSERT)).otherwise(F.lit(model.UPDATE))
    op_code = F.when(is_update, F.lit("U")).otherwise(op.cast("string"))

    # The sequence (module docstring): Debezium's (seqval, serial), re-dealt in command order per commit.
    changes = changes.select("*", F.when(is_update, F.lit(OP_UPDATE_OLD)).otherwise(op).alias("_op_rank"))
    by_command = Window.partitionBy("_start").orderBy(
        F.col("_cmd").asc_nulls_first(), F.when(F.col("_cmd").isNotNull(), F.col("_op_rank")), "_seq", "_serial"
    )
    by_seqval = Window.partitionBy("_start").orderBy("_seq", "_serial")
    ranked = changes.select("*", F.row_number().over(by_command).alias("_rank"))
    slots = changes.select(
        F.col("_start").alias("_slot_start"),
        F.row_number().over(by_seqval).alias("_slot_rank"),
        F.col("_seq").alias("_slot_seq"),
        F.col("_serial").alias("_slot_serial"),
    )
    ranked = ranked.join(
        slots, (ranked["_start"] == slots["_slot_start"]) & (ranked["_rank"] == slots["_slot_rank"]), "inner"
    )

    out = ranked.select(
        *model.change_row(
            change_id=F.concat_ws(":", F.lit(NAME), F.lit(ci), F.col("_start"), F.col("_seq"), op_code),
            source_format=NAME,
            table_name=table.name,
            op=canon_op,
            key=F.struct(*[image[k].alias(k) for k in keys]),
            before=before,
            after=after,
            sequence=lsn.sequence(F.col("_start"), F.col("_slot_seq"), F.col("_slot_serial")),
            source_server=_opt(table, "server"),
            source_database=_opt(table, "database"),
            source_schema=F.lit(table.schema),
            source_table=F.lit(table.table),
            provided_columns=provided,
            changed_columns=changed_from_mask(cm, columns),
            commit_time=F.col("_commit_time"),
            transaction_id=F.col("_start"),
            # An update is two change-table rows: lineage names both (op 4's, then op 3's).
            bronze_record_id=F.concat_ws(",", F.col("record_id"), F.col("_old.rid")),
        )
    )
    return Decoded(changes=out, quarantine=bad.unionByName(lone).unionByName(conflict_q))


def _deduplicated(good: DataFrame) -> DataFrame:
    """Readable rows + where each stands among the rows landed for its (start_lsn, seqval, operation):
    ``_conflict`` (they differ: update mask, image or command id), ``_dup`` (1 = the copy kept:
    lowest record id), ``_kept`` (that copy's record id), ``_copy`` (1 = first row of its record id),
    ``_variants``/``_files`` (for the conflict's reason), and per (start_lsn, seqval)
    ``_old_conflict``/``_new_conflict`` (the operation 3 / 4 rows there conflict)."""
    at = Window.partitionBy("_start", "_seq", "_op")
    position = Window.partitionBy("_start", "_seq")
    # compared as JSON text: any column type compares, and a typed value has one spelling
    content = F.to_json(F.struct(F.col("_mask").alias("m"), F.col("_img").alias("i")))
    good = good.select("*", content.alias("_content"))
    differ = ~F.min("_content").over(at).eqNullSafe(F.max("_content").over(at)) | ~F.min("_cmd").over(at).eqNullSafe(
        F.max("_cmd").over(at))
    good = good.select(
        "*",
        differ.alias("_conflict"),
        F.row_number().over(at.orderBy("record_id")).alias("_dup"),
        F.min("record_id").over(at).alias("_kept"),
        F.row_number().over(Window.partitionBy("_start", "_seq", "_op", "record_id").orderBy("record_id")).alias("_copy"),
        F.size(F.collect_set("_content").over(at)).alias("_variants"),
        F.array_sort(F.collect_set("source_file").over(at)).alias("_files"),
    )
    return good.select(
        "*",
        F.coalesce(F.max(F.col("_conflict") & (F.col("_op") == OP_UPDATE_OLD)).over(position), F.lit(False)).alias("_old_conflict"),
        F.coalesce(F.max(F.col("_conflict") & (F.col("_op") == OP_UPDATE_NEW)).over(position), F.lit(False)).alias("_new_conflict"),
    )


def duplicates(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> DataFrame:
    """``record_id, kept_record_id`` of the bronze rows of ``table`` that are another copy of a
    change-table row already taken (the same row in two overlapping exports: at-least-once
    delivery). They are in neither silver nor quarantine; the run's balance counts them as
    ``duplicate`` (:mod:`sqlcdc.summary`). Copies of a row in conflict are quarantined, not here."""
    checked = _deduplicated(_parsed(bronze, table, columns).where(F.size("_reasons") == 0))
    return checked.where(~F.col("_conflict") & (F.col("record_id") != F.col("_kept"))).select(
        "record_id", F.col("_kept").alias("kept_record_id")
    )


def _opt(table: TableConfig, name: str) -> Column:
    value = table.options.get(name, table.source.options.get(name))
    return F.lit(None).cast("string") if value is None else F.lit(str(value))


# --- records no table takes ----------------------------------------------------------------------


def unrouted(bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
    """Quarantine rows for landed rows whose capture instance is not onboarded (or not told by the path)."""
    instances = sorted({table_capture_instance(t).lower() for t in tables})
    ci = capture_instance_col(F.col("source_file"))
    listed = ", ".join(instances) or "none"
    reason = F.when(
        ci == "",
        F.format_string(
            "cannot tell the capture instance of file %s: name it [cdc.]<ci>_CT.<ext> or put it in a folder "
            "named after the capture instance", F.col("source_file")),
    ).otherwise(
        F.format_string("capture instance %s (file %s) is not onboarded in source %s (onboarded: %s)",
                        ci, F.col("source_file"), F.lit(source.name), F.lit(listed))
    )
    unreadable = F.get_json_object(F.col("value"), f"$.{UNREADABLE}")
    reason = F.when(unreadable.isNotNull(), F.concat_ws("; ", unreadable, reason)).otherwise(reason)
    taken = F.lower(ci).isin(*instances) if instances else F.lit(False)
    return bronze.where(~taken).select(
        *model.quarantine_row(source_name=source.name, source_format=NAME, reason=reason, rules=F.array(F.lit("routing")))
    )


class ChangeTables(Decoder):
    """Exports of SQL Server CDC change tables (``cdc.<capture_instance>_CT``): CSV, JSON lines, Parquet."""

    name = NAME
    label = "SQL Server (CDC change tables)"
    streaming = STREAMING
    bronze_streaming = BRONZE_STREAMING
    keys_required = "change tables do not mark the primary key"
    columns_required = "name, type, lob in change-table order: change-table exports carry no types"
    options = {
        "file_format": {"enum": ["parquet", "csv", "json", "jsonl", "ndjson"],
                        "description": "read every landed file as this format (default: by extension)"},
        "glob": {"type": "string", "description": "landed file names to read (Hadoop glob)"},
        "capture_instance": {"type": "string", "description": "(table) the capture instance (default: schema_table)"},
        "column_ordinals": {"type": "object", "additionalProperties": {"type": "integer"},
                            "description": "(table) column -> ordinal in the change table, when not in order"},
        "csv_delimiter": {"type": "string", "description": "CSV field delimiter (default ',')"},
        "csv_null_value": {"type": "string", "description": "CSV text that means NULL (default: empty)"},
        "binary_text": {"enum": ["hex", "base64"], "description": "how binary values without 0x are written"},
        "server": {"type": "string", "description": "the source server, for lineage"},
        "database": {"type": "string", "description": "the source database, for lineage"},
    }
    read_bronze = staticmethod(read_bronze)
    columns_for = staticmethod(columns_for)
    decode = staticmethod(decode)
    unrouted = staticmethod(unrouted)
    config_column = staticmethod(config_column)

    def duplicates(self, bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
        """Copies of a change-table row already taken, per table (:func:`duplicates`)."""
        out = super().duplicates(bronze, source, tables)
        for table in tables:
            out = out.unionByName(duplicates(bronze, table, columns_for(table, source, bronze.sparkSession)))
        return out


DECODER = ChangeTables()
