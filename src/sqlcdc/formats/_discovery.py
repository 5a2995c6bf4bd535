"""Discovery scans that remember what they found, so a run reads only the files landed since.

A decoder that finds a table's columns and keys in what has landed (CES ``eventsource.cols``, Qlik
metadata messages) aggregates all of its source's landed records at pipeline definition, on every
run: over a long history that scan grew with every file ever landed (22 s of a test run's 45 s of
definitions, docs/testing.md). Its aggregate is *mergeable* -- the aggregate of some files, unioned with the
aggregate of others and aggregated again, is the aggregate of all -- and *idempotent* -- a file
counted twice changes nothing.

So in a local run (:data:`~sqlcdc.formats.base.STATE_DIR_ENV` set, a local landing folder) the rows
found are kept in ``<state>/discovery/<source>.json`` with the files they cover (path, size,
modification time, as URIs) and a digest of the source's config and sqlcdc's code. The next scan lists the
landed files (``DataFrame.inputFiles``: the files Spark would read) and then:

- every covered file unchanged, nothing new: the kept rows, no Spark job;
- every covered file unchanged, some new: the aggregate of only the new files, merged with the kept rows;
- a covered file changed or gone, or the config or code changed, or nothing kept: a full scan.

Elsewhere (Databricks, a notebook, a topic) every scan is a full scan, as before. A file that lands
while the scan runs is read by a full scan but not listed as covered: the next scan reads it again,
which the aggregate's idempotence makes harmless.

Example::

    shapes = incremental(("ces-shapes", source.name), repr(source), landed, aggregate, merge)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BooleanType, ByteType, DataType, IntegerType, LongType, ShortType,
                               StringType, StructType)

from sqlcdc.formats.base import STATE_DIR_ENV, local_path, scanned
from sqlcdc.runtime import code_digest, read_json, write_json

__all__ = ["CACHE_DIR", "incremental"]

log = logging.getLogger(__name__)

#: The folder, under a local run's state folder (``<warehouse>/_sqlcdc``), of the kept discovery rows.
CACHE_DIR = "discovery"

_PLAIN = (StringType, IntegerType, LongType, ShortType, ByteType, BooleanType)


def incremental(key: tuple[str, str], salt: str, landed: Callable[[], DataFrame],
                aggregate: Callable[[DataFrame], DataFrame], merge: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """``aggregate(landed())`` of every landed file, as :func:`~sqlcdc.formats.base.scanned` keeps it.

    ``key``: (scan kind, source name), which names the kept file; ``salt``: what else the rows
    depend on (the source's config); ``landed``: the source's bronze rows (with ``source_file``);
    ``merge``: the aggregate again over a union of aggregates. Kept only in a local run and
    only when the aggregate's columns are plain (strings, integers, booleans, arrays and structs
    of them), which JSON holds exactly."""
    return scanned(key, lambda: _scan(key, salt, landed(), aggregate, merge), local=True)


def _scan(key: tuple[str, str], salt: str, landed: DataFrame, aggregate: Callable[[DataFrame], DataFrame],
          merge: Callable[[DataFrame], DataFrame]) -> DataFrame:
    state = os.environ.get(STATE_DIR_ENV)
    files = _listed(landed) if state else None
    if files is None:
        found = aggregate(landed)
        return landed.sparkSession.createDataFrame(found.collect(), found.schema)
    path = Path(state) / CACHE_DIR / (hashlib.sha256("\0".join(key).encode()).hexdigest()[:16] + ".json")
    digest = hashlib.sha256(f"{salt}\0{code_digest()}".encode()).hexdigest()
    kept = read_json(path)
    kept = kept if isinstance(kept, dict) else {}
    spark = landed.sparkSession
    covered = kept.get("files") if kept.get("digest") == digest else None
    old = _kept_rows(spark, kept) if isinstance(covered, dict) else None
    if old is not None and all(files.get(p) == v for p, v in covered.items()):
        new = [p for p in files if p not in covered]
        if not new:
            log.info("discovery %s: nothing landed since the last scan; %d file(s) covered", key, len(covered))
            return old
        log.info("discovery %s: scanning %d new file(s) of %d", key, len(new), len(files))
        spellings = [s for p in new for s in _spellings(p)]
        found = merge(old.unionByName(aggregate(landed.where(F.col("source_file").isin(*spellings)))))
    else:
        found = aggregate(landed)
    rows = found.collect()
    local = spark.createDataFrame(rows, found.schema)
    if _plain(found.schema):
        write_json(path, {"key": list(key), "digest": digest, "files": files, "schema": found.schema.json(),
                      "rows": [_to_json(r) for r in rows]})
    return local


def _kept_rows(spark, kept: dict[str, Any]) -> DataFrame | None:
    """The rows ``kept`` holds as a local frame; None when they cannot be read back (a kept file
    edited by hand or by another tool): then the scan is a full one, never a failed run."""
    try:
        schema = StructType.fromJson(json.loads(kept["schema"]))
        return spark.createDataFrame([_from_json(r, schema) for r in kept["rows"]], schema)
    except (KeyError, TypeError, ValueError) as e:
        log.info("discovery: kept rows unreadable (%s): a full scan", e)
        return None


def _listed(landed: DataFrame) -> dict[str, list[int]] | None:
    """The files ``landed`` reads, ``{URI as Spark spells it: [size, modification time ns]}``,
    listed now; None when one of them is not local, or the frame is not a read of files."""
    try:
        uris = landed.inputFiles()
    except Exception as e:  # noqa: BLE001 - not a file read (a union with a topic): a full scan
        log.info("discovery: no file list (%s): a full scan", e)
        return None
    if not uris:  # nothing landed yet, or not a read of files (a topic): nothing to keep
        return None
    out: dict[str, list[int]] = {}
    for uri in uris:
        p = local_path(uri)
        if p is None:
            return None
        try:
            st = os.stat(p)
        except OSError:  # gone since the listing: the scan reads what is there
            return None
        out[uri] = [st.st_size, st.st_mtime_ns]
    return out


def _spellings(uri: str) -> list[str]:
    """How ``_metadata.file_path`` (bronze's ``source_file``) spells the file ``inputFiles`` lists
    as ``uri``: the same URI (Hadoop's, which escapes a space but not an ``é``), with or without
    the empty authority (``file:///x``, ``file:/x``). Never re-encoded: that would miss a mixed name."""
    bare = re.sub(r"^file:/+", "file:/", uri)
    return sorted({uri, bare, re.sub(r"^file:/", "file:///", bare)})


def _plain(t: DataType) -> bool:
    if isinstance(t, StructType):
        return all(_plain(f.dataType) for f in t.fields)
    if isinstance(t, ArrayType):
        return _plain(t.elementType)
    return isinstance(t, _PLAIN)


def _to_json(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return [_to_json(v) for v in value]
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any, t: DataType) -> Any:
    if value is None:
        return None
    if isinstance(t, StructType):
        return tuple(_from_json(v, f.dataType) for v, f in zip(value, t.fields))
    if isinstance(t, ArrayType):
        return [_from_json(v, t.elementType) for v in value]
    return value
