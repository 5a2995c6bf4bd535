"""Where a real `sqlcdc run` spends its CPU: Java Flight Recorder on the run's Spark.

Runs ``sqlcdc run`` on a config (default: the demo's), attaches JFR (``jcmd <pid> JFR.start``) to the
run's one JVM (``sqlcdc run``'s own Spark, app ``sqlcdc-run``: it hosts the Spark Connect server and
SDP's graph execution, then applies gold) as soon as it appears, dumps the recording every few seconds while the run lasts, and
prints the execution samples grouped by the frames that matter for this project:

- SDP's graph resolution (``DataflowGraph.resolve``), and the part of it run again as each flow
  starts (``DataflowGraph.reanalyzeFlow``);
- Catalyst tree transforms (``TreeNode.mapChildren``: analysis and optimisation of the flows' plans);
- Janino (generated code compiled);
- task execution (``Executor$TaskRunner``: reading and writing the data itself);

then the hottest methods (self time). It also prints the phases of the run from its log (graph
registration, flows, gold). Not a test: it prints figures (docs/testing.md quotes them).

Usage::

    .venv/bin/python benchmarks/profile_run.py                          # the demo pipeline
    .venv/bin/python benchmarks/profile_run.py --config my/pipeline.yml --top 30

Needs the JDK's ``jcmd`` and ``jfr`` on PATH (Java 17).
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlcdc.cli.progress import PROGRESS_LINE

ROOT = Path(__file__).resolve().parents[1]
SQLCDC = str(Path(sys.executable).parent / "sqlcdc")

GROUPS = {
    "SDP graph resolution (DataflowGraph.resolve)": "org.apache.spark.sql.pipelines.graph.DataflowGraph.resolve",
    "  of it: again as each flow starts (reanalyzeFlow)": "org.apache.spark.sql.pipelines.graph.DataflowGraph.reanalyzeFlow",
    "Catalyst tree transforms (TreeNode.mapChildren)": "org.apache.spark.sql.catalyst.trees.TreeNode.mapChildren",
    "Catalyst optimizer (RuleExecutor.execute)": "org.apache.spark.sql.catalyst.rules.RuleExecutor.execute",
    "Janino (generated code compiled)": "org.codehaus.janino.UnitCompiler.compile",
    "task execution (Executor$TaskRunner.run)": "org.apache.spark.executor.Executor$TaskRunner.run",
    "Delta log and commits (org.apache.spark.sql.delta)": "org.apache.spark.sql.delta.",
}


def server_pid(run: subprocess.Popen, timeout: float = 120) -> int | None:
    """The pid of this run's JVM: ``sqlcdc run``'s own Spark (app ``sqlcdc-run``), which serves the
    pipeline over Spark Connect and then applies gold."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and run.poll() is None:
        out = subprocess.run(["pgrep", "-f", "spark.app.name=sqlcdc-run"], capture_output=True, text=True).stdout.split()
        if out:
            return int(out[0])
        time.sleep(0.2)
    return None


def record(config: str, warehouse: Path, jfr_file: Path) -> str:
    """Run the pipeline with JFR on its server; return the run's output (kept in a file beside the
    recording: a pipe nobody reads while the run lasts would stall a run that prints much)."""
    out = jfr_file.with_suffix(".out")
    with out.open("w") as sink:
        run = subprocess.Popen([SQLCDC, "run", "--config", config, "--warehouse", str(warehouse), "--no-summary"],
                               stdout=sink, stderr=subprocess.STDOUT, text=True)
        pid = server_pid(run)
        if pid is None:
            run.kill()
            raise SystemExit("profile_run: the run's JVM (app sqlcdc-run) did not appear")
        subprocess.run(["jcmd", str(pid), "JFR.start", "name=sqlcdc", "settings=profile"], capture_output=True,
                       check=True)
        while run.poll() is None:  # the server ends with the run: keep the latest dump
            subprocess.run(["jcmd", str(pid), "JFR.dump", "name=sqlcdc", f"filename={jfr_file}"], capture_output=True)
            time.sleep(5)
    return out.read_text(errors="replace")


def samples(jfr_file: Path) -> list[list[str]]:
    """Each execution sample's frames (innermost first), as ``package.Class.method``."""
    text = subprocess.run(["jfr", "print", "--stack-depth", "200", "--events", "jdk.ExecutionSample", str(jfr_file)],
                          capture_output=True, text=True, check=True).stdout
    return [re.findall(r"^\s+([\w$.<>]+)\(.*?line:", event, re.M) for event in text.split("jdk.ExecutionSample {")[1:]]


def report(stacks: list[list[str]], top: int) -> None:
    stacks = [s for s in stacks if s]
    n = len(stacks)
    print(f"\n{n} CPU samples of the run's Spark (JFR, ~20 ms apart per busy thread)")
    print(f"{'where (a sample counts once per group that is on its stack)':<62} {'samples':>8} {'share':>6}")
    for label, prefix in GROUPS.items():
        k = sum(1 for s in stacks if any(f.startswith(prefix) for f in s))
        print(f"{label:<62} {k:>8} {k / n:>6.0%}")
    self_time = collections.Counter(s[0] for s in stacks)
    print(f"\nhottest methods (self): top {top}")
    for name, k in self_time.most_common(top):
        print(f"{k:>8} {k / n:>6.0%}  {name}")


def phases(log: Path) -> None:
    """Wall time of the run's phases, from the timestamps SDP writes to the run log."""
    milestone = re.compile(r"(Creating Spark session|Registering graph elements|Starting run|Run is COMPLETED"
                           r"|Flow \S+ is QUEUED)")
    marks: dict[str, str] = {}
    for line in log.read_text(errors="replace").splitlines():
        stamp = PROGRESS_LINE.match(line)  # SDP's own lines, as `sqlcdc run` reads them
        m = stamp and milestone.match(line, stamp.end())
        if m:
            marks.setdefault("QUEUED" if "QUEUED" in m.group(1) else m.group(1), stamp.group(0)[11:19])
    print("\nphases (the run log's timestamps):", ", ".join(f"{k} {v}" for k, v in marks.items()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(ROOT / "config" / "pipeline.yml"))
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    for tool in ("jcmd", "jfr"):
        if not shutil.which(tool):
            raise SystemExit(f"profile_run: `{tool}` (JDK 17) is not on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        wh, jfr_file = Path(tmp) / "warehouse", Path(tmp) / "run.jfr"
        t0 = time.monotonic()
        out = record(args.config, wh, jfr_file)
        print(out[-2500:])
        print(f"run: {time.monotonic() - t0:.0f} s wall")
        phases(wh / "_sqlcdc" / "last-run.log")
        report(samples(jfr_file), args.top)


if __name__ == "__main__":
    main()
