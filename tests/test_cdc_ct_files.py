"""Change-table exports file by file (issue 16): every file is read with its own header/schema, a
file or CSV line that cannot be read is quarantined with a reason naming it, nothing is lost, and
rows landed twice are counted (``duplicate``) or, when they differ, quarantined (``conflict``).

The rows are the hand-built history of tests/fixtures/cdc_ct (see test_cdc_ct.py), written in the
shapes exports take: CSV with a header (in any column order), Parquet (typed, or all text), JSON lines.
"""

from __future__ import annotations

import bz2
import csv
import gzip
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from sqlcdc.formats import _ct_exports, base, cdc_ct
from sqlcdc.formats.base import record_id
from test_cdc_ct import (
    BINARY_COLS, EXPECTED_SILVER, c, decode_landing, history_rows, land_jsonl, make_source, make_table, s, silver_rows,
)

HEADER = list(history_rows()[0])  # the fixture's column order
SHUFFLED = ["status", "__$operation", "notes", "id", "__$seqval", "amount", "__$command_id", "customer",
            "__$update_mask", "__$end_lsn", "__$start_lsn"]


def write_csv(path: Path, rows: list[dict], header: list[str] = HEADER, extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows([{k: ("" if r.get(k) is None else r[k]) for k in header} for r in rows])
        fh.write(extra)
    return path


def row(n: int, j: int, op: int, id_: int, customer: str, amount: str = "1.00", notes: str | None = "n") -> dict:
    """A change-table row of transaction n (an LSN after the fixture's six), as exported to CSV."""
    return {"__$start_lsn": "0x" + c(n), "__$end_lsn": None, "__$seqval": "0x" + s(n, j), "__$operation": str(op),
            "__$update_mask": "0x1F", "id": str(id_), "customer": customer, "amount": amount, "notes": notes,
            "status": "new", "__$command_id": "1"}


def csv_line(r: dict) -> str:
    return ",".join("" if r[k] is None else r[k] for k in HEADER)


def after_images(rows: list[dict]) -> set[tuple]:
    """change_id -> after image, straight from change-table rows (what silver must say)."""
    out = set()
    for r in rows:
        op = int(r["__$operation"])
        if op in (2, 4):
            code = "U" if op == 4 else "2"
            out.add((f"cdc_ct:dbo_orders:{r['__$start_lsn'][2:]}:{r['__$seqval'][2:]}:{code}",
                     int(r["id"]), r["customer"], Decimal(r["amount"]), r["notes"], r["status"]))
    return out


def got_after_images(decoded) -> set[tuple]:
    return {(r.change_id, r.after.id, r.after.customer, r.after.amount, r.after.notes, r.after.status)
            for r in decoded.changes.where(F.col("after").isNotNull()).collect()}


def quarantined(decoded) -> list[tuple[str, str]]:
    """(file name, reason without the capture-instance/file suffix), sorted."""
    return sorted((r.bronze_file.rsplit("/", 1)[-1], r.reason.split(" (capture instance dbo_orders, file ")[0])
                  for r in decoded.quarantine.collect())


# --- CSV: a header per file -----------------------------------------------------------------------

QUOTE_ROWS = [row(8, 2, 2, 7, "gus"), row(9, 2, 2, 8, "hal"), row(10, 2, 2, 9, "ida"), row(11, 2, 2, 10, "jo"),
              row(12, 2, 2, 11, "kim"), row(13, 2, 2, 12, "lee")]


@pytest.fixture(scope="module")
def csv_landing(spark, tmp_path_factory):
    """One landing, decoded once: good exports in two column orders, and files that cannot be read."""
    land = tmp_path_factory.mktemp("ct_csv_files")
    rows = history_rows()
    write_csv(land / "dbo_orders_CT_a.csv", rows[:10])
    write_csv(land / "dbo_orders_CT_b.csv", rows[10:], header=SHUFFLED)  # another column order
    # no header: its first line is a data row
    (land / "dbo_orders_CT_garbage.csv").write_text("\n".join(csv_line(r) for r in rows[:2]) + "\n")
    write_csv(land / "dbo_orders_CT_unknown.csv", rows[:1], header=HEADER[:-1] + ["__$command"])
    write_csv(land / "dbo_orders_CT_noamount.csv", [row(16, 2, 2, 14, "ned")], header=[h for h in HEADER if h != "amount"])
    write_csv(land / "dbo_orders_CT_10:00.csv", [row(7, 2, 2, 6, "fay")])  # ':' stopped Hadoop's checksum FS
    blank_first = write_csv(land / "dbo_orders_CT_blank.csv", [row(17, 2, 2, 15, "ola")])  # empty lines, then the header
    blank_first.write_text("\n\r\n" + blank_first.read_text())
    write_csv(land / "dbo_orders_CT_[1].csv", [row(14, 2, 2, 13, "max")])  # glob characters are a name
    bz = write_csv(land / "dbo_orders_CT_bz.csv", [row(18, 2, 2, 16, "bo")])  # .csv.bz2 was skipped until 2026-12-06
    bz.with_suffix(".csv.bz2").write_bytes(bz2.compress(bz.read_bytes()))
    bz.unlink()
    # gzip cut short after its header and first rows (Spark read the header, then failed the run)
    whole = gzip.compress(("\n".join([",".join(HEADER)] + [csv_line(row(20 + i, 2, 2, 20 + i, "pat")) for i in range(400)])
                           + "\n").encode())
    (land / "dbo_orders_CT_cut.csv.gz").write_bytes(whole[: len(whole) // 2])
    (land / "dbo_orders_CT_cut.jsonl.gz").write_bytes(gzip.compress(b'{"__$start_lsn": "0x00"}\n')[:-9])
    # line 3 opens a quote it never closes; line 5-6 is a good value spanning two lines; line 8 is short
    lines = [csv_line(QUOTE_ROWS[0]),
             csv_line(QUOTE_ROWS[1]).replace(",hal,", ',"hal,'),
             csv_line(QUOTE_ROWS[2]),
             csv_line(QUOTE_ROWS[3]).replace(",n,", ',"two\nlines",'),
             csv_line(QUOTE_ROWS[4]),
             "0x" + c(15) + ",,0x" + s(15, 2) + ",2",
             csv_line(QUOTE_ROWS[5])]
    write_csv(land / "dbo_orders_CT_quote.csv", [], extra="\n".join(lines) + "\n")
    bronze, decoded = decode_landing(spark, land)
    return bronze.cache(), decoded, rows


def test_each_csv_export_is_read_with_its_own_header(csv_landing):
    _, decoded, rows = csv_landing
    got = silver_rows(decoded)
    # the two history exports (columns in two orders) give the hand-written silver, values unswapped
    assert [g for g in got if g[5] <= c(6)] == EXPECTED_SILVER
    assert after_images(rows) <= got_after_images(decoded)


def test_files_that_cannot_be_read_are_quarantined_as_files(csv_landing):
    _, decoded, _ = csv_landing
    q = [x for x in quarantined(decoded) if not x[0].endswith("quote.csv")]
    assert q == [
        ("dbo_orders_CT_cut.csv.gz",
         "file dbo_orders_CT_cut.csv.gz cannot be read: not a whole gzip file (EOFError: Compressed file ended "
         "before the end-of-stream marker was reached)"),
        ("dbo_orders_CT_cut.jsonl.gz",
         "file dbo_orders_CT_cut.jsonl.gz cannot be read: not a whole gzip file (EOFError: Compressed file ended "
         "before the end-of-stream marker was reached)"),
        ("dbo_orders_CT_garbage.csv",
         "file dbo_orders_CT_garbage.csv cannot be mapped to change-table columns: its header lacks __$start_lsn, "
         "__$operation (it has '0x00000027000001000010', '', '0x00000027000001000002', '2', '0x1F', '1', "
         "...): not a change-table export, or its first line is not a header"),
        ("dbo_orders_CT_noamount.csv", "column amount is not in the file's header or schema"),
        ("dbo_orders_CT_unknown.csv",
         "file dbo_orders_CT_unknown.csv cannot be mapped to change-table columns: its header has '__$command', "
         "which is not a change-table column (__$start_lsn, __$end_lsn, __$seqval, __$operation, __$update_mask, "
         "__$command_id)"),
    ]
    rows = {r.bronze_file.rsplit("/", 1)[-1]: r for r in decoded.quarantine.collect()}
    assert rows["dbo_orders_CT_garbage.csv"].raw.startswith('{"__sqlcdc_unreadable": "file dbo_orders_CT_garbage.csv')
    assert "0x00000027000001000010,,0x00000027000001000002,2,0x1F,1,alice" in rows["dbo_orders_CT_garbage.csv"].raw
    assert rows["dbo_orders_CT_garbage.csv"].rules == ["decode"]


def test_file_names_with_glob_characters_or_a_colon_are_read(csv_landing):
    _, decoded, _ = csv_landing
    (got,) = [r for r in decoded.changes.collect() if r.sequence.commit_lsn == c(14)]
    assert (got.op, got.after.id, got.after.customer) == ("INSERT", 13, "max")
    assert got.bronze_file.endswith("dbo_orders_CT_%5B1%5D.csv")
    (got,) = [r for r in decoded.changes.collect() if r.sequence.commit_lsn == c(7)]
    assert (got.op, got.after.id, got.after.customer) == ("INSERT", 6, "fay")
    assert got.bronze_file.endswith("dbo_orders_CT_10:00.csv")


def test_an_unterminated_quote_swallows_nothing(csv_landing):
    bronze, decoded, _ = csv_landing
    landed = {r.after.id for r in decoded.changes.collect() if r.sequence.commit_lsn >= c(8)}
    assert landed == {7, 9, 11, 12, 13, 15, 16}  # 13: the [1] file; 15: the file with empty lines first; 16: .csv.bz2
    q = [x[1] for x in quarantined(decoded) if x[0] == "dbo_orders_CT_quote.csv"]
    assert q == [
        'line 3: a quote (") is not closed where the record should end (unterminated or stray quote); lines 3-5 '
        "would have been read as one value: they are read line by line instead",
        "line 5: not a CSV record on its own (it follows the quote left open at line 3)",
        'line 6: a quote (") is not closed where the record should end (unterminated or stray quote); lines 6-9 '
        "would have been read as one value: they are read line by line instead",
        "line 8: the record does not have the 11 fields of the file's header",
    ]
    # every line of the file is accounted for: 5 in silver, 4 in quarantine, besides the header
    quote_rows = bronze.where(F.col("source_file").endswith("quote.csv")).count()
    assert quote_rows == 8


def test_csv_reasons_name_the_file(csv_landing):
    _, decoded, _ = csv_landing
    for r in decoded.quarantine.collect():
        assert r.reason.endswith(f"(capture instance dbo_orders, file {r.bronze_file})")
        assert r.bronze_file.startswith("file:/")


def test_a_multi_line_value_and_quotes_inside_values_still_read(spark, tmp_path):
    r1 = row(8, 2, 2, 7, "gus", notes="two\nlines, and a \"quote\"")
    r2 = row(9, 2, 2, 8, 'o"hara')  # one quote inside an unquoted field (bcp writes such text): ambiguous
    r3 = row(10, 2, 2, 9, "ida")
    write_csv(tmp_path / "dbo_orders_CT.csv", [r1])
    with (tmp_path / "dbo_orders_CT.csv").open("a") as fh:
        fh.write(csv_line(r2) + "\n\n" + csv_line(r3) + "\n")  # and a blank line: not a record
    _, decoded = decode_landing(spark, tmp_path)
    got = sorted((r.after.id, r.after.customer, r.after.notes) for r in decoded.changes.collect())
    assert got == [(7, "gus", 'two\nlines, and a "quote"'), (9, "ida", "n")]
    assert [r for _, r in quarantined(decoded)] == [
        'line 4: a quote (") is not closed where the record should end (unterminated or stray quote); lines 4-6 '
        "would have been read as one value: they are read line by line instead"]




WIDE_NUMBERS = ({"name": "id", "type": "int"}, {"name": "cash", "type": "money"}, {"name": "huge", "type": "decimal(38,10)"},
                {"name": "price", "type": "decimal(10,2)"}, {"name": "tiny", "type": "tinyint"})
#: (id, cash, huge, price, tiny) as SQL Server holds them; FOR JSON writes the decimals as JSON numbers
WIDE_VALUES = [
    (1, "922337203685477.5807", "9999999999999999999999999999.9999999999", "99999999.99", 255),
    (2, "-922337203685477.5808", "1234567890123456789.0123456789", "0.10", 128),
    (3, "0.0001", "0.0000000001", "-3.25", 0),
    (4, "12.3400", "-0.0000000000", "19.99", None),
]


def test_decimals_written_as_json_numbers_keep_every_digit_and_a_tinyint_reaches_255(spark, tmp_path):
    """FOR JSON writes money and decimals as JSON numbers, and a Parquet export's decimals are numbers
    in bronze's JSON: Spark's ``from_json`` reads a number into text through a double, so until
    2026-12-05 money 922337203685477.5807 landed as 922337203685477.6000 and a 19-digit decimal(38,10)
    lost its last digits -- silently, in range. A SQL Server ``tinyint`` column was Spark's signed
    byte: 128..255 were quarantined. A UTF-8 byte order mark at a line's start (exports that began
    with one, concatenated) is dropped, as Spark drops one at a file's start."""
    from sqlcdc.formats import base

    def meta(n):
        return (f'"__$start_lsn": "0x{c(n)}", "__$end_lsn": null, "__$seqval": "0x{s(n, 2)}", "__$operation": 2, '
                f'"__$update_mask": "0x1F", "__$command_id": 1')

    lines = [f'{{{meta(8 + i)}, "id": {i_}, "cash": {m}, "huge": {h}, "price": {p}'
             + (f', "tiny": {t}}}' if t is not None else "}")
             for i, (i_, m, h, p, t) in enumerate(WIDE_VALUES)]
    json_dir, parquet_dir = tmp_path / "json", tmp_path / "parquet"
    json_dir.mkdir()
    bom = ["\ufeff" if i == 1 else "" for i in range(len(lines))]  # two exports that began with one, concatenated
    (json_dir / "dbo_orders_CT.jsonl").write_text("\n".join(b + x for b, x in zip(bom, lines)) + "\n")
    rows = [(bytes.fromhex(c(8 + i)), None, bytes.fromhex(s(8 + i, 2)), 2, bytes.fromhex("1F"), 1, i_, Decimal(m),
             Decimal(h), Decimal(p), t) for i, (i_, m, h, p, t) in enumerate(WIDE_VALUES)]
    spark.createDataFrame(rows, "`__$start_lsn` binary, `__$end_lsn` binary, `__$seqval` binary, `__$operation` int, "
                                "`__$update_mask` binary, `__$command_id` int, id int, cash decimal(19,4), "
                                "huge decimal(38,10), price decimal(10,2), tiny short"
                          ).coalesce(1).write.parquet(str(parquet_dir / "dbo_orders"))
    want = sorted((i_, Decimal(m), Decimal(h), Decimal(p), t) for i_, m, h, p, t in WIDE_VALUES)
    for landing in (json_dir, parquet_dir):
        src = make_source(landing)
        table = make_table(src, columns=WIDE_NUMBERS)
        decoded = cdc_ct.decode(cdc_ct.read_bronze(spark, src), table, cdc_ct.columns_for(table, src, spark))
        assert quarantined(decoded) == [], landing.name
        got = sorted((r.after.id, r.after.cash, r.after.huge, r.after.price, r.after.tiny) for r in decoded.changes.collect())
        assert got == want, landing.name
        assert [f.dataType.simpleString() for f in decoded.changes.schema["after"].dataType.fields][1:] == [
            "decimal(19,4)", "decimal(38,10)", "decimal(10,2)", "smallint"]


def test_a_windows_export_keeps_line_breaks_inside_values_and_tells_empty_text_from_null(spark, tmp_path):
    """Lines ended by CRLF (as Windows tools write them), values holding CRLF, a lone CR and LF:
    each value reads back as it was (the reader used to turn a value's CRLF into LF and split at a
    lone CR). A quoted empty value is empty text, an empty field NULL (``csv_null_value`` default)."""
    notes = {7: "crlf\r\ninside", 8: "lone\rcr", 9: "lf\ninside", 10: "", 11: None, 12: "ends with cr\r"}
    rows = [row(n + 1, 2, 2, n, "c", notes=v) for n, v in notes.items()]

    def field(v: str | None) -> str:  # csv's writer writes '' and None alike
        return "" if v is None else '"' + v.replace('"', '""') + '"' if v == "" or any(ch in v for ch in ',"\r\n') else v

    with (tmp_path / "dbo_orders_CT.csv").open("w", newline="") as fh:
        fh.write(",".join(HEADER) + "\r\n")
        for r in rows:
            fh.write(",".join(field(r[k]) for k in HEADER) + "\r\n")
        # every field quoted (PowerShell's Export-Csv): a NULL amount is "", NULL in a decimal column
        quote_all = {**row(14, 2, 2, 13, "c", notes="q"), "amount": None, "__$end_lsn": None}
        fh.write(",".join('"' + (quote_all[k] or "") + '"' for k in HEADER) + "\r\n")
        fh.write("\r\n")  # a blank line: not a record
    _, decoded = decode_landing(spark, tmp_path)
    assert quarantined(decoded) == []
    got = {r.after.id: (r.after.notes, r.after.amount) for r in decoded.changes.collect()}
    assert got == {**{k: (v, Decimal("1.00")) for k, v in notes.items()}, 13: ("q", None)}


# --- Parquet: a schema per file -------------------------------------------------------------------


def write_parquet(spark, folder: Path, rows: list[dict], typed: bool, order: list[str] = HEADER) -> None:
    fields = [StructField(k, BinaryType() if (k in BINARY_COLS and typed) else StringType()) for k in order]
    data = [tuple(bytes.fromhex(r[k][2:]) if (typed and k in BINARY_COLS and r[k]) else r[k] for k in order) for r in rows]
    df = spark.createDataFrame(data, StructType(fields))
    if typed:
        df = df.select(*[F.col(f"`{k}`").cast({"id": "int", "__$operation": "int", "__$command_id": "int",
                                               "amount": "decimal(10,2)"}.get(k, df.schema[k].dataType)).alias(k)
                         for k in order])
    df.coalesce(1).write.mode("overwrite").parquet(str(folder))


def test_parquet_exports_with_conflicting_types_each_read_with_their_schema(spark, tmp_path):
    rows = history_rows()
    write_parquet(spark, tmp_path / "dbo_orders_CT.1", rows[:10], typed=True)  # int, decimal, binary
    write_parquet(spark, tmp_path / "dbo_orders_CT.2", rows[10:], typed=False, order=SHUFFLED)  # all text
    (tmp_path / "dbo_orders_CT.3").mkdir()
    (tmp_path / "dbo_orders_CT.3" / "part-0.parquet").write_bytes(b"PAR1 this is not parquet")
    write_parquet(spark, tmp_path / "dbo_orders_CT.4", [rows[0]], typed=False, order=[k for k in HEADER if k != "__$seqval"])
    # a whole footer, but a data page header that does not decode: Spark's read of it failed the
    # whole source (FAILED_READ_FILE, 2026-12-06); pyarrow reads it through once and names it
    write_parquet(spark, tmp_path / "dbo_orders_CT.5", [{**rows[0], "notes": f"note {i}"} for i in range(500)], typed=False)
    (part,) = (tmp_path / "dbo_orders_CT.5").glob("part-*.parquet")
    chunk = next(c for c in (pq.ParquetFile(part).metadata.row_group(0).column(i) for i in range(len(HEADER)))
                 if c.path_in_schema == "notes")
    data = bytearray(part.read_bytes())
    data[chunk.data_page_offset:chunk.data_page_offset + 4] = bytes(b ^ 0xFF for b in data[chunk.data_page_offset:][:4])
    part.unlink()
    (tmp_path / "dbo_orders_CT.5" / "part-bad-page.parquet").write_bytes(bytes(data))
    _, decoded = decode_landing(spark, tmp_path)
    assert silver_rows(decoded) == EXPECTED_SILVER
    assert got_after_images(decoded) == after_images(rows)
    q = quarantined(decoded)
    assert [reason.split(" (")[0] for _, reason in q] == [
        "file dbo_orders_CT.3/part-0.parquet is not a readable Parquet file",  # named by its path below the landing
        "missing __$seqval",  # per row: a net-changes export (option function) has none
        "file dbo_orders_CT.5/part-bad-page.parquet is not a readable Parquet file: its data does not read to its end",
    ]
    assert q[1][0].startswith("part-00000-") and q[1][0].endswith(".parquet")
    assert "(OSError: Couldn't deserialize thrift" in q[2][1]


# --- bytes that are not UTF-8 ----------------------------------------------------------------------


def _placed(spark, bronze, table):
    """(silver customers, [(rules, reason)] of the records refused before any decoder or quarantined)."""
    bronze = bronze.cache()
    decoded = cdc_ct.decode(bronze.where(~base.is_rejected_before_decoding()), table,
                            cdc_ct.columns_for(table, table.source, spark))
    refused = [(r.rules, r.reason) for r in base.rejected_before_decoding(bronze, "ct", "cdc_ct").collect()]
    return (sorted(r.after.customer for r in decoded.changes.where(F.col("after").isNotNull()).collect()),
            refused + [(r.rules, r.reason) for r in decoded.quarantine.collect()])


def test_text_that_is_not_utf8_is_refused_in_csv_and_parquet_and_u_fffd_is_text(spark, tmp_path):
    """Spark's readers and to_json write a byte that is not UTF-8 as U+FFFD, silently: an export's
    record holding one is refused (its bytes kept in bronze, the byte named), whatever the line
    ends or however many lines the record spans; a U+FFFD the export holds is text, kept."""
    rows = [row(8, 2, 2, 7, "ANSI"), row(9, 2, 2, 8, "x\ufffdy"), row(10, 2, 2, 9, "MULTI"), row(11, 2, 2, 10, "ok")]
    for name, ends in (("lf", b"\n"), ("crlf", b"\r\n")):
        p = write_csv(tmp_path / name / "dbo_orders_CT_a.csv", rows)
        p.write_bytes(p.read_bytes().replace(b"ANSI", b"caf\xe9", 1).replace(b"MULTI", b'"two\nlines \xff"', 1)
                      .replace(b"\n", ends).replace(b"two" + ends, b"two\n"))
        src = make_source(tmp_path / name)
        customers, refused = _placed(spark, cdc_ct.read_bronze(spark, src), make_table(src))
        assert customers == ["ok", "x\ufffdy"], name
        assert sorted(refused) == [(["not_utf8"], "not UTF-8 text: byte e9 at offset 59 (invalid continuation byte)"),
                                   (["not_utf8"], "not UTF-8 text: byte ff at offset 67 (invalid start byte)")], name
    # Parquet: a writer that does not check (Spark's own) can store such bytes in a string column
    typed = tmp_path / "typed"
    write_parquet(spark, typed, rows, typed=True)
    pq = spark.read.parquet(str(typed)).withColumn(
        "customer", F.when(F.col("customer") == "ANSI", F.unhex(F.lit("636166E9")).cast("string")).otherwise(F.col("customer")))
    pq.coalesce(1).write.parquet(str(tmp_path / "pq" / "dbo_orders_CT.1"))
    src = make_source(tmp_path / "pq")
    customers, refused = _placed(spark, cdc_ct.read_bronze(spark, src), make_table(src))
    assert customers == ["MULTI", "ok", "x\ufffdy"]
    assert refused == [(["not_utf8"], "not UTF-8 text: byte e9 at offset 13 (invalid continuation byte)")]
    # a remote landing's CSV is read whole by Spark's reader, which has replaced the byte already:
    # a U+FFFD there cannot be told from one, so the record is not read (quarantined, never silver)
    src = make_source(tmp_path / "lf", file_format="csv")
    remote = _ct_exports._read(spark, "csv", str(tmp_path / "lf"), src, None)
    remote = remote.select(record_id(F.col("source_file"), F.col("value")).alias("record_id"), "*")
    customers, refused = _placed(spark, remote, make_table(src))
    assert customers == ["ok"]
    assert len(refused) == 3 and all(r[1].startswith("a value holds U+FFFD, which Spark's CSV reader makes") for r in refused)


# --- duplicates and conflicts ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def overlapping(spark, tmp_path_factory):
    """The history as CSV; rows 3-6 again as JSON lines (an overlapping export); and two rows that
    differ from the CSV's at the same (start_lsn, seqval, operation): the insert of 1 (row 0) and the
    after-image of tx 2's update of 1 (row 4)."""
    land = tmp_path_factory.mktemp("ct_overlap")
    rows = history_rows()
    write_csv(land / "cdc.dbo_orders_CT.csv", rows)
    land_jsonl(land, rows[3:7], name="dbo_orders_CT.again.jsonl")
    land_jsonl(land, [dict(rows[0], customer="mallory"), dict(rows[4], amount="99.00")], name="dbo_orders_CT.other.jsonl")
    src = make_source(land)
    table = make_table(src)
    bronze = cdc_ct.read_bronze(spark, src)
    cols = cdc_ct.columns_for(table, src)
    return land, src, table, bronze, cdc_ct.decode(bronze, table, cols), cdc_ct.duplicates(bronze, table, cols)


def test_conflicting_rows_are_all_quarantined_and_duplicates_listed(overlapping):
    _, _, _, bronze, decoded, dups = overlapping
    expected = [x for x in EXPECTED_SILVER if (x[5], x[6]) not in ((c(1), s(1, 2)), (c(2), s(2, 2)))]
    assert silver_rows(decoded) == expected
    insert = (f"conflicting rows at __$start_lsn 0x{c(1)}, __$seqval 0x{s(1, 2)}, __$operation 2: 2 different rows "
              "landed for one change-table row (in ")
    update = (f"conflicting rows at __$start_lsn 0x{c(2)}, __$seqval 0x{s(2, 2)}, __$operation 4: 2 different rows "
              "landed for one change-table row (in ")
    q = quarantined(decoded)
    assert sorted((f, r.split(" (in ")[0]) for f, r in q if r.startswith("conflicting")) == [
        ("cdc.dbo_orders_CT.csv", insert[:-5]), ("cdc.dbo_orders_CT.csv", update[:-5]),
        ("dbo_orders_CT.again.jsonl", update[:-5]),
        ("dbo_orders_CT.other.jsonl", insert[:-5]), ("dbo_orders_CT.other.jsonl", update[:-5]),
    ]
    reasons = [r for _, r in q]
    assert sum(r.startswith(insert) for r in reasons) == 2 and sum(r.startswith(update) for r in reasons) == 3
    assert all("dbo_orders_CT.other.jsonl" in r and "cdc.dbo_orders_CT.csv" in r for r in reasons if r.startswith((insert, update)))
    lone = [r for r in reasons if r.startswith("update before-image")]
    assert lone == [f"update before-image (__$operation 3) at __$start_lsn 0x{c(2)}, __$seqval 0x{s(2, 2)}: its "
                    "after-image rows (operation 4) conflict (quarantined)"]
    # rows 3, 5, 6 came twice and agree: one copy each is a duplicate (row 4's copies are in conflict)
    assert dups.count() == 3
    assert bronze.count() == 21 + 4 + 2


def test_balance_counts_duplicates(spark, tmp_path, overlapping):
    from sqlcdc.config import load_pipeline
    from sqlcdc.summary import balances, table_path

    land, _, _, bronze, decoded, _ = overlapping
    base = tmp_path / "config"
    (base / "tables").mkdir(parents=True)
    # a second source on the same landing whose quarantine table is missing: all sources are counted
    # by one query, and each balance must count its own records only (ct2 is short by its quarantine)
    (base / "pipeline.yml").write_text(f"name: ct_balance\nsources:\n  ct:\n    format: cdc_ct\n    landing: {land}\n"
                                       f"  ct2:\n    format: cdc_ct\n    landing: {land}\n")
    cols = "\n".join(f"  - {{name: {n}, type: \"{t}\"{', lob: true' if n == 'notes' else ''}}}" for n, t in
                     (("id", "int"), ("customer", "string"), ("amount", "decimal(10,2)"), ("notes", "string"),
                      ("status", "string")))
    (base / "tables" / "orders.yml").write_text(f"source: ct\ntable: dbo.orders\nname: orders\nkeys: [id]\ncolumns:\n{cols}\n")
    (base / "tables" / "orders2.yml").write_text(f"source: ct2\ntable: dbo.orders\nname: orders2\nkeys: [id]\ncolumns:\n{cols}\n")
    cfg = load_pipeline(base / "pipeline.yml")
    wh = tmp_path / "wh"
    for name, df in (("bronze_ct", bronze), ("silver_orders", decoded.changes), ("quarantine_ct", decoded.quarantine),
                     ("bronze_ct2", bronze), ("silver_orders2", decoded.changes)):
        df.write.format("delta").save(str(table_path(wh, name)))
    got = {b.source: (b.landed, b.in_silver, b.quarantined, b.skipped, b.dropped, b.duplicate, b.ok)
           for b in balances(spark, cfg, wh)}
    assert got == {"ct": (27, 18, 6, 0, 0, 3, True), "ct2": (27, 18, 0, 0, 0, 3, False)}
