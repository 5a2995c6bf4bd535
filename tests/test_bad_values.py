"""``bad_values: warn`` (issue 16): a value that cannot be read, or lies outside SQL Server's domain
for its type, keeps its change in silver -- the value NULL, ``bad_value_<column>`` in ``dq_warnings``
-- instead of quarantining it; a key value that cannot be read still quarantines the change. The
default (``quarantine``) is covered record by record in ``test_hostile_records.py``; here the same
records, every producer, with the table set to warn, and the same records with the default beside
them so each assertion can fail.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from sqlcdc import expectations
from sqlcdc.config import ConfigError, load_pipeline
from sqlcdc.formats import ces, cdc_ct, debezium, qlik

from test_config import PIPELINE, _write
from test_hostile_records import (CES_COLUMNS, CES_TABLE, CT_FILE, CT_TABLE, DBZ_COLUMNS, DBZ_TABLE, QLIK_COLUMNS,
                                  QLIK_METADATA, QLIK_TABLE, b64_unscaled, bronze_of, ces_line, ces_typed, ct, ct_typed,
                                  dbz, dbz_typed, qk, qlik_typed)


def _run(spark, decoder, table, columns, lines: list[str], file: str):
    """Decode ``lines`` as the pipeline does (decode -> expectations) -> (silver rows by key, quarantine reasons)."""
    bronze = bronze_of(spark, lines, file)
    d = decoder.decode(bronze, table, columns)
    checked = expectations.check(d.changes, table, columns)
    silver = expectations.passed(checked, table).collect()
    quarantine = [r.reason for r in d.quarantine.union(expectations.quarantined(checked, table)).collect()]
    return silver, quarantine


def _key(row) -> int:
    return list(row.key.asDict().values())[0]


# producer -> (decoder, table, columns, file, lines, (good key, good after), (bad-value key, after with NULLs,
# warnings), bad-key line's reason, values of the bad-value record that must stay exact). Each bad-value
# record has a JSON object or array in a string column too (Spark would read it as its JSON text).
CASES = {
    "debezium": (
        debezium, DBZ_TABLE, DBZ_COLUMNS, "file:/landing/items.json",
        [dbz(1), dbz(2, price=b64_unscaled(123456789012), d=99999999, f="NaN", name={"a": 1}), dbz(3, **{"id": "x"})],
        (1, dbz_typed(1)), (2, dbz_typed(2, price=None, d=None, f=None, name=None),
                           ["bad_value_price", "bad_value_d", "bad_value_f", "bad_value_name"]),
        'column id: cannot read ["x"] as int',
    ),
    "cdc_ct": (
        cdc_ct, CT_TABLE, None, CT_FILE,
        [ct(1), ct(2, amount="10.005", created="0000-01-01", notes=[1]), ct(3, id="three")],
        (1, ct_typed(1)), (2, ct_typed(2, amount=None, created=None, notes=None),
                           ["bad_value_amount", "bad_value_created", "bad_value_notes"]),
        'column id: cannot read ["three"] as int',
    ),
    "ces": (
        ces, CES_TABLE, CES_COLUMNS, "file:/landing/ces/part-0.json",
        [ces_line(1), ces_line(2, price="10.005", qty="256", f="NaN", name={})],
        (1, ces_typed(1)), (2, ces_typed(2, price=None, qty=None, f=None, name=None),
                           ["bad_value_price", "bad_value_qty", "bad_value_f", "bad_value_name"]),
        None,
    ),
    "qlik": (
        qlik, QLIK_TABLE, QLIK_COLUMNS, "file:/landing/t/part-0.jsonl",
        [json.dumps(QLIK_METADATA), qk(1), qk(2, BAL="10.005", D="0000-01-01", U=256, NAME=["x"]), qk(3, ID="three")],
        (1, qlik_typed(1)), (2, qlik_typed(2, BAL=None, D=None, U=None, NAME=None),
                           ["bad_value_BAL", "bad_value_D", "bad_value_U", "bad_value_NAME"]),
        'column ID: cannot read ["three"] as int',
    ),
}


def _columns(name, table, columns):
    return cdc_ct.columns_for(table, table.source) if name == "cdc_ct" else columns


@pytest.mark.parametrize("name", sorted(CASES))
def test_warn_keeps_the_change_with_the_value_null_and_names_the_column(spark, name):
    decoder, table, columns, file, lines, (good_key, good_after), (bad_key, bad_after, warnings), key_reason = CASES[name]
    warn = dataclasses.replace(table, bad_values="warn")
    cols = _columns(name, table, columns)
    silver, quarantine = _run(spark, decoder, warn, cols, lines, file)

    by_key = {_key(r): r for r in silver}
    assert sorted(by_key) == sorted([good_key, bad_key])
    assert by_key[good_key].after.asDict() == good_after
    assert by_key[good_key].dq_warnings == []
    assert by_key[bad_key].after.asDict() == bad_after  # the unreadable values NULL, every other value exact
    assert sorted(by_key[bad_key].dq_warnings) == sorted(warnings)
    if key_reason is None:
        assert quarantine == []
    else:  # a key that cannot be read: the change cannot be applied, so it is quarantined all the same
        assert len(quarantine) == 1 and key_reason in quarantine[0], quarantine


@pytest.mark.parametrize("name", sorted(CASES))
def test_by_default_the_same_records_are_quarantined_naming_column_and_value(spark, name):
    decoder, table, columns, file, lines, (good_key, _), (bad_key, _, warnings), key_reason = CASES[name]
    silver, quarantine = _run(spark, decoder, table, _columns(name, table, columns), lines, file)

    assert [_key(r) for r in silver] == [good_key]
    bad = [q for q in quarantine if key_reason is None or key_reason not in q]
    assert len(bad) == 1
    for rule in warnings:  # every bad column is named in the one reason
        assert f"column {rule.removeprefix('bad_value_')}: cannot read" in bad[0]


def test_warn_rules_are_counted_like_other_warn_rules(spark):
    """dq_metrics lists a table's rules from ``rules_for``: the bad_value rules are there, action warn,
    one per non-key column; none under the default."""
    warn = dataclasses.replace(DBZ_TABLE, bad_values="warn")
    rules = {r.name: r for r in expectations.rules_for(warn, DBZ_COLUMNS)}
    assert {n for n in rules if n.startswith("bad_value_")} == {f"bad_value_{c.name}" for c in DBZ_COLUMNS if c.name != "id"}
    assert {rules[n].action for n in rules if n.startswith("bad_value_")} == {"warn"}
    assert not [r for r in expectations.rules_for(DBZ_TABLE, DBZ_COLUMNS) if r.name.startswith("bad_value_")]


def test_a_column_name_with_a_quote_gets_a_rule_that_reads(spark):
    """Column names come from producer metadata: the rule's constraint quotes them as SQL text."""
    from sqlcdc.values import ColumnSpec

    cols = [ColumnSpec("id", "int"), ColumnSpec("o'brien", "decimal(4,2)")]
    table = dataclasses.replace(DBZ_TABLE, bad_values="warn")
    line = json.dumps({"before": None, "after": {"id": 1, "o'brien": "123.456"}, "op": "c",
                       "source": json.loads(dbz(1))["source"]})
    silver, quarantine = _run(spark, debezium, table, cols, [line], "file:/landing/items.json")
    assert quarantine == []
    assert [(r.after.asDict(), r.dq_warnings) for r in silver] == [({"id": 1, "o'brien": None}, ["bad_value_o'brien"])]


def test_config_takes_warn_and_refuses_anything_else(tmp_path):
    path = _write(tmp_path / "ok", {"pipeline.yml": PIPELINE, "tables/a.yml": "table: dbo.a\nkeys: [id]\nbad_values: warn\n"})
    assert load_pipeline(path).tables[0].bad_values == "warn"
    path = _write(tmp_path / "default", {"pipeline.yml": PIPELINE, "tables/a.yml": "table: dbo.a\nkeys: [id]\n"})
    assert load_pipeline(path).tables[0].bad_values == "quarantine"
    every = PIPELINE + "defaults:\n  bad_values: warn\n"
    path = _write(tmp_path / "defaults", {"pipeline.yml": every, "tables/a.yml": "table: dbo.a\nkeys: [id]\n",
                                          "tables/b.yml": "table: dbo.b\nkeys: [id]\nbad_values: quarantine\n"})
    assert {t.name: t.bad_values for t in load_pipeline(path).tables} == {"a": "warn", "b": "quarantine"}
    path = _write(tmp_path / "bad", {"pipeline.yml": PIPELINE, "tables/a.yml": "table: dbo.a\nkeys: [id]\nbad_values: keep\n"})
    with pytest.raises(ConfigError) as e:
        load_pipeline(path)
    assert "a.yml:3" in str(e.value) and "bad_values" in str(e.value)



def test_dq_metrics_count_each_kept_bad_value_as_warned(spark):
    """The metrics of a run (sqlcdc.dq_metrics over silver, quarantine and dropped): the Debezium case
    above gives one warned row per bad column, of the two changes that reached the rules."""
    from sqlcdc import dq_metrics
    from sqlcdc.config import PipelineConfig

    decoder, table, columns, file, lines, *_ = CASES["debezium"]
    warn = dataclasses.replace(table, bad_values="warn")
    bronze = bronze_of(spark, lines, file)
    d = decoder.decode(bronze, warn, columns)
    checked = expectations.check(d.changes, warn, columns)
    frames = {
        warn.source.bronze_table: bronze,
        warn.silver_table: expectations.passed(checked, warn),
        warn.source.quarantine_table: d.quarantine.union(expectations.quarantined(checked, warn)),
        dq_metrics.dropped_table(warn.source): expectations.dropped(checked, warn),
    }
    cfg = PipelineConfig(name="p", sources={warn.source.name: warn.source}, tables=(warn,), file="p.yml")
    rows = dq_metrics.metrics(cfg, frames.__getitem__, lambda t: columns).where("rule LIKE 'bad_value_%'").collect()
    got = {r.rule: (r.action, r.rows_checked, r.rows_warned, r.rows_quarantined) for r in rows}
    assert got == {f"bad_value_{c.name}": ("warn", 2, 1 if c.name in ("price", "d", "f", "name") else 0, 0)
                   for c in columns if c.name != "id"}
