"""Load and check the declarative config: one pipeline file plus one file per table.

Every problem is reported at once, each with file, line, field path and what was expected::

    config/tables/orders.yml:3: keys: 'id' is not of type 'array'
    config/tables/orders.yml:1: (top level): unknown field 'keyz'

Table configs can name expectations inline or by ``expectations_file:``; either way
``TableConfig.expectations`` holds them normalized as ``{"name", "constraint", "action"[, "description"]}``
and ``TableConfig.expectation_sources`` says where each came from (``file:line``). Field-by-field
reference: ``docs/config.md`` (generated from the same descriptions as ``schemas/`` by
``scripts/config_reference.py``). Line-numbered diagnostics: :mod:`sqlcdc.diagnostics`; rule
normalisation: :mod:`sqlcdc.rules`.

Example::

    from sqlcdc.config import load_pipeline
    cfg = load_pipeline("config/pipeline.yml")
    for table in cfg.tables:
        print(table.name, table.source.format, table.keys)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlcdc.diagnostics import fmt_path, options_problems, read_yaml, schema_problems
from sqlcdc.names import RESERVED_LIST, reserved, unstorable
from sqlcdc.rules import load_expectations_file, normalize_expectations


class ConfigError(Exception):
    """Config problems, all of them: ``problems`` lists ``file:line: field: message`` strings."""

    def __init__(self, problems: list[str], config: "PipelineConfig | None" = None):
        self.problems = problems
        #: What did load (the tables without problems), so a checker can go on checking those.
        self.config = config
        super().__init__(f"{len(problems)} config problem(s):\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class SourceConfig:
    name: str
    format: str
    landing: str | None
    options: dict[str, Any] = field(default_factory=dict)
    file: str = ""
    description: str | None = None
    comment: str | None = None
    file_format: str | None = None
    kafka: dict[str, Any] | None = None
    event_hubs: dict[str, Any] | None = None

    @property
    def location_kind(self) -> str | None:
        """``files`` (a landing folder), ``kafka``, ``event_hubs``, or None when the config names none."""
        if self.kafka is not None:
            return "kafka"
        if self.event_hubs is not None:
            return "event_hubs"
        return "files" if self.landing is not None else None

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
    ignore_null_updates_column_list: tuple[str, ...] | None = None
    ignore_null_updates_except_column_list: tuple[str, ...] | None = None
    tombstone_retention_days: float | None = None
    #: SCD2 gold with Delta deletion vectors (reader version 3: not readable by delta-rs). Off by default.
    deletion_vectors: bool = False
    #: What a value that cannot be read, or lies outside SQL Server's domain for its type, does to
    #: its change: ``quarantine`` (default) or ``warn`` (kept, the value NULL, ``bad_value_<column>``
    #: in ``dq_warnings``; see :func:`sqlcdc.values.split_value_errors`).
    bad_values: str = "quarantine"
    expectations: tuple[dict[str, Any], ...] = ()
    partition_cols: tuple[str, ...] | None = None
    cluster_by: tuple[str, ...] | None = None
    table_properties: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, str] = field(default_factory=dict)
    file: str = ""
    description: str | None = None
    comments: dict[str, str] = field(default_factory=dict)
    expectations_file: str | None = None
    #: ``file:line`` of each entry of ``expectations`` (same order), for error reports.
    expectation_sources: tuple[str, ...] = ()
    #: Producer hand-off (``sources:``): the table's name, shared by one TableConfig per listed source,
    #: and this one's place in the list (the earlier source's copy of a shared change is applied).
    handoff: str | None = None
    handoff_rank: int = 0
    #: The other tables of the same source (without peers of their own), for a decoder whose routing
    #: must see them: a Qlik message two tables could take goes to quarantine, not to both.
    peers: tuple[TableConfig, ...] = field(default=(), repr=False, compare=False)

    def comment_for(self, target: str) -> str | None:
        """The comment of target ``silver`` / ``scd1`` / ``scd2``: per-target, else ``comment``, else ``description``."""
        return self.comments.get(target) or self.comment or self.description

    @property
    def column_names(self) -> tuple[str, ...]:
        """Names of ``columns:`` (empty when the config gives no schema)."""
        return tuple(c["name"] for c in self.columns)

    @property
    def silver_table(self) -> str:
        return self.targets.get("silver", f"silver_{self.name}")

    @property
    def decoded_table(self) -> str:  # a batch source's records decoded once a run: expectations.checked_rows
        return f"decoded_{self.source.name}__{self.name}"

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
class Transactions:
    """The pipeline's ``transactions:`` (whole-transaction apply, :mod:`sqlcdc.gold.transactions`)."""

    whole: bool = True
    timeout_hours: float = 24.0
    later_commit: bool = False
    """A producer that does not say where a transaction ends (CES): complete once a later commit landed."""


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    sources: dict[str, SourceConfig]
    tables: tuple[TableConfig, ...]
    file: str
    description: str | None = None
    transactions: Transactions = Transactions()

    def table(self, name: str) -> TableConfig:
        """The table config called ``name`` (KeyError when there is none)."""
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(name)

    def tables_of(self, source: str) -> list[TableConfig]:
        return [t for t in self.tables if t.source.name == source]


def load_pipeline(path: str | Path) -> PipelineConfig:
    """Load ``path`` and the table configs it names; raise :class:`ConfigError` with every problem."""
    path = Path(path)
    problems: list[str] = []
    data, lines = read_yaml(path, problems)
    if data is None:
        raise ConfigError(problems or [f"{path}:1: (top level): the file is empty"])
    from sqlcdc import formats  # formats imports this module (ConfigError): look it up here

    # `format`: every decoder installed (built-in, or another package's entry point).
    shape = schema_problems(data, "pipeline-config.schema.json", path, lines, enums={"format": formats.available()})
    problems += shape
    pipeline_ok = not shape
    if not isinstance(data, dict):
        raise ConfigError(problems)

    base = path.parent
    sources: dict[str, SourceConfig] = {}
    if pipeline_ok:
        for name, s in data["sources"].items():
            problems += _source_problems(name, s, path, lines)
            problems += _source_options_problems(name, s, path, lines)
            sources[name] = SourceConfig(
                name=name,
                format=s["format"],
                landing=resolve_path(base, s.get("landing")),
                options=dict(s.get("options") or {}),
                file=str(path),
                description=s.get("description"),
                comment=s.get("comment"),
                file_format=s.get("file_format"),
                kafka=dict(s["kafka"]) if s.get("kafka") is not None else None,
                event_hubs=dict(s["event_hubs"]) if s.get("event_hubs") is not None else None,
            )
    defaults = (data.get("defaults") or {}) if pipeline_ok else {}

    table_docs: list[tuple[Path, Any, dict]] = []
    inline = data.get("tables") if isinstance(data.get("tables"), list) else []
    for i, doc in enumerate(inline):
        sub = {k[2:]: v for k, v in lines.items() if k[:2] == ("tables", i)}
        table_docs.append((path, doc, sub))
    tables_dir_name = data.get("tables_dir", "tables") if isinstance(data.get("tables_dir", "tables"), str) else "tables"
    tables_dir = base / tables_dir_name
    if tables_dir.is_dir():
        for tf in sorted(list(tables_dir.glob("*.yml")) + list(tables_dir.glob("*.yaml"))):
            doc, tlines = read_yaml(tf, problems)
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
        if not pipeline_ok:
            continue  # sources are unknown; the table file itself is fine as far as its schema goes
        tables += _tables(doc, tf, tlines, sources, defaults, problems)

    tables = with_peers(tables)
    seen: dict[str, str] = {}
    for i, t in enumerate(tables):
        for target in (t.silver_table, t.scd1_table, t.scd2_table):
            if target in seen and seen[target] != t.file:
                problems.append(f"{t.file}:1: name: target table {target!r} is also produced by {seen[target]}")
            seen[target] = t.file
        same = [p for p in tables[:i] if p.source.name == t.source.name and formats.get(t.source.format).same_records(p, t)]
        if same:  # each record of that table would be taken (and counted) by both
            also = "" if same[0].qualified.lower() == t.qualified.lower() else f" (as {same[0].qualified}: the same records)"
            problems.append(f"{t.file}:1: table: {t.qualified} of source {t.source.name} is also onboarded by {same[0].file}{also}")
    if problems:
        partial = PipelineConfig(name=data["name"], sources=sources, tables=tuple(tables), file=str(path),
                                 description=data.get("description")) if pipeline_ok else None
        raise ConfigError(problems, partial)
    return PipelineConfig(name=data["name"], sources=sources, tables=tuple(tables), file=str(path),
                          description=data.get("description"),
                          transactions=Transactions(**(data.get("transactions") or {})))


def with_peers(tables: list[TableConfig]) -> list[TableConfig]:
    """``tables``, each with ``peers``: the others of its source."""
    return [replace(t, peers=tuple(p for p in tables if p.source.name == t.source.name and p is not t)) for t in tables]


def resolve_path(base: Path, landing: str | None) -> str | None:
    """``landing`` (a folder, or a remote URI kept as is) made absolute from ``base``, the folder of
    the config file that names it."""
    if landing is None or "://" in landing:
        return landing
    p = Path(landing)
    return str(p if p.is_absolute() else (base / p).resolve())


#: Option names whose value is a credential: such a value must be a reference, never the secret.
_SECRET_KEY = re.compile(r"(password|passwd|secret|jaas|sharedaccesskey|connectionstring|connection_string|token|credential|api[_.-]?key)", re.I)
#: What a reference looks like: Databricks `{{secrets/scope/key}}`, or `${VAR}` / `${env:VAR}` / `${var.x}`.
_SECRET_REF = re.compile(r"^\s*(\{\{\s*secrets/[^}]+\}\}|\$\{[^}]+\})\s*$")


def secret_problems(options: Any, where: tuple, file: Path, lines: dict) -> list[str]:
    """Options whose name says "secret" but whose value is not a reference to one."""
    out = []
    if not isinstance(options, dict):
        return out
    for key, value in options.items():
        if isinstance(value, dict):
            out += secret_problems(value, where + (key,), file, lines)
        elif _SECRET_KEY.search(str(key)) and isinstance(value, str) and value and not _SECRET_REF.match(value):
            line = lines.get(where + (key,), 1)
            out.append(
                f"{file}:{line}: {fmt_path(where + (key,))}: looks like a secret written into the config; "
                "reference it instead ({{secrets/<scope>/<key>}} or ${ENV_VAR}, or a *_secret: {scope, key} field)"
            )
    return out


def _source_options_problems(name: str, s: dict, file: Path, lines: dict) -> list[str]:
    from sqlcdc import formats  # formats imports this module (ConfigError): look it up here

    try:
        decoder = formats.get(s.get("format"))
    except formats.UnknownFormat:  # the schema check names the format
        return []
    return options_problems(s.get("options"), decoder.options, file, lines, ("sources", name, "options"))


def _source_problems(name: str, s: dict, file: Path, lines: dict) -> list[str]:
    out = []
    here = ("sources", name)
    given = [k for k in ("landing", "kafka", "event_hubs") if s.get(k) is not None]
    if len(given) > 1:
        out.append(
            f"{file}:{lines.get(here + (given[1],), lines.get(here, 1))}: {fmt_path(here)}: "
            f"give one location (landing, kafka or event_hubs), not {' and '.join(given)}"
        )
    kafka = s.get("kafka")
    if kafka is not None:
        topics = [k for k in ("topic", "topics", "topic_pattern") if k in kafka]
        if len(topics) != 1:
            out.append(
                f"{file}:{lines.get(here + ('kafka',), 1)}: {fmt_path(here + ('kafka',))}: "
                f"give exactly one of topic, topics, topic_pattern (found {', '.join(topics) or 'none'})"
            )
        out += secret_problems(kafka.get("options"), here + ("kafka", "options"), file, lines)
    if s.get("event_hubs") is not None:
        out += secret_problems(s["event_hubs"].get("options"), here + ("event_hubs", "options"), file, lines)
    out += secret_problems(s.get("options"), here + ("options",), file, lines)
    return out


def _str_props(props: dict) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in props.items()}


#: The only ``sequence_by`` gold supports: the canonical sequence column of the apply frame.
_DEFAULT_SEQUENCE = "_sequence"


def _tables(doc: dict, file: Path, lines: dict, sources: dict, defaults: dict, problems: list[str]) -> list[TableConfig]:
    """The table config ``doc``: one :class:`TableConfig`, or with ``sources:`` (producer hand-off) one
    per listed source, named ``<name>__<source>``, each with its own silver and the same gold targets,
    ``handoff`` naming the group and ``handoff_rank`` its place in the list (:mod:`sqlcdc.gold.handoff`)."""
    if "sources" not in doc:
        t = _table(doc, file, lines, sources, defaults, problems)
        return [t] if t is not None else []
    at = f"{file}:{lines.get(('sources',), 1)}: sources"
    if "source" in doc or "silver" in (doc.get("targets") or {}):
        problems.append(f"{at}: give source or sources, not both; and no targets.silver (each source has its own silver)")
        return []
    entries = [e if isinstance(e, dict) else {"source": e} for e in doc["sources"]]
    names = [e["source"] for e in entries]
    if len(set(names)) != len(names):
        problems.append(f"{at}: a source is listed twice ({', '.join(names)})")
        return []
    group = doc.get("name") or doc["table"].split(".")[-1].lower()
    targets = {"scd1": f"gold_{group}_scd1", "scd2": f"gold_{group}_scd2", **(doc.get("targets") or {})}
    parts = []
    for rank, entry in enumerate(entries):
        part_doc = {k: v for k, v in doc.items() if k != "sources"}
        part_doc.update(source=entry["source"], name=f"{group}__{entry['source']}", targets=targets)
        if "options" in entry:
            part_doc["options"] = entry["options"]
        t = _table(part_doc, file, lines, sources, defaults, problems)
        if t is None:
            continue
        from sqlcdc import formats  # formats imports this module (ConfigError): look it up here

        why = formats.get(t.source.format).handoff_problem(t) if t.source.format in formats.available() else None
        if why:
            problems.append(f"{at}[{rank}]: source {t.source.name} ({t.source.format}) cannot share a table with "
                            f"another producer: {why} (docs/handoff.md)")
            continue
        parts.append(replace(t, handoff=group, handoff_rank=rank))
    return parts


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
    fmt = sources[src_name].format
    from sqlcdc import formats  # formats imports this module (ConfigError): look it up here

    decoder = formats.get(fmt) if fmt in formats.available() else None  # else the source's schema problem names it
    if decoder and not doc.get("keys") and decoder.keys_required:
        problems.append(f"{file}:1: keys: required for a {fmt} source ({decoder.keys_required})")
    if decoder and not doc.get("columns") and decoder.columns_required:
        problems.append(f"{file}:1: columns: required for a {fmt} source ({decoder.columns_required})")
    if decoder:
        problems += options_problems(doc.get("options"), decoder.options, file, lines)
    parts = doc["table"].split(".")
    schema, table = (parts if len(parts) == 2 else [defaults.get("schema", "dbo"), parts[0]])
    name = doc.get("name") or table.lower()
    if not name.replace("_", "a").isalnum() or name[0].isdigit():
        problems.append(f"{where('table')}: cannot derive a table name from {table!r}; set `name:`")
        return None
    for a, b in (
        ("column_list", "except_column_list"),
        ("track_history_column_list", "track_history_except_column_list"),
        ("partition_cols", "cluster_by"),
    ):
        if doc.get(a) and doc.get(b):
            problems.append(f"{where(a)}: give {a} or {b}, not both")
    ignore_null = [k for k in ("ignore_null_updates", "ignore_null_updates_column_list",
                               "ignore_null_updates_except_column_list") if doc.get(k)]
    if len(ignore_null) > 1:
        problems.append(f"{where(ignore_null[1])}: give one of {', '.join(ignore_null)}, not several")
    scd_types = tuple(doc.get("scd_types") or defaults.get("scd_types") or (1, 2))
    if doc.get("sequence_by") not in (None, _DEFAULT_SEQUENCE):
        # Gold orders by the canonical sequence (the producer's LSN order, ties broken by change id);
        # ordering by another expression is not built yet: refuse it here rather than at run time.
        problems.append(
            f"{where('sequence_by')}: ordering by {doc['sequence_by']!r} is not supported yet; gold applies "
            f"changes in the producer's commit order ({_DEFAULT_SEQUENCE}: LSN, then change order), "
            "locally and on Databricks. Remove sequence_by"
        )
    for k in ("track_history_column_list", "track_history_except_column_list", "deletion_vectors"):
        if doc.get(k) and 2 not in scd_types:
            problems.append(f"{where(k)}: applies to SCD type 2 only, but scd_types is {list(scd_types)}")

    # Columns named by keys and lists must exist when the config gives the schema.
    known = [c["name"] for c in doc.get("columns") or ()]
    for i, col in enumerate(doc.get("columns") or ()):
        at = f"{file}:{lines.get(('columns', i), lines.get(('columns',), 1))}: columns[{i}]"
        why = ("holds a character Delta cannot store in a column name (space , ; { } ( ) newline tab = or a backtick)"
               if unstorable(col["name"]) else f"is a name sqlcdc gives a column of its own ({RESERVED_LIST})"
               if reserved(col["name"]) else None)
        if why:
            problems.append(f"{at}.name: {col['name']!r} {why}; leave the column out of `columns:` (its values are "
                            "then not landed) or rename it at the source")
        elif decoder and (why := decoder.config_type_problem(col, i + 1)):
            problems.append(f"{at}.type: {why}")
    if known:
        dup = sorted({c for c in known if known.count(c) > 1})
        if dup:
            problems.append(f"{where('columns')}: column(s) listed twice: {', '.join(dup)}")
        for k in ("keys", "column_list", "except_column_list", "track_history_column_list",
                  "track_history_except_column_list", "ignore_null_updates_column_list",
                  "ignore_null_updates_except_column_list", "partition_cols", "cluster_by"):
            for i, col in enumerate(doc.get(k) or ()):
                if col not in known:
                    line = lines.get((k, i), lines.get((k,), 1))
                    problems.append(f"{file}:{line}: {k}[{i}]: unknown column {col!r} (columns: {', '.join(known)})")

    rules = normalize_expectations(doc.get("expectations") or [], file, lines, ("expectations",))
    if doc.get("expectations_file"):
        rules += load_expectations_file(doc["expectations_file"], file, lines, problems)
    names: dict[str, str] = {}
    for rule, at in rules:
        if rule["name"] in names:
            problems.append(f"{at}: expectations: rule name {rule['name']!r} is used twice (first at {names[rule['name']]})")
        names.setdefault(rule["name"], at)

    tup = lambda k: tuple(doc[k]) if doc.get(k) is not None else None  # noqa: E731
    return TableConfig(
        name=name,
        source=sources[src_name],
        schema=schema,
        table=table,
        keys=tuple(doc.get("keys") or ()),
        columns=tuple(doc.get("columns") or ()),
        scd_types=scd_types,
        sequence_by=doc.get("sequence_by"),
        column_list=tup("column_list"),
        except_column_list=tup("except_column_list"),
        track_history_column_list=tup("track_history_column_list"),
        track_history_except_column_list=tup("track_history_except_column_list"),
        ignore_null_updates=bool(doc.get("ignore_null_updates", False)),
        ignore_null_updates_column_list=tup("ignore_null_updates_column_list"),
        ignore_null_updates_except_column_list=tup("ignore_null_updates_except_column_list"),
        tombstone_retention_days=doc.get("tombstone_retention_days"),
        deletion_vectors=bool(doc.get("deletion_vectors", False)),
        bad_values=doc.get("bad_values", defaults.get("bad_values", "quarantine")),
        expectations=tuple(r for r, _ in rules),
        partition_cols=tup("partition_cols"),
        cluster_by=tup("cluster_by"),
        table_properties=_str_props({**(defaults.get("table_properties") or {}), **(doc.get("table_properties") or {})}),
        comment=doc.get("comment"),
        options=dict(doc.get("options") or {}),
        targets=dict(doc.get("targets") or {}),
        file=str(file),
        description=doc.get("description"),
        comments=dict(doc.get("comments") or {}),
        expectations_file=doc.get("expectations_file"),
        expectation_sources=tuple(at for _, at in rules),
    )
