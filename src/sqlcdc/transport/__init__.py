"""Where bronze comes from, decided in one place: :func:`read_bronze` reads a source wherever it
lands, and :func:`is_stream` / :func:`bronze_is_streaming` say what kind of relation that is.

- landing folders (:mod:`sqlcdc.transport.files`): each decoder says what its landed files are
  (text lines, Avro containers; change-table exports file by file) and the files module decides
  how Spark reads them -- Spark's file source locally, Auto Loader (``cloudFiles``) on Databricks;
- Kafka and Event Hubs (:mod:`sqlcdc.transport.kafka`): the topic(s), whatever the producer.

The change-table JDBC reader (:mod:`sqlcdc.transport.jdbc`) lands Parquet windows into a landing folder,
which is then read like any export.

Example::

    from sqlcdc import transport
    bronze = transport.read_bronze(spark, cfg.sources["inventory"], streaming=False)
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from sqlcdc.config import SourceConfig

__all__ = ["bronze_is_streaming", "is_stream", "read_bronze"]


def is_stream(source: SourceConfig) -> bool:
    """True when the source is read from a topic (Kafka, Event Hubs), not a landing folder."""
    return source.location_kind in ("kafka", "event_hubs")


def bronze_is_streaming(source: SourceConfig) -> bool:
    """Whether the source's bronze is a streaming relation (a streaming table): topics always,
    landing folders when the decoder reads them as a stream (change-table exports are read as a
    batch, file by file, so their bronze is a materialized view)."""
    from sqlcdc import formats

    return is_stream(source) or formats.get(source.format).bronze_streaming


def read_bronze(spark: SparkSession, source: SourceConfig, *, streaming: bool | None = None) -> DataFrame:
    """The source's bronze rows (``record_id, value, source_file, ingest_time`` and, from topics, the
    Kafka coordinates) wherever it lands; ``streaming`` defaults to :func:`bronze_is_streaming`."""
    if streaming is None:
        streaming = bronze_is_streaming(source)
    if is_stream(source):
        from sqlcdc.transport import kafka

        return kafka.read_bronze(spark, source, streaming=streaming)
    from sqlcdc import formats

    return formats.get(source.format).read_bronze(spark, source, streaming=streaming)
