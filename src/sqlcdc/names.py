"""Column names as Delta Lake stores them (pure Python: the config checks use it before Spark starts)."""

from __future__ import annotations

__all__ = ["DELTA_BAD_NAME_CHARS", "DELTA_BAD_NAME_RE", "literal", "quote", "unstorable"]

#: Characters Delta Lake refuses in a column name (plus the backtick, which SQL cannot quote back).
#: Silver and gold keep the source's column names, so a column holding one cannot land: the
#: producers' metadata naming one is quarantined, a ``columns:`` entry naming one is a config error.
DELTA_BAD_NAME_CHARS = " ,;{}()\n\t=`"
DELTA_BAD_NAME_RE = "[ ,;{}()\\n\\t=`]"


def unstorable(name: str) -> bool:
    """True when Delta cannot store ``name`` as a column name.

    >>> unstorable("Order Date"), unstorable("OrderDate")
    (True, False)
    """
    return any(ch in name for ch in DELTA_BAD_NAME_CHARS)


def quote(name: str) -> str:
    """``name`` as a Spark SQL identifier: backticks, an inner backtick doubled. Names come from
    config and producer metadata -- data, never pasted into SQL unquoted. The one quoting function.

    >>> quote("order date"), quote("a`b")
    ('`order date`', '`a``b`')
    """
    return "`" + name.replace("`", "``") + "`"


def literal(text: str) -> str:
    """``text`` as a Spark SQL string literal (backslash escapes, the parser's default). Like
    :func:`quote`, the one place such literals are made.

    >>> literal("it's")
    "'it\\\\'s'"
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
