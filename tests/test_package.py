"""sqlcdc as an installable package: the wheel carries what a run needs, `sqlcdc setup` places the
JARs, and `sqlcdc init DIR` scaffolds a project of one's own that validates. The installed wheel running
such a project from any working directory is part of ``test_dashboard.py``'s real run."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
import yaml

from sqlcdc import runtime
from sqlcdc.bundle import bundle_problems, have_typed_models
from sqlcdc.cli import main as cli_main
from sqlcdc.scaffold import Project, ScaffoldError, write_project

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """``sqlcdc init`` of a Debezium project (the wheel is built from this checkout into dist/)."""
    folder = tmp_path_factory.mktemp("projects") / "my-cdc"
    assert cli_main(["init", str(folder), "--source", "erp", "--table", "dbo.customers", "--keys", "id"]) == 0
    return folder


def test_init_writes_a_project_that_validates(project, capsys):
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert files == [
        ".gitignore", "README.md", "config/pipeline.yml", "config/tables/customers.yml", "databricks.yml",
        "dist/sqlcdc-0.1.0-py3-none-any.whl", "pipelines/bronze.py", "pipelines/gold.py", "pipelines/silver.py",
        "resources/my_cdc.job.yml", "resources/my_cdc.pipeline.yml",
    ]
    assert (project / "landing" / "erp").is_dir()
    assert yaml.safe_load((project / "config" / "pipeline.yml").read_text()) == {
        "name": "my_cdc", "sources": {"erp": {"format": "debezium", "landing": "../landing/erp"}}, "tables_dir": "tables"}
    assert yaml.safe_load((project / "config" / "tables" / "customers.yml").read_text()) == {
        "source": "erp", "table": "dbo.customers", "keys": ["id"]}
    # the bundle: the wheel as an artifact and as the pipeline's dependency, the definition files as libraries
    top = yaml.safe_load((project / "databricks.yml").read_text())
    assert top["artifacts"]["sqlcdc"] == {"type": "whl", "files": [{"source": "dist/sqlcdc-*.whl"}]}
    pipeline = yaml.safe_load((project / "resources" / "my_cdc.pipeline.yml").read_text())["resources"]["pipelines"]["my_cdc"]
    assert pipeline["environment"]["dependencies"] == ["../dist/sqlcdc-*.whl"]
    assert [lib["file"]["path"] for lib in pipeline["libraries"]] == [
        "../pipelines/bronze.py", "../pipelines/silver.py", "../pipelines/gold.py"]
    assert bundle_problems(project / "databricks.yml") == []
    if have_typed_models():
        from databricks.bundles.pipelines import Pipeline

        assert Pipeline.from_dict(pipeline).environment.dependencies == ["../dist/sqlcdc-*.whl"]
    # `sqlcdc validate` (configs + the bundle found beside them) passes; --no-sql: nothing has landed
    capsys.readouterr()
    assert cli_main(["validate", "--no-sql", "--config", str(project / "config" / "pipeline.yml")]) == 0
    assert capsys.readouterr().err == (
        f"{project / 'config' / 'pipeline.yml'}: OK (checked 1 source(s), 1 table(s), SQL not parsed (--no-sql), "
        f"bundle {project / 'databricks.yml'} and 2 included file(s))\n")


def test_init_never_overwrites_and_refuses_a_bad_project(project, tmp_path, capsys):
    assert cli_main(["init", str(project)]) == 1
    assert f"{project / 'config' / 'pipeline.yml'}: already exists" in capsys.readouterr().err
    with pytest.raises(ScaffoldError, match="format"):
        write_project(Project(folder=tmp_path / "p", format="oracle"))
    assert not (tmp_path / "p").exists()
    assert cli_main(["init", str(tmp_path / "q"), "--scd", "one"]) == 2
    assert not (tmp_path / "q").exists()


def test_the_wheel_carries_what_a_run_needs_and_leaves_spark_to_the_runtime(project):
    (wheel,) = (project / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read("sqlcdc-0.1.0.dist-info/METADATA").decode()
    for f in ("pipelines/bronze.py", "pipelines/silver.py", "pipelines/gold.py", "jars.txt",
              "schemas/pipeline-config.schema.json", "schemas/table-config.schema.json",
              "schemas/debezium-envelope.schema.json", "schemas/qlik-data-message.schema.json"):
        assert f"sqlcdc/{f}" in names, f
    assert sum(n.startswith("sqlcdc/schemas/") for n in names) == len(list((ROOT / "src/sqlcdc/schemas").glob("*.json")))
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    # on Databricks the wheel must not pip-install a second Spark over the runtime's
    assert [r for r in requires if "extra ==" not in r] == ["PyYAML>=6", "jsonschema>=4.20"]
    assert any(r.startswith("pyspark[connect]==4.2.0") and 'extra == "local"' in r for r in requires)


def test_setup_places_missing_jars_checked_against_maven_centrals_sha1(tmp_path):
    jars = runtime.required_jars()
    assert [j.file_name for j in jars][:2] == ["delta-spark_4.2_2.13-4.4.0.jar", "delta-storage-4.4.0.jar"]
    assert jars[1].url == "https://repo1.maven.org/maven2/io/delta/delta-storage/4.4.0/delta-storage-4.4.0.jar"
    served = {j.url: j.file_name.encode() for j in jars}
    served.update({u + ".sha1": hashlib.sha1(b).hexdigest().encode() + b"  file\n" for u, b in list(served.items())})
    asked: list[str] = []

    def opener(url: str) -> bytes:
        asked.append(url)
        return served[url]

    folder, cache = tmp_path / "jars", tmp_path / "cache"
    (folder).mkdir()
    (folder / jars[0].file_name).write_bytes(b"already here")
    placed = runtime.fetch_jars(folder=folder, cache=cache, opener=opener)
    assert placed == jars[1:]
    assert (folder / jars[0].file_name).read_bytes() == b"already here"
    assert (folder / jars[1].file_name).read_bytes() == jars[1].file_name.encode()
    assert sorted(p.name for p in cache.iterdir()) == sorted(j.file_name for j in jars[1:])
    assert runtime.missing_jars(folder) == []
    # a fresh folder is filled from the cache, without the network
    asked.clear()
    assert runtime.fetch_jars(folder=tmp_path / "other", cache=cache, opener=opener) == jars
    assert asked == [jars[0].url, jars[0].url + ".sha1"]
    # a JAR that does not match its published checksum is refused, naming it, and not written
    served[jars[0].url] = b"tampered"
    with pytest.raises(runtime.JarFetchError, match="delta-spark_4.2_2.13-4.4.0.jar: SHA-1 .* does not match"):
        runtime.fetch_jars(folder=tmp_path / "third", opener=opener)
    assert not (tmp_path / "third" / jars[0].file_name).exists()


def test_setup_check_says_what_is_missing(capsys):
    assert cli_main(["setup", "--check"]) == 0  # make's set-up placed them for this venv
    assert capsys.readouterr().out == ""


def test_a_command_that_needs_spark_says_how_to_get_it(capsys):
    from sqlcdc.cli import _needs_engine

    stub = _needs_engine("run", "pyspark")
    assert stub.main(None) == 2
    assert capsys.readouterr().err == "sqlcdc run: needs Spark (pyspark is not installed): pip install 'sqlcdc[local]'\n"


def test_a_failed_pipeline_run_exits_1_naming_the_log(monkeypatch, tmp_path, capsys):
    from sqlcdc.cli import run as run_cmd

    (tmp_path / "tables").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  s:\n    format: debezium\n    landing: in\n")
    monkeypatch.setattr(run_cmd, "run_pipeline", lambda *a, **k: 137)
    stopped = []
    monkeypatch.setattr(run_cmd, "_engine", lambda wh, settings=None: type("E", (), {"stop": lambda self: stopped.append(wh)})())
    monkeypatch.setattr(runtime, "fetch_jars", lambda **k: [])
    assert cli_main(["run", "--config", str(tmp_path / "pipeline.yml"), "--warehouse", str(tmp_path / "wh")]) == 1
    assert capsys.readouterr().err == (
        f"sqlcdc run: the pipeline failed (spark-pipelines exit code 137); full log: "
        f"{tmp_path / 'wh' / '_sqlcdc' / 'last-run.log'}\n")
    from sqlcdc import run_log

    assert [r["exit"] for r in run_log.runs(run_log.path(tmp_path / "wh"))] == [1]  # the run log says so too
    assert stopped == [(tmp_path / "wh").resolve()]  # the run's Spark is stopped, failed or not
    assert cli_main(["run", "--config", str(tmp_path / "nope.yml")]) == 2
