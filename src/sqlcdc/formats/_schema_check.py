"""Envelope validation on the hot path: a JSON Schema subset compiled into Spark column predicates.

``jsonschema`` validates ~9.5k envelopes/s per core (DESIGN.md, "Figures"), several times the cost
of the whole parse. So the schema files in ``schemas/`` stay the definition, and this module
compiles them into Spark predicates over a VARIANT (``try_parse_json``) of the document; only the
rows that fail are handed to ``jsonschema`` (in a vectorized pandas UDF) to produce the message.
``tests/test_ces.py`` checks that both agree on generated good and bad documents.

Compiled keywords: ``type`` (string or list), ``required``, ``properties``, ``enum`` (of strings),
``pattern``, ``minLength``, ``minimum``, ``items`` (one schema), ``anyOf``. Annotations (``title``,
``description``, ``$id`` ...) are ignored. Any other keyword makes :func:`violations` raise, so a
schema can never silently validate less on the hot path than ``jsonschema`` does.

Example::

    doc = F.try_parse_json(F.col("value"))
    df = df.withColumn("_violations", violations(load("ces-cloudevent.schema.json"), doc))
    bad = df.where(F.size("_violations") > 0).withColumn(
        "reason", explain_udf("ces-cloudevent.schema.json")(F.col("value")))

A violation is named ``<path>: <keyword>``, e.g. ``$.operation: enum``,
``$.eventsource.cols[*].type: type``; an unparseable document gives ``$: not JSON``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from sqlcdc.config import SCHEMAS_DIR, validator

COMPILED = frozenset({"type", "required", "properties", "enum", "pattern", "minLength", "minimum", "items", "anyOf"})
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "default", "examples", "$comment", "format"})

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_NUMERIC_RE = r"^(TINYINT|SMALLINT|INT|BIGINT|DECIMAL|FLOAT|DOUBLE)"

NOT_JSON = "$: not JSON"


@lru_cache(maxsize=None)
def load(schema_file: str) -> dict[str, Any]:
    """The parsed JSON Schema ``schemas/<schema_file>``."""
    return json.loads((SCHEMAS_DIR / schema_file).read_text())


class _Node:
    """A place in the document: a base VARIANT column and a JSONPath from it. Children extend the
    path instead of nesting extractions, so every predicate reads its value straight from the base
    (expression size stays linear in the schema; nested extractions made planning take ~20 s)."""

    def __init__(self, base: Column, path: str = "$"):
        self.base, self.path = base, path

    def child(self, name: str) -> "_Node":
        if "'" in name or "\\" in name:
            raise ValueError(f"property name {name!r} cannot be compiled into a variant path")
        return _Node(self.base, f"{self.path}['{name}']")

    def get(self, type_: str = "variant") -> Column:
        return F.try_variant_get(self.base, self.path, type_)


def _kind(node: _Node) -> Column:
    """``STRING``, ``BIGINT``, ``DECIMAL(2,1)``, ``BOOLEAN``, ``VOID`` ... of a scalar variant."""
    return F.schema_of_variant(node.get())


def _str(node: _Node) -> Column:
    return node.get("string")


def _num(node: _Node) -> Column:
    return node.get("double")


def _is(node: _Node, json_type: str) -> Column:
    if json_type == "object":
        return node.get("map<string,variant>").isNotNull()
    if json_type == "array":
        return node.get("array<variant>").isNotNull()
    if json_type == "string":
        return _kind(node) == "STRING"
    if json_type == "boolean":
        return _kind(node) == "BOOLEAN"
    if json_type == "null":
        return F.is_variant_null(node.get())
    if json_type == "number":
        return _kind(node).rlike(_NUMERIC_RE)
    if json_type == "integer":
        # JSON Schema: a number with a zero fractional part is an integer (1.0 is, 1.5 is not).
        return _kind(node).isin(*_INTEGRAL) | (_kind(node).rlike(_NUMERIC_RE) & (_num(node) == F.floor(_num(node))))
    raise ValueError(f"JSON Schema type {json_type!r} is not compiled")


def _and(cols: list[Column]) -> Column:
    out = F.lit(True)
    for c in cols:
        out = out & F.coalesce(c, F.lit(True))
    return out


def _rules(schema: dict[str, Any], node: _Node, name: str) -> list[tuple[str, Column]]:
    """(rule name, ok) pairs; ``ok`` NULL counts as satisfied (the node is absent)."""
    unknown = set(schema) - COMPILED - ANNOTATIONS
    if unknown:
        raise ValueError(f"{name}: JSON Schema keyword(s) {sorted(unknown)} are not compiled into predicates")
    out: list[tuple[str, Column]] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = F.lit(False)
        for t in types:
            ok = ok | _is(node, t)
        out.append((f"{name}: type", ok))
    if "enum" in schema:
        values = schema["enum"]
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"{name}: only enums of strings are compiled")
        out.append((f"{name}: enum", (_kind(node) == "STRING") & _str(node).isin(*values)))
    if "pattern" in schema:
        out.append((f"{name}: pattern", (_kind(node) != "STRING") | _str(node).rlike(schema["pattern"])))
    if "minLength" in schema:
        out.append((f"{name}: minLength", (_kind(node) != "STRING") | (F.length(_str(node)) >= schema["minLength"])))
    if "minimum" in schema:
        out.append((f"{name}: minimum", ~_is(node, "number") | (_num(node) >= F.lit(float(schema["minimum"])))))
    if "required" in schema:
        present = _and([node.child(r).get().isNotNull() for r in schema["required"]])
        out.append((f"{name}: required", node.get().isNull() | ~_is(node, "object") | present))
    for prop, sub in (schema.get("properties") or {}).items():
        child = node.child(prop)
        for rule, ok in _rules(sub, child, f"{name}.{prop}"):
            out.append((rule, child.get().isNull() | ok))
    if "items" in schema:
        items = schema["items"]
        if not isinstance(items, dict):
            raise ValueError(f"{name}: only a single `items` schema is compiled")
        arr = node.get("array<variant>")
        names = [n for n, _ in _rules(items, _Node(F.lit(None).cast("variant")), f"{name}[*]")]
        for i, rule in enumerate(names):
            out.append((rule, F.forall(arr, _item_rule(items, f"{name}[*]", i))))
    if "anyOf" in schema:
        ok = F.lit(False)
        for sub in schema["anyOf"]:
            ok = ok | _and([c for _, c in _rules(sub, node, name)])
        out.append((f"{name}: anyOf", ok))
    return out


def _item_rule(items: dict[str, Any], name: str, i: int) -> Callable[[Column], Column]:
    return lambda x: F.coalesce(_rules(items, _Node(x), name)[i][1], F.lit(True))


def violations(schema: dict[str, Any], doc: Column) -> Column:
    """``array<string>`` of the rules ``doc`` (a VARIANT, NULL = not JSON) breaks; empty = valid."""
    checks = [F.when(~F.coalesce(ok, F.lit(True)), F.lit(name)) for name, ok in _rules(schema, _Node(doc), "$")]
    found = F.filter(F.array(*checks), lambda v: v.isNotNull())
    return F.when(doc.isNull(), F.array(F.lit(NOT_JSON))).otherwise(found)


def rule_names(schema: dict[str, Any]) -> list[str]:
    """Every rule name :func:`violations` can report for ``schema`` (for docs and DQ metrics)."""
    return [NOT_JSON] + [name for name, _ in _rules(schema, _Node(F.lit(None).cast("variant")), "$")]


def explain(schema_file: str, text: str | None, *, limit: int = 2000) -> str | None:
    """The jsonschema message for one document (``None`` when it is valid or ``text`` is None).

    >>> explain("ces-cloudevent.schema.json", '{"operation": "MERGE"}')[:40]
    "$: 'specversion' is a required property"
    """
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError as e:
        return f"not JSON: {e}"
    errors = sorted(validator(schema_file).iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    parts = []
    for err in errors:
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        if err.validator == "anyOf" and err.context:
            msg = "none of: " + " | ".join(sorted({c.message for c in err.context}))
        else:
            msg = err.message
        parts.append(f"{where}: {msg[:300]}")
    return "; ".join(parts)[:limit]


@lru_cache(maxsize=None)
def explain_udf(schema_file: str):
    """A vectorized (Arrow) UDF ``text -> message`` for ``schemas/<schema_file>``. Apply it only
    to rows :func:`violations` flagged: it is ~10x slower than the predicates."""

    # StringType(), not "string": a DDL string is parsed by the server, which SDP counts as
    # analysis when the UDF is first made inside a query function.
    @F.pandas_udf(StringType())
    def _explain(texts: pd.Series) -> pd.Series:
        return texts.map(lambda t: explain(schema_file, t) if isinstance(t, str) else None)

    return _explain
