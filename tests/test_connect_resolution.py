"""Every producer's flow queries resolve on Spark Connect within Spark's default analyzer limit.

``spark-pipelines`` (and Databricks) resolve a flow's whole plan at once; a classic session, which
every other unit test uses, never does. This test lands one random history per producer
(``tests/histories.py``) and resolves each flow query in a Connect session
(``tests/connect_resolution.py``, a subprocess) with ``spark.sql.analyzer.maxIterations`` 100. Each
stacked ``select("*", ...)`` costs two passes and each lambda level more; a Qlik silver plan needed
all 100 until 024ae0f (89 since), and twice a change that deepened it stopped real runs after every
unit test had passed. It now fails here, not an hour later in an end-to-end run. The queries are
``sqlcdc.pipeline.table_queries``, the functions the pipeline declares as flows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import histories

PRODUCERS = ("debezium", "cdc_ct", "ces", "qlik")
SCRIPT = Path(__file__).with_name("connect_resolution.py")
PASSES = 100  # the analyzer passes each query may take: Spark's (and Databricks') default limit


def test_every_flow_query_resolves_within_sparks_default_analyzer_limit(tmp_path):
    config, _ = histories.land(tmp_path, list(PRODUCERS), keys=6, changes=20, seed=5)
    done = subprocess.run([sys.executable, str(SCRIPT), str(config), str(PASSES)], capture_output=True, text=True, timeout=900)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, done.stderr[-3000:]
    flows = {(r["source"], r["flow"]) for r in results}
    for producer in PRODUCERS:  # each source's flows were all resolved (4 per source with one table)
        source = histories.SOURCES[producer][0]
        assert {f for s, f in flows if s == source} == {"unrouted", "silver", "quarantine", "dropped"}
    failed = [r for r in results if r["error"]]
    assert not failed, "\n".join(f"{r['source']} {r['table']} {r['flow']}: {r['error']}" for r in failed)
