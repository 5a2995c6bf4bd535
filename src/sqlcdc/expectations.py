"""Expectations on silver (Databricks-compatible actions) and envelope validation before decoding.

Every onboarded table gets the **default rules** plus the rules of its config
(``expectations:`` / ``expectations_file:``, :class:`sqlcdc.config.TableConfig.expectations`):

=====================  ===========================================  ==========
default rule           constraint                                   action
=====================  ===========================================  ==========
``key_not_null``       every key column of ``key`` is not NULL      quarantine
``sequence_not_null``  ``sequence IS NOT NULL``                     quarantine
``known_operation``    ``op IN ('INSERT', ..., 'TRUNCATE')``        quarantine
=====================  ===========================================  ==========

A config rule with a default rule's name replaces it (e.g. to make ``key_not_null`` fail the update).

A constraint is a Spark SQL boolean expression over the silver row: the canonical change columns
(``op``, ``key.id``, ``after.price``, ``commit_time`` ...) and, by bare name, the table's own
columns, read from the change's image (``after``, or ``before`` for a DELETE) — the same frame
``sqlcdc validate`` checks rules against. A row **fails** a rule when the constraint is FALSE;
NULL passes, as in a SQL ``CHECK`` constraint (write ``price IS NOT NULL`` to require a value).

Actions (what a failing row does):

============  ==========================  ======================================================
action        Databricks                  here
============  ==========================  ======================================================
warn          ``expect_all``              kept in silver; the rule's name is in ``dq_warnings``
drop          ``expect_all_or_drop``      not in silver; recorded in ``dropped_<source>``
                                          (lineage + rule names) so conservation stays checkable
fail          ``expect_all_or_fail``      the update stops: the error names table, rule(s), key
quarantine    ``expect_all_or_drop`` +    not in silver; a row in ``quarantine_<source>`` with the
              sqlcdc's quarantine flow    failed rule names in ``rules``
============  ==========================  ======================================================

A row failing several rules: fail wins, then quarantine, then drop; warn rules never remove a row.

**Envelope validation** (:func:`envelope_schema`, :func:`split_envelopes`): before decoding, each
bronze record of a producer with a JSON Schema in ``schemas/`` is checked with the schema compiled
into Spark predicates (:mod:`sqlcdc.formats._schema_check`); only the failing records are handed to
``jsonschema`` (an Arrow UDF) for the message with its JSON path. Decoders that validate their own
envelopes (CES, Qlik: their decoders have no ``envelope_schema``) are left to do so.

Example::

    checked = check(decoded.changes, table, columns)
    silver = passed(checked, table)           # canonical columns + dq_warnings
    q = quarantined(checked, table)           # quarantine rows (model.QUARANTINE_COLUMNS)
    d = dropped(checked, table)               # same columns, for dropped_<source>
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sqlcdc import frames, model
from sqlcdc.assets import SCHEMAS_DIR
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.names import literal, quote
from sqlcdc.values import BAD_VALUE_RULE, VALUE_WARNINGS_COL, ColumnSpec

if TYPE_CHECKING:
    from sqlcdc.formats import Decoded, Decoder

ACTIONS = ("warn", "drop", "fail", "quarantine")
WARNINGS_COL = "dq_warnings"
DEFAULT_RULE_NAMES = ("key_not_null", "sequence_not_null", "known_operation")

#: Envelope JSON Schemas (``schemas/``) of producers whose decoders do not validate envelopes themselves.
_DQ = {a: f"_dq_{a}" for a in ACTIONS}


@dataclass(frozen=True)
class Rule:
    name: str
    constraint: str
    action: str = "warn"
    description: str | None = None
    default: bool = False

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"rule {self.name!r}: action {self.action!r} is not one of {', '.join(ACTIONS)}")


def default_rules(table: TableConfig) -> list[Rule]:
    """The rules every table gets (see the module doc)."""
    if table.keys:
        key_sql = " AND ".join(f"key.{quote(k)} IS NOT NULL" for k in table.keys)
    else:  # key columns come from the producer: no field of `key` may be NULL
        key_sql = (
            "key IS NOT NULL AND NOT exists(map_values(from_json(to_json(key, map('ignoreNullFields', 'false')),"
            " 'map<string,string>')), v -> v IS NULL)"
        )
    ops = ", ".join(f"'{o}'" for o in model.OPERATIONS)
    return [
        Rule("key_not_null", key_sql, "quarantine", "every key column has a value", default=True),
        Rule("sequence_not_null", "sequence IS NOT NULL", "quarantine", "the change can be ordered", default=True),
        Rule("known_operation", f"op IN ({ops})", "quarantine", "the operation is one gold can apply", default=True),
    ]


def rules_for(table: TableConfig, columns: Iterable[Any] = ()) -> list[Rule]:
    """Default rules (unless a config rule has the same name), then the config's rules, in order,
    then the warnings the table's columns call for (:func:`column_rules`)."""
    configured = [
        Rule(r["name"], r["constraint"], r.get("action", "warn"), r.get("description")) for r in table.expectations
    ]
    names = {r.name for r in configured}
    return [r for r in default_rules(table) if r.name not in names] + configured + column_rules(table, columns)


def column_rules(table: TableConfig, columns: Iterable[Any]) -> list[Rule]:
    """A ``warn`` rule ``unknown_type_<column>`` per column whose source type the decoder does not
    know (its optional ``unknown_types(columns)``; CES: e.g. ``geography``): the values stay text,
    every row carrying one is counted in DQ metrics as warned, nothing is dropped.

    >>> # CES column shape geography -> Rule("unknown_type_shape", "`shape` IS NULL", "warn", ...)
    """
    from sqlcdc import formats

    specs = [c for c in columns if isinstance(c, ColumnSpec)]
    unknown = formats.get(table.source.format).unknown_types
    rules = [
        Rule(f"unknown_type_{name}", f"{quote(name)} IS NULL", "warn",
             f"source type {source_type!r} of column {name} is not known to sqlcdc: its values are kept as text")
        for name, source_type in unknown(specs)
    ]
    if table.bad_values == "warn":
        rules += [
            Rule(BAD_VALUE_RULE + s.name, f"NOT array_contains({VALUE_WARNINGS_COL}, {literal(BAD_VALUE_RULE + s.name)})",
                 "warn", f"a value of column {s.name} could not be read as {s.spark_type} (bad_values: warn): kept as NULL")
            for s in specs if s.name not in set(table.keys)
        ]
    return rules


# --- evaluation --------------------------------------------------------------------------------


def _names(rules: Sequence[Rule], failed: dict[str, Column]) -> Column:
    """array<string> of the names of ``rules`` whose ``failed`` column is true (empty if none)."""
    return frames.compact([F.when(failed[r.name], F.lit(r.name)) for r in rules])


def check(changes: DataFrame, table: TableConfig, columns: Iterable[Any], keep: Sequence[str] = ()) -> DataFrame:
    """Canonical changes -> the same rows with the table's columns at top level (from the image) and,
    per action, ``_dq_<action>``: the names of the rules of that action the row fails.

    ``columns`` are the table's :class:`sqlcdc.values.ColumnSpec` (or names); ``keep``: more columns
    of ``changes`` to carry along. No analysis of ``changes`` happens here (SDP forbids it inside
    query functions).
    """
    columns = list(columns)
    rules = rules_for(table, columns)
    canonical = {c.lower() for c in model.CHANGE_COLUMNS}
    image = F.coalesce(F.col("after"), F.col("before"))
    names = [getattr(c, "name", c) for c in columns]
    flat = [image[n].alias(n) for n in names if n.lower() not in canonical]
    warned = [F.col(VALUE_WARNINGS_COL)] if table.bad_values == "warn" else []  # the decoder's (bad_values: warn)
    frame = changes.select(*[F.col(c) for c in model.CHANGE_COLUMNS], *flat, *warned, *[F.col(k) for k in keep])
    failed = {r.name: ~F.coalesce(F.expr(f"({r.constraint})").cast("boolean"), F.lit(True)) for r in rules}
    return frame.select(
        "*", *[_names([r for r in rules if r.action == a], failed).alias(_DQ[a]) for a in ACTIONS]
    )


def _explained(names: Column, rules: Sequence[Rule]) -> Column:
    """``rule (constraint); rule (constraint)`` for an array of rule names."""
    if not rules:
        return F.array_join(names, "; ")
    lookup = F.create_map(*[x for r in rules for x in (F.lit(r.name), F.lit(r.constraint))])
    return F.array_join(F.transform(names, lambda n: F.format_string("%s (%s)", n, F.element_at(lookup, n))), "; ")


def fail_message(table: TableConfig) -> Column:
    """The error an ``expect_or_fail`` rule raises: table, rule(s) with constraint, a sample key."""
    rules = [r for r in rules_for(table) if r.action == "fail"]
    return F.format_string(
        "expect_or_fail: table %s (%s): rule(s) %s failed for key %s (change %s, op %s, bronze file %s)",
        F.lit(table.name),
        F.lit(table.qualified),
        _explained(F.col(_DQ["fail"]), rules),
        F.to_json(F.col("key")),
        F.col("change_id"),
        F.col("op"),
        F.col("bronze_file"),
    )


def passed(checked: DataFrame, table: TableConfig) -> DataFrame:
    """Rows of :func:`check` that stay in silver: canonical columns + ``dq_warnings``.

    A row failing a ``fail`` rule raises :func:`fail_message` (Spark ``raise_error``), which stops
    the update: evaluated first, so it fires even for a row that a drop/quarantine rule also fails.
    """
    fails = F.when(F.size(_DQ["fail"]) > 0, F.raise_error(fail_message(table))).cast("boolean")
    keep = (F.size(_DQ["drop"]) == 0) & (F.size(_DQ["quarantine"]) == 0)
    return frames.where(checked, F.coalesce(fails, keep), "_dq_passed").select(
        *[F.col(c) for c in model.CHANGE_COLUMNS], F.col(_DQ["warn"]).alias(WARNINGS_COL)
    )


def _removed(checked: DataFrame, table: TableConfig, action: str, verb: str) -> DataFrame:
    return checked.select(*_removed_row(table, action, verb))


def _removed_row(table: TableConfig, action: str, verb: str) -> list[Column]:
    """The quarantine-row columns of a checked change that ``action`` rules removed."""
    rules = [r for r in rules_for(table) if r.action == action]
    raw = F.to_json(
        F.struct("change_id", "op", "key", "before", "after", "sequence", "commit_time", "transaction_id")
    )
    return [
        F.lit(table.source.name).alias("source_name"),
        F.col("source_format").cast("string").alias("source_format"),
        F.col("table_name").cast("string").alias("table_name"),
        F.concat(F.lit(f"{verb} by expectation(s): "), _explained(F.col(_DQ[action]), rules)).alias("reason"),
        F.col(_DQ[action]).alias("rules"),
        raw.alias("raw"),
        F.col("bronze_record_id").cast("string").alias("bronze_record_id"),
        F.col("bronze_file").cast("string").alias("bronze_file"),
        F.col("bronze_ingest_time").cast("timestamp").alias("bronze_ingest_time"),
    ]


def quarantine_of(decoded: Decoded, table: TableConfig, columns: Iterable[Any]) -> DataFrame:
    """A table's quarantine rows: the records its decoder rejected and the changes a ``quarantine``
    rule failed (:func:`quarantined`), from ONE copy of the decode when the decoder kept its frame
    (:meth:`sqlcdc.formats.Decoded.split`); else the union of both parts, each a copy of the decode.
    SDP resolves and plans a flow several times a run, and the decode is most of a flow's plan.

    The decoder's own reject columns (a Python explanation, say) are computed only for the rows
    that left silver."""
    columns = list(columns)
    if decoded.rows is None:
        return decoded.quarantine.unionByName(quarantined(check(decoded.changes, table, columns), table))
    src = "_decode"
    checked = check(decoded.rows.select(F.struct("*").alias(src), *decoded.change), table, columns, keep=(src,))
    out = frames.where(checked, ~F.col(f"{src}._decoded") | (F.size(_DQ["quarantine"]) > 0), "_dq_out")
    out = out.select(f"{src}.*", F.struct(*_removed_row(table, "quarantine", "quarantined")).alias("_dq_row"))
    out = out.select("_decoded", "_dq_row", F.struct(*decoded.rejected).alias("_rejected"))
    return out.select(*[F.when(~F.col("_decoded"), F.col("_rejected")[n]).otherwise(F.col("_dq_row")[n]).alias(n)
                        for n in model.QUARANTINE_COLUMNS])


DECODED_COL = "_decoded"
"""In :func:`checked_rows`: whether the record became a change."""
RECORD_COL = "_record"
"""In :func:`checked_rows`: for a record the decoder rejected, the row its quarantine row is made of."""


def checked_rows(decoded: Decoded, table: TableConfig, columns: Iterable[Any]) -> DataFrame:
    """Every record of one decode, checked, as one frame a batch source stores once per run and
    silver, quarantine and dropped then read (:func:`stored_passed`, :func:`stored_quarantine`,
    :func:`stored_dropped`) instead of each decoding bronze again. A change: the change columns
    and the ``_dq_<action>`` rule names (:func:`check`), :data:`DECODED_COL` true; a rejected
    record: :data:`DECODED_COL` false and :data:`RECORD_COL`, the decoder's row (with
    :meth:`~sqlcdc.formats.Decoded.split`; else its quarantine row), the rest NULL. A decoder's
    Python explanation of a reject runs on the read, for rejected records only."""
    columns = list(columns)
    dq = [_DQ[a] for a in ACTIONS]
    if decoded.rows is None:  # changes and rejects are two frames: one union, NULLs for what a side lacks
        good = check(decoded.changes, table, columns).select(*model.CHANGE_COLUMNS, *dq, F.lit(True).alias(DECODED_COL))
        bad = decoded.quarantine.select(F.struct(*model.QUARANTINE_COLUMNS).alias(RECORD_COL),
                                        F.lit(False).alias(DECODED_COL))
        return good.unionByName(bad, allowMissingColumns=True)
    src = "_decode"
    checked = check(decoded.rows.select(F.struct("*").alias(src), *decoded.change), table, columns, keep=(src,))
    ok = F.col(f"{src}._decoded")
    return checked.select(*[F.when(ok, F.col(c)).alias(c) for c in (*model.CHANGE_COLUMNS, *dq)],
                          ok.alias(DECODED_COL), F.when(~ok, F.col(src)).alias(RECORD_COL))


def _changes_of(stored: DataFrame) -> DataFrame:
    return frames.where(stored, F.col(DECODED_COL), "_change")


def stored_passed(stored: DataFrame, table: TableConfig) -> DataFrame:
    """Silver from :func:`checked_rows` (:func:`passed` of its changes)."""
    return passed(_changes_of(stored), table)


def stored_quarantine(stored: DataFrame, table: TableConfig, rejected: Sequence[Column] = ()) -> DataFrame:
    """The quarantine rows of :func:`checked_rows`: the rejected records (``rejected``: the decoder's
    quarantine-row columns over its rows, :attr:`~sqlcdc.formats.Decoded.rejected`; none when the
    stored record is the quarantine row) and the changes a ``quarantine`` rule failed."""
    bad = frames.where(stored, ~F.col(DECODED_COL), "_rejected").select(f"{RECORD_COL}.*")
    bad = bad.select(*rejected) if rejected else bad.select(*model.QUARANTINE_COLUMNS)
    return bad.unionByName(quarantined(_changes_of(stored), table))


def stored_dropped(stored: DataFrame, table: TableConfig) -> DataFrame:
    """The changes of :func:`checked_rows` an ``expect_or_drop`` rule removed (:func:`dropped`)."""
    return dropped(_changes_of(stored), table)


def quarantined(checked: DataFrame, table: TableConfig) -> DataFrame:
    """Rows failing a ``quarantine`` rule, as quarantine rows (:data:`sqlcdc.model.QUARANTINE_COLUMNS`);
    ``raw`` is the canonical change as JSON, ``rules`` the failed quarantine rules."""
    return _removed(frames.where(checked, F.size(_DQ["quarantine"]) > 0, "_dq_out"), table, "quarantine", "quarantined")


def dropped(checked: DataFrame, table: TableConfig) -> DataFrame:
    """Rows failing a ``drop`` rule (and no quarantine rule), same columns as quarantine rows."""
    kept_out = (F.size(_DQ["drop"]) > 0) & (F.size(_DQ["quarantine"]) == 0)
    return _removed(frames.where(checked, kept_out, "_dq_out"), table, "drop", "dropped")


def drops(table: TableConfig) -> bool:
    """Whether ``table`` has an ``expect_or_drop`` rule (none by default: drop rules come from config)."""
    return any(r.action == "drop" for r in rules_for(table))


def none_dropped(bronze: DataFrame, table: TableConfig) -> DataFrame:
    """What :func:`dropped` gives for a table without drop rules -- no rows, the same columns -- without
    decoding ``bronze``: a filter over the read. SDP resolves and plans each flow several times a run
    and a decode plan is what costs there (docs/testing.md), so a table without drop rules does not pay
    for a decode that cannot drop anything. ``bronze`` is read once, as a decode reads it: a
    streaming flow's checkpoint counts its query's reads, so the flow resumes when a drop rule is
    added later (and the other way round).
    """
    return bronze.where(F.lit(False)).select(*model.quarantine_row(
        source_name=table.source.name, source_format=table.source.format, table_name=table.name,
        reason=F.lit("dropped by expectation(s): "), rules=F.array().cast("array<string>"), raw=F.lit(None),
    ))


# --- Databricks --------------------------------------------------------------------------------

DATABRICKS_DECORATORS = {
    "warn": "expect_all",
    "drop": "expect_all_or_drop",
    "fail": "expect_all_or_fail",
    # Databricks' own quarantine pattern: the target drops the rows; sqlcdc's quarantine flow keeps them.
    "quarantine": "expect_all_or_drop",
}


def databricks_constraint(rule: Rule) -> str:
    """The constraint as Databricks evaluates it with sqlcdc's semantics (NULL passes)."""
    return f"COALESCE(({rule.constraint}), TRUE)"


def databricks_expectations(table: TableConfig) -> dict[str, dict[str, str]]:
    """``{"expect_all": {name: constraint}, "expect_all_or_drop": ..., "expect_all_or_fail": ...}``:
    the table's rules as ``dp`` decorator arguments (decorators with no rules are left out)."""
    out: dict[str, dict[str, str]] = {}
    for rule in rules_for(table):
        out.setdefault(DATABRICKS_DECORATORS[rule.action], {})[rule.name] = databricks_constraint(rule)
    return out


def with_databricks_expectations(fn: Callable, table: TableConfig, dp: ModuleType | Any) -> Callable:
    """``fn`` decorated with ``dp.expect_all*`` for the table's rules (apply below ``@dp.table``)."""
    for decorator, rules in databricks_expectations(table).items():
        fn = getattr(dp, decorator)(rules)(fn)
    return fn


# --- envelopes ---------------------------------------------------------------------------------


def envelope_schema(decoder: Decoder) -> str | None:
    """The schema file sqlcdc validates ``decoder``'s envelopes with (its ``envelope_schema``), or
    None (the decoder validates its own)."""
    name = decoder.envelope_schema
    if name and not (SCHEMAS_DIR / name).is_file():
        raise FileNotFoundError(f"decoder {decoder.name}: envelope schema {SCHEMAS_DIR / name} is missing")
    return name


def prepare_envelope_check(schema_file: str) -> None:
    """Build the jsonschema UDF now, outside any SDP query function: creating it makes Spark Connect
    parse its return type, which counts as analysis inside a query function."""
    from sqlcdc.formats import _schema_check as sc

    udf = sc.explain_udf(schema_file)
    getattr(udf, "returnType", None)


ENVELOPE_DOC = "_envelope_doc"
"""The column :func:`valid_envelopes` adds to bronze: the record as a VARIANT, parsed once (NULL
unless the line is exactly one JSON document)."""


def with_envelope_doc(bronze: DataFrame, unless: Column | None = None) -> DataFrame:
    """``bronze`` + :data:`ENVELOPE_DOC` (NULL where the boolean column ``unless`` is true: such a
    record is not parsed). The compiled rules read the document from this column: with
    the parse inlined (``try_parse_json(value)`` in every rule) Spark parsed each record once per rule,
    because it does not share subexpressions inside conditional branches -- validation cost ~5x the
    decode (``benchmarks/bench_validation.py``)."""
    from sqlcdc.formats import _schema_check as sc

    doc = F.expr(sc.ONE_DOCUMENT)
    return bronze.select("*", (doc if unless is None else F.when(~unless, doc)).alias(ENVELOPE_DOC))


def envelope_violations(schema_file: str) -> Column:
    """array<string> of the compiled schema rules the record breaks (empty = valid), over the
    column :data:`ENVELOPE_DOC` (:func:`with_envelope_doc`); ``$: not JSON`` when it is NULL."""
    from sqlcdc.formats import _schema_check as sc

    return sc.violations(sc.load(schema_file), ENVELOPE_DOC)


def valid_envelopes(bronze: DataFrame, decoder: Decoder, schema_file: str, proven: Column | None = None) -> DataFrame:
    """Bronze rows whose envelope is valid (or that the decoder skips by definition): decode these.
    They carry :data:`ENVELOPE_DOC` and ``_envelope_ok`` beside bronze's columns (``drop`` would make Spark Connect
    resolve bronze, which an SDP query function may not while the table does not exist yet).

    ``proven``: a boolean column of ``bronze``, true for records whose envelope the decoder has
    already proven valid (:meth:`sqlcdc.formats.Decoder.decode_landed`): those are kept without
    being parsed or checked again."""
    ok = decoder.is_skipped() | (F.size(envelope_violations(schema_file)) == 0)
    if proven is not None:
        proven = F.coalesce(proven, F.lit(False))
        ok = proven | ok  # evaluated left to right: a proven record's rules are not evaluated
    return frames.where(with_envelope_doc(bronze, unless=proven), ok, "_envelope_ok")  # frames says why not .where


def invalid_envelopes(bronze: DataFrame, decoder: Decoder, schema_file: str, source: SourceConfig) -> DataFrame:
    """Quarantine rows for envelopes that break the schema: reason = jsonschema's message with the
    JSON path, rules = ``<schema> <path>: <keyword>`` of each broken compiled rule."""
    from sqlcdc.formats import _schema_check as sc

    label = Path(schema_file).name  # a plugin's schema is an absolute path beside its decoder
    stem = label.removesuffix(".schema.json")
    checked = with_envelope_doc(bronze).select("*", envelope_violations(schema_file).alias("_violations"))
    bad = frames.where(checked, ~decoder.is_skipped() & (F.size("_violations") > 0), "_envelope_bad")
    message = sc.explain_udf(schema_file)(F.col("value"))
    return bad.select(
        *model.quarantine_row(
            source_name=source.name,
            source_format=decoder.name,
            reason=F.concat(
                F.lit(f"envelope ({label}): "), F.coalesce(message, F.array_join(F.col("_violations"), "; "))
            ),
            rules=F.transform(F.col("_violations"), lambda v: F.concat(F.lit(stem + " "), v)),
        )
    )
