"""Qlik data messages: header fields, the table a message belongs to, its ordering and time.

Private to :mod:`sqlcdc.formats.qlik` (which re-exports :data:`SEQUENCE_WIDTH`); see its
docstring, "Which table a data message belongs to" and "Ordering".
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sqlcdc import frames
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats._json_numbers import numbers_as_written
from sqlcdc.formats.base import nested_keys, sole_claim
from sqlcdc.formats._qlik_messages import _get, _parsed, valid
from sqlcdc.values import commit_time_in_range, time_text

__all__ = ["SEQUENCE_WIDTH"]

SEQUENCE_WIDTH = 40


# --- routing ---------------------------------------------------------------------------------------


def _option(table: TableConfig | None, source: SourceConfig, name: str, default: Any = None) -> Any:
    if table is not None and name in (table.options or {}):
        return table.options[name]
    return (source.options or {}).get(name, default)


def _data_rows(parsed: DataFrame, versions: DataFrame) -> DataFrame:
    """Valid data messages + the header fields + identity (``_schema``, ``_table``) where known."""
    dt = frames.where(parsed, valid() & (F.col("_kind") == "DT"), "_is_dt")
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
        *[numbers_as_written(F.try_variant_get(inner, f"$['{k}']", "map<string,string>"),
                             F.try_variant_get(inner, f"$['{k}']", "map<string,variant>"), F.col("value"), k).alias(name)
          for k, name in (("data", "_data"), ("beforeData", "_before_data"))],
    )
    ids = versions.where(F.col("schema_id").isNotNull()).groupBy(F.col("schema_id").alias("_by_schema_id")).agg(
        F.max_by(F.struct("schema", "table"), "version").alias("_by_id")
    )
    # no drop() of the join's helper columns: see _parsed
    dt = dt.join(F.broadcast(ids), F.col("_ext_id") == F.col("_by_schema_id"), "left")
    by_msg = F.col("_msg_table").isNotNull()
    # The images decode() types: after = data (none for a DELETE), before = beforeData (a DELETE
    # without it: data); and for each, the keys whose value was a JSON object or array (typed_struct's
    # `nested`).
    data = nested_keys(F.try_variant_get(inner, "$['data']", "map<string,variant>"), F.col("_data"))
    before_data = nested_keys(F.try_variant_get(inner, "$['beforeData']", "map<string,variant>"), F.col("_before_data"))
    is_delete = F.col("_op") == "DELETE"
    before_is_data = is_delete & F.col("_before_data").isNull()
    return dt.select(
        "*",
        F.when(by_msg, F.col("_msg_schema")).otherwise(F.col("_by_id.schema")).alias("_schema"),
        F.when(by_msg, F.col("_msg_table")).otherwise(F.col("_by_id.table")).alias("_table"),
        F.when(~is_delete, F.col("_data")).alias("_raw_after"),
        F.when(before_is_data, F.col("_data")).otherwise(F.col("_before_data")).alias("_raw_before"),
        F.when(~is_delete, data).alias("_nested_after"),
        F.when(before_is_data, data).otherwise(before_data).alias("_nested_before"),
    )


def _by_name(table: TableConfig) -> Column:
    """The data message names ``table`` (its schema, or no schema)."""
    return (F.lower(F.col("_table")) == table.table.lower()) & (
        F.col("_schema").isNull() | (F.lower(F.col("_schema")) == table.schema.lower()))


def _by_path(table: TableConfig) -> Column:
    """The data message names no table and its file matches ``table``'s ``options.path_regex``."""
    regex = (table.options or {}).get("path_regex")
    return F.col("_table").isNull() & F.col("source_file").rlike(regex) if regex else F.lit(False)


def _claims(table: TableConfig) -> Column:
    """``table`` could take the data message (of :func:`_data_rows`): by name, else by path."""
    return F.coalesce(_by_name(table), F.lit(False)) | F.coalesce(_by_path(table), F.lit(False))


def _matches(table: TableConfig) -> Column:
    """The data message (of :func:`_data_rows`) belongs to ``table`` alone: one that names no
    schema while two tables share its name, or whose file two tables' ``path_regex`` match, goes
    to quarantine (:func:`~sqlcdc.formats.base.sole_claim`)."""
    return sole_claim(_claims, table, lambda peer: peer.table.lower() == table.table.lower()
                      or bool((peer.options or {}).get("path_regex")))


# --- ordering and time -------------------------------------------------------------------------------


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
    ts = time_text(ts)
    ntz = ts.try_cast("timestamp_ntz")
    out = F.coalesce(
        F.convert_timezone(F.lit("UTC"), F.current_timezone(), ntz).try_cast("timestamp"),
        ts.try_cast("timestamp"),
    )
    # outside COMMIT_TIME_RANGE is not a SQL Server commit time (and Python clients cannot read it): NULL,
    # and decode() quarantines the message
    return commit_time_in_range(out)


# --- transactions ----------------------------------------------------------------------------------


def transaction_marks(bronze: DataFrame, source: SourceConfig) -> DataFrame:
    """Whole-transaction marks (:meth:`sqlcdc.formats.Decoder.transaction_marks`) of every valid data
    message of the source: ``headers.transactionId``, ``transactionEventCounter`` (the message's place
    in its transaction, from 1) and ``transactionLastEvent``. Full-load (``REFRESH``) messages,
    messages without a transaction id and messages whose counter or last-event flag is missing (or
    unreadable) give no mark: where Replicate does not say where a transaction ends, nothing waits."""
    dt = _parsed(bronze, ("DT",)).where(valid() & (F.col("_kind") == "DT"))
    h = _get(F.col("_inner"), "headers")
    marks = dt.select(
        _get(h, "transactionId", as_type="string").alias("transaction_id"),
        _get(h, "transactionEventCounter", as_type="bigint").alias("position"),
        _get(h, "transactionLastEvent", as_type="boolean").alias("last"),
        F.col("ingest_time").alias("landed"),
        _get(h, "operation", as_type="string").alias("_op"),
    )
    return marks.where((F.coalesce(F.length(F.trim("transaction_id")), F.lit(0)) > 0) & F.col("position").isNotNull()
                       & F.col("last").isNotNull() & (F.coalesce(F.upper("_op"), F.lit("")) != "REFRESH")).select(
        "transaction_id", "position", "last", F.lit(None).cast("string").alias("commit"), "landed")
