"""Tables whose columns changed between two local runs: dropped by ``sqlcdc run`` while the
pipeline is being defined, so SDP creates them again in the same run.

Qlik (a new ``tableVersion``) and CES (new columns in ``eventsource.cols``) discover a table's
columns from the data, so the silver ``before``/``after`` structs can gain fields from one run to
the next. Local SDP (Spark 4.2) alters an existing materialized view's schema in place, and Delta
refuses to change the fields of a struct column (``DELTA_CANNOT_UPDATE_STRUCT_FIELD``); SDP also
refuses ``DROP TABLE`` from a query of the definitions. So the definitions (the ``spark-pipelines``
client) *ask* ``sqlcdc run`` (its parent, whose Spark serves the pipeline and holds the embedded
metastore): a :data:`REQUEST` line on stdout with a :class:`Check` per table; the answer comes as a
line through a named pipe (:data:`CHANNEL_ENV`) -- not on stdin: ``spark-pipelines`` runs the
definitions in a Python process that ``spark-submit``'s JVM starts, which passes their stdout on
but not its own stdin. ``sqlcdc run`` compares each silver table's ``after`` struct with the columns wanted, drops
the changed views in its own Spark (:func:`answer`) and replies; the definitions go on, and SDP,
which resolves the graph only after them, finds those tables gone and creates them. The views are
recomputed from bronze on every run anyway, so dropping them loses nothing.

Until 2026-12-04 the definitions recorded the tables in a marker file and stopped the run, and
``sqlcdc run`` dropped them and started ``spark-pipelines`` again: a second client start, graph and
column discovery (on one Qlik source: a 35 s stopped start, then 14 s to the second "Starting
run"; docs/testing.md). The definitions never read the old table themselves, so no session of
the pipeline has it cached.

Example (what the two sides do)::

    # the definitions (pipeline.py)
    dropped = reshape.ask_run([reshape.Check("dbo.customers", "silver_customers", ("silver_customers",), (("ID", "int"),))])
    # sqlcdc run, on a REQUEST line of the child's output
    reply, said = reshape.answer(engine.spark, line)
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from sqlcdc.names import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sqlcdc.config import TableConfig

CHANNEL_ENV = "SQLCDC_RESHAPE_CHANNEL"
"""The named pipe ``sqlcdc run`` answers through, in the environment of ``spark-pipelines``
(whose output it reads): the definitions may ask it (:func:`ask_run`). Without it (a run on
Databricks, or the spec run by hand) nothing is compared."""

ANSWER_TIMEOUT_S = 600
"""How long the definitions wait for the answer before the run fails saying so (it takes seconds)."""

REQUEST = "sqlcdc-reshape-request "
"""The start of the line the definitions print to ask; the rest is JSON (a list of :class:`Check`)."""

_TYPE_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float"}


def _type(name: str) -> str:
    """A type name in one spelling (no JVM parser inside SDP's Python process). A spelling this
    misses only costs a rebuild of views that are recomputed anyway."""
    t = name.lower().replace(" ", "")
    return _TYPE_ALIASES.get(t, t)


def column_change(existing_after: Sequence[tuple[str, str]], wanted: Sequence[tuple[str, str]]) -> str | None:
    """A description of how the ``after`` struct changes (None: it does not).

    >>> column_change([("ID", "int")], [("ID", "int"), ("TIER", "string")])
    'added TIER'
    >>> column_change([("ID", "int")], [("ID", "INT")]) is None
    True
    """
    had = [(n, _type(t)) for n, t in existing_after]
    want = [(n, _type(t)) for n, t in wanted]
    if had == want:
        return None
    had_d, want_d = dict(had), dict(want)
    parts = []
    if added := [n for n in want_d if n not in had_d]:
        parts.append("added " + ", ".join(added))
    if removed := [n for n in had_d if n not in want_d]:
        parts.append("removed " + ", ".join(removed))
    if retyped := [f"{n} {had_d[n]}->{want_d[n]}" for n in want_d if n in had_d and had_d[n] != want_d[n]]:
        parts.append("retyped " + ", ".join(retyped))
    return "; ".join(parts) or "reordered"


@dataclasses.dataclass(frozen=True)
class Check:
    """One table whose discovered columns the run compares with its silver table.

    ``table``: the qualified source table (for messages); ``silver``: the silver table whose
    ``after`` struct is compared; ``drop``: what to drop when it changed (the table's stored decode
    and silver); ``columns``: (name, Spark SQL type) wanted, in order."""

    table: str
    silver: str
    drop: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]


def ask_run(checks: Sequence[Check]) -> list[str] | None:
    """Ask ``sqlcdc run`` to compare ``checks`` and drop the changed tables now; the qualified names
    of the tables it dropped, or None when no run answers (:data:`CHANNEL_ENV` unset)."""
    channel = os.environ.get(CHANNEL_ENV)
    if not checks or not channel:
        return None
    print(REQUEST + json.dumps([dataclasses.asdict(c) for c in checks]), flush=True)
    got: list[str] = []

    def read() -> None:  # opening a named pipe waits for its writer
        with open(channel, encoding="utf-8") as fh:
            got.append(fh.readline())

    reader = threading.Thread(target=read, daemon=True, name="sqlcdc-reshape-answer")
    reader.start()
    reader.join(ANSWER_TIMEOUT_S)
    if not got or not got[0].strip():
        raise RuntimeError(f"sqlcdc run did not answer the definitions' reshape check through {channel} "
                           f"within {ANSWER_TIMEOUT_S} s")
    return json.loads(got[0])


def answer(spark: SparkSession, line: str) -> tuple[str, list[str]]:
    """``sqlcdc run``'s side of :func:`ask_run`: for each :class:`Check` of the :data:`REQUEST`
    ``line`` whose silver table exists with other ``after`` columns, drop its tables in ``spark``
    (the run's own, which holds the embedded metastore). Returns the reply line (JSON: the
    qualified names dropped) and a message per table dropped."""
    dropped, said = [], []
    for raw in json.loads(line[len(REQUEST):]):
        check = Check(raw["table"], raw["silver"], tuple(raw["drop"]), tuple(map(tuple, raw["columns"])))
        if not spark.catalog.tableExists(check.silver):
            continue
        change = silver_change(spark, check.silver, check.columns)
        if change is None:
            continue
        for name in check.drop:
            spark.sql(f"DROP TABLE IF EXISTS {quote(name)}")
        dropped.append(check.table)
        said.append(f"the columns of {check.table} changed ({change}): rebuilding {', '.join(check.drop)}")
    return json.dumps(dropped) + "\n", said


def drop_streaming_changed(spark: SparkSession, tables: Iterable[TableConfig], checkpoints: Path,
                           echo: Callable[[str], None] = print) -> list[str]:
    """Drop the silver table of each table of a streaming decoder (Debezium) whose stored ``after``
    struct differs from the columns its decoder gives now -- a column the source added (the Connect
    schemas of the landed envelopes gained it) or an edited ``columns:`` -- and its stream's
    progress (its folders under ``checkpoints``, SDP's ``<catalog>/<schema>/<table>``); the names
    dropped. ``sqlcdc run`` does this before the run, so SDP creates the table with the new columns
    and streams all of bronze into it: a streaming table's struct cannot change in place
    (``DELTA_CANNOT_UPDATE_STRUCT_FIELD``, also under ``--full-refresh``), and a table dropped
    without its progress would be streamed only what lands next. Batch decoders' tables are not
    here: their definitions ask (:func:`ask_run`). A table whose columns cannot be found now is left
    to the definitions, which say why."""
    from sqlcdc import formats
    from sqlcdc.config import ConfigError

    dropped = []
    for table in tables:
        decoder = formats.get(table.source.format)
        if not decoder.streaming or not spark.catalog.tableExists(table.silver_table):
            continue
        try:
            wanted = [(c.name, c.spark_type) for c in decoder.columns_for(table, table.source, spark)]
        except ConfigError:
            continue
        change = silver_change(spark, table.silver_table, wanted)
        if change is None:
            continue
        spark.sql(f"DROP TABLE IF EXISTS {quote(table.silver_table)}")
        for progress in checkpoints.glob(f"*/*/{table.silver_table}"):
            shutil.rmtree(progress, ignore_errors=True)
        dropped.append(table.silver_table)
        echo(f"the columns of {table.qualified} changed ({change}): {table.silver_table} is recomputed from bronze")
    return dropped


def silver_change(spark: SparkSession, silver: str, wanted: Sequence[tuple[str, str]]) -> str | None:
    """How the ``after`` struct of the stored ``silver`` table differs from ``wanted`` columns
    (:func:`column_change`, each wanted type as a cast to it is stored: :func:`_as_stored`)."""
    from pyspark.errors import AnalysisException, ParseException

    try:
        wanted = _as_stored(spark, list(wanted))
    except (AnalysisException, ParseException):  # a type Spark does not know: compared as spelled
        pass
    after = spark.read.table(silver).schema["after"].dataType
    return column_change([(f.name, f.dataType.simpleString()) for f in after.fields], wanted)


def _as_stored(spark: SparkSession, columns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``(name, type)`` with each type as a cast to it is stored (``varchar(20)`` is a string,
    ``decimal(10, 2)`` is ``decimal(10,2)``): a spelling of the same type is no change. Spark's
    analysis of one ``SELECT``, no job."""
    from pyspark.sql import functions as F

    if not columns:
        return []
    typed = spark.range(0).select([F.lit(None).cast(t).alias(f"c{i}") for i, (_, t) in enumerate(columns)]).schema
    return [(n, f.dataType.simpleString()) for (n, _), f in zip(columns, typed.fields)]
