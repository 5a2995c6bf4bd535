"""Declare the pipeline's tables from config. The files in ``pipelines/`` are three calls to this.

Tables, per source ``S`` and onboarded table ``T`` (names overridable in config):

====================  =================================  ==========================================
table                 kind                               content
====================  =================================  ==========================================
``bronze_S``          streaming table                    raw envelopes as received + file, ingest time
``silver_T``          streaming table (or materialized   canonical changes (:mod:`sqlcdc.model`)
                      view for decoders that need state)
``quarantine_S``      streaming table (or m. view)       records that could not become changes, with
                                                         the reason and lineage to bronze (a m. view
                                                         reads each table's part from a temporary
                                                         view: :func:`part_view`)
``gold_T_scd1``       applied after the run locally      current state (SCD type 1)
                      (:mod:`sqlcdc.gold`); Databricks:
                      an AUTO CDC target, or a view
                      over recomputed silver
``gold_T_scd2``       same                               history with ``__START_AT``/``__END_AT``
====================  =================================  ==========================================

The config file's path reaches the definition files as the Spark conf ``sqlcdc.config`` (set
by ``sqlcdc run`` locally, by the bundle's pipeline ``configuration`` on Databricks).

Example (``pipelines/silver.py``)::

    from sqlcdc import pipeline
    pipeline.declare_silver(pipeline.load())
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Callable, Sequence

from pyspark import pipelines as dp
from pyspark.sql import Column, DataFrame, SparkSession

from sqlcdc import dq_metrics, expectations, formats, frames, gold, reshape, runtime, transport
from sqlcdc.config import PipelineConfig, SourceConfig, TableConfig, load_pipeline
from sqlcdc.formats.base import is_rejected_before_decoding, one_scan_per_source, rejected_before_decoding
from sqlcdc.values import ColumnSpec

CONFIG_CONF = "sqlcdc.config"


def spark() -> SparkSession:
    return SparkSession.active()


def load(path: str | None = None) -> PipelineConfig:
    """The pipeline config named by the Spark conf ``sqlcdc.config`` (or ``path``)."""
    path = path or spark().conf.get(CONFIG_CONF, None)
    if not path:
        raise RuntimeError(
            f"Spark conf {CONFIG_CONF!r} is not set: run the pipeline with `sqlcdc run --config PATH`, "
            "or set it in the pipeline's configuration (databricks.yml)"
        )
    return _load_cached(path)


@lru_cache(maxsize=None)
def _load_cached(path: str) -> PipelineConfig:
    return load_pipeline(path)


_columns: dict[tuple[str, str], tuple[ColumnSpec, ...]] = {}


def columns(table: TableConfig) -> tuple[ColumnSpec, ...]:
    """The typed columns of ``table``, as its producer's decoder sees them (looked up once)."""
    key = (table.source.name, table.name)
    if key not in _columns:
        _columns[key] = tuple(formats.get(table.source.format).columns_for(table, table.source, spark()))
    return _columns[key]


_keys: dict[tuple[str, str], tuple[str, ...]] = {}


def keys(table: TableConfig) -> list[str]:
    """Key columns: ``keys:`` from config, else what the producer's metadata says (Qlik's
    ``primaryKeyPosition``, via the decoder's optional ``keys_for``). Looked up once, at
    definition time: a query function may not scan the landing folder (SDP counts it as analysis)."""
    if table.keys:
        return list(table.keys)
    key = (table.source.name, table.name)
    if key not in _keys:
        decoder = formats.get(table.source.format)
        found = decoder.keys_for(table, table.source, spark())
        _keys[key] = tuple(found)
    return list(_keys[key])


_waiting: dict[tuple[str, str], str | None] = {}


def waiting(table: TableConfig) -> str | None:
    """Why ``table`` has no silver this run -- its producer's metadata, which gives its columns or
    keys, has not landed yet (:class:`sqlcdc.formats.NotYetDiscovered`) -- else None."""
    key = (table.source.name, table.name)
    if key not in _waiting:
        try:
            columns(table)
            keys(table)
            _waiting[key] = None
        except formats.NotYetDiscovered as e:
            _waiting[key] = "waiting for metadata: " + "; ".join(e.problems)
    return _waiting[key]


def ready(cfg: PipelineConfig) -> PipelineConfig:
    """``cfg`` without the tables that are :func:`waiting`."""
    return dataclasses.replace(cfg, tables=tuple(t for t in cfg.tables if waiting(t) is None))


# --- declarations ------------------------------------------------------------------------------


def declare_bronze(cfg: PipelineConfig) -> None:
    """One streaming bronze table per source: envelopes as received, with ingest metadata."""
    for source in cfg.sources.values():
        _bronze(source)


def _bronze(source: SourceConfig) -> None:
    comment = f"Raw {source.format} envelopes from source {source.name}, as received."
    # A decoder that reads its landing as a batch (change-table exports: Parquet/CSV/JSON files
    # with per-file schemas) gets a materialized view; streaming tables need streaming relations.
    define = dp.table if transport.bronze_is_streaming(source) else dp.materialized_view

    @define(name=source.bronze_table, comment=comment)
    def bronze() -> DataFrame:
        return transport.read_bronze(spark(), source)


def declare_silver(cfg: PipelineConfig) -> None:
    """Per table, silver changes (expectation-checked); per source, a quarantine table for what could
    not be decoded or failed a quarantine rule and a ``dropped_`` table for expect_or_drop; and the
    ``dq_metrics`` materialized view over them (:mod:`sqlcdc.dq_metrics`). Columns and keys found
    in what has landed are looked up with one scan of each source (:func:`~sqlcdc.formats.base.one_scan_per_source`)."""
    with one_scan_per_source():
        for source in cfg.sources.values():
            tables = cfg.tables_of(source.name)
            if formats.get(source.format).streaming:
                _streaming_silver(source, tables)
            else:
                _batch_silver(source, tables)
        dq_metrics.declare(ready(cfg), columns)


def _streaming_silver(source: SourceConfig, tables: list[TableConfig]) -> None:
    decoder = formats.get(source.format)
    comment = f"Records of source {source.name} that did not become changes, with the reason."
    dp.create_streaming_table(source.quarantine_table, comment=comment)
    if tables:
        dp.create_streaming_table(
            dq_metrics.dropped_table(source),
            comment=f"Changes of source {source.name} dropped by expect_or_drop rules: lineage and rule names.",
        )
    envelope = expectations.envelope_schema(decoder)
    if envelope:
        expectations.prepare_envelope_check(envelope)

    def stored() -> DataFrame:
        return spark().readStream.table(source.bronze_table)

    bronze = Bronze(decoder, stored, envelope)
    for table in tables:
        _streaming_table_flows(decoder, source, table, bronze)

    dp.append_flow(target=source.quarantine_table, name=f"unrouted_{source.name}")(
        unrouted_query(decoder, source, tables, stored))


def unrouted_query(decoder, source: SourceConfig, tables: list[TableConfig],
                   stored: Callable[[], DataFrame]) -> Callable[[], DataFrame]:
    """The query of a streaming source's ``unrouted_<source>`` flow, its own rejects in one flow:
    records no table takes, envelopes that fail their JSON Schema, and what no decoder sees (rows
    for unreadable files, records that are not UTF-8 text: :func:`~sqlcdc.formats.base.rejected_before_decoding`).
    ``stored`` reads the source's bronze table. One flow, not one per kind: SDP resolves every flow
    into a table again as each of them starts, so a flow more into ``quarantine_<source>`` costs a
    resolution of all the others (the envelope check had a flow of its own before:
    :func:`sqlcdc.cli.run.earlier_flow_layout`)."""
    def unrouted() -> DataFrame:
        return frames.union_all(source_rejects(decoder, source, tables, stored), by_name=True)

    return unrouted


def source_rejects(decoder, source: SourceConfig, tables: list[TableConfig],
                   stored: Callable[[], DataFrame]) -> list[DataFrame]:
    """A source's own quarantine rows, before any table's decode: records no table takes
    (``decoder.unrouted``), what no decoder sees (:func:`~sqlcdc.formats.base.rejected_before_decoding`),
    and envelopes that fail their JSON Schema (when the format has one). ``stored`` reads bronze."""
    envelope = expectations.envelope_schema(decoder)
    bronze = Bronze(decoder, stored, envelope)
    parts = [decoder.unrouted(bronze(), source, tables),
             rejected_before_decoding(stored(), source.name, decoder.name)]
    if envelope:
        parts.append(expectations.invalid_envelopes(bronze.landed(), decoder, envelope, source))
    return parts


def _checked(decoder, table: TableConfig, cols, bronze: Bronze) -> DataFrame:
    """Decoded changes of ``table`` with its expectations evaluated (:func:`sqlcdc.expectations.check`)."""
    return expectations.check(bronze.decode(table, cols).changes, table, cols)


def table_queries(decoder, table: TableConfig, cols: list[ColumnSpec], bronze: Bronze,
                  read_decoded: Callable[[], DataFrame] | None = None) -> dict[str, Callable[[], DataFrame]]:
    """A table's flow queries by name, each a function of no arguments as SDP calls it: ``silver``
    (changes that pass the table's expectations), ``quarantine`` (records that did not decode, and
    changes a quarantine rule failed), ``dropped`` (changes an ``expect_or_drop`` rule removed; for
    a table without drop rules no rows, and no decode: :func:`sqlcdc.expectations.none_dropped`).
    ``bronze`` is the source's :class:`Bronze` (its checked records, and the table's decode).
    ``tests/connect_resolution.py`` resolves the same functions on Spark Connect.

    A batch decoder's table (recomputed each run) also has ``decoded``: every record decoded and
    checked once (:func:`sqlcdc.expectations.checked_rows`), which the pipeline stores and the
    other three read back with ``read_decoded`` (default: ``decoded`` itself, one plan)."""
    if not formats.get(table.source.format).streaming:
        return _stored_queries(decoder, table, cols, bronze, read_decoded)

    def quarantine() -> DataFrame:
        # One flow for both parts, not two: SDP resolves every flow into quarantine_<source> again
        # when any of them starts; and one copy of the decode when the decoder keeps its frame.
        return expectations.quarantine_of(bronze.decode(table, cols), table, cols)

    def dropped() -> DataFrame:
        if not expectations.drops(table):  # most tables: a filter over bronze, no decode to resolve and plan
            return expectations.none_dropped(bronze(), table)
        return expectations.dropped(_checked(decoder, table, cols, bronze), table)

    return {
        "silver": lambda: expectations.passed(_checked(decoder, table, cols, bronze), table),
        "quarantine": quarantine,
        "dropped": dropped,
    }


def _stored_queries(decoder, table: TableConfig, cols: list[ColumnSpec], bronze: Bronze,
                    read_decoded: Callable[[], DataFrame] | None) -> dict[str, Callable[[], DataFrame]]:
    """:func:`table_queries` of a batch decoder's table: ``decoded`` once, the rest read from it."""

    def decoded() -> DataFrame:
        return expectations.checked_rows(bronze.decode(table, cols), table, cols)

    stored = read_decoded or decoded

    def quarantine() -> DataFrame:
        # The decode again, for its reject columns only (names over its rows), not for its plan.
        return expectations.stored_quarantine(stored(), table, bronze.decode(table, cols).rejected)

    def dropped() -> DataFrame:
        if not expectations.drops(table):
            return expectations.none_dropped(bronze(), table)
        return expectations.stored_dropped(stored(), table)

    return {
        "decoded": decoded,
        "silver": lambda: expectations.stored_passed(stored(), table),
        "quarantine": quarantine,
        "dropped": dropped,
    }


def _streaming_table_flows(decoder, source: SourceConfig, table: TableConfig, bronze) -> None:
    cols = list(columns(table))
    queries = table_queries(decoder, table, cols, bronze)
    silver = queries["silver"]

    if runtime.is_databricks():  # pragma: no cover - native expectations for the event log / UI
        silver = _databricks_checked_view(decoder, table, cols, bronze, silver)

    dp.table(
        name=table.silver_table,
        comment=table.comment or f"Changes of {table.qualified} ({source.format}), canonical model.",
        table_properties=table.table_properties or None,
    )(silver)

    dp.append_flow(target=source.quarantine_table, name=f"quarantine_{table.name}")(queries["quarantine"])
    dp.append_flow(target=dq_metrics.dropped_table(source), name=f"dropped_{table.name}")(queries["dropped"])


def _databricks_checked_view(decoder, table: TableConfig, cols, bronze, silver):  # pragma: no cover
    """On Databricks: the rules also run as native ``dp.expect_all*`` on a view of the checked rows
    (the table's columns at top level, as the constraints name them); silver reads that view."""
    view = f"{table.silver_table}_expectations"

    def checked() -> DataFrame:
        return _checked(decoder, table, cols, bronze)

    dp.temporary_view(name=view)(expectations.with_databricks_expectations(checked, table, dp))

    def silver_from_view() -> DataFrame:
        src = spark().readStream.table(view) if formats.get(table.source.format).streaming else spark().read.table(view)
        return expectations.passed(src, table)

    return silver_from_view


def _batch_silver(source: SourceConfig, tables: list[TableConfig]) -> None:
    """Decoders that pair or reassemble records recompute silver from all of bronze each run."""
    decoder = formats.get(source.format)
    envelope = expectations.envelope_schema(decoder)
    if envelope:
        expectations.prepare_envelope_check(envelope)

    def stored() -> DataFrame:
        return spark().read.table(source.bronze_table)

    bronze = Bronze(decoder, stored, envelope)
    waits = [(t, why) for t in tables if (why := waiting(t))]
    for t, why in waits:
        print(f"sqlcdc: table {t.qualified} has no silver this run ({why})", flush=True)
    decoded = [t for t in tables if not waiting(t)]
    _rebuild_if_reshaped(decoded)
    for table in decoded:
        _batch_table(decoder, table, bronze)

    dp.materialized_view(
        name=source.quarantine_table, comment=f"Records of source {source.name} that did not become changes, with the reason."
    )(source_quarantine_query(decoder, source, tables, stored, waits))

    if decoded:
        dp.materialized_view(
            name=dq_metrics.dropped_table(source),
            comment=f"Changes of source {source.name} dropped by expect_or_drop rules: lineage and rule names.",
        )(source_dropped_query(decoded, bronze))


@dataclasses.dataclass(frozen=True)
class Bronze:
    """A source's bronze as its decoder reads it: ``stored()`` reads the records (the
    ``bronze_<source>`` table). Calling the value gives what a decoder sees: the :meth:`landed`
    records whose envelope passes the format's JSON Schema (``envelope``, when it has one);
    :meth:`decode` decodes a table from them through :meth:`sqlcdc.formats.Decoder.decode_landed`,
    so a decoder may admit envelopes it has proven valid without the check.

    >>> bronze = Bronze(decoder, lambda: spark().readStream.table(source.bronze_table), envelope)  # doctest: +SKIP
    >>> bronze().count(); bronze.decode(table, columns).changes  # doctest: +SKIP
    """

    decoder: formats.Decoder
    stored: Callable[[], DataFrame]
    envelope: str | None = None

    def landed(self) -> DataFrame:
        """The records a decoder may see (not :func:`~sqlcdc.formats.base.is_rejected_before_decoding`'s)."""
        return self.stored().where(~is_rejected_before_decoding())

    def admit(self, frame: DataFrame, proven: Column | None = None) -> DataFrame:
        """The rows of ``frame`` whose envelope is valid, ``proven`` ones unchecked (:func:`sqlcdc.expectations.valid_envelopes`)."""
        return expectations.valid_envelopes(frame, self.decoder, self.envelope, proven) if self.envelope else frame

    def __call__(self) -> DataFrame:
        return self.admit(self.landed())

    def decode(self, table: TableConfig, columns: list[ColumnSpec]) -> formats.Decoded:
        return self.decoder.decode_landed(self.landed(), table, columns, self.admit)


def part_view(kind: str, table: TableConfig) -> str:
    """The temporary view holding ``table``'s part (``kind``: ``quarantine`` or ``dropped``) of its
    batch source's view of that kind (the parts, like silver, read the table's records decoded once
    a run: ``TableConfig.decoded_table``). Each part is a whole decode (~70-90 of the 100 plan levels
    SDP can send for one flow, up to megabytes for a wide table), so the source's view reads the
    parts by name and its own plan stays shallow and small whatever the number of tables: as one
    union, a CES source of ~30 tables was too deep to define, and 41 change tables of 60 columns
    over Spark Connect's 128 MB message limit. A temporary view is not stored: the parts cost no
    write, and the source's view computes what it did before."""
    return f"{kind}_{table.source.name}__{table.name}"


def source_quarantine_query(decoder, source: SourceConfig, tables: list[TableConfig], stored: Callable[[], DataFrame],
                            waits: Sequence[tuple[TableConfig, str]] = (),
                            read: Callable[[str], DataFrame] | None = None) -> Callable[[], DataFrame]:
    """The query of a batch source's ``quarantine_<source>`` materialized view: its own rejects
    (unrouted records, unreadable files, bad envelopes), the records of tables still ``waits``-ing
    (table, why), and every other table's quarantine, read from its :func:`part_view` (``read``, by
    default the pipeline session's ``read.table``). One balanced union (:func:`sqlcdc.frames.union_all`)."""
    bronze = Bronze(decoder, stored, expectations.envelope_schema(decoder))
    waiting_names = {t.name for t, _ in waits}

    def quarantine() -> DataFrame:
        by_name = read or spark().read.table
        parts = source_rejects(decoder, source, tables, stored)  # a waiting table's records are its own
        parts += [decoder.waiting(bronze(), source, table, why) for table, why in waits]
        parts += [by_name(part_view("quarantine", t)) for t in tables if t.name not in waiting_names]
        return frames.union_all(parts, by_name=True)  # the same columns (model.quarantine_row)

    return quarantine


def source_dropped_query(decoded: list[TableConfig], bronze: Callable[[], DataFrame],
                         read: Callable[[str], DataFrame] | None = None) -> Callable[[], DataFrame]:
    """The query of a batch source's ``dropped_<source>`` view: the changes of ``decoded`` tables that
    an ``expect_or_drop`` rule removed, read from their :func:`part_view` (no rows, and no decode,
    when no table has a drop rule)."""

    def dropped() -> DataFrame:
        dropping = [t for t in decoded if expectations.drops(t)]
        if not dropping:
            return expectations.none_dropped(bronze(), decoded[0])
        by_name = read or spark().read.table
        return frames.union_all([by_name(part_view("dropped", t)) for t in dropping], by_name=True)

    return dropped


def _batch_table(decoder, table: TableConfig, bronze) -> None:
    cols = list(columns(table))
    decoded = table.decoded_table
    queries = table_queries(decoder, table, cols, bronze, read_decoded=lambda: spark().read.table(decoded))
    silver = queries["silver"]
    dp.materialized_view(
        name=decoded,
        comment=f"Every record of {table.qualified} decoded and checked once a run; silver, quarantine and dropped read it.",
    )(queries["decoded"])

    if runtime.is_databricks():  # pragma: no cover
        silver = _databricks_checked_view(decoder, table, cols, bronze, silver)

    dp.materialized_view(
        name=table.silver_table,
        comment=table.comment or f"Changes of {table.qualified} ({table.source.format}), canonical model.",
        table_properties=table.table_properties or None,
    )(silver)
    dp.temporary_view(name=part_view("quarantine", table),
                      comment=f"The part of {table.source.quarantine_table} from table {table.qualified}.")(
        queries["quarantine"])
    if expectations.drops(table):
        dp.temporary_view(name=part_view("dropped", table),
                          comment=f"The part of {dq_metrics.dropped_table(table.source)} from table {table.qualified}.")(
            queries["dropped"])


def _rebuild_if_reshaped(tables: list[TableConfig]) -> None:
    """Have ``sqlcdc run`` drop the stored decode and silver of each of ``tables`` whose discovered
    columns changed since the last run, before SDP resolves the graph (:mod:`sqlcdc.reshape`): SDP
    then creates them with the new columns in this run. Gold declared in the pipeline is not asked
    for: under ``sqlcdc run`` gold is applied after the run, and rebuilds its own."""
    if gold.applied_after_run():
        reshape.ask_run([reshape.Check(t.qualified, t.silver_table, (t.decoded_table, t.silver_table),
                                       tuple((c.name, c.spark_type) for c in columns(t))) for t in tables])


def declare_gold(cfg: PipelineConfig) -> None:
    """Per table and SCD type, a gold table applied in source commit order (:mod:`sqlcdc.gold.graph`:
    on Databricks AUTO CDC over streaming silver, else a recomputed view; under ``sqlcdc run`` only
    checked, as gold is applied after the run)."""
    for table, parts in gold.handoff.groups(ready(cfg).tables):  # a waiting table has no silver to apply yet
        for scd_type in table.scd_types:
            gold.declare(table, scd_type, columns=columns(parts[0]), keys=keys(parts[0]), parts=parts)
