"""SQL Server LSNs and the ordering key every change carries.

Three producers expose the same LSN space in different spellings:

=================  ===============================  ==========================================
producer           spelling                         example
=================  ===============================  ==========================================
change tables      binary(10), or ``0x`` hex text   ``0x0000002700000758000 5`` (20 hex digits)
Debezium           ``xxxxxxxx:xxxxxxxx:xxxx``        ``00000027:00000758:0005``
CES                20 hex digits in ``logicalid``    ``0000002C00000300017C``
=================  ===============================  ==========================================

:func:`normalize_lsn` turns each into 20 upper-case hex digits, which sort lexicographically in
LSN order, so one table can be back-filled from one producer and continued from another.

Ordering keys come from data, so they are *validated*, never guessed: :func:`parse_lsn` accepts
only a producer's exact spelling (``27:758:5``, ``0x01``, 24 digits or a JSON number are not
LSNs), and :func:`lsn_problem` words why a value is refused, for the quarantine reason. A change
whose LSN does not read is quarantined; it never gets :data:`BEFORE_ALL` or a padded value.
:func:`normalize_lsn` (lenient, pads short values) is kept for reading LSNs a person typed.

The ordering key (``sequence`` in the canonical change) is a struct that Spark compares field by
field: ``commit_lsn`` (commit order), then ``change_lsn`` (order of the change within the log),
then ``serial`` (order among events sharing a change position). Snapshot and full-load events use
``commit_lsn`` of the snapshot point if the producer gives one, else :data:`BEFORE_ALL`, which
sorts before every real LSN.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

LSN_HEX_DIGITS = 20
BEFORE_ALL = "0" * LSN_HEX_DIGITS

SEQUENCE_TYPE = StructType(
    [
        StructField("commit_lsn", StringType(), False),
        StructField("change_lsn", StringType(), False),
        StructField("serial", LongType(), False),
    ]
)


def normalize_lsn(value: Column) -> Column:
    """A text LSN in any producer spelling -> 20 upper-case hex digits (NULL stays NULL).

    Accepts ``00000027:00000758:0005``, ``0x00000027000007580005``, ``00000027000007580005``.
    Text that is not hex after removing ``0x``, ``:`` and spaces gives NULL.
    """
    digits = F.upper(F.regexp_replace(F.trim(value), r"^0[xX]|[:\s]", ""))
    return F.when(
        digits.rlike(r"^[0-9A-F]{1,20}$"), F.lpad(digits, LSN_HEX_DIGITS, "0")
    )


#: Exact LSN spellings: name -> (regex, how it is described in a quarantine reason).
SPELLINGS = {
    "debezium": (r"^[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4}$", "xxxxxxxx:xxxxxxxx:xxxx, hex"),
    "hex": (r"^(0[xX])?[0-9A-Fa-f]{20}$", "20 hex digits, optionally 0x-prefixed"),
    "hex_or_debezium": (
        r"^((0[xX])?[0-9A-Fa-f]{20}|[0-9A-Fa-f]{8}:[0-9A-Fa-f]{8}:[0-9A-Fa-f]{4})$",
        "20 hex digits, optionally 0x-prefixed, or xxxxxxxx:xxxxxxxx:xxxx",
    ),
}


def _digits(trimmed: Column) -> Column:
    """An LSN's hex digits, upper case, without ``0x`` or the ``:`` separators."""
    return F.upper(F.regexp_replace(trimmed, r"^0[xX]|:", ""))


def parse_lsn(value: Column, spelling: str) -> Column:
    """An LSN in exactly the ``spelling`` of :data:`SPELLINGS` -> 20 upper-case hex digits.

    NULL when ``value`` is NULL, not in that exact shape, or the zero LSN (no change has it).
    """
    pattern, _ = SPELLINGS[spelling]
    t = F.trim(value)
    digits = _digits(t)
    return F.when(t.rlike(pattern) & (digits != F.lit(BEFORE_ALL)), digits)


def lsn_problem(value: Column, name: str, spelling: str) -> Column:
    """Why ``value`` is not an LSN in ``spelling`` (NULL when it is one, or when it is NULL).

    >>> # lsn_problem(F.lit("27:758:5"), "source.commit_lsn", "debezium") ->
    >>> # "source.commit_lsn '27:758:5' is not an LSN (xxxxxxxx:xxxxxxxx:xxxx, hex)"
    """
    pattern, described = SPELLINGS[spelling]
    t = F.trim(value)
    shown = F.substring(value, 1, 60)
    return F.when(value.isNull(), F.lit(None).cast("string")).when(
        ~t.rlike(pattern), F.format_string(f"{name} '%s' is not an LSN ({described})", shown)
    ).when(
        _digits(t) == F.lit(BEFORE_ALL),
        F.format_string(f"{name} '%s' is the zero LSN, which no change has", shown),
    )


def binary_lsn(value: Column) -> Column:
    """A binary(10) LSN -> 20 upper-case hex digits; NULL unless exactly 10 bytes (not zero)."""
    digits = F.upper(F.hex(value))
    return F.when((F.length(value) == 10) & (digits != F.lit(BEFORE_ALL)), digits)


def sequence(commit_lsn: Column, change_lsn: Column | None = None, serial: Column | None = None) -> Column:
    """Build the never-null ordering struct. Missing parts become the lowest value."""
    change = change_lsn if change_lsn is not None else F.lit(BEFORE_ALL)
    ser = serial if serial is not None else F.lit(0)
    return F.struct(
        F.coalesce(commit_lsn, F.lit(BEFORE_ALL)).alias("commit_lsn"),
        F.coalesce(change, F.lit(BEFORE_ALL)).alias("change_lsn"),
        F.coalesce(ser.cast("bigint"), F.lit(0).cast("bigint")).alias("serial"),
    )
