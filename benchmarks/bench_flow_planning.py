"""What each flow query of a pipeline costs to resolve and to plan, on Spark Connect as SDP runs it.

A real run is CPU-bound on query planning, not on data (docs/testing.md): SDP resolves every flow
when it builds the graph, again as each flow starts (``DataflowGraph.reanalyzeFlow``, which also
re-resolves every other flow into the same table), and plans each micro-batch or view refresh.
A flow's cost there is its decode plan's. This prints, per flow query of ``CONFIG`` (the queries
``pipeline.py`` declares, built as ``tests/connect_resolution.py`` builds them, reading bronze from a
table of the landed records as the pipeline reads ``bronze_<source>``), the best of
``--repeat`` timings of

* ``resolve``: ``DataFrame.schema``, the server's analysis of the whole unresolved plan;
* ``plan``: ``explain``, analysis + optimisation + physical planning;
* ``depth`` and ``projects``: the analyzed plan's depth and number of projections (the analyzer
  resolves stacked projections about one level per pass, and each pass walks the whole plan);

and the totals per producer. Relative figures in one process; the machine's load moves the rest::

    cd config && ../.venv/bin/python ../benchmarks/bench_flow_planning.py pipeline.yml
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from connect_resolution import connect_session, flow_queries  # noqa: E402

from sqlcdc.config import load_pipeline  # noqa: E402


def best(repeat: int, fn) -> float:
    fn()  # warm: the first resolution of a plan also loads classes and functions
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def shape(query) -> tuple[int, int]:
    """(depth, projections) of the analyzed plan of ``query``, read from its tree string."""
    text = query()._explain_string(extended=True)
    analyzed = text.split("== Analyzed Logical Plan ==")[1].split("== Optimized Logical Plan ==")[0]
    depth = projects = 0
    for line in analyzed.splitlines()[2:]:  # after the output schema line
        m = re.match(r"^([ :|+\-]*)([A-Z][A-Za-z]+)", line)
        if m:
            depth = max(depth, len(m.group(1)) // 3)
            projects += m.group(2) == "Project"
    return depth, projects


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", help="pipeline config (run from its folder if its landings are relative)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    spark = connect_session()
    spark.conf.set("spark.sql.analyzer.maxIterations", "200")
    cfg = load_pipeline(args.config)
    totals: dict[str, list[float]] = {}
    print(f"{'producer':9} {'table':16} {'flow':10} {'resolve s':>9} {'plan s':>7} {'depth':>5} {'projects':>8}")
    for source in cfg.sources.values():
        for table, flow, query in flow_queries(spark, source, cfg.tables_of(source.name), stored=True):
            resolve = best(args.repeat, lambda: query().schema)
            plan = best(args.repeat, lambda: query()._explain_string(extended=False))
            total = totals.setdefault(source.format, [0.0, 0.0])
            total[0] += resolve
            total[1] += plan
            depth, projects = shape(query)
            print(f"{source.format:9} {str(table or '-'):16} {flow:10} {resolve:9.2f} {plan:7.2f} {depth:5d} {projects:8d}",
                  flush=True)
    print()
    for producer, (resolve, plan) in totals.items():
        print(f"{producer:9} {'all flows':16} {'':10} {resolve:9.2f} {plan:7.2f}")
    print(f"{'all':9} {'':16} {'':10} {sum(t[0] for t in totals.values()):9.2f} {sum(t[1] for t in totals.values()):7.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
