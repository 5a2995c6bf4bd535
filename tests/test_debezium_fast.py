"""Debezium's fast path for plain records (:mod:`sqlcdc.formats._debezium_fast`) changes nothing
but speed: for any record it either declines it or gives exactly the strict decode's silver row.

The records are a random history as Debezium's JSON converter writes it (``tests/histories.py``:
compact, one transaction in five spaced and ASCII-escaped), and the same history with half of its
records changed by ``tests/fuzz_records.py``'s mutations (keys dropped, doubled or added, values
from its pool of hostile values: quoted numbers, padded base64, huge integers, wrong kinds). The
expected rows are the strict decode's (:func:`sqlcdc.formats.debezium.decode_parsed`), not the
fast path's own: a record the strict decode quarantines must not pass the gate.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import fuzz_records
import histories
from sqlcdc import expectations, formats, transport
from sqlcdc.config import load_pipeline
from sqlcdc.formats import _debezium_fast, debezium
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats._debezium_events import SOURCE_FIELDS
from sqlcdc.pipeline import Bronze


def _compact(doc) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def _land(base: Path, seed: int, mutated: float):
    config, _ = histories.land(base, ["debezium"], keys=40, changes=300, seed=seed)
    cfg = load_pipeline(str(config))
    source_name, table_name, _ = histories.SOURCES["debezium"]
    source = cfg.sources[source_name]
    rnd = random.Random(seed)
    for path in Path(source.landing).iterdir():
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line) if line.startswith("{") else None
            if doc is not None and rnd.random() < mutated:
                line = fuzz_records.mutate(doc, rnd, rnd.choice((1, 1, 2)), dumps=_compact)[0]
            out.append(line)
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return source, next(t for t in cfg.tables if t.name == table_name)


def _rows(df) -> dict:
    return {r.bronze_record_id: r.asDict(recursive=True) for r in df.drop("bronze_ingest_time").collect()}


@pytest.mark.parametrize("seed,mutated", [(1, 0.0), (2, 0.5), (3, 0.5)])
def test_the_fast_path_gives_the_strict_rows_or_declines(spark, tmp_path, seed, mutated):
    source, table = _land(tmp_path, seed, mutated)
    decoder = formats.get("debezium")
    cols = list(decoder.columns_for(table, source, spark))
    bronze = transport.read_bronze(spark, source, streaming=False)
    strict = debezium.decode_parsed(debezium._parsed(bronze), table, cols)
    both = debezium.decode(bronze, table, cols)
    fast = _rows(_debezium_fast.changes(bronze, table, cols))

    expected = _rows(strict.changes)
    assert fast, "the fast path took no record"
    wrong = {k: (expected.get(k), row) for k, row in fast.items() if expected.get(k) != row}
    assert not wrong, f"{len(wrong)} fast rows differ from the strict decode's, e.g. {next(iter(wrong.items()))}"
    assert _rows(both.changes) == expected  # every change once: fast rows + the strict decode of the rest
    if mutated == 0.0:
        spaced = bronze.where(F.col("value").contains('", "')).count()
        assert 0 < len(expected) - len(fast) <= spaced  # the spaced records (and only they) go strict
    reasons = sorted(r.reason for r in strict.quarantine.collect())
    assert sorted(r.reason for r in both.quarantine.collect()) == reasons
    quarantined = expectations.quarantine_of(both, table, cols)
    assert sorted(r.reason for r in quarantined.collect()) == sorted(
        r.reason for r in expectations.quarantine_of(strict, table, cols).collect())
    if mutated:
        assert reasons, "no mutation made a record the strict decode refuses"

    # The pipeline admits a plain record without the envelope check (Debezium.decode_landed): the
    # check would have passed every one, and the decode is the strict decode of checked records.
    envelope = expectations.envelope_schema(decoder)
    staged = _debezium_fast.stage(bronze, table, cols)
    checked = expectations.with_envelope_doc(staged.frame).select(
        "value", staged.plain.alias("plain"), expectations.envelope_violations(envelope).alias("broken"))
    plain = checked.where("plain").collect()  # one action for both assertions
    unproven = [r for r in plain if r.broken]
    assert not unproven, f"a plain record breaks the envelope schema: {unproven[0]}"
    assert len(plain) == len(fast)
    admitted = Bronze(decoder, lambda: bronze, envelope).decode(table, cols)
    valid = debezium.decode_parsed(debezium._parsed(expectations.valid_envelopes(bronze, decoder, envelope)), table, cols)
    assert _rows(admitted.changes) == _rows(valid.changes)
    assert sorted(r.reason for r in admitted.quarantine.collect()) == sorted(r.reason for r in valid.quarantine.collect())


def test_the_envelope_rules_are_the_ones_a_plain_record_is_proven_to_pass():
    """``Debezium.decode_landed`` skips the envelope check for a plain record because its gate
    implies each of these rules (docs/fast-path.md): the text is ``to_json`` of a parse into the
    payload-only layout (one JSON document, an object; ``op``/``before``/``after``/``ts_ms``/
    ``source`` each once and of its kind: a string stays a string, a long an integer, an image an
    object or null), and the plain test adds ``op`` in c/u/d and ``source.table`` the table's name.
    The ``payload`` branch's rules hold as there is no ``payload``. A rule added to the schema fails
    here until someone shows the gate implies it (or stops skipping the check)."""
    top = ["$.op: type", "$.op: enum", "$.before: type", "$.after: type", "$.source: type", "$.source: required",
           "$.source.table: type", "$.source.table: minLength", "$.source.schema: type", "$.source.db: type",
           "$.source.commit_lsn: type", "$.source.change_lsn: type", "$.source.ts_ms: type", "$.ts_ms: type"]
    wrapped = ["$.schema: type", "$.payload: type", "$.payload: required"] + [
        "$.payload." + r[2:] for r in top]
    schema = sc.load(debezium.DECODER.envelope_schema)
    assert sorted(sc.rule_names(schema)) == sorted(["$: not JSON", "$: type", "$: anyOf", *top, *wrapped])
    kinds = dict(SOURCE_FIELDS)  # the gate's source layout: the schema's kinds, so kept by the gate
    assert [kinds[f] for f in ("table", "schema", "db", "commit_lsn", "change_lsn", "ts_ms")] == ["string"] * 5 + ["long"]


def test_a_value_the_strict_decode_refuses_does_not_pass_the_gate(spark, tmp_path):
    """``"  12  "`` is a base64 text Spark's ``try_to_binary`` reads around the spaces (as -0.41):
    the first prototype took it into silver; the strict decode quarantines it."""
    source, table = _land(tmp_path, 4, 0.0)
    cols = list(formats.get("debezium").columns_for(table, source, spark))
    price = next(c.name for c in cols if c.spark_type.startswith("decimal"))
    path = next(Path(source.landing).iterdir())
    lines = path.read_text(encoding="utf-8").splitlines()
    first = next(i for i, x in enumerate(lines) if x.startswith("{") and '"op":"c"' in x)
    doc = json.loads(lines[first])
    doc["after"][price] = "  12  "
    lines[first] = _compact(doc)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bronze = transport.read_bronze(spark, source, streaming=False)
    decoded = debezium.decode(bronze, table, cols)
    bad = decoded.quarantine.collect()
    assert len(bad) == 1 and f"column {price}: cannot read" in bad[0].reason
    assert decoded.changes.where(F.col("bronze_record_id") == bad[0].bronze_record_id).count() == 0
