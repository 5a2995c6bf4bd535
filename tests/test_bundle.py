"""The Databricks bundle: its structure (checked with databricks-bundles' typed resource models), every
path it names exists, and the checker catches what a person gets wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from sqlcdc.bundle import bundle_files, bundle_problems, lakeview_problems

ROOT = Path(__file__).resolve().parent.parent


def _resources() -> dict:
    out: dict = {}
    for f in bundle_files(ROOT / "databricks.yml")[1:]:
        for kind, items in (yaml.safe_load(f.read_text()).get("resources") or {}).items():
            out.setdefault(kind, {}).update(items)
    return out


def test_the_projects_bundle_has_no_problems():
    assert bundle_problems(ROOT / "databricks.yml") == []


def test_bundle_is_shaped_as_people_write_them():
    top = yaml.safe_load((ROOT / "databricks.yml").read_text())
    assert top["bundle"]["name"] == "sqlcdc"
    assert top["include"] == ["resources/*.yml"]
    assert {"catalog", "schema", "config_path"} <= set(top["variables"])
    assert top["variables"]["config_path"]["default"] == "config/pipeline.yml"
    assert top["targets"]["dev"]["mode"] == "development" and top["targets"]["dev"]["default"] is True
    assert top["targets"]["prod"]["mode"] == "production"

    res = _resources()
    assert set(res) == {"pipelines", "jobs", "dashboards"}
    pipeline = res["pipelines"]["sqlcdc"]
    assert [lib["file"]["path"] for lib in pipeline["libraries"]] == [
        "../src/sqlcdc/pipelines/bronze.py", "../src/sqlcdc/pipelines/silver.py", "../src/sqlcdc/pipelines/gold.py"]
    # the package goes as the wheel the bundle builds, not as source on sys.path
    assert "root_path" not in pipeline
    assert pipeline["environment"]["dependencies"] == ["../dist/*.whl"]
    assert top["artifacts"]["sqlcdc"]["type"] == "whl" and top["artifacts"]["sqlcdc"]["path"] == "."
    assert "--wheel-dir dist" in top["artifacts"]["sqlcdc"]["build"]
    assert pipeline["configuration"]["sqlcdc.config"] == "${workspace.file_path}/${var.config_path}"
    assert (pipeline["catalog"], pipeline["schema"]) == ("${var.catalog}", "${var.schema}")
    assert pipeline["serverless"] is True
    (task,) = res["jobs"]["sqlcdc_refresh"]["tasks"]
    assert task["pipeline_task"]["pipeline_id"] == "${resources.pipelines.sqlcdc.id}"
    dash = res["dashboards"]["sqlcdc_dq"]
    assert (ROOT / "resources" / dash["file_path"]).is_file()
    assert lakeview_problems(ROOT / "resources" / dash["file_path"]) == []


def test_resources_load_into_the_typed_models():
    pipelines = pytest.importorskip("databricks.bundles.pipelines")
    jobs = pytest.importorskip("databricks.bundles.jobs")
    dashboards = pytest.importorskip("databricks.bundles.dashboards")
    res = _resources()
    p = pipelines.Pipeline.from_dict(res["pipelines"]["sqlcdc"])
    assert [lib.file.path for lib in p.libraries] == [
        "../src/sqlcdc/pipelines/bronze.py", "../src/sqlcdc/pipelines/silver.py", "../src/sqlcdc/pipelines/gold.py"]
    assert p.serverless is True and p.environment.dependencies == ["../dist/*.whl"]
    j = jobs.Job.from_dict(res["jobs"]["sqlcdc_refresh"])
    assert j.tasks[0].task_key == "refresh_pipeline"
    d = dashboards.Dashboard.from_dict(res["dashboards"]["sqlcdc_dq"])
    assert d.file_path == "dq_metrics.lvdash.json"
    # and the models do refuse what is wrong, which is what the checker relies on
    with pytest.raises(ValueError, match="Unexpected field 'librarys'"):
        pipelines.Pipeline.from_dict({"name": "x", "librarys": []})


def test_every_path_the_bundle_names_exists():
    paths = []
    for f in bundle_files(ROOT / "databricks.yml")[1:]:
        base = f.parent
        for kind, items in (yaml.safe_load(f.read_text()).get("resources") or {}).items():
            for body in items.values():
                for lib in body.get("libraries") or []:
                    paths.append(base / lib["file"]["path"])
                if "file_path" in body:
                    paths.append(base / body["file_path"])
    assert len(paths) == 4
    assert [p for p in paths if not p.is_file()] == []
    assert (ROOT / "config" / "pipeline.yml").is_file()


@pytest.fixture
def bundle(tmp_path) -> Path:
    """A copy of the project's bundle with stand-in pipeline files, to break on purpose."""
    shutil.copy(ROOT / "databricks.yml", tmp_path / "databricks.yml")
    shutil.copytree(ROOT / "resources", tmp_path / "resources")
    defs = tmp_path / "src" / "sqlcdc" / "pipelines"
    defs.mkdir(parents=True)
    for name in ("bronze", "silver", "gold"):
        (defs / f"{name}.py").write_text("")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "pipeline.yml").write_text("")
    assert bundle_problems(tmp_path / "databricks.yml") == []
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_missing_library_file_is_reported_with_file_and_line(bundle):
    res = bundle / "resources" / "sqlcdc.pipeline.yml"
    _edit(res, "../src/sqlcdc/pipelines/gold.py", "../src/sqlcdc/pipelines/glod.py")
    problems = bundle_problems(bundle / "databricks.yml")
    assert problems == [
        f"{res}:22: resources.pipelines.sqlcdc.libraries[2].file.path: no such file ../src/sqlcdc/pipelines/glod.py "
        f"({bundle / 'src' / 'sqlcdc' / 'pipelines' / 'glod.py'})",
        f"{res}:16: resources.pipelines.sqlcdc.libraries: src/sqlcdc/pipelines/gold.py is not a library of this pipeline",
    ]


def test_a_new_definition_file_must_join_the_pipeline(bundle):
    (bundle / "src" / "sqlcdc" / "pipelines" / "quarantine.py").write_text("")
    res = bundle / "resources" / "sqlcdc.pipeline.yml"
    assert bundle_problems(bundle / "databricks.yml") == [
        f"{res}:16: resources.pipelines.sqlcdc.libraries: src/sqlcdc/pipelines/quarantine.py is not a library of "
        "this pipeline"
    ]


def test_the_wheel_the_pipeline_installs_must_be_built_by_an_artifact(bundle):
    top, res = bundle / "databricks.yml", bundle / "resources" / "sqlcdc.pipeline.yml"
    _edit(res, "../dist/*.whl", "../wheels/*.whl")
    _edit(top, "    build: python3", "    buil: python3")
    problems = bundle_problems(top)
    assert problems == [
        f"{top}:24: artifacts.sqlcdc.buil: unknown field",
        f"{top}:21: artifacts.sqlcdc: needs build (a command that writes the artifact) or files (prebuilt ones)",
        f"{res}:27: resources.pipelines.sqlcdc.environment.dependencies[0]: ../wheels/*.whl matches no wheel, and "
        "no artifact of the bundle builds one there",
    ]
    # a prebuilt wheel in place is enough
    (bundle / "wheels").mkdir()
    (bundle / "wheels" / "sqlcdc-0.1.0-py3-none-any.whl").write_bytes(b"")
    _edit(top, "    buil: python3", "    build: python3")
    assert bundle_problems(top) == []


def test_unknown_field_wrong_mode_and_undeclared_variable(bundle):
    top = bundle / "databricks.yml"
    _edit(top, "mode: production", "mode: prod")
    res = bundle / "resources" / "sqlcdc.pipeline.yml"
    _edit(res, "serverless: true", "serverles: true")
    _edit(res, "catalog: ${var.catalog}", "catalog: ${var.catlog}")
    problems = bundle_problems(top)
    assert problems[0] == f"{top}:65: targets.prod.mode: 'prod' is not one of ['development', 'production']"
    assert problems[1] == f"{res}:8: resources.pipelines.sqlcdc.catalog: ${{var.catlog}} names no declared variable"
    if len(problems) == 3:  # typed models installed (dev extra)
        assert problems[2] == (
            f"{res}:6: resources.pipelines.sqlcdc: not a valid Pipeline (Unexpected field 'serverles' for class Pipeline)")
    assert len(problems) in (2, 3)


def test_job_must_name_a_pipeline_of_the_bundle_and_config_must_exist(bundle):
    _edit(bundle / "resources" / "sqlcdc.job.yml", "resources.pipelines.sqlcdc.id", "resources.pipelines.cdc.id")
    (bundle / "config" / "pipeline.yml").unlink()
    job, res = bundle / "resources" / "sqlcdc.job.yml", bundle / "resources" / "sqlcdc.pipeline.yml"
    assert bundle_problems(bundle / "databricks.yml") == [
        f"{job}:15: resources.jobs.sqlcdc_refresh.tasks[0].pipeline_task.pipeline_id: "
        "${resources.pipelines.cdc.id} names no resource of this bundle",
        f"{res}:14: resources.pipelines.sqlcdc.configuration.sqlcdc.config: no such file config/pipeline.yml in the "
        f"bundle ({bundle / 'config' / 'pipeline.yml'})",
    ]


def test_dashboard_widgets_must_name_their_datasets(bundle):
    dash = bundle / "resources" / "dq_metrics.lvdash.json"
    dash.write_text(
        '{"datasets": [{"name": "m", "queryLines": ["SELECT 1"]}], "pages": [{"name": "p", "displayName": "P", '
        '"layout": [{"widget": {"name": "w", "queries": [{"name": "q", "query": {"datasetName": "dq"}}]}}]}]}'
    )
    assert bundle_problems(bundle / "databricks.yml") == [
        f"{dash}:1: pages[0].layout[0].widget.queries[0].query.datasetName: no dataset named 'dq'"
    ]
