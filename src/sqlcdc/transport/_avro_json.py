"""Confluent-framed Avro values as the JSON text the decoders read (:func:`confluent_avro_json`).

Private to :mod:`sqlcdc.transport.kafka`, which re-exports :func:`confluent_avro_json`. Spark's
``from_avro`` reads an Avro ``string`` whatever its bytes are, and ``to_json`` writes bytes that
are not UTF-8 as U+FFFD: a value would reach silver changed, without a trace. So every string the
writer's schema can hold -- fields of records at any depth, items of arrays, keys and values of
maps, branches of unions -- is checked first (:func:`not_utf8_field`), and a record holding such
bytes is quarantined with the field named.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, NamedTuple

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["confluent_avro_json", "not_utf8_field"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: unions Spark reads as one widened type rather than a struct of ``member<i>`` branches
_WIDENED = (frozenset({"int", "long"}), frozenset({"float", "double"}))


def _type_name(schema: Any) -> Any:
    return schema.get("type") if isinstance(schema, dict) else schema


class _Leaf(NamedTuple):
    label: str  #: its path: ``after.name``, ``tags[]`` (an item), ``attrs{}`` / ``attrs{key}`` (a map's values / keys)
    test: Column  #: the leaf's test (for items of an array or map: some item's)
    plain: bool  #: reached through record fields and ``[null, T]`` unions only, so ``label`` is a ``withField`` path


def _leaves(schema: Any, kind: str, test: Callable[[Column], Column], col: Column, label: str,
            named: dict[str, Any], expanding: frozenset[str], plain: bool = True) -> list[_Leaf]:
    """``test`` of every value of Avro primitive type ``kind`` that ``col`` (read with ``schema``)
    can hold: fields of records at any depth (records named once and used by name, as Debezium's
    ``after: ["null", "Value"]``), branches of unions (Spark's ``member<i>``), items of arrays,
    keys (``string`` only) and values of maps."""
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        name = schema if schema in named else schema.rsplit(".", 1)[-1]
        if name not in named or name in expanding:  # unknown, or a recursive type: Spark refuses those
            return []
        return _leaves(named[name], kind, test, col, label, named, expanding | {name}, plain)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return _leaves(branches[0], kind, test, col, label, named, expanding, plain)
        kinds = frozenset(_type_name(b) for b in branches)
        if any(kinds <= w for w in _WIDENED):
            return []
        out: list[_Leaf] = []
        for i, branch in enumerate(branches):  # Spark's struct of the non-null branches, in order
            out += _leaves(branch, kind, test, col.getField(f"member{i}"), label, named, expanding, False)
        return out
    name = _type_name(schema)
    if name == kind:
        return [_Leaf(label, test(col), plain)]
    if not isinstance(schema, dict):
        return []
    if name in ("record", "error", "enum", "fixed") and "name" in schema:
        full = f"{schema['namespace']}.{schema['name']}" if schema.get("namespace") else schema["name"]
        named[full] = named[str(schema["name"]).rsplit(".", 1)[-1]] = schema
    if name in ("record", "error"):
        out = []
        for f in schema.get("fields", []):
            out += _leaves(f.get("type"), kind, test, col.getField(f["name"]), f"{label}.{f['name']}".lstrip("."),
                           named, expanding, plain)
        return out
    if name == "array":
        return _any_item(schema.get("items"), kind, test, col, f"{label}[]", named, expanding)
    if name == "map":
        keys = [_Leaf(f"{label}{{key}}", F.exists(F.map_keys(col), test), False)] if kind == "string" else []
        return keys + _any_item(schema.get("values"), kind, test, F.map_values(col), f"{label}{{}}", named, expanding)
    return []


def _any_item(items: Any, kind: str, test: Callable[[Column], Column], array: Column, label: str,
              named: dict[str, Any], expanding: frozenset[str]) -> list[_Leaf]:
    """One leaf: some item of ``array`` (read with ``items``) holds a value ``test`` is true of."""
    found: list[bool] = []

    def some(x: Column) -> Column:  # called once, as the lambda is built
        tests = [leaf.test for leaf in _leaves(items, kind, test, x, label, named, expanding, False)]
        found.append(bool(tests))
        out = F.lit(False)
        for t in tests:
            out = out | t
        return out

    check = F.coalesce(F.exists(array, some), F.lit(False))
    return [_Leaf(label, check, False)] if any(found) else []


def _not_utf8(col: Column) -> Column:
    return F.coalesce(~F.is_valid_utf8(col), F.lit(False))


def not_utf8_field(decoded: Column, schema: Any) -> Column:
    """The first string field of ``decoded`` (``from_avro`` of ``schema``, parsed JSON) whose bytes
    are not UTF-8 text, named as a path (``after.last_name``, ``tags[]``, ``attrs{}``, ``attrs{key}``);
    NULL when every string is text.

    >>> not_utf8_field(F.col("r"), {"type": "record", "name": "R", "fields": [
    ...     {"name": "tags", "type": {"type": "array", "items": "string"}}]})  # doctest: +SKIP
    """
    checks = _leaves(schema, "string", _not_utf8, decoded, "", {}, frozenset())
    return F.coalesce(*[F.when(leaf.test, F.lit(leaf.label or "(the value)")) for leaf in checks],
                      F.lit(None).cast("string"))


def _masks(decoded: Column, schema: Any) -> list[_Leaf]:
    """The ``bytes`` fields of ``decoded`` named ``...Mask`` (Qlik's update masks; ``test``: the
    field itself, ``label``: its ``withField`` path), which the rendered JSON writes as hex, as
    Qlik's JSON messages do."""
    leaves = _leaves(schema, "bytes", lambda c: c, decoded, "", {}, frozenset())
    return [leaf for leaf in leaves if leaf.plain and leaf.label.endswith("Mask")]


def confluent_avro_json(value: Column, schemas: Mapping[int, str]) -> Column:
    """Confluent-framed Avro (byte 0, 4-byte big-endian schema id, Avro binary) -> the record as JSON text.

    The JSON has the shape of the producer's JSON messages (Debezium payload-only envelopes; Qlik
    ``data``/``beforeData``/``headers`` with hex masks), so the decoders read it as they read JSON.
    A value that is not in that framing, names an unknown schema id, or does not decode becomes a
    non-JSON text carrying the reason and the bytes (base64): the decoder quarantines it, nothing
    is dropped; so does one with a string field that is not UTF-8 (rendered, it would be U+FFFD).
    A null value (tombstone) stays null.
    """
    from pyspark.sql.avro.functions import from_avro

    magic_ok = (F.length(value) >= 5) & (F.hex(F.substring(value, 1, 1)) == "00")
    schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("bigint")
    body = F.substring(value, 6, 1 << 30)
    text = not_utf8 = F.lit(None).cast("string")
    for sid, schema in sorted(schemas.items()):
        decoded, parsed = from_avro(body, schema, {"mode": "PERMISSIVE"}), json.loads(schema)
        # to_json writes a string's bytes that are not UTF-8 as U+FFFD: the first such field is named
        bad = not_utf8_field(decoded, parsed)
        for mask in _masks(decoded, parsed):  # Qlik's masks as hex
            decoded = decoded.withField(mask.label, F.hex(mask.test))
        rendered = F.to_json(decoded)  # PERMISSIVE: a body that does not decode gives a struct of nulls
        text = F.when(schema_id == F.lit(sid), F.when(rendered != F.lit("{}"), rendered)).otherwise(text)
        not_utf8 = F.when(schema_id == F.lit(sid), bad).otherwise(not_utf8)
    reason = (
        F.when(~magic_ok, F.lit("not in the Confluent wire format (magic byte 0 + 4-byte schema id)"))
        .when(text.isNull() & ~schema_id.isin(*[F.lit(i) for i in schemas] or [F.lit(-1)]),
              F.format_string("unknown schema id %d", schema_id))
        .when(text.isNull(), F.format_string("does not decode with schema id %d", schema_id))
        .when(not_utf8.isNotNull(), F.format_string("field %s of schema id %d holds bytes that are not UTF-8 text",
                                                    not_utf8, schema_id))
    )
    from sqlcdc.formats._schema_check import UNDECODABLE

    undecodable = F.format_string(UNDECODABLE + "Confluent Avro (%s): %s", reason, F.base64(value))
    return F.when(value.isNull(), F.lit(None).cast("string")).when(reason.isNotNull(), undecodable).otherwise(text)
