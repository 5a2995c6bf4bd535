"""Qlik message shape and validation: compiled schema predicates and jsonschema reasons.

Private to :mod:`sqlcdc.formats.qlik` (which re-exports :data:`DATA_SCHEMA`,
:data:`METADATA_SCHEMA`, :func:`is_valid` and :func:`explain`). A landed line is parsed into a
VARIANT, told wrapped (atMSG) or bare and data (``DT``) or metadata (``MD``), and checked on the hot
path by the schemas compiled to Spark SQL; ``jsonschema`` words the reason of failing lines only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pandas as pd
from jsonschema import Draft202012Validator
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from sqlcdc.formats import _schema_check as sc

__all__ = ["DATA_SCHEMA", "METADATA_SCHEMA", "explain", "is_valid", "valid"]

DATA_SCHEMA = "qlik-data-message.schema.json"
METADATA_SCHEMA = "qlik-metadata-message.schema.json"


# --- parsing and validation ----------------------------------------------------------------------


def _get(node: Column, *path: str, as_type: str = "variant") -> Column:
    p = "$" + "".join(f"['{name}']" for name in path)
    return F.try_variant_get(node, p, as_type)


@lru_cache(maxsize=None)
def _branches(schema_file: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(wrapped, bare) branches of a Qlik schema's top-level ``anyOf``."""
    schema = sc.load(schema_file)
    wrapped, bare = schema["anyOf"]
    assert "magic" in wrapped["required"], f"{schema_file}: anyOf[0] must be the atMSG wrapper"
    return wrapped, bare


_NOT_A_MESSAGE = "$: neither a Qlik data message (headers/data) nor a metadata message (lineage/tableStructure)"
_BAD_WRAPPER_TYPE = "$.type: the atMSG wrapper's type is neither DT (data) nor MD (metadata)"


def _vget(doc: str, name: str, as_type: str = "variant") -> str:
    return f"try_variant_get({doc}, '$[\\'{name}\\']', '{as_type}')"


def _shape(doc: str) -> tuple[str, str, str]:
    """(is-wrapped, kind ``DT``/``MD``/other/NULL, the message) of a parsed document, as SQL over
    ``doc`` (SQL text of a VARIANT).

    A document is a wrapper when it has a non-null ``magic`` (the bare schemas allow only a null
    one, so this equals the schemas' ``anyOf(wrapper, bare)``); its kind is then its ``type``.
    A bare document is metadata when it has ``lineage`` or ``tableStructure``, else data when it
    has ``headers``, ``data`` or ``beforeData``.
    """
    magic = _vget(doc, "magic")
    wrapped = f"coalesce({magic} IS NOT NULL AND NOT is_variant_null({magic}), false)"
    has = lambda *names: " OR ".join(f"{_vget(doc, n)} IS NOT NULL" for n in names)  # noqa: E731
    bare = f"CASE WHEN {has('lineage', 'tableStructure')} THEN 'MD' WHEN {has('headers', 'data', 'beforeData')} THEN 'DT' END"
    kind = f"CASE WHEN {wrapped} THEN {_vget(doc, 'type', 'string')} ELSE {bare} END"
    msg = f"CASE WHEN {wrapped} THEN {_vget(doc, 'message')} ELSE {doc} END"
    return wrapped, kind, msg


def _rules(doc: str, wrapped: str, kind: str, msg: str, kinds: tuple[str, ...] = ("DT", "MD")) -> str:
    """SQL ``array<string>`` of the schema rules the document breaks (empty = valid).

    The bare schema is compiled once and applied to the message (the document, or a wrapper's
    ``message``); a wrapper adds the rules of its own fields. Rule names inside a wrapper's
    message read ``$.message....``. Only the schemas of ``kinds`` are compiled (smaller code);
    a record of another kind then gets the rule ``$: not a <kind> message``. One SQL string, not
    nested Columns: Spark Connect limits a plan's protobuf nesting to 100 levels.
    """
    no_rules = "CAST(array() AS array<string>)"
    per_kind = {}
    for k, schema_file in (("DT", DATA_SCHEMA), ("MD", METADATA_SCHEMA)):
        if k not in kinds:
            per_kind[k] = f"array('$: not a {k} message')"
            continue
        wrapper, bare = _branches(schema_file)
        shallow = dict(wrapper, properties={n: v for n, v in wrapper["properties"].items() if n != "message"})
        # the message's rules are compiled once and bound (as frames.let), whether read bare or wrapped
        nested = "transform(_in_msg, _r -> concat('$.message', substring(_r, 2, 10000)))"
        as_wrapper = f"concat({sc.violations_sql(shallow, doc)}, CASE WHEN {msg} IS NOT NULL THEN {nested} ELSE {no_rules} END)"
        per_kind[k] = (f"transform(array({sc.violations_sql(bare, msg)}), _in_msg -> "
                       f"CASE WHEN {wrapped} THEN {as_wrapper} ELSE _in_msg END)[0]")
    return (
        f"CASE WHEN {doc} IS NULL THEN array({sc._lit(sc.NOT_JSON)})"
        f" WHEN {wrapped} AND NOT coalesce({kind} IN ('DT', 'MD'), false) THEN array({sc._lit(_BAD_WRAPPER_TYPE)})"
        f" WHEN {kind} IS NULL THEN array({sc._lit(_NOT_A_MESSAGE)})"
        f" WHEN {kind} = 'DT' THEN {per_kind['DT']}"
        f" ELSE {per_kind['MD']} END"
    )


@lru_cache(maxsize=None)
def _staged_rules(kinds: tuple[str, ...] = ("DT", "MD")) -> str:
    """:func:`_rules` over the columns ``_doc``, ``_wrapped``, ``_kind``, ``_inner``."""
    return _rules("_doc", "_wrapped", "_kind", "_inner", kinds)


def _parsed(bronze: DataFrame, kinds: tuple[str, ...] = ("DT", "MD")) -> DataFrame:
    """Bronze + ``_doc`` (VARIANT), ``_wrapped``, ``_kind`` (DT/MD), ``_inner`` (the message) and
    ``_rules`` (broken schema rules; :func:`valid` tells a valid record, and only records of
    ``kinds`` can be valid).

    Only ``select`` here: Spark Connect plans ``drop`` by resolving its input, which inside an
    SDP query function fails while the bronze table does not exist yet. No more selects than the
    parse needs: each stacked ``select("*", ...)`` costs analyzer passes under Spark Connect, and a
    Qlik silver plan has few to spare (``tests/test_connect_resolution.py``)."""
    df = bronze.select("*", F.expr(sc.ONE_DOCUMENT).alias("_doc"))  # two documents on a line: not JSON
    wrapped, kind, msg = _shape("_doc")
    df = df.select("*", F.expr(wrapped).alias("_wrapped"), F.expr(kind).alias("_kind"), F.expr(msg).alias("_inner"))
    return df.select("*", F.expr(_staged_rules(tuple(kinds))).alias("_rules"))


def valid() -> Column:
    """True for a record of :func:`_parsed` that breaks no schema rule."""
    return F.coalesce(F.size("_rules") == 0, F.lit(False))


@lru_cache(maxsize=None)
def _inline(kinds: tuple[str, ...] = ("DT", "MD"), value: str = "value") -> tuple[Column, Column, Column]:
    """(valid, kind, message) as expressions over the column ``value`` alone (for :func:`is_skipped`)."""
    doc = sc.one_document(value)
    wrapped, kind, msg = _shape(doc)
    valid = F.expr(f"coalesce(size({_rules(doc, wrapped, kind, msg, kinds)}) = 0, false)")
    return valid, F.expr(kind), F.expr(msg)


def is_valid(value: str = "value") -> Column:
    """The hot-path verdict (compiled schema predicates) on the landed line in the column ``value``.

    Example::

        bronze.select("value", qlik.is_valid("value").alias("ok"))
    """
    return _inline(value=value)[0]


# --- jsonschema, for the reason of failing records only ---------------------------------------------


@lru_cache(maxsize=None)
def _validators() -> dict[tuple[str, int], Draft202012Validator]:
    out = {}
    for kind, schema_file in (("DT", DATA_SCHEMA), ("MD", METADATA_SCHEMA)):
        for i, branch in enumerate(_branches(schema_file)):
            out[(kind, i)] = Draft202012Validator(branch)
    return out


def _py_kind(doc: dict[str, Any]) -> tuple[str | None, bool]:
    if doc.get("magic") is not None:
        t = doc.get("type")
        return (t if isinstance(t, str) else None), True
    if "lineage" in doc or "tableStructure" in doc:
        return "MD", False
    if "headers" in doc or "data" in doc or "beforeData" in doc:
        return "DT", False
    return None, False


def explain(text: str | None, *, limit: int = 2000) -> str | None:
    """Why a landed line is not a valid Qlik message, in words (``None`` when it is valid).

    >>> explain('{"headers": {"operation": "MERGE"}, "data": {}}').split("; ")[-1]
    "$.headers.operation: 'MERGE' is not one of ['REFRESH', 'INSERT', 'UPDATE', 'DELETE']"
    """
    if text is None:
        return "empty record (NULL line)"
    try:
        doc = sc.loads(text)  # strict: NaN literals, duplicate keys, deep nesting give a reason
    except ValueError as e:
        return text[:limit] if text.startswith(sc.UNDECODABLE) else f"not JSON: {e}"[:limit]
    if not isinstance(doc, dict):
        return f"not a JSON object but {type(doc).__name__}"
    kind, wrapped = _py_kind(doc)
    if kind not in ("DT", "MD"):
        return _BAD_WRAPPER_TYPE + f" (got {doc.get('type')!r})" if wrapped else _NOT_A_MESSAGE
    what, schema_file = ("data", DATA_SCHEMA) if kind == "DT" else ("metadata", METADATA_SCHEMA)
    vals = _validators()
    try:
        if any(vals[(kind, i)].is_valid(doc) for i in (0, 1)):
            return None
        errors = list(vals[(kind, 0 if wrapped else 1)].iter_errors(doc))
    except RecursionError:  # a valid but very deep document the validator walks into
        return f"JSON nested too deeply ({sc._depth(text)} levels) to validate"
    return f"invalid Qlik {what} message ({schema_file}): " + sc.describe(errors)[:limit]


@lru_cache(maxsize=None)
def _explain_udf():
    """A vectorized (Arrow) UDF ``text -> reason``; apply it only to rows the predicates failed."""

    @F.pandas_udf(StringType())
    def _explain(texts: pd.Series) -> pd.Series:
        return texts.map(lambda t: explain(t) if isinstance(t, str) else explain(None))

    return _explain
