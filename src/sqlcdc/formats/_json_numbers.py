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

__all__ = ["NUMBER_NOT_FOUND", "number_as_written"]

#: What :func:`number_as_written` gives for a number it cannot find in the record's text.
NUMBER_NOT_FOUND = "(a JSON number a double cannot hold exactly, its key written with escapes)"


def number_as_written(item: Column, record: Column, name: str) -> Column:
    """The text of ``item``, the VARIANT of the key ``name`` of the JSON text ``record``. A VARIANT
    holds a number written with an exponent or more than 38 digits as a double (``1e-400`` is 0.0
    there, ``1.0000000000000000000000000000000000000001`` is 1.0): such a number is taken as the
    record writes it, so a decimal column reads it exactly or says why not, never rounded."""
    quoted = name.replace("\\E", "\\E\\\\E\\Q")
    written = F.regexp_extract(record, '"\\Q' + quoted + '\\E"\\s*:\\s*(-?[0-9][0-9.eE+-]*)', 1)
    return F.when(F.schema_of_variant(item) == "DOUBLE", F.coalesce(F.nullif(written, F.lit("")), F.lit(NUMBER_NOT_FOUND))
                  ).otherwise(F.try_variant_get(item, "$", "string"))
