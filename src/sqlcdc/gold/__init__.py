"""Gold: each onboarded table's changes applied in true commit order, as SCD type 1 (current
state) and SCD type 2 (history) tables, with Databricks AUTO CDC semantics.

=============================  ==================================================================
module                         holds
=============================  ==================================================================
:mod:`sqlcdc.gold.spec`        :class:`ApplyChangesSpec` (AUTO CDC's options, plus presence), the
                               gold tables' names and layout
:mod:`sqlcdc.gold.order`       the apply order both engines share
:mod:`sqlcdc.gold.recompute`   :func:`scd1` / :func:`scd2` from a whole history (the reference)
:mod:`sqlcdc.gold.incremental` :func:`merge_scd1` / :func:`merge_scd2`: the same tables by MERGE
                               from per-key state, a batch costs what it touches
:mod:`sqlcdc.gold.after_run`   ``sqlcdc run``'s driver: each table's new silver changes, merged
:mod:`sqlcdc.gold.last_apply`  what a table's last apply read: an unchanged silver is not read
:mod:`sqlcdc.gold.graph`      what the pipeline declares: AUTO CDC on Databricks over streaming
                               silver, else a check or a recomputed view
:mod:`sqlcdc.gold.handoff`     producer hand-off: one gold over several sources' silvers, each
                               change once
=============================  ==================================================================

Example::

    from sqlcdc.gold import ApplyChangesSpec, scd1, scd2, merge_scd1
    spec = ApplyChangesSpec(keys=["id"], table="customers")
    spec.validate(frame.schema)            # ConfigError naming table and field, before any run
    current = scd1(frame, spec)            # data columns, one row per live key
    history = scd2(frame, replace(spec, stored_as_scd_type=2))   # + __START_AT / __END_AT
    merge_scd1(spark, "warehouse/tables/gold_customers_scd1", new_changes, spec)
"""

from __future__ import annotations

from sqlcdc.gold import handoff
from sqlcdc.gold.after_run import AFTER_RUN, GOLD_CONF, Applied, apply_all, apply_table, gold_parts
from sqlcdc.gold.graph import applied_after_run, declare
from sqlcdc.gold.incremental import merge_scd1, merge_scd2, purge_tombstones
from sqlcdc.gold.recompute import scd1, scd2
from sqlcdc.gold.spec import END_AT, START_AT, ApplyChangesSpec, auto_cdc_table_properties, layout, target

__all__ = [
    "AFTER_RUN",
    "END_AT",
    "GOLD_CONF",
    "START_AT",
    "ApplyChangesSpec",
    "Applied",
    "applied_after_run",
    "apply_all",
    "apply_table",
    "auto_cdc_table_properties",
    "declare",
    "gold_parts",
    "handoff",
    "layout",
    "merge_scd1",
    "merge_scd2",
    "purge_tombstones",
    "scd1",
    "scd2",
    "target",
]
