"""Examples of the gold apply-changes engine (AUTO CDC semantics), each with hand-computed tables."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sqlcdc.gold import END_AT, START_AT, ApplyChangesSpec, scd1, scd2
from sqlcdc.gold import merge_scd1, merge_scd2
from sqlcdc.config import ConfigError
from sqlcdc.lsn import SEQUENCE_TYPE

import auto_cdc_reference as auto_cdc

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("name", StringType()),
        StructField("city", StringType()),
        StructField("_op", StringType()),
        StructField("_sequence", SEQUENCE_TYPE, nullable=False),
        StructField("_provided", ArrayType(StringType())),
        StructField("_change_id", StringType()),
        StructField("_commit_time", TimestampType()),
    ]
)
T0 = dt.datetime(2026, 1, 1)


def seq(n: int) -> tuple:
    """A sequence struct whose order is n's order."""
    return (f"{n:020X}", f"{n:020X}", 0)


def ev(op, n, id_, name=None, city=None, provided=None, cid=None):
    """One apply-frame row. op: U(psert) D(elete) T(runcate)."""
    op = {"U": "UPSERT", "D": "DELETE", "T": "TRUNCATE"}[op]
    return (id_, name, city, op, seq(n), provided, cid or f"c{n}-{id_}", T0 + dt.timedelta(seconds=n))


def frame(spark, rows):
    return spark.createDataFrame(rows, SCHEMA)


SPEC1 = ApplyChangesSpec(keys=["id"], table="customers")
SPEC2 = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, table="customers")


def rows1(df):
    return sorted(tuple(r) for r in df.collect())


def rows2(df):
    """SCD2 rows with the sequences turned back into their integers."""
    out = []
    for r in df.collect():
        d = r.asDict()
        s, e = d.pop(START_AT), d.pop(END_AT)
        out.append(tuple(d.values()) + (int(s["commit_lsn"], 16), None if e is None else int(e["commit_lsn"], 16)))
    return sorted(out, key=lambda t: tuple((x is None, x) for x in t))


# ---------------------------------------------------------------- SCD1
def test_scd1_insert_update_delete(spark):
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("U", 2, 2, "bob", "rome"),
        ev("U", 3, 1, "ann", "bergen"),
        ev("D", 4, 2, "bob", "rome"),
    ])
    assert scd1(df, SPEC1).columns == ["id", "name", "city"]
    assert rows1(scd1(df, SPEC1)) == [(1, "ann", "bergen")]


def test_scd1_out_of_order_and_duplicates(spark):
    events = [
        ev("U", 3, 1, "ann", "bergen"),
        ev("U", 1, 1, "ann", "oslo"),
        ev("U", 1, 1, "ann", "oslo"),  # duplicate delivery
        ev("U", 3, 1, "ann", "bergen"),
        ev("U", 2, 1, "ann", "paris"),
    ]
    assert rows1(scd1(frame(spark, events), SPEC1)) == [(1, "ann", "bergen")]


def test_late_event_older_than_delete_does_not_resurrect(spark):
    df = frame(spark, [ev("U", 1, 1, "ann", "oslo"), ev("D", 5, 1), ev("U", 3, 1, "ann", "late")])
    assert rows1(scd1(df, SPEC1)) == []
    assert rows2(scd2(df, SPEC2)) == [(1, "ann", "late", 3, 5), (1, "ann", "oslo", 1, 3)]


def test_reinsert_after_delete_starts_from_nothing(spark):
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("D", 2, 1),
        ev("U", 3, 1, "ann2", provided=["id", "name"]),
    ])
    assert rows1(scd1(df, SPEC1)) == [(1, "ann2", None)]


def test_partial_update_keeps_absent_columns_and_sets_provided_null(spark):
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("U", 2, 1, None, "rome", provided=["city"]),   # name absent: keeps "ann"
        ev("U", 3, 2, "bob", "x"),
        ev("U", 4, 2, None, None, provided=["name"]),      # a provided NULL sets NULL
    ])
    assert rows1(scd1(df, SPEC1)) == [(1, "ann", "rome"), (2, None, "x")]


def test_partial_update_arriving_late_only_sets_what_no_later_event_set(spark):
    df = frame(spark, [
        ev("U", 5, 1, "ann", None, provided=["id", "name"]),
        ev("U", 1, 1, "old", "oslo"),
        ev("U", 3, 1, "mid", None, provided=["name"]),
    ])
    assert rows1(scd1(df, SPEC1)) == [(1, "ann", "oslo")]


def test_ignore_null_updates(spark):
    spec = ApplyChangesSpec(keys=["id"], ignore_null_updates=True, table="customers")
    df = frame(spark, [ev("U", 1, 1, "ann", "oslo"), ev("U", 2, 1, None, "rome"), ev("U", 3, 2, None, "x")])
    assert rows1(scd1(df, spec)) == [(1, "ann", "rome"), (2, None, "x")]


def test_ignore_null_updates_per_column(spark):
    """AUTO CDC's column lists: only `name` keeps its value on a NULL (the list), or every column
    but `city` does (the except list) -- the same result; a NULL `city` is written."""
    df = frame(spark, [ev("U", 1, 1, "ann", "oslo"), ev("U", 2, 1, None, None), ev("U", 3, 2, "bob", "x"),
                       ev("U", 4, 2, None, "y")])
    for spec in (ApplyChangesSpec(keys=["id"], ignore_null_updates_column_list=["name"], table="c"),
                 ApplyChangesSpec(keys=["id"], ignore_null_updates_except_column_list=["city"], table="c")):
        assert rows1(scd1(df, spec)) == [(1, "ann", None), (2, "bob", "y")]
    both = ApplyChangesSpec(keys=["id"], ignore_null_updates=True, ignore_null_updates_column_list=["name"], table="c")
    assert _problems(both) == ["c: ignore_null_updates_column_list: give one of ignore_null_updates, "
                               "ignore_null_updates_column_list, not several"]
    unknown = ApplyChangesSpec(keys=["id"], ignore_null_updates_except_column_list=["town"], table="c")
    assert _problems(unknown) == ["c: ignore_null_updates_except_column_list: unknown column 'town' "
                                  "(data columns: id, name, city)"]


def test_primary_key_change_as_delete_plus_upsert(spark):
    # model.apply_frame explodes an UPDATE 1 -> 7 into DELETE(1) + UPSERT(7) with one sequence.
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("D", 2, 1, "ann", "oslo", cid="c2#old-key"),
        ev("U", 2, 7, "ann", "oslo", cid="c2"),
    ])
    assert rows1(scd1(df, SPEC1)) == [(7, "ann", "oslo")]
    assert rows2(scd2(df, SPEC2)) == [(1, "ann", "oslo", 1, 2), (7, "ann", "oslo", 2, None)]


def test_column_list_and_except_column_list(spark):
    df = frame(spark, [ev("U", 1, 1, "ann", "oslo")])
    only = ApplyChangesSpec(keys=["id"], column_list=["id", "city"], table="customers")
    assert scd1(df, only).columns == ["id", "city"]
    assert rows1(scd1(df, only)) == [(1, "oslo")]
    drop = ApplyChangesSpec(keys=["id"], except_column_list=["city"], table="customers")
    assert rows1(scd1(df, drop)) == [(1, "ann")]


def test_truncate_removes_keys_sequenced_before_it(spark):
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("U", 2, 2, "bob", "rome"),
        ev("T", 3, None),
        ev("U", 4, 2, "bob", "paris", provided=["id", "city"]),
        ev("U", 2, 3, "cid", "late"),  # sequenced before the truncate: gone
    ])
    assert rows1(scd1(df, SPEC1)) == [(2, None, "paris")]
    assert rows2(scd2(df, SPEC2)) == [
        (1, "ann", "oslo", 1, 3),
        (2, "bob", "rome", 2, 3),
        (2, None, "paris", 4, None),
        (3, "cid", "late", 2, 3),
    ]


# ---------------------------------------------------------------- SCD2
def test_scd2_history(spark):
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("U", 2, 1, "ann", "rome"),
        ev("D", 3, 1),
        ev("U", 4, 1, "ann", "rome"),
    ])
    out = scd2(df, SPEC2)
    assert out.columns == ["id", "name", "city", START_AT, END_AT]
    assert out.schema[START_AT].dataType == SEQUENCE_TYPE or out.schema[START_AT].dataType.simpleString() == \
        SEQUENCE_TYPE.simpleString()
    assert rows2(out) == [(1, "ann", "oslo", 1, 2), (1, "ann", "rome", 2, 3), (1, "ann", "rome", 4, None)]


def test_scd2_identical_reupsert_and_duplicates_open_no_version(spark):
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("U", 2, 1, "ann", "oslo"),
        ev("U", 2, 1, "ann", "oslo"),
        ev("D", 3, 1),
        ev("D", 3, 1),
    ])
    assert rows2(scd2(df, SPEC2)) == [(1, "ann", "oslo", 1, 3)]


def test_scd2_untracked_change_updates_current_version_in_place(spark):
    spec = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, track_history_column_list=["name"], table="c")
    df = frame(spark, [
        ev("U", 1, 1, "ann", "oslo"),
        ev("U", 2, 1, "ann", "rome"),      # city untracked: same version, new value
        ev("U", 3, 1, "anna", "rome"),     # name tracked: new version
        ev("U", 4, 1, "anna", "paris"),
    ])
    assert rows2(scd2(df, spec)) == [(1, "ann", "rome", 1, 3), (1, "anna", "paris", 3, None)]
    exc = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, track_history_except_column_list=["city"], table="c")
    assert rows2(scd2(df, exc)) == rows2(scd2(df, spec))


def test_scd2_out_of_order(spark):
    events = [
        ev("U", 4, 1, "d", "x"),
        ev("U", 2, 1, "b", "x"),
        ev("U", 1, 1, "a", "x"),
        ev("U", 3, 1, None, "y", provided=["city"]),
    ]
    assert rows2(scd2(frame(spark, events), SPEC2)) == [
        (1, "a", "x", 1, 2),
        (1, "b", "x", 2, 3),
        (1, "b", "y", 3, 4),
        (1, "d", "x", 4, None),
    ]


def test_custom_sequence_column_and_delete_expression(spark):
    schema = StructType([
        StructField("k", StringType()),
        StructField("v", LongType()),
        StructField("op", StringType()),
        StructField("ts", LongType(), nullable=False),
    ])
    df = spark.createDataFrame([("a", 1, "I", 1), ("a", 2, "U", 2), ("b", 1, "I", 1), ("b", 1, "D", 3)], schema)
    spec = ApplyChangesSpec(keys=["k"], sequence_by="ts", apply_as_deletes="op = 'D'", apply_as_truncates=None,
                            except_column_list=["op"], provided_column=None, change_id_column=None,
                            commit_time_column=None, table="t")
    spec.validate(df.schema)
    assert rows1(scd1(df, spec)) == [("a", 2, 2)]
    s2 = ApplyChangesSpec(**{**spec.__dict__, "stored_as_scd_type": 2})
    assert sorted(tuple(r) for r in scd2(df, s2).collect()) == [
        ("a", 1, 1, 1, 2), ("a", 2, 2, 2, None), ("b", 1, 1, 1, 3)]


# ---------------------------------------------------------------- validation
def _problems(spec):
    with pytest.raises(ConfigError) as e:
        spec.validate(SCHEMA)
    return e.value.problems


def test_validate_accepts_good_spec():
    SPEC1.validate(SCHEMA)
    SPEC2.validate(SCHEMA)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(keys=["idd"]), "orders: keys: unknown column 'idd'"),
        (dict(keys=[]), "orders: keys: at least one key"),
        (dict(keys=["id"], column_list=["id", "nmae"]), "orders: column_list: unknown column 'nmae'"),
        (dict(keys=["id"], except_column_list=["zip"]), "orders: except_column_list: unknown column 'zip'"),
        (dict(keys=["id"], column_list=["id"], except_column_list=["name"]), "orders: column_list: give column_list or"),
        (dict(keys=["id"], column_list=["name"]), "orders: column_list: must include key column 'id'"),
        (dict(keys=["id"], stored_as_scd_type=2, track_history_column_list=["x"]),
         "orders: track_history_column_list: unknown column 'x'"),
        (dict(keys=["id"], stored_as_scd_type=2, track_history_except_column_list=["x"]),
         "orders: track_history_except_column_list: unknown column 'x'"),
        (dict(keys=["id"], stored_as_scd_type=2, track_history_column_list=["name"],
              track_history_except_column_list=["city"]), "orders: track_history_column_list: give"),
        (dict(keys=["id"], track_history_column_list=["name"]), "only valid with stored_as_scd_type=2"),
        (dict(keys=["id"], sequence_by="seq"), "orders: sequence_by: unknown column 'seq'"),
        (dict(keys=["id"], sequence_by="name"), "orders: sequence_by: column 'name' is nullable"),
        (dict(keys=["id"], stored_as_scd_type=3), "orders: stored_as_scd_type: must be 1 or 2"),
        (dict(keys=["id"], provided_column="_present"), "orders: provided_column: unknown column '_present'"),
    ],
)
def test_validate_refuses_config_mistakes(kwargs, expected):
    problems = _problems(ApplyChangesSpec(table="orders", **kwargs))
    assert any(expected in p for p in problems), problems


def test_validate_reports_every_problem_at_once():
    problems = _problems(ApplyChangesSpec(keys=["idd"], column_list=["x"], except_column_list=["y"], table="o"))
    assert len(problems) >= 3


# ---------------------------------------------------------------- Databricks mapping (no Spark)
def test_to_auto_cdc_kwargs_scd1():
    kw = SPEC1.to_auto_cdc_kwargs(target="gold_customers", source="silver_customers")
    assert kw == {
        "target": "gold_customers",
        "source": "silver_customers",
        "keys": ["id"],
        "sequence_by": "_sequence",
        "ignore_null_updates": False,
        "stored_as_scd_type": 1,
        "apply_as_deletes": "_op = 'DELETE'",
        "apply_as_truncates": "_op = 'TRUNCATE'",
        "except_column_list": ["_op", "_sequence", "_provided", "_change_id", "_commit_time"],
        "columns_to_update": "_provided",  # presence (tests/test_auto_cdc_presence.py)
    }


def test_to_auto_cdc_kwargs_scd2_with_lists():
    spec = ApplyChangesSpec(keys=["id", "region"], stored_as_scd_type=2, column_list=["id", "region", "name"],
                            track_history_except_column_list=["name"], ignore_null_updates=True, table="c")
    kw = spec.to_auto_cdc_kwargs("t", "s")
    assert kw["stored_as_scd_type"] == 2
    assert kw["keys"] == ["id", "region"]
    assert kw["column_list"] == ["id", "region", "name"]
    assert "except_column_list" not in kw
    assert kw["track_history_except_column_list"] == ["name"]
    assert "track_history_column_list" not in kw
    assert "apply_as_truncates" not in kw  # Databricks: truncates are SCD1-only
    assert kw["ignore_null_updates"] is True


def test_to_auto_cdc_kwargs_pass_the_per_column_ignore_null_lists():
    only = ApplyChangesSpec(keys=["id"], ignore_null_updates_column_list=["name"], table="c").to_auto_cdc_kwargs("t", "s")
    assert only["ignore_null_updates_column_list"] == ["name"]
    assert "ignore_null_updates" not in only and "ignore_null_updates_except_column_list" not in only
    but = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2, ignore_null_updates_except_column_list=["city"],
                           table="c").to_auto_cdc_kwargs("t", "s")
    assert but["ignore_null_updates_except_column_list"] == ["city"] and "ignore_null_updates" not in but


def test_to_auto_cdc_kwargs_user_excepts_come_first_and_no_deletes():
    spec = ApplyChangesSpec(keys=["id"], except_column_list=["city"], apply_as_deletes=None,
                            apply_as_truncates=None, table="c")
    kw = spec.to_auto_cdc_kwargs("t", "s")
    assert kw["except_column_list"] == ["city", "_op", "_sequence", "_provided", "_change_id", "_commit_time"]
    assert "apply_as_deletes" not in kw and "apply_as_truncates" not in kw


def test_to_auto_cdc_kwargs_name_a_dotted_column_as_one_column(spark):
    """AUTO CDC reads ``keys`` and the column lists as ``col(name)``: unquoted, ``unit.price`` is the
    field ``price`` of a struct ``unit`` and the flow fails to start; quoted, it is the column."""
    spec = ApplyChangesSpec(keys=["row.id"], stored_as_scd_type=2, column_list=["row.id", "unit.price", "name"],
                            track_history_column_list=["unit.price"], ignore_null_updates_column_list=["unit.price"],
                            table="c")
    kw = spec.to_auto_cdc_kwargs("t", "s")
    assert kw["keys"] == ["`row.id`"]
    assert kw["column_list"] == ["`row.id`", "`unit.price`", "name"]
    assert kw["track_history_column_list"] == kw["ignore_null_updates_column_list"] == ["`unit.price`"]
    assert kw["columns_to_update"] == "_provided"

    frame = spark.createDataFrame([(1, 2.5, "x")], "`row.id` int, `unit.price` double, name string")
    assert frame.select(*[F.col(c) for c in kw["column_list"]]).columns == ["row.id", "unit.price", "name"]
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN"):  # what the platform would do unquoted
        frame.select(F.col("unit.price")).columns

    # the reference of AUTO CDC's semantics reads them the same way
    rows = [{"row.id": 1, "unit.price": 2.5, "name": "x", "_sequence": 1, "_op": "UPSERT", "_provided": None,
             "_change_id": "a", "_commit_time": None, auto_cdc.DELETE: False, auto_cdc.TRUNCATE: False}]
    assert auto_cdc.apply(kw, rows) == [{"row.id": 1, "unit.price": 2.5, "name": "x",
                                         auto_cdc.START_AT: 1, auto_cdc.END_AT: None}]
    with pytest.raises(ValueError, match="nested field"):
        auto_cdc.apply({**kw, "keys": ["row.id"]}, rows)


# ---------------------------------------------------------------- incremental MERGE into Delta
HISTORY = [
    ev("U", 1, 1, "ann", "oslo"),
    ev("U", 2, 2, "bob", "rome"),
    ev("U", 3, 1, None, "bergen", provided=["city"]),
    ev("D", 4, 2, "bob", "rome"),
    ev("U", 5, 3, "cid", "x"),
    ev("D", 6, 3, "cid", "x", cid="c6#old-key"),
    ev("U", 6, 9, "cid", "x", cid="c6"),
    ev("U", 7, 1, "anna", None, provided=["name"]),
    ev("U", 8, 4, "dan", "y"),
]


def _apply_runs(spark, tmp_path, batches, *, with_scd2=True, **kw):
    """Apply ``batches`` in turn to an SCD1 and (``with_scd2``) an SCD2 target; (SCD1, SCD2 or None,
    SCD1's modes). A test of SCD1-only behaviour leaves SCD2 out: an SCD2 apply costs ~5 s."""
    t1, t2 = str(tmp_path / "scd1"), str(tmp_path / "scd2")
    modes = []
    for batch in batches:
        df = frame(spark, batch)
        modes.append(merge_scd1(spark, t1, df, SPEC1, **kw))
        if with_scd2:
            merge_scd2(spark, t2, df, SPEC2)
    read = lambda p: spark.read.format("delta").load(p)  # noqa: E731
    return read(t1), read(t2) if with_scd2 else None, modes


def test_incremental_runs_equal_recompute(spark, tmp_path):
    # Out of order across runs, a duplicate, and a late event older than a delete (seq 3 for id 2).
    batches = [
        [HISTORY[7], HISTORY[0], HISTORY[3]],
        [HISTORY[1], HISTORY[4], HISTORY[0], ev("U", 3, 2, "bob", "late")],
        [HISTORY[2], HISTORY[5], HISTORY[6], HISTORY[8]],
    ]
    g1, g2, modes = _apply_runs(spark, tmp_path, batches)
    assert modes == ["initial", "merge", "merge"]
    everything = frame(spark, [e for b in batches for e in b])
    assert rows1(g1) == rows1(scd1(everything, SPEC1)) == [(1, "anna", "bergen"), (4, "dan", "y"), (9, "cid", "x")]
    assert rows2(g2) == rows2(scd2(everything, SPEC2))
    assert (2, "bob", "late", 3, 4) in rows2(g2)
    # a few rows MERGEd into a small table: it is not laid out again (a rewrite per run would cost
    # more than reading them); test_incremental_scd2_relayout_... shows when it is
    history = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'scd2'}`").orderBy("version").collect()
    assert [h.operation for h in history] == ["WRITE", "MERGE", "MERGE"]


def test_incremental_scd1_state_compaction_keeps_the_tables(spark, tmp_path, monkeypatch):
    # The SCD1 key state is append-only and folded on read; compaction (forced here after every
    # batch) rewrites it as one row per key and must not change what the next batches give.
    # (SCD2's: test_incremental_scd2_append_only_state_folds_to_the_single_fold.)
    from sqlcdc.gold import incremental

    monkeypatch.setattr(incremental, "_STATE_MAX_FILES", 0)
    batches = [
        [HISTORY[7], HISTORY[0], HISTORY[3]],
        [HISTORY[1], HISTORY[4], HISTORY[0], ev("U", 3, 2, "bob", "late")],
        [HISTORY[2], HISTORY[5], HISTORY[6], HISTORY[8]],
    ]
    g1, _, _ = _apply_runs(spark, tmp_path, batches, with_scd2=False)
    assert rows1(g1) == [(1, "anna", "bergen"), (4, "dan", "y"), (9, "cid", "x")]
    state = spark.read.format("delta").load(incremental.state_location(str(tmp_path / "scd1")))
    assert state.count() == state.select("id").distinct().count() == 5  # ids 1, 2, 3, 4, 9


def test_incremental_truncate_batch_and_late_event_before_it(spark, tmp_path):
    batches = [HISTORY[:4], [ev("T", 10, None), ev("U", 11, 5, "eve", "z")], [ev("U", 9, 6, "fay", "w"), HISTORY[8]]]
    g1, g2, modes = _apply_runs(spark, tmp_path, batches)
    assert modes == ["initial", "recompute", "merge"]
    assert rows1(g1) == [(5, "eve", "z")]
    everything = frame(spark, [e for b in batches for e in b])
    assert rows2(g2) == rows2(scd2(everything, SPEC2))
    assert (6, "fay", "w", 9, 10) in rows2(g2)


def test_tombstone_retention_forgets_old_deletes(spark, tmp_path):
    # Kept tombstone (default): the late event stays dead.  Zero retention: it resurrects the row.
    batches = [[ev("U", 1, 1, "ann", "oslo"), ev("D", 5, 1)], [ev("U", 3, 1, "ann", "late")]]
    # (SCD1 only: SCD2 keeps its change log, whatever the retention.)
    kept, _, _ = _apply_runs(spark, tmp_path / "kept", batches, with_scd2=False)
    assert rows1(kept) == []
    gone, _, _ = _apply_runs(spark, tmp_path / "gone", batches, with_scd2=False, tombstone_retention=dt.timedelta(0))
    assert rows1(gone) == [(1, "ann", "late")]


def test_incremental_scd2_with_versions_sharing_a_start(spark, tmp_path):
    # Two upserts of id 1 tie on sequence 5 (distinct change ids): SCD2 holds a zero-length version
    # [5, 5) next to [5, ...), so (key, __START_AT) is not unique. The second run touches id 1 again;
    # found by the property test (DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE before).
    batches = [
        [ev("U", 5, 1, "ann", "oslo", cid="a"), ev("U", 5, 1, "ann", "rome", cid="b"), ev("U", 6, 2, "bob", "x")],
        [ev("U", 7, 1, "ann", "pisa"), ev("U", 5, 1, "ann", "rome", cid="b")],
    ]
    g1, g2, _ = _apply_runs(spark, tmp_path, batches)
    assert rows1(g1) == [(1, "ann", "pisa"), (2, "bob", "x")]
    assert rows2(g2) == [
        (1, "ann", "oslo", 5, 5),
        (1, "ann", "pisa", 7, None),
        (1, "ann", "rome", 5, 7),
        (2, "bob", "x", 6, None),
    ]


# ---------------------------------------------------------------- incremental: redelivery, stops, state
BATCHES = [
    [HISTORY[7], HISTORY[0], HISTORY[3]],
    [HISTORY[1], HISTORY[4], HISTORY[0], ev("U", 3, 2, "bob", "late")],
    [HISTORY[2], HISTORY[5], HISTORY[6], HISTORY[8], ev("U", 9, 1, "ann", "pisa")],
]


def test_incremental_same_batch_applied_twice_gives_the_same_tables(spark, tmp_path):
    # At-least-once delivery: a batch applied again (in-order and late keys alike) changes nothing.
    g1, g2, _ = _apply_runs(spark, tmp_path, BATCHES)
    once1, once2 = rows1(g1), rows2(g2)
    df = frame(spark, BATCHES[-1])
    assert merge_scd1(spark, str(tmp_path / "scd1"), df, SPEC1) == "merge"
    assert merge_scd2(spark, str(tmp_path / "scd2"), df, SPEC2) == "merge"
    read = lambda p: spark.read.format("delta").load(str(tmp_path / p))  # noqa: E731
    assert rows1(read("scd1")) == once1
    assert rows2(read("scd2")) == once2
    everything = frame(spark, [e for b in BATCHES for e in b])
    assert once2 == rows2(scd2(everything, SPEC2))


def test_incremental_scd2_batch_delivered_again_after_a_run_stopped_before_the_target(spark, tmp_path, monkeypatch):
    # A run that appended the log and the key state but stopped before the target MERGE: the
    # state is ahead of the target, so the redelivered batch must route its keys through the log.
    from sqlcdc.gold import delta_io

    target = str(tmp_path / "scd2")
    merge_scd2(spark, target, frame(spark, BATCHES[0]), SPEC2)
    real = delta_io.replace_keys

    def stop(*a, **k):
        raise RuntimeError("stopped before the target")

    monkeypatch.setattr(delta_io, "replace_keys", stop)
    with pytest.raises(RuntimeError):
        merge_scd2(spark, target, frame(spark, BATCHES[2]), SPEC2)
    monkeypatch.setattr(delta_io, "replace_keys", real)
    merge_scd2(spark, target, frame(spark, BATCHES[2]), SPEC2)
    merge_scd2(spark, target, frame(spark, BATCHES[1]), SPEC2)
    everything = frame(spark, [e for b in BATCHES for e in b])
    assert rows2(spark.read.format("delta").load(target)) == rows2(scd2(everything, SPEC2))


def test_incremental_scd2_append_only_state_folds_to_the_single_fold(spark, tmp_path, monkeypatch):
    # The SCD2 key state is append-only: after many batches, folding its rows gives the state of one
    # run over every change (the open version's start included; only its write counter differs),
    # and compacting it after every batch keeps the tables.
    from pyspark.sql import functions as F

    from sqlcdc.gold import incremental

    def folded_state(target):
        loc = incremental.state_location(target)
        df = spark.read.format("delta").load(loc)
        values = [c for c in df.columns if c not in ("id", "__ac_del", "__ac_last", "__ac_open")]
        st = incremental._fold(df, SPEC2, values, extra=("__ac_open",))
        return sorted(tuple(r) for r in st.withColumn("__ac_open", F.col("__ac_open.s"))
                      .withColumn("__ac_last", F.col("__ac_last.o")).collect())

    many = BATCHES[:2] + [BATCHES[2][:2], BATCHES[2][2:]]  # in-order and late keys, four state files
    split = str(tmp_path / "split")
    for b in many:
        merge_scd2(spark, split, frame(spark, b), SPEC2)
    whole = str(tmp_path / "whole")
    merge_scd2(spark, whole, frame(spark, [e for b in BATCHES for e in b]), SPEC2)
    assert folded_state(split) == folded_state(whole)
    assert len(spark.read.format("delta").load(incremental.state_location(split)).inputFiles()) > 1

    monkeypatch.setattr(incremental, "_STATE_MAX_FILES", 0)
    compacted = str(tmp_path / "compacted")
    for b in many:
        merge_scd2(spark, compacted, frame(spark, b), SPEC2)
    state = spark.read.format("delta").load(incremental.state_location(compacted))
    assert state.count() == state.select("id").distinct().count()
    read = lambda p: rows2(spark.read.format("delta").load(p))  # noqa: E731
    assert read(compacted) == read(split) == read(whole)


# ---------------------------------------------------------------- incremental SCD2: target layout
def _files(spark, target):
    """Per data file of the SCD2 target: (path, open versions, closed versions, highest end)."""
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(target)
    return df.groupBy(F.col("_metadata.file_path").alias("path")).agg(
        F.count_if(F.col(END_AT).isNull()).alias("open"), F.count_if(F.col(END_AT).isNotNull()).alias("closed"),
        F.max(F.col(END_AT)["commit_lsn"]).alias("last_end"),
    ).collect()


def _long_history(keys=4, steps=30):
    """Each key updated at every step: many closed versions, one open version per key."""
    return [ev("U", n * keys + k, k, f"n{n}", f"c{n}") for n in range(steps) for k in range(keys)]


def test_incremental_scd2_batch_does_not_read_closed_versions_it_cannot_change(spark, tmp_path, monkeypatch):
    # Closed versions are laid out apart from open ones, sorted by end: a batch whose late event
    # is at 100 must not read the files of versions that ended before 100. Those files are moved
    # away during the run (reading them would fail), then put back to compare the whole table.
    import shutil

    from sqlcdc.gold import delta_io

    monkeypatch.setattr(delta_io, "LAYOUT_FILE_ROWS", 10)
    monkeypatch.setattr(delta_io, "RELAYOUT_SHARE", 1e9)
    target = str(tmp_path / "scd2")
    history = _long_history()
    merge_scd2(spark, target, frame(spark, history), SPEC2)
    files = _files(spark, target)
    assert all(f.open == 0 or f.closed == 0 for f in files)  # no file mixes open and closed versions
    cold = [f.path for f in files if f.open == 0 and f.last_end < seq(100)[0]]
    assert len(cold) >= 3
    batch = [ev("U", 200, 0, "in", "order"), ev("U", 100, 1, "late", "x"), ev("D", 201, 2)]
    aside = tmp_path / "aside"
    aside.mkdir()
    for p in cold:
        shutil.move(p.removeprefix("file:"), aside / p.rsplit("/", 1)[1])
    merge_scd2(spark, target, frame(spark, batch), SPEC2)
    for p in cold:
        shutil.move(aside / p.rsplit("/", 1)[1], p.removeprefix("file:"))
    assert rows2(spark.read.format("delta").load(target)) == rows2(scd2(frame(spark, history + batch), SPEC2))


def test_incremental_scd2_relayout_keeps_the_table_and_separates_open_versions(spark, tmp_path, monkeypatch):
    # MERGE inserts mix open and closed versions in a file; once they reach the share, the target is
    # laid out again (a data-neutral rewrite): same rows, no file mixing open and closed.
    from sqlcdc.gold import delta_io

    monkeypatch.setattr(delta_io, "LAYOUT_FILE_ROWS", 10)
    target = str(tmp_path / "scd2")
    history = _long_history()
    merge_scd2(spark, target, frame(spark, history[:60]), SPEC2)
    monkeypatch.setattr(delta_io, "RELAYOUT_SHARE", 1e9)
    merge_scd2(spark, target, frame(spark, history[60:90]), SPEC2)
    assert any(f.open and f.closed for f in _files(spark, target))  # the MERGE wrote a mixed file
    monkeypatch.setattr(delta_io, "RELAYOUT_SHARE", 0.0)
    merge_scd2(spark, target, frame(spark, history[90:] + [ev("U", 50, 3, "late", "y")]), SPEC2)
    assert all(f.open == 0 or f.closed == 0 for f in _files(spark, target))
    last = spark.sql(f"DESCRIBE HISTORY delta.`{target}` LIMIT 1").first()
    assert last.operation == "WRITE" and last.operationParameters.get("mode") == "Overwrite"
    everything = frame(spark, history + [ev("U", 50, 3, "late", "y")])
    assert rows2(spark.read.format("delta").load(target)) == rows2(scd2(everything, SPEC2))
