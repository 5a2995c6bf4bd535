"""Debezium SQL Server events as deployed connectors write them, not only as the 1.x documentation
example (seed 002) shows: Debezium 2.x fields (``ts_us``/``ts_ns`` beside ``ts_ms``, ``source.sequence``,
the database in ``source.db`` and in the topic), the ``transaction`` block of
``provide.transaction.metadata=true``, ``decimal.handling.mode=double|string`` and
``time.precision.mode=connect``. Each gives the gold of the hand-written history of
test_debezium_gold, through the envelope check sqlcdc runs first.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from debezium_events import lsn
from sqlcdc import expectations
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats import base, debezium
from test_debezium_gold import EXPECTED_SCD1, EXPECTED_SCD2, HISTORY, gold


def as_2x(value: str, order: dict[str, int]) -> str:
    """A 1.x-shaped event value (test_debezium_gold's history) as Debezium 2.7's SQL Server connector
    writes it with provide.transaction.metadata=true (field set from its documentation)."""
    doc = json.loads(value)
    payload = doc["payload"]
    src = payload["source"]
    src.update(version="2.7.3.Final", db="testDB", sequence=None, ts_us=src["ts_ms"] * 1000, ts_ns=src["ts_ms"] * 1_000_000)
    payload.update(ts_us=payload["ts_ms"] * 1000, ts_ns=payload["ts_ms"] * 1_000_000)
    tx = src["commit_lsn"]
    order[tx] = order.get(tx, 0) + 1
    payload["transaction"] = {"id": tx, "total_order": order[tx], "data_collection_order": order[tx]}
    return json.dumps(payload)  # value.converter.schemas.enable=false, as most deployments run it


def valid(spark, lines: list[str]):
    bronze = base.bronze_columns(spark.createDataFrame([(v, "kafka://server1.testDB.dbo.customers/0/1") for v in lines],
                                                       "value string, source_file string"))
    return bronze, expectations.valid_envelopes(bronze, debezium.DECODER, expectations.envelope_schema(debezium.DECODER))


def test_debezium_2x_events_with_transaction_metadata_give_the_same_gold(spark):
    order: dict[str, int] = {}
    lines = [as_2x(v, order) for v in HISTORY]
    bronze, checked = valid(spark, lines)
    assert checked.count() == bronze.count() == len(HISTORY)  # no envelope is refused
    assert gold(spark, lines) == (EXPECTED_SCD1, EXPECTED_SCD2)
    source = SourceConfig(name="inventory", format="debezium", landing=None)
    table = TableConfig(name="customers", source=source, schema="dbo", table="customers", keys=("id",))
    from test_debezium_gold import COLS

    changes = debezium.decode(bronze, table, COLS).changes.collect()
    # the transaction id is kept (Debezium's is the commit LSN); the database comes from source.db
    assert {r.transaction_id for r in changes} == {json.loads(v)["source"]["commit_lsn"] for v in lines}
    assert {r.source_database for r in changes} == {"testDB"}


@pytest.mark.parametrize("mode, price", [("double", 10.5), ("string", "10.50"), ("precise", "BBo=")])
def test_decimal_handling_modes_and_connect_time_precision(spark, mode, price):
    """decimal.handling.mode double (a JSON number), string (text), precise (base64 of the unscaled
    value, 1050 -> BBo=); time.precision.mode=connect: Connect Date (days), Time and Timestamp (ms)."""
    columns = [
        {"name": "id", "type": "int32"},
        {"name": "price", "type": "decimal(10,2)"},
        {"name": "born", "type": "org.apache.kafka.connect.data.Date"},
        {"name": "at", "type": "org.apache.kafka.connect.data.Time"},
        {"name": "seen", "type": "org.apache.kafka.connect.data.Timestamp"},
    ]
    cols = [debezium.spec_from_config(c) for c in columns]
    source = SourceConfig(name="inventory", format="debezium", landing=None)
    table = TableConfig(name="t", source=source, schema="dbo", table="t", keys=("id",))
    after = {"id": 1, "price": price, "born": 18052, "at": 37868470, "seen": 1559729468470}
    event = {"op": "c", "before": None, "after": after, "ts_ms": 1, "source": {
        "version": "2.7.3.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 0, "db": "testDB", "sequence": None,
        "schema": "dbo", "table": "t", "commit_lsn": lsn(1, 1, 1), "change_lsn": lsn(1, 1, 1), "event_serial_no": 1}}
    bronze, checked = valid(spark, [json.dumps(event)])
    decoded = debezium.decode(checked, table, cols)
    assert decoded.quarantine.count() == 0
    (row,) = decoded.changes.collect()
    assert row.after.price == Decimal("10.50")
    assert (row.after.born, row.after.at, row.after.seen) == (
        dt.date(2019, 6, 5), "10:31:08.470000", dt.datetime(2019, 6, 5, 10, 11, 8, 470000))
