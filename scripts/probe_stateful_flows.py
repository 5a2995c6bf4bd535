"""Which stateful streaming operators a pipeline flow can apply to a pipeline dataset, here.

Append-only silver for CES (split segments), change tables (``__$operation`` 3 + 4) and Qlik (data
before its metadata) needs state kept across runs in a flow that reads the source's bronze
*streaming table*. This probe asks the installed Spark, in one local JVM serving ``spark-pipelines``
over Spark Connect as ``sqlcdc run`` does, with five runs over the same landing folder:

1. ``A0 A1(final) B0 U0(final)`` at 10:00 -- a complete pair, a half, a single;
2. ``B1(final)`` at 10:20 -- B's other half, one run later;
3. ``D0`` at 12:00 -- moves the event time on (an hour-long wait has passed for A, B and U);
4. ``E0`` at 09:00 -- a record older than the event time already seen (a late record);
5. ``F0`` at 14:00 -- moves the event time past D's and E's hour.

Each candidate is a pipeline of its own (one flow that does not register stops its pipeline):

* ``py_watermark``: ``readStream.table(bronze).withWatermark(...)`` (DataFrame API);
* ``py_apply_in_pandas_with_state``: ``groupBy(...).applyInPandasWithState(...)``;
* ``sql_watermark_join``: ``STREAM(bronze) WATERMARK ts DELAY OF ...`` (SQL) + a stream-stream
  left outer join of the halves within an hour;
* ``sql_watermark_session_window``: the same SQL relation + ``session_window(ts, '1 hour')`` groups;
* ``files_map_in_arrow``: a streaming ``binaryFile`` read of the landing folder through
  ``mapInArrow`` (Python per file, not per row): the shape a streaming change-table bronze would
  take, each export read with its own header or schema;
* ``sql_processing_time_session_window``: ``WATERMARK current_timestamp() AS seen`` (the time the
  flow's micro-batch ran) + ``session_window(seen, '5 seconds')``: shorter than a run, so a
  run's groups close in the next run that brings data.

It prints, per candidate and run, whether the run completed (else the error) and the rows the
flow's table holds. Not a test: a fact-finder to repeat after a Spark upgrade (docs/testing.md,
"Append-only silver: what a flow may keep").

    .venv/bin/python scripts/probe_stateful_flows.py [--keep FOLDER]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = {
    "py_watermark": '''
@dp.table(name="out_py_watermark")
def out():
    return spark.readStream.table("bronze_py_watermark").withWatermark("ts", "0 seconds")
''',
    "py_apply_in_pandas_with_state": '''
from pyspark.sql.streaming.state import GroupStateTimeout
OUT = StructType([StructField("gid", StringType()), StructField("n", IntegerType())])
STATE = StructType([StructField("n", IntegerType())])

def count(key, frames, state):
    import pandas as pd
    n = (state.get[0] if state.exists else 0) + sum(len(f) for f in frames)
    state.update((n,))
    yield pd.DataFrame({"gid": [key[0]], "n": [n]})

@dp.table(name="out_py_apply_in_pandas_with_state")
def out():
    # .to(schema): the client then knows the columns without asking the server (an analysis,
    # which a query function may not do)
    b = spark.readStream.table("bronze_py_apply_in_pandas_with_state").to(BRONZE)
    return b.groupBy("gid").applyInPandasWithState(count, OUT, STATE, "append", GroupStateTimeout.NoTimeout)
''',
    "sql_watermark_join": '''
def halves(idx, p):
    rel = spark.sql("SELECT * FROM STREAM(bronze_sql_watermark_join) WATERMARK ts DELAY OF INTERVAL 0 SECONDS")
    return rel.where(F.col("idx") == idx).select(F.col("gid").alias(p + "g"), F.col("ts").alias(p + "ts"))

@dp.table(name="out_sql_watermark_join")
def out():
    cond = "lg = rg AND rts BETWEEN lts - INTERVAL 1 HOUR AND lts + INTERVAL 1 HOUR"
    return halves(0, "l").join(halves(1, "r"), F.expr(cond), "leftOuter")
''',
    "sql_watermark_session_window": '''
@dp.table(name="out_sql_watermark_session_window")
def out():
    rel = spark.sql("SELECT * FROM STREAM(bronze_sql_watermark_session_window) WATERMARK ts DELAY OF INTERVAL 0 SECONDS")
    return (rel.groupBy(F.session_window("ts", "1 hour").alias("w"), "gid")
            .agg(F.sort_array(F.collect_list("idx")).alias("segments")))
''',
    "sql_processing_time_session_window": '''
@dp.table(name="out_sql_processing_time_session_window")
def out():
    # event time = when this flow's micro-batch ran: never behind what it saw before
    rel = spark.sql("SELECT * FROM STREAM(bronze_sql_processing_time_session_window) "
                    "WATERMARK current_timestamp() AS seen DELAY OF INTERVAL 0 SECONDS")
    return (rel.groupBy(F.session_window("seen", "5 seconds").alias("w"), "gid")
            .agg(F.sort_array(F.collect_list("idx")).alias("segments")).select("gid", "segments"))
''',
    "files_map_in_arrow": '''
BINARY_FILE = StructType([StructField("path", StringType()), StructField("modificationTime", TimestampType()),
                          StructField("length", LongType()), StructField("content", BinaryType())])
OUT = StructType([StructField("file", StringType()), StructField("lines", IntegerType())])

def lines_per_file(batches):
    import os
    import pyarrow as pa
    for b in batches:
        yield pa.RecordBatch.from_pydict({
            "file": [os.path.basename(p) for p in b.column("path").to_pylist()],
            "lines": pa.array([c.count(b"\\n") for c in b.column("content").to_pylist()], pa.int32())})

@dp.table(name="out_files_map_in_arrow")
def out():
    # a streaming bronze made file by file in Python (change-table exports: each file its own schema)
    files = spark.readStream.format("binaryFile").schema(BINARY_FILE).load(LANDING).to(BINARY_FILE)
    return files.mapInArrow(lines_per_file, OUT)
''',
}

HEADER = '''
from pyspark import pipelines as dp
from pyspark.sql import SparkSession, functions as F
from pyspark.sql.types import (BinaryType, BooleanType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

spark = SparkSession.active()
LANDING = {landing!r}
BRONZE = StructType([StructField("gid", StringType()), StructField("idx", IntegerType()),
                     StructField("final", BooleanType()), StructField("ts", TimestampType())])

@dp.table(name="bronze_{name}")
def bronze():
    return spark.readStream.schema(BRONZE).json(LANDING)
'''

LANDINGS = [
    ("run 1: A0 A1 B0 U0 at 10:00", [("A", 0, False, "10:00:00"), ("A", 1, True, "10:00:01"),
                                     ("B", 0, False, "10:00:02"), ("U", 0, True, "10:00:03")]),
    ("run 2: B1 at 10:20", [("B", 1, True, "10:20:00")]),
    ("run 3: D0 at 12:00", [("D", 0, False, "12:00:00")]),
    ("run 4: E0 at 09:00, older than what landed before", [("E", 0, False, "09:00:00")]),
    ("run 5: F0 at 14:00", [("F", 0, False, "14:00:00")]),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", help="work in this folder and keep it (default: a temporary one)")
    ap.add_argument("--only", help="comma-separated candidates (default: all)")
    args = ap.parse_args(argv)
    root = Path(args.keep or tempfile.mkdtemp(prefix="sqlcdc-probe-")).resolve()
    shutil.rmtree(root, ignore_errors=True)
    landing = root / "landing"
    landing.mkdir(parents=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from sqlcdc import runtime
    from sqlcdc.cli.run import _SERVER_CONF, _connect_service  # the Connect server `sqlcdc run` starts

    spark = runtime.local_spark(root / "warehouse", app_name="sqlcdc-probe", extra=_SERVER_CONF)
    spark.sparkContext.setLogLevel("OFF")  # the server logs each client's closed session as an ERROR
    service = _connect_service(spark)
    service.start(spark._jsc.sc())
    remote = f"sc://127.0.0.1:{service.localPort()}"
    cli = Path(sys.executable).with_name("spark-pipelines")
    failed: set[str] = set(CANDIDATES) - set(args.only.split(",")) if args.only else set()
    for n, (label, rows) in enumerate(LANDINGS, 1):
        (landing / f"f{n}.json").write_text("".join(
            json.dumps({"gid": g, "idx": i, "final": f, "ts": f"2026-01-01T{t}"}) + "\n" for g, i, f, t in rows))
        print(f"== {label}", flush=True)
        for name, body in CANDIDATES.items():
            if name in failed:
                continue
            folder = root / name
            folder.mkdir(exist_ok=True)
            (folder / "defs.py").write_text(HEADER.format(name=name, landing=str(landing)) + body)
            (folder / "spec.yml").write_text(
                f"name: probe_{name}\nstorage: file://{folder}/_storage\nlibraries:\n- glob:\n    include: defs.py\n")
            p = subprocess.run([str(cli), "run", "--spec", str(folder / "spec.yml"), "--remote", remote],
                               capture_output=True, text=True, cwd=folder)
            if p.returncode:
                error = [line for line in (p.stdout + p.stderr).splitlines() if "Exception:" in line]
                print(f"  {name:32} FAILED: {(error or ['exit ' + str(p.returncode)])[-1][:220]}", flush=True)
                failed.add(name)
                continue
            out = sorted(str(r.asDict(recursive=True)) for r in spark.read.table(f"out_{name}").collect())
            print(f"  {name:32} completed; rows: {out}", flush=True)
    spark.stop()
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
