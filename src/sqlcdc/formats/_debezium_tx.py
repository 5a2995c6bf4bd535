"""Debezium's transaction metadata (``provide.transaction.metadata=true``), for whole-transaction apply.

With the option on, the SQL Server connector

- adds a ``transaction`` block to every data event of a streamed transaction: ``id`` (the commit
  LSN, ``00000025:00000d08:0025``), ``total_order`` (the event's place among all events of the
  transaction, every table, from 1) and ``data_collection_order`` (its place among the events of
  its table); numbers or, as Debezium's documentation example writes them, strings;
- writes a BEGIN and an END record per transaction to the topic ``<topic.prefix>.transaction``:
  ``{"status": "END", "id": ..., "event_count": 2, "data_collections": [{"data_collection":
  "testDB.dbo.tablea", "event_count": 1}, ...]}`` (with the JSON converter's schema envelope, the
  same fields under ``payload``). Debezium emits the END only once the next transaction's first
  event has been read, so on a quiet database the last transaction's END comes late.

Landed in the source beside the data topics, the boundary records are not changes: they are
skipped (counted as such, :func:`is_boundary`). A transaction is complete once its END has landed
and as many distinct ``total_order`` places as its ``event_count``. Without the transaction topic
in the source's bronze (not one boundary record), Debezium says nothing of where a transaction ends
and each change is applied as it lands (docs/transactions.md).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sqlcdc.formats.base import json_trim, one_json_value

STATUSES = ("BEGIN", "END")
_BOUNDARY_DDL = "status string, id string, event_count string, op string"


def _boundary_fields(value: Column) -> Column:
    """The boundary fields of a record, from its ``payload`` when it has one."""
    env = F.from_json(value, "payload string")
    return F.from_json(F.coalesce(env["payload"], value), _BOUNDARY_DDL)


def is_boundary(value: Column) -> Column:
    """A BEGIN or END record of the transaction topic: ``status`` BEGIN/END, an ``id``, no ``op``
    (at the top or under ``payload``), one JSON document that reads. The text tests guard the
    parses in a CASE, not an AND: Spark hoists an expression an AND chain reads more than once (the
    parse ``b``) out of it and computes it for every record (two ``from_json`` of every data event)."""
    v = json_trim(value)
    b = _boundary_fields(value)
    parsed = F.when(
        v.startswith("{") & v.contains('"status"') & (v.contains('"BEGIN"') | v.contains('"END"')),
        b["status"].isin(*STATUSES) & b["id"].isNotNull() & b["op"].isNull()
        & F.try_parse_json(value).isNotNull() & one_json_value(value),  # else quarantined, saying why
    )
    return F.coalesce(parsed, F.lit(False))


def _whole_number(text: Column) -> Column:
    """``text`` (a JSON number or a numeric string) as a bigint >= 1; NULL when it is not one."""
    t = F.trim(text)
    return F.when(t.rlike(r"^[0-9]{1,18}$") & (t.cast("bigint") >= 1), t.cast("bigint"))


def marks(events: DataFrame, bronze: DataFrame) -> DataFrame:
    """Whole-transaction marks (:meth:`sqlcdc.formats.Decoder.transaction_marks`): one per data event
    with a ``transaction`` block (``events``: parsed, usable events with ``_payload``) -- its
    ``total_order`` as the place -- and one per END record of ``bronze`` with its ``event_count`` as
    the transaction's ``size`` (no place). An event without the block (a snapshot read, a transaction
    before the option was on) or with an unreadable ``total_order`` marks nothing."""
    tx = F.col("_payload.transaction")
    data = events.select(
        tx["id"].alias("transaction_id"), _whole_number(tx["total_order"]).alias("position"),
        F.lit(False).alias("last"), F.lit(None).cast("bigint").alias("size"), F.col("ingest_time").alias("landed"),
    ).where(F.col("transaction_id").isNotNull() & F.col("position").isNotNull())
    b = F.col("_b")  # parsed once: the boundary test and the fields read the same struct
    ends = bronze.where(is_boundary(F.col("value"))).select(_boundary_fields(F.col("value")).alias("_b"), "ingest_time")
    ends = ends.where(b["status"] == "END").select(
        b["id"].alias("transaction_id"), F.lit(None).cast("bigint").alias("position"), F.lit(False).alias("last"),
        _whole_number(b["event_count"]).alias("size"), F.col("ingest_time").alias("landed"),
    )
    return data.unionByName(ends).select(
        "transaction_id", "position", "last", "size", F.lit(None).cast("string").alias("commit"), "landed")


def has_boundaries(bronze: DataFrame) -> bool:
    """Whether any boundary record has landed in ``bronze`` (the transaction topic is landed)."""
    return bool(bronze.where(is_boundary(F.col("value"))).limit(1).count())
