"""SQL Server native change tables (``cdc.<capture_instance>_CT``) exported to files -> canonical changes.

What lands
==========

Rows of a change table, or of ``cdc.fn_cdc_get_all_changes_<ci>(@from, @to, N'all update old')``
(its four metadata columns; :mod:`sqlcdc.transport.jdbc` lands those plus ``__$command_id`` joined from
the change table; ``__$end_lsn`` is never needed), exported as **Parquet**, **CSV** (with a
header line) or **JSON lines**. The format is taken from the file extension (``.parquet``;
``.csv``, ``.csv.gz``, ``.csv.bz2``; ``.json``/``.jsonl``/``.ndjson``, plain or compressed by any codec Spark
reads: ``.gz``, ``.bz2``, ``.zst``, ``.deflate``, Hadoop-format ``.lz4``/``.snappy``); other files are skipped. The source
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
:func:`sqlcdc.transport.jdbc.parquet_lander` writes). A table's capture
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

- a file that does not open, a compressed file that is not what its suffix says or is cut short
  (checked to its end in Python: Spark would fail the whole read, or lose its end silently), a file that is not
  Parquet or whose data does not read to its end (read through once with pyarrow: a page that does not
  decode failed Spark's read of the whole source) (names are
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
- Exports of ``fn_cdc_get_all_changes_<ci>(@from, @to, N'all')`` (option ``row_filter: all``) have
  no operation 3: an update is its operation 4 row alone, an UPDATE without a before image. Without
  the old image a primary-key change that SQL Server logged as one 3+4 pair cannot be seen: the old
  key stays in gold (export with ``all update old`` where keys change).
- Exports of ``fn_cdc_get_net_changes_<ci>`` (option ``function: net_changes``; row filter ``all``,
  ``all with mask`` or ``all with merge``): one row per source row and window, its final state at the
  commit LSN of its last change; no ``__$seqval``; 2 -> INSERT, 4 and 5 -> UPDATE without a before
  image, 1 -> DELETE. Identity ``(__$start_lsn, key)``: see :mod:`sqlcdc.formats._ct_net`.
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

from dataclasses import replace
from typing import Iterable

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from sqlcdc import dlt_meta, lsn, model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import Decoded, Decoder, _ct_net
from sqlcdc.formats._ct_exports import UNREADABLE, read_bronze
from sqlcdc.formats._ct_names import (NAME, OPERATION, ROW_FILTERS, SEQVAL, START_LSN, capture_instance_col, changes_function,
                                      row_filter, table_capture_instance)
from sqlcdc.formats._ct_values import _deduplicated, _parsed, changed_from_mask, dealt, lob_provided, table_option
from sqlcdc.formats._ct_values import quarantine_columns as _q_columns
from sqlcdc.formats._masks import mask_has
from sqlcdc.formats._sqlserver import config_spec
from sqlcdc.values import VALUE_WARNINGS_COL, ColumnSpec

# Re-exported: the decoder is split into the private modules _ct_*; these stay ``cdc_ct.<name>``.
from sqlcdc.formats._ct_exports import BINARY_HINT, RAW_TEXT, REQUIRED_COLUMNS, WHOLE_ROW_HINT, landed_files  # noqa: F401
from sqlcdc.formats._ct_names import COMMAND_ID, COMMIT_TIME_COLUMN, END_LSN, META_COLUMNS, UPDATE_MASK, capture_instance_of  # noqa: F401
from sqlcdc.formats._ct_values import binary_hex, lsn_text  # noqa: F401

STREAMING = False
#: Exports are read as a batch (per-file formats and schemas): bronze is a materialized view.
BRONZE_STREAMING = False

OP_DELETE, OP_INSERT, OP_UPDATE_OLD, OP_UPDATE_NEW = 1, 2, 3, 4


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
    function = changes_function(table)
    if row_filter(table) not in ROW_FILTERS.get(function, ()):
        problems.append(f"{where}: options.row_filter: {row_filter(table)!r} is not a row filter of {function} "
                        f"({', '.join(repr(f) for f in ROW_FILTERS.get(function, ()))})")
    if problems:
        raise ConfigError(problems)
    return specs


def config_column(column: dict, ordinal: int) -> ColumnSpec:
    """A ``columns:`` entry: ``type`` a Spark SQL type or a SQL Server type name (``datetime2(6)``,
    ``bit``, ``nvarchar(50)``: :func:`~sqlcdc.formats._sqlserver.config_spec`); binary types are
    read as hex text (or base64: the module doc).

    >>> config_column({"name": "photo", "type": "varbinary(max)", "lob": True}, 3)
    ColumnSpec(name='photo', spark_type='binary', encoding='hex', lob=True, ordinal=3, source_type='varbinary(max)', json_value=False)
    """
    t = str(column["type"]).strip().lower()
    is_binary = t in ("binary", "varbinary") or t.startswith(("binary(", "varbinary("))
    if is_binary:
        return ColumnSpec(column["name"], "binary", "hex", lob=bool(column.get("lob", False)), ordinal=ordinal,
                          source_type=str(column["type"]))
    return replace(config_spec(column["name"], column["type"], ordinal=ordinal, lob=bool(column.get("lob", False))),
                   source_type=str(column["type"]))


# --- decoding ------------------------------------------------------------------------------------


def decode(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
    """Bronze rows of ``table``'s capture instance -> canonical changes + quarantine.

    Example::

        decoded = decode(bronze, table, columns_for(table, table.source))
        decoded.changes.select("op", "key", "changed_columns", "sequence").show()
    """
    if changes_function(table) == "net_changes":
        return _ct_net.decode(_parsed(bronze, table, columns, net=True), table, columns)
    keys = list(table.keys)
    ci = table_capture_instance(table)
    # One frame, each landed row read once (Decoded.split): a row is unreadable (`_ok` false), in
    # conflict, a lone update half, a change, or left out (another copy of a row already taken; an
    # update's operation 3 row, which its operation 4 row carries). Every window is split by the
    # groups (`_ok`, `_g`, `_chg`), so it sees the rows it saw as a frame of its own.
    parsed = _parsed(bronze, table, columns)
    ok = F.col("_ok")
    # One row per change-table row: the same row landed twice is kept once (lowest record_id), the
    # other copies are duplicates (counted by the run's balance, see duplicates()); different rows
    # at one (start_lsn, seqval, operation) are a conflict: all of them go to quarantine.
    checked = _deduplicated(parsed.select("*", (F.size("_reasons") == 0).alias("_ok")), apart=("_ok",))
    conflicted = ok & F.col("_conflict") & (F.col("_copy") == 1)
    good = checked.select("*", (ok & ~F.col("_conflict") & (F.col("_dup") == 1)).alias("_g"))

    # Debezium's event_serial_no: rows consumed so far at this (commit LSN, seqval) position.
    at_position = Window.partitionBy("_g", "_start", "_seq").orderBy(F.col("_cmd").asc_nulls_first(), "_op", "record_id")
    whole_position = Window.partitionBy("_g", "_start", "_seq").rowsBetween(Window.unboundedPreceding,
                                                                            Window.unboundedFollowing)
    warn = table.bad_values == "warn"  # then _parsed gave each row its VALUE_WARNINGS_COL
    old_image = F.struct(F.col("_img").alias("img"), F.col("_mask").alias("mask"), F.col("record_id").alias("rid"),
                         *([F.col(VALUE_WARNINGS_COL).alias("warn")] if warn else []))
    no_old = F.max((F.col("_op") == OP_UPDATE_OLD).cast("int")).over(whole_position) == 0
    good = good.select(
        "*",
        # an operation 4 alone (row filter 'all') is still an update's second row: serial 2, as Debezium's
        (F.row_number().over(at_position) + F.when((F.col("_op") == OP_UPDATE_NEW) & no_old, 1).otherwise(0)).alias("_serial"),
        F.max((F.col("_op") == OP_UPDATE_OLD).cast("int")).over(whole_position).alias("_has_old"),
        F.max((F.col("_op") == OP_UPDATE_NEW).cast("int")).over(whole_position).alias("_has_new"),
        F.first(F.when(F.col("_op") == OP_UPDATE_OLD, old_image), ignorenulls=True).over(whole_position).alias("_old"),
    )
    # row filter 'all': an update is its operation 4 row alone (no before image), not a half missing
    after_only = F.lit(row_filter(table) == "all")
    g, op = F.col("_g"), F.col("_op")
    lone_old = g & (op == OP_UPDATE_OLD) & (F.col("_has_new") == 0)
    lone_new = g & (op == OP_UPDATE_NEW) & (F.col("_has_old") == 0) & ~after_only
    is_change = g & (op.isin(OP_DELETE, OP_INSERT) | ((op == OP_UPDATE_NEW) & ((F.col("_has_old") == 1) | after_only)))
    position = (F.col("_start"), F.col("_seq"))
    why = (
        F.when(~ok, F.array_join(F.col("_reasons"), "; "))
        .when(conflicted, F.format_string(
            f"conflicting rows at {START_LSN} 0x%s, {SEQVAL} 0x%s, {OPERATION} %d: %d different rows landed for "
            "one change-table row (in %s); none of them is applied",
            *position, op, F.col("_variants"), F.array_join(F.col("_files"), ", ")))
        .when(lone_old & F.col("_new_conflict"), F.format_string(
            f"update before-image ({OPERATION} 3) at {START_LSN} 0x%s, {SEQVAL} 0x%s: its after-image rows "
            "(operation 4) conflict (quarantined)", *position))
        .when(lone_old, F.format_string(
            f"update before-image ({OPERATION} 3) at {START_LSN} 0x%s, {SEQVAL} 0x%s has no after-image "
            "(operation 4) in the landed exports", *position))
        .when(lone_new & F.col("_old_conflict"), F.format_string(
            f"update after-image ({OPERATION} 4) at {START_LSN} 0x%s, {SEQVAL} 0x%s: its before-image rows "
            "(operation 3) conflict (quarantined)", *position))
        .when(lone_new, F.format_string(
            f"update after-image ({OPERATION} 4) at {START_LSN} 0x%s, {SEQVAL} 0x%s has no before-image "
            "(operation 3) in the landed exports (exported with row filter 'all'? then set options.row_filter: all)",
            *position))
    )
    rows = good.select("*", is_change.alias("_chg"), why.alias("_why"))
    rows = rows.where(F.col("_chg") | F.col("_why").isNotNull())
    chg = F.col("_chg")
    op = F.when(chg, op)  # the change columns below read change rows only (NULL elsewhere: nothing to raise)
    is_update = op == OP_UPDATE_NEW
    mask = F.when(is_update, F.coalesce(F.col("_mask"), F.col("_old.mask"))).otherwise(F.when(chg, F.col("_mask")))
    rows = rows.select("*", mask.alias("_change_mask"))
    cm = F.col("_change_mask")

    # LOBs: NULL in operation 3 (or 4) with a clear mask bit = not provided (see the module docstring).
    def unchanged(c: ColumnSpec, i: int) -> Column:
        return cm.isNotNull() & ~mask_has(cm, c.ordinal or i, "big")

    before_fields = []
    for i, c in enumerate(columns, start=1):
        old_v = F.col("_old.img")[c.name]
        new_v = F.col("_img")[c.name]
        if c.lob:
            before_fields.append(F.when(old_v.isNull() & unchanged(c, i), new_v).otherwise(old_v).alias(c.name))
        else:
            before_fields.append(old_v.alias(c.name))
    provided = lob_provided(columns, is_update, F.col("_img"), cm)
    before = F.when(op == OP_DELETE, F.col("_img")).when(is_update & (F.col("_has_old") == 1), F.struct(*before_fields))
    after = F.when(op != OP_DELETE, F.col("_img"))
    image = F.when(chg, F.col("_img"))  # the before image for a delete, the after image otherwise
    canon_op = F.when(op == OP_DELETE, F.lit(model.DELETE)).when(op == OP_INSERT, F.lit(model.INSERT)).otherwise(F.lit(model.UPDATE))
    op_code = F.when(is_update, F.lit("U")).otherwise(op.cast("string"))

    # The sequence (module docstring): Debezium's (seqval, serial), re-dealt in command order per commit.
    rows = rows.select("*", F.when(is_update, F.lit(OP_UPDATE_OLD)).otherwise(op).alias("_op_rank"))
    by_command = Window.partitionBy("_chg", "_start").orderBy(
        F.col("_cmd").asc_nulls_first(), F.when(F.col("_cmd").isNotNull(), F.col("_op_rank")), "_seq", "_serial"
    )
    ranked = dealt(rows.select("*", F.row_number().over(by_command).alias("_rank")))

    change = model.change_row(
        change_id=F.concat_ws(":", F.lit(NAME), F.lit(ci), F.col("_start"), F.col("_seq"), op_code),
        source_format=NAME,
        table_name=table.name,
        op=canon_op,
        key=F.struct(*[image[k].alias(k) for k in keys]),
        before=before,
        after=after,
        sequence=lsn.sequence(F.col("_start"), F.col("_slot_seq"), F.col("_slot_serial")),
        source_server=table_option(table, "server"),
        source_database=table_option(table, "database"),
        source_schema=F.lit(table.schema),
        source_table=F.lit(table.table),
        provided_columns=provided,
        changed_columns=changed_from_mask(cm, columns),
        commit_time=F.col("_commit_time"),
        transaction_id=F.col("_start"),
        # An update is two change-table rows: lineage names both (op 4's, then op 3's).
        bronze_record_id=F.concat_ws(",", F.col("record_id"), F.col("_old.rid")),
        value_warnings=F.array_distinct(F.concat(F.col(VALUE_WARNINGS_COL), F.coalesce(
            F.col("_old.warn"), F.array().cast("array<string>")))) if warn else None,
    )
    return Decoded.split(ranked, chg, change, _q_columns(table, F.col("_why")))


def duplicates(bronze: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> DataFrame:
    """``record_id, kept_record_id`` of the bronze rows of ``table`` that are another copy of a
    change-table row already taken (the same row in two overlapping exports: at-least-once
    delivery). They are in neither silver nor quarantine; the run's balance counts them as
    ``duplicate`` (:mod:`sqlcdc.summary`). Copies of a row in conflict are quarantined, not here."""
    if changes_function(table) == "net_changes":
        return _ct_net.duplicates(_parsed(bronze, table, columns, net=True), table)
    checked = _deduplicated(_parsed(bronze, table, columns).where(F.size("_reasons") == 0))
    return checked.where(~F.col("_conflict") & (F.col("record_id") != F.col("_kept"))).select(
        "record_id", F.col("_kept").alias("kept_record_id")
    )


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
    dlt_meta_select = staticmethod(dlt_meta.cdc_ct_select)
    streaming = STREAMING
    bronze_streaming = BRONZE_STREAMING
    keys_required = "change tables do not mark the primary key"
    columns_required = "name, type, lob in change-table order: change-table exports carry no types"
    options = {
        "file_format": {"enum": ["parquet", "csv", "json", "jsonl", "ndjson"], "description": "read every landed file as this format (default: by extension)"},
        "glob": {"type": "string", "description": "landed file names to read (Hadoop glob)"},
        "capture_instance": {"type": "string", "description": "(table) the capture instance (default: schema_table)"},
        "column_ordinals": {"type": "object", "additionalProperties": {"type": "integer"},
                            "description": "(table) column -> ordinal in the change table, when not in order"},
        "csv_delimiter": {"type": "string", "description": "CSV field delimiter (default ',')"},
        "csv_null_value": {"type": "string", "description": "CSV text that means NULL (default: an empty field; a quoted empty field is empty text in a text column, NULL in any other)"},
        "binary_text": {"enum": ["hex", "base64"], "description": "how binary values without 0x are written"},
        "function": {"enum": ["all_changes", "net_changes"],
                     "description": "what the exports are: the change table or fn_cdc_get_all_changes (all_changes, the "
                                    "default), or fn_cdc_get_net_changes (net_changes: a row's final state per window)"},
        "row_filter": {"enum": ["all update old", "all", "all with mask", "all with merge"],
                       "description": "the row filter the exports were made with (all changes: default 'all update old'; "
                                      "'all': an update is its operation 4 row alone; net changes: 'all', 'all with "
                                      "mask' or 'all with merge')"},
        "server": {"type": "string", "description": "the source server, for lineage"},
        "database": {"type": "string", "description": "the source database, for lineage"},
    }
    position_field = "__$seqval"
    read_bronze = staticmethod(read_bronze)
    columns_for = staticmethod(columns_for)
    decode = staticmethod(decode)
    unrouted = staticmethod(unrouted)
    config_column = staticmethod(config_column)
    config_types = ", or a SQL Server type (datetime2(6), bit, nvarchar(50), varbinary(16), money, ...)"

    def handoff_problem(self, table: TableConfig) -> str | None:
        if changes_function(table) == "net_changes":
            return "net changes give a row's final state per query window, not its changes at their log positions"
        return None

    def same_records(self, a: TableConfig, b: TableConfig) -> bool:
        """The same capture instance (SQL Server compares names case-insensitively): files are routed by
        it, so ``dbo.a_b`` and ``dbo_a.b`` (both ``dbo_a_b`` by default) would take the same files,
        while one table under two capture instances (a schema change in progress) takes different ones."""
        return table_capture_instance(a).lower() == table_capture_instance(b).lower()

    def change_position(self, table: TableConfig) -> Column:
        """The change's own ``__$seqval``, kept in its change id (``cdc_ct:<ci>:<start>:<seqval>:<op>``):
        the sequence's ``change_lsn`` is re-dealt in command order (see :func:`decode`)."""
        return F.element_at(F.split(F.col("change_id"), ":"), -2)

    def duplicates(self, bronze: DataFrame, source: SourceConfig, tables: Iterable[TableConfig]) -> DataFrame:
        """Copies of a change-table row already taken, per table (:func:`duplicates`)."""
        out = super().duplicates(bronze, source, tables)
        for table in tables:
            out = out.unionByName(duplicates(bronze, table, columns_for(table, source, bronze.sparkSession)))
        return out


DECODER = ChangeTables()
