"""Tables whose columns changed between two local runs: found while the pipeline is defined,
dropped between two ``spark-pipelines`` runs.

Qlik (a new ``tableVersion``) and CES (new columns in ``eventsource.cols``) discover a table's
columns from the data, so the silver ``before``/``after`` structs can gain fields from one run to
the next. Local SDP (Spark 4.2) alters an existing materialized view's schema in place, and Delta
refuses to change the fields of a struct column (``DELTA_CANNOT_UPDATE_STRUCT_FIELD``); SDP also
refuses ``DROP TABLE`` while the pipeline is being defined. So the definitions only *record* the
reshaped views in a marker file and stop; ``sqlcdc run`` drops them in its own Spark, the one
the pipeline's Spark Connect server runs in, and runs again. The views are recomputed from bronze
on every run anyway, so dropping them loses nothing.

Example (what ``sqlcdc run`` does)::

    code = run_pipeline(...)
    names = reshape.recorded(marker)
    if code != 0 and names:
        reshape.drop(spark, names)
        code = run_pipeline(...)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


def drop(spark: SparkSession, names: Sequence[str]) -> None:
    """Drop ``names`` from the warehouse's metastore, in the run's Spark (the one JVM that holds
    the embedded metastore), between two ``spark-pipelines`` runs."""
    for name in names:
        spark.sql(f"DROP TABLE IF EXISTS `{name}`")


