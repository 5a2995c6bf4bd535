"""Kafka and Azure Event Hubs (Kafka endpoint) as the transport of a source: the bronze reader.

Which producer wrote the events (Debezium, Qlik, CES) is the decoder's business; where they come
from is the pipeline's. A source with a ``kafka:`` or ``event_hubs:`` block in config is read here
(:func:`read_bronze`); a source with ``landing:`` by its decoder. Either way bronze has the columns
every decoder expects (:data:`sqlcdc.model.BRONZE_COLUMNS`), and a Kafka bronze keeps the record's
transport metadata too:

===============  ===========  =================================================================
column           type         content
===============  ===========  =================================================================
``record_id``    string       hash of topic/partition/offset: a redelivery of the same offset
                              (a re-read after a crash) is the same record
``value``        string       the record value as text (NULL for a tombstone)
``source_file``  string       ``kafka://<topic>/<partition>/<offset>`` (lineage in silver/quarantine)
``ingest_time``  timestamp    when the pipeline read it
``key``          string       the record key as text
``topic``        string
``partition``    int
``offset``       bigint
``timestamp``    timestamp    the record's Kafka timestamp
``headers``      array        ``struct<key: string, value: binary>`` (Spark's ``includeHeaders``)
===============  ===========  =================================================================

Duplicates that at-least-once delivery makes are harmless: the same offset read twice is one
``record_id``; the same event produced twice (two offsets) decodes to one ``change_id`` (content
based, see each decoder), and gold applies a ``change_id`` once.

Credentials never sit in config: ``password_secret`` / ``connection_string_secret`` name an
environment variable (``{env: VAR}``) or a Databricks secret scope (``{scope, key}``), and any
``options:`` value may be a reference ``${VAR}`` / ``{{secrets/<scope>/<key>}}``. Resolved values are
held in :class:`KafkaOptions`, whose ``repr``/``str`` show ``***`` in their place.

Example::

    from sqlcdc.transport import kafka
    opts = kafka.spark_options(source)       # KafkaOptions; print(opts) shows secrets as ***
    bronze = kafka.read_bronze(spark, source, streaming=False)
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from sqlcdc import runtime
from sqlcdc.config import ConfigError, SourceConfig
from sqlcdc.formats.base import record_id, without_bom
from sqlcdc.transport._avro_json import confluent_avro_json  # noqa: F401  (public here)

#: Bronze columns of a Kafka source, in order: the shared four, then Kafka's own.
BRONZE_KAFKA_COLUMNS = (
    "record_id", "value", "source_file", "ingest_time", "key", "topic", "partition", "offset", "timestamp", "headers",
)

REDACTED = "***"

#: Options of Spark's Kafka source itself (not Kafka client properties): passed through as is.
#: Anything else in ``options:`` is a Kafka client property and gets the ``kafka.`` prefix.
SPARK_SOURCE_OPTIONS = frozenset({
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "startingTimestamp",
    "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions", "groupIdPrefix",
    "includeHeaders",
})

#: Event Hubs' Kafka endpoint: Microsoft's recommended client settings for Spark.
EVENT_HUBS_DEFAULTS = {
    "kafka.request.timeout.ms": "60000",
    "kafka.session.timeout.ms": "30000",
}

_ENV_REF = re.compile(r"^\s*\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}\s*$")
_SCOPE_REF = re.compile(r"^\s*\{\{\s*secrets/([^/}\s]+)/([^}\s]+)\s*\}\}\s*$")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

SecretResolver = Callable[[str, str], str]


class KafkaOptions(Mapping[str, str]):
    """Spark Kafka source options; the values of ``secret_keys`` are credentials.

    A read-only mapping (hand it to ``.options(**opts)``) whose ``repr`` and :meth:`redacted` show
    ``***`` for every credential, so it can be logged.
    """

    def __init__(self, options: Mapping[str, str], secret_keys: set[str] | frozenset[str] = frozenset()):
        self._options = dict(options)
        self.secret_keys = frozenset(k for k in secret_keys if k in self._options)

    def __getitem__(self, key: str) -> str:
        return self._options[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def redacted(self) -> dict[str, str]:
        """The options with each credential replaced by ``***``."""
        return {k: (REDACTED if k in self.secret_keys else v) for k, v in self._options.items()}

    def __repr__(self) -> str:
        return f"KafkaOptions({self.redacted()!r})"

    __str__ = __repr__


# --- secrets ---------------------------------------------------------------------------------------


def _databricks_secret(scope: str, key: str) -> str:  # pragma: no cover - Databricks only
    from pyspark.dbutils import DBUtils  # type: ignore[import-not-found]

    return DBUtils(SparkSession.active()).secrets.get(scope=scope, key=key)


def _no_scopes(scope: str, key: str) -> str:
    raise ConfigError([
        f"secret scope {scope!r} (key {key!r}): Databricks secret scopes are available only on Databricks; "
        "for a local run reference an environment variable instead ({env: VAR} or ${VAR})"
    ])


def default_secret_resolver() -> SecretResolver:
    return _databricks_secret if runtime.is_databricks() else _no_scopes


def resolve_secret(ref: Any, where: str, *, env: Mapping[str, str] | None = None,
                   scopes: SecretResolver | None = None) -> str:
    """The secret ``ref`` points at: ``{env: VAR}``, ``{scope, key}``, ``${VAR}`` or ``{{secrets/scope/key}}``.

    Errors name the reference and ``where`` it is configured, never a value.
    """
    env = os.environ if env is None else env
    scopes = scopes or default_secret_resolver()
    if isinstance(ref, str):
        m = _ENV_REF.match(ref)
        if m:
            ref = {"env": m.group(1)}
        else:
            m = _SCOPE_REF.match(ref)
            if not m:
                raise ConfigError([f"{where}: expected a secret reference (${{VAR}} or {{{{secrets/<scope>/<key>}}}})"])
            ref = {"scope": m.group(1), "key": m.group(2)}
    if isinstance(ref, Mapping) and "env" in ref:
        name = str(ref["env"])
        if not env.get(name):
            raise ConfigError([f"{where}: environment variable {name} is not set (it should hold the secret)"])
        return env[name]
    if isinstance(ref, Mapping) and "scope" in ref and "key" in ref:
        return scopes(str(ref["scope"]), str(ref["key"]))
    raise ConfigError([f"{where}: expected a secret reference ({{env: VAR}} or {{scope, key}})"])


def _is_ref(value: Any) -> bool:
    return isinstance(value, str) and bool(_ENV_REF.match(value) or _SCOPE_REF.match(value))


def _jaas(mechanism: str, username: str, password: str) -> str:
    module = _LOGIN_MODULES.get(mechanism)
    if module is None:
        raise ConfigError([f"sasl_mechanism {mechanism}: sqlcdc builds the JAAS config for PLAIN and SCRAM only; "
                           "give kafka.sasl.jaas.config (as a secret reference) in options"])
    if runtime.is_databricks():  # Databricks shades the Kafka client
        module = "kafkashaded." + module

    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return f"{module} required username={q(username)} password={q(password)};"


# --- options -----------------------------------------------------------------------------------------


def _where(source: SourceConfig, *path: str) -> str:
    return f"{source.file or 'pipeline config'}: sources.{source.name}." + ".".join(path)


def _extra_options(source: SourceConfig, block: str, options: Mapping[str, Any] | None,
                   env: Mapping[str, str] | None, scopes: SecretResolver | None) -> tuple[dict[str, str], set[str]]:
    out: dict[str, str] = {}
    secret: set[str] = set()
    for k, v in (options or {}).items():
        key = k if (k in SPARK_SOURCE_OPTIONS or k.startswith("kafka.")) else f"kafka.{k}"
        if _is_ref(v):
            out[key] = resolve_secret(v, _where(source, block, "options", k), env=env, scopes=scopes)
            secret.add(key)
        else:
            out[key] = str(v).lower() if isinstance(v, bool) else str(v)
    return out, secret


def spark_options(source: SourceConfig, *, env: Mapping[str, str] | None = None,
                  scopes: SecretResolver | None = None) -> KafkaOptions:
    """The Spark Kafka source options for ``source`` (a ``kafka:`` or ``event_hubs:`` source).

    ``env`` (default ``os.environ``) and ``scopes`` (default: Databricks secret scopes on Databricks)
    resolve the secret references.
    """
    if source.kafka is not None:
        return _kafka_options(source, source.kafka, env, scopes)
    if source.event_hubs is not None:
        return _event_hubs_options(source, source.event_hubs, env, scopes)
    raise ConfigError([f"{_where(source, 'kafka')}: source {source.name} has no kafka: or event_hubs: block"])


def _kafka_options(source: SourceConfig, k: Mapping[str, Any], env, scopes) -> KafkaOptions:
    opts: dict[str, str] = {"kafka.bootstrap.servers": str(k["bootstrap_servers"])}
    if "topic" in k:
        opts["subscribe"] = str(k["topic"])
    elif "topics" in k:
        opts["subscribe"] = ",".join(str(t) for t in k["topics"])
    elif "topic_pattern" in k:
        opts["subscribePattern"] = str(k["topic_pattern"])
    else:
        raise ConfigError([f"{_where(source, 'kafka')}: give one of topic, topics, topic_pattern"])
    opts["startingOffsets"] = str(k.get("starting_offsets", "earliest"))
    opts["includeHeaders"] = "true"
    secret: set[str] = set()
    protocol = str(k.get("security_protocol", "PLAINTEXT"))
    if protocol != "PLAINTEXT":
        opts["kafka.security.protocol"] = protocol
    mechanism = k.get("sasl_mechanism")
    if mechanism:
        opts["kafka.sasl.mechanism"] = str(mechanism)
    if k.get("password_secret") is not None or (protocol.startswith("SASL_") and k.get("username")):
        if k.get("password_secret") is None:
            raise ConfigError([f"{_where(source, 'kafka', 'password_secret')}: required with username and {protocol}"])
        if not k.get("username"):
            raise ConfigError([f"{_where(source, 'kafka', 'username')}: required with password_secret"])
        password = resolve_secret(k["password_secret"], _where(source, "kafka", "password_secret"), env=env, scopes=scopes)
        opts["kafka.sasl.jaas.config"] = _jaas(str(mechanism or "PLAIN"), str(k["username"]), password)
        opts.setdefault("kafka.sasl.mechanism", str(mechanism or "PLAIN"))
        secret.add("kafka.sasl.jaas.config")
    extra, extra_secret = _extra_options(source, "kafka", k.get("options"), env, scopes)
    opts.update(extra)
    secret |= extra_secret
    return KafkaOptions(opts, secret)


def event_hubs_bootstrap(namespace: str) -> str:
    """``<ns>.servicebus.windows.net:9093`` (a namespace given as a host name is kept)."""
    host = namespace if "." in namespace else f"{namespace}.servicebus.windows.net"
    return host if ":" in host else f"{host}:9093"


def _event_hubs_options(source: SourceConfig, eh: Mapping[str, Any], env, scopes) -> KafkaOptions:
    if eh.get("connection_string_secret") is None:
        raise ConfigError([f"{_where(source, 'event_hubs', 'connection_string_secret')}: required "
                           "(an environment variable or secret scope holding the Event Hubs connection string)"])
    conn = resolve_secret(eh["connection_string_secret"], _where(source, "event_hubs", "connection_string_secret"),
                          env=env, scopes=scopes)
    opts: dict[str, str] = {
        "kafka.bootstrap.servers": event_hubs_bootstrap(str(eh["namespace"])),
        "subscribe": str(eh["event_hub"]),
        "startingOffsets": str(eh.get("starting_offsets", "earliest")),
        "includeHeaders": "true",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": _jaas("PLAIN", "$ConnectionString", conn),
        **EVENT_HUBS_DEFAULTS,
    }
    if eh.get("consumer_group"):
        opts["kafka.group.id"] = str(eh["consumer_group"])
    extra, extra_secret = _extra_options(source, "event_hubs", eh.get("options"), env, scopes)
    opts.update(extra)
    return KafkaOptions(opts, {"kafka.sasl.jaas.config"} | extra_secret)


# --- bronze ------------------------------------------------------------------------------------------



def bronze_frame(raw: DataFrame, value: Column | None = None) -> DataFrame:
    """Spark's Kafka rows (``key, value, topic, partition, offset, timestamp, headers``) -> bronze rows.

    ``value``: the value as text (default: the record value cast to string, without a leading UTF-8
    byte order mark, as a landed file's lines are read: :func:`sqlcdc.formats.base.without_bom`).
    """
    return raw.select(
        record_id(F.col("topic"), F.col("partition"), F.col("offset")).alias("record_id"),
        (without_bom(F.col("value").cast("string")) if value is None else value).alias("value"),
        F.format_string("kafka://%s/%d/%d", F.col("topic"), F.col("partition"), F.col("offset")).alias("source_file"),
        F.current_timestamp().alias("ingest_time"),
        F.col("key").cast("string").alias("key"),
        "topic",
        "partition",
        "offset",
        "timestamp",
        "headers",
    )


def read_bronze(spark: SparkSession, source: SourceConfig, *, streaming: bool = True,
                env: Mapping[str, str] | None = None, scopes: SecretResolver | None = None) -> DataFrame:
    """The source's topic(s) as bronze rows (:data:`BRONZE_KAFKA_COLUMNS`); streaming by default.

    With ``value_format: avro_confluent`` the values are Confluent-framed Avro, rendered as JSON text
    (:func:`confluent_avro_json`) with the schemas of :func:`avro_schemas`.
    """
    opts = spark_options(source, env=env, scopes=scopes)
    reader = spark.readStream if streaming else spark.read
    if not streaming:
        opts = KafkaOptions({k: v for k, v in opts.items() if k not in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger",
                                                                        "maxTriggerDelay")}, opts.secret_keys)
    raw = reader.format("kafka").options(**dict(opts)).load()
    value = None
    if value_format(source) == "avro_confluent":
        value = confluent_avro_json(F.col("value"), avro_schemas(source))
    return bronze_frame(raw, value)


# --- Avro in the Confluent wire format ------------------------------------------------------------------

VALUE_FORMATS = ("json", "avro_confluent")


def value_format(source: SourceConfig) -> str:
    fmt = str((source.kafka or {}).get("value_format", "json"))
    if fmt not in VALUE_FORMATS:
        raise ConfigError([f"{_where(source, 'kafka', 'value_format')}: {fmt!r} is not one of {', '.join(VALUE_FORMATS)}"])
    return fmt


def avro_schemas(source: SourceConfig, *, fetch: Callable[[str], Any] | None = None) -> dict[int, str]:
    """Writer schemas by Confluent schema id: ``<id>.avsc`` files of ``avro_schemas`` (a folder,
    relative to the pipeline config) and/or every version of the topics' ``<topic>-value`` subjects
    in the registry at ``schema_registry_url``. Read when the pipeline starts."""
    k = source.kafka or {}
    out: dict[int, str] = {}
    folder = k.get("avro_schemas")
    if folder:
        root = Path(folder)
        if not root.is_absolute() and source.file:
            root = Path(source.file).resolve().parent / root
        if not root.is_dir():
            raise ConfigError([f"{_where(source, 'kafka', 'avro_schemas')}: no such folder {root}"])
        for path in sorted(root.glob("*.avsc")):
            if not path.stem.isdigit():
                raise ConfigError([f"{path}: name a schema file by its registry schema id, e.g. 17.avsc"])
            out[int(path.stem)] = json.dumps(json.loads(path.read_text()))
    url = k.get("schema_registry_url")
    if url:
        out.update(registry_schemas(str(url), _topic_filter(k), fetch=fetch))
    if not out:
        raise ConfigError([f"{_where(source, 'kafka')}: value_format avro_confluent needs avro_schemas (a folder of "
                           "<id>.avsc files) or schema_registry_url, and found no schema there"])
    return out


def _topic_filter(k: Mapping[str, Any]) -> Callable[[str], bool]:
    if "topic_pattern" in k:
        pattern = re.compile(str(k["topic_pattern"]))
        return lambda t: pattern.fullmatch(t) is not None
    topics = {str(k["topic"])} if "topic" in k else {str(t) for t in k.get("topics", ())}
    return lambda t: t in topics


def _http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - the configured registry
        return json.loads(resp.read().decode("utf-8"))


def registry_schemas(url: str, topic_ok: Callable[[str], bool], *, fetch: Callable[[str], Any] | None = None) -> dict[int, str]:
    """Every version of the ``<topic>-value`` subjects (TopicNameStrategy) of a Confluent-compatible
    registry, by schema id."""
    fetch = fetch or _http_json
    base = url.rstrip("/")
    out: dict[int, str] = {}
    for subject in fetch(f"{base}/subjects"):
        if not (subject.endswith("-value") and topic_ok(subject[: -len("-value")])):
            continue
        q = urllib.parse.quote(subject, safe="")
        for version in fetch(f"{base}/subjects/{q}/versions"):
            doc = fetch(f"{base}/subjects/{q}/versions/{version}")
            if doc.get("schemaType", "AVRO") == "AVRO":
                out[int(doc["id"])] = doc["schema"]
    return out
