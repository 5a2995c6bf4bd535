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
2026-11-24 11:33:55: Flow 'spark_catalog.default.silver_customers' is EXCLUDED.
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


def _progress_event(name: str, query: str, rows: int, reads: int = 1) -> list[str]:
    """Spark's progress event as the run's log4j settings print it (a JSON block over many lines);
    ``reads``: how many times the query reads its input (one source each)."""
    body = json.dumps({"id": query, "runId": "r", "name": f"spark_catalog.default.{name}", "numInputRows": rows * reads,
                       "sources": [{"numInputRows": rows}] * reads, "sink": {"numOutputRows": -1}}, indent=2)
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
        *_progress_event("unrouted_inventory", "q-unr", 32, reads=3),  # records, files, envelopes
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


def _client_run(tmp_path, script, log, **kwargs) -> int:
    """``cli.run._run`` of ``script`` (Python) as the run's ``spark-pipelines`` client, its spec in
    ``tmp_path/state``, its full log in ``log``."""
    from sqlcdc.cli.run import _run

    (tmp_path / "state").mkdir()
    spec = tmp_path / "state" / "spark-pipeline.yml"
    spec.write_text("")
    return _run([sys.executable, str(script)], None, spec, log, False, **kwargs)


def test_a_failed_run_shows_each_config_problem_not_just_the_count(tmp_path, capsys):
    """spark-pipelines prints a ConfigError as a header line and one `  - ` line per problem: the
    failure summary carries the problems (file, field and what to do), not only their count."""
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
    code = _client_run(tmp_path, script, tmp_path / "log.txt", quiet=True)
    err = capsys.readouterr().err
    assert code == 1
    assert ("  sqlcdc.config.ConfigError: 2 config problem(s):\n"
            "    - tables/customers.yml:1: columns: add `columns:` to the table config\n"
            "    - tables/orders.yml:3: keys: required\n") in err
    assert "org.apache.spark.Something" not in err


def test_flow_lines_take_the_rows_read_from_the_servers_log(tmp_path, capsys):
    """`sqlcdc run`'s Spark serves the pipeline: each flow's progress is in that JVM's log file,
    not in the client's output. `_run` reads on from where the file ended (an earlier run's event
    and a line still being written are not taken) and the full log holds both sides."""
    spark_log = tmp_path / "spark.log"
    spark_log.write_text("\n".join(_progress_event("bronze_old", "q-old", 99)) + "\n")  # before this run
    script = tmp_path / "client.py"
    event = "\n".join(_progress_event("bronze_erp", "q-erp", 21)) + "\n"
    script.write_text(
        "import pathlib, sys\n"
        "print('2026-11-24 18:29:40: Flow spark_catalog.default.bronze_erp is STARTING.', flush=True)\n"
        f"with pathlib.Path({str(spark_log)!r}).open('a') as log:\n"
        f"    log.write({event!r})\n"
        "    log.write('18:29:51 WARN Half: a line still being')\n"
        "print('2026-11-24 18:29:52: Flow spark_catalog.default.bronze_erp has COMPLETED.', flush=True)\n")
    full = tmp_path / "last-run.log"
    assert _client_run(tmp_path, script, full, quiet=False, spark_log=spark_log) == 0
    out = capsys.readouterr().out
    assert "  flow bronze_erp                     completed   12s  read 21, wrote 0\n" in out
    kept = full.read_text()
    assert '"id": "q-erp"' in kept and "q-old" not in kept and "Half" not in kept
    assert kept.index("Streaming query made progress") < kept.index("bronze_erp has COMPLETED")


def test_conf_settings_reach_the_runs_spark_defaults_and_a_malformed_one_is_named(tmp_path):
    """`sqlcdc run --conf KEY=VALUE`: over sqlcdc's defaults in the spark-defaults.conf of the run's
    JVM (and of other sessions on the warehouse); a pair without `=` or key is a config error naming it."""
    import pytest

    from sqlcdc.cli.run import prepare, spark_settings
    from sqlcdc.config import ConfigError, load_pipeline

    settings = spark_settings(["spark.sql.shuffle.partitions=1", "spark.executor.extraJavaOptions=-Da=b -Dc=d"])
    assert settings == {"spark.sql.shuffle.partitions": "1", "spark.executor.extraJavaOptions": "-Da=b -Dc=d"}
    prepare(load_pipeline("config/pipeline.yml"), tmp_path, settings)
    for conf in ("conf", "conf-run"):
        lines = (tmp_path / "_sqlcdc" / conf / "spark-defaults.conf").read_text().splitlines()
        assert "spark.sql.shuffle.partitions 1" in lines and "spark.sql.shuffle.partitions 4" not in lines
        assert "spark.executor.extraJavaOptions -Da=b -Dc=d" in lines
    with pytest.raises(ConfigError) as e:
        spark_settings(["spark.ui.enabled=true", "spark.driver.memory", "=8g"])
    assert [str(x) for x in e.value.problems] == [
        "--conf 'spark.driver.memory': expected KEY=VALUE (a Spark setting, e.g. spark.driver.memory=8g)",
        "--conf '=8g': expected KEY=VALUE (a Spark setting, e.g. spark.driver.memory=8g)",
    ]


def test_a_run_answers_its_definitions_in_its_own_spark_while_they_wait(spark, tmp_path, capsys):
    """`sqlcdc run`'s side (cli.run._run): the client's request line is answered through the named
    pipe, the changed table is dropped in the run's Spark, and the client goes on with the answer."""
    spark.sql("DROP TABLE IF EXISTS silver_rs_late")
    spark.sql("CREATE TABLE silver_rs_late (op STRING, after STRUCT<ID: INT>) USING delta")
    client = tmp_path / "client.py"
    client.write_text(
        "from sqlcdc import reshape\n"
        "got = reshape.ask_run([reshape.Check('dbo.late', 'silver_rs_late', ('silver_rs_late',),"
        " (('ID', 'int'), ('TIER', 'string')))])\n"
        "print('client got', got, flush=True)\n")
    log = tmp_path / "last-run.log"
    assert _client_run(tmp_path, client, log, quiet=False, spark=spark) == 0
    assert "sqlcdc run: the columns of dbo.late changed (added TIER): rebuilding silver_rs_late\n" in capsys.readouterr().out
    assert "client got ['dbo.late']" in log.read_text()
    assert not spark.catalog.tableExists("silver_rs_late")
    assert not (tmp_path / "state" / "reshape-answer.fifo").exists()


def _stub_run(monkeypatch, tmp_path, codes: list[int], lines: str):
    """`sqlcdc run`'s loop with the pipeline and gold stubbed (no Spark): each pipeline call takes
    the next exit code of ``codes``; stdin is a pipe holding ``lines``. Returns (calls, stops)."""
    import os

    from sqlcdc import runtime
    from sqlcdc.cli import run as run_cmd

    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: debezium\n    landing: in\n")
    calls, stops = [], []

    def pipeline(cfg, wh, engine, spec, env, *, full_refresh=False, quiet=False, serve_on=False):
        calls.append((full_refresh, serve_on))
        return codes[len(calls) - 1]

    monkeypatch.setattr(run_cmd, "run_pipeline", pipeline)
    monkeypatch.setattr(run_cmd.gold, "apply_all", lambda *a, **k: None)
    monkeypatch.setattr(run_cmd, "_engine", lambda wh, settings=None: type(
        "E", (), {"spark": None, "stop": lambda self: stops.append(wh)})())
    monkeypatch.setattr(runtime, "fetch_jars", lambda **k: [])
    read, write = os.pipe()
    os.write(write, lines.encode())
    os.close(write)
    monkeypatch.setattr(sys, "stdin", os.fdopen(read))
    return calls, stops


def test_every_runs_again_in_the_same_spark_on_enter_and_stops_after_runs(monkeypatch, tmp_path, capsys):
    """`sqlcdc run --every S --runs N`: N runs in one engine (started and stopped once), each next
    one on a line of stdin (Enter) long before S; `--full-refresh` is the first run's only; every
    run but the last keeps the Spark Connect server serving; each run is in the run log."""
    from sqlcdc.cli import main as cli_main

    calls, stops = _stub_run(monkeypatch, tmp_path, [0, 0, 0], "\n\n")
    wh = tmp_path / "wh"
    assert cli_main(["run", "--config", str(tmp_path / "pipeline.yml"), "--warehouse", str(wh), "--no-summary",
                     "--every", "3600", "--runs", "3", "--full-refresh"]) == 0
    assert calls == [(True, True), (False, True), (False, False)]
    assert stops == [wh.resolve()]
    out = capsys.readouterr().out
    assert out.count("sqlcdc run: pipeline 'p' finished in") == 3
    assert "sqlcdc run: run 1 exited 0\nsqlcdc run: next run (run 2) in 3600s; Enter starts it now, Ctrl-C stops\n" in out
    assert "sqlcdc run: run 3 exited 0\n" in out and "next run (run 4)" not in out
    assert [r["exit"] for r in run_log.runs(run_log.path(wh))] == [0, 0, 0]


def test_every_stops_at_the_first_run_that_fails_with_its_code(monkeypatch, tmp_path, capsys):
    from sqlcdc.cli import main as cli_main

    calls, stops = _stub_run(monkeypatch, tmp_path, [0, 137, 0], "\n\n")
    wh = tmp_path / "wh"
    assert cli_main(["run", "--config", str(tmp_path / "pipeline.yml"), "--warehouse", str(wh), "--no-summary",
                     "--every", "3600"]) == 1
    assert len(calls) == 2 and stops == [wh.resolve()]
    captured = capsys.readouterr()
    assert "sqlcdc run: run 2 exited 1\n" in captured.out and "next run (run 3)" not in captured.out
    assert "spark-pipelines exit code 137" in captured.err
    assert [r["exit"] for r in run_log.runs(run_log.path(wh))] == [0, 1]


def test_every_and_runs_are_checked_before_spark_starts(monkeypatch, tmp_path, capsys):
    import pytest

    from sqlcdc.cli import main as cli_main

    calls, stops = _stub_run(monkeypatch, tmp_path, [0], "")
    config = ["run", "--config", str(tmp_path / "pipeline.yml"), "--warehouse", str(tmp_path / "wh")]
    assert cli_main([*config, "--runs", "2"]) == 2
    assert capsys.readouterr().err == "sqlcdc run: --runs needs --every (the time between runs)\n"
    for bad, says in ((["--every", "0"], "argument --every: expected a number of seconds above 0, got '0'"),
                      (["--every", "soon"], "argument --every: expected a number of seconds above 0, got 'soon'"),
                      (["--every", "5", "--runs", "0"], "argument --runs: expected a whole number of runs, 1 or more, got '0'")):
        with pytest.raises(SystemExit) as e:
            cli_main([*config, *bad])
        assert e.value.code == 2 and says in capsys.readouterr().err
    assert calls == [] and stops == []


def test_the_wait_between_runs_ends_on_a_line_and_a_closed_input_leaves_the_timer():
    """`wait_or_enter`: a line on the stream ends an hour's wait at once (checked from another thread,
    joined with a bound, not timed); a stream at its end (nobody to press Enter), or a terminal of
    which this process is not in the foreground, waits out the time."""
    import os
    import threading
    import time

    from sqlcdc.cli.run import wait_or_enter

    read, write = os.pipe()
    result = []
    waiter = threading.Thread(target=lambda: result.append(wait_or_enter(3600, os.fdopen(read))), daemon=True)
    waiter.start()
    os.write(write, b"\n")
    waiter.join(timeout=60)
    assert result == [True] and not waiter.is_alive()
    os.close(write)

    read, write = os.pipe()
    os.close(write)
    t0 = time.monotonic()
    assert wait_or_enter(0.3, os.fdopen(read)) is True
    assert time.monotonic() - t0 >= 0.3  # the end of input did not end the wait

    # a terminal this process is not in the foreground of (a background job's): reading it would stop
    # the process (SIGTTIN), so a line typed there does not end the wait
    import pty

    master, terminal = pty.openpty()
    os.write(master, b"\n")
    t0 = time.monotonic()
    assert wait_or_enter(0.3, os.fdopen(terminal)) is True
    assert time.monotonic() - t0 >= 0.3
    os.close(master)
