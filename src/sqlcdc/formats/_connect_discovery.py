"""Column discovery from Kafka Connect schemas in landed files (Debezium, full and flattened).

A table without ``columns:`` takes its columns from the landed envelopes that carry a Connect
schema for it: the union of their shapes (:func:`landed_shapes`, :func:`union_of`), so a column
added at the source -- SQL Server captures it once a new capture instance is enabled, and the
connector's schema gains it from there -- is landed, NULL before (its events do not provide it).
That schema is producer metadata, so one hostile envelope must not define the table, nor stop the
run: an envelope whose schema does not read (a field without a name, a decimal scale that is not a
number), names a column Delta cannot store or two columns equal but for case (Spark could not tell
them apart), or declares a decimal Spark cannot hold is passed over. Only when no envelope can
define the table is it a config error, and that names the first envelope's problem and where it
landed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from sqlcdc import names
from sqlcdc.config import ConfigError, TableConfig
from sqlcdc.formats._discovery import CACHE_DIR
from sqlcdc.formats.base import STATE_DIR_ENV
from sqlcdc.runtime import code_digest, read_json, write_json
from sqlcdc.values import ColumnSpec

__all__ = ["Reader", "Shape", "landed_shapes", "no_usable_schema", "schema_envelope", "schema_problem", "shapes_of",
           "union_of"]

_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_SCHEMA_FIRST = re.compile(r'\s*\{\s*"schema"\s*:\s*')
_SCHEMA_OBJECT = re.compile(r'"schema"\s*:\s*\{')


def schema_envelope(line: str) -> tuple[dict, dict] | None:
    """``(schema, payload)`` of a landed line ``{"schema": {...}, "payload": {...}}``; None for any
    other line (without a schema, not JSON, nested too deep)."""
    line = line.strip()
    if not line.startswith("{") or not _SCHEMA_OBJECT.search(line):  # a payload's "schema": "dbo" is no schema
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


@dataclasses.dataclass(frozen=True)
class Reader:
    """How one format's landed lines name their table and hold its columns' Connect schema.

    ``table_of(payload, file)``: ``(schema or None, table)``, lower-cased, of a line's payload
    (None: the line names no table); ``fields_of(schema)``: the Connect fields of the row in the
    line's schema (None: it has none); ``kind``: names the reading, for the scan's memo (the
    flattened format's includes its ``add.fields`` prefix)."""

    kind: str
    table_of: Callable[[dict, Path], "tuple[str | None, str] | None"]
    fields_of: Callable[[dict], "list | None"]
    to_spec: Callable[[Any], ColumnSpec]


@dataclasses.dataclass(frozen=True)
class Shape:
    """One distinct Connect schema of one table, where it was first read; ``problem`` when it
    cannot define the table (:func:`schema_problem`, or its fields do not read)."""

    table: tuple[str | None, str]
    where: str
    columns: tuple[ColumnSpec, ...] = ()
    problem: str | None = None


_MEMO: dict[tuple[str, str, int, int], list[Shape]] = {}  # (kind, file, size, mtime ns) -> its shapes


def landed_shapes(landing: str, reader: Reader) -> list[Shape]:
    """Every table's shapes in the landed files (files in name order, each line), for all of the
    folder's tables at once.

    Every line is read: a table's shape changes where the connector moves to a new capture instance
    (a column added or dropped), which may be deep in a file. Of a line whose Connect schema is the
    very text of one already taken, only the payload is parsed, for its table. What a file holds is
    remembered while it stays as it is (size, modification time): in this process, and in a local
    run's state folder (``<state>/discovery/connect-<digest of kind and folder>.json``, with sqlcdc's
    code digest), so a run reads only the files landed since the last."""
    root = Path(landing)
    if not root.is_dir():
        return []
    state = os.environ.get(STATE_DIR_ENV)
    digest = hashlib.sha256(f"{reader.kind}\0{root.resolve()}".encode()).hexdigest()[:16]  # a file per landing
    kept_path = Path(state) / CACHE_DIR / f"connect-{digest}.json" if state else None
    code = code_digest() if kept_path else None  # a walk of sqlcdc's files: once
    kept = read_json(kept_path) if kept_path else None
    kept = kept.get("files", {}) if isinstance(kept, dict) and kept.get("digest") == code else {}
    found: list[Shape] = []
    keep: dict[str, Any] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))):
        try:
            st = path.stat()
        except OSError:
            continue
        memo = (reader.kind, str(path), st.st_size, st.st_mtime_ns)
        shapes = _MEMO.get(memo)
        if shapes is None:
            shapes = _from_kept(kept.get(str(path)), st)
        if shapes is None:
            shapes = _file_shapes(path, reader)
        _MEMO[memo] = shapes
        keep[str(path)] = [st.st_size, st.st_mtime_ns, [_to_kept(x) for x in shapes]]
        found += shapes
    if kept_path and keep != kept:  # every table of the folder asks: written once, when it changed
        write_json(kept_path, {"kind": reader.kind, "landing": str(root), "digest": code, "files": keep})
    return found


def _file_shapes(path: Path, reader: Reader) -> list[Shape]:
    found: list[Shape] = []
    taken: dict[str, set] = {}  # the raw text of each schema taken (after ``{"schema":``) -> its tables
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh):
                _read(line, path, f"{path}:{i + 1}", reader, taken, found)
    except OSError:
        pass
    return found


def _to_kept(shape: Shape) -> dict[str, Any]:
    return {"table": list(shape.table), "where": shape.where, "problem": shape.problem,
            "columns": [dataclasses.asdict(c) for c in shape.columns]}


def _from_kept(kept: Any, st: os.stat_result) -> list[Shape] | None:
    """A file's shapes as a state file kept them, if it is the same file (size, modification
    time); None otherwise, or when they do not read back (a state file is a cache)."""
    try:
        size, mtime, shapes = kept
        if (size, mtime) != (st.st_size, st.st_mtime_ns):
            return None
        return [Shape(tuple(s["table"]), s["where"], tuple(ColumnSpec(**c) for c in s["columns"]), s["problem"])
                for s in shapes]
    except (TypeError, ValueError, KeyError):
        return None


def _read(line: str, path: Path, where: str, reader: Reader, taken: dict[str, set], found: list[Shape]) -> None:
    lead = _SCHEMA_FIRST.match(line)
    text = next((t for t in taken if line.startswith(t, lead.end())), None) if lead else None
    if text is not None:  # a schema taken: is it this table's too? its payload alone says
        rest = line[lead.end() + len(text):].lstrip()
        try:
            payload = json.loads("{" + rest[1:]).get("payload") if rest.startswith(",") else None
            table = reader.table_of(payload, path) if isinstance(payload, dict) else None
        except (ValueError, RecursionError, AttributeError, TypeError):
            table = None
        if table is not None and table in taken[text]:
            return
    envelope = schema_envelope(line)
    if envelope is None:
        return
    schema, payload = envelope
    try:
        table = reader.table_of(payload, path)
        fields = reader.fields_of(schema) if table is not None else None
    except (AttributeError, TypeError):
        return
    if not fields:
        return
    try:
        columns = tuple(reader.to_spec(f) for f in fields)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # a schema that does not read
        found.append(Shape(table, where, problem=f"does not read ({type(e).__name__}: {e})"))
        return
    problem = schema_problem(list(columns))
    if problem is not None:
        found.append(Shape(table, where, problem=problem))
        return
    if lead:
        try:
            text = line[lead.end():json.JSONDecoder().raw_decode(line, lead.end())[1]]
            taken.setdefault(text, set()).add(table)
        except ValueError:  # read above, so it decodes; never trust that
            pass
    if not any(s.table == table and s.columns == columns for s in found):
        found.append(Shape(table, where, columns))


def shapes_of(table: TableConfig, shapes: list[Shape]) -> tuple[list[tuple[str, list[ColumnSpec]]], list[tuple[str, str]]]:
    """``table``'s usable shapes ``(where, columns)`` and its unusable ones ``(where, problem)``, in
    landing order; a line that names no schema is taken to be of the table's."""
    mine = [s for s in shapes if s.table[1] == table.table.lower() and s.table[0] in (None, table.schema.lower())]
    usable: list[tuple[str, list[ColumnSpec]]] = []
    for s in mine:
        if s.problem is None and all(list(s.columns) != c for _, c in usable):
            usable.append((s.where, list(s.columns)))
    return usable, [(s.where, s.problem) for s in mine if s.problem is not None]


def union_of(shapes: list[tuple[str, list[ColumnSpec]]], *,
             rejected: list[tuple[str, str]] | None = None) -> list[ColumnSpec] | None:
    """One table's columns from its landed shapes (:func:`shapes_of`): every column any shape
    names, so a column added at the source (a new capture instance) is landed from the first event
    that carries it; events of a shape without it do not provide it (absent, not NULL). Ordered as
    the widest shape (the first of the widest, in landing order) lists them, then the columns only
    other shapes name, as they come; each typed as the first shape naming it types it, a Decimal
    widened to hold every shape's (an event is read by its own schema's scale and units, or
    quarantined: :mod:`sqlcdc.formats._connect_types`). A shape that
    would make the union unusable (a column equal but for case to one of another shape) is passed
    over, into ``rejected``. None for no shape.

    >>> old, new = [ColumnSpec("id", "int")], [ColumnSpec("id", "int"), ColumnSpec("note", "string")]
    >>> [c.name for c in union_of([("a.json:1", old), ("b.json:4", new)])]
    ['id', 'note']
    >>> [c.name for c in union_of([("a.json:1", old), ("b.json:2", [ColumnSpec("ID", "int")])])]
    ['id']
    """
    taken: list[list[ColumnSpec]] = []
    typed: dict[str, ColumnSpec] = {}
    for where, shape in shapes:
        more = {**typed, **{c.name: c for c in shape if c.name not in typed}}
        more.update({c.name: _wider_decimal(more[c.name], c) for c in shape if c.name in typed})
        problem = schema_problem(list(more.values()))
        if problem is not None:
            if rejected is not None:
                rejected.append((where, f"beside the table's other shapes {problem}"))
            continue
        taken.append(shape)
        typed = more
    if not taken:
        return None
    widest = max(taken, key=len)
    first = [c.name for c in widest]
    return [typed[n] for n in first + [n for n in typed if n not in set(first)]]


def _wider_decimal(had: ColumnSpec, other: ColumnSpec) -> ColumnSpec:
    """``had``, widened to hold ``other``'s values too where both are Connect Decimals (an ``ALTER
    COLUMN`` to another precision or scale): the most integer digits and the largest scale, up to
    38 digits; each event's value is read at its own schema's scale
    (:func:`~sqlcdc.formats._connect_types.event_scales`).

    >>> _wider_decimal(ColumnSpec("p", "decimal(10,2)", "base64_decimal"), ColumnSpec("p", "decimal(12,4)", "base64_decimal")).spark_type
    'decimal(12,4)'
    """
    a, b = _DECIMAL.fullmatch(had.spark_type), _DECIMAL.fullmatch(other.spark_type)
    if not (a and b and had.encoding == other.encoding == "base64_decimal") or had.spark_type == other.spark_type:
        return had
    scale = max(int(a[2]), int(b[2]))
    digits = max(int(a[1]) - int(a[2]), int(b[1]) - int(b[2]))
    return dataclasses.replace(had, spark_type=f"decimal({min(38, digits + scale)},{scale})")


def no_usable_schema(table: TableConfig, rejected: list[tuple[str, str]]) -> ConfigError:
    """The config error for a table whose landed schemas all failed :func:`schema_problem`."""
    where, problem = rejected[0]
    more = f" (and {len(rejected) - 1} more envelope(s) of it)" if len(rejected) > 1 else ""
    return ConfigError([
        f"{table.file}:1: columns: the Debezium schema of {table.qualified} {problem}, at {where}{more}; give "
        "`columns:` (the columns to land, name and type) or fix the schema at the source"])
