"""A small, independent reference model of gold apply-changes, written plainly in Python.

No Spark, no cleverness: de-duplicate by change id, sort, then walk the events one by one with a
dict of current rows and a list of SCD2 versions. The Spark engine (``sqlcdc.gold``)
must give the same tables for any permutation, duplication or split of the same events.

An event is a dict::

    {"op": "UPSERT" | "DELETE" | "TRUNCATE",
     "seq": <orderable>,                 # the sequence_by value
     "cid": "c17",                       # change id: duplicate deliveries share it
     "key": (1,),                        # key values (ignored for TRUNCATE)
     "values": {"a": "x", "b": None},    # non-key column values
     "provided": None | {"a"}}           # columns the event carries; None = all

Apply order: by ``seq``; at equal ``seq`` deletes and truncates before upserts; then by ``cid``.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, Sequence

RANK = {"DELETE": 0, "TRUNCATE": 0, "UPSERT": 1}


def apply_order(events: Iterable[dict]) -> list[dict]:
    """Drop duplicate deliveries (same change id) and sort into apply order."""
    seen: set[str] = set()
    unique = []
    for e in events:
        if e["cid"] in seen:
            continue
        seen.add(e["cid"])
        unique.append(e)
    return sorted(unique, key=lambda e: (e["seq"], RANK[e["op"]], e["cid"]))


def replay(
    events: Iterable[dict],
    columns: Sequence[str],
    tracked: Sequence[str] | None = None,
    ignore_null_updates: bool | Collection[str] = False,
) -> tuple[dict[tuple, dict[str, Any]], list[dict[str, Any]]]:
    """Apply ``events``; return (SCD1 rows by key, SCD2 versions).

    ``columns`` are the non-key columns of the target; ``tracked`` (default: all of them) the ones
    whose change opens a new SCD2 version. ``ignore_null_updates``: True (every column), or the
    columns whose NULL in an update keeps the previous value. A version is a dict with ``key``, ``values``,
    ``start`` and ``end`` (None = current).
    """
    tracked = list(columns) if tracked is None else list(tracked)
    current: dict[tuple, dict[str, Any]] = {}
    open_version: dict[tuple, dict[str, Any]] = {}
    versions: list[dict[str, Any]] = []

    def close(key, seq):
        open_version.pop(key)["end"] = seq

    for e in apply_order(events):
        op, seq = e["op"], e["seq"]
        if op == "TRUNCATE":
            for key in list(current):
                close(key, seq)
            current.clear()
        elif op == "DELETE":
            key = e["key"]
            if key in current:
                del current[key]
                close(key, seq)
        else:
            key = e["key"]
            before = current.get(key)
            row = dict(before) if before is not None else {c: None for c in columns}
            for c in columns:
                if e["provided"] is not None and c not in e["provided"]:
                    continue
                value = e["values"].get(c)
                ignores = c in ignore_null_updates if not isinstance(ignore_null_updates, bool) else ignore_null_updates
                if ignores and value is None:
                    continue
                row[c] = value
            current[key] = row
            if before is not None and all(before[c] == row[c] for c in tracked):
                open_version[key]["values"] = dict(row)  # only untracked columns changed (or none)
                continue
            if before is not None:
                close(key, seq)
            version = {"key": key, "values": dict(row), "start": seq, "end": None}
            versions.append(version)
            open_version[key] = version
    return current, versions


def scd1_rows(events, columns, **kw) -> list[tuple]:
    """SCD1 as sorted tuples ``key + values``."""
    current, _ = replay(events, columns, **kw)
    return sorted(tuple(k) + tuple(row[c] for c in columns) for k, row in current.items())


def scd2_rows(events, columns, **kw) -> list[tuple]:
    """SCD2 as sorted tuples ``key + values + (start, end)``."""
    _, versions = replay(events, columns, **kw)
    return sorted(
        (tuple(v["key"]) + tuple(v["values"][c] for c in columns) + (v["start"], v["end"]) for v in versions),
        key=_sort_key,
    )


def _sort_key(t: tuple) -> tuple:
    return tuple((x is None, x) for x in t)
