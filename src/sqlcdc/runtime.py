"""Spark sessions for the local runtime, and the settings a local pipeline run needs.

Locally sqlcdc runs on Apache Spark + Delta Lake. The Delta JARs are placed on the venv's Spark
classpath by ``scripts/setup.sh``; this module only sets the session options. The same options are
written to a ``spark-defaults.conf`` for ``spark-pipelines run``, because that launcher drops many
``--conf`` arguments before they reach the Spark Connect server (seen with pyspark 4.2.0).

Example::

    from sqlcdc.runtime import local_spark
    spark = local_spark(warehouse="warehouse")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from pyspark.sql import SparkSession

DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # SDP's `format="delta"` makes the second run fail (DELTA_CANNOT_CHANGE_PROVIDER); making Delta
    # the default source format gives Delta tables without that.
    "spark.sql.sources.default": "delta",
}

SMALL_MACHINE_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    # Delta reconstructs table state with 50 partitions by default: pure overhead on 2 cores.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Spark's default driver heap (1g) is too small for long sessions here: Janino compiling the
    # generated code of the wide Qlik/CES decode plans ran out of heap late in the test suite.
    # Local mode runs everything in the driver; override with SQLCDC_DRIVER_MEMORY.
    "spark.driver.memory": os.environ.get("SQLCDC_DRIVER_MEMORY", "4g"),
}


def is_databricks() -> bool:
    """True when running on a Databricks runtime (where AUTO CDC and expectations are native)."""
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def warehouse_conf(warehouse: str | os.PathLike[str]) -> dict[str, str]:
    """Options that make tables persist under ``warehouse`` across runs.

    Tables live in a Hive metastore (embedded Derby under ``<warehouse>/_metastore``) so a second
    run finds the tables of the first; table data is under ``<warehouse>/tables/<name>``.
    """
    wh = Path(warehouse).resolve()
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(wh / "tables"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={wh / '_metastore' / 'metastore_db'};create=true"
        ),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={wh / '_metastore'}",
    }


def local_spark(
    warehouse: str | os.PathLike[str] | None = None,
    *,
    app_name: str = "sqlcdc",
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    """A local[2] SparkSession with Delta. With ``warehouse``, tables persist there (Hive catalog)."""
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    conf = {**DELTA_CONF, **SMALL_MACHINE_CONF}
    if warehouse is not None:
        conf.update(warehouse_conf(warehouse))
    conf.update(extra or {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def write_spark_defaults(conf_dir: Path, conf: Mapping[str, str]) -> Path:
    """Write ``spark-defaults.conf`` into ``conf_dir`` (used as SPARK_CONF_DIR for SDP runs)."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "spark-defaults.conf"
    lines = [f"{k} {v}" for k, v in conf.items()]
    path.write_text("# written by sqlcdc.runtime for `spark-pipelines run`\n" + "\n".join(lines) + "\n")
    # Spark's own log4j defaults print every INFO line; keep the run's console readable.
    (conf_dir / "log4j2.properties").write_text(_LOG4J)
    return path


_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hive.name = org.apache.hadoop.hive
logger.hive.level = error
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = error
logger.connect.name = org.apache.spark.sql.connect
logger.connect.level = error
"""
