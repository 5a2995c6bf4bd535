"""Expectation rules as a table config writes them, normalised to ``{"name", "constraint",
"action"[, "description"]}`` with where each came from (``file:line``): inline ``expectations:``
lists, and ``expectations_file:`` documents (a list, ``{"expectations": [...]}``, or dlt-meta's
``{"expect_or_drop": {"name": "constraint"}, ...}``). What the rules *do* is :mod:`sqlcdc.expectations`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlcdc.diagnostics import read_yaml, schema_problems

__all__ = ["load_expectations_file", "normalize_expectations"]


_ACTIONS_BY_DLT_KEY = {
    "expect": "warn",
    "expect_or_drop": "drop",
    "expect_or_fail": "fail",
    "expect_or_quarantine": "quarantine",
}


def normalize_expectations(doc: Any, file: Path, lines: dict, prefix: tuple = ()) -> list[tuple[dict, str]]:
    """Rules of a (schema-valid) expectations document as ``(rule, "file:line")``.

    ``doc`` is a list of rules, ``{"expectations": [...]}``, or dlt-meta's
    ``{"expect_or_drop": {"name": "constraint"}, ...}``.
    """
    out: list[tuple[dict, str]] = []
    if isinstance(doc, dict) and "expectations" in doc:
        doc, prefix = doc["expectations"], prefix + ("expectations",)
    if isinstance(doc, list):
        for i, rule in enumerate(doc):
            norm = {"name": rule["name"], "constraint": rule["constraint"], "action": rule.get("action", "warn")}
            if rule.get("description"):
                norm["description"] = rule["description"]
            out.append((norm, f"{file}:{lines.get(prefix + (i, 'constraint'), lines.get(prefix + (i,), 1))}"))
    elif isinstance(doc, dict):
        for key, rules in doc.items():
            for name, constraint in rules.items():
                out.append(
                    ({"name": name, "constraint": constraint, "action": _ACTIONS_BY_DLT_KEY[key]},
                     f"{file}:{lines.get(prefix + (key, name), 1)}")
                )
    return out


def load_expectations_file(ref: str, table_file: Path, lines: dict, problems: list[str]) -> list[tuple[dict, str]]:
    path = Path(ref)
    if not path.is_absolute():
        path = table_file.parent / path
    if not path.is_file():
        problems.append(f"{table_file}:{lines.get(('expectations_file',), 1)}: expectations_file: no such file {path}")
        return []
    doc, elines = read_yaml(path, problems)  # JSON is YAML: one reader for both
    if doc is None:
        if not any(p.startswith(str(path)) for p in problems):
            problems.append(f"{path}:1: (top level): the file is empty")
        return []
    errs = schema_problems(doc, "expectations.schema.json", path, elines)
    if errs:
        problems += errs
        return []
    return normalize_expectations(doc, path, elines)
