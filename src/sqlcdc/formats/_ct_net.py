"""Exports of ``cdc.fn_cdc_get_net_changes_<ci>`` -> canonical changes (option ``function: net_changes``).

Private to :mod:`sqlcdc.formats.cdc_ct` (its docstring, "Decoding", has the summary).

A net-changes row is the *final* state of one source row after an LSN window: ``__$start_lsn`` is
the commit LSN of the row's last change in the window, ``__$operation`` 1 (delete), 2 (insert), 4
(update; ``all with mask`` flags the columns any change in the window touched) or 5 (``all with
merge``: insert or update), and there is no ``__$seqval`` (one row per key per window needs none).
Its identity is therefore ``(__$start_lsn, key)``: two overlapping windows that both end past a
row's last change return it twice, possibly once as an insert (2) and once as an update (4) or an
upsert (5) — the same change, one copy kept, the others duplicates. Rows at one identity whose
values differ, or where one deletes and another does not, are a conflict: all quarantined.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sqlcdc import lsn, model
from sqlcdc.config import TableConfig
from sqlcdc.formats import Decoded
from sqlcdc.formats._ct_names import NAME, START_LSN, table_capture_instance
from sqlcdc.formats._ct_values import _copies, changed_from_mask, lob_provided, quarantine_columns, table_option
from sqlcdc.values import VALUE_WARNINGS_COL, ColumnSpec

OP_DELETE, OP_INSERT, OP_UPDATE, OP_UPSERT = 1, 2, 4, 5  # __$operation (all with merge: 5 = insert or update)


def _identified(rows: DataFrame, keys: list[str], apart: tuple[str, ...] = ()) -> DataFrame:
    """:func:`sqlcdc.formats._ct_values._copies` of net-changes rows, identity ``(start_lsn, key)``;
    ``apart``: columns whose values split the rows into groups compared only among themselves."""
    rows = rows.select("*", F.to_json(F.struct(*[F.col("_img")[k].alias(k) for k in keys])).alias("_key_json"))
    # an insert, an update and an upsert of the same final image are the same change (windows that
    # start on either side of the row's insert); the update mask covers the window, so it may differ
    content = F.to_json(F.struct((F.col("_op") == OP_DELETE).alias("d"), F.col("_img").alias("i")))
    return _copies(rows, [*apart, "_start", "_key_json"], content)


def decode(parsed: DataFrame, table: TableConfig, columns: list[ColumnSpec]) -> Decoded:
    """Parsed net-changes rows (``_parsed(..., net=True)``) -> canonical changes + quarantine.

    One frame (:meth:`~sqlcdc.formats.Decoded.split`), each landed row read once: unreadable
    (``_ok`` false, kept apart from the readable rows in the copy windows), in conflict (its first
    copy quarantined), a change (the kept copy), or left out (another copy: a duplicate)."""
    keys = list(table.keys)
    ok = F.col("_ok")
    checked = _identified(parsed.select("*", (F.size("_reasons") == 0).alias("_ok")), keys, apart=("_ok",))
    why = (
        F.when(~ok, F.array_join(F.col("_reasons"), "; "))
        .when(F.col("_conflict") & (F.col("_copy") == 1), F.format_string(
            f"conflicting net-change rows at {START_LSN} 0x%s for key %s: %d different rows landed for one "
            "row's final state (in %s); none of them is applied",
            F.col("_start"), F.col("_key_json"), F.col("_variants"), F.array_join(F.col("_files"), ", ")))
    )
    rows = checked.select("*", (ok & ~F.col("_conflict") & (F.col("_dup") == 1)).alias("_chg"), why.alias("_why"))
    rows = rows.where(F.col("_chg") | F.col("_why").isNotNull())

    chg = F.col("_chg")
    # the change columns read change rows only (NULL elsewhere: nothing there can raise)
    op, mask, image = F.when(chg, F.col("_op")), F.when(chg, F.col("_mask")), F.when(chg, F.col("_img"))
    is_update = op.isin(OP_UPDATE, OP_UPSERT)
    every = F.array(*[F.lit(c.name) for c in columns])
    change = model.change_row(
        change_id=F.concat_ws(":", F.lit(NAME), F.lit(table_capture_instance(table)), F.col("_start"),
                              F.lit("net"), F.col("_key_json")),
        source_format=NAME,
        table_name=table.name,
        op=F.when(op == OP_DELETE, F.lit(model.DELETE)).when(op == OP_INSERT, F.lit(model.INSERT))
        .otherwise(F.lit(model.UPDATE)),
        key=F.struct(*[image[k].alias(k) for k in keys]),
        before=F.when(op == OP_DELETE, image),
        after=F.when(op != OP_DELETE, image),
        # the state after the commit: after every change of it (a change's own LSN is below its
        # commit LSN), so a row of the same commit from another producer never sorts after it
        sequence=lsn.sequence(F.col("_start"), F.col("_start"), F.lit(1)),
        source_server=table_option(table, "server"),
        source_database=table_option(table, "database"),
        source_schema=F.lit(table.schema),
        source_table=F.lit(table.table),
        provided_columns=lob_provided(columns, is_update, image, mask),
        changed_columns=F.when(is_update, changed_from_mask(mask, columns)).otherwise(every),
        commit_time=F.col("_commit_time"),
        transaction_id=F.col("_start"),
        bronze_record_id=F.col("record_id"),
        value_warnings=F.col(VALUE_WARNINGS_COL) if table.bad_values == "warn" else None,
    )
    return Decoded.split(rows, chg, change, quarantine_columns(table, F.col("_why")))


def duplicates(parsed: DataFrame, table: TableConfig) -> DataFrame:
    """``record_id, kept_record_id`` of net-changes rows that repeat a row already taken."""
    checked = _identified(parsed.where(F.size("_reasons") == 0), list(table.keys))
    return checked.where(~F.col("_conflict") & (F.col("record_id") != F.col("_kept"))).select(
        "record_id", F.col("_kept").alias("kept_record_id"))

