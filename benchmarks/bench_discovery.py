"""What finding a table's columns costs at pipeline definition, with and without the kept scan.

A CES table without ``columns:`` takes its columns and keys from every landed event's
``eventsource.cols`` (``formats._ces_metadata._discover``); a Qlik table its columns' types from the
metadata messages among the landed lines (``formats._qlik_metadata.discover``): without a state
folder every run scans the whole landing; in a local run (``formats._discovery``) a run reads only
the files landed since the last. This lands one random ``--format`` history (``tests/histories.py``) as ``--files`` files, then
times, in one Spark Connect session (as ``spark-pipelines`` defines a pipeline), the best of
``--repeat`` of:

* ``floor``: Spark reading the landed lines (``spark.read.text(...).count()``);
* ``full``: discovery without a state folder (every run before the kept scan);
* ``kept``: discovery with the rows kept and nothing new landed;
* ``one new``: discovery with the rows kept and one new file (of the same size) landed;

each beside the floor as a ratio. Relative figures in one process; the machine's load moves the rest::

    .venv/bin/python benchmarks/bench_discovery.py --changes 20000 --files 40 [--format qlik]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import histories  # noqa: E402
from connect_resolution import connect_session  # noqa: E402

from sqlcdc.config import load_pipeline  # noqa: E402
from sqlcdc.formats import _ces_metadata, _discovery, _qlik_metadata, base  # noqa: E402


def best(repeat: int, fn, before=None) -> float:
    times = []
    for _ in range(repeat):
        if before:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--changes", type=int, default=20000)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--format", choices=("ces", "qlik"), default="ces")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sqlcdc-bench-discovery-"))
    try:
        run(work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, args) -> None:
    config, landed = histories.land(work, [args.format], keys=max(10, args.changes // 20), changes=args.changes, seed=7,
                                    per_file=None)
    cfg = load_pipeline(config)
    [source] = cfg.sources.values()
    [table] = cfg.tables_of(source.name)
    folder = Path(source.landing)
    [whole] = sorted(folder.iterdir())
    lines = whole.read_text().splitlines(keepends=True)
    whole.unlink()
    step = -(-len(lines) // (args.files + 1))
    chunks = [lines[i:i + step] for i in range(0, len(lines), step)]
    for i, chunk in enumerate(chunks[:-1]):
        (folder / f"part-{i:04d}{whole.suffix}").write_text("".join(chunk))
    spare = chunks[-1]
    spark = connect_session()
    state = work / "state"

    def discover():
        with base.one_scan_per_source():
            if args.format == "qlik":
                return _qlik_metadata._versions_of(table, source, spark)
            return _ces_metadata._discover(table, source, spark)

    def fresh_state():
        shutil.rmtree(state, ignore_errors=True)
        os.environ[base.STATE_DIR_ENV] = str(state)
        discover()  # the kept rows of the files landed so far

    def one_new_file():
        fresh_state()
        (folder / f"part-new{whole.suffix}").write_text("".join(spare))

    def no_new_file():
        (folder / f"part-new{whole.suffix}").unlink(missing_ok=True)
        fresh_state()

    discover()  # warm: classes, functions, the first job of the session
    floor = best(args.repeat, lambda: spark.read.text(str(folder)).count())
    os.environ.pop(base.STATE_DIR_ENV, None)
    full = best(args.repeat, discover)
    kept = best(args.repeat, discover, before=no_new_file)
    new = best(args.repeat, discover, before=one_new_file)
    found = discover()
    os.environ.pop(base.STATE_DIR_ENV, None)
    assert discover() == found, "the kept scan found other columns or versions than a full scan"
    print(f"{args.format} landing: {landed[args.format]} records in {args.files} files "
          f"({sum(p.stat().st_size for p in folder.iterdir()) / 1e6:.1f} MB); kept rows in {state / _discovery.CACHE_DIR}")
    print(f"{'discovery':28} {'best s':>7} {'x floor':>8}")
    for name, secs in (("floor: read + count", floor), ("full scan (no state folder)", full),
                       ("kept, nothing new", kept), ("kept, one new file", new)):
        print(f"{name:28} {secs:7.2f} {secs / floor:8.2f}")


if __name__ == "__main__":
    main()
