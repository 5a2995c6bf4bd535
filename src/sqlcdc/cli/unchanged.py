"""Sources with nothing new since the last run: ``sqlcdc run`` leaves their tables as they are.

A materialized view -- the bronze and silver of CES, Qlik and change-table sources, and their
quarantine -- is recomputed from every landed file on every run, and a streaming flow with nothing
new still starts, plans its query and commits. In a pipeline of many sources where few got new
files, that is most of a run (``docs/testing.md``: a run is CPU-bound on planning, not on data).

After a run that succeeded, :func:`record` stores each source's *fingerprint*, taken as it started: its landed files
(path, size, modification time), its own and its tables' config, and sqlcdc's code. The next run
refreshes only the tables of sources whose fingerprint differs (:func:`plan`), and
``dq_metrics``. Recomputing the others would give what they already hold: the same files decoded
by the same config and code. A source read from a topic (Kafka, Event Hubs) cannot say what is new
without reading it, so it is always refreshed; so is a source whose decoder's output can change
with the clock alone (CES: split segments time out), every source on ``--full-refresh`` and after a
failed run (nothing recorded), and a source one of whose tables is missing from the warehouse.

Example::

    planned = unchanged.plan(cfg, warehouse)   # planned.refresh None: refresh everything
    ...                                        # spark-pipelines run --refresh ...
    unchanged.record(warehouse, planned.fingerprints)   # once the run succeeded
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from sqlcdc import dq_metrics, formats
from sqlcdc.config import PipelineConfig, SourceConfig
from sqlcdc.runtime import code_digest, read_json, write_json

__all__ = ["STATE_FILE", "Plan", "datasets", "fingerprint", "forget", "plan", "record"]

#: Where the fingerprints of the last successful run are kept, under ``<warehouse>/_sqlcdc``.
STATE_FILE = "inputs.json"

def datasets(cfg: PipelineConfig, source: SourceConfig) -> list[str]:
    """The pipeline's tables that hold ``source``'s data: bronze, quarantine, dropped, each silver
    (and, for a batch source, each table's records decoded once, which silver reads)."""
    names = [source.bronze_table, source.quarantine_table]
    tables = cfg.tables_of(source.name)
    if tables:
        names.append(dq_metrics.dropped_table(source))
    if not formats.get(source.format).streaming:
        names += [t.decoded_table for t in tables]
    return names + [t.silver_table for t in tables]


def fingerprint(cfg: PipelineConfig, source: SourceConfig, code: str | None = None) -> str | None:
    """A digest of everything ``source``'s tables are computed from (``code``: sqlcdc's, computed
    once per run by the caller, else here); None when it cannot be told
    without reading the source (a topic, or no local landing folder), or when its decoder's
    output can change with the clock alone (:attr:`~sqlcdc.formats.Decoder.depends_on_time`)."""
    if source.location_kind != "files" or not source.landing or not Path(source.landing).is_dir():
        return None
    if formats.get(source.format).depends_on_time:
        return None
    h = hashlib.sha256()
    h.update(repr(source).encode())
    for t in sorted(cfg.tables_of(source.name), key=lambda t: t.name):
        h.update(repr(t).encode())
    root = Path(source.landing)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        st = path.stat()
        h.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    h.update((code or code_digest()).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Plan:
    """What a run refreshes, from fingerprints taken *before* it starts (:func:`plan`).

    ``refresh``: the tables to refresh, None for all of them (nothing recorded, or every source
    changed); ``dq_metrics`` is always among them, it counts this run too. ``left_out``: the
    sources the run leaves as they are. ``fingerprints``: what :func:`record` stores once the run
    succeeded -- taken before it, so a file that lands while it runs (and that it may not have
    read) makes its source new for the next run."""

    fingerprints: Mapping[str, str] = field(default_factory=dict)
    refresh: list[str] | None = None
    left_out: tuple[str, ...] = ()


def plan(cfg: PipelineConfig, warehouse: Path) -> Plan:
    """The :class:`Plan` of a run of ``cfg`` on ``warehouse``."""
    code = code_digest()
    prints = {name: p for name, s in cfg.sources.items() if (p := fingerprint(cfg, s, code)) is not None}
    recorded = _load(warehouse)
    tables_dir = warehouse / "tables"
    selected: list[str] = []
    left_out: list[str] = []
    for source in cfg.sources.values():
        names = datasets(cfg, source)
        if (source.name in prints and prints[source.name] == recorded.get(source.name)
                and all((tables_dir / n).is_dir() for n in names)):
            left_out.append(source.name)
        else:
            selected += names
    if not left_out:
        return Plan(prints)
    return Plan(prints, selected + [dq_metrics.TABLE], tuple(left_out))


def record(warehouse: Path, fingerprints: Mapping[str, str]) -> None:
    """Store ``fingerprints`` (a :class:`Plan`'s): call after the run it planned succeeded."""
    write_json(warehouse / "_sqlcdc" / STATE_FILE, dict(fingerprints), indent=1, sort_keys=True)


def forget(warehouse: Path) -> None:
    """Drop the recorded fingerprints: the next run refreshes every source (a run is starting that
    may leave tables half-written if it fails)."""
    (warehouse / "_sqlcdc" / STATE_FILE).unlink(missing_ok=True)


def _load(warehouse: Path) -> dict[str, str]:
    data = read_json(warehouse / "_sqlcdc" / STATE_FILE)
    return data if isinstance(data, dict) else {}


