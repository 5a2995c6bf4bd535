"""The ``sqlcdc`` command. Each subcommand is a module in this package defining:

``NAME``                    the subcommand (``run``, ``validate``, ...)
``HELP``                    one line for ``sqlcdc --help``
``add_arguments(parser)``   its options (argparse)
``main(args) -> int``       runs it; returns the exit code

Subcommands are discovered, so adding one is adding a module.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from sqlcdc import __version__


def _commands():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "NAME") and hasattr(module, "main"):
            yield module


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sqlcdc",
        description="Land SQL Server change data (CT, CES, Debezium, Qlik) as bronze, silver and SCD gold tables.",
    )
    parser.add_argument("--version", action="version", version=f"sqlcdc {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _commands():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_main=module.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._main(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
