"""Envelopes, split-segment reassembly and record accounting of the CES decoder
(:mod:`sqlcdc.formats.ces`, which re-exports the public names).

Holds the source options of reassembly (:func:`split_timeout_seconds`, ``segment_index_base``),
the parsed envelope (:func:`envelopes`), the grouping of split segments by ``logicalid``
(``_groups``), the complete events with ``data`` parsed (:func:`events`), the routing of an event
to its table (``_routes``), accessors of an event's ``pkkey`` and images, and where each bronze
record went (:func:`disposition`).
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sqlcdc import frames, lsn
from sqlcdc.config import SourceConfig, TableConfig
from sqlcdc.formats import _schema_check as sc
from sqlcdc.formats._json_numbers import object_as_written
from sqlcdc.formats.base import lone_surrogate_reason, nested_keys_in
from sqlcdc.values import COMMIT_TIME_RANGE, commit_time

__all__ = [
    "DATA_SCHEMA", "DEFAULT_SPLIT_TIMEOUT", "ENVELOPE_SCHEMA",
    "disposition", "envelopes", "events", "routed", "same_records", "split_timeout_seconds", "transaction_marks",
    "_BRONZE", "_ENV_ATTRS", "_dedup", "_get", "_group_events", "_groups", "_image_map", "_image_problem", "_pk_value", "_with_images",
    "_routes", "_segment_base",
]

ENVELOPE_SCHEMA = "ces-cloudevent.schema.json"
DATA_SCHEMA = "ces-data.schema.json"

DEFAULT_SPLIT_TIMEOUT = "1 hour"

# ----------------------------------------------------------------------------- options


def split_timeout_seconds(source: SourceConfig) -> int:
    """The ``split_timeout`` source option in seconds; a clear error naming the file if malformed.

    >>> split_timeout_seconds(SourceConfig("s", "ces", None, {"split_timeout": "15 minutes"}))
    900
    """
    raw = source.options.get("split_timeout", DEFAULT_SPLIT_TIMEOUT)
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw >= 0:
        return int(raw)
    m = re.match(r"^\s*(\d+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?)\s*$", str(raw), re.I)
    if not m:
        raise ValueError(
            f"{source.file or 'pipeline config'}: sources.{source.name}.options.split_timeout: "
            f"{raw!r} is not a duration (e.g. 3600, '15 minutes', '2 hours')"
        )
    unit = m.group(2).lower()[0]
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


def _segment_base(source: SourceConfig) -> int:
    base = source.options.get("segment_index_base", 0)
    if base not in (0, 1):
        raise ValueError(
            f"{source.file or 'pipeline config'}: sources.{source.name}.options.segment_index_base: "
            f"{base!r} must be 0 or 1"
        )
    return int(base)


# ----------------------------------------------------------------------------- envelopes & reassembly

_BRONZE = ("record_id", "value", "source_file", "ingest_time")


def _get(doc: Column, path: str, type_: str = "string") -> Column:
    return F.try_variant_get(doc, path, type_)


def envelopes(bronze: DataFrame, source: SourceConfig) -> DataFrame:
    """Bronze + the parsed envelope: ``_violations`` (envelope schema) and the attributes."""
    base = _segment_base(source)
    v = F.expr(sc.ONE_DOCUMENT)  # NULL (not JSON) for a line of two documents, never the first alone
    with_doc = bronze.select(*_BRONZE, v.alias("_doc"))
    d = F.col("_doc")
    idx = F.coalesce(_get(d, "$.segmentindex", "int"), _get(d, "$.splitindex", "int"))
    final = _get(d, "$.finalsegment", "boolean")
    total = _get(d, "$.splittotalcnt", "int")
    # never NULL: a record neither single nor a segment would be in no place at all
    single = F.coalesce(F.when(final.isNotNull(), final & (idx == base)).otherwise(total <= 1), F.lit(False))
    return with_doc.select(
        *_BRONZE,
        sc.violations(sc.load(ENVELOPE_SCHEMA), "_doc").alias("_violations"),
        _get(d, "$.specversion").alias("specversion"),
        _get(d, "$.type").alias("type"),
        _get(d, "$.source").alias("source"),
        _get(d, "$.id").alias("id"),
        _get(d, "$.logicalid").alias("logicalid"),
        _get(d, "$.time").alias("time"),
        _get(d, "$.datacontenttype").alias("datacontenttype"),
        _get(d, "$.operation").alias("operation"),
        idx.alias("seg_index"),
        final.alias("seg_final"),
        total.alias("seg_total"),
        single.alias("single"),
        _get(d, "$.data").alias("data"),
    )


_ENV_ATTRS = ("specversion", "type", "source", "id", "logicalid", "time", "datacontenttype", "operation")


def _groups(env: DataFrame, source: SourceConfig) -> DataFrame:
    """One row per ``logicalid`` of split segments: reassembly state and, if complete, the event."""
    base = _segment_base(source)
    timeout = split_timeout_seconds(source)
    seg = frames.where(env, (F.size("_violations") == 0) & ~F.col("single"), "_is_segment")
    item = F.struct(
        F.col("seg_index").alias("idx"),
        F.col("ingest_time"),
        F.col("record_id"),
        F.col("source_file"),
        F.col("seg_final").alias("final"),
        F.col("seg_total").alias("total"),
        *[F.col(a) for a in _ENV_ATTRS if a != "logicalid"],
        F.col("data"),
        F.col("value"),
    )
    g = seg.groupBy("logicalid").agg(F.collect_list(item).alias("all_segs"), F.min("ingest_time").alias("first_seen"))
    segs = F.array_sort(F.col("all_segs"))  # by idx, then ingest_time, record_id: first copy wins
    g = g.select("logicalid", "all_segs", "first_seen", segs.alias("sorted"))
    s = F.col("sorted")
    g = g.select("*", _dedup(s).alias("segs"))
    segs_c = F.col("segs")
    n = F.size(segs_c)
    final_idx = F.array_min(F.transform(F.filter(segs_c, lambda x: F.coalesce(x["final"], F.lit(False))), lambda x: x["idx"]))
    total = F.array_max(F.transform(segs_c, lambda x: x["total"]))
    expected = F.coalesce(final_idx - F.lit(base) + 1, total)
    first, last = segs_c[0], F.element_at(segs_c, -1)
    complete = (
        expected.isNotNull()
        & (n == expected)
        & (first["idx"] == base)
        & (last["idx"] == F.lit(base) + expected - 1)
    )
    timed_out = ~complete & (
        F.col("first_seen") < F.current_timestamp() - F.make_dt_interval(secs=F.lit(timeout))
    )
    data = F.array_join(F.transform(segs_c, lambda x: x["data"]), "")
    return g.select(
        "logicalid",
        "all_segs",
        "sorted",
        "segs",
        "first_seen",
        n.alias("n_segments"),
        expected.alias("expected_segments"),
        F.transform(segs_c, lambda x: x["idx"]).alias("indexes"),
        complete.alias("complete"),
        timed_out.alias("timed_out"),
        data.alias("data"),
        first.alias("head"),
        last.alias("tail"),
    )


def _group_events(groups: DataFrame) -> DataFrame:
    """Complete groups as event rows shaped like single events (lineage: the final segment)."""
    h, t = F.col("head"), F.col("tail")
    raw = F.to_json(
        F.struct(
            *[(h[a] if a != "logicalid" else F.col("logicalid")).alias(a) for a in _ENV_ATTRS],
            h["idx"].alias("segmentindex"),
            F.lit(True).alias("finalsegment"),
            F.col("data"),
            F.transform(F.col("segs"), lambda x: x["record_id"]).alias("sqlcdc_segment_records"),
        )
    )
    return groups.where("complete").select(
        t["record_id"].alias("record_id"),
        raw.alias("value"),
        t["source_file"].alias("source_file"),
        t["ingest_time"].alias("ingest_time"),
        *[(h[a] if a != "logicalid" else F.col("logicalid")).alias(a) for a in _ENV_ATTRS],
        F.col("data"),
    )


def events(bronze: DataFrame, source: SourceConfig) -> DataFrame:
    """Every complete event (unsplit, or reassembled) with ``data`` parsed: the rows tables route on.

    Columns: bronze columns (of the final segment for reassembled events), the envelope
    attributes, ``data``, ``_data_violations`` and the parsed pieces of ``data``.
    """
    env = envelopes(bronze, source)
    singles = frames.where(env, (F.size("_violations") == 0) & F.col("single"), "_is_single").select(
        *_BRONZE, *_ENV_ATTRS, "data"
    )
    groups = _groups(env, source)
    ev = singles.unionByName(_group_events(groups))
    dv = F.try_parse_json(F.col("data"))
    ev = ev.select("*", dv.alias("_data_doc"))
    dd = F.col("_data_doc")
    pk = F.transform(
        _get(dd, "$.eventsource.pkkey", "array<variant>"),
        lambda x: F.struct(_get(x, "$.columnname").alias("name"), _get(x, "$.value").alias("value")),
    )
    lid = F.col("logicalid")
    lid_re = r"^[^:]*:([0-9A-Fa-f]{20}):([0-9]{1,20})$"
    lid_lsn = F.nullif(F.regexp_extract(lid, lid_re, 1), F.lit(""))
    lid_seq = F.nullif(F.regexp_extract(lid, lid_re, 2), F.lit("")).try_cast("decimal(20,0)").try_cast("bigint")
    tx_lsn = _get(dd, "$.eventsource.transaction.commitlsn")
    tx_seq = _get(dd, "$.eventsource.transaction.sequencenumber", "bigint")
    # The commit LSN is validated, never padded: transaction.commitlsn when the event has it (20 hex
    # digits, optional 0x, or xxxxxxxx:xxxxxxxx:xxxx, as the data schema allows), else logicalid's.
    commit_lsn = F.when(tx_lsn.isNotNull(), lsn.parse_lsn(tx_lsn, "hex_or_debezium")).otherwise(
        lsn.parse_lsn(lid_lsn, "hex"))
    lsn_problem = F.coalesce(
        lsn.lsn_problem(tx_lsn, "data.eventsource.transaction.commitlsn", "hex_or_debezium"),
        F.when(tx_lsn.isNull(), lsn.lsn_problem(lid_lsn, "the commit LSN in logicalid", "hex")),
    )
    # The commit time: the CloudEvents `time` when given, else transaction.committime; read once.
    given_time = F.coalesce(F.col("time"), _get(dd, "$.eventsource.transaction.committime"))
    given_name = F.when(F.col("time").isNotNull(), F.lit("time")).otherwise(F.lit("data.eventsource.transaction.committime"))
    commit_ts = commit_time(given_time)
    return ev.select(
        *_BRONZE,
        *_ENV_ATTRS,
        "data",
        sc.violations(sc.load(DATA_SCHEMA), "_data_doc").alias("_data_violations"),
        _get(dd, "$.eventsource.db").alias("src_db"),
        _get(dd, "$.eventsource.schema").alias("src_schema"),
        _get(dd, "$.eventsource.tbl").alias("src_table"),
        _get(dd, "$.eventsource.cols", "array<struct<name:string,type:string,index:int>>").alias("src_cols"),
        pk.alias("pkkey"),
        _get(dd, "$.eventrow.old").alias("old_text"),
        _get(dd, "$.eventrow.current").alias("current_text"),
        commit_lsn.alias("commit_lsn"),
        lsn_problem.alias("commit_lsn_problem"),
        F.coalesce(tx_seq, lid_seq).alias("seq_number"),
        commit_ts.alias("commit_ts"),
        F.when(given_time.isNotNull() & commit_ts.isNull(), F.format_string(
            f"%s '%s' is not a commit time within {COMMIT_TIME_RANGE}", given_name, F.substring(given_time, 1, 60)
        )).alias("commit_ts_problem"),
    )


def routed(bronze: DataFrame, source: SourceConfig, table: TableConfig) -> DataFrame:
    """The complete events of ``table`` (a split event as its final segment): what waits in
    quarantine while none of them tells the table's columns or keys (:meth:`Decoder.waiting`)."""
    return frames.where(events(bronze, source), _routes(table), "_routed")


def transaction_marks(bronze: DataFrame, source: SourceConfig) -> DataFrame:
    """Whole-transaction marks (:meth:`sqlcdc.formats.Decoder.transaction_marks`) of every complete
    event of the source, every table: the commit LSN as ``transaction_id`` and ``commit``, the
    sequence number as ``position``. CES states no event count per commit (its data schema's
    ``transaction`` holds ``commitlsn``, ``beginlsn``, ``sequencenumber``, ``committime``), so
    ``last`` is NULL: a commit counts as complete once a later one has landed
    (``transactions.later_commit``). An event without a readable commit LSN gives no mark."""
    ev = frames.where(events(bronze, source), F.col("commit_lsn").isNotNull() & F.col("commit_lsn_problem").isNull(), "_ordered")
    return ev.select(
        F.col("commit_lsn").alias("transaction_id"), F.col("seq_number").alias("position"),
        F.lit(None).cast("boolean").alias("last"), F.col("commit_lsn").alias("commit"),
        F.col("ingest_time").alias("landed"),
    )


def _dedup(sorted_segs: Column) -> Column:
    """Keep the first copy of each segment index (the array is sorted by index first)."""
    return F.filter(
        sorted_segs,
        lambda x, i: F.coalesce(x["idx"] != F.get(sorted_segs, i - 1)["idx"], F.lit(True)),
    )


def _routes(table: TableConfig) -> Column:
    """The event belongs to ``table``: schema and table name match (case-insensitively, as SQL
    Server's default collation does); table option ``database`` also filters on ``eventsource.db``."""
    cond = (F.lower(F.col("src_schema")) == table.schema.lower()) & (F.lower(F.col("src_table")) == table.table.lower())
    db = _database(table)
    if db:
        cond = cond & (F.lower(F.col("src_db")) == str(db).lower())
    return F.coalesce(cond, F.lit(False))


def _database(table: TableConfig) -> str | None:
    """The database whose events ``table`` takes (option ``database``, table or source); None: every one."""
    return table.options.get("database") or table.source.options.get("database")


def same_records(a: TableConfig, b: TableConfig) -> bool:
    """:meth:`~sqlcdc.formats.Decoder.same_records`: the same ``schema.table`` in databases that
    overlap (a table without a database takes the events of every one)."""
    da, db = _database(a), _database(b)
    return a.qualified.lower() == b.qualified.lower() and (not da or not db or str(da).lower() == str(db).lower())


# ----------------------------------------------------------------------------- event fields


def _pk_value(name: str) -> Column:
    """The ``pkkey`` value (text) of key column ``name``; NULL when the event does not carry it."""
    return F.get(F.filter(F.col("pkkey"), lambda p: p["name"] == F.lit(name)), 0)["value"]


def _key_disagrees(key: str) -> Column:
    """Why the row image disagrees with ``pkkey`` on ``key``, else NULL.

    The key comes from ``pkkey`` and the values from the image (``current``; ``old`` for a DEL):
    an image giving the key column NULL or another value would reach silver as a row whose key
    is not its own. An image without the column, or whose value does not read (said already),
    is not compared. Reads the columns :func:`sqlcdc.formats.ces.decode` has set by then: the image
    maps ``_old``/``_cur``, their typed structs ``_before``/``_after`` and the typed ``_key``."""
    is_del = F.col("operation") == "DEL"
    image = F.when(is_del, F.col("_old")).otherwise(F.col("_cur"))
    typed = F.when(is_del, F.col("_before")[key]).otherwise(F.col("_after")[key])
    raw = image[key]
    return F.when(
        F.array_contains(F.map_keys(image), key) & (raw.isNull() | typed.isNotNull())
        & ~typed.eqNullSafe(F.col("_key")[key]),
        F.format_string("key column %s: pkkey gives %s, eventrow.%s %s", F.lit(key),
                        F.to_json(F.array(_pk_value(key))), F.when(is_del, "old").otherwise("current"),
                        F.to_json(F.array(raw))),
    )


def _image_map(text: Column) -> Column:
    """``eventrow.old``/``current`` text -> MAP<STRING,STRING> (NULL when not a JSON object)."""
    return F.try_variant_get(F.try_parse_json(text), "$", "map<string,string>")


def _image_problem(name: str) -> Column:
    """Why ``data.eventrow.<name>`` (``old`` or ``current``) gives no image (NULL when it does):
    not JSON text of an object; named when the cause is a lone surrogate escape in it (one level
    below the envelope, which the check before decoding reads: ``\\\\ud800`` there)."""
    image, text = F.col("_old" if name == "old" else "_cur"), F.col(f"{name}_text")
    return F.when(image.isNull(), F.coalesce(
        F.concat(F.lit(f"data.eventrow.{name}: "), lone_surrogate_reason(text)),
        F.lit(f"data.eventrow.{name} is not a JSON object of column values")))


def _with_images(events: DataFrame) -> DataFrame:
    """``events`` + the images of each event: ``_old``/``_cur`` (:func:`_image_map` of ``old_text``
    and ``current_text``) and ``_old_nested``/``_cur_nested``, their keys whose value is a JSON
    object or array (:func:`sqlcdc.formats.base.nested_keys`: no value of a column)."""
    events = events.select("*", _image_map(F.col("old_text")).alias("_old_read"),
                           _image_map(F.col("current_text")).alias("_cur_read"))
    # a number a double cannot hold (1e-400, 41 digits) as the image writes it: parsed again only then
    events = events.select("*", *[object_as_written(F.col(f"_{k}_read"), F.col(f"{t}_text")).alias(f"_{k}")
                                  for k, t in (("old", "old"), ("cur", "current"))])
    return events.select("*", nested_keys_in(F.col("old_text"), "$", F.col("_old")).alias("_old_nested"),
                         nested_keys_in(F.col("current_text"), "$", F.col("_cur")).alias("_cur_nested"))


# ----------------------------------------------------------------------------- accounting


def disposition(bronze: DataFrame, source: SourceConfig) -> DataFrame:
    """Where each bronze record went: ``record_id, logicalid, status, carried_by`` with status one of
    ``invalid_envelope``, ``event``, ``segment``, ``duplicate_segment``, ``pending``, ``timed_out``
    (see the :mod:`sqlcdc.formats.ces` docstring for the conservation identity). ``carried_by`` is
    the record id in the ``bronze_record_id`` of the silver or quarantine row that accounts for this
    record: itself, or for the segments of a complete split event the group's final segment (the
    summary's balance uses it)."""
    env = envelopes(bronze, source)
    plain = frames.where(env, (F.size("_violations") > 0) | F.col("single"), "_plain").select(
        "record_id", "logicalid",
        F.when(F.size("_violations") > 0, F.lit("invalid_envelope")).otherwise(F.lit("event")).alias("status"),
        F.col("record_id").alias("carried_by"),
    )
    groups = _groups(env, source)
    # position in the sorted array decides: the first copy of an index is the one reassembled
    # (record ids alone cannot tell two identical lines of one file apart)
    seg = groups.select(
        "logicalid", "complete", "timed_out", "sorted", "tail", F.posexplode("sorted").alias("pos", "s")
    ).select(
        F.col("s.record_id").alias("record_id"),
        "logicalid",
        F.when(
            F.col("complete")
            & F.coalesce(F.col("s.idx") != F.get(F.col("sorted"), F.col("pos") - 1)["idx"], F.lit(True)),
            F.lit("segment"),
        )
        .when(F.col("complete"), F.lit("duplicate_segment"))
        .when(F.col("timed_out"), F.lit("timed_out"))
        .otherwise(F.lit("pending"))
        .alias("status"),
        F.when(F.col("complete"), F.col("tail.record_id")).otherwise(F.col("s.record_id")).alias("carried_by"),
    )
    return plain.unionByName(seg)
