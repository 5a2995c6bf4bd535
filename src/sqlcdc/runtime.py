"""Spark sessions for the local runtime, and the settings a local pipeline run needs.

Locally sqlcdc runs on Apache Spark + Delta Lake. The JVM artifacts it needs (Delta, Avro, Kafka;
``sqlcdc/jars.txt``) are placed on the installed pyspark's classpath by :func:`fetch_jars`
(``sqlcdc setup``; ``sqlcdc run`` calls it when one is missing). The same options are
written to a ``spark-defaults.conf`` for ``spark-pipelines run``, because that launcher drops many
``--conf`` arguments before they reach the Spark Connect server (seen with pyspark 4.2.0).

Example::

    from sqlcdc.runtime import local_spark
    spark = local_spark(warehouse="warehouse")
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from pyspark.sql import SparkSession

from sqlcdc.assets import JARS_FILE

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
    # SDP starts up to 16 flows at once by default; on 2 cores they only contend (a run is CPU-bound
    # on planning, docs/testing.md): 4 at a time ran the demo pipeline ~10% faster (178-180 s vs
    # 193-198 s) and leaves room for flows waiting on I/O.
    "spark.sql.pipelines.execution.maxConcurrentFlows": "4",
    # spark-pipelines resolves each flow's whole plan at once (Spark Connect); a Qlik silver plan
    # needs all of Spark's default 100 analyzer passes (tests/test_connect_resolution.py keeps every
    # producer within 100, as Databricks has it). Headroom for local runs of wider configs.
    "spark.sql.analyzer.maxIterations": "200",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Spark's default driver heap (1g) is too small for long sessions here: Janino compiling the
    # generated code of the wide Qlik/CES decode plans ran out of heap late in the test suite.
    # Local mode runs everything in the driver; override with SQLCDC_DRIVER_MEMORY.
    "spark.driver.memory": os.environ.get("SQLCDC_DRIVER_MEMORY", "4g"),
}


_CODE = Path(__file__).resolve().parent  # the sqlcdc package


def code_digest() -> str:
    """A digest of sqlcdc's own files (names, sizes, modification times): what was computed by
    one version of the code is not taken as what another would compute (``cli.unchanged``, the
    discovery cache of ``formats._discovery``)."""
    h = hashlib.sha256()
    for path in sorted(_CODE.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json", ".yml", ".yaml", ".txt"):
            st = path.stat()
            h.update(f"{path.relative_to(_CODE)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def read_json(path: Path) -> Any:
    """What a state file :func:`write_json` wrote holds; None when it is missing or does not read
    (a state file is a cache: a damaged one is no state, never a failed run)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: Any, **dumps: Any) -> None:
    """``data`` as JSON in ``path`` (its folder made), replaced at once: a reader sees the old file
    or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, **dumps))
    os.replace(tmp, path)


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


def write_spark_defaults(conf_dir: Path, conf: Mapping[str, str], *, log_file: Path | None = None) -> Path:
    """Write ``spark-defaults.conf`` and ``log4j2.properties`` into ``conf_dir`` (a SPARK_CONF_DIR).

    Without ``log_file`` Spark logs warnings to the console. With it (the JVM of ``sqlcdc run``),
    Spark logs into that file instead, and with its warnings the per-batch progress of every
    streaming flow (the rows each flow read, which ``sqlcdc run`` shows from that file)."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "spark-defaults.conf"
    lines = [f"{k} {v}" for k, v in conf.items()]
    path.write_text("# written by sqlcdc.runtime for `spark-pipelines run`\n" + "\n".join(lines) + "\n")
    # Spark's own log4j defaults print every INFO line; keep the run's console readable.
    if log_file is None:
        text = _LOG4J.format(appender=_CONSOLE)
    else:
        text = _LOG4J.format(appender=_FILE.format(path=log_file)) + _FLOW_PROGRESS
    (conf_dir / "log4j2.properties").write_text(text)
    return path


_CONSOLE = """\
appender.out.type = Console
appender.out.target = SYSTEM_ERR
"""
# Written afresh by each run's JVM (one per run): the file holds that run's log and no more.
_FILE = """\
appender.out.type = File
appender.out.fileName = {path}
appender.out.append = false
"""

_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
{appender}appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hive.name = org.apache.hadoop.hive
logger.hive.level = error
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = error
logger.connect.name = org.apache.spark.sql.connect
logger.connect.level = error
"""

# Spark's per-batch progress of each streaming flow (rows read): `sqlcdc run`'s flow lines use it
_FLOW_PROGRESS = """\
logger.progress.name = org.apache.spark.sql.execution.streaming.runtime.ProgressReporter
logger.progress.level = info
"""


# --- The JVM artifacts a local Spark needs --------------------------------------------------------

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class Jar:
    """One Maven artifact of ``sqlcdc/jars.txt``: ``group:artifact:version``."""

    group: str
    artifact: str
    version: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def url(self) -> str:
        return f"{MAVEN_CENTRAL}/{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


class JarFetchError(Exception):
    """A JAR could not be fetched or did not match its published checksum (message names it)."""


def required_jars() -> list[Jar]:
    """The artifacts listed in the package's ``jars.txt`` (comments and blank lines skipped)."""
    out = []
    for line in JARS_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            group, artifact, version = line.split(":")
            out.append(Jar(group, artifact, version))
    return out


def spark_jars_dir() -> Path:
    """The ``jars/`` folder of the installed pyspark: what every local Spark puts on its classpath."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def missing_jars(folder: Path | None = None) -> list[Jar]:
    """The required artifacts not in ``folder`` (default: :func:`spark_jars_dir`)."""
    folder = folder or spark_jars_dir()
    return [j for j in required_jars() if not (folder / j.file_name).is_file()]


def fetch_jars(
    *,
    folder: Path | None = None,
    cache: Path | None = None,
    echo: Callable[[str], None] = lambda line: None,
    opener: Callable[[str], bytes] | None = None,
) -> list[Jar]:
    """Place every missing required JAR into ``folder`` (default: pyspark's ``jars/``); return them.

    Each comes from ``cache`` when it holds it, else from Maven Central, and is checked against the
    ``.sha1`` Maven Central publishes beside it before it is written (then kept in ``cache`` too).
    Raises :class:`JarFetchError` naming the artifact and its URL when one cannot be fetched.
    """
    folder = folder or spark_jars_dir()
    opener = opener or _download
    placed = []
    for jar in missing_jars(folder):
        cached = cache / jar.file_name if cache else None
        if cached is not None and cached.is_file():
            data = cached.read_bytes()
        else:
            echo(f"fetching {jar.group}:{jar.artifact}:{jar.version} from Maven Central")
            try:
                data = opener(jar.url)
                published = opener(jar.url + ".sha1").decode("ascii", "replace").split()[0].lower()
            except (OSError, IndexError) as e:
                raise JarFetchError(f"cannot fetch {jar.url}: {e}") from e
            got = hashlib.sha1(data).hexdigest()
            if got != published:
                raise JarFetchError(f"{jar.url}: SHA-1 {got} does not match the published {published}")
            if cache is not None:
                cache.mkdir(parents=True, exist_ok=True)
                _write_atomically(cache / jar.file_name, data)
        folder.mkdir(parents=True, exist_ok=True)
        _write_atomically(folder / jar.file_name, data)
        placed.append(jar)
    return placed


def _download(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (a fixed https URL)
        return response.read()


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_bytes(data)
    tmp.replace(path)  # a JAR cut short by an interrupted fetch would break every later Spark start
