"""CES (SQL Server 2025 Change Event Streaming) decoder: CloudEvents in JSON and Avro -> silver, gold.

Expected values are written by hand from the seed page (tests/fixtures/ces/seed_*.json are its three
examples verbatim) or from the synthetic events built here.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest
from pyspark.sql import functions as F

from sqlcdc import model
from sqlcdc.gold import ApplyChangesSpec, scd1, scd2
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.diagnostics import validator
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats import base, ces

FIX = Path(__file__).resolve().parent / "fixtures" / "ces"
GUID = "9c8d4ad2-bf54-4f10-a96f-038af496997f"
LINEAGE = ("bronze_record_id", "bronze_file", "bronze_ingest_time")

PURCHASE_COLS = [
    ("purchase_id", "int"), ("customer_name", "varchar(100)"), ("product_id", "int"),
    ("product_name", "varchar(100)"), ("price_per_item", "int"), ("quantity", "int"),
    ("purchase_date", "datetime"), ("payment_method", "varchar(50)"),
]


# ----------------------------------------------------------------------------- helpers


def seed_line(name: str) -> str:
    """A seed example as one JSON line: the verbatim text with its layout whitespace removed
    (the pretty-printed document has no raw newline inside a string)."""
    return " ".join(line.strip() for line in (FIX / f"seed_{name}.json").read_text().splitlines())


def source(landing, **options) -> SourceConfig:
    options.setdefault("serialization", "json")  # Avro only where a test lands Avro (halves the plans)
    return SourceConfig(name="ces_src", format="ces", landing=str(landing), options=options, file="config/pipeline.yml")


def purchases(src: SourceConfig, **kw) -> TableConfig:
    return TableConfig(name="purchases", source=src, schema="dbo", table="Purchases", keys=("purchase_id",),
                       file="config/tables/purchases.yml", **kw)


def event(op: str, *, table="Purchases", cols=PURCHASE_COLS, old=None, current=None, pk=None,
          lsn="0000002C00000400000A", seq=1, time="2025-03-14T17:00:00.000Z", transaction=None,
          eid=None, spelling="segment") -> dict:
    """A CES CloudEvent (dict) built like the seed's: data and images are JSON strings."""
    source_doc = {
        "db": "db1", "schema": "dbo", "tbl": table,
        "cols": [{"name": n, "type": t, "index": i} for i, (n, t) in enumerate(cols)],
        "pkkey": [{"columnname": k, "value": v} for k, v in (pk or {}).items()],
    }
    if transaction:
        source_doc["transaction"] = transaction
    data = {"eventsource": source_doc,
            "eventrow": {"old": json.dumps(old or {}), "current": json.dumps(current or {})}}
    ev = {
        "specversion": "1.0", "type": "com.microsoft.SQL.CES.DML.V1", "source": "/",
        "id": eid or f"id-{lsn}-{seq}", "logicalid": f"{GUID}:{lsn}:{seq:020d}", "time": time,
        "datacontenttype": "application/json", "operation": op,
    }
    ev.update({"segmentindex": 0, "finalsegment": True} if spelling == "segment" else {"splitindex": 0, "splittotalcnt": 0})
    ev["data"] = json.dumps(data)
    return ev


def split(ev: dict, n: int, spelling: str = "segment") -> list[dict]:
    """The event cut into ``n`` segments sharing its logicalid (data pieces in index order)."""
    data = ev["data"]
    size = -(-len(data) // n)
    out = []
    for i in range(n):
        seg = {k: v for k, v in ev.items() if k not in ("segmentindex", "finalsegment", "splitindex", "splittotalcnt")}
        seg["id"] = f"{ev['id']}-seg{i}"
        if spelling == "segment":
            seg.update({"segmentindex": i, "finalsegment": i == n - 1})
        else:
            seg.update({"splitindex": i, "splittotalcnt": n})
        seg["data"] = data[i * size:(i + 1) * size]
        out.append(seg)
    return out


def land_json(folder: Path, name: str, events: list) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events))
    return path


def land_avro(folder: Path, name: str, events: list[dict], as_bytes: tuple[str, ...] = ()) -> Path:
    """Avro container file written with the seed page's own ChangeEvent schema (verbatim; the
    string fields ``as_bytes`` written as bytes, which Avro encodes alike, so they may hold any)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = json.loads((FIX / "seed_changeevent.avsc").read_text())
    for f in doc["fields"]:
        f["type"] = "bytes" if f["name"] in as_bytes else f["type"]
    schema = fastavro.parse_schema(doc)
    records = []
    for e in events:
        if "segmentindex" in e:
            idx, final = e["segmentindex"], e["finalsegment"]
        else:  # the examples' spelling: a total of 0/1 = not split
            idx, final = e["splitindex"], e["splittotalcnt"] <= 1 or e["splitindex"] == e["splittotalcnt"] - 1
        records.append({
            "specversion": e["specversion"], "type": e["type"], "source": e["source"], "id": e["id"],
            "logicalid": e["logicalid"], "time": e["time"], "datacontenttype": e["datacontenttype"],
            "operation": e["operation"], "segmentindex": idx, "finalsegment": final,
            "data": e["data"] if isinstance(e["data"], bytes) else e["data"].encode("utf-8"),
        })
    path = folder / name
    with path.open("wb") as f:
        fastavro.writer(f, schema, records)
    return path


def bronze_of(spark, lines: list[str], file="file:/landing/part-0.json", ingest_time=None):
    df = spark.createDataFrame([(v, file) for v in lines], "value string, source_file string")
    b = base.bronze_columns(df)
    if ingest_time is not None:
        b = b.withColumn("ingest_time", F.lit(ingest_time).cast("timestamp"))
    return b


def gold(silver, columns, keys):
    frame = model.apply_frame(silver, [c.name for c in columns], keys)
    s1 = scd1(frame, ApplyChangesSpec(keys=keys, table="purchases"))
    s2 = scd2(frame, ApplyChangesSpec(keys=keys, stored_as_scd_type=2, table="purchases"))
    return s1, s2


def rows(df, *order):
    return [r.asDict(recursive=True) for r in df.orderBy(*order).collect()]


def without_lineage(df):
    return df.drop(*LINEAGE)


# ----------------------------------------------------------------------------- the seed's examples

ANNA_2077 = {"purchase_id": 105, "customer_name": "Anna Doe", "product_id": 101, "product_name": "Game 2077",
             "price_per_item": 60, "quantity": 1, "purchase_date": dt.datetime(2025, 3, 14, 16, 45, 1),
             "payment_method": "Credit Card"}
ANNA_2066 = {**ANNA_2077, "product_id": 100, "product_name": "Game 2066", "price_per_item": 50, "quantity": 2}
SEQ_INS = {"commit_lsn": "0000002C00000300017C", "change_lsn": "0" * 20, "serial": 1}
SEQ_UPD = {"commit_lsn": "0000002C000003500004", "change_lsn": "0" * 20, "serial": 1}
SEQ_DEL = {"commit_lsn": "0000002C000003600019", "change_lsn": "0" * 20, "serial": 1}


@pytest.fixture(scope="module")
def seed_run(spark, tmp_path_factory):
    landing = tmp_path_factory.mktemp("ces-seed")
    # landed in an order that is not the commit order
    land_json(landing, "events.json", [seed_line("delete"), seed_line("insert"), seed_line("update")])
    src = source(landing)
    table = purchases(src)
    bronze = ces.read_bronze(spark, src, streaming=False)
    cols = ces.columns_for(table, src, spark)
    d = ces.decode(bronze, table, cols)
    silver = d.changes.cache()
    return src, table, bronze, cols, silver, d.quarantine


def test_seed_columns_are_discovered_from_eventsource_cols(seed_run):
    *_, cols, _silver, _q = seed_run
    assert [(c.name, c.spark_type, c.source_type, c.ordinal) for c in cols] == [
        ("purchase_id", "int", "int", 1), ("customer_name", "string", "varchar(100)", 2),
        ("product_id", "int", "int", 3), ("product_name", "string", "varchar(100)", 4),
        ("price_per_item", "int", "int", 5), ("quantity", "int", "int", 6),
        ("purchase_date", "timestamp_ntz", "datetime", 7), ("payment_method", "string", "varchar(50)", 8),
    ]
    assert ces.unknown_types(cols) == []


def test_seed_examples_decode_to_typed_rows(seed_run):
    """Insert, update (old = "{}": before image unknown) and delete of Purchases id 105."""
    _src, _table, _bronze, _cols, silver, quarantine = seed_run
    assert quarantine.count() == 0
    got = rows(silver.withColumn("commit_time_text", F.col("commit_time").cast("string")), "sequence")
    assert [r["op"] for r in got] == ["INSERT", "UPDATE", "DELETE"]
    ins, upd, dele = got
    all_cols = [n for n, _ in PURCHASE_COLS]

    assert ins["change_id"] == f"{GUID}:0000002C00000300017C:00000000000000000001"
    assert (ins["source_format"], ins["source_database"], ins["source_schema"], ins["source_table"], ins["table_name"]) == (
        "ces", "db1", "dbo", "Purchases", "purchases")
    assert ins["key"] == {"purchase_id": 105}
    assert ins["before"] is None
    assert ins["after"] == ANNA_2077
    assert ins["provided_columns"] == all_cols
    assert ins["sequence"] == SEQ_INS
    assert ins["commit_time_text"] == "2025-03-14 16:45:20.65"
    assert ins["transaction_id"] == "0000002C00000300017C"

    assert upd["before"] is None  # "{}" = unknown before image, not a row of NULLs
    assert upd["after"] == ANNA_2066
    assert upd["changed_columns"] is None  # unknown without a before image
    assert upd["provided_columns"] == all_cols
    assert upd["sequence"] == SEQ_UPD
    assert upd["commit_time_text"] == "2025-03-14 16:49:59.567"

    assert dele["before"] == ANNA_2066
    assert dele["after"] is None
    assert dele["key"] == {"purchase_id": 105}
    assert dele["sequence"] == SEQ_DEL
    assert dele["commit_time_text"] == "2025-03-14 16:51:39.613"
    assert all(r["bronze_file"].endswith("events.json") for r in got)


def test_seed_examples_give_scd1_and_scd2_gold(seed_run):
    *_, cols, silver, _q = seed_run
    keys = ["purchase_id"]
    # after insert + update: the updated row is current
    s1, s2 = gold(silver.where(F.col("op") != "DELETE"), cols, keys)
    assert rows(s1, "purchase_id") == [ANNA_2066]
    # after the delete as well: SCD1 is empty, SCD2 keeps both versions, the last one closed
    s1, s2 = gold(silver, cols, keys)
    assert s1.count() == 0
    assert rows(s2, "__START_AT") == [
        {**ANNA_2077, "__START_AT": SEQ_INS, "__END_AT": SEQ_UPD},
        {**ANNA_2066, "__START_AT": SEQ_UPD, "__END_AT": SEQ_DEL},
    ]


# ----------------------------------------------------------------------------- split events


BIG_COLS = PURCHASE_COLS[:3] + [("product_name", "nvarchar(max)")] + PURCHASE_COLS[4:]


def big_purchase(name_len=20000, lsn="0000002C000005000001", **kw):
    """An insert whose nvarchar(max) value makes the event large enough to be split."""
    name = ("Édition collector " * (name_len // 18 + 1))[:name_len]
    return event("INS", cols=BIG_COLS, pk={"purchase_id": "900"}, lsn=lsn, seq=3,
                 current={"purchase_id": "900", "customer_name": "Bo Li", "product_id": "7", "product_name": name,
                          "price_per_item": "15", "quantity": "4", "purchase_date": "2025-03-15 08:00:00.000",
                          "payment_method": "Cash"}, **kw), name


def test_split_event_shuffled_across_two_runs_yields_exactly_one_change(spark, tmp_path):
    ev, name = big_purchase()
    segs = split(ev, 5)
    ev2, _ = big_purchase(name_len=3000, spelling="split")
    ev2 = {**ev2, "logicalid": f"{GUID}:0000002C000005000002:00000000000000000001", "id": "other"}
    ev2_data = json.loads(ev2["data"])
    ev2_data["eventrow"]["current"] = ev2_data["eventrow"]["current"].replace('"900"', '"901"')
    ev2_data["eventsource"]["pkkey"][0]["value"] = "901"
    ev2["data"] = json.dumps(ev2_data)
    segs2 = split(ev2, 3, spelling="split")  # the examples' splitindex/splittotalcnt spelling
    landing = tmp_path / "landing"
    src = source(landing)
    table = purchases(src)

    # run 1: segments 3, 0, the final one (4), a redelivered 0, and 2 of 3 of the other event
    land_json(landing, "run1.json", [segs[3], segs[0], segs[4], segs2[2], segs2[0]])
    land_json(landing, "run1-redelivered.json", [segs[0]])
    bronze = ces.read_bronze(spark, src, streaming=False)
    cols = [ces.spec_for_sql_type(n, t) for n, t in BIG_COLS]  # no complete event yet to discover them from
    d = ces.decode(bronze, table, cols)
    assert d.changes.count() == 0 and d.quarantine.count() == 0
    assert ces.unrouted(bronze, src, [table]).count() == 0
    assert sorted(r.status for r in ces.disposition(bronze, src).collect()) == ["pending"] * 6

    # run 2: the rest, shuffled, plus a redelivered final segment
    land_json(landing, "run2.json", [segs[2], segs2[1], segs[4], segs[1]])
    bronze = ces.read_bronze(spark, src, streaming=False)
    d = ces.decode(bronze, table, cols)
    got = rows(d.changes, "key")
    assert d.quarantine.count() == 0 and ces.unrouted(bronze, src, [table]).count() == 0
    assert len(got) == 2
    big, small = got
    assert big["op"] == "INSERT" and big["key"] == {"purchase_id": 900}
    assert big["after"]["product_name"] == name and len(big["after"]["product_name"]) == 20000
    assert big["after"]["customer_name"] == "Bo Li" and big["after"]["quantity"] == 4
    assert big["change_id"] == ev["logicalid"]
    assert big["sequence"] == {"commit_lsn": "0000002C000005000001", "change_lsn": "0" * 20, "serial": 3}
    final_copies = {r.record_id for r in bronze.where(F.col("value") == json.dumps(segs[4])).collect()}
    assert len(final_copies) == 2 and big["bronze_record_id"] in final_copies  # lineage: a final segment
    assert small["key"] == {"purchase_id": 901} and len(small["after"]["product_name"]) == 3000
    statuses = sorted(r.status for r in ces.disposition(bronze, src).collect())
    assert statuses == ["duplicate_segment"] * 2 + ["segment"] * 8


def test_missing_final_segment_is_quarantined_after_the_timeout(spark):
    ev, _ = big_purchase()
    segs = [json.dumps(s) for s in split(ev, 3)]
    src = source("/nowhere", split_timeout="1 hour")
    table = purchases(src)
    cols = [ces.spec_for_sql_type(n, t) for n, t in PURCHASE_COLS]

    # landed just now: still pending, in neither silver nor quarantine
    fresh = bronze_of(spark, segs[:2])
    assert ces.decode(fresh, table, cols).changes.count() == 0
    assert ces.unrouted(fresh, src, [table]).count() == 0

    # landed two hours ago: every landed segment is quarantined with the reason
    old = bronze_of(spark, segs[:2], ingest_time="2020-01-01 00:00:00")
    assert ces.decode(old, table, cols).changes.count() == 0
    q = rows(ces.unrouted(old, src, [table]), "raw")
    assert len(q) == 2
    assert {r["raw"] for r in q} == set(segs[:2])
    for r in q:
        assert r["rules"] == ["ces-split-timeout"]
        assert ev["logicalid"] in r["reason"]
        assert "incomplete after split_timeout (3600 s): segments 0,1 of unknown (final segment not seen)" in r["reason"]
    assert sorted(r.status for r in ces.disposition(old, src).collect()) == ["timed_out", "timed_out"]

    # the final segment arrives late: the group completes, moves to silver, leaves quarantine
    late = old.unionByName(bronze_of(spark, segs[2:], file="file:/landing/part-1.json"))
    d = ces.decode(late, table, cols)
    assert d.changes.count() == 1 and d.quarantine.count() == 0
    assert ces.unrouted(late, src, [table]).count() == 0


def test_split_timeout_option_is_checked():
    assert ces.split_timeout_seconds(source("/x")) == 3600
    assert ces.split_timeout_seconds(source("/x", split_timeout=90)) == 90
    assert ces.split_timeout_seconds(source("/x", split_timeout="2 days")) == 172800
    with pytest.raises(ValueError, match=r"config/pipeline.yml: sources.ces_src.options.split_timeout: 'soon'"):
        ces.split_timeout_seconds(source("/x", split_timeout="soon"))


# ----------------------------------------------------------------------------- JSON and Avro


def stream() -> list[dict]:
    """A change stream: the seed's three examples, a split insert, an update with both images."""
    seed = [json.loads(seed_line(n)) for n in ("insert", "update", "delete")]
    big, _ = big_purchase(name_len=5000)
    upd = event("UPD", pk={"purchase_id": "900"}, lsn="0000002C000006000001", seq=1,
                old={"purchase_id": "900", "customer_name": "Bo Li", "product_id": "7", "product_name": "x",
                     "price_per_item": "15", "quantity": "4", "purchase_date": "2025-03-15 08:00:00.000",
                     "payment_method": "Cash"},
                current={"purchase_id": "900", "customer_name": "Bo Li", "product_id": "7", "product_name": "Short",
                         "price_per_item": "15", "quantity": "5", "purchase_date": "2025-03-15 08:00:00.000",
                         "payment_method": "Cash"})
    segs = split(big, 4)
    return [seed[2], segs[2], seed[0], segs[0], upd, segs[3], seed[1], segs[1]]


def test_json_and_avro_give_identical_silver_and_gold(spark, tmp_path):
    events = stream()
    src_json = source(tmp_path / "json")
    src_avro = source(tmp_path / "avro", serialization="avro")
    land_json(tmp_path / "json", "events.json", events)
    land_avro(tmp_path / "avro", "events.avro", events)
    out = {}
    for kind, src in (("json", src_json), ("avro", src_avro)):
        table = purchases(src)
        bronze = ces.read_bronze(spark, src, streaming=False)
        assert bronze.count() == 8
        assert bronze.where(~F.col("source_file").endswith(f"events.{kind}")).count() == 0
        cols = ces.columns_for(table, src, spark)
        d = ces.decode(bronze, table, cols)
        assert d.quarantine.unionByName(ces.unrouted(bronze, src, [table])).count() == 0
        silver = d.changes.cache()  # (cached: gold and the comparison then plan from it)
        s1, s2 = gold(silver, cols, ["purchase_id"])
        out[kind] = (rows(without_lineage(silver), "sequence"), rows(s1, "purchase_id"), rows(s2, "purchase_id", "__START_AT"), cols)
    assert out["json"] == out["avro"]
    silver, s1, s2, _ = out["json"]
    assert [r["op"] for r in silver] == ["INSERT", "UPDATE", "DELETE", "INSERT", "UPDATE"]
    assert silver[-1]["changed_columns"] == ["product_name", "quantity"]
    assert silver[-1]["before"]["product_name"] == "x"
    assert [(r["purchase_id"], r["product_name"], r["quantity"]) for r in s1] == [(900, "Short", 5)]
    assert [(r["purchase_id"], r["__END_AT"] is None) for r in s2] == [(105, False), (105, False), (900, False), (900, True)]


def test_avro_bronze_keeps_the_envelope_as_json_text(spark, tmp_path):
    ev = json.loads(seed_line("insert"))
    land_avro(tmp_path, "one.avro", [ev])
    land_json(tmp_path, "two.json", [seed_line("update")])
    both = ces.read_bronze(spark, source(tmp_path, serialization="auto"), streaming=False)  # the default
    assert sorted(Path(r.source_file).name for r in both.collect()) == ["one.avro", "two.json"]
    bronze = ces.read_bronze(spark, source(tmp_path, serialization="avro"), streaming=False)
    (row,) = bronze.collect()
    doc = json.loads(row.value)
    assert doc["id"] == "d43f09a6-d13b-4902-86d4-17bdb5edb872"
    assert (doc["segmentindex"], doc["finalsegment"]) == (0, True)
    assert doc["data"] == ev["data"]
    assert row.source_file.endswith("one.avro")


def test_avro_data_that_is_not_utf8_is_refused_naming_the_byte_and_u_fffd_text_is_kept(spark, tmp_path):
    """to_json would write a byte that is not UTF-8 as U+FFFD, silently: the event is refused before
    any decoder instead, whether the byte is in ``data`` or in a text field (``id`` written as Avro
    bytes, which Avro's schema resolution reads as a string); a U+FFFD the producer wrote is a
    character like any other, kept to gold."""
    kept = event("INS", current={**ANNA_2077, "purchase_date": "2025-03-14 16:45:01", "customer_name": "An\ufffdna"},
                 pk={"purchase_id": 105}, lsn="0000002C00000400000A")
    bad = event("INS", current={**ANNA_2077, "purchase_id": 106, "purchase_date": "2025-03-14 16:45:01",
                                "customer_name": "NAME"}, pk={"purchase_id": 106}, lsn="0000002C00000400000B")
    bad["data"] = bad["data"].encode().replace(b"NAME", b"Ren\xe9e")  # Latin-1, not UTF-8
    bad_id = {**event("INS", current={**ANNA_2077, "purchase_id": 107, "purchase_date": "2025-03-14 16:45:01"},
                      pk={"purchase_id": 107}, lsn="0000002C00000400000C"), "id": b"id-\xff"}
    land_avro(tmp_path, "events.avro", [{**kept, "id": kept["id"].encode()}, {**bad, "id": bad["id"].encode()}, bad_id],
              as_bytes=("id",))
    src = source(tmp_path, serialization="avro")
    bronze = ces.read_bronze(spark, src, streaming=False)
    refused = sorted(base.rejected_before_decoding(bronze, src.name, "ces").collect(), key=lambda r: r.reason)
    assert [(r.rules, r.reason.split(" at offset ")[0]) for r in refused] == [
        (["not_utf8"], "not UTF-8 text: byte e9"), (["not_utf8"], "not UTF-8 text: byte ff")]
    assert "Ren\ufffde" in refused[0].raw and '"id":"id-\ufffd"' in refused[1].raw  # readable; bronze keeps the bytes
    seen = bronze.where(~base.is_rejected_before_decoding())
    d = ces.decode(seen, purchases(src), ces.columns_for(purchases(src), src, spark))
    assert [r.reason for r in d.quarantine.collect()] == []
    assert [(r.after.purchase_id, r.after.customer_name) for r in d.changes.collect()] == [(105, "An\ufffdna")]


# ----------------------------------------------------------------------------- types & ordering

TYPED_COLS = [
    ("id", "bigint"), ("small", "smallint"), ("tiny", "tinyint"), ("flag", "bit"), ("amount", "decimal(10,2)"),
    ("num", "numeric(5)"), ("cash", "money"), ("ratio", "float"), ("r", "real"), ("day", "date"),
    ("at", "time(7)"), ("dt2", "datetime2(7)"), ("sdt", "smalldatetime"), ("dto", "datetimeoffset(7)"),
    ("code", "char(3)"), ("note", "nvarchar(max)"), ("uid", "uniqueidentifier"), ("blob", "varbinary(max)"),
    ("doc", "xml"), ("shape", "geography"),
]
TYPED_VALUES = {
    "id": "9000000000", "small": "-3", "tiny": "255", "flag": "1", "amount": "1234.50", "num": "12345",
    "cash": "19.9900", "ratio": "1.5E+2", "r": "0.25", "day": "2025-03-14", "at": "16:45:01.1234567",
    "dt2": "2025-03-14 16:45:01.1234567", "sdt": "2025-03-14 16:45:00", "dto": "2025-03-14 16:45:01.0000000 +01:00",
    "code": "ABC", "note": "héllo", "uid": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "blob": "0x0A0B0C",
    "doc": "<a>1</a>", "shape": "POINT (1 2)",
}


def test_sql_server_types_are_typed_and_unknown_types_reported(spark):
    ev = event("INS", table="Typed", cols=TYPED_COLS, pk={"id": "9000000000"}, current=TYPED_VALUES)
    src = source("/nowhere")
    table = TableConfig(name="typed", source=src, schema="dbo", table="Typed", keys=("id",))
    cols = [ces.spec_for_sql_type(n, t) for n, t in TYPED_COLS]
    assert [c.name for c in cols if c.lob] == ["note", "blob", "doc"]
    assert ces.unknown_types(cols) == [("shape", "geography")]
    d = ces.decode(bronze_of(spark, [json.dumps(ev)]), table, cols)
    assert d.quarantine.count() == 0
    (r,) = d.changes.select("after", F.col("after.dto").cast("string").alias("dto_utc")).collect()
    a = r.after.asDict()
    assert a == {
        "id": 9000000000, "small": -3, "tiny": 255, "flag": True, "amount": Decimal("1234.50"), "num": Decimal("12345"),
        "cash": Decimal("19.9900"), "ratio": 150.0, "r": 0.25, "day": dt.date(2025, 3, 14), "at": "16:45:01.123456",
        "dt2": dt.datetime(2025, 3, 14, 16, 45, 1, 123456), "sdt": dt.datetime(2025, 3, 14, 16, 45),
        "dto": a["dto"], "code": "ABC", "note": "héllo", "uid": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
        "blob": bytearray(b"\x0a\x0b\x0c"), "doc": "<a>1</a>", "shape": "POINT (1 2)",
    }
    assert r.dto_utc == "2025-03-14 15:45:01"  # +01:00 -> UTC
    assert [(c.spark_type) for c in cols][:10] == [
        "bigint", "smallint", "smallint", "boolean", "decimal(10,2)", "decimal(5,0)", "decimal(19,4)", "double",
        "float", "date"]


def test_columns_config_reads_sql_server_names_and_spark_types_that_are_not_one():
    """``columns:`` of a CES table: SQL Server names as CES spells them (``timestamp`` is rowversion);
    a Spark type that is no SQL Server name keeps its meaning (``boolean`` was a string before)."""
    got = {t: (c.spark_type, c.encoding) for t in ("bit", "boolean", "timestamp_ntz", "double", "timestamp", "float",
                                                   "datetime2(6)", "string")
           for c in [ces.DECODER.config_column({"name": "x", "type": t}, 1)]}
    assert got == {"bit": ("boolean", "text"), "boolean": ("boolean", "text"), "timestamp_ntz": ("timestamp_ntz", "text"),
                   "double": ("double", "text"), "timestamp": ("binary", "hex"), "float": ("double", "text"),
                   "datetime2(6)": ("timestamp_ntz", "text"), "string": ("string", "text")}


def test_ordering_uses_eventsource_transaction_when_present(spark):
    tx = {"commitlsn": "0x0000002D000000100001", "beginlsn": "0x0000002D000000080001", "sequencenumber": 7,
          "committime": "2025-03-14T18:00:00Z"}
    ev = event("INS", pk={"purchase_id": "1"}, current={"purchase_id": "1"}, transaction=tx, time=None)
    del ev["time"]
    src = source("/nowhere")
    cols = [ces.spec_for_sql_type(n, t) for n, t in PURCHASE_COLS]
    d = ces.decode(bronze_of(spark, [json.dumps(ev)]), purchases(src), cols)
    (r,) = d.changes.select("sequence", "provided_columns", "transaction_id", F.col("commit_time").cast("string").alias("t")).collect()
    assert r.sequence.asDict() == {"commit_lsn": "0000002D000000100001", "change_lsn": "0" * 20, "serial": 7}
    assert r.provided_columns == ["purchase_id"]  # the other columns are absent, not NULL
    assert r.transaction_id == "0000002D000000100001"
    assert r.t == "2025-03-14 18:00:00"


# ----------------------------------------------------------------------------- quarantine & conservation


def test_bad_events_go_to_quarantine_with_the_reason(spark):
    src = source("/nowhere")
    table = purchases(src)
    cols = [ces.spec_for_sql_type(n, t) for n, t in PURCHASE_COLS]
    good = event("INS", pk={"purchase_id": "1"}, current={"purchase_id": "1", "quantity": "2"})
    bad_op = {**good, "operation": "MERGE", "id": "bad-op"}
    no_split = {k: v for k, v in good.items() if k not in ("segmentindex", "finalsegment")}
    bad_value = event("INS", pk={"purchase_id": "2"}, current={"purchase_id": "2", "quantity": "two"}, seq=2)
    no_row = event("INS", pk={"purchase_id": "3"}, seq=3)
    no_row["data"] = json.dumps({k: v for k, v in json.loads(no_row["data"]).items() if k != "eventrow"})
    other_table = event("INS", table="Customers", pk={"id": "1"}, seq=4)
    no_lsn = {**event("INS", pk={"purchase_id": "5"}, current={"purchase_id": "5"}, seq=5), "logicalid": "opaque-id"}
    empty_delete = event("DEL", pk={"purchase_id": "6"}, seq=6)
    lines = [json.dumps(e) for e in (good, bad_op, no_split, bad_value, no_row, other_table, no_lsn, empty_delete)]
    lines.append("{not json")
    bronze = bronze_of(spark, lines)
    d = ces.decode(bronze, table, cols)
    assert [r.key.purchase_id for r in d.changes.collect()] == [1]
    q = {r.raw: r for r in d.quarantine.unionByName(ces.unrouted(bronze, src, [table])).collect()}
    assert len(q) == 8

    def reason(e):
        return q[json.dumps(e)].reason

    assert "envelope: $.operation: 'MERGE' is not one of ['INS', 'UPD', 'DEL']" in reason(bad_op)
    assert "'segmentindex' is a required property" in reason(no_split) and "'splitindex'" in reason(no_split)
    assert "column quantity: cannot read [\"two\"] as int" in reason(bad_value)
    assert q[json.dumps(bad_value)].table_name == "purchases"
    assert "data: $: 'eventrow' is a required property" in reason(no_row)
    assert "ces-data $: required" in q[json.dumps(no_row)].rules
    assert "table db1.dbo.Customers is not onboarded for source ces_src" in reason(other_table)
    assert "no commit LSN" in reason(no_lsn)
    assert "DEL event with an empty eventrow.old" in reason(empty_delete)
    assert q["{not json"].reason.startswith("envelope: not JSON")
    assert all(r.bronze_record_id for r in q.values())


def test_every_bronze_record_is_accounted_for(spark):
    ev, _ = big_purchase(name_len=2000)
    segs = [json.dumps(s) for s in split(ev, 3)]
    pending, _ = big_purchase(name_len=2000, lsn="0000002C000009000001")
    pend = [json.dumps(s) for s in split(pending, 3)][:2]
    lines = [seed_line("insert"), seed_line("update"), "garbage", *segs, segs[1], *pend,
             json.dumps(event("INS", table="Other", pk={"id": "1"}))]
    src = source("/nowhere")
    table = purchases(src)
    # the redelivered segment 1 is an identical line of the same file: same record_id, still counted
    bronze = bronze_of(spark, lines)
    cols = [ces.spec_for_sql_type(n, t) for n, t in PURCHASE_COLS]
    d = ces.decode(bronze, table, cols)
    n_silver = d.changes.count()
    n_out = n_silver + d.quarantine.unionByName(ces.unrouted(bronze, src, [table])).count()
    assert n_silver == 3
    disp = {r.status: r.n for r in ces.disposition(bronze, src).groupBy("status").agg(F.count("*").alias("n")).collect()}
    assert disp == {"event": 3, "invalid_envelope": 1, "segment": 3, "duplicate_segment": 1, "pending": 2}
    assert sum(disp.values()) == bronze.count() == 10
    # silver + quarantine = invalid + timed out + events + complete groups (1)
    assert n_out == disp["invalid_envelope"] + disp["event"] + 1 == 5


# ----------------------------------------------------------------------------- schema predicates vs jsonschema


def _mutations(doc: dict, rnd: random.Random) -> dict:
    d = json.loads(json.dumps(doc))
    choice = rnd.randrange(9)
    keys = list(d)
    k = rnd.choice(keys)
    if choice == 0:
        d.pop(k)
    elif choice == 1:
        d[k] = rnd.choice([1, 1.5, True, None, [], {}, "x", "", -1, 2.0])
    elif choice == 2 and "operation" in d:
        d["operation"] = rnd.choice(["INS", "UPD", "DEL", "ins", "MERGE", ""])
    elif choice == 3:
        d["segmentindex"] = rnd.choice([0, -1, "0", 1.0, 2.5, None])
    elif choice == 4:
        d.pop("segmentindex", None), d.pop("finalsegment", None)
        if rnd.random() < 0.5:
            d.update({"splitindex": rnd.choice([0, 3, "1"]), "splittotalcnt": rnd.choice([0, 2, True])})
    elif choice == 5:
        d["time"] = rnd.choice(["2025-03-14T16:45:20.650Z", "2025-03-14", "yesterday", "2025-03-14 16:45:20+01:00"])
    elif choice == 6:
        d["type"] = rnd.choice(["com.microsoft.SQL.CES.DML.V1", "com.microsoft.SQL.CES.DML.V12", "com.example", 3])
    elif choice == 7:
        d["extra"] = "ignored"
    return d


def _data_mutations(doc: dict, rnd: random.Random) -> dict:
    d = json.loads(json.dumps(doc))
    es = d["eventsource"]
    choice = rnd.randrange(8)
    if choice == 0:
        d.pop(rnd.choice(["eventsource", "eventrow"]))
    elif choice == 1:
        es.pop(rnd.choice(["db", "schema", "tbl", "cols", "pkkey"]))
    elif choice == 2:
        es["cols"][0][rnd.choice(["name", "type", "index"])] = rnd.choice([None, 1, "", "int", -2, 0.5])
    elif choice == 3:
        es["pkkey"][0]["value"] = rnd.choice([105, "105", None, [1], {"a": 1}, True, 1.5])
    elif choice == 4:
        es["transaction"] = rnd.choice([
            {"commitlsn": "0x0000002D000000100001", "sequencenumber": 1},
            {"commitlsn": "nothex!", "sequencenumber": 1},
            {"commitlsn": "0000002D:00000010:0001", "sequencenumber": -1},
            {"sequencenumber": 1}, "tx"])
    elif choice == 5:
        d["eventrow"]["old"] = rnd.choice([{}, "{}", None, 5])
    elif choice == 6:
        es["cols"] = rnd.choice([[], "cols", [1], [{"name": "a", "type": "int", "index": 0}]])
    return d


def test_compiled_predicates_agree_with_jsonschema(spark):
    """Differential test: the Spark predicates and jsonschema call the same documents valid."""
    rnd = random.Random(20250314)
    env = json.loads(seed_line("insert"))
    data = json.loads(env["data"])
    docs = [("env", json.dumps(env)), ("data", json.dumps(data))]
    for _ in range(150):
        docs.append(("env", json.dumps(_mutations(env, rnd))))
        docs.append(("data", json.dumps(_data_mutations(data, rnd))))
    docs += [("env", "[]"), ("env", "5"), ("env", "not json"), ("data", "{}"), ("data", '"s"')]
    df = spark.createDataFrame(docs, "kind string, text string")
    v = "try_parse_json(text)"
    out = df.select(
        "kind", "text",
        F.when(F.col("kind") == "env", sc.violations(sc.load(ces.ENVELOPE_SCHEMA), v))
        .otherwise(sc.violations(sc.load(ces.DATA_SCHEMA), v)).alias("violations"),
    ).collect()
    files = {"env": ces.ENVELOPE_SCHEMA, "data": ces.DATA_SCHEMA}
    disagree = []
    n_bad = 0
    for r in out:
        try:
            ok = validator(files[r.kind]).is_valid(json.loads(r.text))
        except ValueError:
            ok = False
        n_bad += not ok
        if ok != (len(r.violations) == 0):
            disagree.append((r.kind, r.text[:200], r.violations))
    assert disagree == []
    assert 50 < n_bad < len(out) - 50  # both kinds are well represented


def test_unsupported_schema_keywords_are_refused():
    with pytest.raises(ValueError, match="not compiled"):
        sc.violations({"type": "object", "oneOf": [{}]}, "NULL")


# ----------------------------------------------------------------------------- streaming bronze


def test_streaming_bronze_ingests_each_landed_file_once(spark, tmp_path):
    """The pipeline's bronze is a streaming read of the landing folder (JSON lines and Avro side by
    side); a second run picks up only what landed since. Silver then decodes the whole of bronze."""
    landing, out, ckpt = tmp_path / "landing", tmp_path / "bronze", tmp_path / "checkpoint"
    src = source(landing, serialization="auto")

    def run():
        q = (ces.read_bronze(spark, src).writeStream.format("parquet").option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start(str(out)))
        q.awaitTermination()

    land_json(landing, "a.json", [seed_line("insert")])
    land_avro(landing, "b.avro", [json.loads(seed_line("update"))])
    run()
    assert spark.read.parquet(str(out)).count() == 2
    land_json(landing, "c.json", [seed_line("delete")])
    run()
    bronze = spark.read.parquet(str(out))
    assert sorted(Path(r.source_file).name for r in bronze.collect()) == ["a.json", "b.avro", "c.json"]
    table = purchases(src)
    cols = [ces.spec_for_sql_type(n, t) for n, t in PURCHASE_COLS]
    assert [r.op for r in ces.decode(bronze, table, cols).changes.orderBy("sequence").collect()] == [
        "INSERT", "UPDATE", "DELETE"]


def test_summary_balance_accounts_for_split_segments_and_pending_ones(spark, tmp_path):
    """`sqlcdc run`'s balance: the segments of a reassembled event ride on its one silver row;
    segments of an incomplete group (within the timeout) are pending, not missing."""
    from sqlcdc.config import load_pipeline
    from sqlcdc.summary import balances, table_path

    ev, _ = big_purchase()
    segs = split(ev, 4)
    other, _ = big_purchase(lsn="0000002C000005000009")
    pend = split(other, 3)
    landing = tmp_path / "landing"
    land_json(landing, "a.json", [segs[2], segs[0], segs[3], segs[1], segs[1], pend[0], pend[2], "not json"])
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    (base / "pipeline.yml").write_text(
        f"name: ces_balance\nsources:\n  ces_src:\n    format: ces\n    landing: {landing}\n    options: {{serialization: json}}\n")
    (base / "tables" / "purchases.yml").write_text("source: ces_src\ntable: dbo.Purchases\nkeys: [purchase_id]\n")
    cfg = load_pipeline(base / "pipeline.yml")
    src, table = cfg.sources["ces_src"], cfg.tables[0]
    wh = tmp_path / "wh"
    bronze = ces.read_bronze(spark, src, streaming=False)
    d = ces.decode(bronze, table, [ces.spec_for_sql_type(n, t) for n, t in BIG_COLS])
    for name, df in (("bronze_ces_src", bronze), ("silver_purchases", d.changes),
                     ("quarantine_ces_src", d.quarantine.unionByName(ces.unrouted(bronze, src, [table])))):
        df.write.format("delta").save(str(table_path(wh, name)))

    (b,) = balances(spark, cfg, wh)
    # 8 lines, 7 records (a line repeated in one file has one record id): 4 distinct segments of
    # one event -> its 1 silver row accounts for all 4; 2 pending segments; 1 not JSON
    assert (b.landed, b.in_silver, b.quarantined, b.pending, b.ok) == (7, 4, 1, 2, True)


def test_unknown_types_are_warned_in_silver_and_counted_in_dq_metrics(spark, tmp_path):
    """An unknown SQL Server type (geography) stays text, is not dropped, and DQ metrics count it."""
    from sqlcdc import dq_metrics, expectations
    from sqlcdc.config import load_pipeline

    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    (base / "pipeline.yml").write_text("name: types\nsources:\n  ces_src:\n    format: ces\n    landing: /nowhere\n")
    (base / "tables" / "typed.yml").write_text("source: ces_src\ntable: dbo.Typed\nname: typed\nkeys: [id]\n")
    cfg = load_pipeline(base / "pipeline.yml")
    src, table = cfg.sources["ces_src"], cfg.tables[0]
    cols = [ces.spec_for_sql_type(n, t) for n, t in TYPED_COLS]
    no_shape = {k: v for k, v in TYPED_VALUES.items() if k != "shape"}
    events = [event("INS", table="Typed", cols=TYPED_COLS, pk={"id": "1"}, current={**TYPED_VALUES, "id": "1"}),
              event("INS", table="Typed", cols=TYPED_COLS, pk={"id": "2"}, current={**no_shape, "id": "2"}, seq=2)]
    bronze = bronze_of(spark, [json.dumps(e) for e in events])
    d = ces.decode(bronze, table, cols)
    silver = expectations.passed(expectations.check(d.changes, table, cols), table)
    warned = {r.key["id"]: r.dq_warnings for r in silver.collect()}
    assert warned == {1: ["unknown_type_shape"], 2: []}  # both rows kept; only the one with a value warned

    empty_q = spark.createDataFrame([], d.quarantine.schema)
    frames = {src.bronze_table: bronze, table.silver_table: silver, src.quarantine_table: empty_q,
              dq_metrics.dropped_table(src): empty_q}
    m = dq_metrics.metrics(cfg, lambda name: frames[name], lambda t: cols)
    (row,) = m.where("rule = 'unknown_type_shape'").collect()
    assert (row.action, row.rows_checked, row.rows_warned, row.rows_passed) == ("warn", 2, 1, 1)
