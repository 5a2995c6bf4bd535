"""JSON numbers that a parse into text changed, read as the record writes them.

Two readers change a JSON number's digits. ``from_json`` into a string (Debezium's images, the
flattened row, a change-table row) writes a number with a fraction through a Java double:
``1234567890.1234567891`` becomes ``1234567890.1234567``, ``1e-400`` 0.0 -- a number of up to 15
digits survives (checked on 300,000 random ones, 2026-12-06). ``try_parse_json`` (CES, Qlik) keeps a
number as an integer or a ``decimal(38)`` where it fits, else as a double: an exponent or more than
38 digits. A decimal column read from such a text would be silently rounded; here the number is
taken from the VARIANT where it holds it exactly, else as the record writes it, so
:func:`sqlcdc.values.typed_value` reads it exactly or quarantines it as "would be rounded" / "out of
range". Only a record holding such a number (:data:`LONG_NUMBER`, a row-level test) pays.

>>> # F.col("after") with its long numbers as written in "value":
>>> # object_as_written(F.col("after"), F.col("value"), "$['after']", key="after")
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc import frames

__all__ = ["LONG_NUMBER", "NUMBER_NOT_FOUND", "images_as_written", "number_as_written", "numbers_as_written",
           "object_as_written"]

#: A JSON number after a key that a parse may have changed (see the module): 16 or more characters
#: of digits with a point, an exponent, or 39 or more characters. Integers of up to 38 digits (epoch
#: nanoseconds, bigints) are read exactly by both parsers and do not match.
LONG_NUMBER = r":\s*-?[0-9](?:[0-9.]{38}|(?=[0-9.]{15})[0-9]*\.|[0-9.]*[eE])"

#: What :func:`number_as_written` gives for a number it cannot find in the record's text.
NUMBER_NOT_FOUND = "(a JSON number a double cannot hold exactly, its key written with escapes)"


def _written(record: Column, name: Column) -> Column:
    """The first JSON number written after the key ``name`` in ``record``, as written; "" if none."""
    quoted = F.replace(name, F.lit("\\E"), F.lit("\\E\\\\E\\Q"))
    pattern = F.concat(F.lit('"\\Q'), quoted, F.lit('\\E"\\s*:\\s*(-?[0-9][0-9.eE+-]*)'))
    return F.call_function("regexp_extract", record, pattern, F.lit(1))


def number_as_written(item: Column, record: Column, name: str | Column) -> Column:
    """The exact text of ``item``, the VARIANT of the key ``name`` of the JSON text ``record``: a
    number the VARIANT holds as a double (``1e-400`` is 0.0 there, 41 digits are 1.0) as the record
    writes it; anything else as the VARIANT's text (a decimal's every digit)."""
    written = _written(record, F.lit(name) if isinstance(name, str) else name)
    return F.when(F.schema_of_variant(item) == "DOUBLE", F.coalesce(F.nullif(written, F.lit("")), F.lit(NUMBER_NOT_FOUND))
                  ).otherwise(F.try_variant_get(item, "$", "string"))


def _patched(texts: Column, items: Column, record: Column, key: str | None) -> Column:
    """``texts`` with each number of ``items`` exact (:func:`number_as_written`), looked for in
    ``record`` from its key ``key`` on (an update's ``before`` holds the same names as ``after``)."""
    within = record if key is None else record.substr(F.regexp_instr(record, F.lit(f'"{key}"\\s*:')), F.length(record))
    return frames.let(items, lambda its: F.transform_values(texts, lambda k, v: frames.let(its[k], lambda item: F.when(
        F.schema_of_variant(item).rlike("^(DOUBLE|DECIMAL)"), number_as_written(item, within, k)).otherwise(v))))


def numbers_as_written(texts: Column, items: Column, record: Column, key: str | None = None) -> Column:
    """``texts`` (a JSON object's ``map<string,string>``) with each number exact, ``items`` being the
    same object's ``map<string,variant>`` and ``record`` the JSON text holding it, the object at its
    key ``key`` (:func:`object_as_written` where the object is not parsed yet). As it is in a record
    without a :data:`LONG_NUMBER`, which is nearly every one."""
    return F.when(record.rlike(LONG_NUMBER), _patched(texts, items, record, key)).otherwise(texts)


def object_as_written(texts: Column, record: Column, at: str | Callable[[Column], Column] = "$",
                      key: str | None = None) -> Column:
    """``texts``, the ``map<string,string>`` of the JSON object at the path ``at`` of the JSON text
    ``record`` (or ``at(variant)``: its ``map<string,variant>`` from the parsed record), with each
    number exact; the object's key ``key``, if it has one. ``record`` is parsed again only where it
    holds a :data:`LONG_NUMBER`.

    >>> # object_as_written(F.from_json("value", "map<string,string>"), F.col("value"))
    """
    def items(v: Column) -> Column:
        return F.try_variant_get(v, at, "map<string,variant>") if isinstance(at, str) else at(v)

    return F.when(record.rlike(LONG_NUMBER), frames.let(F.try_parse_json(record), lambda v: _patched(
        texts, items(v), record, key))).otherwise(texts)


def images_as_written(read: Column, record: Column, keys: tuple[str, ...], envelope: str | None = None) -> Column:
    """``read`` (a struct parsed from the JSON text ``record``) with each of its ``map<string,string>``
    fields ``keys`` given exact numbers (:func:`object_as_written`, the record parsed once for all);
    the objects are at the top of ``record`` or under its key ``envelope`` (Debezium's ``payload``).

    >>> # images_as_written(F.from_json("value", ddl), F.col("value"), ("before", "after"), "payload")
    """
    def exact(v: Column) -> Column:
        out = read
        for k in keys:
            paths = ([f"$['{envelope}']['{k}']"] if envelope else []) + [f"$['{k}']"]
            items = F.coalesce(*[F.try_variant_get(v, path, "map<string,variant>") for path in paths])
            out = out.withField(k, _patched(read[k], items, record, k))
        return out

    return F.when(record.rlike(LONG_NUMBER), frames.let(F.try_parse_json(record), exact)).otherwise(read)
