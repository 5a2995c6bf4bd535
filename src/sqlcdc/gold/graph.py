"""Gold in the pipeline's graph: what :func:`sqlcdc.pipeline.declare_gold` declares per table and
SCD type.

* **Databricks**: a streaming table fed by ``dp.create_auto_cdc_flow`` from a temporary view over
  the table's silver stream (:meth:`~sqlcdc.gold.spec.ApplyChangesSpec.to_auto_cdc_kwargs`; the
  view is :meth:`~sqlcdc.gold.spec.ApplyChangesSpec.auto_cdc_source`, presence on every row).
  Only where silver is a streaming table (:func:`silver_streams`): a streaming read of CES, Qlik
  or change-table silver, a materialized view recomputed each run, fails there (streaming needs an
  append-only source; docs/append-only-silver.md), so their gold is the materialized view below,
  recomputed from silver, until their silver is append-only.
* **``sqlcdc run``** (the Spark conf ``sqlcdc.gold`` = ``after_run``): nothing is declared; the spec
  is checked against silver's apply frame, so a config mistake stops the run before anything
  runs, and :mod:`sqlcdc.gold.after_run` applies gold once the pipeline has written silver.
* **``spark-pipelines run`` by hand**: a materialized view recomputed from silver
  (:mod:`sqlcdc.gold.recompute`).

A producer hand-off (``sources:``) is one gold table over the silvers of its sources, each change
once (:mod:`sqlcdc.gold.handoff`; on Databricks a streaming ``dropDuplicates`` on the change identity).

Example::

    from sqlcdc import gold
    gold.declare(table, 2, columns=columns, keys=["id"])
"""

from __future__ import annotations

from pyspark import pipelines as dp
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession

from sqlcdc import formats, model, runtime
from sqlcdc.config import TableConfig
from sqlcdc.gold import handoff
from sqlcdc.gold.after_run import AFTER_RUN, GOLD_CONF
from sqlcdc.gold.recompute import scd1, scd2
from sqlcdc.gold.spec import ApplyChangesSpec, auto_cdc_table_properties, layout, target
from sqlcdc.values import ColumnSpec

__all__ = ["applied_after_run", "changes_frame", "declare", "silver_streams"]


def applied_after_run() -> bool:
    """True when gold is applied after the pipeline by ``sqlcdc run`` (not declared in it)."""
    return not runtime.is_databricks() and SparkSession.active().conf.get(GOLD_CONF, None) == AFTER_RUN


def changes_frame(silver: DataFrame, columns: list[ColumnSpec], keys: list[str]) -> DataFrame:
    """Silver -> the flat frame gold applies (see :func:`sqlcdc.model.apply_frame`)."""
    return model.apply_frame(silver, [c.name for c in columns], keys)


def declare(table: TableConfig, scd_type: int, *, columns: list[ColumnSpec], keys: list[str],
            parts: Sequence[TableConfig] = ()) -> None:
    """Declare (or, under ``sqlcdc run``, check) ``table``'s gold table of SCD type ``scd_type``;
    ``columns`` and ``keys`` are the table's, as silver types them. A producer hand-off passes its
    gold table and ``parts`` (:func:`sqlcdc.gold.handoff.groups`): gold reads all their silvers."""
    spec = ApplyChangesSpec.from_table_config(table, scd_type, keys=keys)
    parts = list(parts) or [table]
    if runtime.is_databricks() and silver_streams(parts):
        _auto_cdc(table, scd_type, spec, columns, keys, parts)
    elif applied_after_run():
        spec.validate(model.apply_frame_schema(columns))
    else:
        _recomputed(table, scd_type, spec, columns, keys, parts)


def silver_streams(parts: Sequence[TableConfig]) -> bool:
    """Whether every silver table gold reads (``parts``) is a streaming table, which AUTO CDC can
    stream from: the decoder is ``streaming`` (Debezium); CES, Qlik and change-table silver are
    materialized views recomputed from bronze each run."""
    return all(formats.get(p.source.format).streaming for p in parts)


def _changes(parts: list[TableConfig], columns: list[ColumnSpec], keys: list[str], read) -> DataFrame:
    """The apply frame of ``parts``' silvers (``read(name)``): one table's as is; a hand-off's by
    change identity, each change once (:mod:`sqlcdc.gold.handoff`)."""
    if len(parts) == 1:
        return changes_frame(read(parts[0].silver_table), columns, keys)
    return handoff.merged([(p, read(p.silver_table)) for p in parts], lambda s: changes_frame(s, columns, keys), keys)


def _recomputed(table: TableConfig, scd_type: int, spec: ApplyChangesSpec, columns: list[ColumnSpec],
                keys: list[str], parts: list[TableConfig]) -> None:
    apply = scd1 if scd_type == 1 else scd2
    schema = model.apply_frame_schema(columns)  # here: analysis is not allowed in gold()
    spec.validate(schema)

    @dp.materialized_view(
        name=target(table, scd_type),
        comment=f"{table.qualified}: SCD type {scd_type}, applied in source commit order.",
        **layout(table),
    )
    def gold() -> DataFrame:
        changes = _changes(parts, columns, keys, SparkSession.active().read.table)
        return apply(handoff.first_copies(changes) if len(parts) > 1 else changes, spec, schema=schema)


_declared_views: set[str] = set()


def _auto_cdc(table: TableConfig, scd_type: int, spec: ApplyChangesSpec, columns: list[ColumnSpec],
              keys: list[str], parts: list[TableConfig]) -> None:  # pragma: no cover - Databricks only
    source_view = f"changes_{table.name}"
    if source_view not in _declared_views:

        schema = model.apply_frame_schema(columns)  # no analysis inside the view's function

        @dp.temporary_view(name=source_view)
        def changes() -> DataFrame:
            frame = _changes(parts, columns, keys, SparkSession.active().readStream.table)
            if len(parts) > 1:  # a stream keeps one copy per change identity (state: the identities seen)
                frame = frame.dropDuplicates([model.CHANGE_ID_COL]).drop(handoff.RANK_COL)
            return spec.auto_cdc_source(frame, schema)  # presence for columns_to_update

        _declared_views.add(source_view)
    name = target(table, scd_type)
    dp.create_streaming_table(name, comment=f"{table.qualified}: SCD type {scd_type} (AUTO CDC).",
                              table_properties=auto_cdc_table_properties(table, scd_type) or None,
                              **layout(table))
    dp.create_auto_cdc_flow(**spec.to_auto_cdc_kwargs(target=name, source=source_view))
