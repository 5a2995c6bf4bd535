"""``sqlcdc validate``: check everything a run would trip on, report every problem at once, run nothing.

Checks, in order:

1. the pipeline config and every table config against ``schemas/`` (plus the rules a schema cannot
   say: one location per source, no literal secrets, columns named by keys/lists exist, ...);
2. the SQL of every expectation and ``sequence_by``: parsed with Spark's own parser (nothing runs)
   and, where the table config gives ``columns:``, resolved against an empty frame shaped like the
   table's silver rows, so an unknown column or a non-boolean rule is reported too;
3. the Databricks bundle (``databricks.yml`` and what it includes): every path it names exists,
   and its DQ dashboard reads the quarantine of every source (``sqlcdc export lakeview``);
4. every local landing folder exists (a run would stop on a missing one);
5. CES tables without ``keys:``: a run takes the keys from the landed events' ``pkkey`` when the
   pipeline is defined, so they are looked up here the same way (a batch read of the landing
   folder); no usable event, or a Kafka/Event Hubs source (whose topic validate does not read),
   is a problem.

Spark starts only when step 2 has SQL to check or step 4 a landing folder to read (``--no-sql``:
neither). Each problem is one line, ``file:line: field: message``.
Exit code 0 when clean, 1 when there are problems, 2 when the config file itself is missing.

Example::

    $ sqlcdc validate --config config/pipeline.yml
    config/tables/orders.yml:3: keys: expected a list, got a string ('id')
    config/tables/orders.yml:9: expectations[0].constraint: rule 'positive': syntax error at or near end of input (pos 8): amount >
    2 problem(s); nothing was run
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
from pathlib import Path
from typing import Any, Iterator

from sqlcdc.config import ConfigError, PipelineConfig, TableConfig, load_pipeline
from sqlcdc.names import quote

NAME = "validate"
HELP = "Check configs, expectation SQL, referenced columns and the Databricks bundle; exit 1 on any problem."

# The canonical silver columns an expectation may name besides the table's own (see sqlcdc.model).
_CANONICAL = {
    "change_id": "string", "source_format": "string", "source_server": "string", "source_database": "string",
    "source_schema": "string", "source_table": "string", "table_name": "string", "op": "string",
    "provided_columns": "array<string>", "changed_columns": "array<string>", "sequence": "string",
    "commit_time": "timestamp", "transaction_id": "string", "bronze_record_id": "string",
    "bronze_file": "string", "bronze_ingest_time": "timestamp",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="config/pipeline.yml", help="pipeline config (default: %(default)s)")
    parser.add_argument(
        "--bundle",
        default=None,
        help="databricks.yml to check (default: the one in the project folder, found upward from the config)",
    )
    parser.add_argument("--no-bundle", action="store_true", help="skip the bundle check")
    parser.add_argument("--no-sql", action="store_true", help="skip parsing expectation SQL (no Spark)")


def main(args: argparse.Namespace) -> int:
    config = Path(args.config)
    if not config.is_file():
        print(f"{config}: no such file (give --config PATH)", file=sys.stderr)
        return 2
    notes: list[str] = []
    bundle = None if args.no_bundle else (Path(args.bundle) if args.bundle else find_bundle(config))
    problems = validate(
        config,
        bundle=bundle,
        check_sql=not args.no_sql,
        notes=notes,
    )
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s); nothing was run", file=sys.stderr)
        return 1
    print(f"{config}: OK ({checked(config, bundle=bundle, check_sql=not args.no_sql)})", file=sys.stderr)
    return 0


def checked(config: Path, *, bundle: Path | None, check_sql: bool) -> str:
    """What a clean validation covered, in words: sources, tables, SQL parsed, the bundle."""
    cfg = load_pipeline(config)
    rules = sum(len(t.expectations) + (1 if t.sequence_by else 0) for t in cfg.tables)
    parts = [f"{len(cfg.sources)} source(s)", f"{len(cfg.tables)} table(s)",
             f"{rules} SQL expression(s) parsed" if check_sql else "SQL not parsed (--no-sql)"]
    if bundle is not None:
        from sqlcdc.bundle import bundle_files

        parts.append(f"bundle {bundle} and {len(bundle_files(bundle)) - 1} included file(s)")
    else:
        parts.append("no bundle")
    return "checked " + ", ".join(parts)


def find_bundle(config: Path) -> Path | None:
    """The ``databricks.yml`` of the project holding ``config`` (searching upward), if any."""
    for folder in [config.resolve().parent, *config.resolve().parents]:
        if (folder / "databricks.yml").is_file():
            return folder / "databricks.yml"
    return None


def validate(config: Path, *, bundle: Path | None = None, check_sql: bool = True, spark: Any = None,
             notes: list[str] | None = None) -> list[str]:
    """Every problem of the config at ``config`` (and of ``bundle`` when given), as report lines.

    ``notes``, when given, receives what is worth knowing but does not stop a run: a table whose
    columns or keys come from producer metadata that has not landed yet (its records will wait in
    quarantine, :class:`sqlcdc.formats.NotYetDiscovered`), and the sources a bundle deploys whose
    silver and gold are recomputed on every Databricks update (:func:`recomputed_silver_notes`)."""
    problems: list[str] = []
    cfg: PipelineConfig | None = None
    try:
        cfg = load_pipeline(config)
    except ConfigError as e:
        problems += e.problems
        cfg = e.config  # the tables that did load: their SQL is still worth checking, all in one report
    from sqlcdc.formats.base import one_scan_per_source

    with one_scan_per_source():  # columns and keys found in what landed: one scan of each source
        if cfg is not None and check_sql and _has_sql(cfg):
            if spark is None:
                spark = _spark()
            problems += expression_problems(cfg, spark)
        if cfg is not None:
            problems += landing_problems(cfg)
            problems += key_discovery_problems(cfg, spark if check_sql else None, start_spark=check_sql, notes=notes)
    if bundle is not None:
        from sqlcdc.bundle import bundle_problems, dashboard_files, deployed_config
        from sqlcdc.lakeview import stale_problems

        problems += bundle_problems(bundle)
        # the DQ dashboard shows every source's quarantine of the config the bundle deploys
        if cfg is not None and deployed_config(bundle) == Path(config).resolve():
            for dash in dashboard_files(bundle):
                problems += stale_problems(dash, cfg)
            if notes is not None:
                notes += recomputed_silver_notes(cfg)
    return problems


def recomputed_silver_notes(cfg: PipelineConfig) -> list[str]:
    """One note per source with tables whose silver is a materialized view recomputed each run
    (the decoder is not ``streaming``: CES, Qlik, change tables), for a config a bundle deploys:
    on Databricks their gold is then a materialized view recomputed from silver, not AUTO CDC --
    the decision :func:`sqlcdc.gold.graph.silver_streams` makes, asked here -- so each update's
    cost grows with the history."""
    from sqlcdc.gold.graph import silver_streams

    return [f"the bundle deploys source {s.name} ({s.format}): its silver is a materialized view recomputed "
            "from all of bronze each update, and so is its gold on Databricks (AUTO CDC streams only from "
            "append-only silver; docs/append-only-silver.md)"
            for s in cfg.sources.values() if (tables := cfg.tables_of(s.name)) and not silver_streams(tables)]


def landing_problems(cfg: PipelineConfig) -> list[str]:
    """A local landing folder (or Qlik ``metadata_landing``) that does not exist: a run would stop on
    it. Remote locations (``abfss://``, ``s3://``) are not looked at."""
    from sqlcdc.config import resolve_path
    from sqlcdc.diagnostics import line_index
    from sqlcdc.formats.base import local_path

    try:
        lines = line_index(Path(cfg.file).read_text())
    except OSError:
        lines = {}
    out = []
    for name, source in cfg.sources.items():
        extra = source.options.get("metadata_landing")
        for key, where in (("landing", source.landing),
                           ("options.metadata_landing", resolve_path(Path(cfg.file).parent, str(extra)) if extra else None)):
            folder = local_path(str(where)) if where else None
            if folder is None or Path(folder).is_dir():
                continue
            line = lines.get(("sources", name, *key.split(".")), lines.get(("sources", name), 1))
            what = "a file, not a folder:" if Path(folder).exists() else "no such folder"
            out.append(f"{cfg.file}:{line}: sources.{name}.{key}: {what} {folder}")
    return out


def key_discovery_problems(cfg: PipelineConfig, spark: Any = None, *, start_spark: bool = True,
                           notes: list[str] | None = None) -> list[str]:
    """CES tables without ``keys:``: what would stop a run that discovers them from ``pkkey``.

    For a landing folder the events are read as a run reads them when the pipeline is defined
    (``sqlcdc.formats.ces.columns_for``); without Spark (``--no-sql``) that check is skipped. No
    usable event yet is not a problem -- a run waits for one (its events stay in quarantine) -- and
    goes to ``notes``, as does a Kafka or Event Hubs source (validate does not read topics)."""
    from sqlcdc import transport
    from sqlcdc.formats.base import local_path

    problems: list[str] = []
    notes = notes if notes is not None else []
    for t in cfg.tables:
        if t.source.format != "ces" or t.keys:
            continue
        where = f"{t.file or 'table config'}:1: keys"
        if transport.is_stream(t.source):
            notes.append(f"{where}: {t.qualified} takes its keys from the pkkey of its events in the topic when a run "
                         "starts (validate does not read topics); until one lands, its events wait in quarantine")
            continue
        if not t.source.landing:
            problems.append(f"{where}: required: {t.qualified} has no `keys:` and source {t.source.name} no "
                            "landing folder to find its pkkey in")
            continue
        folder = local_path(t.source.landing)
        if folder is not None and not Path(folder).is_dir():
            continue  # landing_problems names the missing folder
        if spark is None:
            if not start_spark:
                continue
            spark = _spark()
        problems += _ces_key_problems(t, spark, notes)
    return problems


def _ces_key_problems(t: TableConfig, spark: Any, notes: list[str]) -> list[str]:
    from sqlcdc.formats import NotYetDiscovered, ces

    try:
        with _quiet_pyspark():
            ces.columns_for(t, t.source, spark)
            ces.keys_for(t, t.source, spark)
        return []
    except NotYetDiscovered as e:  # a run goes on without the table until its metadata lands
        notes.extend(e.problems)
        return []
    except ConfigError as e:
        return list(e.problems)
    except Exception as e:  # e.g. the landing folder does not exist: a run stops the same way
        return [f"{t.file or 'table config'}:1: keys: {t.qualified} has no `keys:` and its pkkey cannot be read "
                f"from {t.source.landing}: {_spark_message(e)}"]


def _has_sql(cfg: PipelineConfig) -> bool:
    return any(t.expectations or t.sequence_by for t in cfg.tables)


def _spark():
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # e.g. inside tests or a notebook: parse with it, leave its settings alone
        return active
    from sqlcdc.runtime import local_spark

    session = local_spark(app_name="sqlcdc-validate", extra={"spark.sql.shuffle.partitions": "1"})
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextlib.contextmanager
def _quiet_pyspark() -> Iterator[None]:
    """PySpark logs every analysis error it raises (as JSON on stderr); we report them ourselves."""
    loggers = [logging.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    before = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, b in zip(loggers, before):
            lg.disabled = b


def expression_problems(cfg: PipelineConfig, spark) -> list[str]:
    """Parse every expectation constraint; resolve it where the columns are known."""
    problems: list[str] = []
    parser = spark._jsparkSession.sessionState().sqlParser()
    with _quiet_pyspark():
        for t in cfg.tables:
            cols = _known_columns(spark, parser, t) if t.expectations else None
            frame = _silver_frame(spark, cols, t.keys) if cols else None
            checks = [
                (rule["constraint"], at, f"expectations[{rule['name']}].constraint", True)
                for rule, at in zip(t.expectations, t.expectation_sources)
            ]
            for sql, at, fld, boolean in checks:
                problem = _parse_problem(parser, sql)
                if problem is None and frame is not None:
                    problem = _resolve_problem(frame, sql, boolean)
                if problem is not None:
                    problems.append(f"{at}: {fld}: {problem} in: {sql}")
    return problems


def _parse_problem(parser, sql: str) -> str | None:
    # Parenthesized so a trailing word cannot be taken for an alias ("a > 0 AND" is an error, not "a > 0 AS AND").
    try:
        parser.parseExpression(f"({sql})")
        return None
    except Exception as e:  # py4j's Py4JJavaError carries Spark's ParseException
        return _spark_message(e, offset=1, length=len(sql))


def _resolve_problem(frame, sql: str, boolean: bool) -> str | None:
    from pyspark.sql import functions as F

    try:
        if boolean:
            frame.where(F.expr(sql))
        else:
            frame.select(F.expr(sql))
        return None
    except Exception as e:
        return _spark_message(e)


def _spark_message(e: Exception, offset: int = 0, length: int | None = None) -> str:
    """Spark's error, first line, without the error class/SQLSTATE noise; positions made relative to the rule."""
    text = str(getattr(e, "java_exception", None) or e)
    text = text.split("== SQL ==")[0]
    text = re.sub(r"^.*?Exception:\s*", "", text.strip(), flags=re.S)
    first = " ".join(text.split())
    first = re.sub(r"\[([A-Z_.]+)\]\s*", "", first, count=1)
    first = re.sub(r"\s*SQLSTATE: \w+", "", first)
    first = re.sub(r";?\s*line 1 pos \d+;?.*$", "", first)
    first = first.split(";")[0]  # analysis errors go on with the logical plan: not for people
    m = re.search(r"\(line 1, pos (\d+)\)", first)
    if m:
        pos = max(int(m.group(1)) - offset, 0)
        if length is not None and pos >= length:
            first = "syntax error at the end of the expression (incomplete, or a stray word before the end)"
        else:
            first = re.sub(r"\.?\s*\(line 1, pos \d+\)", f" (at position {pos})", first)
    first = first.strip().rstrip(".;")
    return first[0].lower() + first[1:] if first else "not valid SQL"


def _spark_type(parser, t: TableConfig, column: dict, ordinal: int) -> str:
    """The Spark type a ``columns:`` entry becomes, read as the table's producer reads it
    (:meth:`sqlcdc.formats.Decoder.config_column`); a type Spark cannot parse stays ``string``."""
    from sqlcdc import formats

    try:
        return parser.parseDataType(formats.get(t.source.format).config_column(column, ordinal).spark_type).catalogString()
    except Exception:
        return "string"


def _known_columns(spark, parser, t: TableConfig) -> list[tuple[str, str]] | None:
    """The table's (name, Spark type) columns: from ``columns:``, else discovered from what has
    landed as a run discovers them (Debezium schemas, Qlik metadata, CES ``eventsource``), else
    None (a Kafka source, or nothing landed yet: the rules are then only parsed)."""
    if t.columns:
        return [(c["name"], _spark_type(parser, t, c, i)) for i, c in enumerate(t.columns, start=1)]
    from sqlcdc import formats, transport

    if transport.is_stream(t.source) or not t.source.landing:
        return None
    try:
        specs = formats.get(t.source.format).columns_for(t, t.source, spark)
    except Exception:  # not discoverable yet (NotYetDiscovered) or unreadable: key discovery reports it
        return None
    out = []
    for c in specs:
        try:
            out.append((c.name, parser.parseDataType(c.spark_type).catalogString()))
        except Exception:
            out.append((c.name, "string"))
    return out or None


def _silver_frame(spark, cols: list[tuple[str, str]], keys):
    """An empty frame with the table's columns at top level plus the canonical change columns."""
    struct = "struct<" + ", ".join(f"{quote(n)}: {ty}" for n, ty in cols) + ">"
    key_cols = [(n, ty) for n, ty in cols if n in keys] or cols[:1]
    key_struct = "struct<" + ", ".join(f"{quote(n)}: {ty}" for n, ty in key_cols) + ">"
    names = {n.lower() for n, _ in cols}
    fields = [f"{quote(n)} {ty}" for n, ty in cols]
    extra = {**_CANONICAL, "key": key_struct, "before": struct, "after": struct}
    fields += [f"{quote(n)} {ty}" for n, ty in extra.items() if n.lower() not in names]
    return spark.createDataFrame([], ", ".join(fields))
