"""How landing folders are read: Spark's file source locally, Auto Loader (cloudFiles) on Databricks,
with the file format the decoder declares. The exact format/options of each case, and that every
file-landing decoder goes through this one function."""

from __future__ import annotations

import pytest

from sqlcdc import formats
from sqlcdc.config import SourceConfig
from sqlcdc.formats import base, ces
from sqlcdc.transport import files
from sqlcdc.transport.files import LANDED_FILE_OPTIONS, FileRead, file_read

RAW_LOCAL = {"fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem", "fs.file.impl.disable.cache": "true"}
NESTED = {"recursiveFileLookup": "true"}  # files in folders below the landing are read (Auto Loader reads them)


def test_local_streaming_text_is_sparks_file_source_on_the_raw_local_file_system():
    read = file_read("/landing/inv", file_format="text", streaming=True, glob="*.json", databricks=False)
    assert read == FileRead(path="/landing/inv", format="text", streaming=True,
                            options={**NESTED, **RAW_LOCAL, "pathGlobFilter": "*.json"})
    assert LANDED_FILE_OPTIONS == RAW_LOCAL


def test_local_read_of_damaged_files_keeps_what_it_can():
    read = file_read("/l", file_format="text", streaming=True, ignore_corrupt=True, databricks=False)
    assert read.options == {**NESTED, **RAW_LOCAL, "ignoreCorruptFiles": "true"}


def test_databricks_streaming_is_auto_loader_with_the_decoders_file_format():
    assert file_read("abfss://c@a.dfs.core.windows.net/cdc", file_format="text", streaming=True, glob="*.json",
                     databricks=True) == FileRead(
        path="abfss://c@a.dfs.core.windows.net/cdc", format="cloudFiles", streaming=True,
        options={"cloudFiles.format": "text", "pathGlobFilter": "*.json"})
    avro = file_read("/Volumes/main/cdc/land/ces", file_format="avro", streaming=True, databricks=True,
                     schema=ces.AVRO_SCHEMA)
    assert (avro.format, dict(avro.options), avro.schema) == ("cloudFiles", {"cloudFiles.format": "avro"}, ces.AVRO_SCHEMA)


def test_databricks_batch_reads_stay_sparks_file_source():
    read = file_read("/Volumes/main/cdc/land/qlik", file_format="text", streaming=False, glob="*.json", databricks=True)
    assert (read.format, dict(read.options)) == ("text", {**NESTED, "pathGlobFilter": "*.json"})


def test_runtime_decides_when_not_told(monkeypatch):
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    assert file_read("/l", file_format="text", streaming=True).format == "cloudFiles"
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION")
    assert file_read("/l", file_format="text", streaming=True).format == "text"


class _Opened(Exception):
    pass


@pytest.mark.parametrize("fmt, options, expected", [
    ("debezium", {}, [("cloudFiles", "text", None)]),
    ("qlik", {}, [("cloudFiles", "text", None)]),
    ("ces", {"serialization": "json"}, [("cloudFiles", "text", ces.DEFAULT_JSON_GLOB)]),
    ("ces", {"serialization": "avro"}, [("cloudFiles", "avro", ces.DEFAULT_AVRO_GLOB)]),
])
def test_every_streaming_file_decoder_reads_through_auto_loader_on_databricks(monkeypatch, spark, fmt, options, expected):
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")
    monkeypatch.delenv(base.STATE_DIR_ENV, raising=False)
    seen: list[FileRead] = []

    def fake_open(session, read: FileRead):
        seen.append(read)
        raise _Opened

    monkeypatch.setattr(files, "open_files", fake_open)
    monkeypatch.setattr(base, "open_files", fake_open)  # text and Avro: base.read_landed_files
    source = SourceConfig(name="s", format=fmt, landing="/Volumes/main/cdc/land/s", options=options, file="p.yml")
    with pytest.raises(_Opened):
        formats.get(fmt).read_bronze(spark, source, streaming=True)
    assert [(r.format, r.options["cloudFiles.format"], r.options.get("pathGlobFilter")) for r in seen] == expected
    assert all(r.streaming and r.path == "/Volumes/main/cdc/land/s" and "fs.file.impl" not in r.options for r in seen)


def test_one_function_reads_every_source_wherever_it_lands(monkeypatch):
    """transport.read_bronze: topics through sqlcdc.transport.kafka, landing folders through the decoder's
    file layout; streaming unless the decoder reads its files as a batch (change-table exports)."""
    from sqlcdc import transport
    from sqlcdc.transport import kafka
    from sqlcdc.formats import cdc_ct, debezium

    calls = []
    monkeypatch.setattr(kafka, "read_bronze", lambda spark, source, streaming: calls.append(("kafka", streaming)))
    monkeypatch.setattr(debezium.Debezium, "read_bronze",
                        staticmethod(lambda spark, source, streaming: calls.append(("debezium files", streaming))))
    monkeypatch.setattr(cdc_ct.ChangeTables, "read_bronze",
                        staticmethod(lambda spark, source, streaming: calls.append(("cdc_ct files", streaming))))
    topic = SourceConfig(name="k", format="debezium", landing=None, kafka={"bootstrap_servers": "b:9092", "topic": "t"})
    hub = SourceConfig(name="h", format="qlik", landing=None, event_hubs={"namespace": "n", "event_hub": "e"})
    files_ = SourceConfig(name="f", format="debezium", landing="/l")
    ct = SourceConfig(name="c", format="cdc_ct", landing="/l")
    for source in (topic, hub, files_, ct):
        transport.read_bronze(None, source)
    transport.read_bronze(None, files_, streaming=False)
    assert calls == [("kafka", True), ("kafka", True), ("debezium files", True), ("cdc_ct files", False),
                     ("debezium files", False)]
    assert [transport.is_stream(s) for s in (topic, hub, files_, ct)] == [True, True, False, False]
    assert [transport.bronze_is_streaming(s) for s in (topic, hub, files_, ct)] == [True, True, True, False]
