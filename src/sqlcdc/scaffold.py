"""A new sqlcdc project in a folder of its own: what ``sqlcdc init PROJECT_DIR`` writes.

The project uses the *installed* sqlcdc (no checkout of this repository), runs locally with
``sqlcdc run --config PROJECT_DIR/config/pipeline.yml`` from any folder, and deploys to Databricks
as a bundle that installs the sqlcdc wheel into the pipeline's environment, as Databricks'
default-python template does for a project's own wheel::

    PROJECT_DIR/
      config/pipeline.yml           one source (its landing folder: landing/<source>/)
      config/tables/<table>.yml     one table
      landing/<source>/             where change files land
      pipelines/{bronze,silver,gold}.py   the definition files the bundle deploys (three lines each)
      databricks.yml                the bundle: the sqlcdc wheel as an artifact, dev/prod targets
      resources/<name>.pipeline.yml the pipeline (libraries, config, the wheel as a dependency)
      resources/<name>.job.yml      an hourly refresh
      dist/sqlcdc-<version>-*.whl   the wheel of the installed sqlcdc (copied, or built from its source)
      .gitignore, README.md

Nothing is overwritten: a folder that already holds any of these files is refused.

Example::

    from sqlcdc.scaffold import Project, write_project
    written = write_project(Project(folder=Path("my_cdc"), source="erp", format="debezium",
                                    table="dbo.customers", keys=("id",)))
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

import yaml

from sqlcdc.assets import PIPELINE_LAYERS, PIPELINES_DIR
from sqlcdc.diagnostics import schema_problems

__all__ = ["Project", "ScaffoldError", "write_project", "project_problems", "sqlcdc_wheel"]


class ScaffoldError(Exception):
    """The project cannot be written (the message names the file or the problem)."""


@dataclass(frozen=True)
class Project:
    """What ``sqlcdc init PROJECT_DIR`` asks for; the defaults make a project that validates."""

    folder: Path
    source: str = "cdc"
    format: str = "debezium"
    table: str = "dbo.customers"
    keys: tuple[str, ...] = ("id",)
    scd_types: tuple[int, ...] = (1, 2)

    @property
    def name(self) -> str:
        """The pipeline's name (and the bundle's): the folder's name, as an identifier."""
        out = "".join(c if c.isalnum() else "_" for c in self.folder.resolve().name.lower()).strip("_")
        return out if out and not out[0].isdigit() else f"p_{out}"

    @property
    def table_name(self) -> str:
        return self.table.split(".")[-1].lower()


def _formats() -> dict[str, list[str]]:
    """The ``format`` values installed decoders read (the schema file lists the built-in ones;
    without the Spark engine installed, the decoders cannot be imported and those are used)."""
    try:
        from sqlcdc import formats
    except ImportError:
        return {}
    return {"format": formats.available()}


def project_problems(project: Project) -> list[str]:
    """The problems of the configs the project would get (the same checks ``sqlcdc validate`` runs)."""
    pipeline, table = _pipeline_doc(project), _table_doc(project)
    return (schema_problems(pipeline, "pipeline-config.schema.json", Path("<pipeline.yml>"), {}, enums=_formats())
            + schema_problems(table, "table-config.schema.json", Path(f"<{project.table_name}.yml>"), {}))


def write_project(project: Project, *, echo=lambda line: None) -> list[Path]:
    """Write the project (see the module docstring); return the files written."""
    problems = project_problems(project)
    if problems:
        raise ScaffoldError("\n".join(problems))
    root = project.folder
    files = _files(project)
    taken = [root / rel for rel in files if (root / rel).exists()]
    if taken:
        raise ScaffoldError(f"{taken[0]}: already exists; sqlcdc init never overwrites (choose an empty folder)")
    written = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    (root / "landing" / project.source).mkdir(parents=True, exist_ok=True)
    written.append(sqlcdc_wheel(root / "dist", echo=echo))
    return written


def sqlcdc_wheel(dest: Path, *, echo=lambda line: None) -> Path:
    """Put the wheel of the installed sqlcdc into ``dest``: the file it was installed from, or one
    built from the source folder it was installed from (``pip install .`` / ``-e .``), or the
    release of the same version downloaded from the package index."""
    dist = metadata.distribution("sqlcdc")
    direct = dist.read_text("direct_url.json")
    source = json.loads(direct) if direct else {}
    url = source.get("url", "")
    path = Path(unquote(urlparse(url).path)) if url.startswith("file:") else None
    dest.mkdir(parents=True, exist_ok=True)
    if path is not None and path.suffix == ".whl" and path.is_file():
        echo(f"copying {path.name}")
        return Path(shutil.copy2(path, dest / path.name))
    if path is not None and path.is_dir():
        echo(f"building the sqlcdc wheel from {path}")
        cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dest), str(path)]
    else:
        echo(f"downloading sqlcdc {dist.version} from the package index")
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
               "--dest", str(dest), f"sqlcdc=={dist.version}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob(f"sqlcdc-{dist.version}-*.whl"))
    if done.returncode != 0 or not wheels:
        raise ScaffoldError(f"could not get the sqlcdc wheel into {dest} ({' '.join(cmd[2:5])}): "
                            + (done.stderr.strip().splitlines() or ["no wheel written"])[-1])
    return wheels[-1]


# --- the files -------------------------------------------------------------------------------------

def _pipeline_doc(p: Project) -> dict:
    return {"name": p.name, "sources": {p.source: {"format": p.format, "landing": f"../landing/{p.source}"}},
            "tables_dir": "tables"}


def _table_doc(p: Project) -> dict:
    doc: dict = {"source": p.source, "table": p.table, "keys": list(p.keys)}
    if tuple(p.scd_types) != (1, 2):
        doc["scd_types"] = list(p.scd_types)
    return doc


def _yaml(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


def _files(p: Project) -> dict[str, str]:
    out = {
        "config/pipeline.yml": (
            "# sqlcdc pipeline config (reference: sqlcdc's docs/config.md). Landing folders are relative to\n"
            "# this file; on Databricks point them at a volume (/Volumes/<catalog>/<schema>/<volume>/...).\n"
            + _yaml(_pipeline_doc(p))),
        f"config/tables/{p.table_name}.yml": (
            f"# One onboarded table: silver_{p.table_name}, gold_{p.table_name}_scd1 / _scd2.\n"
            "# Add columns:, expectations:, ... as docs/config.md describes.\n" + _yaml(_table_doc(p))),
        "databricks.yml": _DATABRICKS_YML.format(name=p.name),
        f"resources/{p.name}.pipeline.yml": _PIPELINE_YML.format(name=p.name),
        f"resources/{p.name}.job.yml": _JOB_YML.format(name=p.name),
        ".gitignore": "warehouse/\ndist/\n.databricks/\n",
        "README.md": _README.format(name=p.name, source=p.source, table=p.table_name),
    }
    for layer in PIPELINE_LAYERS:
        out[f"pipelines/{layer}.py"] = (PIPELINES_DIR / f"{layer}.py").read_text()
    return out


_DATABRICKS_YML = """\
# The Databricks bundle of {name}: the sqlcdc wheel (an artifact, installed into the pipeline's
# environment), the pipeline's definition files and config, and a refresh job.
#
#   databricks bundle validate
#   databricks bundle deploy -t dev
#   databricks bundle run {name}_refresh -t dev
bundle:
  name: {name}

include:
  - resources/*.yml

# The sqlcdc wheel in dist/ (sqlcdc init put it there; replace it to upgrade sqlcdc).
artifacts:
  sqlcdc:
    type: whl
    files:
      - source: dist/sqlcdc-*.whl

sync:
  exclude:
    - warehouse/**
    - dist/**

variables:
  catalog:
    description: Unity Catalog catalog the pipeline publishes to.
    default: main
  schema:
    description: Schema (in catalog) for the bronze, silver, gold, quarantine and dq_metrics tables.
    default: {name}
  config_path:
    description: Pipeline config, relative to the bundle root.
    default: config/pipeline.yml

targets:
  dev:
    mode: development
    default: true
    variables:
      schema: {name}_${{workspace.current_user.short_name}}
  prod:
    mode: production
    variables:
      schema: {name}
"""

_PIPELINE_YML = """\
# The {name} pipeline: bronze, silver and gold declared by sqlcdc from config/.
resources:
  pipelines:
    {name}:
      name: {name}
      catalog: ${{var.catalog}}
      schema: ${{var.schema}}
      serverless: true
      channel: CURRENT
      configuration:
        sqlcdc.config: ${{workspace.file_path}}/${{var.config_path}}
      libraries:
        - file:
            path: ../pipelines/bronze.py
        - file:
            path: ../pipelines/silver.py
        - file:
            path: ../pipelines/gold.py
      environment:
        dependencies:
          # the sqlcdc wheel (artifacts: in databricks.yml); the runtime brings Spark and Delta
          - ../dist/sqlcdc-*.whl
"""

_JOB_YML = """\
# Refreshes the {name} pipeline every hour (paused in the dev target by development mode).
resources:
  jobs:
    {name}_refresh:
      name: {name}_refresh
      trigger:
        periodic:
          interval: 1
          unit: HOURS
      max_concurrent_runs: 1
      tasks:
        - task_key: refresh_pipeline
          pipeline_task:
            pipeline_id: ${{resources.pipelines.{name}.id}}
            full_refresh: false
"""

_README = """\
# {name}

SQL Server change data landed by sqlcdc: bronze, silver and SCD1/SCD2 gold tables.

- Change files land in `landing/{source}/`; the table is onboarded in `config/tables/{table}.yml`.
- Check: `sqlcdc validate --config config/pipeline.yml`
- Run locally: `sqlcdc run --config config/pipeline.yml --warehouse warehouse`
  (tables under `warehouse/tables/`; a second run processes only what landed since).
- Deploy: `databricks bundle deploy -t dev`, then `databricks bundle run {name}_refresh -t dev`.
"""
