"""Debezium events flattened by ExtractNewRecordState (format debezium_flat) give the gold of the full
envelope.

`debezium_events.flatten` is the SMT as Debezium's "New Record State Extraction" documentation describes it,
written there independently of the decoder: the record becomes the ``after`` row (a delete, with
``delete.handling.mode=rewrite``, the ``before`` row), ``__deleted`` is "true" for a rewritten delete
and "false" otherwise, and each ``add.fields`` entry is copied in as ``<prefix><field>`` (a
``source.`` field as ``<prefix>source_<field>``). The history and its expected gold are the
hand-written ones of test_debezium_gold.
"""

from __future__ import annotations

import json
import random

import pytest

from debezium_events import FLAT_ADD_FIELDS as FULL, customer, event, flatten, line, lsn
from sqlcdc import model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import base, debezium_flat, get
from sqlcdc.gold import ApplyChangesSpec, recompute
from test_debezium_gold import COLS, EXPECTED_SCD1, EXPECTED_SCD2, HISTORY, NAMES

TOPIC = "server1.dbo.customers"


def make(prefix: str = "__") -> tuple[SourceConfig, TableConfig]:
    source = SourceConfig(name="inventory", format="debezium_flat", landing=None,
                          options={} if prefix == "__" else {"add_fields_prefix": prefix})
    return source, TableConfig(name="customers", source=source, schema="dbo", table="customers", keys=("id",))


def decode(spark, lines, *, source_file: str = "f", prefix: str = "__"):
    source, table = make(prefix)
    bronze = base.bronze_columns(spark.createDataFrame([(v, source_file) for v in lines], "value string, source_file string"))
    return bronze, source, table, debezium_flat.decode(bronze, table, COLS)


def gold(decoded):
    frame = model.apply_frame(decoded.changes, NAMES, ["id"])
    common = dict(keys=["id"], sequence_by="_sequence", apply_as_deletes="_op = 'DELETE'", provided_column="_provided",
                  table="customers")
    scd1 = sorted((r.id, r.first_name, r.last_name) for r in recompute.scd1(frame, ApplyChangesSpec(**common)).collect())
    scd2 = sorted((r.id, r.last_name, r["__START_AT"].commit_lsn, r["__END_AT"].commit_lsn if r["__END_AT"] else None)
                  for r in recompute.scd2(frame, ApplyChangesSpec(**common, stored_as_scd_type=2)).collect())
    return scd1, scd2


@pytest.mark.parametrize("add_fields, with_schema, source_file", [
    (FULL, False, "f"),
    (FULL, True, "f"),
    # no op: a delete is told by __deleted alone, every other record is an upsert
    ("table,schema,commit_lsn,change_lsn,event_serial_no", False, "f"),
    # no table: the Kafka topic says it (Debezium 1.x <server>.<schema>.<table>) ...
    ("op,commit_lsn,change_lsn,event_serial_no", False, f"kafka://{TOPIC}/0/17"),
    # ... or the folder a topic landed in (Debezium 2.x <topic.prefix>.<database>.<schema>.<table>)
    ("op,source.commit_lsn,source.change_lsn,source.event_serial_no", False, "file:/l/shop.testDB.dbo.customers/a.json"),
], ids=["add.fields", "with schema", "no op", "topic 1.x", "folder 2.x, source.*"])
def test_flattened_history_gives_the_full_envelopes_gold(spark, add_fields, with_schema, source_file):
    flat = [flatten(v, add_fields=add_fields, with_schema=with_schema) for v in HISTORY]
    _, _, _, decoded = decode(spark, flat, source_file=source_file)
    assert decoded.quarantine.count() == 0
    assert gold(decoded) == (EXPECTED_SCD1, EXPECTED_SCD2)


def test_shuffled_duplicated_and_tombstones_give_the_same_gold(spark):
    flat = [flatten(v) for v in HISTORY]
    delivered = flat + flat[:4] + ["null", ""]
    random.Random(3).shuffle(delivered)
    bronze, source, table, decoded = decode(spark, delivered)
    assert gold(decoded) == (EXPECTED_SCD1, EXPECTED_SCD2)
    skipped = bronze.where(get("debezium_flat").is_skipped()).count()
    assert (bronze.count(), decoded.changes.count(), skipped) == (14, 12, 2)
    assert debezium_flat.unrouted(bronze, source, [table]).count() == 0


def test_a_custom_prefix_and_presence(spark):
    """add.fields.prefix meta_; a column the record leaves out is not provided (gold keeps it)."""
    first = flatten(HISTORY[0], prefix="meta_")
    partial = json.loads(flatten(HISTORY[1], prefix="meta_"))
    del partial["email"]
    _, _, _, decoded = decode(spark, [first, json.dumps(partial)], prefix="meta_")
    rows = {r.sequence.commit_lsn: r for r in decoded.changes.collect()}
    assert sorted(r.provided_columns or NAMES for r in rows.values()) == sorted([NAMES, ["id", "first_name", "last_name"]])
    assert gold(decoded)[0] == [(1, "ann", "a2")]
    frame = model.apply_frame(decoded.changes, NAMES, ["id"])
    spec = ApplyChangesSpec(keys=["id"], sequence_by="_sequence", provided_column="_provided", table="customers")
    assert [r.email for r in recompute.scd1(frame, spec).collect()] == [customer(1, "ann", "a1")["email"]]


def test_records_that_cannot_be_ordered_or_routed_are_quarantined(spark):
    no_lsn = flatten(HISTORY[0], add_fields="op,table,schema")
    no_table = flatten(HISTORY[1], add_fields="op,commit_lsn,change_lsn")  # and file "f" names no topic
    other = flatten(line(event("c", after=customer(9, "x", "y"), commit_lsn=lsn(0x20, 1, 1), change_lsn=lsn(0x20, 1, 1),
                               table="orders")))
    bad_op = json.dumps({**json.loads(flatten(HISTORY[0])), "__op": "x"})
    bronze, source, table, decoded = decode(spark, [no_lsn, no_table, other, bad_op, "[1, 2]"])
    assert decoded.changes.count() == 0 and decoded.quarantine.count() == 0  # none is this table's
    reasons = sorted(r.reason for r in debezium_flat.unrouted(bronze, source, [table]).collect())
    assert reasons == sorted([
        "a flattened record without __commit_lsn cannot be ordered (configure the SMT's add.fields=op,table,schema,"
        "commit_lsn,change_lsn,event_serial_no,source.ts_ms)",
        "cannot tell the table of a flattened record: add table and schema to the SMT's add.fields (__table, __schema), "
        "or land each topic in a folder named after it (<prefix>.<db>.<schema>.<table>)",
        "no onboarded table for dbo.orders in source inventory (onboarded: dbo.customers)",
        "unknown __op 'x' (expected one of c, u, d, r, t)",
        "not a JSON object",
    ])


def test_columns_from_a_landed_schema_else_a_config_error(tmp_path):
    (tmp_path / "a.json").write_text("\n".join(flatten(v, with_schema=True) for v in HISTORY[:2]) + "\n")
    source = SourceConfig(name="inventory", format="debezium_flat", landing=str(tmp_path))
    table = TableConfig(name="customers", source=source, schema="dbo", table="customers", keys=("id",), file="t.yml")
    cols = debezium_flat.columns_for(table, source)
    assert [(c.name, c.spark_type) for c in cols] == [("id", "int"), ("first_name", "string"), ("last_name", "string"),
                                                      ("email", "string")]
    other = TableConfig(name="orders", source=source, schema="dbo", table="orders", keys=("id",), file="o.yml")
    with pytest.raises(ConfigError, match=r"no flattened record with a schema and __table \(or a topic folder\) naming it"):
        debezium_flat.columns_for(other, source)
    # without __table, the folder named after the topic (<server>.<schema>.<table>) says which table
    (tmp_path / "a.json").unlink()
    (tmp_path / f"{TOPIC}").mkdir()
    (tmp_path / TOPIC / "a.json").write_text(flatten(HISTORY[0], add_fields="op,commit_lsn,change_lsn", with_schema=True))
    assert [c.name for c in debezium_flat.columns_for(table, source)] == NAMES
    with pytest.raises(ConfigError):
        debezium_flat.columns_for(other, source)
