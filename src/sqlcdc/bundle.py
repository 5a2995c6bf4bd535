"""Checks of the Databricks asset bundle (``databricks.yml`` + the ``resources/*.yml`` it includes),
without a workspace: what ``databricks bundle validate`` would refuse, and a few things it would not.

- ``databricks.yml`` against a JSON Schema of the bundle's top level (bundle, include, variables,
  targets with ``mode: development|production``, ...);
- every resource against the typed resource models of the ``databricks-bundles`` package
  (``Pipeline.from_dict``, ``Job.from_dict``, ``Dashboard.from_dict``: unknown fields and wrong
  types are refused), when it is installed;
- every path the bundle names exists: included files, pipeline libraries and ``root_path``, job
  notebooks/scripts, dashboard files, and the ``sqlcdc.config`` the pipeline is configured with;
  every definition file beside the pipeline's libraries is one of them; a local wheel the pipeline
  installs exists or a ``whl`` artifact builds it;
- ``${var.x}`` names a declared variable, ``${resources.<kind>.<name>...}`` a declared resource;
- a dashboard file is Lakeview JSON with pages, and its widgets name datasets it defines.

Problems are ``file:line: field.path: message``, like config problems.

Example::

    from sqlcdc.bundle import bundle_problems
    for p in bundle_problems("databricks.yml"):
        print(p)
"""

from __future__ import annotations

import glob as _glob
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml
from jsonschema import Draft202012Validator

from sqlcdc.diagnostics import fmt_path, line_index

# The bundle's top level (databricks.yml). Resource bodies are checked by the typed models instead.
BUNDLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["bundle"],
    "properties": {
        "bundle": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1}},
        },
        "include": {"type": "array", "items": {"type": "string"}},
        "variables": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "description": {"type": "string"},
                    "default": {},
                    "type": {"enum": ["complex"]},
                    "lookup": {"type": "object", "minProperties": 1, "maxProperties": 1},
                },
            },
        },
        "targets": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": ["object", "null"],
                "additionalProperties": False,
                "properties": {
                    "mode": {"enum": ["development", "production"]},
                    "default": {"type": "boolean"},
                    "workspace": {"type": "object"},
                    "variables": {"type": "object"},
                    "resources": {"type": "object"},
                    "permissions": {"type": "array"},
                    "run_as": {"type": "object"},
                    "presets": {"type": "object"},
                    "sync": {"type": "object"},
                    "artifacts": {"type": "object"},
                    "git": {"type": "object"},
                    "bundle": {"type": "object"},
                    "cluster_id": {"type": "string"},
                },
            },
        },
        "resources": {"type": "object"},
        "sync": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "include": {"type": "array", "items": {"type": "string"}},
                "exclude": {"type": "array", "items": {"type": "string"}},
                "paths": {"type": "array", "items": {"type": "string"}},
            },
        },
        "workspace": {"type": "object"},
        "artifacts": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "type": {"enum": ["whl", "jar"]},
                    "path": {"type": "string"},
                    "build": {"type": "string"},
                    "executable": {"enum": ["bash", "sh", "cmd"]},
                    "dynamic_version": {"type": "boolean"},
                    "files": {
                        "type": "array",
                        "items": {"type": "object", "additionalProperties": False, "required": ["source"],
                                  "properties": {"source": {"type": "string"}}},
                    },
                },
            },
        },
        "permissions": {"type": "array"},
        "run_as": {"type": "object"},
        "presets": {"type": "object"},
        "experimental": {"type": "object"},
        "scripts": {"type": "object"},
        "python": {"type": "object"},
    },
}

_REF = re.compile(r"\$\{([^}]+)\}")


@dataclass
class _Doc:
    path: Path
    data: Any
    lines: dict[tuple, int] = field(default_factory=dict)

    def at(self, keys: tuple) -> str:
        line = self.lines.get(keys)
        k = keys
        while line is None and k:
            k = k[:-1]
            line = self.lines.get(k)
        return f"{self.path}:{line or 1}: {fmt_path(keys)}"


def _read(path: Path, problems: list[str]) -> _Doc | None:
    try:
        text = path.read_text()
        return _Doc(path, yaml.safe_load(text), line_index(text))
    except OSError as e:
        problems.append(f"{path}: cannot read: {e.strerror}")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problems.append(f"{path}:{mark.line + 1 if mark else 1}: not valid YAML: {getattr(e, 'problem', e)}")
    return None


def bundle_files(bundle: str | Path) -> list[Path]:
    """``databricks.yml`` and the files its ``include:`` globs match, in order."""
    bundle = Path(bundle)
    data = yaml.safe_load(bundle.read_text()) or {}
    out = [bundle]
    for pattern in data.get("include") or []:
        out += sorted(Path(p) for p in _glob.glob(str(bundle.parent / pattern), recursive=True))
    return out


def deployed_config(bundle: str | Path) -> Path | None:
    """The pipeline config the bundle deploys: its ``config_path`` variable's default, resolved
    from the bundle root (None when it declares none)."""
    bundle = Path(bundle)
    try:
        data = yaml.safe_load(bundle.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    default = ((data.get("variables") or {}).get("config_path") or {}).get("default")
    return (bundle.parent / default).resolve() if isinstance(default, str) and "${" not in default else None


def dashboard_files(bundle: str | Path) -> list[Path]:
    """The ``.lvdash.json`` files the bundle's dashboard resources name (those that exist)."""
    out = []
    for f in bundle_files(bundle)[1:]:
        try:
            data = yaml.safe_load(f.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue  # bundle_problems reports it
        for body in ((data.get("resources") or {}).get("dashboards") or {}).values():
            rel = (body or {}).get("file_path")
            if isinstance(rel, str) and "${" not in rel and (f.parent / rel).is_file():
                out.append((f.parent / rel).resolve())
    return out


def bundle_problems(bundle: str | Path) -> list[str]:
    """Every problem of the bundle rooted at ``bundle`` (a ``databricks.yml``)."""
    bundle = Path(bundle)
    root = bundle.parent
    problems: list[str] = []
    top = _read(bundle, problems)
    if top is None:
        return problems
    if not isinstance(top.data, dict):
        return [f"{bundle}:1: (top level): expected a mapping"]
    for err in Draft202012Validator(BUNDLE_SCHEMA).iter_errors(top.data):
        keys = tuple(err.absolute_path)
        if err.validator == "additionalProperties":
            for extra in sorted(set(err.instance) - set(err.schema.get("properties", {}))):
                problems.append(f"{top.at(keys + (extra,))}: unknown field")
        else:
            problems.append(f"{top.at(keys)}: {err.message}")

    docs = [top]
    for i, pattern in enumerate(top.data.get("include") or []):
        matched = sorted(Path(p) for p in _glob.glob(str(root / pattern), recursive=True))
        if not matched:
            problems.append(f"{top.at(('include', i))}: {pattern!r} matches no file")
        for p in matched:
            doc = _read(p, problems)
            if doc is not None and doc.data is not None:
                if not isinstance(doc.data, dict):
                    problems.append(f"{p}:1: (top level): expected a mapping")
                    continue
                unknown = sorted(set(doc.data) - {"resources", "variables", "targets", "sync", "artifacts"})
                for k in unknown:
                    problems.append(f"{doc.at((k,))}: not allowed in an included file")
                docs.append(doc)

    artifacts = dict(top.data.get("artifacts") or {})
    for aname, spec in artifacts.items():
        if isinstance(spec, dict) and not spec.get("build") and not spec.get("files"):
            problems.append(f"{top.at(('artifacts', aname))}: needs build (a command that writes the artifact) "
                            "or files (prebuilt ones)")
    variables = dict(top.data.get("variables") or {})
    for doc in docs[1:]:
        variables.update(doc.data.get("variables") or {})
        artifacts.update(doc.data.get("artifacts") or {})
    resources: dict[tuple[str, str], tuple[_Doc, dict]] = {}
    for doc in docs:
        for kind, items in (doc.data.get("resources") or {}).items():
            for name, body in (items or {}).items():
                resources[(kind, name)] = (doc, body)

    # Targets: modes, variables they set must be declared, at most one default.
    defaults = []
    for tname, target in (top.data.get("targets") or {}).items():
        target = target or {}
        if target.get("default"):
            defaults.append(tname)
        for v in target.get("variables") or {}:
            if v not in variables:
                problems.append(f"{top.at(('targets', tname, 'variables', v))}: variable {v!r} is not declared under variables:")
    if len(defaults) > 1:
        problems.append(f"{top.at(('targets',))}: more than one default target ({', '.join(defaults)})")

    problems += _reference_problems(docs, variables, resources)
    for (kind, name), (doc, body) in resources.items():
        problems += _typed_problems(kind, name, doc, body)
        problems += _path_problems(kind, name, doc, body, root, variables, artifacts)
    return problems


def _walk(node: Any, keys: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _walk(v, keys + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, keys + (i,))
    else:
        yield keys, node


def _reference_problems(docs: list[_Doc], variables: dict, resources: dict) -> list[str]:
    out = []
    for doc in docs:
        for keys, value in _walk(doc.data):
            if not isinstance(value, str):
                continue
            for ref in _REF.findall(value):
                parts = ref.split(".")
                if parts[0] == "var" and len(parts) >= 2 and parts[1] not in variables:
                    out.append(f"{doc.at(keys)}: ${{{ref}}} names no declared variable")
                elif parts[0] == "resources" and (len(parts) < 3 or (parts[1], parts[2]) not in resources):
                    out.append(f"{doc.at(keys)}: ${{{ref}}} names no resource of this bundle")
    return out


def _typed_problems(kind: str, name: str, doc: _Doc, body: Any) -> list[str]:
    """Check one resource with the databricks-bundles typed model of its kind."""
    model = _models().get(kind)
    where = doc.at(("resources", kind, name))
    if not isinstance(body, dict):
        return [f"{where}: expected a mapping"]
    if model is None:
        return []
    try:
        model.from_dict(dict(body))
    except (ValueError, TypeError, KeyError) as e:
        return [f"{where}: not a valid {model.__name__} ({e})"]
    return []


def _models() -> dict[str, Any]:
    try:
        from databricks.bundles.dashboards import Dashboard
        from databricks.bundles.jobs import Job
        from databricks.bundles.pipelines import Pipeline
        from databricks.bundles.schemas import Schema
        from databricks.bundles.volumes import Volume
    except ImportError:  # the package is a dev extra; without it the other checks still run
        return {}
    return {"pipelines": Pipeline, "jobs": Job, "dashboards": Dashboard, "schemas": Schema, "volumes": Volume}


def have_typed_models() -> bool:
    """True when ``databricks-bundles`` is installed, so resources are checked with its models."""
    return bool(_models())


def _resolve_vars(value: str, variables: dict) -> str:
    def sub(m: re.Match) -> str:
        parts = m.group(1).split(".")
        if parts[0] == "var" and len(parts) == 2 and isinstance((variables.get(parts[1]) or {}).get("default"), str):
            return variables[parts[1]]["default"]
        return m.group(0)

    return _REF.sub(sub, value)


def _built_by_artifact(wanted: Path, artifacts: dict, root: Path) -> bool:
    """True when a ``whl`` artifact with a ``build`` command writes into ``wanted``'s folder
    (the CLI collects ``<artifact path>/dist/*.whl`` after the build)."""
    for spec in artifacts.values():
        if isinstance(spec, dict) and spec.get("build") and spec.get("type", "whl") == "whl":
            if wanted.parent == (root / str(spec.get("path") or ".") / "dist").resolve():
                return True
    return False


def _path_problems(
    kind: str, name: str, doc: _Doc, body: dict, root: Path, variables: dict, artifacts: dict,
) -> list[str]:
    out: list[str] = []
    base = doc.path.parent
    here = ("resources", kind, name)

    def must_exist(keys: tuple, rel: Any, *, folder: bool = False) -> Path | None:
        if not isinstance(rel, str) or "${" in rel:
            return None
        p = (base / rel).resolve()
        ok = p.is_dir() if folder else p.is_file()
        if not ok:
            out.append(f"{doc.at(here + keys)}: no such {'folder' if folder else 'file'} {rel} ({p})")
            return None
        return p

    if kind == "pipelines":
        named: set[Path] = set()
        for i, lib in enumerate(body.get("libraries") or []):
            lib = lib or {}
            for k in ("file", "notebook"):
                if isinstance(lib.get(k), dict):
                    p = must_exist(("libraries", i, k, "path"), lib[k].get("path"))
                    if p:
                        named.add(p)
            if isinstance(lib.get("glob"), dict) and isinstance(lib["glob"].get("include"), str):
                pattern = lib["glob"]["include"]
                hits = [Path(h).resolve() for h in _glob.glob(str(base / pattern), recursive=True) if Path(h).is_file()]
                if not hits:
                    out.append(f"{doc.at(here + ('libraries', i, 'glob', 'include'))}: {pattern!r} matches no file")
                named.update(hits)
        if body.get("root_path") is not None:
            must_exist(("root_path",), body.get("root_path"), folder=True)
        for key, value in (body.get("configuration") or {}).items():
            if isinstance(value, str) and value.startswith("${workspace.file_path}/"):
                rel = _resolve_vars(value[len("${workspace.file_path}/"):], variables)
                if "${" not in rel and not (root / rel).is_file():
                    out.append(f"{doc.at(here + ('configuration', key))}: no such file {rel} in the bundle ({root / rel})")
        # Every definition file beside the pipeline's own belongs to it: a forgotten one is a missing layer.
        for defs in sorted({p.parent for p in named}):
            for f in sorted(defs.glob("*.py")):
                if f.name != "__init__.py" and not f.name.startswith("_") and f.resolve() not in named:
                    shown = f.relative_to(root) if f.is_relative_to(root) else f
                    out.append(f"{doc.at(here + ('libraries',))}: {shown} is not a library of this pipeline")
        # A local wheel it installs exists, or an artifact of the bundle builds it.
        for i, dep in enumerate((body.get("environment") or {}).get("dependencies") or []):
            if isinstance(dep, str) and dep.startswith(("./", "../")) and dep.endswith(".whl"):
                wanted = (base / dep).resolve()
                if not (_glob.glob(str(wanted)) or _built_by_artifact(wanted, artifacts, root)):
                    out.append(f"{doc.at(here + ('environment', 'dependencies', i))}: {dep} matches no wheel, and "
                               f"no artifact of the bundle builds one there")
    elif kind == "jobs":
        for i, task in enumerate(body.get("tasks") or []):
            task = task or {}
            if isinstance(task.get("notebook_task"), dict):
                must_exist(("tasks", i, "notebook_task", "notebook_path"), task["notebook_task"].get("notebook_path"))
            if isinstance(task.get("spark_python_task"), dict):
                must_exist(("tasks", i, "spark_python_task", "python_file"), task["spark_python_task"].get("python_file"))
    elif kind == "dashboards":
        p = must_exist(("file_path",), body.get("file_path"))
        if p is not None:
            out += [f"{p}:1: {msg}" for msg in lakeview_problems(p)]
    return out


def lakeview_problems(path: str | Path) -> list[str]:
    """Structure problems of a Lakeview ``.lvdash.json`` (datasets, pages, widgets naming datasets)."""
    try:
        doc = json.loads(Path(path).read_text())
    except ValueError as e:
        return [f"not valid JSON: {e}"]
    if not isinstance(doc, dict):
        return ["(top level): expected an object"]
    out = []
    pages = doc.get("pages")
    if not isinstance(pages, list) or not pages:
        out.append("pages: a dashboard needs at least one page")
        pages = []
    datasets = doc.get("datasets") or []
    names = [d.get("name") for d in datasets if isinstance(d, dict)]
    for i, d in enumerate(datasets):
        if not isinstance(d, dict) or not d.get("name"):
            out.append(f"datasets[{i}].name: required")
        elif not (d.get("queryLines") or d.get("query")):
            out.append(f"datasets[{i}]: needs queryLines (or query)")
    for i, page in enumerate(pages):
        if not isinstance(page, dict) or not page.get("name") or not page.get("displayName"):
            out.append(f"pages[{i}]: needs name and displayName")
            continue
        for j, item in enumerate(page.get("layout") or []):
            widget = (item or {}).get("widget") or {}
            if not widget.get("name"):
                out.append(f"pages[{i}].layout[{j}].widget.name: required")
            for k, q in enumerate(widget.get("queries") or []):
                ds = ((q or {}).get("query") or {}).get("datasetName")
                if ds not in names:
                    out.append(f"pages[{i}].layout[{j}].widget.queries[{k}].query.datasetName: no dataset named {ds!r}")
    return out
