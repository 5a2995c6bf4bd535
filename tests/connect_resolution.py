"""Resolve every flow query of a pipeline config on a Spark Connect session, as ``spark-pipelines``
does, and print one JSON line per query: ``{"source", "table", "flow", "error"}``.

A classic session analyses a DataFrame step by step as it is built; Spark Connect (and so SDP)
receives the whole unresolved plan and resolves it at once, within ``spark.sql.analyzer.maxIterations``
passes of its Resolution batch (Spark's default 100, which Databricks keeps). Each stacked
projection and each lambda level costs passes, so a decoder change can pass every unit test and
still stop a real run ("Max iterations (100) reached for batch Resolution"). Run by
``tests/test_connect_resolution.py`` in a subprocess (a Connect session is a JVM of its own)::

    python tests/connect_resolution.py CONFIG [MAX_ITERATIONS] [WIDE_SOURCES]

Before it resolves a query it wraps the plan as SDP does when it defines a flow
(``WriteRelationFlowDetails``). Python's protobuf (upb) parses a message nested deeper than 100
levels in that copy and refuses it ("Exceeded upb_DecodeOptions_MaxDepth"): the run stops before any
flow starts. Each line therefore also has the plan's ``depth``. The ``dq_metrics`` query, which reads
every table of every source, is checked the same way (its tables need not exist: it is built, not
resolved), also for the config's sources copied up to ``WIDE_SOURCES`` (default 48). So is every
flow of a wide config (:func:`wide_tables`: many tables, columns and rules), whose lines say
``"wide": true``; each line has the plan's size too (Spark Connect takes messages up to 128 MB).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sys
import tempfile
from collections.abc import Sequence
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


def flow_queries(spark, source, tables, *, stored: bool = False, per_table=None):
    """``(table name or None, flow, query function)`` for every flow query ``pipeline.py`` declares for
    ``source``, bronze read as a batch: from the landed files (the deeper plan: the test's limit
    holds for both), or with ``stored`` from a table of them written first, as the pipeline reads its
    ``bronze_<source>`` table. Discovery runs Spark jobs: call before setting a limit. ``per_table``
    (default: all of ``tables``) limits the tables whose own flows are built (``unrouted`` routes all)."""
    from sqlcdc import expectations, formats, transport
    from sqlcdc.pipeline import Bronze, table_queries, unrouted_query  # the flow queries pipeline.py declares

    decoder = formats.get(source.format)
    envelope = expectations.envelope_schema(decoder)
    if stored:
        transport.read_bronze(spark, source, streaming=False).write.mode("overwrite").saveAsTable(source.bronze_table)

    def read():
        return spark.read.table(source.bronze_table) if stored else transport.read_bronze(spark, source, streaming=False)

    bronze = Bronze(decoder, read, envelope)
    queries = [(None, "unrouted", unrouted_query(decoder, source, tables, read))]
    for table in tables if per_table is None else per_table:
        cols = list(decoder.columns_for(table, source, spark))
        queries += [(table.name, flow, query) for flow, query in table_queries(decoder, table, cols, bronze).items()]
    return queries


def message_depth(message) -> int:
    """How deeply ``message`` nests (the message itself is 1), as protobuf counts for its limit."""
    deepest = 0
    for field, value in message.ListFields():
        if field.type == field.TYPE_MESSAGE:
            for item in (value if isinstance(value, Sequence) else [value]):
                if hasattr(item, "ListFields"):  # a map's values may be scalars
                    deepest = max(deepest, message_depth(item))
    return deepest + 1


def sdp_accepts(spark, frame) -> tuple[int | None, int | None, str | None]:
    """The depth and size (bytes) of ``frame``'s plan, and the error SDP's flow definition would meet
    (None if none). A plan too deep may fail while pyspark builds it (its own copies): no figures then."""
    from pyspark.sql.connect.proto import pipelines_pb2

    try:
        relation = frame._plan.plan(spark.client)
        pipelines_pb2.PipelineCommand.DefineFlow.WriteRelationFlowDetails(relation=relation)
        return message_depth(relation), relation.ByteSize(), None
    except Exception as e:  # noqa: BLE001 - reported, the test decides
        return None, None, f"SDP cannot define the flow: {str(e)[:200]}"


WIDE_TYPES = ("string", "int", "bigint", "decimal(18,4)", "timestamp", "date", "boolean", "double", "binary", "smallint")


def wide_tables(cfg, tables: int = 40, columns: int = 60):
    """``cfg`` with ``tables`` more tables per source, each of ``columns`` columns of every type,
    ``bad_values: warn`` (a rule per column) and 30 expectations of each action: what grows a plan
    with the config rather than with the decoder."""
    from sqlcdc.config import with_peers

    cols = ({"name": "id", "type": "int"},) + tuple(
        {"name": f"c{i}", "type": WIDE_TYPES[i % len(WIDE_TYPES)]} for i in range(columns))
    rules = tuple({"name": f"r{a}{i}", "constraint": f"c1 > {i}", "action": a}
                  for a in ("warn", "drop", "quarantine") for i in range(30))
    added = [dataclasses.replace(t, name=f"{t.name}_w{i}", table=f"{t.table}_w{i}", keys=("id",), columns=cols,
                                 bad_values="warn", expectations=rules, expectation_sources=("wide",) * len(rules),
                                 options={**t.options, "path_regex": f"/{t.table}_w{i}/"} if t.source.format == "qlik"
                                 else t.options)
             for s in cfg.sources for t in cfg.tables_of(s)[:1] for i in range(tables)]
    # peers (Qlik: every table's routing checks the others' path_regex) as load_pipeline gives them
    return dataclasses.replace(cfg, tables=tuple(with_peers(list(cfg.tables) + added)))


def widened(cfg, copies: int):
    """``cfg`` with its sources (and their tables) copied until there are ``copies`` sources."""
    from sqlcdc.config import with_peers

    sources, tables = dict(cfg.sources), list(cfg.tables)
    originals = list(cfg.sources.values())
    for i in range(copies - len(originals)):
        src = originals[i % len(originals)]
        copy = dataclasses.replace(src, name=f"{src.name}_{i}")
        sources[copy.name] = copy
        tables += [dataclasses.replace(t, name=f"{t.name}_{i}", source=copy) for t in cfg.tables_of(src.name)]
    return dataclasses.replace(cfg, sources=sources, tables=tuple(with_peers(tables)))


def main() -> None:
    config = sys.argv[1]
    limit = sys.argv[2] if len(sys.argv) > 2 else "100"
    wide = int(sys.argv[3]) if len(sys.argv) > 3 else 48
    spark = connect_session()
    from sqlcdc import dq_metrics, formats, transport
    from sqlcdc.config import load_pipeline
    from sqlcdc.pipeline import source_dropped_query, source_quarantine_query

    def report(**line) -> None:
        print(json.dumps(line), flush=True)

    cfg = load_pipeline(config)
    for source in cfg.sources.values():
        queries = flow_queries(spark, source, cfg.tables_of(source.name))
        spark.conf.set("spark.sql.analyzer.maxIterations", limit)
        for table_name, flow, query in queries:
            frame = query()
            depth, size, error = sdp_accepts(spark, frame)
            if error is None:
                try:
                    frame.schema  # resolves the whole plan on the server
                except Exception as e:  # noqa: BLE001 - reported, the test decides
                    error = str(e).strip().splitlines()[0][:300]
            report(source=source.name, table=table_name, flow=flow, depth=depth, bytes=size, error=error)
        spark.conf.unset("spark.sql.analyzer.maxIterations")
    # A wide config: built and checked as SDP defines flows, not resolved (its tables have no data).
    broad = wide_tables(cfg)
    for source in broad.sources.values():
        tables = broad.tables_of(source.name)
        alike = [t for t in tables if t.name.endswith("_w0")]  # the other wide tables are alike (Qlik's
        # column lookups alone took 30 s for all 41)
        for table_name, flow, query in flow_queries(spark, source, tables, per_table=alike):
            depth, size, error = sdp_accepts(spark, query())
            report(source=source.name, table=table_name, flow=flow, depth=depth, bytes=size, error=error, wide=True)
        decoder = formats.get(source.format)
        if not decoder.streaming:  # a batch source's quarantine and dropped views: every table's part, by name
            stored = lambda s=source: transport.read_bronze(spark, s, streaming=False)  # noqa: E731
            for flow, query in (("source quarantine", source_quarantine_query(decoder, source, tables, stored,
                                                                              read=spark.read.table)),
                                ("source dropped", source_dropped_query(tables, stored, read=spark.read.table))):
                depth, size, error = sdp_accepts(spark, query())
                report(source=source.name, table=None, flow=flow, depth=depth, bytes=size, error=error, wide=True,
                       tables=len(tables))
    for sources in (cfg, widened(cfg, wide)):
        depth, size, error = sdp_accepts(spark, dq_metrics.metrics(sources, spark.read.table))
        report(source=f"{len(sources.sources)} sources", table=None, flow=dq_metrics.TABLE, depth=depth, bytes=size,
               error=error)
    spark.stop()


if __name__ == "__main__":
    main()
