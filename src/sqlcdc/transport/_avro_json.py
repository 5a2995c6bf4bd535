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
from typing import Any, Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["confluent_avro_json", "not_utf8_field"]

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: unions Spark reads as one widened type rather than a struct of ``member<i>`` branches
_WIDENED = (frozenset({"int", "long"}), frozenset({"float", "double"}))


def _type_name(schema: Any) -> Any:
    return schema.get("type") if isinstance(schema, dict) else schema


def _string_checks(schema: Any, col: Column, label: str, named: dict[str, Any],
                   expanding: frozenset[str]) -> list[tuple[str, Column]]:
    """``(label, bytes are not UTF-8)`` for every string ``col`` (read with ``schema``) can hold."""
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        name = schema if schema in named else schema.rsplit(".", 1)[-1]
        if name not in named or name in expanding:  # unknown, or a recursive type: Spark refuses those
            return []
        return _string_checks(named[name], col, label, named, expanding | {name})
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) == 1:
            return _string_checks(branches[0], col, label, named, expanding)
        kinds = frozenset(_type_name(b) for b in branches)
        if any(kinds <= w for w in _WIDENED):
            return []
        out: list[tuple[str, Column]] = []
        for i, branch in enumerate(branches):  # Spark's struct of the non-null branches, in order
            out += _string_checks(branch, col.getField(f"member{i}"), label, named, expanding)
        return out
    kind = _type_name(schema)
    if kind == "string":
        return [(label, F.coalesce(~F.is_valid_utf8(col), F.lit(False)))]
    if not isinstance(schema, dict):
        return []
    if kind in ("record", "error", "enum", "fixed") and "name" in schema:
        full = f"{schema['namespace']}.{schema['name']}" if schema.get("namespace") else schema["name"]
        named[full] = named[str(schema["name"]).rsplit(".", 1)[-1]] = schema
    if kind in ("record", "error"):
        out = []
        for f in schema.get("fields", []):
            out += _string_checks(f.get("type"), col.getField(f["name"]), f"{label}.{f['name']}".lstrip("."), named, expanding)
        return out
    if kind == "array":
        return _any_item(schema.get("items"), col, f"{label}[]", named, expanding)
    if kind == "map":
        keys = [(f"{label}{{key}}", F.exists(F.map_keys(col), lambda k: F.coalesce(~F.is_valid_utf8(k), F.lit(False))))]
        return keys + _any_item(schema.get("values"), F.map_values(col), f"{label}{{}}", named, expanding)
    return []


def _any_item(items: Any, array: Column, label: str, named: dict[str, Any],
              expanding: frozenset[str]) -> list[tuple[str, Column]]:
    """One check: some item of ``array`` (read with ``items``) holds a string that is not UTF-8."""
    found: list[bool] = []

    def bad(x: Column) -> Column:  # called once, as the lambda is built
        checks = [c for _, c in _string_checks(items, x, label, named, expanding)]
        found.append(bool(checks))
        out = F.lit(False)
        for c in checks:
            out = out | c
        return out

    test = F.coalesce(F.exists(array, bad), F.lit(False))
    return [(label, test)] if any(found) else []


def not_utf8_field(decoded: Column, schema: Any) -> Column:
    """The first string field of ``decoded`` (``from_avro`` of ``schema``, parsed JSON) whose bytes
    are not UTF-8 text, named as a path (``after.last_name``, ``tags[]``, ``attrs{}``, ``attrs{key}``);
    NULL when every string is text.

    >>> not_utf8_field(F.col("r"), {"type": "record", "name": "R", "fields": [
    ...     {"name": "tags", "type": {"type": "array", "items": "string"}}]})  # doctest: +SKIP
    """
    checks = _string_checks(schema, decoded, "", {}, frozenset())
    return F.coalesce(*[F.when(bad, F.lit(label or "(the value)")) for label, bad in checks], F.lit(None).cast("string"))


def _leaf_fields(schema: Any, kind: str, path: tuple[str, ...] = (), named: dict[str, Any] | None = None
                 ) -> list[tuple[str, ...]]:
    """Paths of the fields of Avro primitive type ``kind`` (here ``bytes``: Qlik's masks) in a record schema,
    through ``[null, T]`` unions and records named once and used by name (Debezium's
    ``after: ["null", "Value"]``); four records deep at most (the envelopes' depth)."""
    named = {} if named is None else named
    if isinstance(schema, str):
        schema = named.get(schema, named.get(schema.rsplit(".", 1)[-1], schema))
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        return _leaf_fields(branches[0], kind, path, named) if len(branches) == 1 else []
    if schema == kind or isinstance(schema, dict) and schema.get("type") == kind:
        return [path]
    out: list[tuple[str, ...]] = []
    if isinstance(schema, dict) and schema.get("type") == "record" and len(path) < 4:
        named[schema["name"]] = named[f"{schema.get('namespace', '')}.{schema['name']}"] = schema
        for f in schema.get("fields", []):
            out += _leaf_fields(f.get("type"), kind, path + (f["name"],), named)
    return out


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
        for path in (p for p in _leaf_fields(parsed, "bytes") if p[-1].endswith("Mask")):  # Qlik's masks as hex
            decoded = decoded.withField(".".join(path), F.hex(_get_path(decoded, path)))
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


def _get_path(col: Column, path: tuple[str, ...]) -> Column:
    for p in path:
        col = col.getField(p)
    return col
