"""Resolve every flow query of a pipeline config on a Spark Connect session, as ``spark-pipelines``
does, and print one JSON line per query: ``{"source", "table", "flow", "error"}``.

A classic session analyses a DataFrame step by step as it is built; Spark Connect (and so SDP)
receives the whole unresolved plan and resolves it at once, within ``spark.sql.analyzer.maxIterations``
passes of its Resolution batch (Spark's default 100, which Databricks keeps). Each stacked
projection and each lambda level costs passes, so a decoder change can pass every unit test and
still stop a real run ("Max iterations (100) reached for batch Resolution"). Run by
``tests/test_connect_resolution.py`` in a subprocess (a Connect session is a JVM of its own)::

    python tests/connect_resolution.py CONFIG [MAX_ITERATIONS]
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def connect_session():
    """A Spark Connect session on a Connect server of its own, on a free port: 15002 (the default)
    is `sqlcdc run`'s, and the suite's pipeline runs may hold it meanwhile."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (SparkSession.builder.master("local[2]").config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
     .config("spark.connect.grpc.binding.port", str(port)).config("spark.connect.grpc.binding.address", "127.0.0.1")
     .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
     .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="sqlcdc-connect-"))
     .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    from pyspark.sql.connect.session import SparkSession as ConnectSession  # beside the server's own session

    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # pyspark.sql.functions then builds Connect columns
    return ConnectSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()


def flow_queries(spark, source, tables, *, stored: bool = False):
    """``(table name or None, flow, query function)`` for every flow query ``pipeline.py`` declares for
    ``source``, bronze read as a batch: from the landed files (the deeper plan: the test's limit
    holds for both), or with ``stored`` from a table of them written first, as the pipeline reads its
    ``bronze_<source>`` table. Discovery runs Spark jobs: call before setting a limit."""
    from sqlcdc import expectations, formats, transport
    from sqlcdc.pipeline import table_queries, unrouted_query  # the flow queries pipeline.py declares

    decoder = formats.get(source.format)
    envelope = expectations.envelope_schema(decoder)
    if stored:
        transport.read_bronze(spark, source, streaming=False).write.mode("overwrite").saveAsTable(source.bronze_table)

    def read():
        return spark.read.table(source.bronze_table) if stored else transport.read_bronze(spark, source, streaming=False)

    def bronze():
        landed = read()
        return expectations.valid_envelopes(landed, decoder, envelope) if envelope else landed

    queries = [(None, "unrouted", unrouted_query(decoder, source, tables, read))]
    for table in tables:
        cols = list(decoder.columns_for(table, source, spark))
        queries += [(table.name, flow, query) for flow, query in table_queries(decoder, table, cols, bronze).items()]
    return queries


def main() -> None:
    config, limit = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "100"
    spark = connect_session()
    from sqlcdc.config import load_pipeline

    cfg = load_pipeline(config)
    for source in cfg.sources.values():
        queries = flow_queries(spark, source, cfg.tables_of(source.name))
        spark.conf.set("spark.sql.analyzer.maxIterations", limit)
        for table_name, flow, query in queries:
            try:
                query().schema  # resolves the whole plan on the server
                error = None
            except Exception as e:  # noqa: BLE001 - reported, the test decides
                error = str(e).strip().splitlines()[0][:300]
            print(json.dumps({"source": source.name, "table": table_name, "flow": flow, "error": error}), flush=True)
        spark.conf.unset("spark.sql.analyzer.maxIterations")
    spark.stop()


if __name__ == "__main__":
    main()
