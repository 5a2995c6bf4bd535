"""Parse once: a record's JSON is parsed a bounded number of times per plan, whatever the filters.

Spark pushes a ``where(<expression>)`` below the projections it reads and inlines each column's
expression on the way; a decoder's parse then ran once per reference (a Debezium silver plan held
73 ``from_json`` calls). :func:`sqlcdc.frames.where`
filters on a computed flag instead. These tests count the parses in the optimized plans of each
producer's silver and quarantine on a landed random history (``tests/histories.py``).

They also look for the checks of a record gathered by ``filter(array(<check>, ...), x -> x IS NOT
NULL)``: a higher-order function has no generated code, so Spark ran every check inside it through
its expression interpreter (:func:`sqlcdc.frames.compact` says what replaced it).
"""

from __future__ import annotations


import pytest
from pyspark.sql import functions as F

import histories
from sqlcdc import expectations, formats, frames, transport
from sqlcdc.config import load_pipeline

#: Most parses a plan may hold: one per read of bronze in the plan (Debezium's silver reads it once
#: but parses the text with from_json per field Spark prunes to, and tests tombstones/transaction
#: boundaries on the text; CES reads segments, singles and the metadata scan; Qlik data and metadata).
#: Debezium's and CES's 2 more try_parse_json and the change tables' 4 are the second parse of an image
#: (base.nested_keys: was a value a JSON object?), in a branch only a row whose value text starts
#: with { or [ evaluates: every other row is parsed as often as before.
BOUNDS = {  # producer -> (from_json, try_parse_json, json_array_length)
    "debezium": (20, 7, 6),  # one try_parse_json only for a record holding 1e-400 or the like (_json_numbers)
    "cdc_ct": (2, 4, 1),  # (8, 12, 4) until 2026-12-05: a self-join of the parsed rows parsed them twice
    # CES and Qlik filter their parsed documents through frames.where everywhere (with plain where()
    # outside the good/bad split: 24-27 try_parse_json per plan, each where inlining the parse again)
    "ces": (0, 10, 4),  # 8 until 2026-12-05; old and current parsed again only when one holds 1e-400 or the like
    "qlik": (1, 3, 3),
}

#: Most reads of bronze a silver or quarantine plan may hold (each one its parse, unless Spark reuses
#: an exchange): CES reads the unsplit events and, apart, the segments it reassembles; Qlik the data
#: messages and, pre-filtered on their text, the metadata messages (twice: the versions and their ids).
READS = {"debezium": 1, "cdc_ct": 1, "ces": 2, "qlik": 3}


def test_where_keeps_true_rows_and_drops_false_and_null(spark):
    df = spark.createDataFrame([(1, True), (2, False), (3, None)], "id int, ok boolean")
    kept = frames.where(df, F.col("ok"), "_kept")
    assert [r.id for r in kept.collect()] == [1]
    assert kept.columns == ["id", "ok", "_kept"]


def test_where_is_not_pushed_below_the_projection_that_parses(spark):
    df = spark.createDataFrame([('{"a": 1}',), ('{"a": 2}',), ("x",)], "value string")
    parsed = df.select("*", F.from_json("value", "a int, b int").alias("_p"))
    cond = (F.col("_p.a") > 1) | (F.col("_p.b") > 1) | F.col("_p.a").isNull()
    naive = parsed.where(cond)._jdf.queryExecution().optimizedPlan().toString()
    ours = frames.where(parsed, cond, "_keep")
    plan = ours._jdf.queryExecution().optimizedPlan().toString()
    assert naive.count("from_json(") > 1  # what the helper is for: Spark inlines the parse into the filter
    assert plan.count("from_json(") == 1
    assert sorted(r.value for r in ours.collect()) == ["x", '{"a": 2}']


def test_compact_keeps_the_values_in_order_without_nulls_and_without_a_lambda(spark):
    df = spark.createDataFrame([("a", None, "b"), (None, None, None)], "x string, y string, z string")
    out = df.select(frames.compact([F.col("x"), F.col("y"), F.col("z")]).alias("listed"),
                    frames.compact(F.array("z", "y", "x")).alias("column"), frames.compact([]).alias("none"))
    assert [tuple(r) for r in out.collect()] == [(["a", "b"], ["b", "a"], []), ([], [], [])]
    assert "lambdafunction" not in out._jdf.queryExecution().optimizedPlan().toString()


@pytest.fixture(scope="module")
def landed(spark, tmp_path_factory):
    config, _ = histories.land(tmp_path_factory.mktemp("parse-once"), list(BOUNDS), keys=6, changes=20, seed=3)
    return load_pipeline(str(config))


def _parses(df) -> tuple[int, int, int]:
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    return plan.count("from_json("), plan.count("parseJson"), plan.count("lengthOfJsonArray")


@pytest.mark.parametrize("producer", list(BOUNDS))
def test_silver_and_quarantine_parse_each_record_a_bounded_number_of_times(spark, landed, producer):
    source_name, table_name, _ = histories.SOURCES[producer]
    source = landed.sources[source_name]
    table = next(t for t in landed.tables if t.name == table_name)
    decoder = formats.get(source.format)
    cols = list(decoder.columns_for(table, source, spark))
    bronze = transport.read_bronze(spark, source, streaming=False)
    envelope = expectations.envelope_schema(decoder)
    if envelope:
        bronze = expectations.valid_envelopes(bronze, decoder, envelope)
    decoded = decoder.decode(bronze, table, cols)
    silver = expectations.passed(expectations.check(decoded.changes, table, cols), table)
    bound = BOUNDS[producer]
    for name, frame in (("silver", silver), ("quarantine", decoded.quarantine),
                        ("unrouted", decoder.unrouted(bronze, source, [table]))):
        got = _parses(frame)
        assert all(g <= b for g, b in zip(got, bound)), f"{producer} {name}: (from_json, try_parse_json, json_array_length) {got} > {bound}"
        if name != "unrouted":
            plan = frame._jdf.queryExecution().optimizedPlan().toString()
            assert plan.count("filter(array(") == 0, f"{producer} {name}: checks gathered by a higher-order function"
            assert plan.count("Relation ") <= READS[producer], f"{producer} {name}: reads bronze {plan.count('Relation ')} times"
    assert silver.count() > 0  # the history decodes: the plans counted are the ones that produce silver
