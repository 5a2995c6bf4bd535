"""Column names as Delta Lake stores them (pure Python: the config checks use it before Spark starts)."""

from __future__ import annotations

import re

__all__ = ["DELTA_BAD_NAME_CHARS", "DELTA_BAD_NAME_RE", "RESERVED_LIST", "RESERVED_NAMES", "RESERVED_PREFIX", "RESERVED_RE",
           "RESERVED_WHY", "column_ref", "literal", "quote", "reserved", "reserved_problem", "unstorable"]

#: Characters Delta Lake refuses in a column name (plus the backtick, which SQL cannot quote back).
#: Silver and gold keep the source's column names, so a column holding one cannot land: the
#: producers' metadata naming one is quarantined, a ``columns:`` entry naming one is a config error.
DELTA_BAD_NAME_CHARS = " ,;{}()\n\t=`"
DELTA_BAD_NAME_RE = "[ ,;{}()\\n\\t=`]"


#: Names sqlcdc gives columns of its own beside a table's data columns, lower case: the apply frame
#: gold and AUTO CDC read (:data:`sqlcdc.model.APPLY_META_COLUMNS`), SCD2 gold's version bounds
#: (``__START_AT``/``__END_AT``), and the frame expectations are checked on (``_value_warnings``,
#: ``_dq_<action>``). A data column so named would make every reference to either ambiguous (the
#: run stops) or be overwritten by it, so a column cannot have one: a ``columns:`` entry naming one
#: is a config error, producer metadata naming one is quarantined, like a name Delta cannot store.
#: Spark resolves names case-insensitively, so ``_OP`` is reserved too.
RESERVED_NAMES = ("_op", "_sequence", "_provided", "_change_id", "_commit_time", "__start_at", "__end_at",
                  "_value_warnings", "_dq_warn", "_dq_drop", "_dq_fail", "_dq_quarantine")
#: The prefix of gold's working columns (``__ac_open``, ``__ac_copy``, ...): reserved as well.
RESERVED_PREFIX = "__ac_"
#: :func:`reserved` as a Java regular expression, for Spark's ``rlike`` over producer metadata.
RESERVED_RE = "(?i)^(" + "|".join(RESERVED_NAMES) + "|" + RESERVED_PREFIX + ".*)$"
#: :data:`RESERVED_NAMES` as the messages list them.
RESERVED_LIST = "_op _sequence _provided _change_id _commit_time __START_AT __END_AT _value_warnings _dq_<action> __ac_*"
#: What the names :func:`reserved` finds in producer metadata are, in every reason that names them
#: (``column name(s) <names> {RESERVED_WHY}``).
RESERVED_WHY = f"are ones sqlcdc gives columns of its own ({RESERVED_LIST}); rename the column at the source"


def reserved(name: str) -> bool:
    """True when ``name`` is one sqlcdc gives a column of its own (:data:`RESERVED_NAMES`, any case,
    or :data:`RESERVED_PREFIX`).

    >>> reserved("_op"), reserved("_Sequence"), reserved("__ac_open"), reserved("op")
    (True, True, True, False)
    """
    low = name.lower()
    return low in RESERVED_NAMES or low.startswith(RESERVED_PREFIX)


def reserved_problem(names: list[str]) -> str | None:
    """The sentence naming the :func:`reserved` names among ``names`` (None when there are none),
    for a config error or a quarantine reason.

    >>> reserved_problem(["id", "_op"])
    "column name(s) '_op' are ones sqlcdc gives columns of its own (_op _sequence _provided _change_id _commit_time __START_AT __END_AT _value_warnings _dq_<action> __ac_*); rename the column at the source"
    """
    bad = [n for n in names if reserved(n)]
    if not bad:
        return None
    return f"column name(s) {', '.join(map(repr, bad))} {RESERVED_WHY}"


def unstorable(name: str) -> bool:
    """True when Delta cannot store ``name`` as a column name.

    >>> unstorable("Order Date"), unstorable("OrderDate")
    (True, False)
    """
    return any(ch in name for ch in DELTA_BAD_NAME_CHARS)


_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote(name: str) -> str:
    """``name`` as a Spark SQL identifier: backticks, an inner backtick doubled. Names come from
    config and producer metadata -- data, never pasted into SQL unquoted. The one quoting function.

    >>> quote("order date"), quote("a`b")
    ('`order date`', '`a``b`')
    """
    return "`" + name.replace("`", "``") + "`"


def column_ref(name: str) -> str:
    """``name`` as an API that parses column names reads it (``F.col``; the ``keys`` and column lists
    of AUTO CDC and dlt-meta): as it is when a plain identifier, else :func:`quote`d, so ``unit.price``
    stays one column rather than a field ``price`` of a struct ``unit``.

    >>> column_ref("id"), column_ref("unit.price")
    ('id', '`unit.price`')
    """
    return name if _PLAIN_IDENTIFIER.fullmatch(name) else quote(name)


def literal(text: str) -> str:
    """``text`` as a Spark SQL string literal (backslash escapes, the parser's default). Like
    :func:`quote`, the one place such literals are made.

    >>> literal("it's")
    "'it\\\\'s'"
    """
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
