"""Benchmark: a whole ``sqlcdc run`` beside the MERGE a data engineer writes by hand, on the same events.

One random Debezium change history (``tests/histories.py``: inserts, updates, key changes, deletes,
in commit order) is landed as JSON files: all but the last ``--increment`` of it first, the rest
later. On this machine, one after the other (never side by side):

- **floor**: ``spark.read.text`` + ``from_json`` (an explicit schema) + a Parquet write: what any
  Spark job on these events pays;
- **hand-written MERGE**: the Delta documentation's recipe -- a streaming read of the files,
  ``foreachBatch``: ``from_json``, the latest event per key in the micro-batch (by commit LSN,
  change LSN, event serial number), one ``MERGE`` into an SCD1 Delta table (delete / update /
  insert). It keeps no per-key order across batches, so an event delivered late or twice by an
  at-least-once transport can undo a newer one; it decodes nothing (Connect decimals stay base64);
- **sqlcdc run**: the whole pipeline as a user runs it (``sqlcdc run``, a subprocess): bronze,
  envelope checks, silver with quarantine and expectations, SCD1 *and* SCD2 gold in commit order.

Then the increment lands and both run again (the MERGE from its checkpoint, ``sqlcdc run``
incrementally), and once more with nothing new landed (what a scheduled run costs when the source
was quiet: no floor to compare with). Prints seconds and the ratios; also how many SCD1 rows differ between the two
(key changes, which the recipe does not follow, make some). Not a test.

Usage::

    .venv/bin/python benchmarks/bench_run_vs_merge.py                     # 100,000 changes, 1% later
    .venv/bin/python benchmarks/bench_run_vs_merge.py --changes 1000000 --keys 20000
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import Window
from pyspark.sql import functions as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import histories  # noqa: E402  (the random histories and their Debezium rendering)

from sqlcdc.runtime import local_spark  # noqa: E402

SQLCDC = str(Path(sys.executable).parent / "sqlcdc")
PER_FILE = 50_000
IMAGE = "struct<id:int,name:string,qty:int,price:string>"
EVENT = (f"struct<before:{IMAGE},after:{IMAGE},op:string,ts_ms:bigint,"
         "source:struct<change_lsn:string,commit_lsn:string,event_serial_no:bigint>>")


def hand_written_merge(spark, landing: Path, target: Path, checkpoint: Path) -> float:
    """The Delta docs' upsert-from-streaming recipe on Debezium events; returns its seconds."""
    from delta.tables import DeltaTable

    if not (target / "_delta_log").exists():
        spark.createDataFrame([], "id int, name string, qty int, price string").write.format("delta").save(str(target))

    def upsert(batch, _batch_id):
        ev = batch.where(F.col("value").startswith("{")).select(F.from_json("value", EVENT).alias("e")).select("e.*")
        ev = ev.withColumn("id", F.coalesce(F.col("after.id"), F.col("before.id")))
        order = Window.partitionBy("id").orderBy(F.desc("source.commit_lsn"), F.desc("source.change_lsn"),
                                                 F.desc("source.event_serial_no"))
        latest = ev.withColumn("rn", F.row_number().over(order)).where("rn = 1").select(
            "id", "op", "after.name", "after.qty", "after.price")
        (DeltaTable.forPath(spark, str(target)).alias("t")
         .merge(latest.alias("s"), "t.id = s.id")
         .whenMatchedDelete("s.op = 'd'")
         .whenMatchedUpdate(set={c: f"s.{c}" for c in ("name", "qty", "price")})
         .whenNotMatchedInsert("s.op != 'd'", values={c: f"s.{c}" for c in ("id", "name", "qty", "price")})
         .execute())

    t0 = time.perf_counter()
    (spark.readStream.format("text").load(str(landing)).writeStream.foreachBatch(upsert)
     .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination())
    return time.perf_counter() - t0


def floor(spark, landing: Path, out: Path) -> float:
    t0 = time.perf_counter()
    (spark.read.text(str(landing)).where(F.col("value").startswith("{"))
     .select(F.from_json("value", EVENT).alias("e")).select("e.*")
     .write.mode("overwrite").parquet(str(out)))
    return time.perf_counter() - t0


def sqlcdc_run(config: Path, warehouse: Path, log: Path) -> tuple[float, str]:
    """Wall seconds of ``sqlcdc run`` and the phases it printed (gold lines)."""
    t0 = time.perf_counter()
    done = subprocess.run([SQLCDC, "run", "--config", str(config), "--warehouse", str(warehouse), "--no-summary"],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"bench_run_vs_merge: sqlcdc run failed (exit {done.returncode}); see {log}")
    gold = "; ".join(re.sub(r"^\s*gold: ", "", line) for line in done.stdout.splitlines() if "gold:" in line)
    return seconds, gold


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=100_000, help="changes in the history")
    ap.add_argument("--keys", type=int, default=2_000, help="distinct keys it touches")
    ap.add_argument("--increment", type=float, default=0.01, help="share of the events landed for run 2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work folder (printed)")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="sqlcdc-bench-run-vs-merge-"))
    try:
        config = histories.write_config(base, {"debezium"})
        source, table, pattern = histories.SOURCES["debezium"]
        landing = base / "landing" / source
        rng = random.Random(args.seed)
        t0 = time.perf_counter()
        lines = histories.records("debezium", histories.history(rng, args.keys, args.changes), rng)
        cut = len(lines) - max(1, int(len(lines) * args.increment))
        parts = {0: lines[:cut], 1: lines[cut:]}

        def land(run: int) -> None:
            part = parts[run]
            for f in range(0, len(part), PER_FILE):
                (landing / pattern.format(r=run, f=f // PER_FILE)).write_text("\n".join(part[f:f + PER_FILE]) + "\n")

        land(0)
        print(f"{len(lines):,} Debezium records ({args.changes:,} changes over {args.keys:,} keys) rendered in "
              f"{time.perf_counter() - t0:.0f} s; run 1 lands {cut:,}, run 2 {len(lines) - cut:,}", flush=True)

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = local_spark(app_name="bench-run-vs-merge")
        spark.sparkContext.setLogLevel("ERROR")
        wh = base / "warehouse"
        merge_target, merge_cp = base / "merge" / "scd1", base / "merge" / "_checkpoint"
        floor(spark, landing, base / "floor-warmup")  # JIT and file listing, for the floor only
        rows = []
        for run, name, n in ((0, "initial", cut), (1, "incremental", len(lines) - cut), (2, "nothing new", 0)):
            if run == 1:
                land(1)
            fl = floor(spark, landing if not run else landing / pattern.format(r=1, f="*"), base / f"floor-{run}") \
                if run < 2 else None
            mg = hand_written_merge(spark, landing, merge_target, merge_cp)
            sq, gold = sqlcdc_run(config, wh, base / f"run-{run}.log")
            rows.append(((name, n), fl, mg, sq, gold))
            print(f"  run {run + 1}: floor {'-' if fl is None else f'{fl:.1f}'} s, hand-written MERGE {mg:.1f} s, "
                  f"sqlcdc run {sq:.1f} s (gold: {gold})", flush=True)

        ours = spark.read.format("delta").load(str(wh / "tables" / f"gold_{table}_scd1")).select("id", "name", "qty")
        theirs = spark.read.format("delta").load(str(merge_target)).select("id", "name", "qty")
        differ = ours.exceptAll(theirs).count() + theirs.exceptAll(ours).count()
        print()
        print(f"  {'run':<12} {'records':>9} {'floor s':>8} {'MERGE s':>8} {'sqlcdc s':>9} {'sqlcdc/MERGE':>13} "
              f"{'sqlcdc/floor':>13}")
        for (name, n), fl, mg, sq, _ in rows:
            fl_s, per_floor = ("-", "-") if fl is None else (f"{fl:.1f}", f"{sq / fl:.1f}")
            print(f"  {name:<12} {n:>9,} {fl_s:>8} {mg:>8.1f} {sq:>9.1f} {sq / mg:>13.1f} {per_floor:>13}")
        print(f"\n  SCD1 rows (id, name, qty) that differ between sqlcdc and the hand-written MERGE: {differ:,}"
              " (the recipe leaves the old key of a key-changing update in place)")
        spark.stop()
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
