"""Line-numbered diagnostics for YAML/JSON documents checked against JSON Schemas.

Every problem is one line, ``file:line: field.path: message``, so a person can jump to it:
:func:`read_yaml` reads a document and indexes each field's line (:func:`line_index`), names keys
given twice; :func:`schema_problems` checks it against one of the package's schemas
(``sqlcdc/schemas/``, references between them resolved), :func:`options_problems` against an
inline schema (a decoder's options). Config loading (:mod:`sqlcdc.config`), the bundle checker
(:mod:`sqlcdc.bundle`) and ``sqlcdc init`` use them.

Example::

    problems: list[str] = []
    data, lines = read_yaml(Path("config/tables/orders.yml"), problems)
    problems += schema_problems(data, "table-config.schema.json", Path("config/tables/orders.yml"), lines)
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

from sqlcdc.assets import SCHEMAS_DIR

__all__ = ["fmt_path", "line_index", "options_problems", "read_yaml", "schema_problems", "validator"]


@lru_cache(maxsize=None)
def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMAS_DIR.glob("*.schema.json")):
        try:
            contents = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # an envelope schema being edited must not break config loading
        resources.append((contents.get("$id", f"sqlcdc/{path.name}"), Resource.from_contents(contents)))
    return Registry().with_resources(resources)


@lru_cache(maxsize=None)
def validator(schema_file: str, enums: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> Draft202012Validator:
    """A validator for ``schemas/<schema_file>``, resolving references between our schemas.

    ``enums``: ``(property, values)`` pairs that replace the ``enum`` of every property of that
    name, for values known only at run time (the ``format`` of every installed decoder)."""
    schema = json.loads((SCHEMAS_DIR / schema_file).read_text())
    given = dict(enums)

    def replace(node: Any) -> None:
        if isinstance(node, dict):
            for name, sub in (node.get("properties") or {}).items():
                if name in given and isinstance(sub, dict) and "enum" in sub:
                    sub["enum"] = list(given[name])
            for value in node.values():
                replace(value)
        elif isinstance(node, list):
            for value in node:
                replace(value)

    replace(schema)
    return Draft202012Validator(schema, registry=_registry())


def line_index(text: str) -> dict[tuple, int]:
    """Map field paths (tuples of keys/indexes) to 1-based line numbers in a YAML document (a key
    given twice maps to its last line, the one YAML keeps)."""
    return _walk(text)[0]


def _walk(text: str) -> tuple[dict[tuple, int], list[tuple[tuple, int, int]]]:
    """One pass over the composed document: the line index, and every key given twice in one
    mapping as (field path, its line, the line it was first given on)."""
    index: dict[tuple, int] = {}
    twice: list[tuple[tuple, int, int]] = []

    def walk(node, path):
        index[path] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for k, v in node.value:
                line = k.start_mark.line + 1
                if k.value in seen:
                    twice.append((path + (k.value,), line, seen[k.value]))
                seen.setdefault(k.value, line)
                index[path + (k.value,)] = line
                walk(v, path + (k.value,))
                index[path + (k.value,)] = line
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path + (i,))

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return index, twice
    if root is not None:
        walk(root, ())
    return index, twice


def read_yaml(path: Path, problems: list[str]) -> tuple[Any, dict[tuple, int]]:
    """The document at ``path`` and its line index; what cannot be read, and keys given twice
    (YAML loaders keep the last silently), go to ``problems``."""
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
    index, twice = _walk(text)
    problems += [f"{path}:{line}: {fmt_path(keys)}: given twice (first on line {first}); YAML would keep only this one"
                 for keys, line, first in twice]
    return data, index


def fmt_path(path: Iterable) -> str:
    parts = [f"[{p}]" if isinstance(p, int) else str(p) for p in path]
    return ".".join(parts).replace(".[", "[") or "(top level)"


def _leaf_errors(err):
    """``oneOf``/``anyOf`` errors say little ("is not valid under any of the given schemas"): descend
    into the branch that matched best, so the report names the field and what was expected."""
    while err.validator in ("oneOf", "anyOf") and err.context:
        branches: dict[Any, list] = {}
        for sub in err.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        # A branch for another JSON type (a list where a mapping was given) explains nothing.
        fitting = [
            errs for errs in branches.values()
            if not any(e.validator == "type" and not e.relative_path for e in errs)
        ] or list(branches.values())
        deepest = max(fitting, key=lambda errs: max(len(e.relative_path) for e in errs))
        err = best_match(deepest)
    return err


def schema_problems(data: Any, schema_file: str, file: Path, lines: dict[tuple, int],
                    enums: dict[str, list[str]] | None = None) -> list[str]:
    """Every JSON Schema violation of ``data``, as ``file:line: field: message``, in line order
    (``enums``: see :func:`validator`)."""
    frozen = tuple(sorted((k, tuple(v)) for k, v in (enums or {}).items()))
    return _violations(validator(schema_file, frozen), data, file, lines)


def options_problems(options: Any, schema: dict[str, Any], file: Path, lines: dict[tuple, int],
                     at: tuple = ("options",)) -> list[str]:
    """The problems of a producer's ``options:`` mapping at field path ``at`` against the JSON
    Schema properties its decoder declares (:attr:`sqlcdc.formats.Decoder.options`): an option
    it does not know is refused (with the closest known name), a value of the wrong type named."""
    if not isinstance(options, dict):
        return []
    checker = Draft202012Validator({"type": "object", "additionalProperties": False, "properties": schema})
    return _violations(checker, options, file, lines, at)


def _violations(checker: Draft202012Validator, data: Any, file: Path, lines: dict[tuple, int],
                prefix: tuple = ()) -> list[str]:
    out: list[tuple[int, str]] = []
    for err in (_leaf_errors(e) for e in checker.iter_errors(data)):
        path = prefix + tuple(err.absolute_path)
        message = err.message
        if err.validator == "additionalProperties":
            allowed = sorted(err.schema.get("properties", {}))
            for name in sorted(set(err.instance) - set(allowed)):
                line = lines.get(path + (name,), lines.get(path, 1))
                close = difflib.get_close_matches(str(name), allowed, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
                split = [k for k, v in err.instance.items() if isinstance(v, str) and v.count("(") > v.count(")")]
                if split:
                    hint += f"; {split[0]!r} looks cut at a comma: quote the value, e.g. '{err.instance[split[0]]}{name}'"
                out.append((line, f"{file}:{line}: {fmt_path(path + (name,))}: unknown field ({hint})"))
            continue
        if err.validator == "required":
            line = lines.get(path, 1)
            for name in err.validator_value:
                if isinstance(err.instance, dict) and name not in err.instance:
                    out.append((line, f"{file}:{line}: {fmt_path(path + (name,))}: required field missing"))
            continue
        if err.validator == "type":
            want = err.validator_value if isinstance(err.validator_value, str) else " or ".join(err.validator_value)
            message = f"expected {_TYPE_WORDS.get(want, want)}, got {_describe(err.instance)}"
        elif err.validator == "enum":
            message = f"{err.instance!r} is not one of {', '.join(map(repr, err.validator_value))}"
        elif err.validator == "pattern" and "A-Za-z_" in str(err.validator_value):
            message = f"{err.instance!r} is not a valid name (letters, digits, underscore; not starting with a digit)"
        elif err.validator == "pattern" and path == ("table",):
            message = f"{err.instance!r}: expected schema.table or table"
        elif err.validator == "minItems" and err.validator_value == 1:
            message = "must not be empty"
        elif err.validator == "uniqueItems":
            message = "lists a value twice"
        line = lines.get(path, lines.get(path[:-1], 1))
        out.append((line, f"{file}:{line}: {fmt_path(path)}: {message}"))
    return [text for _, text in sorted(out, key=lambda x: x[0])]


_TYPE_WORDS = {
    "array": "a list",
    "object": "a mapping",
    "string": "a string",
    "integer": "an integer",
    "boolean": "true or false",
    "number": "a number",
}


def _describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value!r})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
