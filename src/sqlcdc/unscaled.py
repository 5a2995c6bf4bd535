"""Kafka Connect ``Decimal`` bytes -> a decimal column, exactly (``values``' ``base64_decimal``).

Debezium's ``decimal.handling.mode=precise`` (its default) sends a decimal as base64 of the
big-endian two's-complement *unscaled* integer; the scale comes from the schema. A value that does
not fit the Spark type is NULL, never rounded or raised (``values.value_error`` says why).

Two paths, chosen per value by the byte count:

- up to 7 bytes (|unscaled| < 2**55, every decimal of up to 16 digits): ``conv`` reads the hex as
  an unsigned 64-bit integer, a negative value subtracts ``2**(8 * bytes)``, and the text
  ``<unscaled>E-<scale>`` is cast to the type. All in generated code: ~5x faster than the general
  path on two cores (measured 2026-11-29, 2M values of decimal(10,2), 3.3-4.5 s vs 14.7-32 s).
- longer: the significant bytes (leading sign-extension bytes dropped, any byte count), two
  halves of 8 bytes read by ``conv`` and joined by overflow-checked ``decimal(38,0)`` arithmetic, a
  negative value from its one's complement so 16-byte values stay in range. Also generated code;
  until 2026-12-03 a fold over the bytes (a higher-order function, interpreted row by row, 2.6x
  slower on 8-16-byte values, and 6 plan levels deeper).
"""

from __future__ import annotations

from typing import Union

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc import frames

__all__ = ["decimal_from_base64", "decimal_from_short_base64"]

_FAST_BYTES = 7  # 56 bits: the unsigned reading and 1 << 56 stay inside a long
#: A value's scale: the type's, or per row (an event's own schema's, at most the type's: read exactly).
Scale = Union[int, Column]


def decimal_from_base64(raw: Column, spark_type: str, scale: Scale) -> Column:
    """Base64 text of a two's-complement unscaled integer -> ``spark_type`` (a decimal with
    ``scale``); NULL for text that is not base64, no bytes, or a value the type cannot hold.

    Example::

        decimal_from_base64(F.lit("ME8="), "decimal(10,2)", 2)   # 0x304F = 12367 -> 123.67
    """
    hexed = F.hex(F.try_to_binary(raw, F.lit("base64")))
    return F.when(F.length(hexed).between(1, 2 * _FAST_BYTES), _short(hexed, spark_type, scale)).otherwise(
        _any_length(hexed, spark_type, scale))


def decimal_from_short_base64(raw: Column, spark_type: str, scale: Scale) -> Column:
    """:func:`decimal_from_base64` of a value of 1 to 7 bytes; NULL for any other. Its expression is
    24 plan levels deep where :func:`decimal_from_base64` is 42 (a plan's nesting is limited: Spark
    Connect and SDP refuse one deeper than 100 levels)."""
    hexed = F.hex(F.try_to_binary(raw, F.lit("base64")))
    return F.when(F.length(hexed).between(1, 2 * _FAST_BYTES), _short(hexed, spark_type, scale))


def _short(hexed: Column, spark_type: str, scale: Scale) -> Column:
    """The value of 1 to 7 bytes (``hexed``: their hex) in generated code."""
    negative = F.substring(hexed, 1, 1) >= F.lit("8")  # the sign bit: first hex digit 8..F
    span = F.call_function("shiftleft", F.lit(1).cast("long"), F.length(hexed) * 4)
    unscaled = F.conv(hexed, 16, 10).try_cast("long") - F.when(negative, span).otherwise(F.lit(0).cast("long"))
    return _with_scale(unscaled.cast("string"), spark_type, scale)


def _with_scale(unscaled_text: Column, spark_type: str, scale: Scale) -> Column:
    """``12367`` with scale 2 -> ``123.67``: ``12367E-2`` read as the decimal (exact, no rounding
    where ``scale`` is at most the type's; a per-row scale is the caller's to bound)."""
    if isinstance(scale, Column):
        return F.concat(unscaled_text, F.lit("E-"), scale.cast("string")).try_cast(spark_type)
    text = unscaled_text if scale == 0 else F.concat(unscaled_text, F.lit(f"E-{scale}"))
    return text.try_cast(spark_type)


_HEX = "0123456789ABCDEF"
#: Bytes that only repeat the sign (``00`` before a byte below 0x80, ``FF`` before one from 0x80).
_SIGN_EXTENSION = r"^(?:00)+(?=[0-7])|^(?:FF)+(?=[89A-F])"


def _any_length(hexed: Column, spark_type: str, scale: Scale) -> Column:
    """The general path, for any byte count: the value's significant bytes (sign extension
    dropped; more than 16 cannot fit a decimal(38)), padded to 16, read as two halves of 8 bytes
    (``conv`` reads each as an unsigned 64-bit integer) joined by overflow-checked ``decimal(38,0)``
    arithmetic; a negative value from its one's complement (hex digits mirrored), so that -2**127
    stays in range. No fold: generated code, and 6 plan levels shallower than the byte-by-byte
    fold it replaces (2026-12-03)."""

    def unscaled(h: Column) -> Column:
        negative = F.substring(h, 1, 1) >= F.lit("8")
        ones = F.lpad(F.when(negative, F.translate(h, _HEX, _HEX[::-1])).otherwise(h), 32, "0")
        high, low = (F.conv(F.substring(ones, start, 16), 16, 10).cast("decimal(38,0)") for start in (1, 17))
        magnitude = F.try_add(F.try_multiply(high, F.lit(str(2 ** 64)).cast("decimal(38,0)")), low)
        # negative: -1 - magnitude (the one's complement of v is -1 - v)
        sign = F.when(negative, F.lit(-1)).otherwise(F.lit(1)).cast("decimal(38,0)")
        value = F.try_add(F.try_multiply(magnitude, sign), F.when(negative, F.lit(-1)).otherwise(F.lit(0)).cast("decimal(38,0)"))
        return F.when(F.length(h).between(1, 32), value.cast("string"))

    significant = F.regexp_replace(hexed, _SIGN_EXTENSION, "")
    return _with_scale(frames.let(significant, unscaled), spark_type, scale)
