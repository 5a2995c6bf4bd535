"""Every producer's flow queries resolve on Spark Connect within Spark's default analyzer limit.

``spark-pipelines`` (and Databricks) resolve a flow's whole plan at once; a classic session, which
every other unit test uses, never does. This test lands one random history per producer
(``tests/histories.py``) and resolves each flow query in a Connect session
(``tests/connect_resolution.py``, a subprocess) with ``spark.sql.analyzer.maxIterations`` 100. Each
stacked ``select("*", ...)`` costs two passes and each lambda level more; a Qlik silver plan needed
all 100 until 024ae0f (89 since), and twice a change that deepened it stopped real runs after every
unit test had passed. It now fails here, not an hour later in an end-to-end run. The queries are
``sqlcdc.pipeline.table_queries``, the functions the pipeline declares as flows.

The same lines say whether SDP could define each flow at all: it copies the plan message, and
Python's protobuf refuses one nested over 100 levels. ``dq_metrics`` (which reads every table) once
grew a level per table and stopped a nine-source run before any flow ran; it is checked here for the
config and for 48 sources. A wide config (40 more tables a source, 60 columns, 90 rules, bad values
warned) is built the same way: routing folded one ``OR`` per table (a source of ~35 tables could not
run), and the change-table decode wrote its text map into every column's read (a plan growing with
the square of the columns: 12 MB at 20 columns, against Spark Connect's 128 MB message limit). A
batch source's quarantine and dropped views (CES, Qlik, change tables) read each table's part from
a temporary view: as one union of the tables' decodes, a CES source of ~30 tables was too deep to
define and 41 wide change tables over the 128 MB limit (chained, before that, 5 CES tables).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import histories

PRODUCERS = ("debezium", "cdc_ct", "ces", "qlik")
SCRIPT = Path(__file__).with_name("connect_resolution.py")
FLOWS = {p: {"unrouted", "silver", "quarantine", "dropped"} | ({"decoded"} if p != "debezium" else set())
         for p in PRODUCERS}
PASSES = 100  # the analyzer passes each query may take: Spark's (and Databricks') default limit


def test_every_flow_query_resolves_within_sparks_default_analyzer_limit(tmp_path):
    config, _ = histories.land(tmp_path, list(PRODUCERS), keys=6, changes=20, seed=5)
    done = subprocess.run([sys.executable, str(SCRIPT), str(config), str(PASSES)], capture_output=True, text=True, timeout=900)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, done.stderr[-3000:]
    flows = {(r["source"], r["flow"]) for r in results if not r.get("wide")}
    for producer in PRODUCERS:  # each source's flows were all resolved (4 per source with one table; a batch
        # producer's table has a 5th, its records decoded once a run, which the others read)
        source = histories.SOURCES[producer][0]
        assert {f for s, f in flows if s == source} == FLOWS[producer]
    dq = [r for r in results if r["flow"] == "dq_metrics"]
    assert [r["source"] for r in dq] == ["4 sources", "48 sources"]
    failed = [r for r in results if r["error"]]
    assert not failed, "\n".join(f"{r['source']} {r['table']} {r['flow']} (depth {r['depth']}): {r['error']}" for r in failed)
    wide = [r for r in results if r.get("wide") and not r["flow"].startswith("source ")]
    assert {(r["source"], r["flow"]) for r in wide} == {(histories.SOURCES[p][0], f) for p in PRODUCERS for f in FLOWS[p]}
    # a batch source's quarantine and dropped views read each table's part by name (41 tables here):
    # as one union of the tables' decodes, a CES source of ~30 tables was too deep for SDP, and 41
    # change tables of 60 columns over Spark Connect's 128 MB message limit
    whole = {(r["source"], r["flow"]): r for r in results if r["flow"].startswith("source ")}
    assert set(whole) == {(histories.SOURCES[p][0], f) for p in ("cdc_ct", "ces", "qlik")
                          for f in ("source quarantine", "source dropped")}
    assert all(r["tables"] == 41 for r in whole.values()), whole
    deepest = {}  # source -> its deepest flow plan in the narrow config
    for r in results:
        if not r.get("wide") and r["flow"] != "dq_metrics":
            deepest[r["source"]] = max(deepest.get(r["source"], 0), r["depth"] or 0)
    for r in whole.values():  # no deeper than a flow of one table, whatever the number of tables
        assert r["depth"] is not None and r["depth"] <= deepest[r["source"]], r
        assert r["bytes"] < 1 << 20, r
    for r in wide:  # 40 tables and 60 columns more: about as deep, and a few MB at most
        assert r["depth"] is not None and r["depth"] <= deepest[r["source"]] + 4, r
        assert r["bytes"] < 8 << 20, r
    assert dq[1]["depth"] - dq[0]["depth"] <= 8, dq  # grows with log2 of the sources (a balanced union), not per table
