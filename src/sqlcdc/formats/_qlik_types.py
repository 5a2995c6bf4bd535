"""Qlik Replicate column types -> :class:`~sqlcdc.values.ColumnSpec` (:func:`spec_for`).

Private to :mod:`sqlcdc.formats.qlik` (which re-exports :func:`spec_for`); see its docstring, "Types".
"""

from __future__ import annotations

import logging
import re

from sqlcdc.values import ColumnSpec

__all__ = ["spec_for"]

log = logging.getLogger("sqlcdc.formats.qlik")

_SIMPLE_TYPES: dict[str, tuple[str, str, bool]] = {
    # Qlik type: (Spark type, encoding, lob)
    "INT1": ("tinyint", "text", False),
    "INT2": ("smallint", "text", False),
    "INT4": ("int", "text", False),
    "INT8": ("bigint", "text", False),
    "UINT1": ("smallint", "text", False),
    "UINT2": ("int", "text", False),
    "UINT4": ("bigint", "text", False),
    "UINT8": ("decimal(20,0)", "text", False),
    "REAL4": ("float", "text", False),
    "REAL8": ("double", "text", False),
    "STRING": ("string", "text", False),
    "WSTRING": ("string", "text", False),
    "CLOB": ("string", "text", True),
    "NCLOB": ("string", "text", True),
    "DATE": ("date", "text", False),
    "TIME": ("string", "text", False),
    "DATETIME": ("timestamp_ntz", "text", False),
    "TIMESTAMP": ("timestamp_ntz", "text", False),
    "BOOLEAN": ("boolean", "text", False),
    "BYTES": ("binary", "hex", False),
    "BLOB": ("binary", "hex", True),
}
_TYPE_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")


def spec_for(
    name: str,
    qlik_type: str,
    *,
    precision: int | None = None,
    scale: int | None = None,
    ordinal: int | None = None,
) -> ColumnSpec:
    """The :class:`ColumnSpec` of a Qlik column.

    >>> spec_for("price", "NUMERIC", precision=10, scale=2).spark_type
    'decimal(10,2)'
    >>> spec_for("price", "NUMERIC(12,3)").spark_type
    'decimal(12,3)'
    >>> spec_for("photo", "BLOB").encoding, spec_for("photo", "BLOB").lob
    ('hex', True)
    """
    m = _TYPE_RE.match(qlik_type or "")
    base = m.group(1).upper() if m else (qlik_type or "").upper()
    if m and m.group(2) is not None:
        precision = int(m.group(2))
        scale = int(m.group(3)) if m.group(3) is not None else 0
    if base in ("NUMERIC", "DECIMAL"):
        p = precision or 38
        s = scale or 0
        if p > 38:
            return ColumnSpec(name, "string", ordinal=ordinal, source_type=qlik_type)
        return ColumnSpec(name, f"decimal({max(p, s)},{s})", ordinal=ordinal, source_type=qlik_type)
    if base in _SIMPLE_TYPES:
        t, enc, lob = _SIMPLE_TYPES[base]
        return ColumnSpec(name, t, enc, lob=lob, ordinal=ordinal, source_type=qlik_type)
    log.warning("qlik: column %s has type %r, unknown to sqlcdc: kept as string", name, qlik_type)
    return ColumnSpec(name, "string", ordinal=ordinal, source_type=qlik_type)
