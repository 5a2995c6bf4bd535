"""What the strict Debezium decode (:mod:`sqlcdc.formats.debezium`) and its fast path for plain
records (:mod:`sqlcdc.formats._debezium_fast`) read the same way from a parsed event: the op's
name, the changed columns, the commit time and which table takes the event.

Each function reads the parsed payload (``before``/``after`` images, ``op``, ``source``) from a
column, ``_payload`` unless told; the two paths parse it differently (texts in maps; typed fields), and these
expressions give the same result on both for the same record.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc import frames, model
from sqlcdc.config import TableConfig
from sqlcdc.formats.base import sole_claim
from sqlcdc.values import commit_time_in_range

#: Debezium 2.x's ``source`` block for SQL Server, in the order its JSON converter writes it (without
#: ``sequence``/``ts_us``/``ts_ns``), with the kind of each field's JSON value: "long" for a number,
#: "string" for text. The strict decode reads every field as text; the fast path proves this layout.
SOURCE_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "string"), ("connector", "string"), ("name", "string"), ("ts_ms", "long"),
    ("snapshot", "string"), ("db", "string"), ("schema", "string"), ("table", "string"),
    ("change_lsn", "string"), ("commit_lsn", "string"), ("event_serial_no", "long"),
)

OPS = {"c": model.INSERT, "u": model.UPDATE, "d": model.DELETE, "r": model.SNAPSHOT, "t": model.TRUNCATE}


def op_name(op: Column) -> Column:
    """Debezium's op letter -> the canonical op (:data:`OPS`); NULL for any other letter."""
    return F.element_at(F.create_map(*[x for k, v in OPS.items() for x in (F.lit(k), F.lit(v))]), op)


def changed_columns(payload: Column, names: list[str]) -> Column:
    """The columns an event changed: for an update with both images, those whose values differ
    (as parsed); for a create or snapshot read, every column; else NULL (not known)."""
    op, before, after = payload["op"], payload["before"], payload["after"]
    return F.when(
        (op == "u") & before.isNotNull() & after.isNotNull(),
        frames.compact([F.when(~before[n].eqNullSafe(after[n]), F.lit(n)) for n in names]),
    ).when(op.isin("c", "r"), F.array(*[F.lit(n) for n in names]))


def epoch_millis(ms: Column) -> Column:
    """``ts_ms`` text -> timestamp (NULL when absent or not an integer within ``COMMIT_TIME_RANGE``)."""
    ok = F.trim(ms).rlike(r"^-?[0-9]{1,15}$")
    n = F.when(ok, F.trim(ms).try_cast("bigint"))
    return commit_time_in_range(F.timestamp_millis(n))  # 15 digits of ms: no overflow on the way


def claims(table: TableConfig, payload: str = "_payload") -> Column:
    """The event's ``source`` (in the column ``payload``) names ``table`` (its schema, or no schema)."""
    src = F.col(payload)["source"]
    same_table = F.lower(src["table"]) == table.table.lower()
    same_schema = F.lower(F.coalesce(src["schema"], F.lit(table.schema))) == table.schema.lower()
    return F.coalesce(same_table & same_schema, F.lit(False))


def matches(table: TableConfig, payload: str = "_payload") -> Column:
    """The event belongs to ``table`` alone: one without ``source.schema`` while two tables share
    its name goes to quarantine (:func:`~sqlcdc.formats.base.sole_claim`)."""
    return sole_claim(lambda t: claims(t, payload), table, lambda peer: peer.table.lower() == table.table.lower())
