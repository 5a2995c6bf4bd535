"""Column discovery from Kafka Connect schemas in landed files (Debezium, full and flattened).

A table without ``columns:`` takes its columns from the first landed envelope that carries a
Connect schema for it. That schema is producer metadata, so one hostile envelope must not define
the table, nor stop the run: an envelope whose schema does not read (a field without a name, a
decimal scale that is not a number), names a column Delta cannot store or two columns equal but for
case (Spark could not tell them apart), or declares a decimal Spark cannot hold is passed over, and
the next one is taken. Only when no envelope can define the table is it a config error, and that
names the first envelope's problem and where it landed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Callable

from sqlcdc import names
from sqlcdc.config import ConfigError, TableConfig
from sqlcdc.values import ColumnSpec

__all__ = ["first_usable_schema", "no_usable_schema", "schema_envelope", "schema_problem"]

ReadLine = Callable[[str, Path], "list[ColumnSpec] | None"]
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def schema_envelope(line: str) -> tuple[dict, dict] | None:
    """``(schema, payload)`` of a landed line ``{"schema": {...}, "payload": {...}}``; None for any
    other line (without a schema, not JSON, nested too deep)."""
    line = line.strip()
    if not line.startswith("{") or '"schema"' not in line:
        return None
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than Python's stack
        return None
    schema, payload = (doc.get("schema"), doc.get("payload")) if isinstance(doc, dict) else (None, None)
    return (schema, payload) if isinstance(schema, dict) and isinstance(payload, dict) else None


def schema_problem(specs: list[ColumnSpec]) -> str | None:
    """Why these discovered columns cannot define a table (None when they can).

    >>> schema_problem([ColumnSpec("id", "int"), ColumnSpec("ID", "int")])
    'names columns equal but for case (id, ID): Spark and Delta cannot tell them apart'
    """
    given = [c.name for c in specs]
    if any(not isinstance(n, str) or not n for n in given):
        return "has a column without a name"
    bad = [n for n in given if names.unstorable(n)]
    if bad:
        return (f"names column(s) {', '.join(map(repr, bad))} with a character Delta cannot store in a column "
                "name (space , ; { } ( ) newline tab = or a backtick)")
    if own := names.reserved_problem(given):
        return f"names {own}"
    lowered = Counter(n.lower() for n in given)
    same = [n for n in given if lowered[n.lower()] > 1]
    if same:
        return f"names columns equal but for case ({', '.join(same)}): Spark and Delta cannot tell them apart"
    for c in specs:
        m = _DECIMAL.fullmatch(c.spark_type)
        if m and not (1 <= int(m[1]) <= 38 and int(m[2]) <= int(m[1])):
            return (f"declares column {c.name} as {c.spark_type}: Spark holds precision 1..38 and a scale "
                    "up to the precision")
    return None


def first_usable_schema(landing: str, read_line: ReadLine, *, max_lines_per_file: int = 1000,
                        rejected: list[tuple[str, str]] | None = None) -> list[ColumnSpec] | None:
    """The columns of the first landed line (files in name order, the first ``max_lines_per_file``
    lines of each) that ``read_line(line, file)`` reads and :func:`schema_problem` accepts.
    Lines ``read_line`` reads but cannot use are appended to ``rejected`` as ``(where, problem)``."""
    root = Path(landing)
    if not root.is_dir():
        return None
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))):
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                for i, line in enumerate(fh):
                    if i >= max_lines_per_file:
                        break
                    try:
                        specs = read_line(line, path)
                    except (KeyError, TypeError, ValueError, AttributeError) as e:  # a schema that does not read
                        specs, problem = None, f"does not read ({type(e).__name__}: {e})"
                    else:
                        problem = schema_problem(specs) if specs else None
                    if problem is None and specs:
                        return specs
                    if problem is not None and rejected is not None:
                        rejected.append((f"{path}:{i + 1}", problem))
        except OSError:
            continue
    return None


def no_usable_schema(table: TableConfig, rejected: list[tuple[str, str]]) -> ConfigError:
    """The config error for a table whose landed schemas all failed :func:`schema_problem`."""
    where, problem = rejected[0]
    more = f" (and {len(rejected) - 1} more envelope(s) of it)" if len(rejected) > 1 else ""
    return ConfigError([
        f"{table.file}:1: columns: the Debezium schema of {table.qualified} {problem}, at {where}{more}; give "
        "`columns:` (the columns to land, name and type) or fix the schema at the source"])
