"""Kafka and Event Hubs sources (:mod:`sqlcdc.transport.kafka`), against a real single-node broker.

* Options: what a ``kafka:`` / ``event_hubs:`` block becomes (no broker, no Spark), secrets redacted.
* Broker tests on the shared SparkSession: bronze columns and lineage; at-least-once duplicates
  (same offset re-read, same event produced twice) do not change gold.
* The real pipeline runs with Kafka sources are in ``tests/test_e2e_pipeline.py``: each producer
  via the broker gives the gold of its files, and a run SIGKILLed mid-way loses nothing.
* Confluent-framed Avro values (no broker): the same silver as their JSON; bad values quarantined.

The broker (``tests/kafka_broker.py``, fixture ``broker`` of ``tests/conftest.py``) is Kafka 4.1 in
KRaft mode on 127.0.0.1, started once per test session and stopped after.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from debezium_events import customer, event, line, lsn, sample_files
from kafka_broker import dbz_value, produce
from sqlcdc import gold, model, transport
from sqlcdc.transport import kafka
from sqlcdc.config import ConfigError, SourceConfig, TableConfig, load_pipeline
from sqlcdc.formats import debezium

COLUMNS = [("id", "int32"), ("first_name", "string"), ("last_name", "string"), ("email", "string")]
COLS = [debezium.spec_from_config({"name": n, "type": t}) for n, t in COLUMNS]


def kafka_source(name="stream", **block) -> SourceConfig:
    return SourceConfig(name=name, format="debezium", landing=None, file="pipeline.yml", kafka=block)


def eh_source(**block) -> SourceConfig:
    return SourceConfig(name="ces_hub", format="ces", landing=None, file="pipeline.yml", event_hubs=block)


# --- options (no broker) ---------------------------------------------------------------------------


def test_kafka_block_becomes_spark_source_options():
    opts = kafka.spark_options(kafka_source(
        bootstrap_servers="127.0.0.1:9092,127.0.0.1:9093", topics=["a.dbo.x", "a.dbo.y"], starting_offsets="latest",
        options={"maxOffsetsPerTrigger": 500, "fetch.min.bytes": 1, "kafka.client.id": "sqlcdc"},
    ))
    assert dict(opts) == {
        "kafka.bootstrap.servers": "127.0.0.1:9092,127.0.0.1:9093",
        "subscribe": "a.dbo.x,a.dbo.y",
        "startingOffsets": "latest",
        "includeHeaders": "true",
        "maxOffsetsPerTrigger": "500",  # a Spark source option: as is
        "kafka.fetch.min.bytes": "1",  # a Kafka client property: `kafka.` prefixed
        "kafka.client.id": "sqlcdc",
    }
    assert opts.secret_keys == frozenset()
    pattern = kafka.spark_options(kafka_source(bootstrap_servers="127.0.0.1:9092", topic_pattern=r"server1\.dbo\..*"))
    assert pattern["subscribePattern"] == r"server1\.dbo\..*" and "subscribe" not in pattern
    assert pattern["startingOffsets"] == "earliest"


def test_sasl_password_comes_from_the_environment_and_is_redacted():
    src = kafka_source(bootstrap_servers="127.0.0.1:9094", topic="t", security_protocol="SASL_SSL",
                       sasl_mechanism="SCRAM-SHA-512", username="cdc-reader", password_secret={"env": "KAFKA_PW"},
                       options={"ssl.truststore.password": "${TRUST_PW}"})
    opts = kafka.spark_options(src, env={"KAFKA_PW": "pa\"ss-1", "TRUST_PW": "trust-2"})
    assert opts["kafka.security.protocol"] == "SASL_SSL"
    assert opts["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert opts["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="cdc-reader" password="pa\\"ss-1";'
    )
    assert opts["kafka.ssl.truststore.password"] == "trust-2"
    assert opts.secret_keys == {"kafka.sasl.jaas.config", "kafka.ssl.truststore.password"}
    for shown in (repr(opts), str(opts), json.dumps(opts.redacted())):
        assert "pa\\\"ss-1" not in shown and "pa\"ss-1" not in shown and "trust-2" not in shown
    assert opts.redacted()["kafka.sasl.jaas.config"] == "***"
    assert opts.redacted()["kafka.bootstrap.servers"] == "127.0.0.1:9094"


def test_missing_or_local_secret_is_a_config_error_naming_the_reference_not_a_value():
    src = kafka_source(bootstrap_servers="127.0.0.1:9094", topic="t", security_protocol="SASL_PLAINTEXT",
                       username="u", password_secret={"env": "NOT_SET_ANYWHERE"})
    with pytest.raises(ConfigError, match="NOT_SET_ANYWHERE is not set"):
        kafka.spark_options(src, env={})
    scoped = kafka_source(bootstrap_servers="127.0.0.1:9094", topic="t", security_protocol="SASL_SSL",
                          username="u", password_secret={"scope": "cdc", "key": "kafka-pw"})
    with pytest.raises(ConfigError, match="only on Databricks"):
        kafka.spark_options(scoped, env={})
    seen = []
    opts = kafka.spark_options(scoped, env={}, scopes=lambda s, k: seen.append((s, k)) or "from-scope")
    assert seen == [("cdc", "kafka-pw")] and 'password="from-scope"' in opts["kafka.sasl.jaas.config"]


def test_event_hubs_is_a_kafka_endpoint_with_the_connection_string_as_password():
    conn = "Endpoint=sb://ns1/;SharedAccessKeyName=listen;SharedAccessKey=k3y="
    opts = kafka.spark_options(
        eh_source(namespace="ns1", event_hub="sales-ces", consumer_group="sqlcdc",
                  connection_string_secret={"env": "EH_CONN"}, options={"maxOffsetsPerTrigger": 1000}),
        env={"EH_CONN": conn},
    )
    assert opts["kafka.bootstrap.servers"] == kafka.event_hubs_bootstrap("ns1")
    assert opts["kafka.bootstrap.servers"].startswith("ns1.") and opts["kafka.bootstrap.servers"].endswith(":9093")
    assert opts["subscribe"] == "sales-ces"
    assert opts["kafka.security.protocol"] == "SASL_SSL" and opts["kafka.sasl.mechanism"] == "PLAIN"
    assert opts["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="$ConnectionString" password="{conn}";'
    )
    assert opts["kafka.group.id"] == "sqlcdc" and opts["maxOffsetsPerTrigger"] == "1000"
    assert "k3y=" not in repr(opts) and opts.redacted()["kafka.sasl.jaas.config"] == "***"
    with pytest.raises(ConfigError, match="connection_string_secret: required"):
        kafka.spark_options(eh_source(namespace="ns1", event_hub="h"), env={})


def test_config_with_kafka_and_event_hubs_sources_loads_and_refuses_literal_secrets(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text(
        "name: k\nsources:\n"
        "  dbz:\n    format: debezium\n    kafka:\n      bootstrap_servers: 127.0.0.1:9092\n      topic: s.dbo.c\n"
        "      security_protocol: SASL_SSL\n      sasl_mechanism: PLAIN\n      username: u\n"
        "      password_secret: {env: DBZ_PW}\n"
        "  hub:\n    format: ces\n    event_hubs:\n      namespace: ns1\n      event_hub: h\n"
        "      connection_string_secret: {scope: cdc, key: eh}\n"
    )
    cfg = load_pipeline(tmp_path / "pipeline.yml")
    assert transport.is_stream(cfg.sources["dbz"]) and transport.is_stream(cfg.sources["hub"])
    assert kafka.spark_options(cfg.sources["dbz"], env={"DBZ_PW": "x"})["subscribe"] == "s.dbo.c"
    (tmp_path / "pipeline.yml").write_text(
        "name: k\nsources:\n  dbz:\n    format: debezium\n    kafka:\n      bootstrap_servers: 127.0.0.1:9092\n"
        "      topic: s.dbo.c\n      options:\n        sasl.jaas.config: literal-secret\n"
    )
    with pytest.raises(ConfigError) as err:
        load_pipeline(tmp_path / "pipeline.yml")
    assert "looks like a secret" in str(err.value) and "literal-secret" not in str(err.value)


# --- a real broker, the shared SparkSession -------------------------------------------------------


def gold_rows(frame_of_changes):
    frame = model.apply_frame(frame_of_changes, [c.name for c in COLS], ["id"])
    base = dict(keys=["id"], sequence_by=model.SEQ_COL, apply_as_deletes=f"{model.OP_COL} = 'DELETE'",
                provided_column=model.PROVIDED_COL, table="customers")
    scd1 = gold.scd1(frame, gold.ApplyChangesSpec(**base))
    scd2 = gold.scd2(frame, gold.ApplyChangesSpec(**base, stored_as_scd_type=2))
    return sorted(map(tuple, scd1.collect()), key=repr), sorted(map(tuple, scd2.collect()), key=repr)


def test_bronze_keeps_key_value_topic_partition_offset_timestamp_headers(spark, broker):
    topic = "server1.dbo.customers.bronze"
    first = line(event("c", after=customer(7, "ann", "a"), commit_lsn=lsn(1, 1, 1), change_lsn=lsn(1, 1, 1)))
    produce(spark, broker.bootstrap, topic, [first, None], keys=['{"id":7}', '{"id":7}'],
            headers=[[("trace", "t-1")], []])
    src = kafka_source(bootstrap_servers=broker.bootstrap, topic=topic)
    bronze = kafka.read_bronze(spark, src, streaming=False)
    assert tuple(bronze.columns) == kafka.BRONZE_KAFKA_COLUMNS
    assert tuple(bronze.columns[:4]) == model.BRONZE_COLUMNS
    rows = sorted(bronze.collect(), key=lambda r: r.offset)
    assert [(r.topic, r.partition, r.offset, r.key) for r in rows] == [(topic, 0, 0, '{"id":7}'), (topic, 0, 1, '{"id":7}')]
    assert rows[0].value == first and rows[1].value is None  # the tombstone stays a null value
    assert [r.source_file for r in rows] == [f"kafka://{topic}/0/0", f"kafka://{topic}/0/1"]
    assert [(h.key, bytes(h.value)) for h in rows[0].headers] == [("trace", b"t-1")]
    assert rows[0].timestamp is not None and rows[0].ingest_time is not None
    # record_id = hash of topic/partition/offset: reading the same offsets again gives the same ids
    again = {r.offset: r.record_id for r in kafka.read_bronze(spark, src, streaming=False).collect()}
    assert again == {r.offset: r.record_id for r in rows} and len(set(again.values())) == 2
    # the decoder takes Kafka bronze as is: one change, and the tombstone is skipped
    decoded = debezium.decode(bronze, TableConfig(name="customers", source=src, schema="dbo", table="customers",
                                                  keys=("id",)), COLS)
    changes = decoded.changes.collect()
    assert [(c.op, c.bronze_file) for c in changes] == [("INSERT", f"kafka://{topic}/0/0")]
    assert bronze.where(debezium.is_skipped()).count() == 1


def test_at_least_once_duplicates_do_not_change_gold(spark, broker):
    """The sample feed once, vs the feed with every event produced twice and the topic read twice."""
    feed = [v for lines in sample_files().values() for v in map(dbz_value, lines)]
    once_topic, twice_topic = "server1.dbo.customers.once", "server1.dbo.customers.twice"
    produce(spark, broker.bootstrap, once_topic, feed)
    produce(spark, broker.bootstrap, twice_topic, feed + feed)  # a producer retry: same events, new offsets
    table = TableConfig(name="customers", source=kafka_source(), schema="dbo", table="customers", keys=("id",))

    def bronze(topic):
        return kafka.read_bronze(spark, kafka_source(bootstrap_servers=broker.bootstrap, topic=topic), streaming=False)

    once = debezium.decode(bronze(once_topic), table, COLS).changes
    redelivered = bronze(twice_topic).unionByName(bronze(twice_topic))  # a consumer re-read: same offsets again
    assert redelivered.count() == 4 * len(feed)
    assert redelivered.select("record_id").distinct().count() == 2 * len(feed)
    twice = debezium.decode(redelivered, table, COLS).changes
    assert twice.count() == 4 * once.count()
    assert twice.select("change_id").distinct().count() == once.select("change_id").distinct().count() == once.count()

    scd1, scd2 = gold_rows(once)
    assert (scd1, scd2) == gold_rows(twice)
    # by hand, from the sample feed (tests/debezium_events.sample_files)
    assert sorted((r[0], r[1], r[2]) for r in scd1) == [
        (1001, "sally", "thomas"), (1004, "anne", "kretchmar-lee"), (1005, "johnny", "doe"), (1012, "george", "bailey"),
    ]
    assert len(scd2) == 9


# --- Avro in the Confluent wire format -------------------------------------------------------------

_VALUE = {"type": "record", "name": "Value", "namespace": "server1.dbo.customers", "fields": [
    {"name": "id", "type": "int"}, {"name": "first_name", "type": "string"},
    {"name": "last_name", "type": "string"}, {"name": "email", "type": "string"}]}
DEBEZIUM_AVSC = {"type": "record", "name": "Envelope", "namespace": "server1.dbo.customers", "fields": [
    {"name": "before", "type": ["null", _VALUE], "default": None},
    {"name": "after", "type": ["null", "Value"], "default": None},
    {"name": "source", "type": {"type": "record", "name": "Source", "namespace": "io.debezium.connector.sqlserver",
                                "fields": [{"name": n, "type": t} for n, t in [
                                    ("version", "string"), ("connector", "string"), ("name", "string"), ("ts_ms", "long"),
                                    ("snapshot", ["null", "string"]), ("db", "string"), ("schema", "string"),
                                    ("table", "string"), ("change_lsn", ["null", "string"]),
                                    ("commit_lsn", ["null", "string"]), ("event_serial_no", ["null", "long"])]]}},
    {"name": "op", "type": "string"},
    {"name": "ts_ms", "type": ["null", "long"], "default": None},
]}


class _Registry:
    """A tiny Confluent-compatible schema registry (the read endpoints sqlcdc uses) on 127.0.0.1."""

    def __init__(self, subjects: dict[str, list[tuple[int, dict]]]):
        import http.server
        import threading

        routes = {"/subjects": list(subjects)}
        for subject, versions in subjects.items():
            routes[f"/subjects/{subject}/versions"] = list(range(1, len(versions) + 1))
            for v, (sid, schema) in enumerate(versions, start=1):
                routes[f"/subjects/{subject}/versions/{v}"] = {"subject": subject, "version": v, "id": sid,
                                                              "schema": json.dumps(schema)}
        self.requests: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.requests.append(self.path)
                body = json.dumps(routes[self.path]).encode() if self.path in routes else b'{"error_code":40401}'
                self.send_response(200 if self.path in routes else 404)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_registry_schemas_are_the_topic_subjects_versions_by_id():
    subjects = {"server1.dbo.customers-value": [(41, {"type": "string"}), (42, DEBEZIUM_AVSC)],
                "other.topic-value": [(9, {"type": "string"})], "server1.dbo.customers-key": [(5, {"type": "int"})]}
    with _Registry(subjects) as registry:
        src = kafka_source(bootstrap_servers="127.0.0.1:9", topic="server1.dbo.customers",
                           value_format="avro_confluent", schema_registry_url=registry.url)
        got = kafka.avro_schemas(src)
    assert sorted(got) == [41, 42] and json.loads(got[42]) == DEBEZIUM_AVSC
    assert not any("other.topic" in r or "-key" in r for r in registry.requests[1:])


def _confluent(schema_id: int, schema: dict, record: dict) -> bytes:
    """A value in the Confluent wire format: magic byte 0, 4-byte big-endian schema id, Avro binary."""
    import io

    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + buf.getvalue()


def _kafka_rows(spark, values: list):
    """Rows shaped like Spark's Kafka source (one partition, offsets 0..n-1) for ``values``."""
    rows = [(None, v, "server1.dbo.customers", 0, i, None, []) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                       "timestamp timestamp, headers array<struct<key:string,value:binary>>")


def test_confluent_avro_values_decode_to_the_same_silver_as_their_json(spark):
    c = customer
    events = [
        event("r", after=c(1001, "sa\ufffdlly", "thomas"), commit_lsn=lsn(0x26, 0x100, 1), change_lsn=None, serial=None,
              snapshot="true", with_schema=False),  # U+FFFD: a character, kept
        event("u", before=c(1001, "sally", "thomas"), after=c(1001, "sally", "thomas", "sally@acme.example"),
              commit_lsn=lsn(0x27, 0x800, 5), change_lsn=lsn(0x27, 0x800, 3), serial=2, snapshot="false", with_schema=False),
        event("d", before=c(1001, "sally", "thomas", "sally@acme.example"), commit_lsn=lsn(0x28, 0x100, 4),
              change_lsn=lsn(0x28, 0x100, 2), serial=1, snapshot="false", with_schema=False),
    ]
    schema_fields = {f["name"] for f in DEBEZIUM_AVSC["fields"]}
    source_fields = {f["name"] for f in DEBEZIUM_AVSC["fields"][2]["type"]["fields"]}
    events = [{**{k: v for k, v in e.items() if k in schema_fields},
               "source": {k: v for k, v in e["source"].items() if k in source_fields}} for e in events]
    schemas = {42: json.dumps(DEBEZIUM_AVSC)}
    bad = [b"{\"op\": \"c\"}",  # JSON where Avro was expected: no magic byte
           b"\x00\x00\x00\x00\x07" + b"\x02",  # a schema id no registry/folder has
           b"\x00\x00\x00\x00\x2a" + b"\xff\xff\xff"]  # id 42, but the body is not that record
    # id 42 with after.last_name not UTF-8 (Avro writes a string and bytes alike): to_json would make it U+FFFD
    as_bytes = json.loads(json.dumps(DEBEZIUM_AVSC).replace('"name": "last_name", "type": "string"',
                                                            '"name": "last_name", "type": "bytes"'))
    bad.append(_confluent(42, as_bytes, {**events[1], "before": None, "after": {**events[1]["after"], "last_name": b"Ren\xe9e"}}))
    avro = _kafka_rows(spark, [_confluent(42, DEBEZIUM_AVSC, e) for e in events] + bad + [None])
    as_json = _kafka_rows(spark, [json.dumps(e).encode() for e in events])
    table = TableConfig(name="customers", source=kafka_source(), schema="dbo", table="customers", keys=("id",))

    from sqlcdc import expectations

    envelope = expectations.envelope_schema(debezium.DECODER)
    avro_bronze = kafka.bronze_frame(avro, kafka.confluent_avro_json(F.col("value"), schemas))
    via_avro = debezium.decode(expectations.valid_envelopes(avro_bronze, debezium.DECODER, envelope), table, COLS)
    via_json = debezium.decode(kafka.bronze_frame(as_json), table, COLS)

    def silver(d):
        return sorted(tuple(r) for r in d.changes.select("op", "key", "before", "after", "sequence", "bronze_file").collect())

    got = silver(via_avro)
    assert got == silver(via_json)
    assert sorted(r[0] for r in got) == ["DELETE", "SNAPSHOT", "UPDATE"]
    quarantined = expectations.invalid_envelopes(avro_bronze, debezium.DECODER, envelope, table.source)
    reasons = sorted(r.reason for r in quarantined.collect())
    assert len(reasons) == 4, reasons  # the tombstone (null value) is skipped, not quarantined
    assert any("field after.last_name of schema id 42 holds bytes that are not UTF-8 text" in r for r in reasons), reasons
    assert any("not in the Confluent wire format" in r for r in reasons), reasons
    assert any("unknown schema id 7" in r for r in reasons)
    assert any("does not decode with schema id 42" in r for r in reasons)


def test_confluent_avro_decimals_reach_silver_with_every_digit(spark):
    """The Avro converter writes a Connect Decimal as Avro's decimal logical type; rendered to JSON it
    is a JSON number, which Debezium's decode used to read through a double (2026-12-06:
    ``1234567890.1234567891`` became ``1234567890.1234567000``)."""
    from decimal import Decimal

    money = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 10}
    value = {"type": "record", "name": "Value", "namespace": "server1.dbo.rates", "fields": [
        {"name": "id", "type": "int"}, {"name": "rate", "type": ["null", money], "default": None}]}
    schema = {**DEBEZIUM_AVSC, "namespace": "server1.dbo.rates", "fields": [
        {"name": "before", "type": ["null", value], "default": None}, {"name": "after", "type": ["null", "Value"], "default": None},
        *DEBEZIUM_AVSC["fields"][2:]]}
    rates = ["1234567890.1234567891", "-9999999999.9999999999", "0.0000000001", "12.5000000000"]
    source = {"version": "2.7.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1, "snapshot": "false",
              "db": "testDB", "schema": "dbo", "table": "rates", "event_serial_no": 1}
    events = [{"before": None, "after": {"id": i, "rate": Decimal(r)}, "op": "c", "ts_ms": 1,
               "source": {**source, "change_lsn": f"00000027:00000{i:03x}:0003", "commit_lsn": f"00000027:00000{i:03x}:0005"}}
              for i, r in enumerate(rates)]
    rows = _kafka_rows(spark, [_confluent(7, schema, e) for e in events])
    table = TableConfig(name="rates", source=kafka_source(), schema="dbo", table="rates", keys=("id",))
    cols = [debezium.spec_from_connect_field({"field": "id", "type": "int32"}), debezium.spec_from_connect_field(
        {"field": "rate", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "10", "connect.decimal.precision": "20"}})]
    bronze = kafka.bronze_frame(rows, kafka.confluent_avro_json(F.col("value"), {7: json.dumps(schema)}))
    got = {r.after.id: r.after.rate for r in debezium.decode(bronze, table, cols).changes.select("after").collect()}
    assert got == {i: Decimal(r) for i, r in enumerate(rates)}


def test_a_value_beginning_with_a_byte_order_mark_decodes_as_the_same_value_without(spark):
    """A producer writing UTF-8 with a BOM (U+FEFF, which RFC 8259 lets a reader ignore): a landed
    file's lines drop it, so does a Kafka value (it was quarantined as "not a JSON object")."""
    ev = line(event("c", after=customer(7, "ann", "lee"), commit_lsn=lsn(0x27, 0x100, 1), change_lsn=lsn(0x27, 0x100, 1),
                    with_schema=False)).encode()
    table = TableConfig(name="customers", source=kafka_source(), schema="dbo", table="customers", keys=("id",))
    bronze = kafka.bronze_frame(_kafka_rows(spark, [b"\xef\xbb\xbf" + ev]))
    decoded = debezium.decode(bronze, table, COLS)
    assert [(r.op, r.key.id) for r in decoded.changes.collect()] == [("INSERT", 7)]
    assert decoded.quarantine.count() == 0 and debezium.unrouted(bronze, table.source, [table]).count() == 0


def test_confluent_avro_strings_that_are_not_utf8_are_named_wherever_they_sit(spark):
    """Spark's ``from_avro`` reads any bytes as an Avro string and ``to_json`` writes the ones that are
    not UTF-8 as U+FFFD: a value changed without a trace. Strings sit in records at any depth, in
    arrays, map keys and values and union branches; each is checked (only top-level record fields
    four deep were before 2026-12-06). Avro writes ``bytes`` and ``string`` alike, and a map like an
    array of key/value records, so a writer schema with ``bytes`` in the place lands the bad bytes."""
    from sqlcdc.formats._schema_check import UNDECODABLE

    def deep(leaf):
        return {"type": "record", "name": "A", "fields": [{"name": "b", "type": {"type": "record", "name": "B", "fields": [
            {"name": "c", "type": {"type": "record", "name": "C", "fields": [
                {"name": "d", "type": {"type": "record", "name": "D", "fields": [{"name": "e", "type": leaf}]}}]}}]}}]}

    def schema(tags="string", attr_key="string", attr_value="string", choice="string", leaf="string", label="string"):
        attrs = ({"type": "map", "values": attr_value} if attr_key == "string" else  # a map is written as its pairs
                 {"type": "array", "items": {"type": "record", "name": "Pair", "fields": [
                     {"name": "k", "type": attr_key}, {"name": "v", "type": attr_value}]}})
        return {"type": "record", "name": "Value", "namespace": "server1.dbo.things", "fields": [
            {"name": "id", "type": "int"},
            {"name": "tags", "type": {"type": "array", "items": tags}},
            {"name": "attrs", "type": attrs},
            {"name": "choice", "type": ["null", choice, "int"]},
            {"name": "deep", "type": deep(leaf)},
            {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
                {"name": "label", "type": ["null", label]}]}}},
            {"name": "counts", "type": ["null", "int", "long"]}]}

    good = {"id": 1, "tags": ["Zoë", "🚀"], "attrs": {"ключ": "значение"}, "choice": "ü", "deep": {"b": {"c": {"d": {"e": "ok"}}}},
            "items": [{"label": "a"}, {"label": None}], "counts": 3}
    bad = b"Ren\xe9e"

    def record(**kw):
        doc = json.loads(json.dumps(good))
        for path, value in kw.items():
            node = doc
            *head, last = path.split(".")
            for p in head:
                node = node[int(p)] if isinstance(node, list) else node[p]
            node[int(last) if isinstance(node, list) else last] = value
        return doc

    cases = {  # expected field path -> (writer schema, record)
        "tags[]": (schema(tags="bytes"), record(tags=[b"ok", bad])),
        "attrs{}": (schema(attr_key="string", attr_value="bytes"), {**record(), "attrs": {"k": bad}}),
        "attrs{key}": (schema(attr_key="bytes"), {**record(), "attrs": [{"k": bad, "v": "v"}]}),
        "choice": (schema(choice="bytes"), {**record(), "choice": bad}),
        "deep.b.c.d.e": (schema(leaf="bytes"), record(**{"deep.b.c.d.e": bad})),
        "items[]": (schema(label="bytes"), {**record(), "items": [{"label": b"x"}, {"label": bad}]}),
    }
    reader = schema()
    values = [(1, _confluent(5, reader, good))] + [(i + 2, _confluent(5, w, r)) for i, (w, r) in enumerate(cases.values())]
    rows = spark.createDataFrame(values, "n int, value binary")
    got = dict(rows.select("n", kafka.confluent_avro_json(F.col("value"), {5: json.dumps(reader)}).alias("t")).collect())

    rendered = json.loads(got[1])
    # to_json leaves NULL fields out; a union of two types is Spark's struct of its branches
    assert rendered == {**good, "choice": {"member0": "ü"}, "items": [{"label": "a"}, {}]}, got[1]
    for n, field in enumerate(cases, start=2):
        assert got[n].startswith(UNDECODABLE), (field, got[n])
        assert f"field {field} of schema id 5 holds bytes that are not UTF-8 text" in got[n], (field, got[n])


FIXTURES = Path(__file__).resolve().parent / "fixtures"


_QLIK_ROW = {"type": "record", "name": "Row", "namespace": "dbo.customers", "fields": [
    {"name": "ID", "type": "int"}] + [{"name": n, "type": ["null", "string"], "default": None} for n in ("NAME", "EMAIL", "BALANCE")]}
_QLIK_HEADERS = [("operation", "string"), ("changeSequence", "string"), ("timestamp", "string"), ("streamPosition", "string"),
                 ("transactionId", "string"), ("changeMask", ["null", "bytes"]), ("columnMask", ["null", "bytes"]),
                 ("transactionEventCounter", "long"), ("transactionLastEvent", "boolean")]
QLIK_AVSC = {"type": "record", "name": "DataRecord", "namespace": "com.attunity.queue.msg", "fields": [
    {"name": "schema", "type": ["null", "string"], "default": None},
    {"name": "table", "type": ["null", "string"], "default": None},
    {"name": "data", "type": ["null", _QLIK_ROW], "default": None},
    {"name": "beforeData", "type": ["null", "dbo.customers.Row"], "default": None},
    {"name": "headers", "type": {"type": "record", "name": "Headers", "fields": [
        {"name": n, "type": t} for n, t in _QLIK_HEADERS] + [{"name": "externalSchemaId", "type": ["null", "string"], "default": None}]}},
]}


def test_qlik_confluent_avro_data_messages_decode_to_the_same_silver_as_their_json(spark):
    """The fixture's tableVersion-1 data messages (full load + CDC with masks and a key change) as
    Confluent-framed Avro (the masks as bytes, as Qlik's Avro schema has them) give the same silver as
    the same messages in JSON."""
    from sqlcdc.formats import qlik

    qlik_dir = FIXTURES / "qlik" / "customers"
    metadata = (qlik_dir / "01_metadata_v1.jsonl").read_text().splitlines()[0]
    records = []
    for name in ("02_full_load.jsonl", "03_cdc.jsonl"):
        for text in (qlik_dir / name).read_text().splitlines():
            doc = json.loads(text)
            msg = doc.get("message", doc) if doc.get("magic") else doc
            if "headers" not in msg or not isinstance(msg.get("headers"), dict):
                continue  # a metadata message
            if any("TIER" in (msg.get(k) or {}) for k in ("data", "beforeData")):
                continue  # tableVersion 2: another writer schema
            h = msg["headers"]
            records.append({"schema": msg.get("schema"), "table": msg.get("table"), "data": msg.get("data"),
                            "beforeData": msg.get("beforeData"),
                            "headers": {**{n: h.get(n, "" if t == "string" else 0) for n, t in _QLIK_HEADERS},
                                        # the masks as Qlik's Avro schema has them: bytes (rendered as hex again)
                                        **{n: None if h.get(n) is None else bytes.fromhex(h[n]) for n in ("changeMask", "columnMask")},
                                        "externalSchemaId": h.get("externalSchemaId")}})
    assert len(records) == 8  # 3 REFRESH + 5 CDC of tableVersion 1
    src = SourceConfig(name="crm", format="qlik", landing=None, file="pipeline.yml", kafka={})
    tbl = TableConfig(name="customers", source=src, schema="dbo", table="customers", keys=("ID",))
    cols = [qlik.spec_for(n, t, ordinal=i) for i, (n, t) in enumerate((("ID", "INT4"), ("NAME", "WSTRING"), ("EMAIL", "STRING")), 1)]
    cols.append(qlik.spec_for("BALANCE", "NUMERIC", precision=10, scale=2, ordinal=4))

    def bronze(values, avro: bool):
        md = kafka.bronze_frame(_kafka_rows(spark, [metadata.encode()]))
        rows = _kafka_rows(spark, [None] + values).where("offset > 0")
        value = kafka.confluent_avro_json(F.col("value"), {17: json.dumps(QLIK_AVSC)}) if avro else None
        return md.unionByName(kafka.bronze_frame(rows, value))

    via_avro = qlik.decode(bronze([_confluent(17, QLIK_AVSC, r) for r in records], True), tbl, cols)
    # JSON as Qlik writes it: no schema/table fields where the message routes by externalSchemaId
    as_json = [json.dumps({k: v for k, v in r.items() if v is not None or k in ("data", "beforeData")},
                          default=lambda mask: mask.hex().upper()) for r in records]  # masks: hex text again
    via_json = qlik.decode(bronze([t.encode() for t in as_json], False), tbl, cols)

    def silver(d):
        return sorted(tuple(r) for r in d.changes.select(
            "op", "key", "before", "after", "provided_columns", "changed_columns", "sequence", "bronze_file").collect())

    got = silver(via_avro)
    assert got == silver(via_json) and len(got) == 8
    assert via_avro.quarantine.count() == 0
    assert sorted(r[0] for r in got) == ["DELETE", "INSERT", "SNAPSHOT", "SNAPSHOT", "SNAPSHOT", "UPDATE", "UPDATE", "UPDATE"]


def test_avro_schemas_from_a_local_folder_by_schema_id(tmp_path):
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "17.avsc").write_text(json.dumps(QLIK_AVSC, indent=2))
    (folder / "42.avsc").write_text(json.dumps(DEBEZIUM_AVSC))
    src = SourceConfig(name="crm", format="qlik", landing=None, file=str(tmp_path / "pipeline.yml"),
                       kafka={"bootstrap_servers": "127.0.0.1:9", "topic": "t", "value_format": "avro_confluent",
                              "avro_schemas": "schemas"})  # relative to the pipeline config
    got = kafka.avro_schemas(src)
    assert sorted(got) == [17, 42] and json.loads(got[17]) == QLIK_AVSC
    (folder / "customers.avsc").write_text("{}")
    with pytest.raises(ConfigError, match="customers.avsc: name a schema file by its registry schema id"):
        kafka.avro_schemas(src)
