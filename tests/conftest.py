"""Shared test fixtures: ONE local SparkSession for the whole test session (Spark is heavy on 2 cores)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import interpreted

# `make test` (and CI) draws the same property-test examples on every run, so a red CI points at the
# change, not at the dice; `make test-explore` draws fresh random examples, many more of them.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


#: Files with real `spark-pipelines` runs (tests marked ``e2e``), and ``test_kafka.py``, which shares
#: their worker's Kafka broker (:func:`broker`, one per worker that asks for it): one unit of work for xdist.
PIPELINE_FILES = frozenset({"test_dashboard.py", "test_e2e_pipeline.py", "test_kafka.py"})


def pytest_collection_modifyitems(session, config, items):
    """Files with real `spark-pipelines` runs (marker ``e2e``) first, the rest in their order.

    `make test` runs two workers (``-n 2 --dist loadfile --no-loadscope-reorder``), and
    :class:`PipelinesThenFiles` hands them out. A file with an e2e test that is not in
    :data:`PIPELINE_FILES` is refused, so the scheduler cannot silently split the runs."""
    heavy = {item.path for item in items if item.get_closest_marker("e2e")}
    stray = sorted(p.name for p in heavy if p.name not in PIPELINE_FILES)
    if stray:
        raise pytest.UsageError(f"tests/conftest.py: add {', '.join(stray)} to PIPELINE_FILES (it has e2e tests)")
    items.sort(key=lambda item: item.path not in heavy)  # stable: the order within a file is kept


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with every file of :data:`PIPELINE_FILES` in ONE unit of work.

    A real `sqlcdc run` keeps both cores busy for minutes, so e2e files on both workers would only
    slow each other: they all go to one worker, first (they take minutes each), while the other
    works through the unit files. A file never spans workers, so its
    module- and session-scoped fixtures (the Kafka broker, decoded frames) are built once. (xdist's
    ``loadgroup`` would do this with ``xdist_group`` marks, but under pytest 9 it does not group.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PipelinesThenFiles(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "e2e pipelines" if path.rsplit("/", 1)[-1] in PIPELINE_FILES else path

    return PipelinesThenFiles(config, log)


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
            # Interpreted expressions, no generated Java (tests/interpreted.py).
            **interpreted.CONF,
        },
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """A real Kafka broker on 127.0.0.1 (``tests/kafka_broker.py``), started once per worker that
    asks for it (the worker of :data:`PIPELINE_FILES`) and stopped after its last test."""
    from kafka_broker import KafkaBroker

    with KafkaBroker(tmp_path_factory.mktemp("kafka-broker")) as b:
        yield b


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
