"""``sqlcdc validate``: one report with every problem (schema, SQL, columns, bundle), non-zero exit,
nothing run; Spark only when there is SQL to parse."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sqlcdc.cli import main as cli_main
from sqlcdc.cli import validate as v

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).resolve().parent / "fixtures" / "config"


def _no_spark(monkeypatch):
    def refuse():
        raise AssertionError("validate started Spark although there was no SQL to check")

    monkeypatch.setattr(v, "_spark", refuse)


def test_broken_config_gives_one_report_with_every_problem(spark):
    tables = FIX / "broken" / "tables"
    assert v.validate(FIX / "broken" / "pipeline.yml", spark=spark) == [
        # wrong type, bad value, unknown key, missing key: from the schemas
        f"{tables / 'orders.yml'}:3: keys: expected a list, got a string ('order_id')",
        f"{tables / 'orders.yml'}:4: scd_types[1]: 3 is not one of 1, 2",
        f"{tables / 'orders.yml'}:5: keyz: unknown field (did you mean 'keys'?)",
        f"{tables / 'payments.yml'}:1: table: required field missing",
        f"{tables / 'payments.yml'}:3: ignore_null_updates: expected true or false, got a string ('yes')",
        # bad SQL and an unknown column: from Spark's parser and analyzer, in the same report
        f"{tables / 'refunds.yml'}:9: expectations[positive].constraint: "
        "syntax error at the end of the expression (incomplete, or a stray word before the end) in: amount >",
        f"{tables / 'refunds.yml'}:11: expectations[known_column].constraint: a column, variable, or function "
        "parameter with name `amont` cannot be resolved. Did you mean one of the following? "
        "[`amount`, `op`, `key`, `after`, `before`] in: amont > 0",
    ]


def test_cli_exits_non_zero_and_prints_each_problem(spark, capsys):
    code = cli_main(["validate", "--config", str(FIX / "broken" / "pipeline.yml"), "--no-bundle"])
    out, err = capsys.readouterr()
    assert code == 1
    assert len(out.strip().splitlines()) == 7
    assert "keyz: unknown field" in out and "expectations[positive].constraint: syntax error" in out
    assert err.strip().endswith("7 problem(s); nothing was run")


def test_sql_checks_without_columns_parse_only(spark, tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: qlik\n")
    (tmp_path / "tables" / "t.yml").write_text(
        "table: dbo.t\n"
        "keys: [id]\n"
        "expectations:\n"
        "  - {name: fine, constraint: \"whatever_column > 0\"}\n"
        "  - {name: alias_trick, constraint: \"a > 0 b\"}\n"
        "  - {name: quote, constraint: \"name = 'x\"}\n"
    )
    t = tmp_path / "tables" / "t.yml"
    problems = v.validate(tmp_path / "pipeline.yml", spark=spark)
    # no columns: an unknown column cannot be told, but syntax can
    assert problems == [
        f"{t}:5: expectations[alias_trick].constraint: syntax error at the end of the expression (incomplete, or a stray word before the end) in: a > 0 b",
        f"{t}:6: expectations[quote].constraint: syntax error at or near ''' (at position 7) in: name = 'x",
    ]


def test_good_config_and_project_bundle_are_clean(spark):
    assert v.validate(FIX / "good" / "pipeline.yml", spark=spark, bundle=ROOT / "databricks.yml") == []


def test_no_sql_flag_reports_the_rest_without_spark(monkeypatch, capsys):
    _no_spark(monkeypatch)
    code = cli_main(["validate", "--config", str(FIX / "broken" / "pipeline.yml"), "--no-sql", "--no-bundle"])
    assert code == 1
    assert len(capsys.readouterr().out.splitlines()) == 5  # the schema problems; the SQL ones need Spark


def test_minimal_config_validates_without_spark(monkeypatch, tmp_path, capsys):
    _no_spark(monkeypatch)
    (tmp_path / "tables").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: debezium\n    landing: in\n")
    (tmp_path / "tables" / "a.yml").write_text("source: s\ntable: dbo.a\nkeys: [id]\n")
    assert cli_main(["validate", "--config", str(tmp_path / "pipeline.yml")]) == 0
    assert "OK" in capsys.readouterr().err


def test_bundle_problems_join_the_same_report(monkeypatch, tmp_path):
    _no_spark(monkeypatch)
    shutil.copy(ROOT / "databricks.yml", tmp_path / "databricks.yml")
    shutil.copytree(ROOT / "resources", tmp_path / "resources")
    (tmp_path / "config" / "tables").mkdir(parents=True)
    (tmp_path / "config" / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: ces\n")
    (tmp_path / "config" / "tables" / "a.yml").write_text("table: dbo.a\nkeys: id\n")
    problems = v.validate(tmp_path / "config" / "pipeline.yml", bundle=v.find_bundle(tmp_path / "config" / "pipeline.yml"))
    res = tmp_path / "resources" / "sqlcdc.pipeline.yml"
    assert problems[0] == f"{tmp_path / 'config' / 'tables' / 'a.yml'}:2: keys: expected a list, got a string ('id')"
    assert f"{res}:18: resources.pipelines.sqlcdc.libraries[0].file.path: no such file " \
           f"../src/sqlcdc/pipelines/bronze.py ({tmp_path / 'src' / 'sqlcdc' / 'pipelines' / 'bronze.py'})" in problems


def test_missing_config_file_exit_code_2(capsys, tmp_path):
    assert cli_main(["validate", "--config", str(tmp_path / "nope.yml")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("sql", ["amount >= 0 AND status IN ('A', 'B')", "after.amount IS NULL OR op = 'DELETE'"])
def test_valid_rules_pass(spark, tmp_path, sql):
    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: cdc_ct\n")
    (tmp_path / "tables" / "t.yml").write_text(
        "table: dbo.t\nkeys: [id]\ncolumns:\n  - {name: id, type: int}\n  - {name: amount, type: int}\n"
        f"  - {{name: status, type: string}}\nexpectations:\n  - name: r\n    constraint: \"{sql}\"\n"
    )
    assert v.validate(tmp_path / "pipeline.yml", spark=spark) == []


def test_the_projects_own_config_and_bundle_validate(spark, capsys):
    # `spark` first, so validate's getOrCreate finds the shared session should the config carry SQL
    assert cli_main(["validate", "--config", str(ROOT / "config" / "pipeline.yml")]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    # the bundle deploys the demo: its change-table, CES and Qlik sources' silver and gold are
    # recomputed on every Databricks update (a note, not a problem); the Debezium source streams
    for source, fmt in [("erp", "cdc_ct"), ("sales", "ces"), ("crm", "qlik")]:
        assert f"note: the bundle deploys source {source} ({fmt}): its silver is a materialized view" in err
    assert "source inventory" not in err


@pytest.mark.parametrize("sql_type, boolean", [("bit", True), ("datetime2", False)])
def test_rule_columns_are_typed_as_the_producer_reads_them(spark, tmp_path, sql_type, boolean):
    """A CES column is a SQL Server type: `bit` is a boolean in silver, so `active` alone is a valid
    rule; as `datetime2` (a timestamp) the same rule is refused (the decoder's mapping, not a copy)."""
    (tmp_path / "tables").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: ces\n    landing: in\n")
    (tmp_path / "tables" / "t.yml").write_text(
        "table: dbo.t\nkeys: [id]\ncolumns:\n  - {name: id, type: int}\n"
        f"  - {{name: active, type: '{sql_type}'}}\n  - {{name: seen, type: datetime2}}\n"
        "expectations:\n  - {name: r, constraint: \"active AND seen < current_timestamp()\"}\n"
    )
    problems = v.validate(tmp_path / "pipeline.yml", spark=spark)
    if boolean:
        assert problems == []
    else:
        assert len(problems) == 1 and "expectations[r]" in problems[0]


def test_a_landing_folder_that_does_not_exist_is_a_problem(monkeypatch, tmp_path, capsys):
    _no_spark(monkeypatch)
    (tmp_path / "tables").mkdir()
    (tmp_path / "here").mkdir()
    (tmp_path / "afile").write_text("")
    (tmp_path / "pipeline.yml").write_text(
        "name: p\nsources:\n"
        "  a:\n    format: debezium\n    landing: missing\n"
        "  b:\n    format: qlik\n    landing: here\n    options: {metadata_landing: meta}\n"
        "  c:\n    format: debezium\n    landing: afile\n"
        "  d:\n    format: debezium\n    landing: abfss://c@acct.dfs.core.windows.net/cdc\n"
        "  e:\n    format: debezium\n    landing: here\n")
    assert cli_main(["validate", "--no-bundle", "--config", str(tmp_path / "pipeline.yml")]) == 1
    p = tmp_path / "pipeline.yml"
    assert capsys.readouterr().out.splitlines() == [
        f"{p}:5: sources.a.landing: no such folder {tmp_path / 'missing'}",
        f"{p}:9: sources.b.options.metadata_landing: no such folder {tmp_path / 'meta'}",
        f"{p}:12: sources.c.landing: a file, not a folder: {tmp_path / 'afile'}",
    ]


def test_rules_of_a_table_whose_columns_are_discovered_are_resolved_against_them(spark, tmp_path):
    """No `columns:`: the Qlik metadata that has landed gives them, as it does in a run, so a rule
    naming a column the table does not have is caught before any run."""
    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text(
        f"name: p\nsources:\n  crm:\n    format: qlik\n    landing: {ROOT / 'samples' / 'qlik' / 'crm'}\n")
    t = tmp_path / "tables" / "customers.yml"
    t.write_text("table: dbo.customers\nexpectations:\n"
                 "  - {name: has_email, constraint: \"EMAIL IS NOT NULL\"}\n"
                 "  - {name: positive, constraint: \"BALANCE >= 0 AND BALANCEE < 10\"}\n")
    problems = v.validate(tmp_path / "pipeline.yml", spark=spark)
    assert len(problems) == 1 and problems[0].startswith(f"{t}:4: expectations[positive].constraint: ")
    assert "BALANCEE" in problems[0]
