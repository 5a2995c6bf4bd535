"""Native change tables (cdc.<ci>_CT) exported as CSV / Parquet / JSON lines -> silver -> gold.

The history is the hand-built change table tests/fixtures/cdc_ct/history/cdc.dbo_orders_CT.csv
(see the README next to it). Expected values below are written by hand from that history.
"""

from __future__ import annotations

import base64
import csv
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from sqlcdc import model
from sqlcdc.config import ConfigError, SourceConfig, TableConfig
from sqlcdc.formats import cdc_ct, get

HISTORY = Path(__file__).resolve().parent / "fixtures" / "cdc_ct" / "history" / "cdc.dbo_orders_CT.csv"
BINARY_COLS = ("__$start_lsn", "__$end_lsn", "__$seqval", "__$update_mask")

COLUMNS = (
    {"name": "id", "type": "int"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "decimal(10,2)"},
    {"name": "notes", "type": "string", "lob": True},
    {"name": "status", "type": "string"},
)
NAMES = [c["name"] for c in COLUMNS]


def make_source(landing: Path | str, **options) -> SourceConfig:
    return SourceConfig(name="ct", format="cdc_ct", landing=str(landing), options=options, file="pipeline.yml")


def make_table(source: SourceConfig, *, columns=COLUMNS, **options) -> TableConfig:
    return TableConfig(
        name="orders", source=source, schema="dbo", table="orders", keys=("id",), columns=tuple(columns),
        options=options, file="tables/orders.yml",
    )


def c(n: int) -> str:
    """Commit LSN of transaction n of the fixture history (20 hex digits)."""
    return f"00000027{n * 0x100:08X}0010"


def s(n: int, j: int) -> str:
    """__$seqval of row j of transaction n."""
    return f"00000027{n * 0x100:08X}{j:04X}"


def history_rows() -> list[dict]:
    with HISTORY.open(newline="") as fh:
        return [{k: (v if v != "" else None) for k, v in r.items()} for r in csv.DictReader(fh)]


def land_csv(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(HISTORY, folder / HISTORY.name)
    return folder


def land_jsonl(folder: Path, rows: list[dict] | None = None, name: str = "dbo_orders_CT.jsonl") -> Path:
    """FOR JSON style: binary as base64, NULL columns left out, numbers as numbers."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for r in rows if rows is not None else history_rows():
        doc = {}
        for k, v in r.items():
            if v is None:
                continue
            try:
                if k in BINARY_COLS:
                    doc[k] = base64.b64encode(bytes.fromhex(v[2:])).decode()
                elif k in ("__$operation", "__$command_id", "id"):
                    doc[k] = int(v)
                elif k == "amount":
                    doc[k] = float(v)
                else:
                    doc[k] = v
            except ValueError:  # deliberately bad values land as text
                doc[k] = v
        lines.append(json.dumps(doc))
    (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def land_parquet(spark, folder: Path, rows: list[dict] | None = None) -> Path:
    """Native binary LSNs/mask, in a folder named after the capture instance."""
    rows = rows if rows is not None else history_rows()
    fields = [StructField(k, BinaryType() if k in BINARY_COLS else StringType()) for k in rows[0]]
    data = [tuple(bytes.fromhex(v[2:]) if (k in BINARY_COLS and v) else v for k, v in r.items()) for r in rows]
    df = spark.createDataFrame(data, StructType(fields))
    df = df.withColumn("id", F.col("id").cast("int")).withColumn("__$operation", F.col("`__$operation`").cast("int"))
    df = df.withColumn("__$command_id", F.col("`__$command_id`").cast("int"))
    df = df.withColumn("amount", F.col("amount").cast("decimal(10,2)"))
    df.coalesce(1).write.mode("overwrite").parquet(str(folder / "dbo_orders"))
    return folder


def decode_landing(spark, landing: Path, **source_options):
    src = make_source(landing, **source_options)
    table = make_table(src)
    bronze = cdc_ct.read_bronze(spark, src)
    cols = cdc_ct.columns_for(table, src, spark)
    return bronze, cdc_ct.decode(bronze, table, cols)


def silver_rows(decoded) -> list[tuple]:
    """(op, key id, before id, after id, changed, commit, seqval, serial) sorted by sequence."""
    rows = decoded.changes.orderBy("sequence").collect()
    return [
        (
            r.op,
            r.key.id,
            r.before.id if r.before else None,
            r.after.id if r.after else None,
            r.changed_columns,
            r.sequence.commit_lsn,
            r.sequence.change_lsn,
            r.sequence.serial,
        )
        for r in rows
    ]


ALL = NAMES
# Hand-written from the fixture history.
EXPECTED_SILVER = [
    ("INSERT", 1, None, 1, ALL, c(1), s(1, 2), 1),
    ("INSERT", 2, None, 2, ALL, c(1), s(1, 3), 1),
    ("INSERT", 3, None, 3, ALL, c(1), s(1, 4), 1),
    ("UPDATE", 1, 1, 1, ["amount"], c(2), s(2, 2), 2),
    ("UPDATE", 2, 2, 2, ["notes"], c(2), s(2, 3), 2),
    ("UPDATE", 30, 3, 30, ["id"], c(3), s(3, 2), 2),
    ("DELETE", 2, 2, None, ALL, c(3), s(3, 3), 1),
    ("INSERT", 4, None, 4, ALL, c(4), s(4, 2), 1),
    ("UPDATE", 4, 4, 4, ["status"], c(4), s(4, 3), 2),
    ("UPDATE", 4, 4, 4, ["amount"], c(4), s(4, 4), 2),
    ("INSERT", 5, None, 5, ALL, c(5), s(5, 2), 1),
    ("UPDATE", 1, 1, 1, ["customer"], c(5), s(5, 3), 2),
    ("UPDATE", 1, 1, 1, ["notes"], c(5), s(5, 4), 2),
    ("DELETE", 5, 5, None, ALL, c(6), s(6, 2), 1),
]


@pytest.fixture(scope="module")
def csv_decoded(spark, tmp_path_factory):
    landing = land_csv(tmp_path_factory.mktemp("ct_csv"))
    bronze, decoded = decode_landing(spark, landing)
    return bronze, decoded


# --- pure helpers ----------------------------------------------------------------------------------


def test_registered_as_a_decoder():
    decoder = get("cdc_ct")
    assert decoder is cdc_ct.DECODER and decoder.streaming is False and decoder.bronze_streaming is False


@pytest.mark.parametrize(
    "path, expected",
    [
        ("file:///landing/cdc.dbo_orders_CT.csv", "dbo_orders"),
        ("/landing/dbo_orders_CT_0001.parquet", "dbo_orders"),
        ("/landing/dbo_orders_CT.2026-01-01.jsonl", "dbo_orders"),
        ("/landing/dbo_orders/part-00000-abc.snappy.parquet", "dbo_orders"),
        ("/landing/cdc.sales_Lines_CT/x.csv", "sales_Lines"),
        ("/landing/dbo_orders_CT.0A-14/part-00000-abc.snappy.parquet", "dbo_orders"),  # ct_jdbc windows
        ("file:///landing/sales_Order%20Lines/part-0.json", "sales_Order Lines"),
    ],
)
def test_capture_instance_from_path(spark, path, expected):
    assert cdc_ct.capture_instance_of(path) == expected
    got = spark.range(1).select(cdc_ct.capture_instance_col(F.lit(path)).alias("ci")).first().ci
    assert got == expected


def test_update_mask_follows_fn_cdc_is_bit_set_byte_order(spark):
    # sys.fn_cdc_is_bit_set: SUBSTRING(mask, DATALENGTH(mask) - ((p-1)/8), 1) & POWER(2, (p-1)%8):
    # ordinals 1..8 live in the LAST byte. Ten columns -> a two-byte mask.
    ten = [cdc_ct.ColumnSpec(f"c{i}", "int", ordinal=i) for i in range(1, 11)]
    df = spark.createDataFrame([("0x0201",), ("0x0102",), ("0x03FF",), ("0x04",), ("",)], "m string")
    got = df.select(cdc_ct.changed_from_mask(cdc_ct.binary_hex(F.col("m")), ten).alias("ch")).collect()
    assert [r.ch for r in got] == [
        ["c1", "c10"],  # last byte 0x01 -> ordinal 1; first byte 0x02 -> ordinal 10
        ["c2", "c9"],
        [f"c{i}" for i in range(1, 11)],  # an insert's mask: every bit
        ["c3"],  # a one-byte mask only covers ordinals 1..8
        [],
    ]


def test_mask_in_base64_and_bare_hex(spark):
    five = [cdc_ct.ColumnSpec(n, "string", ordinal=i) for i, n in enumerate(NAMES, 1)]
    df = spark.createDataFrame([("CA==",), ("08",), ("0x08",)], "m string")
    got = df.select(cdc_ct.changed_from_mask(cdc_ct.binary_hex(F.col("m")), five).alias("ch")).collect()
    assert [r.ch for r in got] == [["notes"], ["notes"], ["notes"]]


def test_lsn_spellings(spark):
    df = spark.createDataFrame(
        [("0x00000027000001000010",), ("00000027000001000010",), ("AAAAJwAAAQAAEA==",), ("0xZZ",)], "v string"
    )
    got = [r.l for r in df.select(cdc_ct.lsn_text(F.col("v")).alias("l")).collect()]
    assert got == [c(1), c(1), c(1), None]


def test_columns_for_reads_config_and_ordinals():
    src = make_source("/nowhere")
    cols = cdc_ct.columns_for(make_table(src), src)
    assert [(x.name, x.spark_type, x.lob, x.ordinal) for x in cols] == [
        ("id", "int", False, 1), ("customer", "string", False, 2), ("amount", "decimal(10,2)", False, 3),
        ("notes", "string", True, 4), ("status", "string", False, 5),
    ]
    sub = cdc_ct.columns_for(make_table(src, column_ordinals={"status": 9}), src)
    assert sub[-1].ordinal == 9
    blob = cdc_ct.columns_for(make_table(src, columns=COLUMNS + ({"name": "doc", "type": "varbinary"},)), src)
    assert (blob[-1].spark_type, blob[-1].encoding) == ("binary", "hex")
    # SQL Server type names (the table's own, as a hand-off with Debezium shares them) read as text
    sql = cdc_ct.columns_for(make_table(src, columns=COLUMNS + tuple(
        {"name": n, "type": t} for n, t in (("seen", "datetime2(6)"), ("on", "bit"), ("uid", "uniqueidentifier"),
                                            ("cash", "money"), ("n", "numeric(5)"), ("day", "date"),
                                            ("f", "float"), ("r", "real")))), src)
    assert [(x.spark_type, x.encoding) for x in sql[len(COLUMNS):]] == [
        ("timestamp_ntz", "text"), ("boolean", "text"), ("string", "text"), ("decimal(19,4)", "text"),
        ("decimal(5,0)", "text"), ("date", "text"), ("double", "text"), ("float", "text")]  # SQL Server's float: 8 bytes


def test_columns_for_says_what_is_wrong():
    src = make_source("/nowhere")
    with pytest.raises(ConfigError, match=r"tables/orders.yml:1: columns: table dbo.orders \(format cdc_ct\) needs"):
        cdc_ct.columns_for(make_table(src, columns=()), src)
    with pytest.raises(ConfigError, match=r"column_ordinals: 'nope' is not in columns"):
        cdc_ct.columns_for(make_table(src, column_ordinals={"nope": 3}), src)
    with pytest.raises(ConfigError, match=r"ordinal 1 given to both 'id' and 'status'"):
        cdc_ct.columns_for(make_table(src, column_ordinals={"status": 1}), src)


# --- bronze + silver ---------------------------------------------------------------------------------


def test_bronze_keeps_each_row_as_json_text(csv_decoded):
    bronze, _ = csv_decoded
    assert bronze.columns == list(model.BRONZE_COLUMNS)
    rows = bronze.collect()
    assert len(rows) == 21
    first = json.loads(sorted(rows, key=lambda r: r.value)[0].value)
    assert first["__$start_lsn"] == "0x00000027000001000010" and first["__$end_lsn"] is None
    assert all(r.source_file.endswith("cdc.dbo_orders_CT.csv") and r.ingest_time is not None for r in rows)


def test_silver_from_csv_ops_keys_changed_columns_and_sequence(csv_decoded):
    _, decoded = csv_decoded
    assert decoded.quarantine.count() == 0
    assert silver_rows(decoded) == EXPECTED_SILVER
    assert decoded.changes.columns == list(model.CHANGE_COLUMNS)


def test_update_pairs_carry_both_images_typed(csv_decoded):
    _, decoded = csv_decoded
    pk = decoded.changes.where((F.col("op") == "UPDATE") & (F.col("key.id") == 30)).first()
    assert pk.before.asDict() == {"id": 3, "customer": "carol", "amount": Decimal("30.00"), "notes": "note three", "status": "new"}
    assert pk.after.asDict() == {"id": 30, "customer": "carol", "amount": Decimal("30.00"), "notes": "note three", "status": "new"}
    assert pk.change_id == f"cdc_ct:dbo_orders:{c(3)}:{s(3, 2)}:U"
    assert (pk.source_schema, pk.source_table, pk.table_name, pk.transaction_id) == ("dbo", "orders", "orders", c(3))


def test_lob_null_in_operation_3_is_not_provided(csv_decoded):
    _, decoded = csv_decoded
    ch = {(r.sequence.commit_lsn, r.sequence.change_lsn): r for r in decoded.changes.collect()}
    # tx 2: amount changed, notes did not: op 3 has notes NULL -> before.notes is the unchanged value
    amount = ch[(c(2), s(2, 2))]
    assert amount.before.notes == "note one" and amount.after.notes == "note one"
    assert amount.provided_columns is None  # the after image carries every column
    # tx 2: notes changed from a real NULL: op 3's NULL is the old value
    notes = ch[(c(2), s(2, 3))]
    assert notes.before.notes is None and notes.after.notes == "a long note"
    # tx 4: dave's notes are NULL and unchanged in op 4 too -> left out of provided_columns
    dave = ch[(c(4), s(4, 3))]
    assert dave.after.notes is None
    assert dave.provided_columns == ["id", "customer", "amount", "status"]


def test_row_filter_all_takes_an_update_as_its_after_image_alone(spark, tmp_path):
    """An export of fn_cdc_get_all_changes_<ci>(..., N'all') has no operation 3 (seed 001: the update
    returns its final row only). By default each lone 4 is quarantined (a half is missing); with
    `row_filter: all` it is the update, without a before image, at the sequence the pair would have."""
    landing = land_jsonl(tmp_path / "all", [r for r in history_rows() if r["__$operation"] != "3"])
    _, strict = decode_landing(spark, landing)
    reasons = [r.reason for r in strict.quarantine.collect()]
    assert len(reasons) == sum(op == "UPDATE" for op, *_ in EXPECTED_SILVER) == 7
    assert all("has no before-image (operation 3)" in r and "row filter 'all'" in r for r in reasons)

    _, decoded = decode_landing(spark, landing, row_filter="all")
    assert decoded.quarantine.count() == 0
    # the hand-written silver of the whole history, every update without its before image
    assert silver_rows(decoded) == [(op, k, None if op == "UPDATE" else b, a, ch, cl, sv, n)
                                    for op, k, b, a, ch, cl, sv, n in EXPECTED_SILVER]
    dave = [r for r in decoded.changes.collect() if r.key.id == 4 and r.op == "UPDATE"]
    assert {r.after.status for r in dave} == {"paid"} and all(r.before is None for r in dave)
    # a LOB the update did not provide is still left out (dave's notes, NULL with a clear mask bit)
    assert all(r.provided_columns == ["id", "customer", "amount", "status"] for r in dave)
    # the documented limit: without the old image, the key change 3 -> 30 is an upsert of 30 only
    frame = model.apply_frame(decoded.changes, NAMES, ["id"])
    assert sorted((r.id, r._op) for r in frame.where("id IN (3, 30)").collect()) == [(3, "UPSERT"), (30, "UPSERT")]
    # the option's values are the SQL Server row filters; another is refused when the config loads
    from sqlcdc.diagnostics import options_problems

    (problem,) = options_problems({"row_filter": "all changes"}, get("cdc_ct").options, Path("pipeline.yml"), {})
    assert problem.startswith("pipeline.yml:1: options.row_filter: 'all changes' is not one of")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_parquet_and_json_lines_give_the_same_silver(spark, tmp_path, csv_decoded, fmt):
    if fmt == "parquet":
        landing = land_parquet(spark, tmp_path)
    else:
        landing = land_jsonl(tmp_path)
    _, decoded = decode_landing(spark, landing)
    assert decoded.quarantine.count() == 0
    assert silver_rows(decoded) == EXPECTED_SILVER

    def images(d):
        return sorted(
            (r.change_id, r.before and r.before.asDict(), r.after and r.after.asDict(), r.provided_columns)
            for r in d.changes.collect()
        )

    assert images(decoded) == images(csv_decoded[1])


def test_mixed_formats_in_one_landing_and_forced_format(spark, tmp_path):
    rows = history_rows()
    land_parquet(spark, tmp_path, rows[:10])
    land_jsonl(tmp_path, rows[10:])
    _, decoded = decode_landing(spark, tmp_path)
    assert silver_rows(decoded) == EXPECTED_SILVER
    # an extension that says nothing is skipped, unless file_format says what every file is
    # (glob narrows the files it applies to)
    land_jsonl(tmp_path / "extra", rows[:3], name="dbo_orders_CT.export.txt")
    assert cdc_ct.read_bronze(spark, make_source(tmp_path)).count() == 21
    forced = cdc_ct.read_bronze(spark, make_source(tmp_path, file_format="jsonl", glob="*.txt"))
    assert forced.count() == 3


def test_the_same_rows_landed_twice_are_one_change(spark, tmp_path):
    land_csv(tmp_path)
    land_jsonl(tmp_path, history_rows()[3:7], name="dbo_orders_CT.again.jsonl")
    _, decoded = decode_landing(spark, tmp_path)
    assert decoded.quarantine.count() == 0
    assert silver_rows(decoded) == EXPECTED_SILVER


def test_lone_update_halves_go_to_quarantine(spark, tmp_path):
    rows = history_rows()
    # drop the op 4 of "update 1 amount" and the op 3 of "update 2 notes"
    kept = [r for i, r in enumerate(rows) if i not in (4, 5)]
    land_jsonl(tmp_path, kept)
    _, decoded = decode_landing(spark, tmp_path)
    q = sorted(r.reason for r in decoded.quarantine.collect())
    assert len(q) == 2
    assert q[0].startswith(
        f"update after-image (__$operation 4) at __$start_lsn 0x{c(2)}, __$seqval 0x{s(2, 3)} has no before-image"
    )
    assert q[1].startswith(
        f"update before-image (__$operation 3) at __$start_lsn 0x{c(2)}, __$seqval 0x{s(2, 2)} has no after-image"
    )
    assert all("capture instance dbo_orders, file file:" in r for r in q)
    assert decoded.changes.count() == len(EXPECTED_SILVER) - 2


def test_unreadable_rows_go_to_quarantine_with_the_reason(spark, tmp_path):
    good = history_rows()[0]
    bad_lsn = dict(good, **{"__$start_lsn": "0xNOTHEX"})
    bad_op = dict(good, **{"__$operation": "7", "__$seqval": "0x00000027000001000009"})
    null_key = dict(good, **{"id": None, "__$seqval": "0x00000027000001000008"})
    bad_amount = dict(good, **{"amount": "ten", "__$seqval": "0x00000027000001000007"})
    land_jsonl(tmp_path, [good, bad_lsn, bad_op, null_key, bad_amount])
    with (tmp_path / "dbo_orders_CT.jsonl").open("a") as fh:
        fh.write("this is not json\n")
    _, decoded = decode_landing(spark, tmp_path)
    assert decoded.changes.count() == 1
    reasons = sorted(r.reason.split(" (capture instance")[0] for r in decoded.quarantine.collect())
    assert reasons == sorted(
        [
            "__$start_lsn 0xNOTHEX is not an LSN (binary(10), 0x hex or base64)",
            "__$operation 7 is not 1, 2, 3 or 4",
            "key column id is NULL",
            'column amount: cannot read ["ten"] as decimal(10,2) (text)',
            "not a JSON object",
        ]
    )


def test_command_id_order_wins_over_seqval(spark, tmp_path):
    # One transaction updates row 1 twice; the change table's seqvals run against the commands
    # (the ordering problem __$command_id was added for). Command order must win.
    start = "0x00000027000009000010"
    rows = [
        dict(zip(NAMES, ("1", "alice", "10.00", "n", "new"))) | {"__$start_lsn": "0x00000027000001000010", "__$seqval": "0x00000027000001000002", "__$operation": "2", "__$update_mask": "0x1F", "__$command_id": "1"},
        dict(zip(NAMES, ("1", "alice", "10.00", None, "new"))) | {"__$start_lsn": start, "__$seqval": "0x00000027000009000005", "__$operation": "3", "__$update_mask": "0x04", "__$command_id": "1"},
        dict(zip(NAMES, ("1", "alice", "11.00", "n", "new"))) | {"__$start_lsn": start, "__$seqval": "0x00000027000009000005", "__$operation": "4", "__$update_mask": "0x04", "__$command_id": "1"},
        dict(zip(NAMES, ("1", "alice", "11.00", None, "new"))) | {"__$start_lsn": start, "__$seqval": "0x00000027000009000003", "__$operation": "3", "__$update_mask": "0x04", "__$command_id": "2"},
        dict(zip(NAMES, ("1", "alice", "12.00", "n", "new"))) | {"__$start_lsn": start, "__$seqval": "0x00000027000009000003", "__$operation": "4", "__$update_mask": "0x04", "__$command_id": "2"},
    ]
    land_jsonl(tmp_path, rows)
    _, decoded = decode_landing(spark, tmp_path)
    got = [(r.after.amount, r.sequence.change_lsn, r.sequence.serial) for r in decoded.changes.orderBy("sequence").collect()]
    assert got == [
        (Decimal("10.00"), "00000027000001000002", 1),
        (Decimal("11.00"), "00000027000009000003", 2),  # command 1 takes the lower position
        (Decimal("12.00"), "00000027000009000005", 2),  # command 2 ends last: amount 12 wins
    ]
    # (That the positions are dealt without a second read of bronze: test_parse_once's READS bound.)


def test_unrouted_names_the_capture_instance_and_file(spark, tmp_path):
    land_csv(tmp_path)
    land_jsonl(tmp_path / "dbo_customers", history_rows()[:2], name="part-0.json")
    src = make_source(tmp_path)
    bronze = cdc_ct.read_bronze(spark, src)
    q = cdc_ct.unrouted(bronze, src, [make_table(src)]).collect()
    assert len(q) == 2
    assert q[0].reason.startswith("capture instance dbo_customers (file file:")
    assert q[0].reason.endswith("is not onboarded in source ct (onboarded: dbo_orders)")
    assert q[0].rules == ["routing"]


# --- gold: SCD1 / SCD2 ------------------------------------------------------------------------------

from sqlcdc.gold import END_AT, START_AT, ApplyChangesSpec, scd1, scd2  # noqa: E402


def gold(changes, columns=NAMES):
    frame = model.apply_frame(changes, columns, ["id"])
    spec1 = ApplyChangesSpec(keys=["id"], table="orders")
    spec2 = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, table="orders")
    spec1.validate(frame.schema)
    current = sorted(tuple(r) for r in scd1(frame, spec1).collect())
    history = sorted(
        ((tuple(r[c] for c in columns), tuple(r[START_AT]), tuple(r[END_AT]) if r[END_AT] else None)
         for r in scd2(frame, spec2).collect()),
        key=repr,
    )
    return current, history


D = Decimal
# What cdc.fn_cdc_get_net_changes_dbo_orders(min, max, N'all') returns for the fixture, applied to an
# empty target: one row per surviving key with its final image. 2 and 5 were inserted and deleted
# inside the window (nothing left), 3 became 30, 1 and 4 were updated several times (last image).
NET_CHANGES_TARGET = [
    (1, "alicia", D("15.00"), "note one b", "new"),
    (4, "dave", D("45.00"), None, "paid"),
    (30, "carol", D("30.00"), "note three", "new"),
]


def q(n: int, j: int, serial: int) -> tuple:
    return (c(n), s(n, j), serial)


EXPECTED_SCD2 = sorted(
    [
        ((1, "alice", D("10.00"), "note one", "new"), q(1, 2, 1), q(2, 2, 2)),
        ((1, "alice", D("15.00"), "note one", "new"), q(2, 2, 2), q(5, 3, 2)),
        ((1, "alicia", D("15.00"), "note one", "new"), q(5, 3, 2), q(5, 4, 2)),
        ((1, "alicia", D("15.00"), "note one b", "new"), q(5, 4, 2), None),
        ((2, "bob", D("20.00"), None, "new"), q(1, 3, 1), q(2, 3, 2)),
        ((2, "bob", D("20.00"), "a long note", "new"), q(2, 3, 2), q(3, 3, 1)),
        ((3, "carol", D("30.00"), "note three", "new"), q(1, 4, 1), q(3, 2, 2)),
        ((30, "carol", D("30.00"), "note three", "new"), q(3, 2, 2), None),
        ((4, "dave", D("40.00"), None, "new"), q(4, 2, 1), q(4, 3, 2)),
        ((4, "dave", D("40.00"), None, "paid"), q(4, 3, 2), q(4, 4, 2)),
        ((4, "dave", D("45.00"), None, "paid"), q(4, 4, 2), None),
        ((5, "erin", D("50.00"), "temp", "new"), q(5, 2, 1), q(6, 2, 1)),
    ],
    key=repr,
)


@pytest.fixture(scope="module")
def ct_gold(csv_decoded):
    return gold(csv_decoded[1].changes)


def test_scd1_equals_net_changes_applied_to_the_target(ct_gold):
    current, _ = ct_gold
    assert current == NET_CHANGES_TARGET


def test_scd2_history_with_lsn_validity(ct_gold):
    _, history = ct_gold
    assert history == EXPECTED_SCD2


def test_net_changes_per_window(spark, tmp_path):
    """Windows applied one after another end where one big window ends (net changes compose)."""
    rows = history_rows()
    land_jsonl(tmp_path / "w1", rows[:10], name="dbo_orders_CT.w1.jsonl")  # transactions 1-3
    land_jsonl(tmp_path / "w2", rows[10:], name="dbo_orders_CT.w2.jsonl")  # transactions 4-6
    _, first = decode_landing(spark, tmp_path / "w1")
    current, _ = gold(first.changes)
    assert current == [
        (1, "alice", D("15.00"), "note one", "new"),
        (30, "carol", D("30.00"), "note three", "new"),
    ]
    _, both = decode_landing(spark, tmp_path)
    assert gold(both.changes)[0] == NET_CHANGES_TARGET


# --- the same history via Debezium ------------------------------------------------------------------

DEBEZIUM_COLUMNS = (
    {"name": "id", "type": "int32"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "decimal(10,2)"},
    {"name": "notes", "type": "string"},
    {"name": "status", "type": "string"},
)


def dbz_lsn(hex20: str) -> str:
    return f"{hex20[:8]}:{hex20[8:16]}:{hex20[16:]}".lower()


def dbz_decimal(text: str | None) -> str | None:
    """Kafka Connect Decimal (decimal.handling.mode=precise): base64 big-endian unscaled bytes."""
    if text is None:
        return None
    unscaled = int(D(text).scaleb(2))
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()


def dbz_image(r: dict | None) -> dict | None:
    if r is None:
        return None
    return {"id": int(r["id"]), "customer": r["customer"], "amount": dbz_decimal(r["amount"]),
            "notes": r["notes"], "status": r["status"]}


def debezium_history(rows: list[dict]) -> list[str]:
    """What Debezium's SQL Server connector emits reading these change-table rows.

    Per SqlServerStreamingChangeEventSource: rows in (commit LSN, seqval, operation) order; an
    operation 3 is consumed with its 4 (event count 2); ``event_serial_no`` counts the rows consumed at
    one (commit_lsn, change_lsn) position. A 3+4 pair whose key changed is emitted as delete(old key)
    + tombstone + create(new key), both with the pair's offset. Deletes are followed by a tombstone.
    """
    out, position, serial, pending_old = [], None, 0, None
    for r in sorted(rows, key=lambda r: (r["__$start_lsn"], r["__$seqval"], int(r["__$operation"]))):
        op = int(r["__$operation"])
        if op == 3:
            pending_old = r
            continue
        pos = (r["__$start_lsn"], r["__$seqval"])
        count = 2 if op == 4 else 1
        serial = serial + count if pos == position else count
        position = pos
        src = {
            "version": "2.7.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1767261600000,
            "snapshot": "false", "db": "shop", "schema": "dbo", "table": "orders",
            "change_lsn": dbz_lsn(r["__$seqval"][2:]), "commit_lsn": dbz_lsn(r["__$start_lsn"][2:]),
            "event_serial_no": serial,
        }

        def ev(o, before, after):
            return json.dumps({"before": dbz_image(before), "after": dbz_image(after), "source": src, "op": o,
                               "ts_ms": 1767261603000})

        if op == 2:
            out.append(ev("c", None, r))
        elif op == 1:
            out += [ev("d", r, None), "null"]
        elif pending_old["id"] != r["id"]:
            out += [ev("d", pending_old, None), "null", ev("c", None, r)]
        else:
            out.append(ev("u", pending_old, r))
    return out


def test_ct_and_debezium_give_identical_gold(spark, tmp_path):
    from sqlcdc.formats import debezium

    rows = history_rows()
    # plus a primary-key change the change table recorded as delete + insert at one position
    # (Debezium: serial 1 and 2): 4 -> 40
    split = [
        dict(rows[14], **{"__$start_lsn": "0x00000027000007000010", "__$seqval": "0x00000027000007000002",
                          "__$operation": "1", "__$update_mask": "0x1F", "__$command_id": "1"}),
        dict(rows[14], **{"__$start_lsn": "0x00000027000007000010", "__$seqval": "0x00000027000007000002",
                          "__$operation": "2", "__$update_mask": "0x1F", "__$command_id": "1", "id": "40"}),
    ]
    rows = rows + split
    land_jsonl(tmp_path / "ct", rows)
    _, ct = decode_landing(spark, tmp_path / "ct")
    assert ct.quarantine.count() == 0

    (tmp_path / "dbz").mkdir()
    (tmp_path / "dbz" / "server1.dbo.orders.jsonl").write_text("\n".join(debezium_history(rows)) + "\n")
    dsrc = SourceConfig(name="dbz", format="debezium", landing=str(tmp_path / "dbz"), file="pipeline.yml")
    dtable = TableConfig(name="orders", source=dsrc, schema="dbo", table="orders", keys=("id",),
                         columns=DEBEZIUM_COLUMNS, file="tables/orders.yml")
    dbronze = debezium.read_bronze(spark, dsrc, streaming=False)
    dz = debezium.decode(dbronze, dtable, debezium.columns_for(dtable, dsrc, spark))
    assert dz.quarantine.count() == 0

    ct_current, ct_history = gold(ct.changes)
    dz_current, dz_history = gold(dz.changes)
    assert ct_current == dz_current
    assert ct_history == dz_history
    # and both are the hand-written expectation, with 4 moved to 40 in transaction 7
    assert ct_current == sorted(NET_CHANGES_TARGET[:1] + [(30,) + NET_CHANGES_TARGET[2][1:], (40,) + NET_CHANGES_TARGET[1][1:]])
    closed4 = [h for h in ct_history if h[0][0] == 4 and h[2] == q(7, 2, 1)]
    opened40 = [h for h in ct_history if h[0][0] == 40]
    assert len(closed4) == 1 and [h[1:] for h in opened40] == [(q(7, 2, 2), None)]


def test_update_halves_in_different_files_and_any_row_order_still_pair(spark, tmp_path):
    rows = history_rows()
    odd, even = rows[1::2], rows[0::2]  # every 3+4 pair is split over the two files
    land_jsonl(tmp_path, list(reversed(odd)), name="dbo_orders_CT.b.jsonl")
    land_csv_rows(tmp_path / "dbo_orders", list(reversed(even)))
    _, decoded = decode_landing(spark, tmp_path)
    assert decoded.quarantine.count() == 0
    assert silver_rows(decoded) == EXPECTED_SILVER


def land_csv_rows(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "part-0.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows([{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
    return folder


def test_binary_columns_in_hex_and_base64(spark, tmp_path):
    cols = COLUMNS + ({"name": "tag", "type": "varbinary"},)
    row = dict(history_rows()[0])
    hex_row = dict(row, tag="0x00001F")
    b64_row = dict(row, tag="AAAf", **{"__$seqval": "0x00000027000001000009"})
    for sub, r, opts in (("hex", hex_row, {}), ("b64", b64_row, {"binary_text": "base64"})):
        land_jsonl(tmp_path / sub, [r])
        src = make_source(tmp_path / sub, **opts)
        table = make_table(src, columns=cols)
        decoded = cdc_ct.decode(cdc_ct.read_bronze(spark, src), table, cdc_ct.columns_for(table, src))
        got = decoded.changes.first()
        assert bytes(got.after.tag) == b"\x00\x00\x1f", sub
        assert got.changed_columns == NAMES  # mask 0x1F: ordinals 1-5, not the 6th


def test_empty_and_missing_landing(spark, tmp_path):
    assert cdc_ct.read_bronze(spark, make_source(tmp_path)).count() == 0
    with pytest.raises(FileNotFoundError, match=r"pipeline.yml: sources.ct.landing: folder .*/nope does not exist"):
        cdc_ct.read_bronze(spark, make_source(tmp_path / "nope"))
    with pytest.raises(ConfigError, match=r"options.file_format: required for a remote landing"):
        cdc_ct.read_bronze(spark, make_source("abfss://landing@acct.dfs.core.windows.net/ct"))
