"""dq_metrics: per run, table and rule — checked, passed, failed, warned, dropped, quarantined; freshness, lag."""

from __future__ import annotations

import datetime as dt

import pytest

from dq_feed import RUN1, RUN2, build_warehouse
from sqlcdc import dq_metrics
from sqlcdc.summary import Balance


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    return build_warehouse(spark, tmp_path_factory.mktemp("dq-warehouse"))


def _t(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s)


def test_metrics_count_the_known_bad_rows_per_run_table_and_rule(tables):
    rows = tables[dq_metrics.TABLE].collect()
    assert list(rows[0].asDict()) == list(dq_metrics.METRIC_COLUMNS)
    got = {
        (str(r.run_time), r.table_name, r.rule): (r.rule_kind, r.action, r.rows_checked, r.rows_passed, r.rows_failed,
                                                  r.rows_warned, r.rows_dropped, r.rows_quarantined)
        for r in rows
    }
    r1, r2 = str(_t(RUN1)), str(_t(RUN2))
    default = ("default", "quarantine")
    expected = {}
    for run, checked in ((r1, 4), (r2, 4)):
        for rule in ("key_not_null", "sequence_not_null", "known_operation"):
            expected[(run, "customers", rule)] = (*default, checked, checked, 0, 0, 0, 0)
    expected[(r1, "customers", "email_has_at")] = ("expectation", "quarantine", 4, 4, 0, 0, 0, 0)
    expected[(r1, "customers", "id_in_range")] = ("expectation", "drop", 4, 4, 0, 0, 0, 0)
    expected[(r1, "customers", "not_a_test_name")] = ("expectation", "warn", 4, 4, 0, 0, 0, 0)
    # run 2: 8 lines; 1 tombstone, 2 bad envelopes, 1 NULL key (decoder), 4 reach the expectations
    expected[(r2, "customers", "email_has_at")] = ("expectation", "quarantine", 4, 3, 1, 0, 0, 1)
    expected[(r2, "customers", "id_in_range")] = ("expectation", "drop", 4, 3, 1, 0, 1, 0)
    expected[(r2, "customers", "not_a_test_name")] = ("expectation", "warn", 4, 3, 1, 1, 0, 0)
    expected[(r2, "customers", "decode")] = ("decoder", "quarantine", 5, 4, 1, 0, 0, 1)
    expected[(r2, "*", "debezium-envelope $.payload.op: enum")] = ("decoder", "quarantine", 7, 6, 1, 0, 0, 1)
    expected[(r2, "*", "debezium-envelope $: not JSON")] = ("decoder", "quarantine", 7, 6, 1, 0, 0, 1)
    assert got == expected


def test_freshness_and_lag(tables):
    rows = tables[dq_metrics.TABLE].where("table_name = 'customers'").collect()
    newest = dt.datetime(2019, 6, 5, 10, 13, 24)  # 1007's commit (ts_ms 1559729604000), the newest kept change
    for r in rows:
        assert r.freshness_seconds == pytest.approx((r.measured_at - newest).total_seconds(), abs=1e-3)
        if str(r.run_time) == str(_t(RUN1)):  # the snapshot: ts_ms 1559720000000
            assert r.latest_commit_time == dt.datetime(2019, 6, 5, 7, 33, 20)
        else:
            assert r.latest_commit_time == newest
        assert r.lag_seconds == pytest.approx((r.run_time - r.latest_commit_time).total_seconds())
    star = tables[dq_metrics.TABLE].where("table_name = '*'").collect()
    assert star and all(r.lag_seconds is None and r.latest_commit_time is None for r in star)


def test_conservation_counts_dropped_rows(tables):
    ids = lambda name, col: {r[0] for r in tables[name].select(col).collect()}  # noqa: E731
    landed = ids("bronze_inventory", "record_id")
    silver, q, d = ids("silver_customers", "bronze_record_id"), ids("quarantine_inventory", "bronze_record_id"), \
        ids("dropped_inventory", "bronze_record_id")
    skipped = {r.record_id for r in tables["bronze_inventory"].where("trim(value) = ''").collect()}
    assert (len(landed), len(silver), len(q), len(d), len(skipped)) == (12, 6, 4, 1, 1)
    assert landed == silver | q | d | skipped
    assert Balance("inventory", 12, 6, 4, 1, dropped=1).ok  # dropped rows are their own term
    assert not Balance("inventory", 12, 6, 4, 1).ok


def test_one_sqlcdc_run_is_one_run_time_across_sources(spark, tables, tmp_path):
    """Each source's bronze stamps its own ingest time; the run log's starts make them one run."""
    from pyspark.sql import functions as F

    from dq_feed import pipeline_config
    from sqlcdc import run_log

    utc = dt.timezone.utc
    first, second = dt.datetime(2026, 11, 21, 9, 59, tzinfo=utc), dt.datetime(2026, 11, 21, 10, 59, tzinfo=utc)
    landed = spark.createDataFrame(
        [("erp", "2026-11-21 10:00:03"), ("crm", "2026-11-21 10:00:41"), ("erp", "2026-11-21 11:00:02"),
         ("crm", "2026-11-21 09:00:00")], "source string, t string",
    ).select("source", F.col("t").cast("timestamp").alias("ingest_time"))
    got = [(r.source, str(r.run)) for r in landed.select("source", dq_metrics.run_of(F.col("ingest_time"), [second, first])
                                                          .alias("run")).collect()]
    assert got == [("erp", "2026-11-21 09:59:00"), ("crm", "2026-11-21 09:59:00"), ("erp", "2026-11-21 10:59:00"),
                   ("crm", "2026-11-21 09:00:00")]  # landed before the first logged run: its own ingest time
    # the feed's two ingest times under the run log sqlcdc run writes: the runs' starts
    log = tmp_path / "wh"
    for at in (first, second):
        run_log.start(log, at)
    starts = run_log.starts(run_log.path(log))
    assert starts == [first, second]
    metrics = dq_metrics.metrics(pipeline_config(), lambda n: tables[n], run_starts=starts)
    assert sorted({str(r.run_time) for r in metrics.collect()}) == ["2026-11-21 09:59:00", "2026-11-21 10:59:00"]
