"""Property tests: the Spark apply-changes engine against the plain-Python reference model.

Hypothesis draws random change histories (inserts, full and partial updates, deletes, primary-key
changes, truncates), then delivers them shuffled, with duplicates, and (for the incremental path)
split over several runs. SCD1 and SCD2 must equal ``reference_model`` on the original history.

Spark is costly on 2 shared cores, so each example packs several independent histories (keys
namespaced per history) into one DataFrame, and example counts stay small.
"""

from __future__ import annotations

import datetime as dt
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType, TimestampType

import reference_model as ref
from sqlcdc.gold import END_AT, START_AT, ApplyChangesSpec, scd1, scd2
from sqlcdc.lsn import SEQUENCE_TYPE

COLUMNS = ["a", "b"]
SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("a", StringType()),
        StructField("b", StringType()),
        StructField("_op", StringType()),
        StructField("_sequence", SEQUENCE_TYPE, nullable=False),
        StructField("_provided", ArrayType(StringType())),
        StructField("_change_id", StringType()),
        StructField("_commit_time", TimestampType()),
    ]
)
T0 = dt.datetime(2026, 1, 1)
HISTORIES_PER_EXAMPLE = 10
#: Multiplies the example counts (`make test-explore` sets it; CI keeps 1).
SCALE = int(os.environ.get("SQLCDC_PROPERTY_SCALE", "1"))
KEYS_PER_HISTORY = 3

values = st.sampled_from(["x", "y", None])


def _seq(n: int) -> tuple:
    # Spread n over the three fields so the struct comparison (field by field) is exercised.
    return (f"{n // 4:020X}", f"{n % 4:020X}", n % 2)


@st.composite
def history(draw, h: int) -> list[dict]:
    """One history over keys h*100 + 0..KEYS_PER_HISTORY-1; sequence values may tie."""
    out: list[dict] = []
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["insert", "insert", "partial", "partial", "delete", "keychange"]))
        seq = draw(st.integers(0, 24))
        key = (h * 100 + draw(st.integers(0, KEYS_PER_HISTORY - 1)),)
        vals = {"a": draw(values), "b": draw(values)}
        cid = f"h{h}e{i}"
        if kind == "insert":
            out.append(dict(op="UPSERT", seq=seq, cid=cid, key=key, values=vals, provided=None))
        elif kind == "partial":
            provided = set(draw(st.sets(st.sampled_from(COLUMNS), max_size=2)))
            out.append(dict(op="UPSERT", seq=seq, cid=cid, key=key, values=vals, provided=provided))
        elif kind == "delete":
            out.append(dict(op="DELETE", seq=seq, cid=cid, key=key, values=vals, provided=None))
        else:  # primary-key change, as model.apply_frame explodes it: DELETE(old) + UPSERT(new)
            new = (h * 100 + draw(st.integers(0, KEYS_PER_HISTORY - 1)),)
            if new == key:
                new = (key[0] + 50,)
            out.append(dict(op="DELETE", seq=seq, cid=cid + "#old-key", key=key, values=vals, provided=None))
            out.append(dict(op="UPSERT", seq=seq, cid=cid, key=new, values=vals, provided=None))
    return out


@st.composite
def delivery(draw):
    """(events, delivered rows): the history, and how it arrives (shuffled, with duplicates)."""
    events = [e for h in range(HISTORIES_PER_EXAMPLE) for e in draw(history(h))]
    if draw(st.integers(0, 5)) == 0:
        events.append(dict(op="TRUNCATE", seq=draw(st.integers(0, 24)), cid="trunc", key=(None,),
                           values={"a": None, "b": None}, provided=None))
    dups = draw(st.lists(st.sampled_from(events), max_size=6))
    delivered = draw(st.permutations(events + dups))
    return events, delivered


def to_row(e: dict) -> tuple:
    provided = None if e["provided"] is None else sorted(e["provided"])
    return (e["key"][0], e["values"]["a"], e["values"]["b"], e["op"], _seq(e["seq"]), provided, e["cid"],
            T0 + dt.timedelta(seconds=e["seq"]))


def _unseq(s) -> int | None:
    if s is None:
        return None
    return int(s["commit_lsn"], 16) * 4 + int(s["change_lsn"], 16)


def engine_scd1(df, spec) -> list[tuple]:
    return sorted(tuple(r) for r in scd1(df, spec).collect())


def engine_scd2(df, spec) -> list[tuple]:
    rows = [(r["id"], r["a"], r["b"], _unseq(r[START_AT]), _unseq(r[END_AT])) for r in scd2(df, spec).collect()]
    return sorted(rows, key=ref._sort_key)


spec_options = st.fixed_dictionaries(
    {
        # False/True, or AUTO CDC's per-column lists: only `a`, or every column but `a`
        "ignore_null_updates": st.sampled_from([False, True, ("only", ["a"]), ("except", ["a"])]),
        "track": st.sampled_from([None, ("only", ["a"]), ("except", ["a"])]),
    }
)


def make_specs(opts) -> tuple[ApplyChangesSpec, ApplyChangesSpec, list[str]]:
    track = opts["track"]
    kw2 = {}
    tracked = COLUMNS
    if track and track[0] == "only":
        kw2["track_history_column_list"] = track[1]
        tracked = track[1]
    elif track:
        kw2["track_history_except_column_list"] = track[1]
        tracked = [c for c in COLUMNS if c not in track[1]]
    ignore = opts["ignore_null_updates"]
    if isinstance(ignore, bool):
        kw_null = {"ignore_null_updates": ignore}
    elif ignore[0] == "only":
        kw_null = {"ignore_null_updates_column_list": ignore[1]}
    else:
        kw_null = {"ignore_null_updates_except_column_list": ignore[1]}
    s1 = ApplyChangesSpec(keys=["id"], table="prop", **kw_null)
    s2 = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, table="prop", **kw_null, **kw2)
    return s1, s2, tracked


def ref_ignore(opts) -> dict:
    """The reference model's ignore_null_updates for ``opts``: a bool, or the columns it applies to."""
    ignore = opts["ignore_null_updates"]
    if isinstance(ignore, bool):
        return {"ignore_null_updates": ignore}
    cols = ignore[1] if ignore[0] == "only" else [c for c in COLUMNS if c not in ignore[1]]
    return {"ignore_null_updates": set(cols)}


@settings(max_examples=15 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(d=delivery(), opts=spec_options)
def test_recompute_matches_reference(spark, d, opts):
    events, delivered = d
    s1, s2, tracked = make_specs(opts)
    df = spark.createDataFrame([to_row(e) for e in delivered], SCHEMA)
    s1.validate(df.schema)
    s2.validate(df.schema)
    kw = ref_ignore(opts)
    expected1 = ref.scd1_rows(events, COLUMNS, **kw)
    expected2 = [
        t[:-2] + (t[-2], t[-1]) for t in ref.scd2_rows(events, COLUMNS, tracked=tracked, **kw)
    ]
    assert engine_scd1(df, s1) == expected1
    assert engine_scd2(df, s2) == expected2


@st.composite
def runs(draw):
    """The delivery split into 2..3 runs (non-empty), in arrival order."""
    events, delivered = draw(delivery())
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(delivered) - 1)), min_size=1, max_size=2))))
    bounds = [0] + [c for c in cuts if 0 < c < len(delivered)] + [len(delivered)]
    return events, [delivered[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@settings(max_examples=3 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(r=runs(), opts=spec_options)
def test_incremental_runs_match_reference(spark, r, opts):
    """merge_scd1/merge_scd2 over the runs == the reference on the whole history."""
    import tempfile

    from sqlcdc.gold import merge_scd1, merge_scd2

    events, batches = r
    s1, s2, tracked = make_specs(opts)
    # A directory per example, removed after it (Hypothesis runs the body many times; tmp_path is one
    # directory for all of them).
    with tempfile.TemporaryDirectory(prefix="ac_prop_") as work:
        t1, t2 = f"{work}/scd1", f"{work}/scd2"
        for batch in batches:
            df = spark.createDataFrame([to_row(e) for e in batch], SCHEMA)
            merge_scd1(spark, t1, df, s1)
            merge_scd2(spark, t2, df, s2)
        read = spark.read.format("delta").load
        got1 = sorted(tuple(r) for r in read(t1).collect())
        got2 = sorted(((x["id"], x["a"], x["b"], _unseq(x[START_AT]), _unseq(x[END_AT]))
                       for x in read(t2).collect()), key=ref._sort_key)
    kw = ref_ignore(opts)
    assert got1 == ref.scd1_rows(events, COLUMNS, **kw)
    assert got2 == ref.scd2_rows(events, COLUMNS, tracked=tracked, **kw)
