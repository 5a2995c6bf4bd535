"""Gold is read outside Spark too: pandas and Polars read Delta through delta-rs (``deltalake``).

Gold is built by the real incremental engine in two batches (an initial load, then a batch with an
update, a delete, a late event and a new key), then read with ``deltalake.DeltaTable(path)
.to_pandas()`` as a pandas user would, and compared with Spark's read of the same path and with
tables written out by hand. Deletion vectors (which delta-rs cannot read) are opt-in
(``deletion_vectors: true``); a test checks that the option really gives them.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import deltalake
import pytest

from sqlcdc import gold
from sqlcdc.gold import END_AT, START_AT
from sqlcdc.config import ConfigError, load_pipeline
from sqlcdc.gold import merge_scd1, merge_scd2
from test_apply_changes import SPEC1, SPEC2, ev, frame
from test_debezium_gold import EXPECTED_SCD2, HISTORY, TABLE
from test_gold import land
from test_gold import scd2 as gold_scd2_rows

INITIAL = [
    ev("U", 1, 1, "ann", "oslo"),
    ev("U", 2, 2, "bob", "rome"),
    ev("U", 3, 3, "cid", "paris"),
    ev("U", 5, 4, "dan", None),       # a NULL value; no later event touches key 4
    ev("U", 6, 1, "ann", "bergen"),
]
INCREMENT = [
    ev("U", 10, 2, "bob", "milan"),   # an update
    ev("D", 11, 3),                   # a delete
    ev("U", 4, 1, "ann", "tromso"),   # a late event: between key 1's versions at 1 and 6
    ev("U", 12, 5, "eve", "lima"),    # a new key
]
# By hand: (id, name, city) for SCD1; SCD2 adds the start and end sequence numbers (None: open).
EXPECTED1 = [(1, "ann", "bergen"), (2, "bob", "milan"), (4, "dan", None), (5, "eve", "lima")]
EXPECTED2 = [
    (1, "ann", "oslo", 1, 4), (1, "ann", "tromso", 4, 6), (1, "ann", "bergen", 6, None),
    (2, "bob", "rome", 2, 10), (2, "bob", "milan", 10, None),
    (3, "cid", "paris", 3, 11),
    (4, "dan", None, 5, None),
    (5, "eve", "lima", 12, None),
]


def _build(spark, root: Path, deletion_vectors: bool = False) -> tuple[str, str]:
    """SCD1 and SCD2 gold from INITIAL, then INCREMENT, through the incremental engine."""
    t1, t2 = str(root / "gold_scd1"), str(root / "gold_scd2")
    modes = []
    for batch in (INITIAL, INCREMENT):
        df = frame(spark, batch)
        modes.append((merge_scd1(spark, t1, df, SPEC1),
                      merge_scd2(spark, t2, df, SPEC2, deletion_vectors=deletion_vectors)))
    assert modes == [("initial", "initial"), ("merge", "merge")]
    return t1, t2


def _plain(v):
    """A value as plain Python: numpy scalars unwrapped, NaN as None, structs as dicts."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if hasattr(v, "item") and not isinstance(v, (list, tuple)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _key(row: dict):
    return json.dumps(row, sort_keys=True, default=str)


def _by_delta_rs(path: str) -> list[dict]:
    df = deltalake.DeltaTable(path).to_pandas()
    return sorted(({c: _plain(v) for c, v in rec.items()} for rec in df.to_dict("records")), key=_key)


def _by_spark(spark, path: str) -> list[dict]:
    rows = spark.read.format("delta").load(path).collect()
    return sorted((r.asDict(recursive=True) for r in rows), key=_key)


def _seq_no(s: dict | None) -> int | None:
    """A sequence struct back to the integer it was made from (test_apply_changes.seq)."""
    return None if s is None else int(s["commit_lsn"], 16)


def _protocol(path: str) -> tuple[int, set[str]]:
    """(minReaderVersion, reader features) of the Delta table at ``path``, from its _delta_log."""
    protocol = None
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "protocol" in action:
                protocol = action["protocol"]
    return protocol["minReaderVersion"], set(protocol.get("readerFeatures") or ())


def _deletion_vector_adds(path: str) -> int:
    """How many files the table's commits added with a deletion vector (rows marked deleted)."""
    n = 0
    for commit in Path(path, "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            n += bool(add and add.get("deletionVector"))
    return n


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> Path:
    """The folder of one :func:`_build` (no deletion vectors), shared by the tests that only read it:
    two SCD1 and two SCD2 applies cost ~15 s."""
    root = tmp_path_factory.mktemp("gold")
    _build(spark, root)
    return root


def test_delta_rs_reads_scd1_and_scd2_gold_as_spark_does(spark, built):
    t1, t2 = str(built / "gold_scd1"), str(built / "gold_scd2")

    rs1, sp1 = _by_delta_rs(t1), _by_spark(spark, t1)
    assert rs1 == sp1
    assert sorted((r["id"], r["name"], r["city"]) for r in rs1) == EXPECTED1

    rs2, sp2 = _by_delta_rs(t2), _by_spark(spark, t2)
    assert rs2 == sp2  # every column, the sequence structs field by field
    assert sorted(((r["id"], r["name"], r["city"], _seq_no(r[START_AT]), _seq_no(r[END_AT])) for r in rs2),
                  key=lambda t: (t[0], t[3])) == EXPECTED2
    assert list(deltalake.DeltaTable(t2).to_pandas().columns) == ["id", "name", "city", START_AT, END_AT]


def test_no_gold_table_or_side_table_has_a_reader_feature_delta_rs_lacks(spark, built):
    tables = sorted(p for p in built.iterdir() if (p / "_delta_log").is_dir())
    # The targets and the engine's side tables beside them (key states, the SCD2 change log).
    assert [p.name for p in tables] == ["gold_scd1", "gold_scd1__state", "gold_scd2", "gold_scd2__changes",
                                        "gold_scd2__state"]
    for p in tables:
        assert _protocol(str(p)) == (1, set()), p.name
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{p}`").first()
        assert detail.minReaderVersion == 1 and "deletionVectors" not in detail.tableFeatures, p.name
        assert len(deltalake.DeltaTable(str(p)).to_pandas()) == spark.read.format("delta").load(str(p)).count()
    # The SCD2 change log holds every change applied, as delta-rs reads it too.
    assert len(deltalake.DeltaTable(str(built / "gold_scd2__changes")).to_pandas()) == len(INITIAL + INCREMENT)
    assert _deletion_vector_adds(str(built / "gold_scd2")) == 0


def test_deletion_vectors_true_gives_scd2_gold_deletion_vectors(spark, tmp_path):
    _, t2 = _build(spark, tmp_path, deletion_vectors=True)
    assert _protocol(t2) == (3, {"deletionVectors"})
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{t2}`").first()
    assert detail.properties.get("delta.enableDeletionVectors") == "true"
    # The second batch's MERGE marked replaced rows instead of rewriting their files (key 4's open
    # version shares a file with versions the batch replaces).
    assert _deletion_vector_adds(t2) > 0
    rows = [(r["id"], r["name"], r["city"], _seq_no(r[START_AT]), _seq_no(r[END_AT])) for r in _by_spark(spark, t2)]
    assert sorted(rows, key=lambda t: (t[0], t[3])) == EXPECTED2
    with pytest.raises(Exception, match="deletionVectors"):
        deltalake.DeltaTable(t2).to_pandas()
    # Only the SCD2 target: its side tables stay readable.
    assert _protocol(t2 + "__state") == (1, set())
    assert _protocol(t2 + "__changes") == (1, set())


def test_sqlcdc_gold_follows_the_table_config_and_rebuilds_when_it_changes(spark, tmp_path):
    wh = tmp_path / "wh"
    scd2 = str(wh / "tables" / "gold_customers_scd2")
    land(spark, wh, HISTORY[:4])
    gold.apply_table(spark, TABLE, wh)
    assert _protocol(scd2) == (1, set())
    assert len(deltalake.DeltaTable(scd2).to_pandas()) == 4  # id 1: three versions; id 2: one

    # Asking for deletion vectors rebuilds the SCD2 table with them (a protocol is not narrowed in place).
    land(spark, wh, HISTORY[4:])
    on = gold.apply_table(spark, replace(TABLE, deletion_vectors=True), wh)
    assert on.rebuilt == "deletion_vectors is true and gold_customers_scd2 has no deletion vectors"
    assert _protocol(scd2) == (3, {"deletionVectors"})
    assert gold_scd2_rows(spark, wh) == EXPECTED_SCD2

    # Back to the default: rebuilt without them, and delta-rs reads it again.
    off = gold.apply_table(spark, TABLE, wh)
    assert off.rebuilt == "gold_customers_scd2 has deletion vectors (delta-rs cannot read it) and deletion_vectors is false"
    assert _protocol(scd2) == (1, set())
    assert gold_scd2_rows(spark, wh) == EXPECTED_SCD2
    rs = deltalake.DeltaTable(scd2).to_pandas()
    assert sorted((int(r["id"]), r["last_name"]) for _, r in rs.iterrows()) == [
        (1, "a1"), (1, "a2"), (1, "a3"), (2, "b"), (3, "b"), (4, "c")]

    again = gold.apply_table(spark, TABLE, wh)  # nothing new, nothing to rebuild
    assert again.rebuilt is None and again.changes == 0


def test_deletion_vectors_is_read_from_the_table_config_and_needs_scd2(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "pipeline.yml").write_text("name: p\nsources:\n  inv:\n    format: debezium\n    landing: x\n")
    table = tmp_path / "tables" / "c.yml"
    table.write_text("source: inv\ntable: dbo.customers\nkeys: [id]\n")
    assert load_pipeline(str(tmp_path / "pipeline.yml")).table("customers").deletion_vectors is False
    table.write_text("source: inv\ntable: dbo.customers\nkeys: [id]\ndeletion_vectors: true\n")
    assert load_pipeline(str(tmp_path / "pipeline.yml")).table("customers").deletion_vectors is True
    table.write_text("source: inv\ntable: dbo.customers\nkeys: [id]\nscd_types: [1]\ndeletion_vectors: true\n")
    with pytest.raises(ConfigError, match="deletion_vectors: applies to SCD type 2 only"):
        load_pipeline(str(tmp_path / "pipeline.yml"))
    table.write_text("source: inv\ntable: dbo.customers\nkeys: [id]\ndeletion_vectors: sometimes\n")
    with pytest.raises(ConfigError, match="deletion_vectors"):
        load_pipeline(str(tmp_path / "pipeline.yml"))
