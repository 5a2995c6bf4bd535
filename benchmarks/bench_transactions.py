"""Benchmark: what whole-transaction apply (``transactions.whole``) adds to a table's gold apply.

Lands ``--changes`` changes over ``--keys`` keys as ``--producer`` writes them -- Qlik Replicate
(recomputed silver), Debezium with transaction metadata and the transaction topic's BEGIN/END
(``debezium_tx``: streaming silver, the held rows), or plain Debezium (``debezium``: no transaction
topic, so nothing waits; the cost is the scan that finds no BEGIN/END) -- (tests/histories.py's random history:
transactions of 1-3 changes, every one complete), writes bronze and silver once, then times, on the
same Spark session and the same silver, :func:`sqlcdc.gold.after_run.apply_table` with
``transactions.whole`` off and on, alternating, best of ``--repeat``:

1. **initial load**: gold rebuilt from all of silver (``full_refresh``);
2. **steady run**: a second apply with nothing new landed -- the per-run cost of the check when
   there is nothing to apply (the bronze scan for the marks, the join, the summary).

Prints both timings side by side with Spark's floor on the same bronze (read + ``from_json`` of the
landed lines + ``noop`` write) and the on/off ratios, and checks that both modes give the same gold
(every transaction is complete, so nothing may wait). Not a test: it prints figures.

Usage::

    .venv/bin/python benchmarks/bench_transactions.py                   # 20,000 changes
    .venv/bin/python benchmarks/bench_transactions.py --changes 5000 --repeat 1
    .venv/bin/python benchmarks/bench_transactions.py --producer debezium_tx
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the histories generator
import histories as h  # noqa: E402

from sqlcdc.config import Transactions, load_pipeline  # noqa: E402
from sqlcdc.formats import get  # noqa: E402
from sqlcdc.gold import after_run  # noqa: E402
from sqlcdc.runtime import local_spark  # noqa: E402


def _timed(fn):
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--producer", choices=("qlik", "debezium_tx", "debezium"), default="qlik")
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_tx_"))
    shutil.rmtree(work, ignore_errors=True)
    (work / "config" / "tables").mkdir(parents=True)
    (work / "landing").mkdir()
    fmt = "qlik" if args.producer == "qlik" else "debezium"
    (work / "config" / "pipeline.yml").write_text(
        f"name: bench_tx\nsources:\n  q: {{format: {fmt}, landing: {work / 'landing'}}}\n")
    columns = ("" if fmt == "qlik" else "keys: [id]\ncolumns:\n  - {name: id, type: int}\n  - {name: name, type: string}\n"
               "  - {name: qty, type: int}\n  - {name: price, type: 'decimal(10,2)'}\n")
    (work / "config" / "tables" / "hist.yml").write_text("name: hist\nsource: q\ntable: dbo.hist\n" + columns)
    rng = random.Random(args.seed)
    changes = h.history(rng, args.keys, args.changes)
    lines = ([h.QLIK_METADATA] if fmt == "qlik" else []) + h.records(args.producer, changes, rng)
    (work / "landing" / "part-1.jsonl").write_text("\n".join(lines) + "\n")

    spark = local_spark(app_name="bench-transactions", extra={"spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    cfg = load_pipeline(work / "config" / "pipeline.yml")
    [table] = cfg.tables
    decoder = get(fmt)
    tables = after_run.tables_dir(work / "warehouse")
    bronze_path, silver_path = str(tables / table.source.bronze_table), str(tables / table.silver_table)
    decoder.read_bronze(spark, table.source, streaming=False).write.format("delta").save(bronze_path)
    decoded = decoder.decode(spark.read.format("delta").load(bronze_path), table,
                             decoder.columns_for(table, table.source, spark))
    decoded.changes.write.format("delta").save(silver_path)
    n_silver = spark.read.format("delta").load(silver_path).count()
    n_tx = len({c.tx for c in changes})
    print(f"{len(changes):,} {args.producer} changes in {n_tx:,} transactions over {args.keys:,} keys "
          f"({n_silver:,} silver rows); Spark {spark.version}, master {spark.sparkContext.master}; "
          f"best of {args.repeat}; workdir {work}")

    def floor() -> None:
        text = spark.read.text(str(work / "landing"))
        text.select(F.from_json("value", "headers struct<transactionId:string>, transaction struct<id:string>").alias(
            "v")).write.format(
            "noop").mode("overwrite").save()

    best: dict[tuple[str, bool], float] = {}
    golds: dict[bool, set] = {}
    for _ in range(args.repeat):
        t, _ = _timed(floor)
        best[("floor", False)] = min(best.get(("floor", False), t), t)
        for whole in (False, True):
            policy = Transactions(whole=whole)
            t_load, applied = _timed(lambda: after_run.apply_table(
                spark, table, work / "warehouse", full_refresh=True, policy=policy))
            assert applied.changes and not applied.waiting, (applied.changes, applied.waiting)
            t_steady, again = _timed(lambda: after_run.apply_table(spark, table, work / "warehouse", policy=policy))
            assert again.changes == 0, again.changes
            best[("load", whole)] = min(best.get(("load", whole), t_load), t_load)
            best[("steady", whole)] = min(best.get(("steady", whole), t_steady), t_steady)
            golds[whole] = {tuple(r) for r in spark.read.format("delta").load(
                str(tables / table.scd1_table)).collect()}
            print(f"  whole {'on ' if whole else 'off'}: initial load {t_load:6.2f} s, steady run {t_steady:6.2f} s")
    assert golds[False] == golds[True], "gold differs between whole-transaction apply off and on"

    fl = best[("floor", False)]
    print(f"\n  Spark's floor (read + from_json + noop write of the landed lines): {fl:6.2f} s")
    print(f"  {'':14} {'off s':>8} {'on s':>8} {'on/off':>7} {'on/floor':>9}")
    for what, label in (("load", "initial load"), ("steady", "steady run")):
        off, on = best[(what, False)], best[(what, True)]
        print(f"  {label:14} {off:8.2f} {on:8.2f} {on / off:6.2f}x {on / fl:8.1f}x")
    print(f"  added by the check: {best[('load', True)] - best[('load', False)]:+.2f} s on the load, "
          f"{best[('steady', True)] - best[('steady', False)]:+.2f} s per steady run; gold equal in both modes")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
