"""``sqlcdc init``: scaffold a project of your own, or a table config in an existing one.

A new project (:mod:`sqlcdc.scaffold`: pipeline config, one table, landing folder, Databricks bundle
with the sqlcdc wheel as an artifact)::

    sqlcdc init my_cdc --format debezium --source erp --table dbo.customers --keys id

A table config (``<tables_dir>/<name>.yml``) in the pipeline of ``--config``, from flags or by asking.

From flags (scripts, CI)::

    sqlcdc init --source inventory --table dbo.orders --keys order_id --scd 1,2

Interactively, when standard input is a terminal and a flag is missing: it asks for the source (the
pipeline's sources are offered), the table, the keys and the SCD types. The file is checked against
``schemas/table-config.schema.json`` before it is written, and an existing file is never
overwritten. The result is the three-line minimal config (plus ``scd_types`` when not the default)
with the other fields as comments to fill in.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

import yaml

from sqlcdc.diagnostics import schema_problems

NAME = "init"
HELP = "Scaffold a project (sqlcdc init DIR) or a table config (config/tables/<name>.yml); never overwrites."

_HINTS = """\
# More options (docs/config.md):
# name: {name}                 # names the targets: silver_{name}, gold_{name}_scd1, gold_{name}_scd2
# description: ...
# columns:                      # needed when envelopes carry no schema
#   - {{name: id, type: int}}
# except_column_list: [...]
# track_history_column_list: [...]
# expectations:
#   - {{name: amount_not_negative, constraint: amount >= 0, action: drop}}
# expectations_file: ../expectations/{name}.yml
# cluster_by: [...]
# table_properties: {{delta.enableChangeDataFeed: true}}
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("project", nargs="?", type=Path,
                        help="a new project folder to scaffold (config, landing folder, Databricks bundle, the wheel)")
    parser.add_argument("--format", default="debezium", help="with PROJECT: the producer (default: %(default)s)")
    parser.add_argument("--config", default="config/pipeline.yml", help="pipeline config (default: %(default)s)")
    parser.add_argument("--source", help="source name from the pipeline config")
    parser.add_argument("--table", help="source table, schema.table (or table: default schema)")
    parser.add_argument("--keys", help="primary-key columns, comma-separated")
    parser.add_argument("--scd", help="SCD types to build: 1, 2 or 1,2 (default: 1,2)")
    parser.add_argument("--name", help="target name (default: the table name, lower-cased)")
    parser.add_argument("--no-input", action="store_true", help="never ask, even on a terminal")


def main(args: argparse.Namespace, ask: Callable[[str], str] | None = None) -> int:
    if args.project is not None:
        return _project(args)
    config = Path(args.config)
    try:
        pipeline = yaml.safe_load(config.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        print(f"{config}: cannot read the pipeline config: {e}", file=sys.stderr)
        return 2
    sources = list((pipeline.get("sources") or {}).keys())
    interactive = not args.no_input and (ask is not None or sys.stdin.isatty())
    ask = ask or (lambda prompt: input(prompt))

    values = {"source": args.source, "table": args.table, "keys": args.keys, "scd": args.scd}
    if interactive:
        if values["source"] is None:
            default = sources[0] if len(sources) == 1 else ""
            values["source"] = ask(f"source ({', '.join(sources)}){f' [{default}]' if default else ''}: ").strip() or default
        if values["table"] is None:
            values["table"] = ask("table (schema.table): ").strip()
        if values["keys"] is None:
            values["keys"] = ask("keys (comma-separated): ").strip()
        if values["scd"] is None:
            values["scd"] = ask("SCD types (1, 2 or 1,2) [1,2]: ").strip() or "1,2"
    missing = [f"--{k}" for k in ("source", "table", "keys") if not values[k]]
    if missing:
        print(f"missing {', '.join(missing)} (or run on a terminal to be asked)", file=sys.stderr)
        return 2

    doc: dict = {"source": values["source"], "table": values["table"]}
    keys = [k.strip() for k in values["keys"].split(",") if k.strip()]
    doc["keys"] = keys
    problems = []
    if values["scd"]:
        try:
            scd = sorted({int(s) for s in values["scd"].split(",") if s.strip()})
        except ValueError:
            scd = values["scd"]  # the schema check below words the problem
        if scd != [1, 2]:
            doc["scd_types"] = scd
    name = args.name or str(values["table"]).split(".")[-1].lower()
    if args.name:
        doc["name"] = args.name
    if values["source"] not in sources:
        problems.append(f"source: unknown source {values['source']!r}; {config} defines {', '.join(sources) or 'none'}")

    where = Path(f"<{name}.yml>")
    problems += schema_problems(doc, "table-config.schema.json", where, {})
    if problems:
        for p in problems:
            print(p.replace(f"{where}:1: ", ""), file=sys.stderr)
        return 1

    tables_dir = config.parent / (pipeline.get("tables_dir") or "tables")
    out = tables_dir / f"{name}.yml"
    if out.exists():
        print(f"{out}: already exists; not overwritten (edit it, or choose --name)", file=sys.stderr)
        return 1
    tables_dir.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    out.write_text(body + _HINTS.format(name=name))
    print(out)
    return 0


def _project(args: argparse.Namespace) -> int:
    from sqlcdc.scaffold import Project, ScaffoldError, write_project

    fields: dict = {"folder": args.project, "format": args.format}
    if args.source:
        fields["source"] = args.source
    if args.table:
        fields["table"] = args.table
    if args.keys:
        fields["keys"] = tuple(k.strip() for k in args.keys.split(",") if k.strip())
    if args.scd:
        try:
            fields["scd_types"] = tuple(sorted({int(x) for x in args.scd.split(",") if x.strip()}))
        except ValueError:
            print(f"--scd: expected 1, 2 or 1,2, got {args.scd!r}", file=sys.stderr)
            return 2
    try:
        written = write_project(Project(**fields), echo=lambda line: print(f"sqlcdc init: {line}", flush=True))
    except ScaffoldError as e:
        print(f"sqlcdc init: {e}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    print(f"sqlcdc init: next: land change files in {args.project / 'landing'}, then "
          f"`sqlcdc run --config {args.project / 'config' / 'pipeline.yml'}`")
    return 0
