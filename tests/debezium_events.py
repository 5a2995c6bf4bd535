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
