"""Column bit masks, the one helper every decoder uses: SQL Server's ``__$update_mask`` (change
tables) and Qlik's ``changeMask`` / ``columnMask`` are hex digits with one bit per column ordinal.

The two producers order the bytes differently, so the byte order is a parameter, never implied:

``"big"``
    the mask is one big-endian number: its *last* byte holds ordinals 1-8. SQL Server's
    ``sys.fn_cdc_is_bit_set(p, mask)`` reads ``SUBSTRING(mask, DATALENGTH(mask) - ((p-1)/8), 1)``.
``"little"``
    the *first* byte holds ordinals 1-8 (Qlik's documented example reads ``0B`` as ordinals 1, 2
    and 4; with more than eight columns its bytes follow in that order).

Within a byte, bit 0 (value 1) is the lowest ordinal. Digits may be upper or lower case and
surrounded by blanks; an odd count gets a leading ``0``. An ordinal beyond the mask's end is not
set (False, never NULL).

>>> from pyspark.sql import functions as F
>>> # mask_has(F.lit("0201"), 10, "big") -> True   (first byte 02: bit 1 of the second byte)
>>> # mask_ordinals(F.lit("0B"), "little") -> [1, 2, 4]
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc import frames

__all__ = ["BYTE_ORDERS", "ByteOrder", "mask_has", "mask_names", "mask_ordinals"]

ByteOrder = Literal["big", "little"]
BYTE_ORDERS: tuple[str, ...] = ("little", "big")


def _digits(mask: Column) -> Column:
    """Upper-case hex digits of even length."""
    digits = F.upper(F.trim(mask))
    return F.when(F.length(digits) % 2 == 1, F.concat(F.lit("0"), digits)).otherwise(digits)


def mask_has(mask: Column, ordinal: Column | int, byte_order: ByteOrder) -> Column:
    """True when the (1-based) ``ordinal``'s bit is set in the hex ``mask``; False when the mask
    is NULL, empty or too short to hold it."""
    return frames.let(_digits(mask), lambda digits: _has(digits, ordinal, byte_order))


def mask_names(mask: Column, ordinals: dict[str, int], byte_order: ByteOrder) -> Column:
    """``array<string>`` of the names (of ``ordinals``: name -> 1-based ordinal) whose bit is set,
    in ``ordinals``' order; the mask is normalised once for all of them."""
    return frames.let(_digits(mask), lambda digits: frames.compact(
        [F.when(_has(digits, o, byte_order), F.lit(n)) for n, o in ordinals.items()]))


def mask_ordinals(mask: Column, byte_order: ByteOrder) -> Column:
    """``array<int>`` of the ordinals whose bit is set, ascending (empty for an empty mask)."""
    return frames.let(_digits(mask), lambda digits: F.filter(  # normalised once, not once per ordinal
        F.sequence(F.lit(1), F.greatest(F.length(digits) * 4, F.lit(1))), lambda o: _has(digits, o, byte_order)))


def _has(digits: Column, ordinal: Column | int, byte_order: ByteOrder) -> Column:
    """:func:`mask_has` on digits :func:`_digits` already normalised."""
    if byte_order not in BYTE_ORDERS:
        raise ValueError(f"mask byte order must be 'little' or 'big', not {byte_order!r}")
    index = (F.lit(ordinal) if isinstance(ordinal, int) else ordinal) - 1
    byte_no = F.floor(index / 8)
    n = F.length(digits)
    start = byte_no * 2 + 1 if byte_order == "little" else n - byte_no * 2 - 1
    value = F.conv(F.substring(digits, start.cast("int"), 2), 16, 10).cast("int")
    bit = value.bitwiseAND(F.pow(F.lit(2), index % 8).cast("int")) != 0
    return F.coalesce((index >= 0) & (byte_no * 2 < n) & bit, F.lit(False))
