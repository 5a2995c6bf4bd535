"""Whole-transaction apply: gold shows a source transaction whole or not at all.

A producer that says where its transactions end gives, through its decoder's
:meth:`~sqlcdc.formats.Decoder.transaction_marks`, one mark per landed change record of the source
(every table of it: a transaction spans tables, onboarded or not): the transaction id, the record's
place in the transaction and whether it is the last one (or, in a record that is no change, the
transaction's size). Qlik Replicate does (``transactionId``, ``transactionEventCounter``,
``transactionLastEvent``); so does Debezium with ``provide.transaction.metadata`` (each event's
``transaction.total_order``, the END record's ``event_count``). CES marks each event's commit LSN
but never says where a commit ends: with ``transactions.later_commit`` a commit counts as complete
once a later commit of the source has landed. The other producers give no marks yet, so their
changes are applied as they land.

A transaction is **complete** once its size is known (its last record, or its END, has landed) and
as many distinct places have landed (duplicates count once). Before each apply, :func:`hold` splits
the table's silver changes:

- **ready**: changes of a complete transaction, or of no marked transaction (a full load, a change
  without a transaction id): applied now;
- **pending**: changes of an incomplete transaction: held out of gold, offered again by the next run
  (``sqlcdc run`` prints how many and how long the oldest has waited, and :func:`record` appends
  the counts to the table ``dq_transactions``, one row per table and run);
- **expired**: changes of an incomplete transaction whose first record landed longer ago than
  ``transactions.timeout_hours``: never applied, never dropped -- they are the rows of the table
  ``quarantine_<table>_transactions``, each with its reason (rewritten every run, so a transaction
  whose missing records land after all leaves it and is applied whole).

:func:`classify` gives one frame with each row's state (materialize it once), :func:`split` its
ready and waiting rows.

Example::

    from sqlcdc.config import Transactions
    ready, waiting = hold(silver, marks, Transactions(timeout_hours=24))
    waiting.where("_state = 'expired'")   # silver rows + _state, _have, _size, _first_landed

Under ``sqlcdc run`` only: the gold a hand-run pipeline (or AUTO CDC on Databricks) declares applies
changes as they land (docs/transactions.md).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc.config import TableConfig, Transactions

__all__ = ["READY", "PENDING", "EXPIRED", "METRICS_TABLE", "Waiting", "classify", "split", "hold", "quarantine_table",
           "summary", "expired_rows", "record"]

METRICS_TABLE = "dq_transactions"
"""Per run and table under whole-transaction apply: what waits (:func:`record`)."""

READY, PENDING, EXPIRED = "ready", "pending", "expired"
_TX, _HAVE, _SIZE, _FIRST, _STATE = "_tx", "_have", "_size", "_first_landed", "_state"
_COMMIT, _LATEST = "_commit", "_latest_commit"


def quarantine_table(table: TableConfig) -> str:
    """The table holding ``table``'s changes of transactions that did not complete in time."""
    return f"quarantine_{table.name}_transactions"


def _complete(have: Column, size: Column) -> Column:
    return size.isNotNull() & (have >= size)


def classify(silver: DataFrame, marks: DataFrame, policy: Transactions) -> DataFrame:
    """``silver`` with ``_state`` (``ready``, ``pending`` or ``expired``; see the module doc),
    ``_have`` (distinct places landed), ``_size`` (the marks' ``size`` -- a record that states the
    transaction's size without being one of its places, as Debezium's END -- else the last record's
    counter; NULL while neither has landed), ``_first_landed`` and ``_commit`` (the marks' ``commit``;
    ``size`` and ``commit`` are optional in ``marks``): one frame, to be materialized once and split
    by ``_state``. With ``policy.later_commit``, a
    transaction with a ``commit`` is also complete once a mark of a later ``commit`` has landed."""
    marked = marks.where(F.col("transaction_id").isNotNull())
    for name, kind in (("commit", "string"), ("size", "bigint")):
        if name not in marked.columns:
            marked = marked.withColumn(name, F.lit(None).cast(kind))
    tx = marked.groupBy(F.col("transaction_id").alias(_TX)).agg(
        F.count_distinct("position").alias(_HAVE),
        F.coalesce(F.max("size"), F.max(F.when(F.col("last"), F.col("position")))).alias(_SIZE),
        F.min("landed").alias(_FIRST),
        F.max("commit").alias(_COMMIT),
    )
    joined = silver.join(tx, silver["transaction_id"] == tx[_TX], "left")
    complete = _complete(F.col(_HAVE), F.col(_SIZE))
    if policy.later_commit:  # a commit no record ends: complete once a later commit of the source landed
        latest = tx.agg(F.max(_COMMIT).alias(_LATEST))  # from the groups: bronze is parsed once
        joined = joined.crossJoin(F.broadcast(latest))
        complete = complete | F.coalesce(F.col(_COMMIT) < F.col(_LATEST), F.lit(False))
    deadline = F.current_timestamp() - F.make_dt_interval(secs=F.lit(policy.timeout_hours * 3600.0))
    state = (F.when(F.col(_TX).isNull() | complete, F.lit(READY))
             .when(F.col(_FIRST) < deadline, F.lit(EXPIRED)).otherwise(F.lit(PENDING)))
    return joined.select(*silver.columns, _HAVE, _SIZE, _FIRST, _COMMIT, state.alias(_STATE))


def split(classified: DataFrame, columns: list[str]) -> tuple[DataFrame, DataFrame]:
    """(ready, waiting) of a :func:`classify` frame: the ready rows with ``columns`` only, the
    waiting ones (pending or expired) with the extra columns."""
    ready = classified.where(F.col(_STATE) == READY).select(*columns)
    return ready, classified.where(F.col(_STATE) != READY)


def hold(silver: DataFrame, marks: DataFrame, policy: Transactions) -> tuple[DataFrame, DataFrame]:
    """(ready, waiting) silver rows: :func:`split` of :func:`classify`."""
    return split(classify(silver, marks, policy), silver.columns)


@dataclass(frozen=True)
class Waiting:
    """What :func:`summary` counts of the waiting changes."""

    pending: int = 0
    pending_transactions: int = 0
    oldest_seconds: int | None = None
    """How long ago the first record of the oldest pending transaction landed."""
    expired: int = 0
    expired_transactions: int = 0

    def describe(self, table: TableConfig, policy: Transactions) -> str:
        """What ``sqlcdc run`` says of them after the table's apply line (empty: nothing waits)."""
        out = ""
        if self.pending:
            age = _age(self.oldest_seconds) if self.oldest_seconds is not None else "?"
            out += (f"; {self.pending} changes of {self.pending_transactions} incomplete transaction(s) "
                    f"pending (oldest first landed {age} ago; quarantined after {policy.timeout_hours:g} h)")
        if self.expired:
            out += (f"; {self.expired} changes of {self.expired_transactions} transaction(s) incomplete past "
                    f"{policy.timeout_hours:g} h -> {quarantine_table(table)}")
        return out


def _age(seconds: int) -> str:
    secs = max(seconds, 0)
    if secs < 120:
        return f"{secs}s"
    if secs < 7200:
        return f"{secs // 60} min"
    return f"{secs / 3600:.1f} h"


def summary(waiting: DataFrame) -> Waiting:
    """Counts of ``waiting`` (of :func:`hold` or :func:`split`), in one Spark job."""
    rows = waiting.groupBy(_STATE).agg(
        F.count(F.lit(1)).alias("n"), F.count_distinct("transaction_id").alias("txs"),
        F.max(F.unix_timestamp(F.current_timestamp()) - F.unix_timestamp(_FIRST)).alias("age")
    ).collect()
    by = {r[_STATE]: r for r in rows}
    p, e = by.get(PENDING), by.get(EXPIRED)
    return Waiting(p["n"] if p else 0, p["txs"] if p else 0, p["age"] if p else None,
                   e["n"] if e else 0, e["txs"] if e else 0)


def expired_rows(waiting: DataFrame, policy: Transactions) -> DataFrame:
    """The rows of :func:`quarantine_table`: the expired changes with lineage and the reason."""
    first = F.date_format(F.col(_FIRST), "yyyy-MM-dd HH:mm:ss")
    hours = F.lit(f"{policy.timeout_hours:g}")
    counted = F.format_string(
        "transaction %s incomplete after %s h: %d of %s of its changes landed (%s), the first at %s; "
        "its changes are not applied",
        F.col("transaction_id"), hours, F.col(_HAVE), F.coalesce(F.col(_SIZE).cast("string"), F.lit("?")),
        F.when(F.col(_SIZE).isNull(), F.lit("the record that ends it has not landed"))
        .otherwise(F.lit("some in between are missing")),
        first,
    )
    unconfirmed = F.format_string(
        "commit %s unconfirmed after %s h: the producer does not say where a transaction ends and no later "
        "commit of the source has landed since its first change did, at %s; its changes are not applied "
        "until one does", F.col(_COMMIT), hours, first,
    )
    reason = F.when(F.col(_SIZE).isNull() & F.col(_COMMIT).isNotNull(), unconfirmed).otherwise(counted)
    return waiting.where(F.col(_STATE) == EXPIRED).select(
        "table_name", "transaction_id", "change_id", "op", F.to_json("key").alias("key"), "sequence", "commit_time",
        reason.alias("reason"), F.col(_FIRST).alias("first_landed"), "bronze_record_id", "bronze_file",
        F.current_timestamp().alias("quarantined_at"),
    )


def record(spark: SparkSession, path: str, table: TableConfig, counts: Waiting, policy: Transactions,
           run_time: dt.datetime) -> None:
    """Append ``counts`` (of the run started at ``run_time``, an aware time) as one row of
    :data:`METRICS_TABLE` at ``path``: ``run_time``, ``source_name``, ``table_name``,
    ``pending_changes``, ``pending_transactions``, ``oldest_pending_seconds`` (how long ago the
    first record of the oldest pending transaction landed; NULL when none waits),
    ``expired_changes``, ``expired_transactions`` (the rows of :func:`quarantine_table`),
    ``timeout_hours`` and ``measured_at``. Zeros are rows too: a run in which nothing waits says so.

    Example::

        spark.read.table("dq_transactions").where("pending_changes > 0").orderBy("run_time")
    """
    micros = round(run_time.timestamp() * 1_000_000)  # an instant: no driver or session time zone in between
    row = (micros, table.source.name, table.name,
           counts.pending, counts.pending_transactions, counts.oldest_seconds, counts.expired,
           counts.expired_transactions, float(policy.timeout_hours))
    schema = ("run_time bigint, source_name string, table_name string, pending_changes bigint, "
              "pending_transactions bigint, oldest_pending_seconds bigint, expired_changes bigint, "
              "expired_transactions bigint, timeout_hours double")
    frame = spark.createDataFrame([row], schema).withColumn("run_time", F.timestamp_micros("run_time")).withColumn(
        "measured_at", F.current_timestamp())
    frame.write.format("delta").mode("append").save(path)
