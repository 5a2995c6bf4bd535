"""Reading landing folders: one typed description of the read (:class:`FileRead`), built by
:func:`file_read` from where the run is, and opened by :func:`open_files`.

A local run uses Spark's file source with the raw local file system (:data:`LANDED_FILE_OPTIONS`).
On Databricks a streaming read is Auto Loader (``format("cloudFiles")`` with ``cloudFiles.format``
the decoder's file format): it discovers new files incrementally in cloud storage, and a Lakeflow
pipeline manages its schema and checkpoint locations. Batch reads (metadata discovery, ``validate``)
stay Spark's file source on both.

Example::

    read = file_read("/landing/inventory", file_format="text", streaming=True, glob="*.json")
    read.format, read.options      # ('text', {'fs.file.impl': ..., 'pathGlobFilter': '*.json'}) locally
    frame = open_files(spark, read)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from sqlcdc import runtime

__all__ = ["LANDED_FILE_OPTIONS", "NESTED_FOLDERS", "FileRead", "file_read", "open_files"]

#: Hadoop options for every local read of landed files. Hadoop's default local file system checks a
#: ``.<name>.crc`` beside each file it opens, and builds that name as a Path -- which fails for a
#: file whose name holds ``:`` (``a:b.json`` parses as scheme ``a``), stopping the whole read with
#: FAILED_READ_FILE. Landed files never carry Hadoop checksums, so they are read with the raw
#: local file system (uncached, or the session's cached checksum one is handed back). They only
#: apply to ``file:`` paths; remote landings (``abfss://``, ``s3://``) are untouched.
LANDED_FILE_OPTIONS = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


#: Files in folders below the landing folder are landed files too, as Auto Loader reads them
#: (``landing/2026/12/06/x.json``). Spark's file source without it left such files out without a
#: word, and stopped the whole read at a ``key=value`` folder beside landed files
#: (CONFLICTING_DIRECTORY_STRUCTURES). Folders and files named ``_*`` or ``.*`` stay skipped.
NESTED_FOLDERS = {"recursiveFileLookup": "true"}


@dataclass(frozen=True)
class FileRead:
    """How Spark is asked to read a landing folder: ``spark.read[Stream].format(format)
    .options(**options).load(path)`` (with ``schema`` when the file format needs one)."""

    path: str
    format: str
    streaming: bool
    options: Mapping[str, str] = field(default_factory=dict)
    schema: StructType | None = None


def file_read(
    landing: str,
    *,
    file_format: str,
    streaming: bool,
    glob: str | None = None,
    schema: StructType | None = None,
    ignore_corrupt: bool = False,
    databricks: bool | None = None,
    avro_schema: str | None = None,
) -> FileRead:
    """The read of ``landing`` for files of ``file_format`` (``text``, ``avro``, ...).

    ``glob`` selects file names (``pathGlobFilter``); ``ignore_corrupt`` keeps what can be read of
    a damaged compressed or Avro file (the local run quarantines the file itself, :mod:`sqlcdc.formats.base`).
    ``databricks`` defaults to :func:`sqlcdc.runtime.is_databricks`. ``avro_schema``: the reader
    schema (Avro JSON) of Avro files, so Avro's schema resolution reads what compatible writers wrote.
    """
    on_databricks = runtime.is_databricks() if databricks is None else databricks
    options: dict[str, str] = {}
    if on_databricks and streaming:
        fmt = "cloudFiles"
        options["cloudFiles.format"] = file_format
    else:
        fmt = file_format
        options.update(NESTED_FOLDERS)
        if not on_databricks:
            options.update(LANDED_FILE_OPTIONS)
    if glob:
        options["pathGlobFilter"] = glob
    if ignore_corrupt:
        options["ignoreCorruptFiles"] = "true"
    if avro_schema:
        options["avroSchema"] = avro_schema
    return FileRead(path=landing, format=fmt, streaming=streaming, options=options, schema=schema)


def open_files(spark: SparkSession, read: FileRead) -> DataFrame:
    """The DataFrame of ``read`` (streaming or batch, as it says)."""
    reader = (spark.readStream if read.streaming else spark.read).format(read.format).options(**read.options)
    if read.schema is not None:
        reader = reader.schema(read.schema)
    return reader.load(read.path)
