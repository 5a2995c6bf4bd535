"""``sqlcdc setup``: put the JVM artifacts a local Spark needs (Delta, Avro, Kafka) on the classpath
of the pyspark sqlcdc is installed with, fetched from Maven Central and checked against their SHA-1.

Run it once after ``pip install``; ``sqlcdc run`` runs it by itself when something is missing. A
second run with everything in place does no network I/O.

Exit codes: 0 everything in place; 2 an artifact could not be fetched (the message names its URL).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sqlcdc import runtime

NAME = "setup"
HELP = "Fetch the JARs a local Spark needs (Delta, Avro, Kafka) from Maven Central into pyspark's jars/."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", type=Path, help="a folder to keep the fetched JARs in (and take them from)")
    parser.add_argument("--quiet", action="store_true", help="print only what is fetched")
    parser.add_argument("--check", action="store_true", help="only say what is missing (exit 1 if anything is)")


def main(args: argparse.Namespace) -> int:
    folder = runtime.spark_jars_dir()
    missing = runtime.missing_jars(folder)
    if args.check:
        for jar in missing:
            print(f"missing: {jar.file_name} (in {folder})")
        return 1 if missing else 0
    try:
        placed = runtime.fetch_jars(folder=folder, cache=args.cache, echo=lambda line: print(f"sqlcdc setup: {line}", flush=True))
    except runtime.JarFetchError as e:
        print(f"sqlcdc setup: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"sqlcdc setup: {len(runtime.required_jars())} JARs in place in {folder}"
              + (f" ({len(placed)} added)" if placed else ""))
    return 0
