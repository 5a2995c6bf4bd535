"""Shared test fixtures: ONE local SparkSession for the whole test session (Spark is heavy on 2 cores)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# `make test` (and CI) draws the same property-test examples on every run, so a red CI points at the
# change, not at the dice; `make test-explore` draws fresh random examples, many more of them.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_collection_modifyitems(session, config, items):
    """Files with real `spark-pipelines` runs (marker ``e2e``) first, the rest in their order.

    `make test` runs two workers that take whole files (``-n 2 --dist loadfile``); the e2e files take
    minutes each, so they start first and the short files fill the other worker around them
    (longest first: neither worker is left with one long file at the end)."""
    heavy = {item.path for item in items if item.get_closest_marker("e2e")}
    items.sort(key=lambda item: item.path not in heavy)  # stable: the order within a file is kept


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from sqlcdc.runtime import local_spark

    os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)
    wh = tmp_path_factory.mktemp("spark-warehouse")
    session = local_spark(
        app_name="sqlcdc-tests",
        extra={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": str(wh),
        },
    )
    yield session
    session.stop()


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
