"""Files sqlcdc needs at run time, shipped inside the package (so an installed wheel has them).

- ``schemas/``: the JSON Schemas of the configs and of the producers' envelopes;
- ``pipelines/``: the Spark Declarative Pipelines definition files ``sqlcdc run`` hands to
  ``spark-pipelines`` (bronze, silver, gold: thin calls into :mod:`sqlcdc.pipeline`);
- ``jars.txt``: the JVM artifacts a local Spark needs (:func:`sqlcdc.runtime.missing_jars`).

They are found with :mod:`importlib.resources`, wherever the package is installed. ``pip``
installs wheels unzipped, so each is a real folder or file: Spark and SDP need file paths.

Example::

    from sqlcdc.assets import SCHEMAS_DIR
    schema = (SCHEMAS_DIR / "table-config.schema.json").read_text()
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["PACKAGE_DIR", "SCHEMAS_DIR", "PIPELINES_DIR", "JARS_FILE", "PIPELINE_LAYERS"]

PACKAGE_DIR = Path(str(files("sqlcdc")))
SCHEMAS_DIR = PACKAGE_DIR / "schemas"
PIPELINES_DIR = PACKAGE_DIR / "pipelines"
JARS_FILE = PACKAGE_DIR / "jars.txt"
#: The definition files of the pipeline, in the order SDP is given them.
PIPELINE_LAYERS = ("bronze", "silver", "gold")
