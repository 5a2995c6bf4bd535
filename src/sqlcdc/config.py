"""Load and check the declarative config: one pipeline file plus one file per table.

Every problem is reported at once, each with file, line, field path and what was expected::

    config/tables/orders.yml:3: keys: 'id' is not of type 'array'
    config/tables/orders.yml:1: (top level): unknown field 'keyz'

Example::

    from sqlcdc.config import load_pipeline
    cfg = load_pipeline("config/pipeline.yml")
    for table in cfg.tables:
        print(table.name, table.source.format, table.keys)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS_DIR = Path(__file__).resolve().parents[2] / "schemas"


class ConfigError(Exception):
    """Config problems, all of them: ``problems`` lists ``file:line: field: message`` strings."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(f"{len(problems)} config problem(s):\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class SourceConfig:
    name: str
    format: str
    landing: str | None
    options: dict[str, Any] = field(default_factory=dict)
    file: str = ""

    @property
    def bronze_table(self) -> str:
        return f"bronze_{self.name}"

    @property
    def quarantine_table(self) -> str:
        return f"quarantine_{self.name}"


@dataclass(frozen=True)
class TableConfig:
    name: str
    source: SourceConfig
    schema: str
    table: str
    keys: tuple[str, ...] = ()
    columns: tuple[dict[str, Any], ...] = ()
    scd_types: tuple[int, ...] = (1, 2)
    sequence_by: str | None = None
    column_list: tuple[str, ...] | None = None
    except_column_list: tuple[str, ...] | None = None
    track_history_column_list: tuple[str, ...] | None = None
    track_history_except_column_list: tuple[str, ...] | None = None
    ignore_null_updates: bool = False
    expectations: tuple[dict[str, Any], ...] = ()
    partition_cols: tuple[str, ...] | None = None
    cluster_by: tuple[str, ...] | None = None
    table_properties: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, str] = field(default_factory=dict)
    file: str = ""

    @property
    def silver_table(self) -> str:
        return self.targets.get("silver", f"silver_{self.name}")

    @property
    def scd1_table(self) -> str:
        return self.targets.get("scd1", f"gold_{self.name}_scd1")

    @property
    def scd2_table(self) -> str:
        return self.targets.get("scd2", f"gold_{self.name}_scd2")

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    sources: dict[str, SourceConfig]
    tables: tuple[TableConfig, ...]
    file: str

    def tables_of(self, source: str) -> list[TableConfig]:
        return [t for t in self.tables if t.source.name == source]


@lru_cache(maxsize=None)
def _registry() -> Registry:
    resources = []
    for path in SCHEMAS_DIR.glob("*.schema.json"):
        contents = json.loads(path.read_text())
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


@lru_cache(maxsize=None)
def validator(schema_file: str) -> Draft202012Validator:
    """A validator for ``schemas/<schema_file>``, resolving references between our schemas."""
    schema = json.loads((SCHEMAS_DIR / schema_file).read_text())
    return Draft202012Validator(schema, registry=_registry())


def _line_index(text: str) -> dict[tuple, int]:
    """Map field paths (tuples of keys/indexes) to 1-based line numbers in a YAML document."""
    index: dict[tuple, int] = {}

    def walk(node, path):
        index[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                index[path + (k.value,)] = k.start_mark.line + 1
                walk(v, path + (k.value,))
                index[path + (k.value,)] = k.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path + (i,))

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return index
    if root is not None:
        walk(root, ())
    return index


def _read_yaml(path: Path, problems: list[str]) -> tuple[Any, dict[tuple, int]]:
    try:
        text = path.read_text()
    except OSError as e:
        problems.append(f"{path}: cannot read: {e.strerror}")
        return None, {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problems.append(f"{where}: not valid YAML: {getattr(e, 'problem', e)}")
        return None, {}
    return data, _line_index(text)


def _fmt_path(path: Iterable) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else str(p) for p in path]
    return ".".join(parts).replace(".[", "[") or "(top level)"


def schema_problems(data: Any, schema_file: str, file: Path, lines: dict[tuple, int]) -> list[str]:
    """Every JSON Schema violation of ``data``, as ``file:line: field: message``."""
    out = []
    for err in sorted(validator(schema_file).iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        path = tuple(err.absolute_path)
        message = err.message
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            for name in extra:
                line = lines.get(path + (name,), lines.get(path, 1))
                out.append(f"{file}:{line}: {_fmt_path(path + (name,))}: unknown field (allowed: "
                           f"{', '.join(sorted(err.schema.get('properties', {})))})")
            continue
        line = lines.get(path, lines.get(path[:-1], 1))
        out.append(f"{file}:{line}: {_fmt_path(path)}: {message}")
    return out


def load_pipeline(path: str | Path) -> PipelineConfig:
    """Load ``path`` and the table configs it names; raise :class:`ConfigError` with every problem."""
    path = Path(path)
    problems: list[str] = []
    data, lines = _read_yaml(path, problems)
    if problems:
        raise ConfigError(problems)
    if data is None:
        raise ConfigError([f"{path}:1: (top level): the file is empty"])
    problems += schema_problems(data, "pipeline-config.schema.json", path, lines)
    if problems:
        raise ConfigError(problems)

    base = path.parent
    sources = {
        name: SourceConfig(
            name=name,
            format=s["format"],
            landing=_resolve(base, s.get("landing")),
            options=dict(s.get("options") or {}),
            file=str(path),
        )
        for name, s in data["sources"].items()
    }
    defaults = data.get("defaults") or {}

    table_docs: list[tuple[Path, Any, dict]] = []
    for i, inline in enumerate(data.get("tables") or []):
        sub = {k[2:]: v for k, v in lines.items() if k[:2] == ("tables", i)}
        table_docs.append((path, inline, sub))
    tables_dir = base / data.get("tables_dir", "tables")
    if tables_dir.is_dir():
        for tf in sorted(list(tables_dir.glob("*.yml")) + list(tables_dir.glob("*.yaml"))):
            doc, tlines = _read_yaml(tf, problems)
            if doc is None and not any(p.startswith(str(tf)) for p in problems):
                problems.append(f"{tf}:1: (top level): the file is empty")
            if doc is not None:
                table_docs.append((tf, doc, tlines))
    elif "tables_dir" in data:
        problems.append(f"{path}:{lines.get(('tables_dir',), 1)}: tables_dir: folder {tables_dir} does not exist")

    tables: list[TableConfig] = []
    for tf, doc, tlines in table_docs:
        errs = schema_problems(doc, "table-config.schema.json", tf, tlines)
        if errs:
            problems += errs
            continue
        t = _table(doc, tf, tlines, sources, defaults, problems)
        if t is not None:
            tables.append(t)

    seen: dict[str, str] = {}
    for t in tables:
        for target in (t.silver_table, t.scd1_table, t.scd2_table):
            if target in seen and seen[target] != t.file:
                problems.append(f"{t.file}:1: name: target table {target!r} is also produced by {seen[target]}")
            seen[target] = t.file
    if problems:
        raise ConfigError(problems)
    return PipelineConfig(name=data["name"], sources=sources, tables=tuple(tables), file=str(path))


def _resolve(base: Path, landing: str | None) -> str | None:
    if landing is None or "://" in landing:
        return landing
    p = Path(landing)
    return str(p if p.is_absolute() else (base / p).resolve())


def _table(doc: dict, file: Path, lines: dict, sources: dict, defaults: dict, problems: list[str]) -> TableConfig | None:
    def where(field_name: str) -> str:
        return f"{file}:{lines.get((field_name,), 1)}: {field_name}"

    src_name = doc.get("source")
    if src_name is None:
        if len(sources) != 1:
            problems.append(f"{where('source')}: required when the pipeline has several sources ({', '.join(sources)})")
            return None
        src_name = next(iter(sources))
    if src_name not in sources:
        problems.append(f"{where('source')}: unknown source {src_name!r}; the pipeline defines {', '.join(sources)}")
        return None
    parts = doc["table"].split(".")
    schema, table = (parts if len(parts) == 2 else [defaults.get("schema", "dbo"), parts[0]])
    name = doc.get("name") or table.lower()
    if not name.replace("_", "a").isalnum() or name[0].isdigit():
        problems.append(f"{where('table')}: cannot derive a table name from {table!r}; set `name:`")
        return None
    if doc.get("column_list") and doc.get("except_column_list"):
        problems.append(f"{where('column_list')}: give column_list or except_column_list, not both")
    if doc.get("track_history_column_list") and doc.get("track_history_except_column_list"):
        problems.append(
            f"{where('track_history_column_list')}: give track_history_column_list or "
            "track_history_except_column_list, not both"
        )
    tup = lambda k: tuple(doc[k]) if doc.get(k) is not None else None  # noqa: E731
    return TableConfig(
        name=name,
        source=sources[src_name],
        schema=schema,
        table=table,
        keys=tuple(doc.get("keys") or ()),
        columns=tuple(doc.get("columns") or ()),
        scd_types=tuple(doc.get("scd_types") or defaults.get("scd_types") or (1, 2)),
        sequence_by=doc.get("sequence_by"),
        column_list=tup("column_list"),
        except_column_list=tup("except_column_list"),
        track_history_column_list=tup("track_history_column_list"),
        track_history_except_column_list=tup("track_history_except_column_list"),
        ignore_null_updates=bool(doc.get("ignore_null_updates", False)),
        expectations=tuple(doc.get("expectations") or ()),
        partition_cols=tup("partition_cols"),
        cluster_by=tup("cluster_by"),
        table_properties=dict(doc.get("table_properties") or {}),
        comment=doc.get("comment"),
        options=dict(doc.get("options") or {}),
        targets=dict(doc.get("targets") or {}),
        file=str(file),
    )
