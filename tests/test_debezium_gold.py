"""Debezium events through the canonical model into SCD1/SCD2 gold (shared SparkSession)."""

from __future__ import annotations

import random

from debezium_events import customer, event, line, lsn
from sqlcdc import model
from sqlcdc.gold import ApplyChangesSpec, recompute
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats import base, debezium

SOURCE = SourceConfig(name="inventory", format="debezium", landing=None)
TABLE = TableConfig(name="customers", source=SOURCE, schema="dbo", table="customers", keys=("id",))
COLS = [debezium.spec_from_config({"name": n, "type": t}) for n, t in
        [("id", "int32"), ("first_name", "string"), ("last_name", "string"), ("email", "string")]]
NAMES = [c.name for c in COLS]


def gold(spark, lines):
    bronze = base.bronze_columns(spark.createDataFrame([(v, "f") for v in lines], "value string, source_file string"))
    frame = model.apply_frame(debezium.decode(bronze, TABLE, COLS).changes, NAMES, ["id"])
    s1 = ApplyChangesSpec(keys=["id"], sequence_by="_sequence", apply_as_deletes="_op = 'DELETE'",
                                        provided_column="_provided", table="customers")
    s2 = ApplyChangesSpec(keys=["id"], sequence_by="_sequence", apply_as_deletes="_op = 'DELETE'",
                                        provided_column="_provided", stored_as_scd_type=2, table="customers")
    scd1 = sorted((r.id, r.first_name, r.last_name) for r in recompute.scd1(frame, s1).collect())
    scd2 = sorted((r.id, r.last_name, r["__START_AT"].commit_lsn, r["__END_AT"].commit_lsn if r["__END_AT"] else None)
                  for r in recompute.scd2(frame, s2).collect())
    return scd1, scd2


A1, A2, A3 = customer(1, "ann", "a1"), customer(1, "ann", "a2"), customer(1, "ann", "a3")
HISTORY = [
    line(event("c", after=A1, commit_lsn=lsn(0x10, 1, 1), change_lsn=lsn(0x10, 1, 1), serial=1)),
    line(event("u", before=A1, after=A2, commit_lsn=lsn(0x11, 1, 1), change_lsn=lsn(0x11, 1, 1), serial=2)),
    line(event("u", before=A2, after=A3, commit_lsn=lsn(0x12, 1, 1), change_lsn=lsn(0x12, 1, 1), serial=2)),
    line(event("c", after=customer(2, "bob", "b"), commit_lsn=lsn(0x12, 1, 9), change_lsn=lsn(0x12, 1, 5), serial=1)),
    # key change 2 -> 3: delete(old key) serial 1 + create(new key) serial 2, same commit and change LSN
    line(event("d", before=customer(2, "bob", "b"), commit_lsn=lsn(0x13, 1, 9), change_lsn=lsn(0x13, 1, 5), serial=1)),
    line(event("c", after=customer(3, "bob", "b"), commit_lsn=lsn(0x13, 1, 9), change_lsn=lsn(0x13, 1, 5), serial=2)),
    line(event("c", after=customer(4, "cy", "c"), commit_lsn=lsn(0x14, 1, 1), change_lsn=lsn(0x14, 1, 1), serial=1)),
    line(event("d", before=customer(4, "cy", "c"), commit_lsn=lsn(0x15, 1, 1), change_lsn=lsn(0x15, 1, 1), serial=1)),
]
EXPECTED_SCD1 = [(1, "ann", "a3"), (3, "bob", "b")]
C = lambda major: f"{major:08X}000000010001"  # noqa: E731  commit_lsn of lsn(major, 1, 1)
EXPECTED_SCD2 = sorted([
    (1, "a1", C(0x10), C(0x11)), (1, "a2", C(0x11), C(0x12)), (1, "a3", C(0x12), None),
    (2, "b", "00000012000000010009", "00000013000000010009"), (3, "b", "00000013000000010009", None),
    (4, "c", C(0x14), C(0x15)),
])


def test_update_delete_and_key_change_in_order(spark):
    scd1, scd2 = gold(spark, HISTORY)
    assert scd1 == EXPECTED_SCD1
    assert scd2 == EXPECTED_SCD2


def test_out_of_order_and_duplicate_delivery_gives_the_same_gold(spark):
    shuffled = HISTORY + HISTORY[:3]  # duplicates of the first three events
    random.Random(7).shuffle(shuffled)
    assert gold(spark, shuffled) == (EXPECTED_SCD1, EXPECTED_SCD2)


def test_late_update_older_than_the_delete_does_not_resurrect(spark):
    late = line(event("u", before=customer(4, "cy", "c"), after=customer(4, "cy", "late"),
                      commit_lsn=lsn(0x14, 1, 5), change_lsn=lsn(0x14, 1, 5), serial=2))
    scd1, _ = gold(spark, HISTORY[6:] + [late])
    assert scd1 == []
