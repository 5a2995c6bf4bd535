"""The Databricks (Lakeview) data-quality dashboard's datasets, generated from the pipeline config.

The dashboard file (``resources/dq_metrics.lvdash.json``) keeps its pages and widgets as people
edit them; the datasets that name pipeline tables are written from config, so the dashboard shows
*every* source's quarantine (one ``UNION ALL`` branch per source, with its name), not the demo's.
``sqlcdc export lakeview`` rewrites them; ``sqlcdc validate`` reports a dashboard that no longer
matches its config.

Example::

    from sqlcdc.lakeview import with_config
    dash = with_config(json.loads(path.read_text()), load_pipeline("config/pipeline.yml"))
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from sqlcdc.config import PipelineConfig
from sqlcdc.names import quote

__all__ = ["QUARANTINE_DATASET", "quarantine_query", "with_config", "stale_problems"]

#: The dataset the quarantine table widget reads.
QUARANTINE_DATASET = "quarantine_samples"
_COLUMNS = "source_name, bronze_ingest_time, table_name, array_join(rules, ', ') AS rules, reason, bronze_file, bronze_record_id, raw"


def quarantine_query(cfg: PipelineConfig, *, limit: int = 200) -> list[str]:
    """The quarantine samples query: the latest ``limit`` rows over every source's quarantine table."""
    branches = [f"SELECT {_COLUMNS} FROM {quote(s.quarantine_table)}"
                for s in sorted(cfg.sources.values(), key=lambda s: s.name)]
    lines = ["SELECT * FROM ("]
    for i, branch in enumerate(branches):
        lines.append(("  " if i == 0 else "  UNION ALL ") + branch)
    lines += [")", "ORDER BY bronze_ingest_time DESC", f"LIMIT {limit}"]
    return lines


def with_config(dashboard: dict[str, Any], cfg: PipelineConfig) -> dict[str, Any]:
    """``dashboard`` with its config-derived datasets rewritten for ``cfg`` (a copy; widgets kept).

    The quarantine widget gains the ``source_name`` column when it lacks it."""
    out = copy.deepcopy(dashboard)
    datasets = out.setdefault("datasets", [])
    ds = next((d for d in datasets if d.get("name") == QUARANTINE_DATASET), None)
    if ds is None:
        ds = {"name": QUARANTINE_DATASET}
        datasets.append(ds)
    ds["displayName"] = f"Quarantine samples ({', '.join(sorted(cfg.sources))})"
    ds.pop("query", None)
    ds["queryLines"] = [line + "\n" for line in quarantine_query(cfg)[:-1]] + [quarantine_query(cfg)[-1]]
    for page in out.get("pages") or []:
        for item in page.get("layout") or []:
            widget = item.get("widget") or {}
            for q in widget.get("queries") or []:
                query = q.get("query") or {}
                fields = query.get("fields")
                if query.get("datasetName") == QUARANTINE_DATASET and isinstance(fields, list):
                    if not any(f.get("name") == "source_name" for f in fields):
                        fields.insert(0, {"name": "source_name", "expression": "`source_name`"})
                        columns = ((widget.get("spec") or {}).get("encodings") or {}).get("columns")
                        if isinstance(columns, list):
                            columns.insert(0, {"fieldName": "source_name", "displayName": "source"})
    return out


def stale_problems(path: Path, cfg: PipelineConfig) -> list[str]:
    """A problem line when the dashboard at ``path`` does not show what ``cfg`` would give it."""
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        return []  # the bundle checker reports an unreadable dashboard
    if not isinstance(current, dict) or with_config(current, cfg) == current:
        return []
    return [f"{path}:1: datasets.{QUARANTINE_DATASET}: does not read the quarantine of every source of "
            f"{cfg.file} (run `sqlcdc export lakeview --config {cfg.file}`)"]
