"""The Databricks DQ dashboard's datasets come from config: every source's quarantine, checked by
`sqlcdc validate` and rewritten by `sqlcdc export lakeview`."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

from sqlcdc.cli import main as cli_main
from sqlcdc.config import load_pipeline
from sqlcdc.lakeview import QUARANTINE_DATASET, quarantine_query, stale_problems, with_config
from sqlcdc.model import QUARANTINE_SCHEMA

ROOT = Path(__file__).resolve().parent.parent
DASH = ROOT / "resources" / "dq_metrics.lvdash.json"


def test_the_projects_dashboard_reads_every_demo_source():
    cfg = load_pipeline(ROOT / "config" / "pipeline.yml")
    assert stale_problems(DASH, cfg) == []
    (ds,) = [d for d in json.loads(DASH.read_text())["datasets"] if d["name"] == QUARANTINE_DATASET]
    text = "".join(ds["queryLines"])
    for table in ("quarantine_crm", "quarantine_erp", "quarantine_inventory", "quarantine_sales"):
        assert f"FROM `{table}`" in text


def test_the_quarantine_query_runs_over_every_source(spark):
    """The generated SQL, run by Spark on tables shaped like the quarantine tables."""
    cfg = load_pipeline(ROOT / "config" / "pipeline.yml")
    for i, source in enumerate(sorted(cfg.sources)):
        row = (source, "debezium", "t", f"bad {source}", ["r"], "{}", f"id{i}", "f.json", datetime(2026, 1, 1, 0, i))
        spark.createDataFrame([row], QUARANTINE_SCHEMA).createOrReplaceTempView(f"quarantine_{source}")
    rows = spark.sql("\n".join(quarantine_query(cfg))).collect()
    assert [(r.source_name, r.reason, r.rules) for r in rows] == [
        ("sales", "bad sales", "r"), ("inventory", "bad inventory", "r"), ("erp", "bad erp", "r"), ("crm", "bad crm", "r")]


def test_a_new_source_makes_the_dashboard_stale_until_exported(tmp_path, capsys):
    shutil.copy(ROOT / "databricks.yml", tmp_path / "databricks.yml")
    shutil.copytree(ROOT / "resources", tmp_path / "resources")
    defs = tmp_path / "src" / "sqlcdc" / "pipelines"
    defs.mkdir(parents=True)
    for layer in ("bronze", "silver", "gold"):
        (defs / f"{layer}.py").write_text("")
    config = tmp_path / "config" / "pipeline.yml"
    (tmp_path / "config" / "tables").mkdir(parents=True)
    (tmp_path / "landing").mkdir()
    config.write_text("name: p\nsources:\n  inventory:\n    format: debezium\n    landing: ../landing\n"
                      "  billing:\n    format: debezium\n    landing: ../landing\n")
    dash = tmp_path / "resources" / "dq_metrics.lvdash.json"
    assert cli_main(["validate", "--no-sql", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert f"{dash.resolve()}:1: datasets.quarantine_samples: does not read the quarantine of every source of " in out
    assert "sqlcdc export lakeview" in out
    assert cli_main(["export", "lakeview", "--config", str(config)]) == 0
    assert capsys.readouterr().out.strip() == str(dash)
    assert cli_main(["validate", "--no-sql", "--config", str(config)]) == 0
    text = "".join(next(d for d in json.loads(dash.read_text())["datasets"] if d["name"] == QUARANTINE_DATASET)["queryLines"])
    assert "FROM `quarantine_billing`" in text and "FROM `quarantine_inventory`" in text and "quarantine_crm" not in text
    assert cli_main(["export", "lakeview", "--config", str(config)]) == 0
    assert capsys.readouterr().out.strip() == f"{dash}: up to date"


def test_with_config_keeps_the_layout_and_adds_the_source_column_once():
    cfg = load_pipeline(ROOT / "config" / "pipeline.yml")
    original = json.loads(DASH.read_text())
    again = with_config(original, cfg)
    assert again == original  # idempotent on an up-to-date file
    assert [p["name"] for p in again["pages"]] == [p["name"] for p in original["pages"]]
    fields = [f["name"] for p in again["pages"] for item in p["layout"] for q in item["widget"].get("queries", [])
              if q["query"]["datasetName"] == QUARANTINE_DATASET for f in q["query"]["fields"]]
    assert fields.count("source_name") == 1 and fields[0] == "source_name"
