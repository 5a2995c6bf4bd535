"""Landed files that cannot be read to their end (issue 16): a ``.gz``/``.bz2`` cut short or not
compressed at all, or a CES Avro container file cut short, with junk or not Avro, stopped the whole
read (Spark's codecs and Avro reader fail mid-file). In a local run the file is checked first
(plain Python), Spark keeps what it could read of it, and the streaming bronze gets one row for the
file that the pipeline quarantines with the reason."""

from __future__ import annotations

import bz2
import gzip
import json
import os
import re
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from test_ces import event as ces_event

from sqlcdc.formats import _file_checks, base, ces, debezium
from sqlcdc.formats._avro_check import avro_file_problem

GOOD = [json.dumps({"op": "c", "n": i}) for i in range(3)]


def _land(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "plain": folder / "a.json",
        "whole": folder / "b.json.gz",
        "cut": folder / "c.json.gz",
        "junk": folder / "d.json.gz",
        "cut_bz2": folder / "e.json.bz2",
        "hidden": folder / ".f.json.gz",
        "other": folder / "g.txt.gz",
    }
    files["plain"].write_text("\n".join(GOOD) + "\n")
    files["whole"].write_bytes(gzip.compress(("\n".join(GOOD) + "\n").encode()))
    files["cut"].write_bytes(gzip.compress(("\n".join(GOOD * 200) + "\n").encode())[:-30])
    files["junk"].write_bytes(b"this is not gzip at all\n")
    files["cut_bz2"].write_bytes(bz2.compress(("\n".join(GOOD * 200) + "\n").encode())[:-30])
    files["hidden"].write_bytes(b"not gzip, hidden: Spark does not read it")
    files["other"].write_bytes(b"not gzip, and the glob below leaves it out")
    return files


def _markers(folder: Path) -> dict[str, str]:
    """Marker files -> {landed file name: reason}."""
    out = {}
    for p in folder.iterdir():
        if p.name.startswith("."):
            continue
        line = json.loads(p.read_text())
        assert line["value"].startswith("\n")  # no landed line can start so: no record passes for a marker
        out[Path(line["source_file"]).name] = json.loads(line["value"])[base.UNREADABLE_FILE]
    return out


def test_each_compressed_file_spark_would_read_is_checked_once(tmp_path):
    files = _land(tmp_path / "landing")
    state = tmp_path / "state"
    markers = base.check_landed_files(str(tmp_path / "landing"), "*.{json,json.gz,json.bz2}", state)
    found = _markers(markers)
    assert sorted(found) == ["c.json.gz", "d.json.gz", "e.json.bz2"]
    assert found["c.json.gz"].startswith("file c.json.gz cannot be read: not a whole gzip file (EOFError")
    assert found["d.json.gz"].startswith("file d.json.gz cannot be read: not a whole gzip file (BadGzipFile")
    assert found["e.json.bz2"].startswith("file e.json.bz2 cannot be read: not a whole bzip2 file (EOFError")
    checked = json.loads((state / "unreadable" / "checked.json").read_text())
    # remembered whole: not decompressed again (a plain file is read through once too, for its line lengths)
    assert sorted(checked) == sorted([str(files["whole"]), str(files["plain"])])

    before = {p.name: p.stat().st_mtime_ns for p in markers.iterdir()}
    files["whole"].write_bytes(b"replaced by something that is not gzip")  # new size: checked again
    os.utime(files["whole"], ns=(1, 1))
    base.check_landed_files(str(tmp_path / "landing"), "*.{json,json.gz,json.bz2}", state)
    assert {p.name: p.stat().st_mtime_ns for p in markers.iterdir() if p.name in before} == before  # markers kept as they were
    assert sorted(_markers(markers)) == ["b.json.gz", "c.json.gz", "d.json.gz", "e.json.bz2"]


def test_the_walk_of_a_landing_takes_regular_files_below_it_as_spark_lists_them(tmp_path):
    """Folders below the landing are walked, ``_*``/``.*`` names skipped, and a FIFO is no landed
    file (the check would open it and wait forever for a writer); change tables list the same."""
    from sqlcdc.formats.cdc_ct import landed_files

    (tmp_path / "a.json.gz").write_bytes(gzip.compress(b"{}\n"))
    os.mkfifo(tmp_path / "pipe.json.gz")
    os.mkfifo(tmp_path / "cdc.dbo_t_CT_pipe.jsonl")
    for name in ("_tmp/b.json", "sub/.c.json", "sub/d.json", "sub/cdc.dbo_t_CT_1.jsonl"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    assert _file_checks.landed_paths(str(tmp_path)) == [str(tmp_path / n) for n in ("a.json.gz", "sub/cdc.dbo_t_CT_1.jsonl", "sub/d.json")]
    listed = sorted(p for groups in landed_files(str(tmp_path)).values() for paths in groups.values() for p in paths)
    assert listed == _file_checks.landed_paths(str(tmp_path))


def test_a_whole_file_is_decompressed_once_across_runs(tmp_path, monkeypatch):
    """Change-table exports are re-read every run (batch): their .gz files are checked once."""
    files = _land(tmp_path / "landing")
    first = base.FileChecks(tmp_path / "state")
    assert first.problem(str(files["whole"])) is None and first.problem(str(files["cut"])).startswith("cannot be read")
    first.save()

    def never(path, *_):
        raise AssertionError(f"{path} decompressed again")

    monkeypatch.setattr(_file_checks, "compressed_file_problem", never)
    again = base.FileChecks(tmp_path / "state")  # the next run
    assert again.problem(str(files["whole"])) is None and again.problem(str(files["plain"])) is None
    with pytest.raises(AssertionError, match="c.json.gz decompressed again"):  # a damaged one is not remembered whole
        again.problem(str(files["cut"]))


def test_without_the_check_spark_stops_at_the_first_damaged_file(spark, tmp_path, monkeypatch):
    """What the check prevents (and what still happens where it does not run: Databricks)."""
    monkeypatch.delenv(base.STATE_DIR_ENV, raising=False)
    _land(tmp_path / "landing")
    with pytest.raises(Exception, match="(?i)gzip|EOF|Unexpected end"):
        base.read_text_lines(spark, str(tmp_path / "landing"), streaming=False, glob="*.json.gz").count()


def test_a_local_streaming_read_keeps_what_it_can_and_adds_a_row_per_damaged_file(spark, tmp_path, monkeypatch):
    monkeypatch.setenv(base.STATE_DIR_ENV, str(tmp_path / "state"))
    landing = tmp_path / "landing"
    _land(landing)
    (landing / "h.json").write_text('{"__sqlcdc_unreadable_file": null}\n')  # a record cannot pass for a marker
    (landing / "i.json").write_bytes(b'{"name": "caf\xe9"}\n' + GOOD[0].encode() + b"\n")  # a Latin-1 line, then a good one
    (landing / "j.json").write_bytes(GOOD[1].encode("utf-16"))  # as PowerShell 5's Out-File writes: UTF-16 with its BOM
    bom = "\ufeff".encode()  # UTF-8's byte order mark: two files that began with one, concatenated
    (landing / "k.json").write_bytes(bom + GOOD[0].encode() + b"\n" + bom + GOOD[2].encode() + b"\r\n" + bom + b"\n")
    src = debezium.DECODER  # its bronze is read_text_lines over the landing folder
    from sqlcdc.config import SourceConfig

    source = SourceConfig("s", "debezium", str(landing), {"glob": "*.{json,json.gz,json.bz2}"})
    out, ckpt = tmp_path / "bronze", tmp_path / "ckpt"

    def run():
        q = (src.read_bronze(spark, source).writeStream.format("parquet").option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start(str(out)))
        q.awaitTermination()

    run()
    bronze = spark.read.parquet(str(out))
    markers = bronze.where(base.is_unreadable_file())
    assert sorted(Path(r.source_file).name for r in markers.collect()) == ["c.json.gz", "d.json.gz", "e.json.bz2"]
    records = bronze.where(~base.is_rejected_before_decoding())  # (Python cannot take i.json's first line)
    by_file = {}
    for r in records.collect():
        by_file.setdefault(Path(r.source_file).name, []).append(r.value)
    assert sorted(by_file["a.json"]) == sorted(by_file["b.json.gz"]) == sorted(GOOD)
    assert by_file["h.json"] == ['{"__sqlcdc_unreadable_file": null}']
    assert by_file["i.json"] == [GOOD[0]]
    # each line's mark dropped, as Spark drops a file's; a bare mark is an empty line (to Debezium a tombstone)
    assert by_file["k.json"] == [GOOD[0], GOOD[2], ""]
    assert "d.json.gz" not in by_file and ".f.json.gz" not in by_file and "g.txt.gz" not in by_file
    # what Spark decompressed before the cut: lines of the file (the last one may be cut short)
    assert all(any(g.startswith(v) for g in GOOD) for v in by_file.get("c.json.gz", []))

    q = base.rejected_before_decoding(bronze, "s", "debezium").collect()
    assert sorted((Path(r.bronze_file).name, r.reason.split(" (")[0], r.rules) for r in q) == [
        ("c.json.gz", "file c.json.gz cannot be read: not a whole gzip file", ["unreadable_file"]),
        ("d.json.gz", "file d.json.gz cannot be read: not a whole gzip file", ["unreadable_file"]),
        ("e.json.bz2", "file e.json.bz2 cannot be read: not a whole bzip2 file", ["unreadable_file"]),
        ("i.json", "not UTF-8 text: byte e9 at offset 13", ["not_utf8"]),
        ("j.json", "not UTF-8 text: byte ff at offset 0", ["not_utf8"]),
    ]
    assert [r.reason for r in q if Path(r.bronze_file).name == "j.json"] == [
        "not UTF-8 text: byte ff at offset 0 (invalid start byte); it begins with a UTF-16 byte order mark (ff fe): "
        "land the file as UTF-8"]
    # the quarantine row shows the bad byte as U+FFFD: every client reads it (Arrow refused the bytes)
    assert [r.raw for r in q if Path(r.bronze_file).name == "i.json"] == ['{"name": "caf\ufffd"}']
    assert len(base.rejected_before_decoding(bronze, "s", "debezium").toPandas()) == 5

    run()  # nothing new landed: no new row, the markers are not read twice
    assert spark.read.parquet(str(out)).count() == bronze.count()


def test_a_zstd_file_cut_short_is_quarantined_as_a_file_and_whole_ones_land(spark, tmp_path, monkeypatch):
    """Spark reads ``.zst`` through Hadoop's zstd codec, which failed the whole read at a file cut
    short ("Truncated source", 2026-12-06): the check walks its frames; whole files (one frame with
    its size, or a streaming frame with a checksum, or both) pass and land."""
    from sqlcdc.formats._zstd_check import zstd_problem

    jvm = spark.sparkContext._jvm
    text = "".join(f"{g}\n" for g in GOOD * 400).encode()
    one = bytes(jvm.com.github.luben.zstd.Zstd.compress(bytearray(text), 3))
    out = jvm.java.io.ByteArrayOutputStream()
    stream = jvm.com.github.luben.zstd.ZstdOutputStream(out)
    stream.setChecksum(True)
    stream.write(bytearray(text))
    stream.close()
    framed = bytes(out.toByteArray())
    for whole in (one, framed, one + framed, b""):
        assert zstd_problem(whole) is None
    assert zstd_problem(framed[:-1]) == "frame 1 cut short at byte %d (its checksum)" % (len(framed) - 1)
    assert zstd_problem(one[: len(one) // 2]) == "frame 1 cut short at byte %d" % (len(one) // 2)
    assert zstd_problem(b"not zstd").startswith("no Zstandard magic bytes at byte 0")
    monkeypatch.setenv(base.STATE_DIR_ENV, str(tmp_path / "state"))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.json.zst").write_bytes(one + framed)
    (landing / "b.json.zst").write_bytes(one[: len(one) // 2])
    bronze = base.read_text_lines(spark, str(landing), streaming=True)
    streamed = tmp_path / "bronze"
    (bronze.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
     .start(str(streamed)).awaitTermination())
    got = spark.read.parquet(str(streamed))
    assert sorted(r.value for r in got.where(F.col("source_file").endswith("a.json.zst")).collect()) == sorted(GOOD * 800)
    (row,) = base.rejected_before_decoding(got, "s", "debezium").collect()
    assert row.reason.startswith("file b.json.zst cannot be read: not a whole zstd file (frame 1 cut short at byte ")


def test_files_in_folders_below_the_landing_are_landed_and_checked_as_auto_loader_reads_them(spark, tmp_path, monkeypatch):
    """Auto Loader reads a landing's subfolders (``2026/12/06/x.json``); Spark's file source left
    such files out without a word and stopped the whole read at a ``key=value`` folder beside
    landed files (CONFLICTING_DIRECTORY_STRUCTURES, 2026-12-06). Now both are read, a damaged file
    down there is quarantined naming its path below the landing, and ``_*``/``.*`` folders are not read."""
    monkeypatch.setenv(base.STATE_DIR_ENV, str(tmp_path / "state"))
    landing = tmp_path / "landing"
    lines = {"a.json": GOOD[0], "2026/12/06/b.json": GOOD[1], "dt=2026-12-06/c.json": GOOD[2],
             "_tmp/d.json": '{"op": "c", "n": 98}', ".partial/e.json": '{"op": "c", "n": 99}'}
    for name, line in lines.items():
        (landing / name).parent.mkdir(parents=True, exist_ok=True)
        (landing / name).write_text(line + "\n")
    (landing / "2026/12/07").mkdir(parents=True)
    (landing / "2026/12/07/cut.json.gz").write_bytes(gzip.compress(((GOOD[0] + "\n") * 50).encode())[:-40])
    (landing / "_tmp/junk.json.gz").write_bytes(b"not gzip, and in a folder Spark skips\n")
    bronze = base.read_text_lines(spark, str(landing), streaming=True)
    streamed = tmp_path / "bronze"
    (bronze.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
     .start(str(streamed)).awaitTermination())
    got = spark.read.parquet(str(streamed))
    landed = {(r.source_file.split("/landing/")[1], r.value) for r in got.where(~base.is_unreadable_file()).collect()}
    assert {x for x in landed if not x[0].endswith(".gz")} == {(k, v) for k, v in lines.items() if k[0] not in "_."}
    (row,) = base.rejected_before_decoding(got, "s", "debezium").collect()
    assert row.reason.startswith("file 2026/12/07/cut.json.gz cannot be read: not a whole gzip file (EOFError")


def test_a_file_whose_name_is_not_utf8_is_quarantined_as_a_file_not_left_out(spark, tmp_path, monkeypatch):
    """A landed file named in another encoding (``caf\\xe9.json``, Latin-1) was left out by Spark's
    listing without a word, and stopped the whole run in Python (UnicodeEncodeError in the file
    check and in ``sqlcdc run``'s fingerprint of the landing, 2026-12-06). Now it is one quarantine
    row naming the byte, for a text landing and for change-table exports alike (the fingerprint:
    tests/test_unchanged.py)."""
    from test_cdc_ct import decode_landing
    from test_cdc_ct_files import row, write_csv

    monkeypatch.setenv(base.STATE_DIR_ENV, str(tmp_path / "state"))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "ok.json").write_text(GOOD[0] + "\n")
    with open(os.fsencode(landing) + b"/caf\xe9.json", "wb") as fh:
        fh.write((GOOD[1] + "\n").encode())
    os.mkdir(os.fsencode(landing) + b"/d\xe9c")
    with open(os.fsencode(landing) + b"/d\xe9c/x.json", "wb") as fh:
        fh.write((GOOD[2] + "\n").encode())
    bronze = base.read_text_lines(spark, str(landing), streaming=True)
    streamed = tmp_path / "bronze"
    (bronze.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
     .start(str(streamed)).awaitTermination())
    got = spark.read.parquet(str(streamed))
    assert [r.value for r in got.where(~base.is_unreadable_file()).collect()] == [GOOD[0]]
    assert sorted((r.bronze_file.rsplit("/landing/")[1], r.reason) for r in base.rejected_before_decoding(got, "s", "debezium").collect()) == [
        ("caf%E9.json", "file caf\\xe9.json cannot be read: its name is not UTF-8 (byte e9 at offset 3): Spark leaves it "
                        "out; rename it; none of its records was landed"),
        ("d%E9c/x.json", "file d\\xe9c/x.json cannot be read: its name is not UTF-8 (a folder's name is not): Spark leaves "
                         "it out; rename the folder; none of its records was landed")]

    ct = tmp_path / "ct"
    write_csv(ct / "dbo_orders_CT_ok.csv", [row(7, 2, 2, 6, "fay")])
    with open(os.fsencode(ct) + b"/dbo_orders_CT_\xe9.csv", "wb") as fh:
        fh.write((ct / "dbo_orders_CT_ok.csv").read_bytes())
    _, decoded = decode_landing(spark, ct)
    assert [r.after.customer for r in decoded.changes.collect()] == ["fay"]
    assert [r.reason.split(" (capture instance")[0] for r in decoded.quarantine.collect()] == [
        "file dbo_orders_CT_\\xe9.csv cannot be read: its name is not UTF-8 (byte e9 at offset 14): Spark leaves it out; rename it"]


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(0, 130), min_size=1, max_size=12), cuts=st.lists(st.integers(1, 400), max_size=8),
       end=st.booleans())
def test_the_line_count_finds_the_first_line_over_the_limit_however_the_bytes_come(lengths, cuts, end):
    """``_Lines`` is fed a file's bytes as Python reads them (1 MiB reads, or whatever zlib hands
    back, which can be larger than the limit): the first line longer than the limit, by number."""
    limit = 50
    data = b"\n".join(b"x" * n for n in lengths) + (b"\n" if end else b"")
    want = next((i + 1 for i, n in enumerate(lengths) if n > limit), None)
    counted, at = _file_checks._Lines(), 0
    original, _file_checks.LINE_LIMIT = _file_checks.LINE_LIMIT, limit
    try:
        for cut in sorted({c for c in cuts if c < len(data)}) + [len(data)]:
            counted.feed(data[at:cut])
            at = cut
    finally:
        _file_checks.LINE_LIMIT = original
    assert counted.long == want


def test_a_line_too_long_to_read_keeps_its_file_from_spark_and_other_files_land(spark, tmp_path, monkeypatch):
    """Spark's text reader holds a line whole: one line of 600 MB (a table dumped as one JSON array)
    stopped a 4 GB JVM (probed 2026-12-06). A file with a line over ``LINE_LIMIT`` (lowered here) is
    one quarantine row and is not opened; plain, ``.gz``, ``.bz2`` and ``.deflate`` are measured."""
    monkeypatch.setattr(_file_checks, "LINE_LIMIT", 1000)
    monkeypatch.setenv(base.STATE_DIR_ENV, str(tmp_path / "state"))
    landing = tmp_path / "landing"
    landing.mkdir()
    good = [json.dumps({"op": "c", "n": i}) for i in range(3)]
    long_line = json.dumps([{"op": "c", "pad": "x" * 200}] * 10)  # 2,000+ bytes on one line
    body = ("\n".join([good[0], long_line, good[1]]) + "\n").encode()
    (landing / "ok.json").write_text("\n".join(good) + "\n")
    (landing / "ok_until_1000.json").write_text("y" * 1000 + "\n")  # at the limit: read
    (landing / "array.json").write_bytes(body)
    (landing / "array.json.gz").write_bytes(gzip.compress(body))
    (landing / "array.json.bz2").write_bytes(bz2.compress(body))
    (landing / "array.json.deflate").write_bytes(zlib.compress(body))
    opened = {p.rsplit("/", 1)[-1] for p in base.read_text_lines(spark, str(landing), streaming=False).inputFiles()}
    assert opened == {"ok.json", "ok_until_1000.json"}
    got = base.read_text_lines(spark, str(landing), streaming=True)
    out = tmp_path / "bronze"
    (got.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
     .start(str(out)).awaitTermination())
    bronze = spark.read.parquet(str(out))
    assert sorted(r.value for r in bronze.where(~base.is_unreadable_file()).collect()) == sorted(good + ["y" * 1000])
    reasons = sorted(r.reason for r in base.rejected_before_decoding(bronze, "s", "debezium").collect())
    assert reasons == [
        f"file {name} cannot be read: line 2 is longer than 1,000 bytes, more than sqlcdc reads as one record; Spark is not let "
        "open it: its text reader would hold that line whole, enough to stop the JVM; none of its records was landed"
        for name in ("array.json", "array.json.bz2", "array.json.deflate", "array.json.gz")]


def test_hadoop_block_files_and_deflate_are_walked_and_other_layouts_quarantined_as_files(spark, tmp_path, monkeypatch):
    """``.lz4`` and ``.snappy`` are read by Hadoop's block codecs, which took a file cut short as one
    that ends there (its cut block's lines lost without a trace), read an lz4-tool file or framed
    Snappy as no lines at all (or, on a 1 GB heap, stopped the JVM: OutOfMemoryError, 2026-12-06);
    ``.deflate`` (zlib) cut short or not compressed stopped the read. Whole files as Spark writes
    them pass and land; the others are one quarantine row each, naming what they are."""
    from sqlcdc.formats._block_check import hadoop_block_problem, hadoop_claim

    jvm = spark.sparkContext._jvm
    lines = [json.dumps({"op": "c", "n": i, "pad": "x" * (i % 50)}) for i in range(6000)]  # > one 256 KiB block
    text = "".join(f"{v}\n" for v in lines).encode()
    written = {}
    for codec in ("lz4", "snappy"):
        folder = tmp_path / f"written-{codec}"
        spark.createDataFrame([(v,) for v in lines], "value string").coalesce(1).write.option("compression", codec).text(str(folder))
        (part,) = folder.glob("part-*")
        written[codec] = part.read_bytes()

    def through(stream_class, data: bytes) -> bytes:
        out = jvm.java.io.ByteArrayOutputStream()
        stream = stream_class(out)
        stream.write(bytearray(data))
        stream.close()
        return bytes(out.toByteArray())

    lz4_tool = through(jvm.net.jpountz.lz4.LZ4FrameOutputStream, text)
    framed_snappy = through(jvm.org.xerial.snappy.SnappyFramedOutputStream, text)
    for codec, whole in written.items():
        assert int.from_bytes(whole[:4], "big") < len(text)  # more than one block: the walk crosses them
        for ok in (whole, whole + whole, b"", whole + bytes(4)):
            assert hadoop_block_problem(ok, codec) is None
        assert hadoop_block_problem(whole[:-1], codec) == f"block 2 cut short at byte {len(whole) - 1}"
        assert hadoop_block_problem(whole + bytes(4) + whole, codec).startswith("block 3 at byte ")
        short_chunk = whole[:4] + (100).to_bytes(4, "big") + whole[8:]  # its data no longer what it says
        assert hadoop_block_problem(short_chunk, codec).startswith("chunk 1 of block 1 at byte 4: ")
    assert hadoop_block_problem(lz4_tool, "lz4") == "it is an LZ4 frame file, as the lz4 tool writes it, not Hadoop's lz4 block format"
    assert hadoop_block_problem(framed_snappy, "snappy").startswith("it is framed Snappy")
    assert hadoop_block_problem(text[:1000], "snappy").startswith("block 1 at byte 0 says it holds ")

    monkeypatch.setenv(base.STATE_DIR_ENV, str(tmp_path / "state"))
    landing = tmp_path / "landing"
    landing.mkdir()
    deflated = zlib.compress(text[:5000].rsplit(b"\n", 1)[0] + b"\n")
    files = {"a.json.lz4": written["lz4"] * 2, "b.json.snappy": written["snappy"], "c.json.deflate": deflated * 2,
             "d.json.lz4": written["lz4"][:-100], "e.json.lz4": lz4_tool, "f.json.snappy": framed_snappy,
             "g.json.deflate": deflated[:-3], "h.json.deflate": text[:300], "i.json.snappy": text[:5000],
             # a whole file, but its name is that of one Spark must not open (the file source leaves out by name)
             "2026/12/e.json.lz4": written["lz4"]}
    for name, data in files.items():
        (landing / name).parent.mkdir(parents=True, exist_ok=True)
        (landing / name).write_bytes(data)
    # Hadoop's codec would take bytes 4-7 of these for a chunk's length and allocate that much first
    # (1.7 GB for the lz4 tool's header: OutOfMemoryError stopped this test's JVM on 2026-12-06)
    assert hadoop_claim(lz4_tool, "lz4") > 1 << 30 and hadoop_claim(framed_snappy, "snappy") > 1 << 30
    assert hadoop_claim(text[:5000], "snappy") > 64 << 20  # JSON text named .snappy
    assert hadoop_claim(written["lz4"][:-100], "lz4") <= 256 * 1024  # a cut Hadoop file asks for its last chunk only
    opened = {p.rsplit("/", 1)[-1] for p in base.read_text_lines(spark, str(landing), streaming=False).inputFiles()}
    assert opened == {"a.json.lz4", "b.json.snappy", "c.json.deflate", "d.json.lz4", "g.json.deflate", "h.json.deflate"}
    bronze = base.read_text_lines(spark, str(landing), streaming=True)
    streamed = tmp_path / "bronze"
    (bronze.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
     .start(str(streamed)).awaitTermination())
    got = spark.read.parquet(str(streamed))
    counts = {r.name: r.n for r in got.where(~base.is_unreadable_file()).groupBy(
        F.element_at(F.split("source_file", "/"), -1).alias("name")).agg(F.count("*").alias("n")).collect()}
    in_deflated = deflated and len(zlib.decompress(deflated).splitlines())
    assert {k: counts.get(k) for k in ("a.json.lz4", "b.json.snappy", "c.json.deflate")} == {
        "a.json.lz4": 12000, "b.json.snappy": 6000, "c.json.deflate": 2 * in_deflated}
    reasons = {r.reason.split(" ")[1]: r.reason for r in base.rejected_before_decoding(got, "s", "debezium").collect()}
    assert sorted(reasons) == ["2026/12/e.json.lz4", "d.json.lz4", "e.json.lz4", "f.json.snappy", "g.json.deflate",
                               "h.json.deflate", "i.json.snappy"]
    assert reasons["d.json.lz4"].startswith("file d.json.lz4 cannot be read: not a whole Hadoop lz4 file (block 2 cut short at byte ")
    assert reasons["d.json.lz4"].endswith("what could be read before the damage was landed as usual")
    assert 0 < counts["d.json.lz4"] < 6000  # its whole blocks
    assert reasons["e.json.lz4"].startswith(
        "file e.json.lz4 cannot be read: not a whole Hadoop lz4 file (it is an LZ4 frame file, as the lz4 tool writes it")
    assert "; Spark is not let open it: Hadoop's lz4 codec would allocate 1," in reasons["e.json.lz4"]
    assert "framed Snappy" in reasons["f.json.snappy"]
    for name in ("e.json.lz4", "f.json.snappy", "i.json.snappy", "2026/12/e.json.lz4"):
        assert reasons[name].endswith("none of its records was landed") and name.rsplit("/", 1)[-1] not in counts
    assert reasons["2026/12/e.json.lz4"] == (
        "file 2026/12/e.json.lz4 cannot be read: it has the name of a landed file Spark is not let open, and Spark's file "
        "source leaves files out by name; rename it; none of its records was landed")
    assert reasons["g.json.deflate"].startswith("file g.json.deflate cannot be read: not a whole zlib (.deflate) file (cut short")
    assert reasons["h.json.deflate"].startswith("file h.json.deflate cannot be read: not a whole zlib (.deflate) file (zlib.error")


# ----------------------------------------------------------------------------- CES Avro container files

#: CES ChangeEvents (tests/test_ces.py builds them like the seed page's), enough for several Avro
#: blocks (Avro's writer starts a block about every 64 KB of records).
CES_EVENTS = [
    ces_event("INS", current={"purchase_id": str(i), "customer_name": f"customer {i} " + "x" * 300},
              pk={"purchase_id": str(i)}, seq=i + 1)
    for i in range(150)
]
#: The codecs Spark's Avro writer offers (``uncompressed`` is Avro's ``null``).
AVRO_CODECS = ("snappy", "deflate", "bzip2", "xz", "zstandard", "uncompressed")


@pytest.fixture(scope="module")
def ces_avro(spark, tmp_path_factory) -> dict[str, bytes]:
    """One CES Avro container file of :data:`CES_EVENTS` per codec, as Spark writes it (schema
    :data:`sqlcdc.formats.ces.AVRO_SCHEMA`)."""
    rows = [tuple(e[f.name].encode() if f.name == "data" else e[f.name] for f in ces.AVRO_SCHEMA.fields) for e in CES_EVENTS]
    frame = spark.createDataFrame(rows, ces.AVRO_SCHEMA).coalesce(1)
    out = {}
    for codec in AVRO_CODECS:
        folder = tmp_path_factory.mktemp(f"avro-{codec}")
        frame.write.mode("overwrite").format("avro").option("compression", codec).save(str(folder))
        (part,) = folder.glob("part-*.avro")
        out[codec] = part.read_bytes()
    return out


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def _damaged(good: bytes) -> dict[str, bytes]:
    """Copies of a whole Avro file, each damaged in one way Spark's Avro reader stops at."""
    return {
        "cut": good[: len(good) // 2],  # in the middle of a block
        "junk": good + b"this is not an Avro block\n",
        "sync": _flip(good, len(good) - 1),  # the last block's sync marker
        "not_avro": b'{"specversion": "1.0", "type": "com.microsoft.SQL.CES.DML.V1"}\n',
    }


def test_the_avro_check_passes_whole_files_and_says_where_a_damaged_one_stops(ces_avro, tmp_path):
    def problem(data: bytes) -> str | None:
        path = tmp_path / "f.avro"
        path.write_bytes(data)
        return avro_file_problem(str(path))

    prefix = "cannot be read: not a whole Avro container file "
    for codec, good in ces_avro.items():
        assert problem(good) is None, codec
        bad = _damaged(good)
        assert re.fullmatch(rf"\(block [2-9] cut short at byte {len(good) // 2}\)", problem(bad["cut"]).removeprefix(prefix)), codec
        assert re.fullmatch(rf"\(block \d+ cut short at byte {len(bad['junk'])}\)", problem(bad["junk"]).removeprefix(prefix)), codec
        assert re.fullmatch(r"\(block \d+ at byte \d+ does not end with the header's sync marker\)",
                            problem(bad["sync"]).removeprefix(prefix)), codec
        assert problem(bad["not_avro"]) == prefix + "(no Avro magic bytes Obj\\x01 at its start)"
        assert problem(good[:3]) == prefix + "(no Avro magic bytes Obj\\x01 at its start)"
        assert problem(good[:20]).startswith(prefix + "(header metadata cut short at byte 20")
    # a byte changed inside a compressed block: its codec's data no longer decompresses (snappy:
    # nor matches its CRC32); zstandard blocks are not opened (no reader in Python's library)
    for codec in ("snappy", "deflate", "bzip2", "xz"):
        assert re.fullmatch(rf"\(block 2 at byte \d+ does not decompress as {codec}: .+\)",
                            problem(_flip(ces_avro[codec], len(ces_avro[codec]) // 2)).removeprefix(prefix)), codec
    assert problem(b"") is None  # as an empty file of lines: Spark reads it (with the reader schema) as no records


def _zigzag(n: int) -> bytes:
    """``n`` as Avro writes a long (zig-zag varint)."""
    n, out = (n << 1) ^ (n >> 63), bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _container(meta: dict[str, bytes], blocks: list[bytes], *, negative_count: bool = False) -> bytes:
    """A container file built by hand: a metadata map written in one block (with a negative count,
    its byte size follows, as the spec allows and Avro's writers never do), blocks of one object."""
    entries = b"".join(_zigzag(len(k)) + k.encode() + _zigzag(len(v)) + v for k, v in meta.items())
    head = _zigzag(-len(meta)) + _zigzag(len(entries)) if negative_count else _zigzag(len(meta))
    sync = bytes(range(16))
    return b"Obj\x01" + head + entries + _zigzag(0) + sync + b"".join(_zigzag(1) + _zigzag(len(b)) + b + sync for b in blocks)


def test_the_avro_check_reads_the_header_as_the_spec_writes_it(tmp_path):
    def problem(data: bytes) -> str | None:
        path = tmp_path / "f.avro"
        path.write_bytes(data)
        return avro_file_problem(str(path))

    schema = b'{"type": "record", "name": "R", "fields": [{"name": "s", "type": "string"}]}'
    assert problem(_container({"avro.schema": schema}, [b"\x02a"], negative_count=True)) is None
    assert problem(_container({"avro.schema": schema}, [])) is None  # a header and no block
    assert problem(_container({"avro.schema": schema, "avro.codec": b"lz4"}, [b"\x02a"])).endswith(
        "(avro.codec 'lz4' is none of bzip2, deflate, null, snappy, xz, zstandard)")
    assert problem(_container({"avro.codec": b"null"}, [])).endswith("(no JSON avro.schema in its header)")
    deflate = {"avro.schema": schema, "avro.codec": b"deflate"}
    raw = zlib.compress(b"\x02a")[2:-4]  # raw deflate: no zlib header, no Adler-32
    assert problem(_container(deflate, [raw, raw])) is None
    assert problem(_container(deflate, [raw, raw[:-2]])).endswith(
        f"(block 2 at byte {len(_container(deflate, [raw]))} does not decompress as deflate: "
        "Error -5 while decompressing data: incomplete or truncated stream)")


@pytest.mark.parametrize("damage", ["cut", "junk", "sync", "not_avro"])
def test_without_the_check_spark_stops_at_a_damaged_avro_file(spark, ces_avro, tmp_path, monkeypatch, damage):
    """What the check prevents (and what still happens where it does not run: Databricks): each
    damage stops Spark's Avro reader, so a file the check flags is one Spark cannot read."""
    monkeypatch.delenv(base.STATE_DIR_ENV, raising=False)
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.avro").write_bytes(ces_avro["snappy"])
    assert ces.read_avro(spark, str(landing), streaming=False).count() == len(CES_EVENTS)
    (landing / "b.avro").write_bytes(_damaged(ces_avro["snappy"])[damage])
    with pytest.raises(Exception, match="FAILED_READ_FILE"):
        ces.read_avro(spark, str(landing), streaming=False).count()


def test_avro_files_of_another_writer_schema_are_read_by_avro_resolution_or_quarantined_as_files(spark, tmp_path, monkeypatch):
    """Spark's Avro reader failed the whole read at a file whose writer schema gives a field another
    type (2026-12-06: ``id`` an int, ``segmentindex`` a long, ``data`` a string), stopping the run.
    Now Avro's schema resolution reads what it can (``data`` as a string, a field left out: NULL) and
    a file it cannot is quarantined as a file, naming the field; the other files land."""
    import fastavro

    monkeypatch.setenv(base.STATE_DIR_ENV, str(tmp_path / "state"))
    landing = tmp_path / "landing"
    landing.mkdir()
    seed = json.loads((Path(__file__).parent / "fixtures" / "ces" / "seed_changeevent.avsc").read_text())
    ev = {k: v for k, v in CES_EVENTS[0].items() if k in {f["name"] for f in seed["fields"]}}

    def land(name: str, types: dict, record: dict) -> None:
        doc = {**seed, "fields": [{**f, "type": types.get(f["name"], f["type"])} for f in seed["fields"]
                                  if types.get(f["name"]) != "gone"]}
        with (landing / name).open("wb") as fh:
            fastavro.writer(fh, fastavro.parse_schema(doc), [{k: v for k, v in record.items() if types.get(k) != "gone"}])

    land("as_seed.avro", {}, {**ev, "data": ev["data"].encode()})
    land("data_text.avro", {"data": "string"}, ev)
    land("no_time.avro", {"time": "gone"}, {**ev, "data": ev["data"].encode()})
    land("int_id.avro", {"id": "int"}, {**ev, "id": 7, "data": ev["data"].encode()})
    land("long_index.avro", {"segmentindex": "long"}, {**ev, "data": ev["data"].encode()})
    (landing / "empty.avro").write_bytes(b"")  # landed before its writer wrote it: no records, no quarantine row
    bronze = ces.read_avro(spark, str(landing), streaming=False)  # the whole read no longer stops
    landed = {Path(r.source_file).name: json.loads(r.value) for r in bronze.where(~base.is_rejected_before_decoding()).collect()}
    assert sorted(landed) == ["as_seed.avro", "data_text.avro", "no_time.avro"]
    assert landed["data_text.avro"] == landed["as_seed.avro"] == ev
    assert landed["no_time.avro"] == {k: v for k, v in ev.items() if k != "time"}  # the decoder says what is missing
    streamed = tmp_path / "bronze"
    (ces.read_avro(spark, str(landing)).writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ckpt"))
     .trigger(availableNow=True).start(str(streamed)).awaitTermination())
    q = base.rejected_before_decoding(spark.read.parquet(str(streamed)), "s", "ces").collect()
    assert sorted((Path(r.bronze_file).name, r.reason, r.rules) for r in q) == [
        ("int_id.avro", "file int_id.avro cannot be read as ChangeEvent records: its Avro schema gives field id the type "
         "int, which Avro does not read as string; none of its records was landed", ["unreadable_file"]),
        ("long_index.avro", "file long_index.avro cannot be read as ChangeEvent records: its Avro schema gives field "
         "segmentindex the type long, which Avro does not read as int; none of its records was landed", ["unreadable_file"])]


def test_a_local_streaming_avro_read_keeps_what_it_can_and_adds_a_row_per_damaged_file(spark, ces_avro, tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv(base.STATE_DIR_ENV, str(state))
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.avro").write_bytes(ces_avro["snappy"])
    (landing / "b.avro").write_bytes(ces_avro["deflate"])
    for name, data in _damaged(ces_avro["snappy"]).items():
        (landing / f"{name}.avro").write_bytes(data)
    (landing / "flipped.avro").write_bytes(_flip(ces_avro["snappy"], len(ces_avro["snappy"]) // 2))  # CRC32
    # a block after the last that says it holds 1.5 GB: Avro's reader makes that buffer before reading
    # into it (OutOfMemoryError stopped a 1 GB JVM, 2026-12-06), so Spark is not let open the file
    (landing / "huge.avro").write_bytes(ces_avro["snappy"] + bytes([2]) + _zigzag(1_500_000_000) + b"xyz")
    (landing / "events.json").write_text("not Avro, and the Avro glob leaves it out\n")
    out, ckpt = tmp_path / "bronze", tmp_path / "ckpt"

    def run():
        q = (ces.read_avro(spark, str(landing)).writeStream.format("parquet").option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start(str(out)))
        q.awaitTermination()

    run()
    opened = {Path(p).name for p in ces.read_avro(spark, str(landing), streaming=False).inputFiles()}
    assert "huge.avro" not in opened and "cut.avro" in opened
    bronze = spark.read.parquet(str(out))
    damaged = ["cut.avro", "flipped.avro", "huge.avro", "junk.avro", "not_avro.avro", "sync.avro"]
    assert sorted(Path(r.source_file).name for r in bronze.where(base.is_unreadable_file()).collect()) == damaged
    by_file: dict[str, list[dict]] = {}
    for r in bronze.where(~base.is_unreadable_file()).collect():
        by_file.setdefault(Path(r.source_file).name, []).append(json.loads(r.value))
    key = lambda e: e["logicalid"]  # noqa: E731
    assert sorted(by_file["a.avro"], key=key) == sorted(by_file["b.avro"], key=key) == sorted(CES_EVENTS, key=key)
    assert sorted(by_file["junk.avro"], key=key) == sorted(CES_EVENTS, key=key)  # the junk is after the last block
    # of the others, the records of the blocks before the damage (Spark skips the rest of the file)
    assert set(by_file) <= {"a.avro", "b.avro", "junk.avro", "cut.avro", "sync.avro", "flipped.avro"}
    assert all(e in CES_EVENTS for f in ("cut.avro", "sync.avro", "flipped.avro") for e in by_file.get(f, []))
    assert 0 < len(by_file["cut.avro"]) < len(CES_EVENTS)

    q = base.rejected_before_decoding(bronze, "s", "ces").collect()
    assert sorted((Path(r.bronze_file).name, r.reason.split(" (")[0], r.rules) for r in q) == [
        (name, f"file {name} cannot be read: not a whole Avro container file", ["unreadable_file"]) for name in damaged]
    reasons = {Path(r.bronze_file).name: r.reason for r in q}
    huge = (landing / "huge.avro").stat().st_size
    assert reasons.pop("huge.avro").endswith(
        f"cut short at byte {huge}); Spark is not let open it: Avro's reader would allocate 1,500,000,000 bytes for data "
        "the file does not hold, enough to stop the JVM; none of its records was landed")
    assert all(r.endswith("; what could be read before the damage was landed as usual") for r in reasons.values())
    checked = json.loads((state / "unreadable" / "checked.json").read_text())
    assert sorted(Path(p).name for p in checked) == ["a.avro", "b.avro"]  # whole: not read through again

    run()  # nothing new landed: no new row, the markers are not read twice
    assert spark.read.parquet(str(out)).count() == bronze.count()


def test_damage_the_check_cannot_see_stops_the_read_rather_than_losing_the_rest_of_the_file(spark, ces_avro, tmp_path,
                                                                                           monkeypatch):
    """An uncompressed Avro block carries no checksum: a record byte changed inside it keeps the
    framing whole, so the check passes the file, and Spark fails on the record. With no damaged file
    known, the local read is strict (no ``ignoreCorruptFiles``): the run stops naming the file, as it
    would without sqlcdc, instead of silently skipping the rest of the file."""
    good = ces_avro["uncompressed"]
    at = good.index(good[-16:]) + 16  # the header's sync marker ends the header; the first block starts here
    for _ in range(2):  # skip the block's object count and byte size (zig-zag varints)
        while good[at] & 0x80:
            at += 1
        at += 1
    bad = good[:at] + b"\x01" + good[at + 1:]  # the first record's first union index: -1
    state, landing = tmp_path / "state", tmp_path / "landing"
    landing.mkdir()
    (landing / "a.avro").write_bytes(good)
    (landing / "b.avro").write_bytes(bad)
    assert avro_file_problem(str(landing / "b.avro")) is None  # invisible to the check
    monkeypatch.setenv(base.STATE_DIR_ENV, str(state))
    q = (ces.read_avro(spark, str(landing)).writeStream.format("parquet")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start(str(tmp_path / "out")))
    with pytest.raises(Exception, match="b.avro"):
        q.awaitTermination()
