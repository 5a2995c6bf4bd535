"""Benchmark: bronze -> silver per producer beside Spark's floor, in one process on the same files.

For each producer (Debezium, change tables, CES, Qlik) the script renders one random change history
(``tests/histories.py``: inserts, updates, key changes, deletes, in that producer's format, Qlik after
its metadata message) as landed files, then times on one Spark session:

- **floor**: ``spark.read.text`` + ``from_json`` with an explicit schema (the DDL of a sample record,
  computed once beforehand) + ``noop`` write: what any Spark job on these records pays;
- **silver**: what a run computes for the table's silver -- bronze as the pipeline reads it (batch),
  the producer's envelope validation where sqlcdc runs it outside the decoder (Debezium), the decode
  and the expectations, rows to the ``noop`` sink;
- **quarantine**: the decode's quarantine rows of the same bronze (most are empty: a fair history).

With ``--flows``, per batch producer (change tables, CES, Qlik: silver recomputed each run) also
what a run's table flows cost together, two ways: **each decoding** (silver and quarantine each
decode bronze, as before 2026-11-30) and **decode once** (the records decoded and checked once,
written to Delta as ``decoded_<source>__<table>``, silver and quarantine read from it).

Each timing is the best of ``--repeat`` with the floor and the two frames interleaved, so load from
other processes hits them alike. Prints records/s and the ratio to the floor. Not a test.

Usage::

    .venv/bin/python benchmarks/bench_producers.py                       # 20,000 changes each
    .venv/bin/python benchmarks/bench_producers.py --changes 100000 --only debezium,ces
    .venv/bin/python benchmarks/bench_producers.py --only debezium --debezium-schema  # schemas.enable=true
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import histories  # noqa: E402  (the random histories' renderers, one per producer)

from sqlcdc import expectations, formats, transport  # noqa: E402
from sqlcdc.config import load_pipeline  # noqa: E402
from sqlcdc.pipeline import Bronze  # noqa: E402  (how the pipeline reads and decodes a source)
from sqlcdc.runtime import local_spark  # noqa: E402

PRODUCERS = ("debezium", "cdc_ct", "ces", "qlik")
PER_FILE = 50_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=20_000, help="changes per producer's history")
    ap.add_argument("--keys", type=int, default=2_000, help="distinct keys the history touches")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default=",".join(PRODUCERS))
    ap.add_argument("--flows", action="store_true", help="also time a batch table's flows: each decoding vs decode once")
    ap.add_argument("--debezium-schema", action="store_true",
                    help="Debezium events in the JSON converter's schema envelope (schemas.enable=true, Kafka "
                         "Connect's default), each checked against the table's columns; columns discovered")
    args = ap.parse_args()
    histories.DBZ_SCHEMA["on"] = args.debezium_schema
    producers = [p for p in args.only.split(",") if p]

    base = Path(tempfile.mkdtemp(prefix="sqlcdc-bench-producers-"))
    try:
        _, landed = histories.land(base, producers, keys=args.keys, changes=args.changes, seed=args.seed, per_file=PER_FILE)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
        spark = local_spark(app_name="bench-producers")
        cfg = load_pipeline(str(base / "config" / "pipeline.yml"))
        print(f"Spark {spark.version}, master {spark.sparkContext.master}; best of {args.repeat}; "
              f"histories of {args.changes:,} changes over {args.keys:,} keys")
        rows = []
        for producer in producers:
            source_name, table_name, _ = histories.SOURCES[producer]
            source = cfg.sources[source_name]
            table = next(t for t in cfg.tables if t.name == table_name)
            decoder = formats.get(source.format)
            landing = source.landing
            sample = spark.read.text(landing).where(F.col("value").startswith("{")).orderBy(F.desc("value")).first()
            ddl = spark.range(1).select(F.schema_of_json(F.lit(sample.value))).first()[0]
            cols = list(decoder.columns_for(table, source, spark))
            envelope = expectations.envelope_schema(decoder)

            def floor():
                return spark.read.text(landing).select(F.from_json("value", ddl).alias("r")).select("r.*")

            def decoded():  # as the pipeline decodes a table (pipeline.Bronze: the envelope check, or a decoder's proof)
                return Bronze(decoder, lambda: transport.read_bronze(spark, source, streaming=False), envelope).decode(table, cols)

            def silver():
                return expectations.passed(expectations.check(decoded().changes, table, cols), table)

            def run(df) -> None:
                df.write.format("noop").mode("overwrite").save()

            def each_decoding() -> None:  # silver and the table's quarantine part, each a decode
                run(silver())
                run(expectations.quarantine_of(decoded(), table, cols))

            def decode_once() -> None:  # pipeline.table_queries of a batch table, its decode stored
                stored = str(base / f"decoded_{producer}")
                expectations.checked_rows(decoded(), table, cols).write.format("delta").mode("overwrite").save(stored)
                frame = spark.read.format("delta").load(stored)
                run(expectations.stored_passed(frame, table))
                run(expectations.stored_quarantine(frame, table, decoded().rejected))

            timed = [("floor", floor), ("silver", silver), ("quarantine", lambda: decoded().quarantine)]
            if args.flows and not decoder.streaming:
                timed += [("each decoding", each_decoding), ("decode once", decode_once)]

            n_silver = silver().count()
            run(silver())  # warm-up: JIT, file listing
            best = {name: float("inf") for name, _ in timed}
            for _ in range(args.repeat):
                for name, work in timed:
                    t0 = time.perf_counter()
                    out = work()
                    if out is not None:
                        run(out)
                    best[name] = min(best[name], time.perf_counter() - t0)
            n = landed[producer]
            rows.append((producer, n, n_silver, best))
            print(f"  {producer:<9} {n:>9,} records ({n_silver:,} to silver): floor {best['floor']:6.2f} s, "
                  f"silver {best['silver']:6.2f} s, quarantine {best['quarantine']:6.2f} s", flush=True)
        print()
        print(f"  {'producer':<9} {'records':>9} {'floor rec/s':>12} {'silver rec/s':>13} {'of floor':>9} {'quarantine rec/s':>17}")
        for producer, n, _, best in rows:
            print(f"  {producer:<9} {n:>9,} {n / best['floor']:>12,.0f} {n / best['silver']:>13,.0f} "
                  f"{best['floor'] / best['silver']:>9.2f} {n / best['quarantine']:>17,.0f}")
        flows = [(producer, n, best) for producer, n, _, best in rows if "decode once" in best]
        if flows:
            print()
            print(f"  {'producer':<9} {'records':>9} {'flows, each decoding':>21} {'decode once':>12} {'ratio':>6}")
            for producer, n, best in flows:
                print(f"  {producer:<9} {n:>9,} {best['each decoding']:>19.2f} s {best['decode once']:>10.2f} s "
                      f"{best['each decoding'] / best['decode once']:>6.2f}")
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
