"""``sqlcdc run``: run the pipeline locally with Spark Declarative Pipelines, then print a summary.

Everything the run writes lives under the warehouse folder (default ``warehouse/``)::

    warehouse/
      tables/<table>/       Delta tables: bronze_*, silver_*, quarantine_*, gold_*_scd1, gold_*_scd2
      _storage/             SDP checkpoints (what makes the next run process only new files)
      _metastore/           the embedded Hive metastore that lets tables survive between runs
      _sqlcdc/              the generated spec, spark-defaults.conf, the last run's full log,
                            the run log (runs.jsonl: each run's start, exit code and balances) and
                            the checks of landed compressed files (unreadable/)

A second ``sqlcdc run`` reads only files that landed since the first, and gold merges only the
changes they bring (:mod:`sqlcdc.gold`); ``--full-refresh`` recomputes every table from the
landing folders.

``--every SECONDS`` keeps the command running: each run starts SECONDS after the one before ended
(or at once on Enter), in the same Spark, whose JVM has compiled and loaded what the runs need: a
run there costs about 0.6 of a first one (docs/testing.md). The config is read again before each
run; a run that does not exit 0 ends the command with its code; ``--runs N`` stops after N runs::

    sqlcdc run --every 300              # a run every five minutes until Ctrl-C
    sqlcdc run --every 3600 --runs 2    # a run, then another on Enter (or an hour later)
"""

from __future__ import annotations

import argparse
import os
import re
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import yaml

from sqlcdc import checkpoints, gold, reshape, run_log, runtime
from sqlcdc.assets import PIPELINE_LAYERS, PIPELINES_DIR
from sqlcdc.cli import unchanged
from sqlcdc.cli.progress import PROGRESS_LINE, RunProgress
from sqlcdc.config import ConfigError, PipelineConfig, load_pipeline
from sqlcdc.formats._discovery import CACHE_DIR
from sqlcdc.formats.base import STATE_DIR_ENV

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME = "run"
HELP = "Run the pipeline locally (bronze -> silver -> gold) and print rows per table."



def add_arguments(p) -> None:
    p.add_argument("--config", default="config/pipeline.yml", help="pipeline config file (default: %(default)s)")
    p.add_argument("--warehouse", default="warehouse", help="folder for tables and run state (default: %(default)s)")
    p.add_argument("--full-refresh", action="store_true", help="recompute every table from the landing folders")
    p.add_argument("--no-summary", action="store_true", help="skip the row counts after the run")
    p.add_argument("--quiet", action="store_true", help="print only errors and the summary")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                   help="a Spark setting for this run, over sqlcdc's local defaults (repeatable), "
                        "e.g. --conf spark.driver.memory=8g")
    p.add_argument("--every", type=_seconds, metavar="SECONDS",
                   help="keep running: a new run SECONDS after each one ends, in the same warm Spark (a run "
                        "there costs about 0.6 of a first one); Enter starts the next run at once, Ctrl-C stops")
    p.add_argument("--runs", type=_count, metavar="N", help="with --every: stop after N runs")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def _count(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of runs, 1 or more, got {text!r}")
    return int(text)


def spark_settings(pairs: list[str]) -> dict[str, str]:
    """``--conf`` arguments -> {key: value}; :class:`ConfigError` naming each one without ``=`` or key."""
    conf, problems = {}, []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            problems.append(f"--conf {pair!r}: expected KEY=VALUE (a Spark setting, e.g. spark.driver.memory=8g)")
        else:
            conf[key.strip()] = value
    if problems:
        raise ConfigError(problems)
    return conf


def main(args) -> int:
    if args.runs is not None and args.every is None:
        print("sqlcdc run: --runs needs --every (the time between runs)", file=sys.stderr)
        return 2
    try:
        cfg = load_pipeline(args.config)
        settings = spark_settings(args.conf)
    except ConfigError as e:
        print(f"sqlcdc run: {e}", file=sys.stderr)
        return 2
    warehouse = Path(args.warehouse).resolve()
    try:  # a fresh `pip install sqlcdc` has no Delta on Spark's classpath yet
        runtime.fetch_jars(echo=lambda line: print(f"sqlcdc run: {line} (once)", flush=True))
    except runtime.JarFetchError as e:
        print(f"sqlcdc run: {e}; run `sqlcdc setup` once the network allows", file=sys.stderr)
        return 2
    started = time.monotonic()
    prepared = prepare(cfg, warehouse, settings)  # the settings the engine's JVM reads as it starts
    engine = _engine(warehouse, settings)
    try:
        number = 1
        while True:
            last = args.every is None or number == args.runs
            code = one_run(args, cfg, settings, warehouse, engine, started=started, last=last,
                           full_refresh=args.full_refresh and number == 1, prepared=prepared)
            if args.every is not None:
                print(f"sqlcdc run: run {number} exited {code}", flush=True)
            if code != 0 or last:  # a failed run is for a human to look at
                return code
            prepared = None
            number += 1
            print(f"sqlcdc run: next run (run {number}) in {args.every:g}s; Enter starts it now, Ctrl-C stops",
                  flush=True)
            if not wait_or_enter(args.every, sys.stdin):
                print("sqlcdc run: stopped (Ctrl-C)", flush=True)
                return code
            started = time.monotonic()
            try:  # a config edited between runs applies from the next run (Spark settings stay)
                cfg = load_pipeline(args.config)
            except ConfigError as e:
                print(f"sqlcdc run: {e}", file=sys.stderr)
                return 2
    finally:
        engine.stop()


def one_run(args, cfg: PipelineConfig, settings: Mapping[str, str], warehouse: Path, engine: Engine, *,
            started: float, last: bool = True, full_refresh: bool = False,
            prepared: tuple[Path, dict[str, str]] | None = None) -> int:
    """One run of ``cfg`` in ``engine``: the pipeline, gold, the summary; the run's exit code.
    ``started``: when the run began (the first one's includes starting the engine); ``last``: no run
    follows in this engine, so its Spark Connect server stops once the pipeline ended;
    ``full_refresh``: ``--full-refresh``, which with ``--every`` is the first run's only; ``prepared``:
    what :func:`prepare` wrote for ``cfg`` before the engine started (the first run), else it is written."""
    run_at = run_log.start(warehouse)  # dq_metrics counts every source's records of this run as one run
    spec_path, env = prepared or prepare(cfg, warehouse, settings)
    code = run_pipeline(cfg, warehouse, engine, spec_path, env, full_refresh=full_refresh, quiet=args.quiet,
                        serve_on=not last)
    if code != 0:  # the pipeline failed (its log says why): 1, whatever spark-pipelines exited with
        print(f"sqlcdc run: the pipeline failed (spark-pipelines exit code {code}); full log: "
              f"{warehouse / '_sqlcdc' / 'last-run.log'}", file=sys.stderr)
        run_log.finish(warehouse, run_at, 1)
        return 1
    # Gold after the pipeline, in the same (warm) JVM: each table's new silver changes, merged.
    if not args.quiet:
        print("sqlcdc run: applying new changes to gold", flush=True)
    echo = None if args.quiet else (lambda line: print("  gold: " + line, flush=True))
    try:
        gold.apply_all(engine.spark, cfg, warehouse, full_refresh=full_refresh, echo=echo, run_time=run_at)
    except ConfigError as e:
        print(f"sqlcdc run: gold: {e}", file=sys.stderr)
        run_log.finish(warehouse, run_at, 2)
        return 2
    print(f"sqlcdc run: pipeline {cfg.name!r} finished in {time.monotonic() - started:.0f}s; "
          f"tables under {warehouse / 'tables'}")
    if args.no_summary:
        run_log.finish(warehouse, run_at, 0)
        return 0
    from sqlcdc.summary import print_summary

    found = print_summary(cfg, warehouse, engine.spark)
    code = 0 if all(b.ok for b in found) else 3
    run_log.finish(warehouse, run_at, code, found)
    return code


def wait_or_enter(seconds: float, stream) -> bool:
    """Wait ``seconds``, or less if a line arrives on ``stream`` (a terminal's Enter, a pipe); False on
    Ctrl-C. A stream that is closed, cannot be waited on, or is the terminal of a background job
    leaves the timer alone."""
    deadline = time.monotonic() + seconds
    try:
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is not None and not _ours_to_read(fd):
            fd = None
        while (left := deadline - time.monotonic()) > 0:
            if fd is None:
                time.sleep(left)
                return True
            try:
                ready, _, _ = select.select([fd], [], [], left)
            except (OSError, ValueError):  # not a stream select can wait on (Windows): the timer alone
                fd = None
                continue
            if not ready:
                return True
            char = os.read(fd, 1)  # one line a run: a second Enter is the next wait's
            if not char:  # end of input: nobody will press Enter
                fd = None
            elif char == b"\n":
                return True
        return True
    except KeyboardInterrupt:
        return False


@dataclass(frozen=True)
class Engine:
    """The one Spark of a ``sqlcdc run``, in this process: it serves ``spark-pipelines`` over Spark
    Connect (``remote``), then applies gold and counts rows, already warm. ``log``: its log file,
    which the run reads on from where it ended (:func:`_run`)."""

    spark: SparkSession
    remote: str
    log: Path

    def stop_serving(self) -> None:
        """Stop the Spark Connect server (no client is left once the pipeline ended)."""
        service = _connect_service(self.spark)
        if service.started() and not service.stopped():
            service.stop(getattr(service, "stop$default$1")(), getattr(service, "stop$default$2")())

    def stop(self) -> None:
        self.stop_serving()
        self.spark.stop()


def _engine(warehouse: Path, settings: Mapping[str, str] | None = None) -> Engine:
    """Start the run's Spark (the settings :func:`prepare` wrote) and its Spark Connect server on a
    free local port.

    ``spark-pipelines`` alone would start its own JVM and server, on the fixed port 15002, and gold
    would then need a second JVM, cold: its first tables paid ~30 s of class loading and JIT
    (docs/testing.md). One JVM serves both, and runs on one machine no longer queue for a port."""
    from sqlcdc.runtime import local_spark

    state = warehouse / "_sqlcdc"
    os.environ["SPARK_CONF_DIR"] = str(state / "conf-run")  # read once, when the JVM starts
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers of the pipeline's queries
    os.environ[STATE_DIR_ENV] = str(state)
    spark = local_spark(warehouse, app_name="sqlcdc-run", extra={**(settings or {}), **_SERVER_CONF})
    service = _connect_service(spark)
    service.start(spark._jsc.sc())
    return Engine(spark, f"sc://127.0.0.1:{service.localPort()}", state / "spark.log")


def _connect_service(spark: SparkSession):
    """The JVM's Spark Connect service (the Scala object ``SparkConnectService``)."""
    package = spark._jvm.org.apache.spark.sql.connect.service
    return getattr(getattr(package, "SparkConnectService$"), "MODULE$")


#: The run's Spark Connect server: local clients only, on a port the OS picks.
_SERVER_CONF = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": "0"}


def prepare(
    cfg: PipelineConfig, warehouse: Path, settings: Mapping[str, str] | None = None,
) -> tuple[Path, dict[str, str]]:
    """Write the spec and Spark settings (sqlcdc's, then ``settings``: ``--conf``) for a run into
    ``warehouse/_sqlcdc``; return (spec, env) of ``spark-pipelines``, the client of the run's Spark
    (:func:`_engine`)."""
    state = warehouse / "_sqlcdc"
    state.mkdir(parents=True, exist_ok=True)
    conf = {**runtime.DELTA_CONF, **runtime.SMALL_MACHINE_CONF, **runtime.warehouse_conf(warehouse), **(settings or {})}
    runtime.write_spark_defaults(state / "conf", conf)  # other sessions on the warehouse (dashboard): quiet
    # the run's own JVM: its log in a file, with the streaming progress its flow lines read
    runtime.write_spark_defaults(state / "conf-run", conf, log_file=state / "spark.log")
    rel = os.path.relpath(PIPELINES_DIR, state)
    spec = {
        "name": cfg.name,
        "storage": (warehouse / checkpoints.STORAGE).as_uri(),
        "configuration": {
            "sqlcdc.config": str(Path(cfg.file).resolve()),
            gold.GOLD_CONF: gold.AFTER_RUN,  # gold is applied after the pipeline (sqlcdc.gold), not in it
            run_log.RUNS_CONF: str(run_log.path(warehouse)),  # one run id across sources in dq_metrics
        },
        # SDP resolves library globs relative to the spec's folder and accepts only file paths.
        "libraries": [{"glob": {"include": f"{rel}/{layer}.py"}} for layer in PIPELINE_LAYERS],
    }
    spec_path = state / "spark-pipeline.yml"
    spec_path.write_text("# generated by `sqlcdc run`; edit config/ instead\n" + yaml.safe_dump(spec, sort_keys=False))
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "SPARK_CONF_DIR": str(state / "conf"),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONUNBUFFERED": "1",
        # landed files are checked before Spark reads them; what cannot be read is quarantined as a file
        STATE_DIR_ENV: str(state),
    }
    return spec_path, env


def run_pipeline(
    cfg: PipelineConfig, warehouse: Path, engine: Engine, spec_path: Path, env: dict[str, str], *,
    full_refresh: bool = False, quiet: bool = False, serve_on: bool = False,
) -> int:
    """Run ``spark-pipelines run`` for ``cfg`` against ``engine``; stream its progress lines; keep
    the full log. The engine's Spark Connect server stops once the pipeline ended, unless
    ``serve_on`` (another run follows: ``--every``)."""
    cmd = [str(Path(sys.executable).parent / "spark-pipelines"), "--remote", engine.remote, "run", "--spec", str(spec_path)]
    if full_refresh:
        cmd.append("--full-refresh-all")
        # what discovery found and kept is found again from every landed file (formats._discovery)
        shutil.rmtree(warehouse / "_sqlcdc" / CACHE_DIR, ignore_errors=True)
    earlier = earlier_flow_layout(cfg, warehouse)
    log_path = spec_path.parent / "last-run.log"
    planned = unchanged.plan(cfg, warehouse)
    unchanged.forget(warehouse)  # a run that fails may leave any table half-written: the next refreshes all
    interrupted = checkpoints.clear_interrupted_writes(checkpoints.of_pipeline(warehouse))
    if interrupted:  # else a stream killed while logging its first batch could never start again
        flows = sorted({p.parents[2].name for p in interrupted})
        print(f"sqlcdc run: removed what an interrupted run left half-written in the checkpoints of "
              f"{', '.join(flows)}", flush=True)
    # a streaming silver whose columns changed is dropped with its stream's progress: SDP creates it anew
    rebuilt = reshape.drop_streaming_changed(engine.spark, cfg.tables, checkpoints.of_pipeline(warehouse),
                                             echo=lambda line: print(f"sqlcdc run: {line}", flush=True))
    if planned.refresh is not None and not (full_refresh or earlier):
        print(f"sqlcdc run: nothing new for {', '.join(planned.left_out)} since the last run: their tables are "
              "left as they are", flush=True)
        cmd += ["--refresh", ",".join(sorted({*planned.refresh, *rebuilt}))]  # a dropped table is created again
    if earlier and not full_refresh:
        # A selective refresh runs only the tables it names, so it is a run of its own first.
        names = sorted({d.parent.name for d in earlier})
        print(f"sqlcdc run: {', '.join(names)} written by an earlier sqlcdc (flows since merged): "
              "recomputing from bronze first", flush=True)
        code = _run(cmd + ["--full-refresh", ",".join(names)], env, spec_path, log_path, True, quiet, engine.log, engine.spark)
        if code != 0:
            return code
    for stale in earlier:  # refreshed above, or with everything below: their flows start afresh
        shutil.rmtree(stale, ignore_errors=True)
    code = _run(cmd, env, spec_path, log_path, full_refresh, quiet, engine.log, engine.spark)
    if not serve_on:
        engine.stop_serving()  # no client is left
    if code == 0:
        unchanged.record(warehouse, planned.fingerprints)
    return code


#: Flows into a streaming source's quarantine table that sqlcdc no longer declares: each table's
#: quarantine-rule flow (now part of ``quarantine_<table>``) and the envelope check (now part of
#: ``unrouted_<source>``). The merged flows read bronze once per part, so their checkpoints count
#: more streaming sources than the old ones did, and Spark refuses to resume from those.
_MERGED_FLOW_PREFIXES = ("expectations_", "envelope_")


def earlier_flow_layout(cfg: PipelineConfig, warehouse: Path) -> list[Path]:
    """The SDP checkpoints of flows of the layout before they were merged
    (:data:`_MERGED_FLOW_PREFIXES`), in the quarantine tables of ``cfg``'s sources. ``sqlcdc run``
    first recomputes those tables from bronze (a run refreshing only them), deletes these
    checkpoints, then runs as usual."""
    found = []
    for source in cfg.sources.values():
        for table_dir in checkpoints.of_pipeline(warehouse).glob(f"*/*/{source.quarantine_table}"):
            found += sorted(d for d in table_dir.iterdir() if d.is_dir() and d.name.startswith(_MERGED_FLOW_PREFIXES))
    return found


def _run(cmd, env, spec_path: Path, log_path: Path, full_refresh: bool, quiet: bool, spark_log: Path | None = None,
         spark: SparkSession | None = None) -> int:
    """Run ``cmd`` (``spark-pipelines``), show its progress, keep its output and the lines the
    run's Spark logged meanwhile (``spark_log``: the server's side, with each flow's streaming
    progress) in ``log_path``; answer the definitions' reshape checks in ``spark``, the run's own
    (:func:`sqlcdc.reshape.answer`), through a named pipe; on failure, print the last errors."""
    if not quiet:
        print(f"sqlcdc run: starting the pipeline ({'full refresh' if full_refresh else 'incremental'}); "
              f"full log: {log_path}", flush=True)
    errors: list[str] = []
    listing = False
    started = time.time()
    server = _LogTail(spark_log)
    progress = RunProgress(tables=spec_path.parent.parent / "tables", since=started)

    def take(line: str) -> None:
        nonlocal listing
        log.write(line)
        if spark is not None and line.startswith(reshape.REQUEST):  # the definitions wait for the answer
            reply, said = reshape.answer(spark, line)
            for message in said:
                log.write(f"sqlcdc run: {message}\n")
                print(f"sqlcdc run: {message}", flush=True)
            with open(channel, "w", encoding="utf-8") as fh:  # waits for the definitions to open it
                fh.write(reply)
            return
        for shown in progress.feed(line):
            if not quiet:
                print("  " + shown, flush=True)
        if (not PROGRESS_LINE.match(line) and re.search(r"(Exception|Error)\b.*:", line)
                and not line.startswith((" ", "\t"))):
            errors.append(line.rstrip())
            listing = line.rstrip().endswith("problem(s):")  # a ConfigError: its problems follow
        elif errors and listing and line.startswith("  - "):
            errors[-1] += "\n  " + line.rstrip()
        else:
            listing = False

    channel = spec_path.parent / "reshape-answer.fifo"  # only when there is a Spark to answer in
    channel.unlink(missing_ok=True)
    env = dict(env or os.environ)
    if spark is not None:
        os.mkfifo(channel)
        env[reshape.CHANNEL_ENV] = str(channel)
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=spec_path.parent, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            # The server logs a flow's progress before the client hears that the flow ended.
            for logged in server.new_lines():
                take(logged)
            take(line)
        code = proc.wait()
        channel.unlink(missing_ok=True)
        for logged in server.new_lines():
            take(logged)
        server.close()
    if code != 0:
        print(f"sqlcdc run: the pipeline failed (exit {code}). Last errors:", file=sys.stderr)
        for line in errors[-5:]:
            print("  " + line[:4000], file=sys.stderr)
        print(f"Full log: {log_path}", file=sys.stderr)
    return code


def _ours_to_read(fd: int) -> bool:
    """Whether reading ``fd`` is this process's to do: a pipe or file, or a terminal this process is
    in the foreground of (a background job that reads its terminal is stopped: ``sqlcdc run --every
    300 &`` then waits on the timer alone)."""
    if not os.isatty(fd):
        return True
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False


class _LogTail:
    """The complete lines appended to a log file since this was made (none without a file). The
    file is opened once (the run's JVM created it when it started) and read on from its end."""

    def __init__(self, path: Path | None) -> None:
        self._rest = b""
        self._fh = path.open("rb") if path is not None and path.is_file() else None
        if self._fh is not None:
            self._fh.seek(0, os.SEEK_END)

    def new_lines(self) -> list[str]:
        if self._fh is None:
            return []
        *lines, self._rest = (self._rest + self._fh.read()).split(b"\n")
        return [line.decode("utf-8", errors="replace") + "\n" for line in lines]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
