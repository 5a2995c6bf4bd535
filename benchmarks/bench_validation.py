"""Benchmark: bronze -> silver throughput with and without envelope validation, in one process.

Writes ``--events`` Debezium event values (with the Kafka Connect schema, as the JSON converter
sends them by default; ``--bad`` of them invalid: unknown op, truncated JSON, missing source) as
JSON lines, then times, on the same Spark session and the same files:

0. **Spark's floor**: read the text files + ``from_json`` with an explicit schema of the envelope +
   ``noop`` write: what any Spark job on these events pays, the figure the others are compared to;
1. **decode**: read -> Debezium decode -> expectations (``check`` + ``passed``), rows written to the
   ``noop`` sink (Spark computes everything, stores nothing);
2. **validate + decode**: the same, after the envelope check against
   ``schemas/debezium-envelope.schema.json`` compiled into Spark predicates (what ``sqlcdc run`` does);
3. **quarantine of invalid envelopes**: the compiled check plus jsonschema's message for the failing
   rows only (the Arrow UDF);
4. for scale, **jsonschema on every envelope** (the same Arrow UDF on all rows), on a sample.

Each timing is the best of ``--repeat``; the two pipelines alternate so that load from other
processes hits both alike. Prints events/s and the ratios. Not a test: it prints figures.

Usage::

    .venv/bin/python benchmarks/bench_validation.py                     # 200,000 events
    .venv/bin/python benchmarks/bench_validation.py --events 50000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from sqlcdc import expectations
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats import debezium
from sqlcdc.formats.base import read_text_lines
from sqlcdc.runtime import local_spark

SCHEMA = "debezium-envelope.schema.json"
FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "first_name"},
    {"type": "string", "optional": False, "field": "last_name"},
    {"type": "string", "optional": False, "field": "email"},
]
CONNECT_SCHEMA = {
    "type": "struct", "name": "server1.dbo.customers.Envelope", "optional": False,
    "fields": [
        {"type": "struct", "fields": FIELDS, "optional": True, "name": "server1.dbo.customers.Value", "field": "before"},
        {"type": "struct", "fields": FIELDS, "optional": True, "name": "server1.dbo.customers.Value", "field": "after"},
        {"type": "struct", "optional": False, "name": "io.debezium.connector.sqlserver.Source", "field": "source",
         "fields": [{"type": "string", "optional": False, "field": f} for f in
                    ("version", "connector", "name", "db", "schema", "table", "change_lsn", "commit_lsn")]},
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}


_ROW = ", ".join(f"{f['field']} {'int' if f['type'] == 'int32' else 'string'}" for f in FIELDS)
FLOOR_SCHEMA = (f"payload struct<before: struct<{_ROW}>, after: struct<{_ROW}>, op string, ts_ms bigint, "
                "source struct<version string, connector string, name string, ts_ms bigint, snapshot string, db string, "
                "schema string, table string, change_lsn string, commit_lsn string, event_serial_no bigint>>")


def event_line(i: int, bad: bool) -> str:
    lsn = f"{0x30 + i // 65536:08x}:{i % 65536:08x}:{i % 7:04x}"
    row = {"id": i % 50_000, "first_name": f"name{i % 997}", "last_name": f"last{i % 101}", "email": f"u{i}@example.org"}
    op = "cu"[i % 2]
    payload = {
        "before": row if op == "u" else None, "after": row, "op": op, "ts_ms": 1_700_000_000_000 + i,
        "source": {"version": "2.7.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1_700_000_000_000 + i,
                   "snapshot": "false", "db": "testDB", "schema": "dbo", "table": "customers",
                   "change_lsn": lsn, "commit_lsn": lsn, "event_serial_no": 1},
    }
    if bad:
        kind = i % 3
        if kind == 0:
            payload["op"] = "x"
        elif kind == 1:
            payload.pop("source")
        else:
            return json.dumps({"schema": CONNECT_SCHEMA, "payload": payload})[:200]  # truncated
    return json.dumps({"schema": CONNECT_SCHEMA, "payload": payload}, separators=(",", ":"))


def write_events(folder: Path, n: int, bad_every: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    per_file = 50_000
    for f in range(0, n, per_file):
        with (folder / f"part-{f // per_file:04d}.json").open("w") as fh:
            for i in range(f, min(n, f + per_file)):
                fh.write(event_line(i, bad_every > 0 and i % bad_every == bad_every - 1) + "\n")


def timed(label: str, action, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - t0)
    print(f"  {label:<58} {best:7.2f} s", flush=True)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--bad", type=float, default=0.01, help="fraction of invalid envelopes (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--jsonschema-sample", type=int, default=20_000, help="events for the all-rows jsonschema figure")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="sqlcdc-bench-validation-"))
    try:
        landing = tmp / "landing"
        bad_every = int(round(1 / args.bad)) if args.bad > 0 else 0
        write_events(landing, args.events, bad_every)
        mb = sum(p.stat().st_size for p in landing.iterdir()) / 1e6
        n_bad = args.events // bad_every if bad_every else 0
        # Python workers (the jsonschema UDF) need this interpreter (pandas, jsonschema) and this checkout.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        src = str(Path(__file__).resolve().parents[1] / "src")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
        spark = local_spark(app_name="bench-validation")
        source = SourceConfig(name="bench", format="debezium", landing=str(landing))
        table = TableConfig(name="customers", source=source, schema="dbo", table="customers", keys=("id",))
        cols = [debezium.spec_from_config({"name": f["field"], "type": f["type"]}) for f in FIELDS]

        def bronze():
            return read_text_lines(spark, str(landing), streaming=False)

        def silver(validate: bool):
            b = expectations.valid_envelopes(bronze(), debezium.DECODER, SCHEMA) if validate else bronze()
            checked = expectations.check(debezium.decode(b, table, cols).changes, table, cols)
            return expectations.passed(checked, table)

        def floor():
            return spark.read.text(str(landing)).select(F.from_json("value", FLOOR_SCHEMA).alias("e")).select("e.payload.*")

        def run(df) -> None:
            df.write.format("noop").mode("overwrite").save()

        print(f"{args.events:,} Debezium events ({n_bad:,} invalid envelopes), {mb:.0f} MB JSON lines; "
              f"Spark {spark.version}, master {spark.sparkContext.master}; best of {args.repeat}")
        n_silver = silver(True).count()
        n_invalid = expectations.invalid_envelopes(bronze(), debezium.DECODER, SCHEMA, source).count()
        print(f"  check: {n_silver:,} changes to silver, {n_invalid:,} envelopes quarantined "
              f"(+ {args.events - n_silver - n_invalid:,} the decoder quarantines)")
        run(silver(False))  # warm-up (JIT, file listing)
        # Interleaved (without, with, without, with ...), best of each: a busy machine slows both alike.
        plain = valid = floor_s = float("inf")
        for _ in range(args.repeat):
            floor_s = min(floor_s, timed("Spark's floor: read + from_json (explicit schema) + write", lambda: run(floor()), 1))
            plain = min(plain, timed("decode + expectations (no envelope validation)", lambda: run(silver(False)), 1))
            valid = min(valid, timed("envelope validation (compiled schema) + decode + expectations",
                                     lambda: run(silver(True)), 1))
        quarantine = timed("invalid envelopes -> quarantine (jsonschema on failures only)",
                           lambda: run(expectations.invalid_envelopes(bronze(), debezium.DECODER, SCHEMA, source)), args.repeat)
        sample = bronze().limit(args.jsonschema_sample).cache()
        n_sample = sample.count()
        all_js = timed(f"jsonschema on every envelope (Arrow UDF), {n_sample:,} events",
                       lambda: run(sample.select(sc.explain_udf(SCHEMA)(F.col("value")).alias("m"))), args.repeat)
        sample.unpersist()

        eps = lambda n, s: n / s if s else float("nan")  # noqa: E731
        print()
        print(f"  Spark's floor:               {eps(args.events, floor_s):>10,.0f} events/s")
        print(f"  without envelope validation: {eps(args.events, plain):>10,.0f} events/s "
              f"({floor_s / plain:.2f} of the floor's throughput)")
        print(f"  with envelope validation:    {eps(args.events, valid):>10,.0f} events/s "
              f"({floor_s / valid:.2f} of the floor's throughput)")
        print(f"  ratio with/without:          {valid / plain:>10.2f}x the time "
              f"({eps(args.events, valid) / eps(args.events, plain):.2f} of the throughput)")
        print(f"  quarantining the invalid:    {eps(args.events, quarantine):>10,.0f} events/s scanned")
        print(f"  jsonschema on every row:     {eps(n_sample, all_js):>10,.0f} events/s "
              "(validation alone, on cached rows: no read, no decode)")
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
