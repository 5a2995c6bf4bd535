"""Random mutations of each producer's good record, decoded together as the pipeline decodes them:
nothing raises, every record is in exactly one place, silver reads back into Python.

``tests/test_hostile_records.py`` holds the hostile records someone thought of; this script draws
others. Each record is one of the seed-shaped good records of that file with one random change at a
random path: a key deleted or doubled, or a value replaced by raw JSON text from a pool (numbers past
every range, ``-0``, ``1E+2``, lone surrogate and NUL escapes, nested and deep JSON, dates that are
not, ...). All records of a producer are decoded in one plan (``as_the_pipeline_decodes``). A record
in no place is reported, except a CES segment that waits for the rest of its event (it is
quarantined after the split timeout). Found this way (2026-11-28): a CES ``segmentindex`` past an
Avro int that vanished, and a Qlik commit time of 0001-01-01 that made ``collect()`` of silver raise.

A few minutes on two cores, so a script, not part of ``make test``::

    .venv/bin/python tests/fuzz_records.py --seed 7 --records 300
    .venv/bin/python tests/fuzz_records.py --only qlik,ces --seed 11

Exit status 1 when a record is lost or in two places, or silver cannot be collected.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
from pathlib import Path
from typing import Any, Callable

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

RAW_POOL = ['1e400', '-1e400', '99999999999999999999999999999', '-0', '0.0', '1E+2', '"\\ud800"', '"\\u0000"',
            '"ééé"', '""', '"null"', 'null', 'true', 'false', '{}', '[]', '{"a":{"b":[1,2]}}', '[' * 300 + ']' * 300,
            '"2025-02-30"', '"0001-01-01"', '"10000-01-01"', '"NaN"', '"Infinity"', '12.345678901234567890123',
            '-2147483649', '2147483648', '"0x"', '"zz"', '"  12  "', '"1,5"', '"24:00:00"', '"2025-01-01T25:00:00"']


def _paths(doc: Any, prefix: tuple = ()):
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield prefix + (k,)
        yield from _paths(v, prefix + (k,))


def mutate(doc: dict, rnd: random.Random) -> tuple[str, str]:
    """(JSON text of ``doc`` with one random change, what the change was)."""
    doc = copy.deepcopy(doc)
    path = rnd.choice(list(_paths(doc)))
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    kind = rnd.random()
    if kind < 0.15 and isinstance(parent, dict):
        parent.pop(path[-1])
        return json.dumps(doc), f"deleted {path}"
    if kind < 0.25 and isinstance(parent, dict):
        parent[f"{path[-1]}X"] = parent[path[-1]]
        return json.dumps(doc), f"extra key beside {path}"
    raw = rnd.choice(RAW_POOL)
    parent[path[-1]] = "@@PLACEHOLDER@@"
    return json.dumps(doc).replace('"@@PLACEHOLDER@@"', raw), f"{path} = {raw[:40]}"


def _waiting_segment(text: str) -> bool:
    """A CES record that waits for the rest of its split event (base 0 or 1), not lost."""
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    if not isinstance(doc, dict):
        return False
    final, idx = doc.get("finalsegment"), doc.get("segmentindex")
    if isinstance(idx, bool) or not isinstance(idx, (int, float)) or not 0 <= idx <= 2**31 - 1:  # not an Avro int
        return False
    return final is False or (final is True and idx > 1)  # a final segment past the first: earlier ones missing


def fuzz(spark, name: str, makers: list[Callable[[int], dict]], decoder, source, table, columns, file: str,
         extra_lines: tuple[str, ...] = (), n: int = 300, seed: int = 7) -> int:
    import test_hostile_records as h

    rnd = random.Random(seed)
    lines, what = [], {}
    for i in range(n):
        line, desc = mutate(rnd.choice(makers)(i), rnd)
        if line not in what:
            lines.append(line)
            what[line] = desc
    bronze = h.bronze_of(spark, list(extra_lines) + lines, file).cache()
    changes, quarantines = h.as_the_pipeline_decodes(bronze, decoder, source, table, columns)
    try:
        out = h._outcomes(bronze, changes, quarantines)
        changes.toPandas()
    except Exception as e:  # noqa: BLE001 -- the finding to report
        print(f"{name}: silver cannot be read back: {str(e)[-200:]}")
        return 1
    lost = [x for x in lines if x not in out and not (name == "ces" and _waiting_segment(x))]
    multi = [x for x in lines if len(out.get(x, [])) > 1]
    silver = sum(1 for x in lines if out.get(x) and out[x][0][0] == "silver")
    print(f"{name}: {len(lines)} records, {silver} in silver, {len(lost)} in no place, {len(multi)} in two or more")
    for x in lost[:10]:
        print(f"  in no place: {what[x]}: {x[:200]}")
    for x in multi[:10]:
        print(f"  in {len(out[x])} places: {what[x]}: {out[x]}")
    return 1 if lost or multi else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--records", type=int, default=300)
    p.add_argument("--only", default="debezium,cdc_ct,ces,qlik")
    args = p.parse_args()
    from sqlcdc.runtime import local_spark

    spark = local_spark(app_name="sqlcdc-fuzz", extra={"spark.sql.shuffle.partitions": "2"})
    import test_hostile_records as h
    from sqlcdc.formats import cdc_ct, ces, debezium, qlik

    def dbz_update(i: int) -> dict:
        return {**h.dbz_doc(1000 + i, op="u"), "before": h.dbz_doc(1000 + i)["after"]}

    def dbz_delete(i: int) -> dict:
        return {**h.dbz_doc(1000 + i, op="d"), "before": h.dbz_doc(1000 + i)["after"], "after": None}

    producers = {
        "debezium": ([lambda i: h.dbz_doc(1000 + i), dbz_update, dbz_delete], debezium, h.DBZ_SOURCE, h.DBZ_TABLE,
                     h.DBZ_COLUMNS, "file:/landing/items/f.json", ()),
        "cdc_ct": ([lambda i: h.ct_row(1000 + i)], cdc_ct, h.CT_SOURCE, h.CT_TABLE,
                   cdc_ct.columns_for(h.CT_TABLE, h.CT_SOURCE), h.CT_FILE, ()),
        "ces": ([lambda i: h.ces_doc(1000 + i)], ces, h.CES_SOURCE, h.CES_TABLE, h.CES_COLUMNS,
                "file:/landing/ces/f.json", ()),
        "qlik": ([lambda i: h.qlik_doc(1000 + i)], qlik, h.QLIK_SOURCE, h.QLIK_TABLE, h.QLIK_COLUMNS,
                 "file:/landing/t/part-0.jsonl", (json.dumps(h.QLIK_METADATA),)),
    }
    failed = 0
    for name in args.only.split(","):
        makers, decoder, source, table, columns, file, extra = producers[name]
        failed |= fuzz(spark, name, makers, decoder, source, table, columns, file, extra, args.records, args.seed)
    return failed


if __name__ == "__main__":
    sys.exit(main())
