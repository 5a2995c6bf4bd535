"""Envelope validation on the hot path: a JSON Schema subset compiled into Spark column predicates.

``jsonschema`` validates ~9.5k envelopes/s per core (DESIGN.md, "Figures"), several times the cost
of the whole parse. So the schema files in ``schemas/`` stay the definition, and this module
compiles them into Spark SQL predicates over a VARIANT (``try_parse_json``) of the document, read
through one cast of the document into a struct of the nodes the schema names (:class:`_Shaped`);
only the rows that fail are handed to ``jsonschema`` (in a vectorized pandas UDF) to produce the
message.
``tests/test_ces.py`` checks that both agree on generated good and bad documents.

Compiled keywords: ``type`` (string or list), ``required``, ``properties``, ``enum`` (of strings),
``pattern``, ``minLength``, ``minimum``, ``maximum``, ``items`` (one schema), ``anyOf``. Annotations (``title``,
``description``, ``$id`` ...) are ignored. Any other keyword makes :func:`violations` raise, so a
schema can never silently validate less on the hot path than ``jsonschema`` does.

Example::

    df = df.select("*", violations(load("ces-cloudevent.schema.json"), "try_parse_json(value)").alias("_violations"))
    bad = df.where(F.size("_violations") > 0).select(
        "*", explain_udf("ces-cloudevent.schema.json")(F.col("value")).alias("reason"))

A violation is named ``<path>: <keyword>``, e.g. ``$.operation: enum``,
``$.eventsource.cols[*].type: type``; an unparseable document gives ``$: not JSON``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterable

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from sqlcdc.assets import SCHEMAS_DIR
from sqlcdc.diagnostics import validator
from sqlcdc.names import literal, quote

COMPILED = frozenset({"type", "required", "properties", "enum", "pattern", "minLength", "minimum", "maximum", "items",
                      "anyOf"})
ANNOTATIONS = frozenset({"$schema", "$id", "title", "description", "default", "examples", "$comment", "format"})

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_NUMERIC_RE = r"^(TINYINT|SMALLINT|INT|BIGINT|DECIMAL|FLOAT|DOUBLE)"

NOT_JSON = "$: not JSON"
#: The document of a bronze ``value`` as a VARIANT, NULL unless the line holds exactly one JSON
#: document: Spark's parsers read ``{...}{...}`` as its first object and drop the rest
#: (:func:`sqlcdc.formats.base.one_json_value` says why the test works).
def one_document(value: str = "value") -> str:
    """SQL text: the VARIANT of the JSON text in column ``value``, NULL unless it is exactly one document."""
    return f"CASE WHEN json_array_length('[' || {value} || ']') = 1 THEN try_parse_json({value}) END"


ONE_DOCUMENT = one_document()

UNDECODABLE = "undecodable "
"""How a transport marks a value it could not turn into JSON text (e.g. Confluent Avro with an
unknown schema id, :func:`sqlcdc.transport.kafka.confluent_avro_json`): :func:`explain` passes such a text
on as the reason, rather than a JSON parse error that hides it."""


@lru_cache(maxsize=None)
def load(schema_file: str) -> dict[str, Any]:
    """The parsed JSON Schema ``schemas/<schema_file>``."""
    return json.loads((SCHEMAS_DIR / schema_file).read_text())


class _Node:
    """A place in the document: a base VARIANT (SQL text: a column name, a lambda variable or an
    expression) and a JSONPath from it. Children extend the path instead of nesting extractions,
    so every predicate reads its value straight from the base (nested extractions made planning
    take ~20 s). Used where no :class:`_Shaped` cast is (the elements of an ``items`` array)."""

    def __init__(self, base: str, path: str = "$"):
        self.base, self.path = base, path

    def child(self, name: str) -> "_Node":
        if "'" in name or "\\" in name:
            raise ValueError(f"property name {name!r} cannot be compiled into a variant path")
        return _Node(self.base, f"{self.path}['{name}']")

    def get(self, type_: str = "variant") -> str:
        return f"try_variant_get({self.base}, {_lit(self.path)}, {_lit(type_)})"

    def value(self) -> str:
        """SQL: the node as a VARIANT (NULL when absent)."""
        return self.get()

    def is_object(self) -> str:
        # an empty struct: the cast checks the kind and copies nothing (a map copied every child)
        return f"({self.get('struct<>')} IS NOT NULL)"

    def present(self) -> str:
        return f"({self.get()} IS NOT NULL)"


class _Shaped(_Node):
    """A place in the document read from one cast of the whole document (:func:`_shape`): a
    struct that holds, for every node the schema names, a struct when the node may be an object
    (NULL when it is not one) and a VARIANT otherwise. One cast walks the document once; a
    ``try_variant_get`` per rule walked it from the top ~140 times for the Debezium envelope,
    most of the envelope check's cost (``benchmarks/bench_validation.py``).

    Only a node that may be an object but is not one (absent, ``null``, a string ...) is fetched
    from the base again, by its path (:meth:`value`)."""

    def __init__(self, base: str, ref: str, shape: dict | None, path: str = "$"):
        super().__init__(base, path)
        self.ref, self.shape = ref, shape  # shape: the node's fields (a struct), None for a VARIANT

    def child(self, name: str) -> "_Node":
        at = super().child(name)
        return _Shaped(self.base, f"{self.ref}.{quote(name)}", (self.shape or {}).get(name), at.path)

    def get(self, type_: str = "variant") -> str:
        return self.value() if type_ == "variant" else f"try_variant_get({self.value()}, '$', {_lit(type_)})"

    def value(self) -> str:
        return super().get() if self.shape is not None else self.ref

    def is_object(self) -> str:
        return f"({self.ref} IS NOT NULL)" if self.shape is not None else super().is_object()

    def present(self) -> str:
        if self.shape is None:
            return f"({self.ref} IS NOT NULL)"
        return f"({self.ref} IS NOT NULL OR {super().get()} IS NOT NULL)"  # OR: the fetch only for non-objects


def _alternatives(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """``schema`` and the ``anyOf`` branches that apply to the same node."""
    return [schema, *(b for sub in schema.get("anyOf") or [] for b in _alternatives(sub))]


def _may_be_object(schemas: list[dict[str, Any]]) -> bool:
    for sch in schemas:
        types = sch.get("type", "object")
        if "properties" in sch or "required" in sch or "object" in (types if isinstance(types, list) else [types]):
            return True
    return False


def _shape(schemas: list[dict[str, Any]]) -> dict | None:
    """The fields the cast reads for a node described by ``schemas`` (itself and its ``anyOf``
    branches): name -> the child's shape; None when the node is read as a VARIANT."""
    flat = [b for sch in schemas for b in _alternatives(sch)]
    if not _may_be_object(flat):
        return None
    children: dict[str, list[dict[str, Any]]] = {}
    for sch in flat:
        for name in sch.get("required") or []:
            children.setdefault(name, [])
        for name, sub in (sch.get("properties") or {}).items():
            children.setdefault(name, []).append(sub)
    return {name: _shape(subs) if subs else {} for name, subs in children.items()}


def _ddl(shape: dict | None) -> str:
    if shape is None:
        return "variant"
    return "struct<" + ", ".join(f"{quote(n)}: {_ddl(s)}" for n, s in shape.items()) + ">"


_lit = literal
_CAST = "_cast"
"""The lambda variable that binds a document's cast. One name serves every call: a rule reads only
its own document's cast, and a nested call (Qlik's wrapper inside its message) binds its own."""


def _kind(node: _Node) -> str:
    """``STRING``, ``BIGINT``, ``DECIMAL(2,1)``, ``BOOLEAN``, ``VOID`` ... of a scalar variant."""
    return f"schema_of_variant({node.value()})"


def _is(node: _Node, json_type: str) -> str:
    if json_type == "object":
        return node.is_object()
    if json_type == "array":
        return f"({node.get('array<variant>')} IS NOT NULL)"
    if json_type == "string":
        return f"({_kind(node)} = 'STRING')"
    if json_type == "boolean":
        return f"({_kind(node)} = 'BOOLEAN')"
    if json_type == "null":
        return f"is_variant_null({node.value()})"
    if json_type == "number":
        return f"({_kind(node)} RLIKE {_lit(_NUMERIC_RE)})"
    if json_type == "integer":
        # JSON Schema: a number with a zero fractional part is an integer (1.0 is, 1.5 is not).
        num = node.get("double")
        integral = ", ".join(_lit(t) for t in _INTEGRAL)
        return f"({_kind(node)} IN ({integral}) OR ({_is(node, 'number')} AND {num} = floor({num})))"
    raise ValueError(f"JSON Schema type {json_type!r} is not compiled")


def _and(conds: list[str]) -> str:
    """All of ``conds`` hold (NULL counts as holding)."""
    return "(" + " AND ".join(f"coalesce({c}, true)" for c in conds) + ")" if conds else "true"


def _or(conds: list[str]) -> str:
    return "(" + " OR ".join(conds) + ")" if conds else "false"


def _rules(schema: dict[str, Any], node: _Node, name: str, depth: int = 0) -> list[tuple[str, str]]:
    """(rule name, ok) pairs, ``ok`` as SQL; NULL counts as satisfied (the node is absent)."""
    unknown = set(schema) - COMPILED - ANNOTATIONS
    if unknown:
        raise ValueError(f"{name}: JSON Schema keyword(s) {sorted(unknown)} are not compiled into predicates")
    out: list[tuple[str, str]] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        out.append((f"{name}: type", _or([_is(node, t) for t in types])))
    if "enum" in schema:
        values = schema["enum"]
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"{name}: only enums of strings are compiled")
        listed = ", ".join(_lit(v) for v in values)
        out.append((f"{name}: enum", f"({_kind(node)} = 'STRING' AND {node.get('string')} IN ({listed}))"))
    if "pattern" in schema:
        out.append((f"{name}: pattern", f"({_kind(node)} != 'STRING' OR {node.get('string')} RLIKE {_lit(schema['pattern'])})"))
    if "minLength" in schema:
        out.append((f"{name}: minLength", f"({_kind(node)} != 'STRING' OR length({node.get('string')}) >= {int(schema['minLength'])})"))
    if "minimum" in schema:
        minimum = float(schema["minimum"])
        out.append((f"{name}: minimum", f"(NOT {_is(node, 'number')} OR {node.get('double')} >= CAST({minimum!r} AS DOUBLE))"))
    if "maximum" in schema:
        maximum = float(schema["maximum"])
        out.append((f"{name}: maximum", f"(NOT {_is(node, 'number')} OR {node.get('double')} <= CAST({maximum!r} AS DOUBLE))"))
    if "required" in schema:
        present = _and([node.child(r).present() for r in schema["required"]])
        out.append((f"{name}: required", f"(NOT {node.present()} OR NOT {_is(node, 'object')} OR {present})"))
    for prop, sub in (schema.get("properties") or {}).items():
        child = node.child(prop)
        for rule, ok in _rules(sub, child, f"{name}.{prop}", depth):
            out.append((rule, f"(NOT {child.present()} OR {ok})"))
    if "items" in schema:
        items = schema["items"]
        if not isinstance(items, dict):
            raise ValueError(f"{name}: only a single `items` schema is compiled")
        var = f"_item{depth}"
        for rule, ok in _rules(items, _Node(var), f"{name}[*]", depth + 1):
            out.append((rule, f"forall({node.get('array<variant>')}, {var} -> coalesce({ok}, true))"))
    if "anyOf" in schema:
        out.append((f"{name}: anyOf", _or([_and([c for _, c in _rules(sub, node, name, depth)]) for sub in schema["anyOf"]])))
    return out


def violations_sql(schema: dict[str, Any], doc: str) -> str:
    """:func:`violations` as Spark SQL text, to embed in a larger SQL expression."""
    if not isinstance(doc, str):
        raise TypeError(f"doc must be the SQL text of a VARIANT (e.g. 'try_parse_json(value)'), not {type(doc).__name__}")
    shape = _shape([schema])
    root = _Shaped(doc, _CAST, shape) if shape is not None else _Node(doc)
    checks = [f"CASE WHEN NOT coalesce({ok}, true) THEN {_lit(name)} END" for name, ok in _rules(schema, root, "$")]
    # array_except, not filter(...): a higher-order function would run every check in the interpreter
    found = (f"array_except(array({', '.join(checks)}), array(CAST(NULL AS STRING)))" if checks
             else "CAST(array() AS array<string>)")
    if shape is not None:  # the cast once, bound to _CAST (as frames.let)
        found = f"transform(array(try_variant_get({doc}, '$', {_lit(_ddl(shape))})), {_CAST} -> {found})[0]"
    return f"CASE WHEN {doc} IS NULL THEN array({_lit(NOT_JSON)}) ELSE {found} END"


def violations(schema: dict[str, Any], doc: str) -> Column:
    """``array<string>`` of the rules ``doc`` breaks (empty = valid). ``doc`` is the SQL text of a
    VARIANT (a column name such as ``_doc``, or ``try_parse_json(value)``); NULL = not JSON.

    The predicates travel as one SQL expression string: built as nested Column objects they made
    Spark Connect plans deeper than its protobuf limit of 100 levels (a Qlik plan reached 134).
    """
    return F.expr(violations_sql(schema, doc))


def rule_names(schema: dict[str, Any]) -> list[str]:
    """Every rule name :func:`violations` can report for ``schema`` (for docs and DQ metrics)."""
    return [NOT_JSON] + [name for name, _ in _rules(schema, _Node("NULL"), "$")]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value (NaN/Infinity literals are not JSON)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k[:100]!r} in one object")
        out[k] = v
    return out


def loads(text: str) -> Any:
    """``json.loads`` for explainers, as strict as Spark's parser (which flagged the row): a
    NaN/Infinity literal or a duplicate key is refused, and JSON nested deeper than Python's stack
    is a :class:`ValueError` ("JSON nested too deeply ...") instead of a RecursionError that
    would fail the Spark job. Every error is a :class:`ValueError` with a message for the reason.

    >>> loads('{"a": 1, "a": 2}')
    Traceback (most recent call last):
    ValueError: duplicate key 'a' in one object
    """
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            raise ValueError(f"more than one JSON document on one line (the first ends at character {e.pos})") from None
        raise
    except RecursionError:
        raise ValueError(
            f"JSON nested too deeply ({_depth(text)} levels of arrays/objects; more than this reader's "
            "limit of about a thousand)"
        ) from None


def _depth(text: str) -> int:
    """Maximum nesting of ``[``/``{`` outside strings (a rough count for the message)."""
    depth = best = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            best = max(best, depth)
        elif ch in "]}":
            depth -= 1
    return best


def explain(schema_file: str, text: str | None, *, limit: int = 2000) -> str | None:
    """The jsonschema message for one document (``None`` when it is valid or ``text`` is None).

    >>> explain("ces-cloudevent.schema.json", '{"operation": "MERGE"}')[:39]
    "$: 'specversion' is a required property"
    """
    if text is None:
        return None
    if text.startswith(UNDECODABLE):
        return text[:limit]
    doc, unreadable = _read(text, limit)
    if unreadable:
        return unreadable
    try:
        errors = list(validator(schema_file).iter_errors(doc))
    except RecursionError:  # a valid but very deep document the validator walks into
        return f"JSON nested too deeply ({_depth(text)} levels) to validate"
    return describe(errors)[:limit] if errors else None


def describe(errors: Iterable[Any]) -> str:
    """jsonschema errors as ``<JSON path>: <message>; ...``, in document order (an ``anyOf``
    lists what each branch wanted)."""
    parts = []
    for err in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        where = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        if err.validator == "anyOf" and err.context:
            msg = "none of: " + " | ".join(sorted({c.message for c in err.context}))
        else:
            msg = err.message
        parts.append(f"{where}: {msg[:300]}")
    return "; ".join(parts)


def not_json(text: str | None, *, limit: int = 2000) -> str | None:
    """Why ``text`` is not one JSON document, as :func:`loads` says it (``None`` when it is one).

    >>> not_json('{"a": "tab\\there"}')
    'not JSON: Invalid control character at: line 1 column 11 (char 10)'
    """
    return None if text is None else _read(text, limit)[1]


def _read(text: str, limit: int) -> tuple[Any, str | None]:
    """(the document, None), or (None, why ``text`` is not one JSON document)."""
    try:
        return loads(text), None
    except ValueError as e:
        return None, f"not JSON: {e}"[:limit]


@lru_cache(maxsize=None)
def not_json_udf():
    """A vectorized (Arrow) UDF ``text -> why it is not JSON`` (:func:`not_json`): apply it only to
    the rows Spark's parser refused (pass NULL for the others)."""

    @F.pandas_udf(StringType())
    def _not_json(texts: pd.Series) -> pd.Series:
        return texts.map(lambda t: not_json(t) if isinstance(t, str) else None)

    return _not_json


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
