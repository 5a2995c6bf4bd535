"""The ``dq_metrics`` table: per run, per table, per rule — rows checked, passed, failed, dropped,
quarantined — plus freshness and lag. A materialized view recomputed from what the pipeline kept.

**Run.** Under ``sqlcdc run`` a run is one ``sqlcdc run``, across all sources: ``run_time`` is
its start, from the warehouse's run log (:mod:`sqlcdc.run_log`, named by the Spark conf
``sqlcdc.runs``), and a landed record belongs to the latest run started before its bronze
``ingest_time``. Without a run log (Databricks, a hand-run ``spark-pipelines run``) a run is the
set of records sharing one bronze ``ingest_time``: one micro-batch of one source. A full refresh
re-stamps everything as one run.

**Where the counts come from** (no Spark listeners, no side tables: the tables are the truth):

- ``silver_<table>``: rows kept; ``dq_warnings`` names the warn rules each row failed;
- ``quarantine_<source>``: rows quarantined; ``rules`` names the rules (expectation rules, or the
  decoder's own: ``decode``, ``routing``, ``<schema> <json path>: <keyword>`` for envelopes);
- ``dropped_<source>``: rows removed by ``expect_or_drop`` rules, with their ``rules``;
- ``bronze_<source>``: records landed, for rules checked before a record has a table (envelopes).

Columns:

=====================  ==========================================================================
``run_time``           the run: its start (run log), else the bronze ingest time
``source_name``
``table_name``         the onboarded table; ``*`` for source-level rules (envelope, routing)
``rule``               rule name
``rule_kind``          ``default`` (key/sequence/op), ``expectation`` (config), ``decoder``
``action``             warn, drop, fail, quarantine (decoder rules: quarantine)
``rows_checked``       rows the rule saw in the run: for expectation rules, the table's decoded
                       changes (kept + dropped + quarantined by expectations); for decoder rules of
                       a table, all its rows (incl. decode failures); for ``*``, records landed
                       that are not skipped by definition (Debezium tombstones)
``rows_failed``        rows that broke the rule = warned + dropped + quarantined
``rows_passed``        checked - failed
``rows_warned``        failed and kept in silver (action warn)
``rows_dropped``       failed and dropped
``rows_quarantined``   failed and quarantined
``latest_commit_time`` newest source commit time among the table's rows of the run
``lag_seconds``        run_time - latest_commit_time: how far behind the source the run landed
``freshness_seconds``  measured_at - newest commit time of the table over all runs (staleness now)
``measured_at``        when the view was computed
=====================  ==========================================================================

A row counted under a rule that removed it is not counted under the warn rules it also failed
(silver rows carry ``dq_warnings``; a quarantined change carries only its quarantine rules).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Callable, Sequence

from pyspark import pipelines as dp
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from sqlcdc import expectations, formats, frames, run_log
from sqlcdc.config import PipelineConfig, SourceConfig, TableConfig

TABLE = "dq_metrics"
SOURCE_LEVEL = "*"

METRIC_COLUMNS = (
    "run_time", "source_name", "table_name", "rule", "rule_kind", "action", "rows_checked", "rows_passed",
    "rows_failed", "rows_warned", "rows_dropped", "rows_quarantined", "latest_commit_time", "lag_seconds",
    "freshness_seconds", "measured_at",
)


def dropped_table(source: SourceConfig) -> str:
    """Where ``expect_or_drop`` rows of ``source`` are recorded (quarantine columns)."""
    return f"dropped_{source.name}"


def declare(cfg: PipelineConfig, columns: Callable[[TableConfig], Sequence[Any]] = lambda t: ()) -> None:
    """The ``dq_metrics`` materialized view (call after the silver/quarantine/dropped tables).
    ``columns(table)``: the table's ColumnSpecs, for the rules they call for (unknown source types)."""
    log = SparkSession.active().conf.get(run_log.RUNS_CONF, None)
    starts = run_log.starts(Path(log)) if log else []  # read here, at definition time: a small file

    @dp.materialized_view(
        name=TABLE,
        comment="Data quality per run (sqlcdc run, else bronze ingest time), table and rule: rows checked, passed, failed, "
        "warned, dropped, quarantined; freshness and lag. See sqlcdc.dq_metrics.",
    )
    def dq_metrics() -> DataFrame:
        return metrics(cfg, SparkSession.active().read.table, columns, run_starts=starts)


def _lit_array(values: list[str]) -> Column:
    return F.array(*[F.lit(v) for v in values]).cast("array<string>")


def _per_table(tables: list[TableConfig], value: Callable[[TableConfig], Column], default: Column) -> Column:
    """``value(t)`` for the row's table ``t`` (``table_name``), else ``default``: one flat CASE, as
    nesting one per table would deepen the plan message with every table (:mod:`sqlcdc.frames`)."""
    if not tables:
        return default
    out = None
    for t in tables:
        cond, val = F.col("table_name") == t.name, value(t)
        out = F.when(cond, val) if out is None else out.when(cond, val)
    return out.otherwise(default)


def run_of(ingest_time: Column, run_starts: Sequence[dt.datetime]) -> Column:
    """The run a record landed in: the latest of ``run_starts`` at or before its ``ingest_time``,
    else (no run log, or landed before the first logged run) the ingest time itself."""
    if not run_starts:
        return ingest_time
    starts = F.array(*[F.lit(t) for t in sorted(run_starts)])
    return F.coalesce(F.array_max(F.filter(starts, lambda t: t <= ingest_time)), ingest_time)


def metrics(cfg: PipelineConfig, read: Callable[[str], DataFrame],
            columns: Callable[[TableConfig], Sequence[Any]] = lambda t: (),
            run_starts: Sequence[dt.datetime] = ()) -> DataFrame:
    """The metrics frame (see the module doc). ``read(name)`` returns a table as a batch frame;
    ``run_starts``: the run log's start times (:func:`run_of`).

    Built from selects, unions, one ``groupBy().agg()`` and windows: valid inside an SDP query function.
    """
    keys = ["source_name", "table_name", "run_time"]
    parts: list[DataFrame] = []
    tables: list[TableConfig] = []
    rules_of: dict[str, list] = {}  # table name -> its rules (expectations.rules_for)
    one, zero = F.lit(1), F.lit(0)
    no_rules = F.array().cast("array<string>")

    def rule_names(of: list[TableConfig]) -> Column:
        """The names of the rules of the row's table (``table_name``), one of ``of``; else none."""
        return _per_table(of, lambda t: _lit_array([r.name for r in rules_of[t.name]]), no_rules)

    def event(df: DataFrame, source: SourceConfig, table: Column, rules: Column, kept, dropped, quarantined, reached,
              commit_time: Column, landed: Column = zero, ingest_time: str = "bronze_ingest_time") -> DataFrame:
        """One row per row of ``df``: what it counts for; ``landed`` 1 for a landed bronze record."""
        return df.select(
            F.lit(source.name).alias("source_name"), table.cast("string").alias("table_name"),
            run_of(F.col(ingest_time), run_starts).alias("run_time"), rules.cast("array<string>").alias("rules"),
            kept.alias("kept"), dropped.alias("dropped"), quarantined.alias("quarantined"),
            reached.alias("reached"), commit_time.cast("timestamp").alias("commit_time"), landed.alias("landed"),
        )

    for source in cfg.sources.values():
        decoder = formats.get(source.format)
        src_tables = cfg.tables_of(source.name)
        tables += src_tables
        rules_of.update({t.name: expectations.rules_for(t, columns(t)) for t in src_tables})
        bronze = read(source.bronze_table)
        parts.append(event(bronze.where(~decoder.skipped(bronze)), source, F.lit(SOURCE_LEVEL), no_rules,
                           zero, zero, zero, zero, F.lit(None), landed=one, ingest_time="ingest_time"))
        for t in src_tables:
            parts.append(event(read(t.silver_table), source, F.lit(t.name), F.col(expectations.WARNINGS_COL),
                               one, zero, zero, one, F.col("commit_time")))
        q = read(source.quarantine_table)
        reached = F.when(F.col("table_name").isNotNull() & F.arrays_overlap(F.col("rules"), rule_names(src_tables)),
                         one).otherwise(zero)
        parts.append(event(q, source, F.coalesce(F.col("table_name"), F.lit(SOURCE_LEVEL)), F.col("rules"),
                           zero, zero, one, reached, F.lit(None)))
        if src_tables:
            parts.append(event(read(dropped_table(source)), source, F.col("table_name"), F.col("rules"),
                               zero, one, zero, one, F.lit(None)))

    # One pass over the tables (each read once): every row becomes one marker entry (rule NULL, the
    # per-run totals) plus an entry per rule it broke and per configured rule of its table (zeros, so
    # a rule no row broke still has its row; source-level rows have no table, so none). A plan that
    # aggregated, exploded and joined the union of the reads separately held four copies of it
    # (~60 Spark jobs and ~20 s of every run's tail for a few rows; docs/testing.md).
    rows = frames.union_all(parts)

    def entry(rule: Column, kept: Column, dropped: Column, quarantined: Column) -> Column:
        return F.struct(rule.cast("string").alias("rule"), kept.alias("kept"), dropped.alias("dropped"),
                        quarantined.alias("quarantined"))

    broken = F.transform(F.coalesce(F.col("rules"), no_rules),
                         lambda r: entry(r, F.col("kept"), F.col("dropped"), F.col("quarantined")))
    zeros = F.transform(rule_names(tables), lambda r: entry(r, zero, zero, zero))
    marker = entry(F.lit(None), zero, zero, zero)
    exploded = rows.select(*keys, "reached", "commit_time", "landed",
                           F.explode(F.concat(F.array(marker), broken, zeros)).alias("_e"))
    is_marker = F.col("_e.rule").isNull()
    grouped = exploded.groupBy(*keys, F.col("_e.rule").alias("rule")).agg(
        F.sum("_e.kept").cast("bigint").alias("rows_warned"), F.sum("_e.dropped").cast("bigint").alias("rows_dropped"),
        F.sum("_e.quarantined").cast("bigint").alias("rows_quarantined"),
        F.count_if(is_marker).alias("_rows"), F.sum(F.when(is_marker, F.col("reached"))).alias("_reached"),
        F.sum("landed").alias("_landed"),  # a landed record has its marker entry only
        F.max("commit_time").alias("_commit"),
    )
    # Per run the totals of its marker entries (of a table: its events; source-level: the records
    # landed, NULL when none), per table the newest commit of all runs: windows over the few grouped
    # rows, not joins that would read the tables again.
    star = F.col("table_name") == SOURCE_LEVEL
    run_w = Window.partitionBy(*keys)
    landed_n = F.sum("_landed").over(run_w)
    landed_n = F.when(landed_n > 0, landed_n)
    joined = grouped.select(
        *keys, "rule", "rows_warned", "rows_dropped", "rows_quarantined",
        F.when(star, landed_n).otherwise(F.sum("_rows").over(run_w)).alias("rows_all"),
        F.when(star, landed_n).otherwise(F.sum("_reached").over(run_w)).alias("rows_reached"),
        F.when(~star, F.max("_commit").over(run_w)).alias("latest_commit_time"),
        F.when(~star, F.max("_commit").over(Window.partitionBy("source_name", "table_name"))).alias("_newest_commit"),
    ).where(F.col("rule").isNotNull())

    def lookup(attr: Callable) -> Column:
        return _per_table(
            tables,
            lambda t: F.element_at(F.create_map(*[x for r in rules_of[t.name] for x in (F.lit(r.name), F.lit(attr(r)))]),
                                   F.col("rule")),
            F.lit(None).cast("string"),
        )

    kind = F.coalesce(lookup(lambda r: "default" if r.default else "expectation"), F.lit("decoder"))
    action = F.coalesce(lookup(lambda r: r.action), F.lit("quarantine"))
    now = F.current_timestamp()
    checked = F.when(kind == "decoder", F.col("rows_all")).otherwise(F.col("rows_reached")).cast("bigint")
    failed = F.col("rows_warned") + F.col("rows_dropped") + F.col("rows_quarantined")
    return joined.select(
        "run_time", "source_name", "table_name", "rule", kind.alias("rule_kind"), action.alias("action"),
        checked.alias("rows_checked"),
        F.greatest(checked - failed, F.lit(0).cast("bigint")).alias("rows_passed"),
        failed.cast("bigint").alias("rows_failed"), "rows_warned", "rows_dropped", "rows_quarantined",
        "latest_commit_time",
        (F.unix_micros(F.col("run_time")) - F.unix_micros(F.col("latest_commit_time"))).cast("double").__truediv__(1e6)
        .alias("lag_seconds"),
        (F.unix_micros(now) - F.unix_micros(F.col("_newest_commit"))).cast("double").__truediv__(1e6)
        .alias("freshness_seconds"),
        now.alias("measured_at"),
    )
