"""The decoder contract (:class:`sqlcdc.formats.Decoder`): every producer is one registered
decoder, the config schema offers exactly those, and the optional hooks' defaults hold."""

from __future__ import annotations

import json

import pytest

from sqlcdc import formats
from sqlcdc.assets import SCHEMAS_DIR
from sqlcdc.formats import Decoder, UnknownFormat


def test_the_config_schemas_format_enum_is_the_registry():
    schema = json.loads((SCHEMAS_DIR / "pipeline-config.schema.json").read_text())

    def enums(node):
        if isinstance(node, dict):
            if "format" in node and isinstance(node["format"], dict) and "enum" in node["format"]:
                yield node["format"]["enum"]
            for v in node.values():
                yield from enums(v)
        elif isinstance(node, list):
            for v in node:
                yield from enums(v)

    [enum] = list(enums(schema))
    assert sorted(enum) == formats.available() == ["cdc_ct", "ces", "debezium", "debezium_flat", "qlik"]


@pytest.mark.parametrize("name", ["cdc_ct", "ces", "debezium", "debezium_flat", "qlik"])
def test_each_format_is_a_decoder_with_its_name_and_label(name):
    decoder = formats.get(name)
    assert isinstance(decoder, Decoder) and decoder.name == name
    assert decoder.label.startswith("SQL Server (") and decoder.label.endswith(")")
    assert formats.get(name) is decoder  # one instance per producer


def test_what_each_producer_declares():
    got = {
        n: (d.streaming, d.bronze_streaming, d.envelope_schema, bool(d.keys_required), bool(d.columns_required))
        for n in formats.available()
        for d in [formats.get(n)]
    }
    assert got == {
        "debezium": (True, True, "debezium-envelope.schema.json", True, False),
        "debezium_flat": (True, True, None, True, False),
        "ces": (False, True, None, False, False),
        "qlik": (False, True, None, False, False),
        "cdc_ct": (False, False, None, True, True),
    }


def test_an_unknown_format_names_the_choices():
    with pytest.raises(UnknownFormat, match=r"'oracle'; available: cdc_ct, ces, debezium, debezium_flat, qlik"):
        formats.get("oracle")


def test_a_decoder_without_the_required_methods_cannot_be_made():
    class Half(Decoder):
        name, label, streaming = "half", "SQL Server (half)", True

        def read_bronze(self, spark, source, *, streaming=True):
            raise AssertionError

    with pytest.raises(TypeError, match="abstract"):
        Half()


class _Minimal(Decoder):
    """A fifth producer with only what is required: the defaults must hold for it."""

    name, label, streaming = "minimal", "SQL Server (minimal)", True

    def read_bronze(self, spark, source, *, streaming=True):
        raise AssertionError

    def columns_for(self, table, source, spark=None):
        return []

    def decode(self, bronze, table, columns):
        raise AssertionError

    def unrouted(self, bronze, source, tables):
        raise AssertionError


def test_the_optional_hooks_default_to_no_feature(spark):
    d = _Minimal()
    bronze = spark.createDataFrame([("r1", "{}", "f", None)], "record_id string, value string, source_file string, ingest_time timestamp")
    assert d.keys_for(None, None) == [] and d.unknown_types([]) == []
    assert bronze.where(d.is_skipped(bronze)).count() == 0
    assert [tuple(r) for r in d.disposition(bronze, None).collect()] == [("r1", "r1", "event")]
    assert d.duplicates(bronze, None, []).count() == 0
    assert d.bronze_streaming is True and d.envelope_schema is None


def test_waiting_without_routing_is_a_named_error(spark):
    from sqlcdc.config import SourceConfig, TableConfig

    src = SourceConfig("s", "minimal", "/tmp/none", {})
    table = TableConfig(name="t", schema="dbo", table="t", source=src)
    bronze = spark.createDataFrame([], "record_id string, value string, source_file string, ingest_time timestamp")
    with pytest.raises(NotImplementedError, match="decoder minimal raised NotYetDiscovered for dbo.t"):
        _Minimal().waiting(bronze, src, table, "waiting for metadata")
