"""Random mutations of each producer's good record, decoded together as the pipeline decodes them:
nothing raises, every record is in exactly one place, silver reads back into Python.

``tests/test_hostile_records.py`` holds the hostile records someone thought of; this script draws
others. Each record is one of the seed-shaped good records of that file with one random change at a
random path (``--changes N``: N of them): a key deleted, copied or given twice, or a value replaced by raw JSON text from a pool (numbers past
every range, ``-0``, ``1E+2``, lone surrogate and NUL escapes, nested and deep JSON, dates that are
not, ...); a Debezium record may carry its Connect schema, whose fields are changed too. Records that belong together are changed as a group, one member mutated or left out: a
CES event split in segments, a change table's 3/4 update halves. All records of a producer are
decoded in one plan (``as_the_pipeline_decodes``); CES records landed two hours ago, so a segment of
an incomplete event has timed out into quarantine and none waits. ``qlik_versions`` decodes a
table's metadata version 1 beside a randomly changed version 2 and data of both, one trial per
decode. Found this way (2026-11-28): a CES ``segmentindex`` past an Avro int that vanished, and a
Qlik commit time of 0001-01-01 that made ``collect()`` of silver raise.

A few minutes on two cores, so a script, not part of ``make test``::

    .venv/bin/python tests/fuzz_records.py --seed 7 --records 300
    .venv/bin/python tests/fuzz_records.py --only qlik,ces --seed 11
    .venv/bin/python tests/fuzz_records.py --only qlik_versions --trials 40
    .venv/bin/python tests/fuzz_records.py --seed 21 --changes 3

Exit status 1 when a record is lost or in two places, or silver cannot be collected.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import functions as F

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

RAW_POOL = ['1e400', '-1e400', '99999999999999999999999999999', '-0', '0.0', '1E+2', '"\\ud800"', '"\\u0000"',
            '"ééé"', '""', '"null"', 'null', 'true', 'false', '{}', '[]', '{"a":{"b":[1,2]}}', '[' * 300 + ']' * 300,
            '"2025-02-30"', '"0001-01-01"', '"10000-01-01"', '"NaN"', '"Infinity"', '12.345678901234567890123',
            '-2147483649', '2147483648', '"0x"', '"zz"', '"  12  "', '"1,5"', '"24:00:00"', '"2025-01-01T25:00:00"',
            # raw (unescaped) characters in a string: a tab is not JSON, the others are text
            '"a\tb"', '"\x7f"', '"\u2028"', '"\ufeff"', '"\u00a0"']


def _paths(doc: Any, prefix: tuple = ()):
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        yield prefix + (k,)
        yield from _paths(v, prefix + (k,))


def mutate(doc: dict, rnd: random.Random, changes: int = 1, dumps: Callable[[Any], str] = json.dumps) -> tuple[str, str]:
    """(JSON text of ``doc`` with ``changes`` random changes, what they were); ``dumps`` writes the
    document around the raw values put in (``benchmarks/bench_fast_path.py`` writes compact JSON)."""
    doc = copy.deepcopy(doc)
    raws, what = {}, []
    for n in range(changes):
        paths = list(_paths(doc))
        if not paths:
            break
        path = rnd.choice(paths)
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        kind = rnd.random()
        if kind < 0.15 and isinstance(parent, dict):
            parent.pop(path[-1])
            what.append(f"deleted {path}")
        elif kind < 0.25 and isinstance(parent, dict):
            parent[f"{path[-1]}X"] = parent[path[-1]]
            what.append(f"extra key beside {path}")
        elif kind < 0.32 and isinstance(parent, dict):  # the key twice: JSON leaves which one wins open
            raw = rnd.choice(RAW_POOL)
            raws[f"@@P{n}@@"] = f"{json.dumps(parent[path[-1]])}, {json.dumps(path[-1])}: {raw}"
            parent[path[-1]] = f"@@P{n}@@"
            what.append(f"{path} twice, then = {raw[:40]}")
        else:
            raws[f"@@P{n}@@"] = raw = rnd.choice(RAW_POOL)
            parent[path[-1]] = f"@@P{n}@@"
            what.append(f"{path} = {raw[:40]}")
    text = dumps(doc)
    for placeholder, raw in raws.items():
        text = text.replace(f'"{placeholder}"', raw)
    return text, "; ".join(what)


def _group_lines(docs: list[dict], rnd: random.Random, changes: int = 1) -> tuple[list[str], str]:
    """The JSON lines of a group of records that belong together (a CES event's segments, a change
    table's 3/4 halves): one member mutated, or one left out (its partner then has none)."""
    i = rnd.randrange(len(docs))
    if len(docs) > 1 and rnd.random() < 0.2:
        return [json.dumps(d) for j, d in enumerate(docs) if j != i], f"member {i} of {len(docs)} left out"
    text, desc = mutate(docs[i], rnd, changes)
    return [text if j == i else json.dumps(d) for j, d in enumerate(docs)], f"member {i} of {len(docs)}: {desc}"


def _places(bronze, decoder, source, table, columns, label: str) -> dict[str, list] | None:
    """landed text -> its places, decoded as the pipeline decodes; None (reported) when silver
    cannot be read back into Python."""
    import test_hostile_records as h

    decoded, quarantines = h.as_the_pipeline_decodes(bronze, decoder, source, table, columns)
    try:
        out = h._outcomes(bronze, decoded, quarantines)
        decoded.toPandas()
    except Exception as e:  # noqa: BLE001 -- the finding to report
        print(f"{label}: silver cannot be read back: {str(e)[-200:]}")
        return None
    return out


def fuzz(spark, name: str, makers: list[Callable[[int], Any]], decoder, source, table, columns, file: str,
         extra_lines: tuple[str, ...] = (), n: int = 300, seed: int = 7, changes: int = 1) -> int:
    """``makers`` give a record (dict) or a group of them (list); CES records landed two hours before
    now, so a segment whose event is incomplete has timed out and must be in quarantine."""
    import test_hostile_records as h

    rnd = random.Random(seed)
    lines, what = [], {}
    for i in range(n):
        made = rnd.choice(makers)(i)
        if isinstance(made, list):
            group, desc = _group_lines(made, rnd, changes)
        else:
            line, desc = mutate(made, rnd, changes)
            group = [line]
        for line in group:
            if line not in what:
                lines.append(line)
                what[line] = desc
    bronze = h.bronze_of(spark, list(extra_lines) + lines, file)
    if name == "ces":
        bronze = bronze.withColumn("ingest_time", F.expr("current_timestamp() - INTERVAL 2 HOURS"))
    bronze = bronze.cache()
    out = _places(bronze, decoder, source, table, columns, name)
    if out is None:
        return 1
    if name == "ces":  # a segment of a complete event is carried by the row of the event's final segment
        text = {r.record_id: r.value for r in bronze.select("record_id", "value").collect()}
        for r in decoder.disposition(bronze, source).where("status IN ('segment', 'duplicate_segment')").collect():
            if r.record_id != r.carried_by and text[r.record_id] not in out:
                out[text[r.record_id]] = [("carried", text[r.carried_by])] if text[r.carried_by] in out else []
    lost = [x for x in lines if not out.get(x)]
    multi = [x for x in lines if len(out.get(x, [])) > 1]
    silver = sum(1 for x in lines if out.get(x) and out[x][0][0] == "silver")
    print(f"{name}: {len(lines)} records, {silver} in silver, {len(lost)} in no place, {len(multi)} in two or more")
    for x in lost[:10]:
        print(f"  in no place: {what[x]}: {x[:200]}")
    for x in multi[:10]:
        print(f"  in {len(out[x])} places: {what[x]}: {out[x]}")
    return 1 if lost or multi else 0


def fuzz_qlik_versions(spark, trials: int = 20, seed: int = 7, changes: int = 1) -> int:
    """A table's metadata version 1 as Replicate writes it and a version 2 with one random change,
    data messages of both (version 2's named by ``externalSchemaId``), one decode per trial: every
    record in exactly one place (a metadata message is skipped when it reads, else quarantined)."""
    import test_hostile_records as h
    from sqlcdc.formats import qlik

    rnd = random.Random(seed)
    failed, places = 0, Counter()
    for k in range(trials):
        v2 = copy.deepcopy(h.QLIK_METADATA)
        v2["message"]["schemaId"] = "s-t-2"
        v2["message"]["lineage"].update(tableVersion=2, timestamp="2025-01-01T11:00:00.000")
        v2["message"]["tableStructure"]["tableColumns"]["EXTRA"] = {"ordinal": 8, "type": "INT4"}
        md, desc = mutate(v2, rnd, changes)
        data = [h.qk(100 * k + i) for i in range(3)] + [
            json.dumps(h.qlik_doc(100 * k + i, headers={"externalSchemaId": "s-t-2"}, EXTRA=i)) for i in range(3, 6)]
        lines = [json.dumps(h.QLIK_METADATA), md] + data
        bronze = h.bronze_of(spark, lines, "file:/landing/t/part-0.jsonl").cache()
        out = _places(bronze, qlik, h.QLIK_SOURCE, h.QLIK_TABLE, h.QLIK_COLUMNS, f"qlik versions, trial {k} ({desc})")
        if out is None:
            failed = 1
            continue
        for r in bronze.where(qlik.is_skipped(bronze)).select("value").collect():
            out[r.value].append(("skipped", None))
        places.update(p[0][0] for x in lines if (p := out.get(x)))
        wrong = {x: out.get(x, []) for x in lines if len(out.get(x, [])) != 1}
        if wrong:
            failed = 1
            print(f"qlik versions, trial {k} ({desc}):")
            for x, places in wrong.items():
                print(f"  in {len(places)} places: {x[:160]}: {places}")
        bronze.unpersist()
    print(f"qlik versions: {trials} trials, {8 * trials} records, {dict(places)};"
          f" {'some' if failed else 'no'} record in no place or two")
    return failed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--records", type=int, default=300)
    p.add_argument("--only", default="debezium,cdc_ct,ces,qlik,qlik_versions")
    p.add_argument("--trials", type=int, default=20, help="decodes of qlik_versions, one each")
    p.add_argument("--changes", type=int, default=1, help="random changes per mutated record")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python workers that can import sqlcdc
    from sqlcdc.runtime import local_spark

    spark = local_spark(app_name="sqlcdc-fuzz", extra={"spark.sql.shuffle.partitions": "2"})
    import test_hostile_records as h
    from test_ces import split

    from sqlcdc.formats import cdc_ct, ces, debezium, qlik

    def dbz_update(i: int) -> dict:
        return {**h.dbz_doc(1000 + i, op="u"), "before": h.dbz_doc(1000 + i)["after"]}

    def dbz_delete(i: int) -> dict:
        return {**h.dbz_doc(1000 + i, op="d"), "before": h.dbz_doc(1000 + i)["after"], "after": None}

    def dbz_with_schema(i: int) -> dict:  # with its Connect schema: a mutation may reach the schema's fields
        return json.loads(h.dbz_with_schema(1000 + i))

    def ct_update(i: int) -> list[dict]:  # the before (3) and after (4) halves of one update
        return [h.ct_row(1000 + i, **{"__$operation": 3}), h.ct_row(1000 + i, **{"__$operation": 4}, customer="new")]

    def ces_segments(i: int) -> list[dict]:  # one event split in 2 or 3 segments, either spelling
        return split(h.ces_doc(1000 + i), 2 + i % 2, "segment" if i % 3 else "split")

    producers = {
        "debezium": ([lambda i: h.dbz_doc(1000 + i), dbz_update, dbz_delete, dbz_with_schema], debezium, h.DBZ_SOURCE, h.DBZ_TABLE,
                     h.DBZ_COLUMNS, "file:/landing/items/f.json", ()),
        "cdc_ct": ([lambda i: h.ct_row(1000 + i), ct_update], cdc_ct, h.CT_SOURCE, h.CT_TABLE,
                   cdc_ct.columns_for(h.CT_TABLE, h.CT_SOURCE), h.CT_FILE, ()),
        "ces": ([lambda i: h.ces_doc(1000 + i), ces_segments], ces, h.CES_SOURCE, h.CES_TABLE, h.CES_COLUMNS,
                "file:/landing/ces/f.json", ()),
        "qlik": ([lambda i: h.qlik_doc(1000 + i)], qlik, h.QLIK_SOURCE, h.QLIK_TABLE, h.QLIK_COLUMNS,
                 "file:/landing/t/part-0.jsonl", (json.dumps(h.QLIK_METADATA),)),
    }
    failed = 0
    for name in args.only.split(","):
        if name == "qlik_versions":
            failed |= fuzz_qlik_versions(spark, args.trials, args.seed, args.changes)
            continue
        makers, decoder, source, table, columns, file, extra = producers[name]
        failed |= fuzz(spark, name, makers, decoder, source, table, columns, file, extra, args.records, args.seed,
                       args.changes)
    return failed


if __name__ == "__main__":
    sys.exit(main())
