"""JSON numbers a VARIANT cannot hold exactly, read as the record writes them.

Spark's ``try_parse_json`` keeps a JSON number as an integer or a decimal where it fits
``decimal(38)``, else as a double: a number written with an exponent (``1e-400``, 0.0 as a double)
or with more than 38 digits (``1.0000000000000000000000000000000000000001``, 1.0). A decimal column
read from that double would be silently rounded; :func:`number_as_written` takes such a number's
text from the record instead, so :func:`sqlcdc.values.typed_value` reads it exactly or quarantines
it as "would be rounded" / "out of range".

>>> # text = number_as_written(F.col("_v")["amount"], F.col("value"), "amount")
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc import frames

__all__ = ["INEXACT_NUMBER", "NUMBER_NOT_FOUND", "images_as_written", "number_as_written", "numbers_as_written"]

#: A JSON number after a key that a VARIANT may hold as a double: with an exponent, or 39 or more
#: characters of digits and point (a row-level test, so the rest of the rows pay nothing).
INEXACT_NUMBER = r":\s*-?[0-9](?:[0-9.]{38}|[0-9.]*[eE])"

#: What :func:`number_as_written` gives for a number it cannot find in the record's text.
NUMBER_NOT_FOUND = "(a JSON number a double cannot hold exactly, its key written with escapes)"


def _written(record: Column, name: Column) -> Column:
    """The first JSON number written after the key ``name`` in ``record``, as written; "" if none."""
    quoted = F.replace(name, F.lit("\\E"), F.lit("\\E\\\\E\\Q"))
    pattern = F.concat(F.lit('"\\Q'), quoted, F.lit('\\E"\\s*:\\s*(-?[0-9][0-9.eE+-]*)'))
    return F.call_function("regexp_extract", record, pattern, F.lit(1))


def number_as_written(item: Column, record: Column, name: str | Column) -> Column:
    """The text of ``item``, the VARIANT of the key ``name`` of the JSON text ``record``. A VARIANT
    holds a number written with an exponent or more than 38 digits as a double (``1e-400`` is 0.0
    there, ``1.0000000000000000000000000000000000000001`` is 1.0): such a number is taken as the
    record writes it, so a decimal column reads it exactly or says why not, never rounded."""
    written = _written(record, F.lit(name) if isinstance(name, str) else name)
    return F.when(F.schema_of_variant(item) == "DOUBLE", F.coalesce(F.nullif(written, F.lit("")), F.lit(NUMBER_NOT_FOUND))
                  ).otherwise(F.try_variant_get(item, "$", "string"))


def numbers_as_written(texts: Column, items: Column, record: Column, key: str | None = None) -> Column:
    """``texts`` (a JSON object's ``map<string,string>``) with each number that ``items`` (the same
    object's ``map<string,variant>``) holds as a double taken as ``record`` writes it
    (:func:`number_as_written`), looked for from the object's ``key`` on (``"after"``: an update's
    ``before`` holds the same names); the map as it is in a record with no such number
    (:data:`INEXACT_NUMBER`), which is nearly every one."""
    within = record if key is None else record.substr(F.regexp_instr(record, F.lit(f'"{key}"\\s*:')), F.length(record))
    exact = frames.let(items, lambda its: F.transform_values(texts, lambda k, v: frames.let(its[k], lambda item: F.when(
        F.schema_of_variant(item) == "DOUBLE", number_as_written(item, within, k)).otherwise(v))))
    return F.when(record.rlike(INEXACT_NUMBER), exact).otherwise(texts)  # the image cut out only then


def images_as_written(read: Column, record: Column, keys: tuple[str, ...], envelope: str | None = None) -> Column:
    """``read`` (a struct parsed from the JSON text ``record``) with each of its ``map<string,string>``
    fields ``keys`` given the numbers a double cannot hold as ``record`` writes them
    (:func:`numbers_as_written`); the objects are at the top of ``record`` or under its key
    ``envelope`` (Debezium's ``payload``). As read in nearly every record (:data:`INEXACT_NUMBER`).

    >>> # images_as_written(F.from_json("value", ddl), F.col("value"), ("before", "after"), "payload")
    """
    def exact(v: Column) -> Column:  # the record parsed once (frames.let), only where it holds such a number
        out = read
        for k in keys:
            paths = ([f"$['{envelope}']['{k}']"] if envelope else []) + [f"$['{k}']"]
            items = F.coalesce(*[F.try_variant_get(v, path, "map<string,variant>") for path in paths])
            out = out.withField(k, numbers_as_written(read[k], items, record, k))
        return out

    return F.when(record.rlike(INEXACT_NUMBER), frames.let(F.try_parse_json(record), exact)).otherwise(read)
