"""What ``sqlcdc run`` shows while the pipeline runs: one line per flow when it ends, with how long
it ran, the rows it read and the rows it wrote; the run's own milestones; nothing for each state
change in between (the full log keeps those).

Where the figures come from, all written by Spark itself:

- **read**: a streaming flow's ``numInputRows``, summed over its micro-batches of this run, from
  Spark's "Streaming query made progress" events (logger ``ProgressReporter`` at INFO in the run's
  log4j settings, :mod:`sqlcdc.runtime`); the event's ``name`` is the flow, its ``id`` the query.
  Per micro-batch, the most any one of its sources read: every flow reads one table, some of
  them more than once in a query;
- **wrote**: ``numOutputRows`` of the Delta commits the flow made this run, found by the query id
  in each commit's ``commitInfo`` (several flows may append to one table: each table's and the
  source's own rejects to ``quarantine_<source>``); a materialized view's commit of this run, for flows without
  a streaming query ("recomputed").

Example::

    >>> p = RunProgress()
    >>> p.feed("2026-11-24 11:33:55: Flow spark_catalog.default.bronze_erp is STARTING.")
    []
    >>> p.feed("2026-11-24 11:34:02: Flow spark_catalog.default.bronze_erp has COMPLETED.")
    ['flow bronze_erp                     completed   7s']
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from pathlib import Path

__all__ = ["PROGRESS_LINE", "RunProgress"]

#: A line of ``spark-pipelines``' own progress: ``2026-11-24 11:33:55: ...``.
PROGRESS_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}: ")
_QUERY_PROGRESS = "Streaming query made progress: {"


class RunProgress:
    """Condenses ``spark-pipelines``' output (:meth:`feed`, one line at a time). With ``tables``
    (the warehouse's table folder) and ``since`` (the run's start, epoch seconds), a flow's line
    also says what it read and wrote."""

    _FLOW = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}): Flow (\S+) (?:is|has) ([A-Z_]+)\.?\s*(.*)$")
    _ENDED = {"COMPLETED", "FAILED", "STOPPED", "SKIPPED", "EXCLUDED", "IDLE"}
    _QUIET = ("Found ", "Importing ", "Loading definitions", "Registering graph", "Creating dataflow graph")

    def __init__(self, tables: Path | None = None, since: float | None = None) -> None:
        self._started: dict[str, float] = {}
        self._tables, self._since_ms = tables, None if since is None else int(since * 1000)
        self._read: dict[str, int] = defaultdict(int)
        self._queries: dict[str, set[str]] = defaultdict(set)
        self._json: list[str] | None = None  # lines of a progress event being read

    def feed(self, line: str) -> list[str]:
        """The lines worth showing for one output line of ``spark-pipelines`` (maybe none)."""
        line = line.rstrip()
        if self._json is not None:
            self._json.append(line)
            if line == "}":
                self._progress("\n".join(self._json))
                self._json = None
            return []
        if line.endswith(_QUERY_PROGRESS):
            self._json = ["{"]
            return []
        if not PROGRESS_LINE.match(line):
            return []
        m = self._FLOW.match(line)
        if m is None:
            text = line[21:]
            return [] if text.startswith(self._QUIET) else [text]
        stamp, name, state, rest = m.groups()
        at = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))
        name = name.strip("'").split(".")[-1]
        if state == "EXCLUDED":  # a selective refresh (sqlcdc.cli.unchanged): said once, before the run
            return []
        if state not in self._ENDED:
            if state != "QUEUED":  # waiting for a slot is not the flow's time
                self._started.setdefault(name, at)
            return []
        took = at - self._started.pop(name, at)
        rows = self._rows(name) if state == "COMPLETED" else ""
        return [f"flow {name:<30} {state.lower():<11} {took:.0f}s" + (f"  {rows}" if rows else "")
                + (f"  {rest}" if rest else "")]

    def _progress(self, text: str) -> None:
        try:
            event = json.loads(text)
            name = str(event["name"]).split(".")[-1]
            # A flow may read its one input several times (each part of a quarantine flow reads
            # bronze on its own): the records read are the most any of its sources read.
            per_source = [int(src.get("numInputRows") or 0) for src in event.get("sources") or []]
            self._read[name] += max(per_source) if per_source else int(event.get("numInputRows") or 0)
            self._queries[name].add(str(event["id"]))
        except (ValueError, KeyError, TypeError):  # not an event we can read: no figures for it
            pass

    def _rows(self, flow: str) -> str:
        if self._tables is None or self._since_ms is None:
            return ""
        ids = self._queries.get(flow)
        if ids:
            wrote = sum(n for table in self._table_dirs() for n in self._commits(table, ids))
            return f"read {self._read[flow]:,}, wrote {wrote:,}"
        recomputed = list(self._commits(self._tables / flow, None))
        if recomputed:
            return f"wrote {sum(recomputed):,} (recomputed)"
        return "no new rows" if (self._tables / flow / "_delta_log").is_dir() else ""

    def _table_dirs(self):
        return (p for p in self._tables.iterdir() if (p / "_delta_log").is_dir()) if self._tables.is_dir() else ()

    def _commits(self, table: Path, queries: set[str] | None):
        """``numOutputRows`` of ``table``'s commits of this run: by one of ``queries``, or, with
        None, those made by no streaming query (a materialized view's write)."""
        log = table / "_delta_log"
        if not log.is_dir():
            return
        cutoff = self._since_ms / 1000 - 5  # the file's mtime: a cheap first filter, with a margin
        for f in log.glob("*.json"):
            try:
                if f.stat().st_mtime < cutoff:
                    continue
                for raw in f.read_text().splitlines():
                    info = json.loads(raw).get("commitInfo")
                    if not info or int(info.get("timestamp", 0)) < self._since_ms:
                        continue
                    query = (info.get("operationParameters") or {}).get("queryId")
                    if (query in queries) if queries is not None else (query is None and info.get("operation") != "CREATE TABLE"):
                        yield int((info.get("operationMetrics") or {}).get("numOutputRows") or 0)
            except (OSError, ValueError):  # a commit being written or removed: not counted
                continue
