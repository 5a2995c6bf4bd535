"""The canonical change: the one silver record every decoder emits, and the frame gold applies.

A silver table holds, per onboarded source table, one row per source change:

====================  ==================  ==================================================
column                type                meaning
====================  ==================  ==================================================
change_id             string              stable id of the change (producer event id or a
                                          hash of the bronze record): duplicates share it
source_format         string              ``debezium`` | ``ces`` | ``cdc_ct`` | ``qlik``
source_server         string              logical server / task name, where the producer has one
source_database       string
source_schema         string
source_table          string
table_name            string              the onboarded table (config ``name``)
op                    string              ``INSERT`` ``UPDATE`` ``DELETE`` ``SNAPSHOT`` ``TRUNCATE``
key                   struct<key columns> typed key values (of ``after``; of ``before`` for deletes)
before                struct<columns>     typed before image; NULL when the producer gives none
after                 struct<columns>     typed after image; NULL for DELETE and TRUNCATE
provided_columns      array<string>       columns whose value ``after`` really carries (a NULL
                                          there is a real NULL); NULL = every column
changed_columns       array<string>       columns the change modified; NULL = unknown
sequence              struct              ordering key, see :mod:`sqlcdc.lsn`
commit_time           timestamp           source commit time (UTC)
transaction_id        string
bronze_record_id      string              lineage: the bronze row
bronze_file           string              lineage: the landed file (or topic/partition/offset)
bronze_ingest_time    timestamp
====================  ==================  ==================================================

:func:`apply_frame` turns silver into the flat frame gold applies (and that Databricks AUTO CDC
reads): one row per key change, data columns at top level plus ``_op``, ``_sequence``,
``_provided``. A primary-key change (an UPDATE whose before and after keys differ) becomes a DELETE
of the old key and an UPSERT of the new one, so every producer's key change ends the same way.
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StringType, StructField, StructType, TimestampType

from sqlcdc import lsn
from sqlcdc.names import quote
from sqlcdc.values import VALUE_WARNINGS_COL

INSERT, UPDATE, DELETE, SNAPSHOT, TRUNCATE = "INSERT", "UPDATE", "DELETE", "SNAPSHOT", "TRUNCATE"
OPERATIONS = (INSERT, UPDATE, DELETE, SNAPSHOT, TRUNCATE)

#: Canonical columns, in order. ``key``/``before``/``after`` are per-table structs.
CHANGE_COLUMNS = (
    "change_id",
    "source_format",
    "source_server",
    "source_database",
    "source_schema",
    "source_table",
    "table_name",
    "op",
    "key",
    "before",
    "after",
    "provided_columns",
    "changed_columns",
    "sequence",
    "commit_time",
    "transaction_id",
    "bronze_record_id",
    "bronze_file",
    "bronze_ingest_time",
)

#: Bronze columns every source's bronze table has (a source may add more, e.g. Kafka's).
BRONZE_COLUMNS = ("record_id", "value", "source_file", "ingest_time")

QUARANTINE_SCHEMA = StructType(
    [
        StructField("source_name", StringType()),
        StructField("source_format", StringType()),
        StructField("table_name", StringType()),
        StructField("reason", StringType()),
        StructField("rules", ArrayType(StringType())),
        StructField("raw", StringType()),
        StructField("bronze_record_id", StringType()),
        StructField("bronze_file", StringType()),
        StructField("bronze_ingest_time", TimestampType()),
    ]
)
QUARANTINE_COLUMNS = tuple(f.name for f in QUARANTINE_SCHEMA.fields)

# Columns of the apply frame that are not data columns.
OP_COL, SEQ_COL, PROVIDED_COL, CHANGE_ID_COL, COMMIT_TIME_COL = (
    "_op",
    "_sequence",
    "_provided",
    "_change_id",
    "_commit_time",
)
APPLY_META_COLUMNS = (OP_COL, SEQ_COL, PROVIDED_COL, CHANGE_ID_COL, COMMIT_TIME_COL)
UPSERT = "UPSERT"


def change_row(
    *,
    change_id: Column,
    source_format: str,
    table_name: str,
    op: Column,
    key: Column,
    before: Column,
    after: Column,
    sequence: Column,
    source_server: Column | None = None,
    source_database: Column | None = None,
    source_schema: Column | None = None,
    source_table: Column | None = None,
    provided_columns: Column | None = None,
    changed_columns: Column | None = None,
    commit_time: Column | None = None,
    transaction_id: Column | None = None,
    bronze_record_id: Column | None = None,
    bronze_file: Column | None = None,
    bronze_ingest_time: Column | None = None,
    value_warnings: Column | None = None,
) -> list[Column]:
    """The canonical columns, in order, for ``DataFrame.select``. Decoders call this last.

    ``value_warnings`` (a table with ``bad_values: warn``, :func:`sqlcdc.values.split_value_errors`)
    adds one more column, :data:`sqlcdc.values.VALUE_WARNINGS_COL`, that the expectations turn into
    ``dq_warnings``; silver itself keeps the canonical columns."""
    null_str = F.lit(None).cast("string")
    extra = [] if value_warnings is None else [value_warnings.alias(VALUE_WARNINGS_COL)]
    return [
        change_id.cast("string").alias("change_id"),
        F.lit(source_format).alias("source_format"),
        (source_server if source_server is not None else null_str).alias("source_server"),
        (source_database if source_database is not None else null_str).alias("source_database"),
        (source_schema if source_schema is not None else null_str).alias("source_schema"),
        (source_table if source_table is not None else null_str).alias("source_table"),
        F.lit(table_name).alias("table_name"),
        op.alias("op"),
        key.alias("key"),
        before.alias("before"),
        after.alias("after"),
        (provided_columns if provided_columns is not None else F.lit(None).cast("array<string>")).alias(
            "provided_columns"
        ),
        (changed_columns if changed_columns is not None else F.lit(None).cast("array<string>")).alias(
            "changed_columns"
        ),
        sequence.alias("sequence"),
        (commit_time if commit_time is not None else F.lit(None).cast("timestamp")).alias("commit_time"),
        (transaction_id if transaction_id is not None else null_str).cast("string").alias("transaction_id"),
        (bronze_record_id if bronze_record_id is not None else F.col("record_id")).alias("bronze_record_id"),
        (bronze_file if bronze_file is not None else F.col("source_file")).alias("bronze_file"),
        (bronze_ingest_time if bronze_ingest_time is not None else F.col("ingest_time")).alias(
            "bronze_ingest_time"
        ),
        *extra,
    ]


def quarantine_row(
    *,
    source_name: str,
    source_format: str,
    reason: Column,
    table_name: Column | str | None = None,
    rules: Column | None = None,
    raw: Column | None = None,
) -> list[Column]:
    """The quarantine columns, in order, for a bronze row that could not become a change."""
    tn = F.lit(table_name) if isinstance(table_name, str) or table_name is None else table_name
    return [
        F.lit(source_name).alias("source_name"),
        F.lit(source_format).alias("source_format"),
        tn.cast("string").alias("table_name"),
        reason.cast("string").alias("reason"),
        (rules if rules is not None else F.array(F.lit("envelope"))).alias("rules"),
        (raw if raw is not None else F.col("value")).cast("string").alias("raw"),
        F.col("record_id").alias("bronze_record_id"),
        F.col("source_file").alias("bronze_file"),
        F.col("ingest_time").alias("bronze_ingest_time"),
    ]


def apply_frame(silver: DataFrame, columns: Sequence[str], keys: Sequence[str]) -> DataFrame:
    """Silver -> the flat frame gold applies: data columns + ``_op``/``_sequence``/``_provided``.

    ``_op`` is ``UPSERT``, ``DELETE`` or ``TRUNCATE``. INSERT, UPDATE and SNAPSHOT are upserts of
    the after image; DELETE removes the key (of the before image, else of ``key``). An UPDATE whose
    before-image key differs from its after-image key becomes DELETE(old key) + UPSERT(new key).
    """
    key_changed = (
        (F.col("op") == UPDATE)
        & F.col("before").isNotNull()
        & ~F.coalesce(
            F.struct(*[F.col("before")[k].alias(k) for k in keys]).eqNullSafe(
                F.struct(*[F.col("after")[k].alias(k) for k in keys])
            ),
            F.lit(True),
        )
    )
    upsert_ops = F.col("op").isin(INSERT, UPDATE, SNAPSHOT)
    old_key_delete = silver.where(key_changed).select(
        *[F.col("before")[c].alias(c) for c in columns],
        F.lit(DELETE).alias(OP_COL),
        F.col("sequence").alias(SEQ_COL),
        F.lit(None).cast("array<string>").alias(PROVIDED_COL),
        F.concat(F.col("change_id"), F.lit("#old-key")).alias(CHANGE_ID_COL),
        F.col("commit_time").alias(COMMIT_TIME_COL),
    )
    image = (
        F.when(upsert_ops, F.col("after"))
        .when(F.col("op") == DELETE, F.coalesce(F.col("before"), F.col("after")))
    )
    main = silver.select(
        *[
            (F.coalesce(F.col("key")[c], image[c]) if c in keys else image[c]).alias(c)
            for c in columns
        ],
        F.when(upsert_ops, F.lit(UPSERT)).otherwise(F.col("op")).alias(OP_COL),
        F.col("sequence").alias(SEQ_COL),
        F.when(upsert_ops, F.col("provided_columns")).alias(PROVIDED_COL),
        F.col("change_id").alias(CHANGE_ID_COL),
        F.col("commit_time").alias(COMMIT_TIME_COL),
    )
    # Same select list on both sides: positional union. (unionByName makes Spark Connect resolve
    # both inputs when the plan is registered, before SDP has created the tables they read.)
    return main.union(old_key_delete)


def apply_frame_schema(columns: Sequence) -> StructType:
    """The schema :func:`apply_frame` produces for ``columns`` (:class:`sqlcdc.values.ColumnSpec`).

    Known without analysing a DataFrame, which SDP forbids inside a query function.
    """
    ddl = ", ".join(f"{quote(c.name)} {c.spark_type}" for c in columns)
    data = DataType.fromDDL(ddl) if ddl else StructType([])
    assert isinstance(data, StructType)
    return StructType(
        list(data.fields)
        + [
            StructField(OP_COL, StringType(), False),
            StructField(SEQ_COL, lsn.SEQUENCE_TYPE, False),
            StructField(PROVIDED_COL, ArrayType(StringType())),
            StructField(CHANGE_ID_COL, StringType()),
            StructField(COMMIT_TIME_COL, TimestampType()),
        ]
    )
