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
import runpy

PORT_ENV = "SQLCDC_CONNECT_PORT"


def main() -> None:
    port = os.environ.get(PORT_ENV)
    if port:
        from pyspark.sql.connect.client.core import DefaultChannelBuilder

        DefaultChannelBuilder.default_port = staticmethod(lambda: int(port))  # type: ignore[method-assign]
    runpy.run_module("pyspark.pipelines.cli", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
