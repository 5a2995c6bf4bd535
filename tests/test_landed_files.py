"""Landed text files that cannot be read to their end (issue 16): a ``.gz``/``.bz2`` cut short or
not compressed at all stopped the whole read (Spark's codecs fail mid-file). In a local run the
file is checked first (plain Python), Spark keeps what it could read of it, and the streaming
bronze gets one row for the file that the pipeline quarantines with the reason."""

from __future__ import annotations

import bz2
import gzip
import json
import os
from pathlib import Path

import pytest

from sqlcdc.formats import base
from sqlcdc.formats import debezium

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
    assert list(checked) == [str(files["whole"])]  # remembered whole: not decompressed again

    before = {p.name: p.stat().st_mtime_ns for p in markers.iterdir()}
    files["whole"].write_bytes(b"replaced by something that is not gzip")  # new size: checked again
    os.utime(files["whole"], ns=(1, 1))
    base.check_landed_files(str(tmp_path / "landing"), "*.{json,json.gz,json.bz2}", state)
    assert {p.name: p.stat().st_mtime_ns for p in markers.iterdir() if p.name in before} == before  # markers kept as they were
    assert sorted(_markers(markers)) == ["b.json.gz", "c.json.gz", "d.json.gz", "e.json.bz2"]


def test_a_whole_file_is_decompressed_once_across_runs(tmp_path, monkeypatch):
    """Change-table exports are re-read every run (batch): their .gz files are checked once."""
    files = _land(tmp_path / "landing")
    first = base.FileChecks(tmp_path / "state")
    assert first.problem(str(files["whole"])) is None and first.problem(str(files["cut"])).startswith("cannot be read")
    first.save()

    def never(path):
        raise AssertionError(f"{path} decompressed again")

    monkeypatch.setattr(base, "compressed_file_problem", never)
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
    records = bronze.where(~base.is_unreadable_file())
    by_file = {}
    for r in records.collect():
        by_file.setdefault(Path(r.source_file).name, []).append(r.value)
    assert sorted(by_file["a.json"]) == sorted(by_file["b.json.gz"]) == sorted(GOOD)
    assert by_file["h.json"] == ['{"__sqlcdc_unreadable_file": null}']
    assert "d.json.gz" not in by_file and ".f.json.gz" not in by_file and "g.txt.gz" not in by_file
    # what Spark decompressed before the cut: lines of the file (the last one may be cut short)
    assert all(any(g.startswith(v) for g in GOOD) for v in by_file.get("c.json.gz", []))

    q = base.unreadable_file_rows(bronze, "s", "debezium").collect()
    assert sorted((Path(r.bronze_file).name, r.reason.split(" (")[0], r.rules) for r in q) == [
        ("c.json.gz", "file c.json.gz cannot be read: not a whole gzip file", ["unreadable_file"]),
        ("d.json.gz", "file d.json.gz cannot be read: not a whole gzip file", ["unreadable_file"]),
        ("e.json.bz2", "file e.json.bz2 cannot be read: not a whole bzip2 file", ["unreadable_file"]),
    ]

    run()  # nothing new landed: no new row, the markers are not read twice
    assert spark.read.parquet(str(out)).count() == bronze.count()
