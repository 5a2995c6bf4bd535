"""Export the sqlcdc config as dlt-meta (Databricks Labs SDP-META) onboarding files.

For teams that run their pipelines with dlt-meta rather than sqlcdc's own ``pipelines/``. What is
written (``export(cfg, out_dir)``)::

    onboarding.json                        one bronze row per source, one silver row per table and SCD type
    silver_transformations.json            per silver target: select_exp + where_clause
    dqe/<table>/silver_data_quality_expectations.json   per table with expectations

The mapping:

- a sqlcdc **source** is a dlt-meta **bronze** flow: ``source_format`` ``cloudFiles`` (landing
  folder, read as text: one envelope per line), ``kafka`` or ``eventhub``; bronze table
  ``bronze_<source>``. Secrets stay references (secret scope/key names), never values.
- a sqlcdc **table** is one dlt-meta **silver** flow per SCD type (a silver fan-out row reading the
  source's bronze table), target ``gold_<name>_scd1`` / ``gold_<name>_scd2`` (or ``targets:``), with
  ``silver_cdc_apply_changes``: ``keys``, ``sequence_by: _sequence``, ``scd_type``,
  ``apply_as_deletes: _op = 'DELETE'``, ``except_column_list`` (``_op``, ``_sequence``,
  ``_commit_time`` plus the table's own), ``column_list`` / ``track_history_*`` /
  ``ignore_null_updates`` when set.
- the **transformation** flattens the producer's envelope with ``get_json_object`` into the table's
  columns plus ``_op`` (INSERT/UPDATE/DELETE/SNAPSHOT/TRUNCATE), ``_sequence`` (a string that sorts
  in commit order: fixed-width LSNs, padded counters) and ``_commit_time``; ``where_clause`` keeps
  this table's rows (and, for change tables, drops the before-image rows of updates). Values are
  cast to the ``columns:`` types where those are Spark types; otherwise they stay strings. This is
  a starting point: sqlcdc's own decoders do more (typed Debezium logical types, CES split events,
  Qlik masks, primary-key changes), which plain select expressions cannot.
- **expectations** map to dlt-meta's ``expect`` / ``expect_or_drop`` / ``expect_or_fail`` /
  ``expect_or_quarantine``; a table with quarantine rules gets ``silver_quarantine_table``
  ``quarantine_<name>``. Rules must name the flattened columns (``amount > 0``), not the canonical
  change (``after.amount``, ``op``): :func:`build` reports those in ``warnings``.

Example::

    from sqlcdc.config import load_pipeline
    from sqlcdc.dlt_meta import export
    export(load_pipeline("config/pipeline.yml"), "build/dlt-meta", env="dev")
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlcdc import formats
from sqlcdc.config import PipelineConfig, SourceConfig, TableConfig
from sqlcdc.names import column_ref, literal, quote

META_COLUMNS = ("_op", "_sequence", "_commit_time")
_ACTION_KEY = {"warn": "expect", "drop": "expect_or_drop", "fail": "expect_or_fail", "quarantine": "expect_or_quarantine"}
_FILE_FORMAT = {"json": "text", "text": "text", "csv": "csv", "parquet": "parquet", "avro": "avro"}
_SIMPLE_TYPE = re.compile(
    r"^(tinyint|smallint|int|integer|bigint|float|double|boolean|string|date|timestamp|timestamp_ntz|binary|decimal\(\d+,\s*\d+\))$",
    re.I,
)
_CANONICAL_REF = re.compile(r"\b(after|before|key)\.|\bop\b|\bsequence\b", re.I)


@dataclass
class Export:
    """What :func:`build` produces: the files' contents, keyed by path relative to the output folder."""

    onboarding: list[dict[str, Any]]
    transformations: list[dict[str, Any]]
    expectations: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


_lit = literal


def _json_path(name: str) -> str:
    """A JSONPath step for a column name: ``.name`` for plain names, else the bracket form."""
    return f".{name}" if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name) else "['" + name + "']"


def _cast(expr: str, column: dict) -> str:
    t = str(column.get("type", "string"))
    if _SIMPLE_TYPE.match(t) and t.lower() != "string":
        return f"try_cast({expr} AS {t})"
    return expr


def transformation(table: TableConfig) -> tuple[list[str], list[str]] | None:
    """``select_exp`` and ``where_clause`` turning the producer's envelope text (``value``) into rows
    (its decoder's :meth:`~sqlcdc.formats.Decoder.dlt_meta_select`); None when the producer has no
    dlt-meta mapping (:func:`refusals` names it)."""
    columns = list(table.columns) or [{"name": k, "type": "string"} for k in table.keys]
    return formats.get(table.source.format).dlt_meta_select(table, columns)


def _json_getter(prefix: str):
    """``j(path)``: the text at ``prefix + path`` of an envelope that may or may not be wrapped in
    ``prefix`` (Debezium's schema envelope ``$.payload``, Qlik's atMSG ``$.message``)."""
    def j(path: str) -> str:
        return f"coalesce(get_json_object(value, {_lit('$' + prefix + path)}), get_json_object(value, {_lit('$' + path)}))"
    return j


def debezium_select(table: TableConfig, columns: list[dict]) -> tuple[list[str], list[str]]:
    """Debezium change events, with or without the schema envelope (``payload.*``)."""
    j = _json_getter(".payload")
    op = j(".op")
    values = [
        _cast(f"CASE WHEN {op} = 'd' THEN {j('.before' + _json_path(c['name']))} ELSE {j('.after' + _json_path(c['name']))} END", c)
        + f" AS {quote(c['name'])}"
        for c in columns
    ]
    meta = [
        f"CASE {op} WHEN 'c' THEN 'INSERT' WHEN 'u' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' WHEN 'r' THEN 'SNAPSHOT' "
        f"WHEN 't' THEN 'TRUNCATE' END AS _op",
        f"concat_ws(':', {j('.source.commit_lsn')}, coalesce({j('.source.change_lsn')}, '00000000:00000000:0000'), "
        f"lpad(coalesce({j('.source.event_serial_no')}, '0'), 10, '0')) AS _sequence",
        f"timestamp_millis(cast({j('.source.ts_ms')} AS bigint)) AS _commit_time",
    ]
    where = [f"{op} IS NOT NULL", f"{j('.source.schema')} = {_lit(table.schema)}", f"{j('.source.table')} = {_lit(table.table)}"]
    return values + meta, where


def qlik_select(table: TableConfig, columns: list[dict]) -> tuple[list[str], list[str]]:
    """Qlik Replicate data messages, wrapped (``{"magic", "type", "message": {...}}``) or bare."""
    j = _json_getter(".message")
    op = j(".headers.operation")
    values = [
        _cast(f"CASE WHEN {op} = 'DELETE' THEN coalesce({j('.beforeData' + _json_path(c['name']))}, "
              f"{j('.data' + _json_path(c['name']))}) ELSE {j('.data' + _json_path(c['name']))} END", c)
        + f" AS {quote(c['name'])}"
        for c in columns
    ]
    meta = [
        f"CASE {op} WHEN 'REFRESH' THEN 'SNAPSHOT' ELSE {op} END AS _op",
        f"concat_ws(':', CASE WHEN {op} = 'REFRESH' THEN '0' ELSE '1' END, {j('.headers.changeSequence')}, "
        f"lpad(coalesce({j('.headers.transactionEventCounter')}, '0'), 10, '0')) AS _sequence",
        f"try_cast({j('.headers.timestamp')} AS timestamp) AS _commit_time",
    ]
    where = [f"{op} IS NOT NULL", "coalesce(get_json_object(value, '$.type'), 'DT') = 'DT'"]
    return values + meta, where


def ces_select(table: TableConfig, columns: list[dict]) -> tuple[list[str], list[str]]:
    """SQL Server 2025 Change Event Streaming CloudEvents (whole events; split ones are not joined)."""
    data = "get_json_object(value, '$.data')"
    op = "get_json_object(value, '$.operation')"

    def row(image: str, col: str) -> str:
        return f"get_json_object(get_json_object({data}, '$.eventrow.{image}'), {_lit('$' + _json_path(col))})"

    values = [
        _cast(f"CASE WHEN {op} = 'DEL' THEN {row('old', c['name'])} ELSE {row('current', c['name'])} END", c)
        + f" AS {quote(c['name'])}"
        for c in columns
    ]
    meta = [
        f"CASE {op} WHEN 'INS' THEN 'INSERT' WHEN 'UPD' THEN 'UPDATE' WHEN 'DEL' THEN 'DELETE' END AS _op",
        "concat_ws(':', split(get_json_object(value, '$.logicalid'), ':')[1], "
        "split(get_json_object(value, '$.logicalid'), ':')[2]) AS _sequence",
        "try_cast(get_json_object(value, '$.time') AS timestamp) AS _commit_time",
    ]
    where = [f"{op} IS NOT NULL", f"get_json_object({data}, '$.eventsource.schema') = {_lit(table.schema)}",
             f"get_json_object({data}, '$.eventsource.tbl') = {_lit(table.table)}"]
    return values + meta, where


def cdc_ct_select(table: TableConfig, columns: list[dict]) -> tuple[list[str], list[str]]:
    """Exported change-table rows: one column per source column plus the ``__$`` columns."""
    values = [_cast(quote(c["name"]), c) + f" AS {quote(c['name'])}" for c in columns]
    meta = [
        "CASE cast(`__$operation` AS int) WHEN 1 THEN 'DELETE' WHEN 2 THEN 'INSERT' WHEN 4 THEN 'UPDATE' END AS _op",
        "concat_ws(':', lower(`__$start_lsn`), lpad(cast(`__$command_id` AS string), 10, '0')) AS _sequence",
        "CAST(NULL AS timestamp) AS _commit_time",
    ]
    return values + meta, ["cast(`__$operation` AS int) IN (1, 2, 4)"]


def _source_row(source: SourceConfig, flow_id: str, group: str, env: str, bronze_db: str,
                catalog: str | None, table_root: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "data_flow_id": flow_id,
        "data_flow_group": group,
        "source_system": formats.get(source.format).label,
    }
    details: dict[str, str] = {"source_database": source.name, "source_table": source.name}
    reader: dict[str, str] = {}
    if source.kafka is not None:
        k = source.kafka
        row["source_format"] = "kafka"
        details["kafka.bootstrap.servers"] = k["bootstrap_servers"]
        if "topic" in k:
            details["subscribe"] = k["topic"]
        elif "topics" in k:
            details["subscribe"] = ",".join(k["topics"])
        else:
            details["subscribePattern"] = k["topic_pattern"]
        reader["startingOffsets"] = k.get("starting_offsets", "earliest")
        if k.get("security_protocol"):
            reader["kafka.security.protocol"] = k["security_protocol"]
        if k.get("sasl_mechanism"):
            reader["kafka.sasl.mechanism"] = k["sasl_mechanism"]
        secret = k.get("password_secret") or {}
        if "scope" in secret:  # names of the secret, never its value
            details["kafka_source_secrets_scope_name"] = secret["scope"]
            details["kafka_source_secrets_scope_key"] = secret["key"]
        reader.update({str(a): str(b) for a, b in (k.get("options") or {}).items()})
    elif source.event_hubs is not None:
        e = source.event_hubs
        row["source_format"] = "eventhub"
        details.update({
            "eventhub.namespace": e["namespace"],
            "eventhub.name": e["event_hub"],
            "eventhub.port": "9093",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "PLAIN",
        })
        secret = e.get("connection_string_secret") or {}
        if "scope" in secret:
            details["eventhub.secretsScopeName"] = secret["scope"]
            details["eventhub.accessKeySecretName"] = secret["key"]
        reader["startingOffsets"] = e.get("starting_offsets", "earliest")
        reader.update({str(a): str(b) for a, b in (e.get("options") or {}).items()})
    else:
        row["source_format"] = "cloudFiles"
        details[f"source_path_{env}"] = source.landing or ""
        file_format = source.file_format or ("csv" if source.format == "cdc_ct" else "json")
        reader["cloudFiles.format"] = _FILE_FORMAT[file_format]
        if file_format == "csv":
            reader["header"] = "true"
    row["source_details"] = details
    row[f"bronze_database_{env}"] = bronze_db
    if catalog:
        row[f"bronze_catalog_{env}"] = catalog
    row["bronze_table"] = source.bronze_table
    row["bronze_table_comment"] = source.comment or source.description or f"Raw {source.format} envelopes of source {source.name}"
    row["bronze_reader_options"] = reader
    if table_root:
        row[f"bronze_table_path_{env}"] = f"{table_root}/{bronze_db}/{source.bronze_table}"
    return row


def build(
    cfg: PipelineConfig,
    *,
    env: str = "dev",
    bronze_database: str = "bronze",
    silver_database: str = "silver",
    catalog: str | None = None,
    conf_path: str = ".",
    table_root: str | None = None,
) -> Export:
    """The onboarding rows, transformations and expectation files for ``cfg``.

    ``conf_path`` is where the written files will be when dlt-meta reads them (a Volume or workspace
    folder on Databricks); ``table_root`` gives non-Unity-Catalog table paths (``<root>/<db>/<table>``).
    """
    rows: list[dict[str, Any]] = []
    flow = 100
    for source in cfg.sources.values():
        if not cfg.tables_of(source.name):
            continue
        rows.append(_source_row(source, str(flow), cfg.name, env, bronze_database, catalog, table_root))
        flow += 1

    out = Export(onboarding=rows, transformations=[])
    flow = 200
    for t in cfg.tables:
        mapped = transformation(t)
        if mapped is None or t.handoff:  # refusals() names it
            continue
        select, where = mapped
        dqe: dict[str, dict[str, str]] = {}
        for rule in t.expectations:
            dqe.setdefault(_ACTION_KEY[rule["action"]], {})[rule["name"]] = rule["constraint"]
            if _CANONICAL_REF.search(rule["constraint"]):
                out.warnings.append(
                    f"{t.file}: expectations[{rule['name']}]: names the canonical change (after./before./op); "
                    "dlt-meta sees the flattened columns (amount, _op, _sequence, _commit_time)"
                )
        dqe_rel = f"dqe/{t.name}/silver_data_quality_expectations.json"
        if dqe:
            out.expectations[dqe_rel] = dqe
        for scd in t.scd_types:
            target = t.scd1_table if scd == 1 else t.scd2_table
            cdc: dict[str, Any] = {
                "keys": [column_ref(k) for k in t.keys],  # dlt-meta passes them to col()
                "sequence_by": "_sequence",
                "scd_type": str(scd),
                "apply_as_deletes": "_op = 'DELETE'",
            }
            if t.column_list:
                cdc["column_list"] = [column_ref(c) for c in t.column_list]
            else:
                cdc["except_column_list"] = [column_ref(c) for c in (*META_COLUMNS, *(t.except_column_list or ()))]
            if scd == 2 and t.track_history_column_list:
                cdc["track_history_column_list"] = [column_ref(c) for c in t.track_history_column_list]
            if scd == 2 and t.track_history_except_column_list:
                cdc["track_history_except_column_list"] = [column_ref(c) for c in t.track_history_except_column_list]
            if t.ignore_null_updates:
                cdc["ignore_null_updates"] = True
            if scd == t.scd_types[0] and (t.ignore_null_updates_column_list or t.ignore_null_updates_except_column_list):
                out.warnings.append(f"{t.file}: ignore_null_updates_(except_)column_list: dlt-meta's "
                                    "silver_cdc_apply_changes has no per-column option; exported without it")
            row: dict[str, Any] = {
                "data_flow_id": str(flow),
                "data_flow_group": cfg.name,
                f"bronze_database_{env}": bronze_database,
                "bronze_table": t.source.bronze_table,
                f"silver_database_{env}": silver_database,
                "silver_table": target,
                "silver_cdc_apply_changes": cdc,
                f"silver_transformation_json_{env}": f"{conf_path}/silver_transformations.json",
            }
            if catalog:
                row[f"bronze_catalog_{env}"] = catalog
                row[f"silver_catalog_{env}"] = catalog
            comment = t.comment_for("scd1" if scd == 1 else "scd2")
            if comment:
                row["silver_table_comment"] = comment
            if t.table_properties:
                row["silver_table_properties"] = dict(t.table_properties)
            if t.cluster_by:
                row["silver_cluster_by"] = list(t.cluster_by)
            if t.partition_cols:
                row["silver_partition_columns"] = ",".join(t.partition_cols)
            if dqe:
                row[f"silver_data_quality_expectations_json_{env}"] = f"{conf_path}/{dqe_rel}"
            if "expect_or_quarantine" in dqe:
                row[f"silver_database_quarantine_{env}"] = silver_database
                row["silver_quarantine_table"] = f"quarantine_{t.name}"
                if table_root:
                    row[f"silver_quarantine_table_path_{env}"] = f"{table_root}/{silver_database}/quarantine_{t.name}"
            if table_root:
                row[f"bronze_table_path_{env}"] = f"{table_root}/{bronze_database}/{t.source.bronze_table}"
                row[f"silver_table_path_{env}"] = f"{table_root}/{silver_database}/{target}"
            rows.append(row)
            out.transformations.append({"target_table": target, "select_exp": select, "where_clause": where})
            flow += 1
    return out


def refusals(cfg: PipelineConfig) -> list[str]:
    """What dlt-meta could not run, one line per table (``file:line: field: why``): its apply
    changes needs ``keys``, which sqlcdc discovers from producer metadata at run time but dlt-meta
    cannot. (Rules that do not parse are found by :func:`sqlcdc.cli.validate.expression_problems`.)"""
    out = [f"{t.file or 'table config'}:1: keys: table {t.qualified} ({t.name}) has none; dlt-meta's "
           "silver_cdc_apply_changes needs them (sqlcdc discovers them from the producer at run time): add `keys:`"
           for t in cfg.tables if not t.keys]
    out += [f"{t.file}:1: sources: table {t.qualified} ({t.handoff}) takes its changes from several sources; "
            "dlt-meta onboards one source per gold table (each change once across producers is sqlcdc's own "
            "gold, docs/handoff.md): not exported" for t in cfg.tables if t.handoff and t.handoff_rank == 0]
    for source in cfg.sources.values():
        tables = cfg.tables_of(source.name)
        if tables and transformation(tables[0]) is None:
            out.append(f"source {source.name}: format {source.format}: the producer's decoder has no dlt-meta mapping "
                       f"(Decoder.dlt_meta_select); its tables ({', '.join(t.name for t in tables)}) are not exported")
    return out


def export(cfg: PipelineConfig, out_dir: str | Path, **kwargs: Any) -> tuple[list[Path], list[str]]:
    """Write the dlt-meta files for ``cfg`` under ``out_dir``; returns (files written, warnings).

    Keyword arguments are those of :func:`build`; ``conf_path`` defaults to ``out_dir`` (absolute).
    """
    out_dir = Path(out_dir)
    kwargs.setdefault("conf_path", str(out_dir.resolve()))
    ex = build(cfg, **kwargs)
    written = []
    for rel, content in [("onboarding.json", ex.onboarding), ("silver_transformations.json", ex.transformations),
                         *ex.expectations.items()]:
        p = out_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(content, indent=2) + "\n")
        written.append(p)
    return written, ex.warnings
