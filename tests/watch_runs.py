"""Drive ``sqlcdc run --every 86400 --runs N`` run by run, as a user's watch runs them.

The first run starts at once; each later one when :meth:`WatchRuns.run` presses Enter (a pipe on the
command's stdin), in the first run's Spark. Used by ``test_e2e_pipeline.py`` (two runs) and
``histories.py --warm`` (``--runs`` runs)::

    watch = WatchRuns(config, warehouse, runs=2)
    try:
        code, out = watch.run()        # run 1: its exit code and its output
        ...                            # check it, land run 2's files
        code, out = watch.run()        # Enter: run 2
        assert watch.finish()[0] == 0  # the command stops after its last run
    finally:
        watch.stop()                   # kills what is left should a check fail between runs
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

SQLCDC = str(Path(sys.executable).parent / "sqlcdc")


class WatchRuns:
    def __init__(self, config: Path, warehouse: Path, runs: int, *args: str, timeout: float = 3600) -> None:
        """``args``: more arguments of ``sqlcdc run`` (``--no-summary``, ``--conf K=V``); ``timeout``:
        the longest wait for a line of output, a bound should a run hang."""
        self.proc = subprocess.Popen(
            [SQLCDC, "run", "--config", str(config), "--warehouse", str(warehouse), *args,
             "--every", "86400", "--runs", str(runs)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            start_new_session=True)
        self.timeout = timeout
        self.done = 0
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for ln in self.proc.stdout:
            self.lines.put(ln)
        self.lines.put(None)

    def _until(self, marker: str | None) -> tuple[str, str | None]:
        """The output up to the first line starting with ``marker`` (or to its end): (text, that line
        or None)."""
        got = []
        while (ln := self.lines.get(timeout=self.timeout)) is not None:
            got.append(ln)
            if marker is not None and ln.startswith(marker):
                return "".join(got), ln
        return "".join(got), None

    def run(self) -> tuple[int, str]:
        """Start the next run (Enter, but for the first, which starts at once); wait until it says
        ``sqlcdc run: run N exited C`` and return (C, its output). Should the command end without
        saying, (its exit code or 1, what it printed)."""
        if self.done:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        self.done += 1
        out, said = self._until(f"sqlcdc run: run {self.done} exited ")
        if said is not None:
            return int(said.split()[-1]), out
        return (self.proc.wait(timeout=600) or 1), out

    def finish(self) -> tuple[int, str]:
        """After the last run: the command's exit code and the rest of its output."""
        rest, _ = self._until(None)
        return self.proc.wait(timeout=600), rest

    def stop(self) -> None:
        """Kill what is left: the command, its ``spark-pipelines`` and the Spark JVM (its own group)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=120)
