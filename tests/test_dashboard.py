"""The local DQ dashboard (opened in headless Chromium), the Lakeview dashboard, and one end-to-end run
of a feed with known bad rows: quarantine, dropped, dq_metrics and the dashboard that shows them."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from dq_feed import RULES_YAML, RUN1, RUN2, build_warehouse, write_landing
from sqlcdc import dashboard, run_log
from sqlcdc.summary import Balance

ROOT = Path(__file__).resolve().parents[1]


class _Dom(HTMLParser):
    """Elements as (tag, attrs, text) of the DOM Chromium dumps after the page's scripts ran."""

    def __init__(self):
        super().__init__()
        self.elements: list[list] = []
        self._open: list[list] = []

    def handle_starttag(self, tag, attrs):
        e = [tag, dict(attrs), ""]
        self.elements.append(e)
        if tag not in ("br", "meta", "circle", "line", "polyline", "i"):
            self._open.append(e)

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for e in self._open[-1:]:
            e[2] += data


def rendered_dom(page: Path, tmp_path: Path) -> _Dom:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run does)")
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    dom = _Dom()
    dom.feed(out.stdout)
    return dom


def cells(dom: _Dom, table: str) -> dict[tuple[str, str], str]:
    return {(a["data-rule"], a["data-field"]): text for tag, a, text in dom.elements
            if tag == "td" and a.get("data-table") == table and "data-rule" in a}


def check_page_shows_the_bad_rows(dom: _Dom, checked: int = 4, landed: int = 7, runs: int = 2) -> None:
    """``checked``: changes the expectations saw in the latest run; ``landed``: its non-tombstone records."""
    body = [a for tag, a, _ in dom.elements if tag == "body"][0]
    assert body["data-rendered"] == "true"  # the inline script ran to the end
    c = cells(dom, "customers")
    assert (c[("email_has_at", "rows_quarantined")], c[("email_has_at", "rows_failed")]) == ("1", "1")
    assert (c[("id_in_range", "rows_dropped")], c[("id_in_range", "rows_checked")]) == ("1", str(checked))
    assert c[("not_a_test_name", "rows_warned")] == "1"
    assert c[("decode", "rows_quarantined")] == "1"
    assert c[("key_not_null", "rows_failed")] == "0"
    star = cells(dom, "*")
    assert star[("debezium-envelope $.payload.op: enum", "rows_quarantined")] == "1"
    assert star[("debezium-envelope $: not JSON", "rows_checked")] == str(landed)
    # charts: one point per run for each failing rule, drawn as SVG
    points = {(a["data-rule"], a["data-failed"]) for tag, a, _ in dom.elements if tag == "circle"}
    assert {("email_has_at", "1"), ("id_in_range", "1"), ("not_a_test_name", "1")} <= points
    if runs == 2:  # the snapshot's run: nothing failed
        assert ("email_has_at", "0") in points
    # samples: the quarantined and dropped records with their rules
    rules = {text for tag, a, text in dom.elements if tag == "td" and a.get("class") == "rules"}
    assert {"email_has_at", "id_in_range", "decode", "debezium-envelope $: not JSON"} <= rules
    assert any(tag == "td" and a.get("data-field") == "freshness" and text.endswith(" d") for tag, a, text in dom.elements)


def balance_cells(dom: _Dom) -> dict[tuple[str, str, str], str]:
    """(run, source, field) -> text of the balance panel."""
    return {(a["data-run"], a["data-source"], a["data-field"]): text for tag, a, text in dom.elements
            if tag == "td" and "data-source" in a and "data-run" in a}


def test_dashboard_page_renders_metrics_charts_and_samples_in_chromium(spark, tmp_path):
    wh = tmp_path / "warehouse"
    build_warehouse(spark, wh)
    utc = dt.timezone.utc
    first, second = (dt.datetime.fromisoformat(t).replace(tzinfo=utc) for t in (RUN1, RUN2))
    run_log.start(wh, first)
    run_log.finish(wh, first, 0, [Balance("inventory", landed=5, in_silver=4, quarantined=0, skipped=1)])
    run_log.start(wh, second)
    run_log.finish(wh, second, 3, [Balance("inventory", landed=12, in_silver=6, quarantined=4, skipped=1)])
    page = dashboard.write(spark, wh, tmp_path / "dq.html")
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text  # nothing fetched
    dom = rendered_dom(page, tmp_path)
    check_page_shows_the_bad_rows(dom)
    # the balance panel comes first, latest run first; a run whose balance does not hold says so
    ids = [a.get("id") for tag, a, _ in dom.elements if tag in ("div", "table") and a.get("id")]
    assert ids.index("balance") < ids.index("latest")
    one, two = (t.isoformat(timespec="microseconds") for t in (first, second))
    bal = balance_cells(dom)
    assert (bal[(one, "inventory", "landed")], bal[(one, "inventory", "balance")]) == ("5", "ok")
    assert [bal[(two, "inventory", f)] for f in ("landed", "in_silver", "quarantined", "dropped", "skipped")] \
        == ["12", "6", "4", "0", "1"]
    assert bal[(two, "inventory", "balance")] == "MISMATCH"  # 12 != 6 + 4 + 1
    rows = [a["data-run"] for tag, a, _ in dom.elements if tag == "td" and a.get("data-field") == "balance"]
    assert rows == [two, one]
    # a rule is drawn only in the runs it has rows in: the decoder's rule failed in run 2 only
    runs_of = {}
    for tag, a, _ in dom.elements:
        if tag == "circle":
            runs_of.setdefault(a["data-rule"], []).append(a["data-run"][:19])
    assert runs_of["decode"] == [RUN2] and runs_of["email_has_at"] == [RUN1, RUN2]


def test_failure_charts_put_runs_on_a_time_axis(tmp_path):
    """Runs at 10:00, 10:10 and 12:00: the second point sits 1/12 of the way, not half way."""
    metric = {"table_name": "customers", "rule": "email_has_at", "rule_kind": "expectation", "action": "quarantine",
              "rows_checked": 4, "rows_passed": 3, "rows_warned": 0, "rows_dropped": 0, "rows_quarantined": 1}
    runs = ["2026-11-21 10:00:00.000000", "2026-11-21 10:10:00.000000", "2026-11-21 12:00:00.000000"]
    page = tmp_path / "dq.html"
    page.write_text(dashboard.render({"metrics": [{**metric, "run_time": r, "rows_failed": 1} for r in runs],
                                      "samples": [], "runs": []}))
    dom = rendered_dom(page, tmp_path)
    xs = [float(a["cx"]) for tag, a, _ in dom.elements if tag == "circle"]
    assert len(xs) == 3 and xs[0] < xs[1] < xs[2]
    assert abs((xs[1] - xs[0]) / (xs[2] - xs[0]) - 1 / 12) < 0.01
    axis = [text for tag, a, text in dom.elements if tag == "text" and a.get("data-axis") == "time"]
    assert axis == ["11-21 10:00 UTC", "11-21 12:00 UTC"]


def test_dashboard_data_cannot_break_out_of_the_page():
    html = dashboard.render({"metrics": [], "samples": [{"raw": "</script><script>alert(1)</script>", "rules": []}]})
    assert "</script><script>alert(1)" not in html
    data = html.split('<script id="dq-data" type="application/json">')[1].split("</script>")[0]
    assert json.loads(data)["samples"][0]["raw"] == "</script><script>alert(1)</script>"


def test_lakeview_dashboard_reads_dq_metrics():
    dash = json.loads((ROOT / "resources" / "dq_metrics.lvdash.json").read_text())
    datasets = {d["name"]: "".join(d["queryLines"]) for d in dash["datasets"]}
    assert all("dq_metrics" in q or "quarantine" in q for q in datasets.values())
    names = set()
    for page in dash["pages"]:
        for item in page["layout"]:
            for q in item["widget"].get("queries", []):
                names.add(q["query"]["datasetName"])
    assert names and names <= set(datasets)
    from sqlcdc.bundle import bundle_problems

    assert bundle_problems(ROOT / "databricks.yml") == []


@pytest.mark.e2e
def test_e2e_installed_wheel_runs_a_project_bad_feed_quarantined_dropped_counted_and_shown(spark, tmp_path):
    """A project of one's own (`sqlcdc init`) on the feed of tests/dq_feed.py, run by the installed wheel
    alone (installed into a folder of its own, ahead of this checkout on the path) from an unrelated
    working directory: bronze -> silver -> gold, quarantine, dropped, dq_metrics; then the wheel's
    `sqlcdc dashboard`, then Chromium. (One real run carries both: each costs a minute of start-up.)"""
    from sqlcdc.cli import main as cli_main

    project = tmp_path / "my-dq"
    assert cli_main(["init", str(project), "--source", "inventory", "--table", "dbo.customers", "--keys", "id"]) == 0
    write_landing(project / "landing" / "inventory")
    table_file = project / "config" / "tables" / "customers.yml"
    table_file.write_text(table_file.read_text() + "expectations_file: ../rules/customers.yml\n")
    (project / "config" / "rules").mkdir()
    (project / "config" / "rules" / "customers.yml").write_text(RULES_YAML)
    target = tmp_path / "site"
    (wheel,) = (project / "dist").glob("*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
                   check=True)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = ("import sqlcdc, sys; from sqlcdc.cli import main; print(sqlcdc.__file__, flush=True); "
            "sys.exit(main(sys.argv[1:]))")

    def wheel_sqlcdc(*args: str, timeout: int) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)

    wh = project / "warehouse"
    run = wheel_sqlcdc("run", "--config", str(project / "config" / "pipeline.yml"), "--warehouse", str(wh), timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.stdout.splitlines()[0] == str(target / "sqlcdc" / "__init__.py")  # the wheel's, not this checkout's
    spec = yaml.safe_load((wh / "_sqlcdc" / "spark-pipeline.yml").read_text())
    libs = [(wh / "_sqlcdc" / lib["glob"]["include"]).resolve() for lib in spec["libraries"]]
    assert libs == [target / "sqlcdc" / "pipelines" / f"{layer}.py" for layer in ("bronze", "silver", "gold")]
    assert "source inventory: landed 12 = silver 6 + quarantine 4 + dropped 1 + skipped 1 (ok)" in run.stdout
    # the summary: 6 changes of 5 keys (1001-1005, 1007) reach silver; 4 current rows + 1005, 1007 in gold
    assert re.search(r"\bgold_customers_scd1 +6\n", run.stdout) and re.search(r"\bgold_customers_scd2 +6\n", run.stdout)

    def rows(name):
        return spark.read.format("delta").load(str(wh / "tables" / name)).collect()

    assert sorted((r.key.id, r.dq_warnings) for r in rows("silver_customers")) == [
        (1001, []), (1002, []), (1003, []), (1004, []), (1005, []), (1007, ["not_a_test_name"])]
    assert sorted(r.rules[0] for r in rows("quarantine_inventory")) == [
        "debezium-envelope $.payload.op: enum", "debezium-envelope $: not JSON", "decode", "email_has_at"]
    assert [json.loads(r.raw)["key"]["id"] for r in rows("dropped_inventory")] == [9001]
    assert 9001 not in {r.id for r in rows("gold_customers_scd1")}

    # one run (both files landed before it): 8 changes reach the expectations, 9 the decoder, 11 non-tombstones landed
    metrics = rows("dq_metrics")
    assert len({r.run_time for r in metrics}) == 1
    failed = {(r.table_name, r.rule): (r.rows_checked, r.rows_failed) for r in metrics if r.rows_failed}
    assert failed == {("customers", "email_has_at"): (8, 1), ("customers", "id_in_range"): (8, 1),
                      ("customers", "not_a_test_name"): (8, 1), ("customers", "decode"): (9, 1),
                      ("*", "debezium-envelope $.payload.op: enum"): (11, 1), ("*", "debezium-envelope $: not JSON"): (11, 1)}

    page = tmp_path / "dq.html"
    dash = wheel_sqlcdc("dashboard", "--warehouse", str(wh), "--out", str(page), timeout=600)
    assert dash.returncode == 0, dash.stderr[-3000:]
    dom = rendered_dom(page, tmp_path)
    check_page_shows_the_bad_rows(dom, checked=8, landed=11, runs=1)
    # the run's balance, from the run log sqlcdc run wrote; dq_metrics' run is that run's start
    (logged,) = run_log.runs(run_log.path(wh))
    bal = balance_cells(dom)
    assert [bal[(logged["run"], "inventory", f)] for f in ("landed", "in_silver", "quarantined", "dropped", "skipped",
                                                           "balance")] == ["12", "6", "4", "1", "1", "ok"]
    drawn = {a["data-run"] for tag, a, _ in dom.elements if tag == "circle"}
    assert drawn == {logged["run"][:26].replace("T", " ")}
    assert list(cwd.iterdir()) == []  # nothing written where the wheel's commands were started
