"""``sqlcdc export``: the config for another tool.

``export dlt-meta`` writes dlt-meta onboarding files (:mod:`sqlcdc.dlt_meta`); ``export lakeview``
rewrites the Databricks DQ dashboard's config-derived datasets (:mod:`sqlcdc.lakeview`) in place.

Example::

    sqlcdc export dlt-meta --config config/pipeline.yml --out build/dlt-meta \\
        --env prod --catalog main --bronze-database sqlcdc_bronze --silver-database sqlcdc \\
        --conf-path /Volumes/main/sqlcdc/conf/dlt-meta

then onboard with dlt-meta (``databricks labs sdp-meta onboard``) pointing at
``build/dlt-meta/onboarding.json`` once the folder is uploaded to ``--conf-path``.
"""

from __future__ import annotations

import argparse
import sys

from sqlcdc.config import ConfigError, load_pipeline

NAME = "export"
HELP = ("Export the config for another tool: `export dlt-meta` writes dlt-meta onboarding JSON; "
        "`export lakeview` updates the Databricks DQ dashboard's datasets.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", choices=["dlt-meta", "lakeview"], help="what to export for")
    parser.add_argument("--config", default="config/pipeline.yml", help="pipeline config (default: %(default)s)")
    parser.add_argument("--out", help="dlt-meta: folder to write onboarding.json and friends into; lakeview: the "
                        ".lvdash.json to update (default: resources/dq_metrics.lvdash.json of the bundle)")
    parser.add_argument("--env", default="dev", help="dlt-meta environment suffix of the *_<env> fields (default: %(default)s)")
    parser.add_argument("--catalog", help="Unity Catalog catalog for bronze and silver (default: none)")
    parser.add_argument("--bronze-database", default="bronze", help="schema of the bronze tables (default: %(default)s)")
    parser.add_argument("--silver-database", default="silver", help="schema of the silver tables (default: %(default)s)")
    parser.add_argument(
        "--conf-path",
        help="where the written files will be when dlt-meta reads them (default: the --out folder, absolute)",
    )
    parser.add_argument("--table-root", help="non-Unity-Catalog table paths: <root>/<database>/<table>")


def main(args: argparse.Namespace) -> int:
    from sqlcdc.dlt_meta import export

    try:
        cfg = load_pipeline(args.config)
    except ConfigError as e:
        for p in e.problems:
            print(p, file=sys.stderr)
        print(f"{len(e.problems)} problem(s); nothing was written (run `sqlcdc validate`)", file=sys.stderr)
        return 2  # the config does not load: nothing to export (as `sqlcdc run` says 2)
    if args.target == "lakeview":
        return _lakeview(cfg, args)
    if not args.out:
        print("export dlt-meta: --out FOLDER is required", file=sys.stderr)
        return 2
    from sqlcdc.dlt_meta import refusals

    problems = refusals(cfg)
    if any(t.expectations for t in cfg.tables):  # dlt-meta would fail on a rule Spark cannot parse
        from sqlcdc.cli.validate import _spark, expression_problems

        problems += expression_problems(cfg, _spark())
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        print(f"{len(problems)} problem(s) dlt-meta could not run; nothing was written", file=sys.stderr)
        return 1
    kwargs = {"env": args.env, "bronze_database": args.bronze_database, "silver_database": args.silver_database,
              "catalog": args.catalog, "table_root": args.table_root}
    if args.conf_path:
        kwargs["conf_path"] = args.conf_path.rstrip("/")
    written, warnings = export(cfg, args.out, **kwargs)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    for p in written:
        print(p)
    return 0


def _lakeview(cfg, args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from sqlcdc.cli.validate import find_bundle
    from sqlcdc.lakeview import with_config

    if args.out:
        path = Path(args.out)
    else:
        bundle = find_bundle(Path(args.config))
        path = bundle.parent / "resources" / "dq_metrics.lvdash.json" if bundle else Path("dq_metrics.lvdash.json")
    try:
        current = json.loads(path.read_text()) if path.exists() else {}
    except ValueError as e:
        print(f"{path}: not valid JSON ({e}); nothing was written", file=sys.stderr)
        return 1
    updated = with_config(current, cfg)
    if updated == current:
        print(f"{path}: up to date")
        return 0
    path.write_text(json.dumps(updated, indent=2) + "\n")
    print(path)
    return 0
