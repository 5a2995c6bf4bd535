"""``sqlcdc dashboard``: write the data-quality dashboard of a warehouse as one self-contained HTML page.

    sqlcdc dashboard --warehouse warehouse --out build/dq.html

Reads ``dq_metrics`` and the ``quarantine_*`` / ``dropped_*`` tables (Delta, under
``<warehouse>/tables``); see :mod:`sqlcdc.dashboard` for what the page shows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

NAME = "dashboard"
HELP = "Write the data-quality dashboard (self-contained HTML) from a warehouse's dq_metrics."


def add_arguments(p) -> None:
    p.add_argument("--warehouse", default="warehouse", help="folder of a local run (default: %(default)s)")
    p.add_argument("--out", default="build/dq-dashboard.html", help="HTML file to write (default: %(default)s)")
    p.add_argument("--samples", type=int, default=25, help="quarantine/dropped samples per table (default: %(default)s)")


def main(args) -> int:
    from sqlcdc import dashboard, dq_metrics
    from sqlcdc.runtime import local_spark

    warehouse = Path(args.warehouse).resolve()
    if not (warehouse / "tables" / dq_metrics.TABLE / "_delta_log").is_dir():
        print(f"sqlcdc dashboard: no {dq_metrics.TABLE} table under {warehouse / 'tables'}: run `sqlcdc run` first",
              file=sys.stderr)
        return 2
    conf_dir = warehouse / "_sqlcdc" / "conf"
    if conf_dir.is_dir():
        os.environ.setdefault("SPARK_CONF_DIR", str(conf_dir))  # the run's quiet log settings
    spark = local_spark(app_name="sqlcdc-dashboard")
    try:
        out = dashboard.write(spark, warehouse, Path(args.out), samples=args.samples)
    finally:
        spark.stop()
    print(f"sqlcdc dashboard: wrote {out}")
    return 0
