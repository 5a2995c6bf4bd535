"""A real single-node Kafka broker for tests: KRaft mode (broker + controller in one JVM), on 127.0.0.1.

The broker's JARs are Kafka's own, from Maven Central (``build/kafka-broker.pom.xml``), resolved once
with their runtime closure into ``.jars/kafka-broker/`` (by ``scripts/setup.sh``, or here on first
use) and cached: a second run downloads nothing. The broker runs in its own JVM, so its Kafka and
Scala JARs never meet pyspark's.

Start-up: pick two free ports, write ``server.properties``, format the log folder with Kafka's storage
tool, start ``kafka.Kafka``, then poll until the broker answers a metadata request (no fixed sleeps).

Example (what the session fixture ``broker`` of ``tests/conftest.py`` does)::

    with KafkaBroker(tmp_dir) as broker:
        broker.create_topic("dbz.inventory.dbo.customers")
        ...  # spark: .option("kafka.bootstrap.servers", broker.bootstrap)
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BROKER_POM = ROOT / "build" / "kafka-broker.pom.xml"
BROKER_JARS = ROOT / ".jars" / "kafka-broker"
_COMPLETE = BROKER_JARS / ".complete"


class BrokerUnavailable(RuntimeError):
    pass


def broker_jars() -> Path:
    """The folder of the broker's JARs, resolving them with Maven the first time only."""
    if not _COMPLETE.is_file():
        res = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(BROKER_POM), "dependency:copy-dependencies"],
            capture_output=True, text=True, timeout=900,
        )
        if res.returncode != 0 or not any(BROKER_JARS.glob("kafka_2.13-*.jar")):
            raise BrokerUnavailable(f"could not resolve the Kafka broker JARs:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
        _COMPLETE.touch()
    return BROKER_JARS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    """Poll ``condition`` until it returns a true value or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise BrokerUnavailable(f"{what}: the broker exited with {proc.returncode}\n{tail}")
        if time.monotonic() > deadline:
            raise BrokerUnavailable(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.2)  # poll interval, not synchronization


class KafkaBroker:
    """One KRaft broker+controller on 127.0.0.1; ``bootstrap`` is its ``host:port``."""

    def __init__(self, work_dir: Path, *, java: str = "java"):
        self.work_dir = Path(work_dir)
        self.java = java
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log_path = self.work_dir / "broker.log"

    # --- life cycle ---------------------------------------------------------------------------

    def _classpath(self) -> str:
        return os.pathsep.join(str(p) for p in sorted(broker_jars().glob("*.jar")))

    def _properties(self) -> Path:
        data = self.work_dir / "data"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "log.flush.interval.messages": "1",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
        }
        path = self.work_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def start(self, timeout: float = 120) -> "KafkaBroker":
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = self._properties()
        cp = self._classpath()
        jvm = [self.java, "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.net.preferIPv4Stack=true", "-cp", cp]
        cluster_id = "-"
        while cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: an id starting with '-' reads as an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = subprocess.run(jvm + ["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)],
                             capture_output=True, text=True, timeout=timeout)
        if fmt.returncode != 0:
            raise BrokerUnavailable(f"kafka storage format failed:\n{fmt.stdout[-2000:]}{fmt.stderr[-2000:]}")
        log = self.log_path.open("w")
        self.proc = subprocess.Popen(jvm + ["kafka.Kafka", str(props)], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        wait_until(self._answers_metadata, timeout, "waiting for the Kafka broker", self.proc, self.log_path)
        return self

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- readiness: a real Kafka Metadata request (API key 3, version 1) over the wire ----------

    def _answers_metadata(self) -> bool:
        """True when the broker answers a Metadata request listing itself (node id 1)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                client = b"sqlcdc-tests"
                body = (3).to_bytes(2, "big") + (1).to_bytes(2, "big") + (7).to_bytes(4, "big")
                body += len(client).to_bytes(2, "big") + client
                body += (-1).to_bytes(4, "big", signed=True)  # all topics (null array)
                s.sendall(len(body).to_bytes(4, "big") + body)
                size = int.from_bytes(_recv(s, 4), "big")
                resp = _recv(s, size)
        except OSError:
            return False
        # correlation id (4) + brokers array: count (4) + node_id (4) ...
        if len(resp) < 12 or int.from_bytes(resp[:4], "big") != 7:
            return False
        brokers = int.from_bytes(resp[4:8], "big", signed=True)
        return brokers >= 1 and int.from_bytes(resp[8:12], "big") == 1


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return buf


def produce(spark, bootstrap: str, topic: str, values: list[str | None], keys: list[str | None] | None = None,
            headers: list[list[tuple[str, str]]] | None = None) -> None:
    """Write records in this order to ``topic`` (one partition) with Spark's Kafka sink."""
    keys = keys or [None] * len(values)
    headers = headers or [[] for _ in values]
    rows = [(k, v, [(hk, hv.encode()) for hk, hv in h]) for k, v, h in zip(keys, values, headers)]
    df = spark.createDataFrame(rows, "key string, value string, headers array<struct<key: string, value: binary>>")
    df.coalesce(1).write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic).save()


def dbz_value(doc_line: str) -> str | None:
    """A landed Debezium line as the Kafka record value: a blank line is a tombstone (null value)."""
    return None if doc_line.strip() == "" else doc_line
