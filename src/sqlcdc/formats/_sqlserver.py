"""SQL Server's type names -> Spark types: the one mapping of that type system (CES's
``eventsource.cols`` name their columns' types this way; ``sqlcdc validate`` types rule columns
with it through the decoder's ``config_column``).

Each SQL Server type maps to a Spark type and an encoding of its value text (``text``: the value
as SQL Server prints it; ``hex``: binary as ``0x`` hex digits). Types Delta cannot hold exactly
stay text (``time``), unknown ones (``geography``, ``hierarchyid``, ``sql_variant`` ...) stay strings
and are reported by :func:`unknown_types`.
"""

from __future__ import annotations

import re
from typing import Iterable

from sqlcdc.values import ColumnSpec

__all__ = ["config_spec", "is_spark_type", "is_sql_server_type", "means_sql_server_type", "spec_for_sql_type", "unknown_types"]

_TYPE_RE = re.compile(r"^\s*([a-z][a-z0-9_ ]*?)\s*(?:\(\s*([^)]*?)\s*\))?\s*$")
_SIMPLE: dict[str, tuple[str, str]] = {
    "int": ("int", "text"),
    "bigint": ("bigint", "text"),
    "smallint": ("smallint", "text"),
    "tinyint": ("smallint", "text"),  # 0..255 does not fit Spark's signed tinyint
    "bit": ("boolean", "text"),
    "money": ("decimal(19,4)", "text"),
    "smallmoney": ("decimal(10,4)", "text"),
    "real": ("float", "text"),
    "date": ("date", "text"),
    "time": ("string", "text"),  # Delta has no TIME type: text HH:mm:ss.SSSSSS (sqlcdc.values)
    "datetime": ("timestamp_ntz", "text"),
    "datetime2": ("timestamp_ntz", "text"),
    "smalldatetime": ("timestamp_ntz", "text"),
    "datetimeoffset": ("timestamp", "text"),
    "char": ("string", "text"),
    "varchar": ("string", "text"),
    "nchar": ("string", "text"),
    "nvarchar": ("string", "text"),
    "text": ("string", "text"),
    "ntext": ("string", "text"),
    "uniqueidentifier": ("string", "text"),
    "xml": ("string", "text"),
    "binary": ("binary", "hex"),
    "varbinary": ("binary", "hex"),
    "image": ("binary", "hex"),
    "rowversion": ("binary", "hex"),
    "timestamp": ("binary", "hex"),  # SQL Server's `timestamp` is rowversion, not a date
    "sysname": ("string", "text"),
}
_LOB_TYPES = {"text", "ntext", "image", "xml"}


def is_sql_server_type(sql_type: str) -> bool:
    """True for a SQL Server type name this mapping knows (arguments not checked).

    >>> is_sql_server_type("datetime2(6)"), is_sql_server_type("geography")
    (True, False)
    """
    m = _TYPE_RE.match(sql_type.lower())
    return bool(m) and (m.group(1) in _SIMPLE or m.group(1) in ("decimal", "numeric", "float"))

#: The Spark SQL types a silver column may have, as sqlcdc spells them (``decimal(p,s)`` with
#: 1 <= p <= 38, 0 <= s <= p).
_SPARK_TYPE_RE = re.compile(
    r"^(boolean|tinyint|smallint|int|bigint|float|double|string|binary|date|timestamp|timestamp_ntz"
    r"|decimal(\((?P<p>[0-9]{1,2})(,(?P<s>[0-9]{1,2}))?\))?)$")


def is_spark_type(spark_type: str) -> bool:
    """True for a Spark SQL type a silver column can have (as sqlcdc spells them).

    >>> is_spark_type("decimal(10,2)"), is_spark_type("decimal(40,2)"), is_spark_type("varbinary(16)")
    (True, False, False)
    """
    m = _SPARK_TYPE_RE.match(spark_type.replace(" ", ""))
    if not m:
        return False
    p, s = int(m.group("p") or 10), int(m.group("s") or 0)
    return 1 <= p <= 38 and s <= p


#: Names both Spark and SQL Server give a type, read as SQL Server's in ``columns:``.
_SQL_SERVER_MEANING = ("float", "tinyint")


def means_sql_server_type(type_name: str) -> bool:
    """True when a ``columns:`` type names a SQL Server type: one Spark does not know, or ``float``
    and ``tinyint`` (see :func:`config_spec`).

    >>> means_sql_server_type("tinyint"), means_sql_server_type("timestamp"), means_sql_server_type("money")
    (True, False, True)
    """
    low = str(type_name).strip().lower()
    return (low in _SQL_SERVER_MEANING or not is_spark_type(low)) and is_sql_server_type(low)


def config_spec(name: str, type_name: str, *, ordinal: int | None = None, lob: bool = False) -> ColumnSpec:
    """A ``columns:`` entry whose values are text (a change-table export, a default decoder): a
    Spark SQL type as it is, else a SQL Server type name by :func:`spec_for_sql_type`. Where both
    spell a type Spark's meaning wins (``timestamp``), but for ``float`` (SQL Server's is 8 bytes:
    reading it as Spark's 4-byte float would change values) and ``tinyint`` (SQL Server's is
    0..255: Spark's signed byte would refuse 128..255; it lands as smallint). A name that is neither is returned as it
    is, for the config check to refuse (:meth:`sqlcdc.formats.Decoder.config_type_problem`).

    >>> config_spec("seen", "datetime2(6)").spark_type, config_spec("on", "bit").spark_type
    ('timestamp_ntz', 'boolean')
    """
    low = str(type_name).strip().lower()
    if means_sql_server_type(low):
        return spec_for_sql_type(name, low, ordinal=ordinal, lob=lob)
    return ColumnSpec(name, low, lob=lob, ordinal=ordinal, source_type=str(type_name))


def spec_for_sql_type(name: str, sql_type: str, *, ordinal: int | None = None, lob: bool | None = None) -> ColumnSpec:
    """The :class:`ColumnSpec` for a column of SQL Server type ``sql_type`` (as CES names it).

    Unknown types (``geography``, ``hierarchyid``, ``sql_variant`` ...) stay strings; see
    :func:`unknown_types`. Binary values are read as hex text (``0x`` optional).

    >>> spec_for_sql_type("price", "decimal(10,2)").spark_type
    'decimal(10,2)'
    >>> spec_for_sql_type("body", "nvarchar(max)").lob
    True
    """
    m = _TYPE_RE.match(sql_type.lower())
    base, args = (m.group(1).strip(), (m.group(2) or "").replace(" ", "")) if m else ("", "")
    is_lob = args == "max" or base in _LOB_TYPES
    if base in ("decimal", "numeric"):
        parts = [p for p in args.split(",") if p] if args else []
        p = int(parts[0]) if parts and parts[0].isdigit() else 18
        s = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        spark_type, enc = f"decimal({min(p, 38)},{min(s, min(p, 38))})", "text"
    elif base == "float":
        spark_type = "float" if args.isdigit() and int(args) <= 24 else "double"
        enc = "text"
    elif base in _SIMPLE:
        spark_type, enc = _SIMPLE[base]
    else:
        spark_type, enc = "string", "text"
    return ColumnSpec(
        name=name,
        spark_type=spark_type,
        encoding=enc,
        lob=is_lob if lob is None else bool(lob),
        ordinal=ordinal,
        source_type=sql_type,
    )


def unknown_types(columns: Iterable[ColumnSpec]) -> list[tuple[str, str]]:
    """``(column, source type)`` of columns whose SQL Server type sqlcdc does not know: they are
    kept as strings, and this is what DQ metrics report.

    >>> unknown_types([spec_for_sql_type("shape", "geography"), spec_for_sql_type("id", "int")])
    [('shape', 'geography')]
    """
    return [(c.name, c.source_type) for c in columns if c.source_type and not is_sql_server_type(c.source_type)]
