"""sqlcdc.reshape: when a table's discovered columns change between runs, its views are rebuilt.
The whole path (record at definition time, drop, run again) runs in
tests/test_e2e_pipeline.py::test_ces_and_qlik_two_runs_to_gold; here, the change detection."""

from sqlcdc import reshape


def test_a_new_table_version_column_is_a_change():
    assert reshape.column_change([("ID", "int"), ("NAME", "string")],
                                 [("ID", "int"), ("NAME", "string"), ("TIER", "string")]) == "added TIER"


def test_spelling_of_the_same_type_is_not_a_change():
    assert reshape.column_change([("ID", "int"), ("AMOUNT", "decimal(10,2)")],
                                 [("ID", "INTEGER"), ("AMOUNT", "DECIMAL(10, 2)")]) is None


def test_removed_and_retyped_columns_are_named():
    got = reshape.column_change([("ID", "int"), ("OLD", "string")], [("ID", "bigint")])
    assert got == "removed OLD; retyped ID int->bigint"


def test_marker_round_trip(tmp_path):
    marker = tmp_path / "_sqlcdc" / "reshaped.jsonl"
    assert reshape.recorded(marker) == []
    reshape.record(marker, ["silver_customers", "gold_customers_scd1"], "the columns of dbo.customers changed (added TIER)")
    assert reshape.recorded(marker) == [
        (["silver_customers", "gold_customers_scd1"], "the columns of dbo.customers changed (added TIER)")
    ]
