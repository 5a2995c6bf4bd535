"""Benchmark: incremental apply (merge_scd1/merge_scd2) vs full recompute, in one process.

Loads a history of ``--changes`` changes (default 1,000,000) over ``--keys`` keys, then applies
``--batches`` batches of ``--fraction`` (default 1%) more changes, ``--late`` of them (default a
tenth) late: sequenced inside the last ``--late-window`` of the history (default its second half;
a late event makes SCD2 re-cut that key's versions from it on, so how far back late events reach
decides how much of the SCD2 target a batch reads). For each batch it prints the time of the
incremental run next to the time of a full recompute of the same table from every change so far
(written to Delta the same way), and the ratio. It also checks that both give the same table.
Not a test: it prints figures.

Usage::

    .venv/bin/python benchmarks/bench_apply_changes.py                # 1M changes, 3 batches of 1%
    .venv/bin/python benchmarks/bench_apply_changes.py --changes 200000 --scd 1
    .venv/bin/python benchmarks/bench_apply_changes.py --scd 2 --late-window 0.01 --steps   # recent late events
    .venv/bin/python benchmarks/bench_apply_changes.py --scd 2 --deletion-vectors   # SCD2 gold with deletion vectors
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc.gold import ApplyChangesSpec, scd1, scd2
from sqlcdc.gold import incremental
from sqlcdc.gold import merge_scd1, merge_scd2
from sqlcdc.runtime import local_spark


def changes(spark: SparkSession, start: int, n: int, keys: int, late_from: int | None = None, seed: int = 0,
            hot_keys: int | None = None, late: float = 0.1) -> DataFrame:
    """``n`` synthetic apply-frame rows with sequence numbers ``start..start+n-1``.

    With ``late_from``, a fraction ``late`` of the rows takes a sequence number in ``[late_from, start)`` instead
    (late delivery). About 5% are deletes and 20% partial updates (``_provided`` = id + city).
    With ``hot_keys``, the rows only touch that many keys (a skewed, "hot" batch).
    """
    i = F.col("id") + F.lit(start)
    h = F.abs(F.xxhash64(F.col("id"), F.lit(seed)))
    n_seq = i
    if late_from is not None:
        n_seq = F.when(h % 1000 < int(late * 1000), F.lit(late_from) + h % F.lit(max(start - late_from, 1))).otherwise(i)
    hexs = F.lpad(F.upper(F.hex(n_seq)), 20, "0")
    op = F.when(h % 20 == 1, F.lit("DELETE")).otherwise(F.lit("UPSERT"))
    partial = (h % 5 == 2) & (op == "UPSERT")
    key = (h % keys) if hot_keys is None else (h % hot_keys) * (keys // hot_keys)
    return spark.range(n).select(
        key.alias("id"),
        F.concat(F.lit("name-"), (h % 997).cast("string")).alias("name"),
        F.concat(F.lit("city-"), (h % 101).cast("string")).alias("city"),
        (h % 100000).cast("decimal(12,2)").alias("amount"),
        op.alias("_op"),
        F.struct(hexs.alias("commit_lsn"), hexs.alias("change_lsn"), F.lit(0).cast("bigint").alias("serial")).alias(
            "_sequence"
        ),
        F.when(partial, F.array(F.lit("id"), F.lit("city"))).otherwise(F.lit(None).cast("array<string>")).alias(
            "_provided"
        ),
        F.concat(F.lit("c"), n_seq.cast("string"), F.lit("-"), i.cast("string")).alias("_change_id"),
        (F.lit("2026-01-01").cast("timestamp") + F.make_dt_interval(secs=n_seq.cast("double") / 1000)).alias(
            "_commit_time"
        ),
    )


def not_null_sequence(df: DataFrame) -> DataFrame:
    """Declare ``_sequence`` NOT NULL (it never is NULL) so ``spec.validate`` accepts the frame."""
    lowest = F.struct(F.lit("0" * 20).alias("commit_lsn"), F.lit("0" * 20).alias("change_lsn"),
                      F.lit(0).cast("bigint").alias("serial"))
    return df.withColumn("_sequence", F.coalesce(F.col("_sequence"), lowest))


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--scd", choices=["1", "2", "both"], default="both")
    ap.add_argument("--hot-keys", type=int, default=None,
                    help="batches touch only this many keys (default: keys drawn uniformly from all)")
    ap.add_argument("--late", type=float, default=0.1,
                    help="fraction of each batch sequenced inside the history (default: %(default)s)")
    ap.add_argument("--late-window", type=float, default=0.5,
                    help="late events fall in this last fraction of the history (default: %(default)s)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--steps", action="store_true", help="print where each incremental SCD2 run spends its time")
    ap.add_argument("--no-check", action="store_true", help="skip the incremental == recompute check")
    ap.add_argument("--deletion-vectors", action="store_true",
                    help="SCD2 target with deletion vectors (table config deletion_vectors: true); default without")
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_apply_"))
    shutil.rmtree(work, ignore_errors=True)
    spark = local_spark(app_name="bench-apply-changes", extra={"spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    kinds = [1, 2] if args.scd == "both" else [int(args.scd)]
    batch_n = max(1, int(args.changes * args.fraction))
    touched = f"{args.hot_keys:,} hot keys" if args.hot_keys else "keys drawn from all"
    print(f"history: {args.changes:,} changes over {args.keys:,} keys; {args.batches} batches of "
          f"{batch_n:,} ({args.fraction:.1%}, {touched}), {args.late:.0%} of each batch late "
          f"(within the last {args.late_window:.0%} of the history); SCD2 deletion vectors "
          f"{'on' if args.deletion_vectors else 'off'}; workdir {work}")

    for kind in kinds:
        spec = ApplyChangesSpec(keys=["id"], stored_as_scd_type=kind, table=f"bench_scd{kind}")
        merge = merge_scd1 if kind == 1 else functools.partial(merge_scd2, deletion_vectors=args.deletion_vectors)
        compute = scd1 if kind == 1 else scd2
        target = str(work / f"scd{kind}")
        recomputed = str(work / f"scd{kind}_recompute")
        # Every change so far, for the recompute (kept by the benchmark, outside both timings).
        everything = str(work / f"scd{kind}_all_changes")
        history = not_null_sequence(changes(spark, 0, args.changes, args.keys))
        history.write.format("delta").save(everything)
        history = not_null_sequence(spark.read.format("delta").load(everything))
        t_load, _ = timed(lambda: merge(spark, target, history, spec))
        print(f"\nSCD{kind}: initial load of {args.changes:,} changes (recompute + write): {t_load:8.1f} s")
        print(f"{'batch':>5} {'changes':>9} {'incremental s':>14} {'recompute s':>12} {'ratio':>7}")
        seen = args.changes
        for b in range(args.batches):
            late_from = seen - int(seen * args.late_window)
            batch = not_null_sequence(changes(spark, seen, batch_n, args.keys, late_from=late_from, seed=b + 1, late=args.late,
                                              hot_keys=args.hot_keys))
            batch = spark.createDataFrame(batch.collect(), batch.schema)  # the batch arrives in memory
            incremental.STEP_TIMES = [] if args.steps else None
            t_inc, _ = timed(lambda: merge(spark, target, batch, spec))
            steps = incremental.STEP_TIMES or []
            incremental.STEP_TIMES = None
            seen += batch_n
            batch.write.format("delta").mode("append").save(everything)
            log = spark.read.format("delta").load(everything)
            t_full, _ = timed(
                lambda: compute(not_null_sequence(log), spec).write.format("delta").mode("overwrite").save(recomputed)
            )
            print(f"{b + 1:>5} {batch_n:>9,} {t_inc:>14.1f} {t_full:>12.1f} {t_full / t_inc:>6.1f}x")
            if steps:
                rest = t_inc - sum(s for _, s in steps)
                print("      steps: " + ", ".join(f"{n} {s:.1f}" for n, s in steps + [("other", rest)]))
        if not args.no_check:
            a = spark.read.format("delta").load(target)
            r = spark.read.format("delta").load(recomputed)
            diff = a.exceptAll(r).count() + r.exceptAll(a).count()
            print(f"SCD{kind}: incremental table == recompute: {diff == 0} ({a.count():,} rows)")
    spark.stop()


if __name__ == "__main__":
    main()
