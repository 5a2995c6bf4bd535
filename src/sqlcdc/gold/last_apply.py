"""What a table's last gold apply read, so a run whose silver did not change skips the apply.

:func:`sqlcdc.gold.after_run.apply_table` with nothing new still started a Delta stream or an
anti-join of all of silver against the applied ids, read the targets' schemas and features and
the source's transaction marks: 3-7 s a table on 2 cores (``sqlcdc run`` of the demo config,
second run, nothing landed: four tables, 27 s of "0 new changes"), and a source whose files did
not change is not even run by the pipeline (:mod:`sqlcdc.cli.unchanged`).

After each apply, the run state keeps a :func:`fingerprint`: the last commit of every silver table
the apply read (its number, size and modification time in ``_delta_log``: a new commit or a table
created again changes it), of the source's bronze when transaction marks are read from it, the
table's and the policy's config and sqlcdc's code -- whether changes were left waiting for their
transaction, and whether the producer gave transaction marks (then the run still writes its row of
``dq_transactions``). The next apply with the same fingerprint and nothing waiting has nothing to
do: no change is new, none can complete or expire. Listing ``_delta_log`` is a few file-system calls,
no Spark job.

Example::

    key = fingerprint([silver_path], None, repr((table, policy)))
    if (last := unchanged(state, key)) is not None: ...   # nothing to apply; last["marks"]
    remember(state, key, waiting=False, marks=False)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from sqlcdc.runtime import code_digest, read_json, write_json

__all__ = ["fingerprint", "forget", "remember", "unchanged"]

_FILE = "last_apply.json"


def _last_commit(table: Path) -> list[int] | None:
    """[number, size, modification time ns] of the newest commit file of Delta table ``table``."""
    log = table / "_delta_log"
    try:
        commits = [e for e in os.scandir(log) if e.name.endswith(".json") and e.name[:-5].isdigit()]
    except OSError:
        return None
    if not commits:
        return None
    last = max(commits, key=lambda e: int(e.name[:-5]))
    st = last.stat()
    return [int(last.name[:-5]), st.st_size, st.st_mtime_ns]


def fingerprint(silvers: list[Path], bronze: Path | None, config: str) -> dict[str, Any] | None:
    """What an apply reads: the last commit of each of ``silvers`` and of ``bronze`` (None: no marks
    are read), ``config`` (the table's and policy's) and sqlcdc's code. None when a table's log
    cannot be listed (then the apply runs)."""
    commits = {str(p): _last_commit(p) for p in [*silvers, *([bronze] if bronze else [])]}
    if any(c is None for c in commits.values()):
        return None
    return {"commits": commits, "config": hashlib.sha256(f"{config}\0{code_digest()}".encode()).hexdigest()}


def unchanged(state: Path, key: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the last apply (in run state ``state``) kept (:func:`remember`) when it read what
    ``key`` names and left nothing waiting; else None."""
    if key is None:
        return None
    last = read_json(state / _FILE)
    ok = isinstance(last, dict) and last.get("key") == key and last.get("waiting") is False
    return last if ok else None


def remember(state: Path, key: dict[str, Any] | None, *, waiting: bool, marks: bool) -> None:
    """Keep ``key`` as what the apply that just ended read; ``waiting``: it left changes held;
    ``marks``: the producer gave transaction marks. ``key`` None: :func:`forget`."""
    if key is None:
        forget(state)
    else:
        write_json(state / _FILE, {"key": key, "waiting": waiting, "marks": marks})


def forget(state: Path) -> None:
    """Nothing kept: the next apply reads silver (call as an apply starts, so one killed half-way
    is never taken as done)."""
    (state / _FILE).unlink(missing_ok=True)
