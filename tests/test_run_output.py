"""What `sqlcdc run` prints while it runs (one line per flow: time, rows read and written) and what
it leaves in the warehouse's run log (each run's start, exit code and balances)."""

from __future__ import annotations

import datetime as dt
import json
import sys

from sqlcdc import run_log
from sqlcdc.cli.progress import RunProgress
from sqlcdc.summary import Balance


def test_run_prints_one_line_per_flow_when_it_ends():
    from sqlcdc.cli.progress import RunProgress

    lines = """\
2026-11-24 11:33:31: Loading pipeline spec from /w/_sqlcdc/spark-pipeline.yml...
2026-11-24 11:33:42: Found 1 files matching glob '../pipelines/bronze.py'
2026-11-24 11:33:42: Importing /w/pipelines/bronze.py...
2026-11-24 11:33:46: Starting run...
2026-11-24 11:33:55: Flow spark_catalog.default.bronze_erp is QUEUED.
2026-11-24 11:33:55: Flow spark_catalog.default.silver_orders is QUEUED.
2026-11-24 11:33:58: Flow spark_catalog.default.bronze_erp is STARTING.
2026-11-24 11:33:59: Flow spark_catalog.default.bronze_erp is RUNNING.
2026-11-24 11:34:02: Flow spark_catalog.default.bronze_erp has COMPLETED.
2026-11-24 11:34:03: Flow spark_catalog.default.silver_orders is STARTING.
2026-11-24 11:34:13: Flow spark_catalog.default.silver_orders has FAILED. NUMERIC_VALUE_OUT_OF_RANGE
2026-11-24 11:34:14: Run has FAILED.
""".splitlines()
    progress = RunProgress()
    shown = [s for line in lines for s in progress.feed(line)]
    assert shown == [
        "Loading pipeline spec from /w/_sqlcdc/spark-pipeline.yml...",
        "Starting run...",
        "flow bronze_erp                     completed   4s",
        "flow silver_orders                  failed      10s  NUMERIC_VALUE_OUT_OF_RANGE",
        "Run has FAILED.",
    ]


def _commit(table_dir, version: int, **info) -> None:
    log = table_dir / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n" + json.dumps({"add": {}}) + "\n")


def _progress_event(name: str, query: str, rows: int) -> list[str]:
    """Spark's progress event as the run's log4j settings print it (a JSON block over many lines)."""
    body = json.dumps({"id": query, "runId": "r", "name": f"spark_catalog.default.{name}", "numInputRows": rows,
                       "sources": [{"numInputRows": rows}], "sink": {"numOutputRows": -1}}, indent=2)
    return ["18:29:50 INFO ProgressReporter: Streaming query made progress: {"] + body.splitlines()[1:]


def test_flow_lines_say_rows_read_and_written(tmp_path):
    """Two streaming flows append to one quarantine table (told apart by their query ids), a
    materialized view is recomputed, a streaming flow gets nothing new; commits older than the
    run do not count."""
    since = 1_795_545_000.0
    ms = int(since * 1000)
    tables = tmp_path / "tables"
    _commit(tables / "quarantine_inventory", 0, timestamp=ms - 60_000, operation="CREATE TABLE")
    _commit(tables / "quarantine_inventory", 1, timestamp=ms - 50_000, operation="STREAMING UPDATE",
            operationParameters={"queryId": "q-env"}, operationMetrics={"numOutputRows": "7"})  # an earlier run
    _commit(tables / "quarantine_inventory", 2, timestamp=ms + 9_000, operation="STREAMING UPDATE",
            operationParameters={"queryId": "q-env"}, operationMetrics={"numOutputRows": "2"})
    _commit(tables / "quarantine_inventory", 3, timestamp=ms + 9_500, operation="STREAMING UPDATE",
            operationParameters={"queryId": "q-unr"}, operationMetrics={"numOutputRows": "1"})
    _commit(tables / "silver_orders", 1, timestamp=ms + 12_000, operation="WRITE",
            operationMetrics={"numOutputRows": "14"})
    _commit(tables / "silver_customers", 0, timestamp=ms - 60_000, operation="CREATE TABLE")
    lines = [
        "2026-11-24 18:29:40: Flow spark_catalog.default.envelope_inventory is STARTING.",
        "2026-11-24 18:29:41: Flow spark_catalog.default.unrouted_inventory is STARTING.",
        *_progress_event("envelope_inventory", "q-env", 16),
        *_progress_event("unrouted_inventory", "q-unr", 32),
        "2026-11-24 18:29:52: Flow spark_catalog.default.envelope_inventory has COMPLETED.",
        "2026-11-24 18:29:53: Flow spark_catalog.default.unrouted_inventory has COMPLETED.",
        "2026-11-24 18:29:54: Flow spark_catalog.default.silver_orders is PLANNING.",
        "2026-11-24 18:29:55: Flow spark_catalog.default.silver_orders is RUNNING.",
        "2026-11-24 18:30:05: Flow spark_catalog.default.silver_orders has COMPLETED.",
        "2026-11-24 18:30:05: Flow spark_catalog.default.silver_customers is STARTING.",
        "2026-11-24 18:30:08: Flow spark_catalog.default.silver_customers has COMPLETED.",
    ]
    progress = RunProgress(tables=tables, since=since)
    assert [s for line in lines for s in progress.feed(line)] == [
        "flow envelope_inventory             completed   12s  read 16, wrote 2",
        "flow unrouted_inventory             completed   12s  read 32, wrote 1",
        "flow silver_orders                  completed   11s  wrote 14 (recomputed)",
        "flow silver_customers               completed   3s  no new rows",
    ]


def test_the_run_log_keeps_each_runs_start_exit_and_balances(tmp_path):
    wh = tmp_path / "wh"
    first = run_log.start(wh)
    run_log.finish(wh, first, 3, [Balance("erp", landed=5, in_silver=3, quarantined=1, skipped=0)])
    second = run_log.start(wh)
    with run_log.path(wh).open("a") as fh:
        fh.write('{"run": "2026-11-2')  # a line cut short by a killed run
    runs = run_log.runs(run_log.path(wh))
    assert [r["run"] for r in runs] == [t.isoformat(timespec="microseconds") for t in (first, second)]
    assert runs[0]["exit"] == 3 and "exit" not in runs[1]  # the second never finished
    (b,) = runs[0]["balances"]
    assert (b["source"], b["landed"], b["in_silver"], b["quarantined"], b["ok"]) == ("erp", 5, 3, 1, False)
    assert run_log.starts(run_log.path(wh)) == [first, second]
    assert all(t.tzinfo == dt.timezone.utc for t in run_log.starts(run_log.path(wh)))
    assert run_log.starts(tmp_path / "none.jsonl") == []


def test_a_failed_run_shows_each_config_problem_not_just_the_count(tmp_path, capsys):
    """spark-pipelines prints a ConfigError as a header line and one `  - ` line per problem: the
    failure summary carries the problems (file, field and what to do), not only their count."""
    from sqlcdc.cli.run import _run

    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\n"
        "print('Traceback (most recent call last):')\n"
        "print('  File \"x.py\", line 1')\n"
        "print('sqlcdc.config.ConfigError: 2 config problem(s):')\n"
        "print('  - tables/customers.yml:1: columns: add `columns:` to the table config')\n"
        "print('  - tables/orders.yml:3: keys: required')\n"
        "print('  at org.apache.spark.Something')\n"
        "sys.exit(1)\n")
    (tmp_path / "state").mkdir()
    spec = tmp_path / "state" / "spark-pipeline.yml"
    spec.write_text("")
    code = _run([sys.executable, str(script)], None, spec, tmp_path / "log.txt", False, quiet=True)
    err = capsys.readouterr().err
    assert code == 1
    assert ("  sqlcdc.config.ConfigError: 2 config problem(s):\n"
            "    - tables/customers.yml:1: columns: add `columns:` to the table config\n"
            "    - tables/orders.yml:3: keys: required\n") in err
    assert "org.apache.spark.Something" not in err


def test_each_run_gets_spark_connect_on_a_port_of_its_own(tmp_path, monkeypatch):
    """pyspark 4.2's local mode connects to the fixed port 15002, so two local runs collided there.
    `sqlcdc run` picks a free port, writes it into the run's Spark settings (bound to 127.0.0.1)
    and the launcher points pyspark's client at it."""
    import runpy

    from pyspark.sql.connect.client.core import DefaultChannelBuilder

    from sqlcdc.cli import run as run_cmd
    from sqlcdc.cli import sdp_launcher
    from sqlcdc.config import load_pipeline

    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: debezium\n    landing: in\n")
    port = run_cmd._free_port()
    assert port != 15002 and 1024 < port < 65536
    spec, env = run_cmd.prepare(load_pipeline(tmp_path / "pipeline.yml"), tmp_path / "wh", connect_port=port)
    conf = (tmp_path / "wh" / "_sqlcdc" / "conf-pipeline" / "spark-defaults.conf").read_text().splitlines()
    assert f"spark.connect.grpc.binding.port {port}" in conf
    assert "spark.connect.grpc.binding.address 127.0.0.1" in conf
    assert env[sdp_launcher.PORT_ENV] == str(port) and env["SPARK_CONF_DIR"].endswith("conf-pipeline")
    # sqlcdc's own sessions (gold, the dashboard) start no Connect server: no port in their settings
    assert "spark.connect" not in (tmp_path / "wh" / "_sqlcdc" / "conf" / "spark-defaults.conf").read_text()
    spark_class, main_class, launcher = run_cmd._sdp_command()
    assert main_class == "org.apache.spark.deploy.SparkPipelines"
    assert (spark_class.endswith("/bin/spark-class") and launcher == sdp_launcher.__file__
            and all(__import__("os").path.isfile(p) for p in (spark_class, launcher)))

    ran = []
    monkeypatch.setattr(DefaultChannelBuilder, "default_port", DefaultChannelBuilder.default_port)
    monkeypatch.setattr(runpy, "run_module", lambda name, **kw: ran.append((name, DefaultChannelBuilder.default_port())))
    monkeypatch.setenv(sdp_launcher.PORT_ENV, str(port))
    sdp_launcher.main()
    assert ran == [("pyspark.pipelines.cli", port)]  # pyspark's own CLI, its client on the run's port


def test_runs_on_one_warehouse_queue_runs_on_two_do_not(tmp_path):
    """Two runs on one warehouse would write the same tables and checkpoints: the second waits on
    the warehouse's lock (and says so). Another warehouse's lock is free meanwhile."""
    import subprocess

    from sqlcdc.cli.run import _warehouse_lock

    probe = ("import fcntl, sys\n"
             "fh = open(sys.argv[1], 'a')\n"
             "try:\n    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
             "except BlockingIOError:\n    print('held')\n")

    def state(wh):
        path = wh / "_sqlcdc" / "run.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        return subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True).stdout.strip()

    one, two = tmp_path / "one", tmp_path / "two"
    with _warehouse_lock(one, quiet=True):
        assert (state(one), state(two)) == ("held", "free")
    assert state(one) == "free"  # released when the run ends
