"""Spark without generated code, for the tests' few rows (docs/testing.md, "Spark settings for
tests"): Janino compiling the wide decode and gold plans costs more than running them interpreted.

The shared test session uses :data:`CONF`; the real runs of ``test_e2e_pipeline.py`` and
``test_kafka.py`` pass :func:`run_args` to ``sqlcdc run``. The installed-wheel run of
``test_dashboard.py`` keeps Spark's defaults, as users have them, so code generation is still
exercised end to end.
"""

from __future__ import annotations

CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def run_args() -> list[str]:
    """``--conf KEY=VALUE`` arguments of ``sqlcdc run`` for :data:`CONF`."""
    return [arg for key, value in CONF.items() for arg in ("--conf", f"{key}={value}")]
