"""Debezium decoder: envelopes -> canonical changes, quarantine for what can't be read."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from dataclasses import replace
from decimal import Decimal

import pytest

from debezium_events import customer, event, line, lsn, seed_event
from sqlcdc import model
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats import base, debezium

SOURCE = SourceConfig(name="inventory", format="debezium", landing=None)
CUSTOMERS = TableConfig(name="customers", source=SOURCE, schema="dbo", table="customers", keys=("id",))
SEED_COLUMNS = [debezium.spec_from_connect_field(f) for f in seed_event()["schema"]["fields"][1]["fields"]]


def bronze_of(spark, lines: list[str], file: str = "file:/landing/part-0.json"):
    df = spark.createDataFrame([(v, file) for v in lines], "value string, source_file string")
    return base.bronze_columns(df)


def decode(spark, lines, table=CUSTOMERS, columns=SEED_COLUMNS):
    bronze = bronze_of(spark, lines)
    d = debezium.decode(bronze, table, columns)
    return bronze, d


def test_seed_create_event_decodes_to_the_expected_typed_row(spark):
    """The seed's own example (Debezium docs, customers create event) -> one typed INSERT."""
    raw = json.dumps(seed_event())  # the verbatim seed document, as one line
    _, d = decode(spark, [raw])
    rows = d.changes.collect()
    assert d.quarantine.count() == 0
    assert len(rows) == 1
    r = rows[0]
    assert r.op == "INSERT"
    assert r.source_format == "debezium"
    assert (r.source_server, r.source_database, r.source_schema, r.source_table) == ("server1", "testDB", "dbo", "customers")
    assert r.key.asDict() == {"id": 1005}
    assert r.before is None
    assert r.after.asDict() == {"id": 1005, "first_name": "john", "last_name": "doe", "email": "john.doe@example.org"}
    # commit_lsn 00000027:00000758:0005, change_lsn 00000027:00000758:0003, event_serial_no "1" (a string in the seed)
    assert r.sequence.asDict() == {"commit_lsn": "00000027000007580005", "change_lsn": "00000027000007580003", "serial": 1}
    # source.ts_ms 1559729468470 = 2019-06-05T10:11:08.470Z
    assert r.commit_time == dt.datetime(2019, 6, 5, 10, 11, 8, 470000)
    assert r.changed_columns == ["id", "first_name", "last_name", "email"]
    assert sorted(r.provided_columns) == ["email", "first_name", "id", "last_name"]


def test_seed_schema_maps_to_spark_types():
    assert [(c.name, c.spark_type) for c in SEED_COLUMNS] == [
        ("id", "int"), ("first_name", "string"), ("last_name", "string"), ("email", "string"),
    ]


def test_payload_only_envelope_decodes_like_the_schema_envelope(spark):
    kw = dict(after=customer(7, "ann", "lee"), commit_lsn=lsn(0x30, 0x10, 5), change_lsn=lsn(0x30, 0x10, 2))
    _, d = decode(spark, [line(event("c", **kw)), line(event("c", with_schema=False, **kw))])
    rows = d.changes.collect()
    assert len(rows) == 2
    assert rows[0].after == rows[1].after and rows[0].sequence == rows[1].sequence
    assert rows[0].change_id == rows[1].change_id  # same change, delivered twice


def test_update_delete_and_snapshot_operations(spark):
    a, b = customer(1, "a", "x"), customer(1, "a", "y")
    lines = [
        line(event("r", after=a, commit_lsn=lsn(0x20, 0, 1), change_lsn=None, serial=None, snapshot="true")),
        line(event("u", before=a, after=b, commit_lsn=lsn(0x21, 1, 3), change_lsn=lsn(0x21, 1, 2), serial=2)),
        line(event("d", before=b, after=None, commit_lsn=lsn(0x22, 1, 3), change_lsn=lsn(0x22, 1, 2))),
    ]
    _, d = decode(spark, lines)
    rows = sorted(d.changes.collect(), key=lambda r: r.sequence)
    assert [r.op for r in rows] == ["SNAPSHOT", "UPDATE", "DELETE"]
    snap, upd, dele = rows
    assert snap.sequence.change_lsn == "0" * 20 and snap.sequence.commit_lsn == "00000020000000000001"
    assert upd.before.last_name == "x" and upd.after.last_name == "y"
    assert upd.changed_columns == ["last_name", "email"]
    assert dele.after is None and dele.before.last_name == "y" and dele.key.id == 1
    assert dele.provided_columns is None


def test_tombstones_are_skipped_not_quarantined(spark):
    lines = ["", "null", json.dumps({"schema": None, "payload": None})]
    bronze, d = decode(spark, lines)
    assert d.changes.count() == 0 and d.quarantine.count() == 0
    assert debezium.unrouted(bronze, SOURCE, [CUSTOMERS]).count() == 0
    assert bronze.where(debezium.is_skipped()).count() == 3


def test_malformed_envelopes_are_quarantined_with_a_reason(spark):
    ok = line(event("c", after=customer(1, "a", "b"), commit_lsn=lsn(1, 1, 1), change_lsn=lsn(1, 1, 1)))
    unknown_op = json.loads(ok)
    unknown_op["payload"]["op"] = "x"
    no_payload = {"schema": seed_event()["schema"]}
    other_table = event("c", after=customer(2, "a", "b"), commit_lsn=lsn(1, 1, 1), change_lsn=lsn(1, 1, 1), table="orders")
    lines = [ok, "this is not json", json.dumps(unknown_op), json.dumps(no_payload), line(other_table), "[1,2]"]
    bronze, d = decode(spark, lines)
    q = debezium.unrouted(bronze, SOURCE, [CUSTOMERS]).collect()
    reasons = sorted(r.reason for r in q)
    assert reasons == [
        "missing `payload` (and no payload-only fields `op`/`source`)",
        "no onboarded table for dbo.orders in source inventory (onboarded: dbo.customers)",
        "not a JSON object",
        "not a JSON object",
        "unknown op 'x' (expected one of c, u, d, r, t)",
    ]
    assert {r.raw for r in q} >= {"this is not json", "[1,2]"}
    assert all(r.bronze_record_id and r.bronze_file == "file:/landing/part-0.json" for r in q)
    # conservation: every landed record is in silver, quarantine, or skipped
    skipped = bronze.where(debezium.is_skipped()).count()
    assert d.changes.count() + d.quarantine.count() + len(q) + skipped == len(lines)


def test_an_event_two_tables_could_take_is_quarantined_once_not_taken_twice(spark):
    """dbo.customers and sales.customers onboarded: an event whose source names table customers
    without a schema belongs to neither (it would be counted twice); one with its schema to that
    table alone."""
    dbo = replace(CUSTOMERS)
    sales = replace(CUSTOMERS, name="sales_customers", schema="sales")
    dbo, sales = replace(dbo, peers=(sales,)), replace(sales, peers=(dbo,))
    at = dict(commit_lsn=lsn(1, 1, 1), change_lsn=lsn(1, 1, 1))
    no_schema = event("c", after=customer(1, "a", "b"), **at)
    del no_schema["payload"]["source"]["schema"]
    in_sales = event("c", after=customer(2, "c", "d"), **at)
    in_sales["payload"]["source"]["schema"] = "Sales"
    lines = [line(no_schema), line(in_sales), line(event("c", after=customer(3, "e", "f"), **at))]
    bronze = bronze_of(spark, lines)
    taken = {t.name: sorted(r["key"]["id"] for r in debezium.decode(bronze, t, SEED_COLUMNS).changes.collect())
             for t in (dbo, sales)}
    assert taken == {"customers": [3], "sales_customers": [2]}
    assert [r.reason for r in debezium.unrouted(bronze, SOURCE, [dbo, sales]).collect()] == [
        "more than one onboarded table could take this event (dbo.customers, sales.customers): "
        "its source names table customers but no schema"]
    # a table without peers (built by hand) takes a schema-less event of its name, as before
    assert [r["key"]["id"] for r in debezium.decode(bronze, CUSTOMERS, SEED_COLUMNS).changes.collect()] == [1, 3]


def test_null_key_and_unreadable_value_go_to_table_quarantine(spark):
    null_key = event("c", after=customer(1, "a", "b") | {"id": None}, commit_lsn=lsn(1, 1, 1), change_lsn=lsn(1, 1, 1))
    bad_value = event("c", after=customer(1, "a", "b") | {"id": "abc"}, commit_lsn=lsn(1, 1, 2), change_lsn=lsn(1, 1, 2))
    _, d = decode(spark, [line(null_key), line(bad_value)])
    assert d.changes.count() == 0
    reasons = sorted(r.reason for r in d.quarantine.collect())
    assert reasons == [
        'column id: cannot read ["abc"] as int (text); key column id is NULL',
        "key column id is NULL",
    ]


LOGICAL_FIELDS = [
    {"field": "id", "type": "int32"},
    {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
    {"field": "d", "type": "int32", "name": "io.debezium.time.Date"},
    {"field": "t", "type": "int32", "name": "io.debezium.time.Time"},
    {"field": "ts", "type": "int64", "name": "io.debezium.time.Timestamp"},
    {"field": "mts", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
    {"field": "nts", "type": "int64", "name": "io.debezium.time.NanoTimestamp"},
    {"field": "zts", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
    {"field": "big", "type": "int64"},
    {"field": "ok", "type": "boolean"},
    {"field": "blob", "type": "bytes"},
    {"field": "dbl", "type": "double"},  # FLOAT64 and FLOAT32 as the JSON converter names them in a schema
    {"field": "real", "type": "float"},
    {"field": "tiny", "type": "int16"},  # SQL Server's tinyint (0..255), as the connector writes it
]
#: The SQL Server type of each of :data:`LOGICAL_FIELDS` whose values the connector writes that way
#: (its defaults: time.precision.mode=adaptive, decimal.handling.mode=precise, binary.handling.mode=bytes).
SQL_SERVER_TYPES = {"id": "int", "price": "decimal(10,2)", "d": "date", "t": "time(3)", "ts": "datetime2(3)",
                    "mts": "datetime2(6)", "nts": "datetime2", "zts": "datetimeoffset", "big": "bigint", "ok": "bit",
                    "blob": "varbinary(16)", "dbl": "float", "real": "real", "tiny": "tinyint"}


def _logical_after(spark, cols):
    after = {
        "id": 1,
        "price": base64.b64encode((-1999).to_bytes(2, "big", signed=True)).decode(),  # -19.99
        "d": 18052,  # 2019-06-05
        "t": 37868470,  # 10:31:08.470
        "ts": 1559729468470,
        "mts": 1559729468470123,
        "nts": 1559729468470123456,
        "zts": "2019-06-05T12:11:08.47+02:00",
        "big": 9007199254740993,
        "ok": True,
        "blob": base64.b64encode(b"\x00\xff").decode(),
        "dbl": 0.1,
        "real": 0.25,
        "tiny": 255,
    }
    table = TableConfig(name="t", source=SOURCE, schema="dbo", table="t", keys=("id",))
    ev = {"op": "c", "before": None, "after": after, "source": {"name": "s", "db": "d", "schema": "dbo", "table": "t",
          "commit_lsn": lsn(1, 1, 1), "change_lsn": lsn(1, 1, 1), "event_serial_no": 1, "ts_ms": 0}}
    _, d = decode(spark, [json.dumps(ev)], table=table, columns=cols)
    assert d.quarantine.count() == 0
    return d


def test_logical_types_become_spark_types(spark):
    """Decimal (base64 two's complement), Date, Time, Micro/Nano timestamps, ZonedTimestamp."""
    d = _logical_after(spark, [debezium.spec_from_connect_field(f) for f in LOGICAL_FIELDS])
    a = d.changes.collect()[0].after
    assert a.price == Decimal("-19.99")
    assert a.d == dt.date(2019, 6, 5)
    assert a.t == "10:31:08.470000"
    assert a.ts == dt.datetime(2019, 6, 5, 10, 11, 8, 470000)
    assert a.mts == dt.datetime(2019, 6, 5, 10, 11, 8, 470123)
    assert a.nts == dt.datetime(2019, 6, 5, 10, 11, 8, 470123)
    assert a.zts == dt.datetime(2019, 6, 5, 10, 11, 8, 470000)  # UTC instant, session zone UTC
    assert a.big == 9007199254740993
    assert a.ok is True
    assert a.blob == bytearray(b"\x00\xff")
    assert (a.dbl, a.real, a.tiny) == (0.1, 0.25, 255)
    schema = {f.name: f.dataType.simpleString() for f in d.changes.schema["after"].dataType.fields}
    assert schema["price"] == "decimal(10,2)" and schema["ts"] == "timestamp_ntz" and schema["zts"] == "timestamp"
    assert (schema["dbl"], schema["real"]) == ("double", "float")  # was a JSON-text string column


def test_sql_server_type_names_in_columns_read_values_as_the_connector_writes_them(spark):
    """``columns:`` may name a column's SQL Server type (as a change-table or hand-off table does):
    the values are read as the connector writes that type, so the row equals the Connect-typed one."""
    by_connect = [debezium.spec_from_connect_field(f) for f in LOGICAL_FIELDS]
    by_sql = [debezium.DECODER.config_column({"name": f["field"], "type": SQL_SERVER_TYPES[f["field"]]}, i)
              for i, f in enumerate(LOGICAL_FIELDS, start=1)]
    assert [(c.spark_type, c.encoding) for c in by_sql] == [(c.spark_type, c.encoding) for c in by_connect]
    assert _logical_after(spark, by_sql).changes.collect()[0].after == \
        _logical_after(spark, by_connect).changes.collect()[0].after


def test_a_column_type_no_decoder_reads_is_a_config_error_naming_file_line_and_column(tmp_path):
    """A typo in a type used to pass `validate` and stop the run with Spark's parse error."""
    from sqlcdc.config import ConfigError, load_pipeline

    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: debezium\n    landing: in\n")
    (tmp_path / "tables" / "t.yml").write_text(
        "table: dbo.t\nkeys: [id]\ncolumns:\n  - {name: id, type: int}\n  - {name: photo, type: varbinry(16)}\n")
    with pytest.raises(ConfigError) as e:
        load_pipeline(str(tmp_path / "pipeline.yml"))
    (problem,) = e.value.problems
    assert problem.startswith(f"{tmp_path / 'tables' / 't.yml'}:5: columns[1].type: 'varbinry(16)' (column 'photo') "
                              "is not a type a debezium source reads")


def test_columns_are_discovered_from_a_schema_envelope_in_the_landing_folder(tmp_path):
    (tmp_path / "a.json").write_text("garbage\n" + json.dumps(seed_event()) + "\n")
    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",))
    assert [(c.name, c.spark_type) for c in debezium.columns_for(table, src)] == [
        ("id", "int"), ("first_name", "string"), ("last_name", "string"), ("email", "string"),
    ]


def test_a_column_the_source_adds_later_is_discovered_from_the_envelopes_that_carry_it(tmp_path):
    """``ALTER TABLE ... ADD tier`` and a new capture instance: the connector's schema gains the
    column from there. Discovery took the first envelope only, so ``tier`` was never landed; its
    envelopes may lie deep in a file (past the 1,000 lines discovery read of each) or in a file
    named before the old shape's."""
    def with_tier(ev):
        for f in ev["schema"]["fields"]:
            if f["field"] in ("before", "after"):
                f["fields"].append({"type": "string", "optional": True, "field": "tier"})
        for image in ("before", "after"):
            if ev["payload"][image] is not None:
                ev["payload"][image]["tier"] = "gold"
        return ev

    old = json.dumps(seed_event())
    (tmp_path / "b-1.json").write_text((old + "\n") * 1500 + json.dumps(with_tier(seed_event())) + "\n")
    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",))
    want = [("id", "int"), ("first_name", "string"), ("last_name", "string"), ("email", "string"), ("tier", "string")]
    assert [(c.name, c.spark_type) for c in debezium.columns_for(table, src)] == want
    (tmp_path / "a-0.json").write_text(json.dumps(with_tier(seed_event())) + "\n" + old + "\n")  # the new shape first
    assert [(c.name, c.spark_type) for c in debezium.columns_for(table, src)] == want



def test_a_decimal_whose_scale_changed_at_the_source_reads_each_event_at_its_own_scale(spark, tmp_path):
    """``ALTER COLUMN balance decimal(12,4)`` and a new capture instance: the connector then sends
    123.4500 as the unscaled 1234500, which the table's discovered decimal(10,2) (its first shape)
    read as 12345.00 -- a wrong value without a trace. Discovery widens the column to hold both
    shapes, and each event's value is read at its own schema's scale; an event whose scale the
    table cannot hold (landed after discovery) is quarantined naming the column, not rounded."""
    def shaped(scale: int, unscaled: int, id_: int) -> str:
        def add(fields):
            fields.append({"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
                           "parameters": {"scale": str(scale), "connect.decimal.precision": str(8 + scale)},
                           "field": "balance"})
        ev = _with_schema_fields(add)
        ev["payload"]["after"].update(id=id_, balance=base64.b64encode(unscaled.to_bytes(4, "big", signed=True)).decode())
        ev["payload"]["source"]["change_lsn"] = lsn(0x27, 0x100 + id_, 3)
        return json.dumps(ev)

    (tmp_path / "a.json").write_text(shaped(2, 12345, 1) + "\n")
    (tmp_path / "b.json").write_text(shaped(4, 1234567, 2) + "\n")
    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",))
    cols = debezium.columns_for(table, src)
    assert [(c.name, c.spark_type) for c in cols][-1] == ("balance", "decimal(12,4)")
    lines = [(tmp_path / n).read_text().strip() for n in ("a.json", "b.json")] + [shaped(6, 123456789, 3)]
    _, d = decode(spark, lines, table, cols)
    assert sorted((r.after.id, r.after.balance) for r in d.changes.collect()) == [(1, Decimal("123.4500")),
                                                                                    (2, Decimal("123.4567"))]
    [q] = d.quarantine.collect()
    assert ("column balance: the event's Connect schema gives it Decimal scale 6, and the table reads decimal(12,4) "
            "(scale 4): a value of that scale is not read exactly") in q.reason


def test_discovery_reads_only_the_files_landed_since_the_last_run(tmp_path, monkeypatch):
    """Every landed line is read for its schema, so each run would read all the files ever landed:
    a local run keeps what each file holds in its state folder, by size and modification time."""
    from sqlcdc.formats import _connect_discovery
    from sqlcdc.formats.base import STATE_DIR_ENV

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setattr(_connect_discovery, "_MEMO", {})
    (tmp_path / "in").mkdir()
    old = tmp_path / "in" / "a.json"
    old.write_text(json.dumps(_with_schema_fields(lambda fs: fs.append({"type": "string", "optional": True,
                                                                          "field": "legacy"}))) + "\n")
    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path / "in"))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",))
    assert [c.name for c in debezium.columns_for(table, src)][-1] == "legacy"
    # the next run (another process: nothing in memory); a.json is the same file by size and time
    # (its text swapped for one without a schema, to show it is not read again), b.json is new
    st = old.stat()
    old.write_text("x" * (st.st_size - 1) + "\n")
    os.utime(old, ns=(st.st_atime_ns, st.st_mtime_ns))
    monkeypatch.setattr(_connect_discovery, "_MEMO", {})
    (tmp_path / "in" / "b.json").write_text(json.dumps(seed_event()) + "\n")
    assert [c.name for c in debezium.columns_for(table, src)] == ["id", "first_name", "last_name", "email", "legacy"]
    old.write_text(json.dumps(seed_event()) + "\n")  # changed: read again
    monkeypatch.setattr(_connect_discovery, "_MEMO", {})
    assert [c.name for c in debezium.columns_for(table, src)] == ["id", "first_name", "last_name", "email"]


def test_missing_columns_and_no_schema_envelope_is_a_config_error_naming_the_table(tmp_path):
    from sqlcdc.config import ConfigError

    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path))
    table = TableConfig(name="orders", source=src, schema="dbo", table="orders", keys=("id",), file="config/tables/orders.yml")
    with pytest.raises(ConfigError, match=r"config/tables/orders.yml:1: columns: table dbo.orders has no `columns:`"):
        debezium.columns_for(table, src)


def test_a_discovered_column_name_delta_cannot_store_is_a_config_error_naming_it(tmp_path):
    """Silver and gold keep the source's names; a space in one made Delta fail mid-run."""
    from sqlcdc.config import ConfigError

    ev = seed_event()
    for f in ev["schema"]["fields"]:
        if f["field"] in ("before", "after"):
            f["fields"][1]["field"] = "first name"
    (tmp_path / "a.json").write_text(json.dumps(ev) + "\n")
    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",), file="t/customers.yml")
    with pytest.raises(ConfigError, match=r"t/customers.yml:1: columns: the Debezium schema of dbo.customers names "
                                          r"column\(s\) 'first name' with a character Delta cannot store"):
        debezium.columns_for(table, src)


def _with_schema_fields(change) -> dict:
    """The seed event with ``change(fields)`` applied to its before/after schema field lists."""
    ev = seed_event()
    for f in ev["schema"]["fields"]:
        if f["field"] in ("before", "after"):
            change(f["fields"])
    return ev


HOSTILE_SCHEMAS = {  # what one envelope's Connect schema says -> what discovery names
    "a name Delta cannot store": (lambda fs: fs.append({"type": "string", "field": "order date"}),
                                  "names column(s) 'order date' with a character Delta cannot store"),
    "a name sqlcdc gives a column of its own": (lambda fs: fs.append({"type": "string", "field": "_Sequence"}),
                                                "names column name(s) '_Sequence' are ones sqlcdc gives columns of its own"),
    "names equal but for case": (lambda fs: fs.append({"type": "int32", "field": "ID"}),
                                 "names columns equal but for case (id, ID)"),
    "an empty name": (lambda fs: fs.append({"type": "string", "field": ""}), "has a column without a name"),
    "a field without a name": (lambda fs: fs.append({"type": "string"}), "does not read (KeyError"),
    "a decimal Spark cannot hold": (lambda fs: fs.append({
        "type": "bytes", "field": "big", "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "50"}}), "declares column big as decimal(50,2)"),
    "a scale that is not a number": (lambda fs: fs.append({
        "type": "bytes", "field": "p", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "x"}}),
        "does not read (ValueError"),
    "fields not a list of objects": (lambda fs: fs.append("oops"), "does not read (TypeError"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_SCHEMAS))
def test_one_hostile_schema_envelope_is_passed_over_and_named_when_no_other_defines_the_table(tmp_path, kind):
    """Producer metadata cannot stop a run: discovery took the first schema-bearing envelope, and one
    with such a schema raised a config error (a Delta name), or failed mid-run (names equal but for
    case, decimal(50,2)), or raised KeyError/ValueError (a field without a name, a bad scale)."""
    from sqlcdc.config import ConfigError

    change, named = HOSTILE_SCHEMAS[kind]
    src = SourceConfig(name="inventory", format="debezium", landing=str(tmp_path))
    table = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("id",), file="t/customers.yml")
    (tmp_path / "a.json").write_text(json.dumps(_with_schema_fields(change)) + "\n")
    with pytest.raises(ConfigError) as e:
        debezium.columns_for(table, src)
    assert f"t/customers.yml:1: columns: the Debezium schema of dbo.customers {named}" in str(e.value)
    assert f"at {tmp_path / 'a.json'}:1" in str(e.value)
    (tmp_path / "b.json").write_text(json.dumps(seed_event()) + "\n")  # a usable one lands later
    assert [c.name for c in debezium.columns_for(table, src)] == ["id", "first_name", "last_name", "email"]


def test_apply_frame_turns_a_key_change_into_delete_plus_upsert(spark):
    """CT/Qlik-style key change (one UPDATE, before key != after key) -> DELETE old + UPSERT new."""
    ev = event("u", before=customer(1, "a", "b"), after=customer(2, "a", "b"), commit_lsn=lsn(5, 1, 1), change_lsn=lsn(5, 1, 1))
    _, d = decode(spark, [line(ev)])
    frame = model.apply_frame(d.changes, [c.name for c in SEED_COLUMNS], ["id"])
    got = sorted((r.id, r._op) for r in frame.collect())
    assert got == [(1, "DELETE"), (2, "UPSERT")]
