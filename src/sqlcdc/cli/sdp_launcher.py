"""What `sqlcdc run` hands `spark-pipelines`' launcher instead of pyspark's own ``pipelines/cli.py``:
the same command line, with the pipeline's Spark Connect server on a port of the run's choosing.

pyspark 4.2's local mode starts the Connect server on ``spark.connect.grpc.binding.port`` but
connects its client to ``sc://localhost``, i.e. the fixed default 15002 (only pyspark's own test
mode, ``SPARK_TESTING``, which also switches the JVM's plan-change validation on, asks the server
for its real port). So two local runs on one machine used to collide there. `sqlcdc run` writes a
free port into the run's ``spark-defaults.conf`` and into :data:`PORT_ENV`; this module points the
client at it and then runs pyspark's CLI unchanged.
"""
from __future__ import annotations

import os
import sys

PORT_ENV = "SQLCDC_CONNECT_PORT"


def main() -> None:
    port = os.environ.get(PORT_ENV)
    if port:
        from pyspark.sql.connect.client.core import DefaultChannelBuilder

        DefaultChannelBuilder.default_port = staticmethod(lambda: int(port))  # type: ignore[method-assign]
    from pyspark.pipelines import cli

    cli.main()


if __name__ == "__main__":
    # Run as a script, this file's folder leads sys.path; its neighbours (run.py, setup.py ...)
    # must not shadow top-level modules of the libraries the pipeline imports.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    main()
