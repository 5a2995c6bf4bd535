"""The run log of a local warehouse: one JSON line per event of a ``sqlcdc run``, in
``<warehouse>/_sqlcdc/runs.jsonl``.

A run starts (``{"run": "2026-11-24T18:30:00.123456+00:00", "event": "started"}``) before Spark
does, and ends with its exit code and, when the summary ran, each source's balance (landed =
silver + quarantine + dropped + skipped + duplicate + pending, after the run). Two readers:

- :mod:`sqlcdc.dq_metrics` (through the Spark conf ``sqlcdc.runs``, set by ``sqlcdc run``): a
  landed record belongs to the latest run started before its bronze ``ingest_time``, so one
  ``sqlcdc run`` is one ``run_time`` across all sources, however many micro-batches it took;
- the local dashboard (:mod:`sqlcdc.dashboard`): its first panel, each run's balance.

Example::

    from sqlcdc import run_log
    at = run_log.start(Path("warehouse"))
    ...
    run_log.finish(Path("warehouse"), at, 0, balances)
    run_log.runs(run_log.path(Path("warehouse")))    # [{"run": ..., "exit": 0, "balances": [...]}]
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any, Iterable

__all__ = ["RUNS_CONF", "finish", "path", "runs", "start", "starts"]

#: Spark conf naming the run log, for the pipeline's definitions (``dq_metrics``).
RUNS_CONF = "sqlcdc.runs"


def path(warehouse: Path) -> Path:
    return Path(warehouse) / "_sqlcdc" / "runs.jsonl"


def _append(warehouse: Path, entry: dict[str, Any]) -> None:
    p = path(warehouse)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, default=str) + "\n")


def start(warehouse: Path, at: dt.datetime | None = None) -> dt.datetime:
    """Record that a run starts now (or at ``at``, an aware time); returns its time, the run's id."""
    at = (at or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    _append(warehouse, {"run": at.isoformat(timespec="microseconds"), "event": "started"})
    return at


def finish(warehouse: Path, run: dt.datetime, exit_code: int, balances: Iterable[Any] | None = None) -> None:
    """Record how run ``run`` ended: its exit code and, if counted, each source's balance
    (:class:`sqlcdc.summary.Balance` objects or dicts)."""
    entry: dict[str, Any] = {"run": run.isoformat(timespec="microseconds"), "event": "finished", "exit": exit_code,
                             "finished": dt.datetime.now(dt.timezone.utc).isoformat()}
    if balances is not None:
        entry["balances"] = [_balance(b) for b in balances]
    _append(warehouse, entry)


def _balance(b: Any) -> dict[str, Any]:
    out = dataclasses.asdict(b) if dataclasses.is_dataclass(b) else dict(b)
    out["ok"] = bool(b.ok) if hasattr(b, "ok") else bool(out.get("ok"))
    return out


def _entries(log: Path) -> list[dict[str, Any]]:
    if not log.is_file():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:  # a line cut by a killed run: the others still count
            continue
        if isinstance(entry, dict) and isinstance(entry.get("run"), str):
            out.append(entry)
    return out


def runs(log: Path) -> list[dict[str, Any]]:
    """Every run of ``log``, oldest first: ``run`` (its start, ISO), and when it ended ``exit``,
    ``finished`` and maybe ``balances``."""
    merged: dict[str, dict[str, Any]] = {}
    for entry in _entries(log):
        merged.setdefault(entry["run"], {"run": entry["run"]}).update(
            {k: v for k, v in entry.items() if k not in ("event", "run")})
    return sorted(merged.values(), key=lambda r: r["run"])


def starts(log: Path | None) -> list[dt.datetime]:
    """The start times of ``log``'s runs, oldest first (none without a log)."""
    if log is None:
        return []
    out = []
    for r in runs(Path(log)):
        try:
            out.append(dt.datetime.fromisoformat(r["run"]))
        except ValueError:
            continue
    return out
