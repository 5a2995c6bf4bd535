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
import types

from sqlcdc import __version__


def _commands():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{__name__}.{info.name}")
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in _ENGINE:
                raise
            yield _needs_engine(info.name, e.name)
            continue
        if hasattr(module, "NAME") and hasattr(module, "main"):
            yield module


#: Packages of the `local` extra (pyspark, delta-spark): absent where only `pip install sqlcdc` ran.
_ENGINE = {"pyspark", "delta", "pandas", "pyarrow"}


def _needs_engine(name: str, missing: str):
    """A stand-in command for one that needs Spark where it is not installed: it says how to get it."""

    def main(args) -> int:
        print(f"sqlcdc {name}: needs Spark ({missing} is not installed): pip install 'sqlcdc[local]'",
              file=sys.stderr)
        return 2

    return types.SimpleNamespace(NAME=name, HELP="(needs Spark: pip install 'sqlcdc[local]')",
                                 add_arguments=lambda p: p.add_argument("rest", nargs=argparse.REMAINDER),
                                 main=main)


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
