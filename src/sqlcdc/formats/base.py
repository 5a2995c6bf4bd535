"""Pieces decoders share: reading landed text files into bronze."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming import DataStreamReader

#: Hadoop options for every read of landed files. Hadoop's default local file system checks a
#: ``.<name>.crc`` beside each file it opens, and builds that name as a Path -- which fails for a
#: file whose name holds ``:`` (``a:b.json`` parses as scheme ``a``), stopping the whole read with
#: FAILED_READ_FILE. Landed files never carry Hadoop checksums, so they are read with the raw
#: local file system (uncached, or the session's cached checksum one is handed back). They only
#: apply to ``file:`` paths; remote landings (``abfss://``, ``s3://``) are untouched.
LANDED_FILE_OPTIONS = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


def landed_files_reader(spark: SparkSession, *, streaming: bool = False) -> DataFrameReader | DataStreamReader:
    """``spark.read`` (or ``readStream``) set up for landed files (see :data:`LANDED_FILE_OPTIONS`)."""
    return (spark.readStream if streaming else spark.read).options(**LANDED_FILE_OPTIONS)


def read_text_lines(spark: SparkSession, landing: str, *, streaming: bool = True, glob: str | None = None) -> DataFrame:
    """Landed files, one envelope per line, as bronze rows: ``record_id, value, source_file, ingest_time``.

    ``record_id`` is a hash of file path and line text: stable across re-reads, so lineage
    from silver and quarantine back to bronze survives a full refresh.
    """
    reader = landed_files_reader(spark, streaming=streaming).format("text")
    if glob:
        reader = reader.option("pathGlobFilter", glob)
    raw = reader.load(landing)
    return bronze_columns(raw.select("value", F.col("_metadata.file_path").alias("source_file")))


def bronze_columns(df: DataFrame) -> DataFrame:
    """Add ``record_id`` and ``ingest_time`` to a frame with ``value`` and ``source_file``."""
    return df.select(
        record_id(F.col("source_file"), F.col("value")).alias("record_id"),
        "value",
        "source_file",
        F.current_timestamp().alias("ingest_time"),
    )


def record_id(*parts: Column) -> Column:
    return F.sha2(F.concat_ws("\u0001", *[F.coalesce(p.cast("string"), F.lit("")) for p in parts]), 256).substr(1, 32)


def one_json_value(value: Column) -> Column:
    """True when ``value`` is exactly one JSON value; false for invalid JSON and for a line holding
    two documents (``{...}{...}``, ``{...} {...}``, ``{...},{...}``), which Spark's JSON readers
    (``from_json``, ``parse_json``) would read as the first alone, silently losing the rest.

    Wrapped in ``[...]``, one value is an array of one element; two are an array of two or no
    valid JSON at all. ``json_array_length`` skips over the elements without building them.

    >>> # spark.sql("SELECT json_array_length('[' || '{\\"a\\":1}{\\"b\\":2}' || ']')") -> NULL
    """
    return F.coalesce(F.json_array_length(F.concat(F.lit("["), value, F.lit("]"))) == 1, F.lit(False))
