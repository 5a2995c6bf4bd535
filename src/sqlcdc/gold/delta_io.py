"""Delta tables of the incremental engine (:mod:`sqlcdc.gold.incremental`): reading and writing
a target by path or name, replacing a batch's keys in one MERGE, and the SCD2 target's layout
(closed versions sorted by ``__END_AT`` in files apart from the open ones) that lets a MERGE skip
the files a batch cannot change.

Example::

    from sqlcdc.gold import delta_io
    delta_io.replace_keys(spark, target, delta_io.markers(touched, keys), new_rows, keys)
"""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from sqlcdc.gold.order import q as _q
from sqlcdc.gold.order import col as _c
from sqlcdc.gold.spec import END_AT

__all__ = [
    "LAYOUT_FILE_ROWS", "RELAYOUT_SHARE", "delta_table", "exists", "first_leaf", "markers", "null_safe_on", "prune",
    "read", "relayout_if_mixed", "replace_keys", "since_filter", "touched_keys", "write", "write_layout",
]


def is_path(target: str) -> bool:
    return "/" in target or target.startswith(".")


def exists(spark: SparkSession, target: str) -> bool:
    from delta.tables import DeltaTable

    if is_path(target):
        return DeltaTable.isDeltaTable(spark, target)
    return spark.catalog.tableExists(target)


def read(spark: SparkSession, target: str) -> DataFrame:
    return spark.read.format("delta").load(target) if is_path(target) else spark.read.table(target)


def write(df: DataFrame, target: str, mode: str, **options: object) -> None:
    w = df.write.format("delta").mode(mode).options(**{k: str(v) for k, v in options.items()})
    if mode == "overwrite":
        w = w.option("overwriteSchema", "true")
    if is_path(target):
        w.save(target)
    else:
        w.saveAsTable(target)


def delta_table(spark: SparkSession, target: str):
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, target) if is_path(target) else DeltaTable.forName(spark, target)


def null_safe_on(keys: Sequence[str], left: str, right: str) -> Column:
    cond = None
    for k in keys:
        c = F.col(f"{left}.{_q(k)}").eqNullSafe(F.col(f"{right}.{_q(k)}"))
        cond = c if cond is None else cond & c
    return cond


#: Up to this many touched keys, the history look-up broadcasts them (no shuffle of the log).
BROADCAST_KEYS = 2_000_000


def touched_keys(frame: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The distinct keys of a batch, materialized; broadcast when few (the usual case), so the
    look-ups they drive do not shuffle the table they filter."""
    touched = frame.select(*[_c(k) for k in keys]).distinct().localCheckpoint(eager=True)
    return F.broadcast(touched) if touched.count() <= BROADCAST_KEYS else touched


def markers(keys_df: DataFrame, keys: Sequence[str], action: str = "delete", since: Column | None = None) -> DataFrame:
    """Delete markers for :func:`replace_keys`: ``delete`` (every row of the key) or ``delete_since``
    (the key's open SCD2 version, and with ``since`` the versions that end at or after it)."""
    return keys_df.select(*[_c(k) for k in keys], F.lit(action).alias("__ac_action"),
                          *([since.alias("__ac_since")] if since is not None else []))


def replace_keys(spark: SparkSession, target: str, markers: DataFrame, rows: DataFrame, keys: Sequence[str],
                  prune: Column | None = None) -> None:
    """Replace the marked rows of ``target`` by ``rows``, in one MERGE (see :func:`markers`).

    A marker matches the target rows of its key (all of them, or the versions since a point), and
    the new rows (which match nothing) are inserted. No finer match would do: when sequences tie,
    SCD2 versions of a key can share a ``__START_AT`` (a zero-length version [s, s) before [s, ...)).
    ``prune``: a condition on the target alone (alias ``g``) that every marked row meets; Delta
    skips the files whose statistics rule it out (see :func:`since_filter`).
    """
    source = markers.unionByName(rows.withColumn("__ac_action", F.lit("insert")), allowMissingColumns=True)
    cols = [f.name for f in read(spark, target).schema.fields]
    action = F.col("s.__ac_action")
    which = action == F.lit("delete")
    if END_AT in cols:
        since = F.col("s.__ac_since") if "__ac_since" in source.columns else F.lit(None)
        which = which | ((action == F.lit("delete_since")) & since_filter(F.col(f"g.{_q(END_AT)}"), since))
    on = null_safe_on(keys, "g", "s") & which
    (
        delta_table(spark, target).alias("g")
        .merge(source.alias("s"), on if prune is None else prune & on)
        .whenMatchedDelete()
        .whenNotMatchedInsert(condition="s.__ac_action = 'insert'", values={_q(c): f"s.{_q(c)}" for c in cols})
        .execute()
    )


# ---------------------------------------------------------------------- SCD2 target layout
def since_filter(end_at: Column, since: Column) -> Column:
    """The SCD2 versions a batch can change: the open one (``__END_AT`` NULL) and, for a key with
    events from ``since`` on, every version that ends at or after ``since``. A version that ended
    before the key's first new event cannot change: it depends only on earlier events."""
    return end_at.isNull() | (since.isNotNull() & (end_at >= since))


def first_leaf(col: Column, dtype: DataType) -> Column:
    """The first atomic field of ``col`` (of the sequence type ``dtype``): Delta keeps min, max and
    null counts for atomic leaves only, so file pruning on ``__END_AT`` goes through it."""
    while isinstance(dtype, StructType) and dtype.fields:
        col, dtype = col.getField(dtype.fields[0].name), dtype.fields[0].dataType
    return col


def prune(end_type: DataType, lowest: object | None, late: bool) -> Column:
    """A target-only condition implied by the markers of a batch (see :func:`replace_keys`):
    ``__END_AT``'s first leaf is NULL (an open version; a struct sequence compares field by field,
    so the first leaf bounds the whole), or, when the batch has late keys, at or after ``lowest``,
    the lowest first leaf of their ``since``. Open and closed versions live in separate files and
    closed ones are sorted by end (:func:`write_layout`), so the MERGE skips the closed files
    that ended before the batch's earliest late event."""
    leaf = first_leaf(F.col(f"g.{_q(END_AT)}"), end_type)
    return leaf.isNull() if not late else leaf.isNull() | (leaf >= F.lit(lowest))


#: A layout write puts at most this many closed versions in a file (sorted by ``__END_AT``).
LAYOUT_FILE_ROWS = 100_000
#: The target is laid out again once the MERGEs since its last layout have inserted this share of
#: its rows (their files mix open and closed versions, so every run reads them) -- and at least a
#: layout file's worth (:data:`LAYOUT_FILE_ROWS`): below that, what they add to a MERGE's read is
#: less than one layout file, and rewriting the table each run (a small table reaches any share
#: with every batch) costs more than it saves.
RELAYOUT_SHARE = 0.25


def write_layout(spark: SparkSession, versions: DataFrame, target: str, *, data_change: bool = True,
                  deletion_vectors: bool = False) -> None:
    """Overwrite the SCD2 ``target`` with ``versions``: closed versions sorted by ``__END_AT`` in files
    of at most :data:`LAYOUT_FILE_ROWS` rows, open versions in files of their own. File statistics
    then let a MERGE skip what a batch cannot change (see :func:`prune`). A new target gets
    deletion vectors when asked (a MERGE then marks replaced rows instead of rewriting the files
    they are in, but readers need Delta reader version 3: delta-rs cannot read it); otherwise it
    is created with them off, whatever the session's defaults."""
    end = F.col(END_AT)
    leaf = first_leaf(end, versions.schema[END_AT].dataType)
    n = int(spark.conf.get("spark.sql.shuffle.partitions"))
    closed = versions.where(end.isNotNull()).repartitionByRange(n, leaf).sortWithinPartitions(leaf)
    laid = closed.unionByName(versions.where(end.isNull()).repartition(n))
    # A new target's protocol is chosen here, by a writer option (it beats the session's defaults).
    created = {} if exists(spark, target) else {"delta.enableDeletionVectors": str(deletion_vectors).lower()}
    write(laid, target, "overwrite", maxRecordsPerFile=LAYOUT_FILE_ROWS, dataChange=str(data_change).lower(),
           **created)


def relayout_if_mixed(spark: SparkSession, target: str) -> bool:
    """Lay the SCD2 ``target`` out again (:func:`write_layout`, ``dataChange`` false) when the rows
    its MERGEs inserted since the last layout reach :data:`RELAYOUT_SHARE` of it and
    :data:`LAYOUT_FILE_ROWS`, or when the last layout is more than 64 commits back (which bounds
    the small files MERGEs leave). Reads only the Delta log (the operation metrics of the recent
    commits). True when it did."""
    inserted, laid_out = 0, None
    for h in delta_table(spark, target).history(64).select("operation", "operationParameters", "operationMetrics").collect():
        metrics = h["operationMetrics"] or {}
        if h["operation"] == "MERGE":
            inserted += int(metrics.get("numTargetRowsInserted", 0))
        elif h["operation"] == "WRITE" and (h["operationParameters"] or {}).get("mode") == "Overwrite":
            laid_out = int(metrics.get("numOutputRows", 0))
            break
    if laid_out is not None and inserted < max(RELAYOUT_SHARE * laid_out, LAYOUT_FILE_ROWS):
        return False
    write_layout(spark, read(spark, target), target, data_change=False)
    return True
