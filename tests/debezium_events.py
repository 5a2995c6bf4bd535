"""Build Debezium SQL Server change event values for tests and samples.

The Connect schema is the one of Debezium's documentation example (the seed
002_92eaee58045e753e.txt, kept verbatim in tests/fixtures/debezium/seed_customers_create.json):
``server1.dbo.customers`` with id int32, first_name, last_name, email strings.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

SEED = Path(__file__).resolve().parent / "fixtures" / "debezium" / "seed_customers_create.json"


def seed_event() -> dict:
    return json.loads(SEED.read_text())


def lsn(major: int, minor: int, slot: int) -> str:
    """Debezium's LSN spelling ``xxxxxxxx:xxxxxxxx:xxxx``."""
    return f"{major:08x}:{minor:08x}:{slot:04x}"


def event(
    op: str,
    *,
    before: dict | None = None,
    after: dict | None = None,
    commit_lsn: str | None,
    change_lsn: str | None,
    serial: int | str | None = 1,
    ts_ms: int = 1559729468470,
    with_schema: bool = True,
    table: str = "customers",
    snapshot: str | bool = False,
) -> dict:
    """One event value, shaped like the seed's (same schema, same source fields)."""
    doc = seed_event()
    payload = doc["payload"]
    payload["before"] = before
    payload["after"] = after
    payload["op"] = op
    src = payload["source"]
    src.update(
        {
            "ts_ms": ts_ms,
            "table": table,
            "snapshot": snapshot,
            "change_lsn": change_lsn,
            "commit_lsn": commit_lsn,
            "event_serial_no": serial,
        }
    )
    payload["ts_ms"] = ts_ms + 3000
    return doc if with_schema else copy.deepcopy(payload)


def line(doc: dict | None) -> str:
    return "null" if doc is None else json.dumps(doc, separators=(",", ":"))


def customer(id_: int, first: str, last: str, email: str | None = None) -> dict:
    return {"id": id_, "first_name": first, "last_name": last, "email": email or f"{first}.{last}@example.org"}


def sample_files() -> dict[str, list[str]]:
    """The bundled sample feed (samples/debezium/inventory): a snapshot, then a day of changes.

    Regenerate with ``python scripts/make_samples.py``.
    """
    c = customer
    snap = [
        line(event("r", after=c(i, f, l), commit_lsn=lsn(0x26, 0x100, 1), change_lsn=None, serial=None, snapshot="true",
                   ts_ms=1559720000000))
        for i, f, l in [(1001, "sally", "thomas"), (1002, "george", "bailey"), (1003, "edward", "walker"), (1004, "anne", "kretchmar")]
    ]
    seed = json.dumps(seed_event(), separators=(",", ":"))  # id 1005, john doe, verbatim from the docs
    t = 1559729500000
    changes = [
        seed,
        # 1001 changes email
        line(event("u", before=c(1001, "sally", "thomas"), after=c(1001, "sally", "thomas", "sally@acme.example"),
                   commit_lsn=lsn(0x27, 0x800, 5), change_lsn=lsn(0x27, 0x800, 3), serial=2, ts_ms=t)),
        # 1002 changes its primary key to 1012: delete + create in one commit, serial 1 and 2
        line(event("d", before=c(1002, "george", "bailey"), commit_lsn=lsn(0x27, 0x900, 9), change_lsn=lsn(0x27, 0x900, 2),
                   serial=1, ts_ms=t + 1000)),
        "",  # tombstone for key 1002
        line(event("c", after=c(1012, "george", "bailey"), commit_lsn=lsn(0x27, 0x900, 9), change_lsn=lsn(0x27, 0x900, 2),
                   serial=2, ts_ms=t + 1000)),
        # 1004: two updates delivered out of order (the later one first), payload-only
        line(event("u", before=c(1004, "anne", "kretchmar"), after=c(1004, "anne", "kretchmar-lee"),
                   commit_lsn=lsn(0x27, 0xb00, 5), change_lsn=lsn(0x27, 0xb00, 3), serial=2, ts_ms=t + 3000, with_schema=False)),
        line(event("u", before=c(1004, "anne", "kretchmar"), after=c(1004, "anne", "kretchmar"),
                   commit_lsn=lsn(0x27, 0xa00, 5), change_lsn=lsn(0x27, 0xa00, 3), serial=2, ts_ms=t + 2000, with_schema=False)),
        # two records a real feed can carry that are not changes we can apply
        "{\"payload\": {\"op\": \"c\", \"after\": {\"id\": 1006}",  # truncated write
        line(event("x", after=c(1007, "bad", "op"), commit_lsn=lsn(0x27, 0xc00, 1), change_lsn=lsn(0x27, 0xc00, 1), ts_ms=t + 4000)),
    ]
    more = [
        # a later file: 1003 is deleted, 1005 renamed
        line(event("d", before=c(1003, "edward", "walker"), commit_lsn=lsn(0x28, 0x100, 4), change_lsn=lsn(0x28, 0x100, 2),
                   serial=1, ts_ms=t + 60000)),
        "",
        line(event("u", before=c(1005, "john", "doe", "john.doe@example.org"), after=c(1005, "johnny", "doe", "john.doe@example.org"),
                   commit_lsn=lsn(0x28, 0x200, 4), change_lsn=lsn(0x28, 0x200, 2), serial=2, ts_ms=t + 61000)),
    ]
    return {"000-snapshot.json": snap, "001-changes.json": changes, "002-changes.json": more}


#: The ``add.fields`` sqlcdc documents for debezium_flat (the LSNs order the records).
FLAT_ADD_FIELDS = "op,table,schema,commit_lsn,change_lsn,event_serial_no,source.ts_ms"


def flatten(value: str, *, add_fields: str = FLAT_ADD_FIELDS, prefix: str = "__", with_schema: bool = False) -> str:
    """One Debezium event value (a landed line) as ExtractNewRecordState with rewrite emits it."""
    if value in ("", "null"):
        return value  # tombstones pass (drop.tombstones=false)
    doc = json.loads(value)
    payload = doc.get("payload", doc)
    op = payload["op"]
    row = dict(payload["before"] if op == "d" else payload["after"])
    for f in filter(None, add_fields.split(",")):
        if f.startswith("source."):
            row[prefix + "source_" + f[7:]] = payload["source"][f[7:]]
        elif f in payload and f != "source":
            row[prefix + f] = payload[f]
        else:
            row[prefix + f] = payload["source"][f]
    row[prefix + "deleted"] = "true" if op == "d" else "false"
    if not with_schema:
        return json.dumps(row)
    fields = [{"field": k, "type": "int32" if k == "id" else "string", "optional": k != "id"} for k in row]
    return json.dumps({"schema": {"type": "struct", "fields": fields, "name": "server1.dbo.customers.Value"}, "payload": row})
