"""Tables whose columns changed between two local runs: found while the pipeline is defined,
dropped between two ``spark-pipelines`` runs.

Qlik (a new ``tableVersion``) and CES (new columns in ``eventsource.cols``) discover a table's
columns from the data, so the silver ``before``/``after`` structs can gain fields from one run to
the next. Local SDP (Spark 4.2) alters an existing materialized view's schema in place, and Delta
refuses to change the fields of a struct column (``DELTA_CANNOT_UPDATE_STRUCT_FIELD``); SDP also
refuses ``DROP TABLE`` while the pipeline is being defined. So the definitions only *record* the
reshaped views in a marker file and stop; ``sqlcdc run`` drops them in a child process (the
embedded metastore admits one JVM at a time) and runs again. The views are recomputed from bronze
on every run anyway, so dropping them loses nothing.

Example (what ``sqlcdc run`` does)::

    code = run_pipeline(...)
    names = reshape.recorded(marker)
    if code != 0 and names:
        reshape.drop_in_child(warehouse, names)
        code = run_pipeline(...)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Sequence

MARKER_CONF = "sqlcdc.reshaped_marker"
"""Spark conf (set in the generated spec) naming the marker file of the current run."""

_TYPE_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float"}


class TablesReshaped(RuntimeError):
    """Raised at definition time after recording reshaped views; ``sqlcdc run`` handles it."""


def _type(name: str) -> str:
    """A type name in one spelling (no JVM parser inside SDP's Python process). A spelling this
    misses only costs a rebuild of views that are recomputed anyway."""
    t = name.lower().replace(" ", "")
    return _TYPE_ALIASES.get(t, t)


def column_change(existing_after: Sequence[tuple[str, str]], wanted: Sequence[tuple[str, str]]) -> str | None:
    """A description of how the ``after`` struct changes (None: it does not).

    >>> column_change([("ID", "int")], [("ID", "int"), ("TIER", "string")])
    'added TIER'
    >>> column_change([("ID", "int")], [("ID", "INT")]) is None
    True
    """
    had = [(n, _type(t)) for n, t in existing_after]
    want = [(n, _type(t)) for n, t in wanted]
    if had == want:
        return None
    had_d, want_d = dict(had), dict(want)
    parts = []
    if added := [n for n in want_d if n not in had_d]:
        parts.append("added " + ", ".join(added))
    if removed := [n for n in had_d if n not in want_d]:
        parts.append("removed " + ", ".join(removed))
    if retyped := [f"{n} {had_d[n]}->{want_d[n]}" for n in want_d if n in had_d and had_d[n] != want_d[n]]:
        parts.append("retyped " + ", ".join(retyped))
    return "; ".join(parts) or "reordered"


def record(marker: str | Path, names: Sequence[str], reason: str) -> None:
    """Add ``names`` to the marker file (JSON lines: {"tables": [...], "reason": ...})."""
    path = Path(marker)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fh.write(json.dumps({"tables": list(names), "reason": reason}) + "\n")


def recorded(marker: str | Path) -> list[tuple[list[str], str]]:
    """What the definitions recorded in ``marker`` (empty when the file does not exist)."""
    path = Path(marker)
    if not path.is_file():
        return []
    return [(e["tables"], e["reason"]) for e in map(json.loads, path.read_text().splitlines()) if e]


def drop_in_child(warehouse: str | Path, names: Sequence[str]) -> None:
    """Drop ``names`` from the warehouse's metastore, in a child Python (its JVM exits after)."""
    cmd = [sys.executable, "-m", "sqlcdc.reshape", str(warehouse), *names]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"dropping {', '.join(names)} failed:\n{res.stderr[-3000:]}")


def _drop(warehouse: str, names: Sequence[str]) -> None:
    from sqlcdc.runtime import local_spark

    spark = local_spark(warehouse, app_name="sqlcdc-reshape")
    try:
        for name in names:
            spark.sql(f"DROP TABLE IF EXISTS `{name}`")
    finally:
        spark.stop()


if __name__ == "__main__":  # pragma: no cover - run by drop_in_child
    _drop(sys.argv[1], sys.argv[2:])
