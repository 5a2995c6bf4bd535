"""Gold's spec: how one table's changes are applied (Databricks AUTO CDC semantics, SCD type 1 and 2),
what its gold tables are called and how they are laid out.

The input is the flat frame of :func:`sqlcdc.model.apply_frame`: data columns at top level plus
``_op`` / ``_sequence`` / ``_provided`` / ``_change_id`` / ``_commit_time``. Configure one
:class:`ApplyChangesSpec` per table, then either recompute from the whole frame::

    from sqlcdc.gold import ApplyChangesSpec, scd1, scd2
    spec = ApplyChangesSpec(keys=["id"], table="customers")
    spec.validate(frame.schema)            # ConfigError naming table and field, before any run
    current = scd1(frame, spec)            # data columns, one row per live key
    history = scd2(frame, spec)            # data columns + __START_AT / __END_AT (NULL = current)

or apply batches of new changes incrementally to Delta tables with :mod:`sqlcdc.gold.incremental`
(``merge_scd1`` / ``merge_scd2``: same tables, cost follows the batch).

On Databricks, the same spec maps onto the native engine::

    dp.create_auto_cdc_flow(**spec.to_auto_cdc_kwargs(target="gold_customers", source="silver_customers"))

Semantics
---------
Per key, events are applied in the order ``(sequence_by, deletes before upserts, _change_id)``,
whatever order they arrive in. That order is total and does not depend on arrival, so any
permutation, any split over runs and any duplicate delivery give the same tables.

* UPSERT: a column in ``_provided`` (NULL = every column) takes the event's value, NULL included;
  a column not provided keeps the value it had (NULL when the key was absent or deleted).
  With ``ignore_null_updates`` a provided NULL also keeps the previous value.
* DELETE removes the key. Anything sequenced before the delete, even if it arrives later, is
  superseded: a late event never resurrects a deleted row, and a deleted row's columns are never
  carried into a later re-insert.
* TRUNCATE (``apply_as_truncates``) deletes every key that has an event sequenced before it.
  Databricks allows truncates in SCD1 only; here SCD2 honours them too by closing every open
  version at the truncate's sequence.
* SCD2: a version opens at the upsert that makes a tracked column differ from the current
  version (or that (re)creates the key) and closes at the next such upsert or at a delete
  (``__END_AT`` = that event's sequence). An upsert that changes only untracked columns updates
  the current version in place. **An identical re-upsert** (no tracked column differs) therefore
  opens no new version: it is an in-place update, a no-op when nothing differs at all. Duplicate
  deliveries are harmless for the same reason.

Everything is Spark column expressions and window functions; no Python UDFs.

This recompute is the reference path: it reads the whole history. :mod:`sqlcdc.gold.incremental`
gives the same tables from per-key state (``benchmarks/bench_apply_changes.py`` compares both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sqlcdc import model
from sqlcdc.config import ConfigError, TableConfig
from sqlcdc.names import column_ref

__all__ = ["ApplyChangesSpec", "END_AT", "START_AT", "TOMBSTONE_PROPERTY", "auto_cdc_table_properties", "layout", "target"]

START_AT, END_AT = "__START_AT", "__END_AT"

def _tuple(value: Iterable[str] | str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@dataclass(frozen=True)
class ApplyChangesSpec:
    """How one table's changes are applied: the options of Databricks AUTO CDC, plus presence.

    :param keys: columns that identify a row. At least one.
    :param sequence_by: column that orders the events (any orderable type; the struct
        ``_sequence`` of :func:`sqlcdc.model.apply_frame` by default). Must be NOT NULL.
    :param apply_as_deletes: SQL boolean expression marking a delete; ``None`` = no deletes.
    :param apply_as_truncates: SQL boolean expression marking a truncate; ``None`` = none.
    :param column_list: data columns to keep in the target (frame order is kept).
    :param except_column_list: data columns to drop from the target. Not with ``column_list``.
    :param stored_as_scd_type: 1 (current state) or 2 (history).
    :param track_history_column_list: SCD2 only: the columns whose change opens a new version.
    :param track_history_except_column_list: SCD2 only: columns whose change does not.
    :param ignore_null_updates: a NULL in an upsert keeps the previous value.
    :param ignore_null_updates_column_list: only these columns keep their value on a NULL.
    :param ignore_null_updates_except_column_list: every column but these keeps its value on a
        NULL. The three ignore-null options are mutually exclusive (as AUTO CDC's).
    :param provided_column: ``array<string>`` column naming the data columns an event carries
        (NULL = all). ``None`` = every event carries every column.
    :param change_id_column: id shared by duplicate deliveries (tie-break of equal sequences).
    :param commit_time_column: source commit time; drives tombstone retention.
    :param table: the table's name, used in error messages.

    Meta columns (``model.APPLY_META_COLUMNS`` and the columns named above) never reach the
    target; every other column of the frame is a data column.

    Example::

        spec = ApplyChangesSpec(keys=["id"], stored_as_scd_type=2,
                                track_history_except_column_list=["last_login"], table="users")
    """

    keys: Sequence[str]
    sequence_by: str = model.SEQ_COL
    apply_as_deletes: str | None = f"{model.OP_COL} = '{model.DELETE}'"
    apply_as_truncates: str | None = f"{model.OP_COL} = '{model.TRUNCATE}'"
    column_list: Sequence[str] | None = None
    except_column_list: Sequence[str] | None = None
    stored_as_scd_type: int = 1
    track_history_column_list: Sequence[str] | None = None
    track_history_except_column_list: Sequence[str] | None = None
    ignore_null_updates: bool = False
    ignore_null_updates_column_list: Sequence[str] | None = None
    ignore_null_updates_except_column_list: Sequence[str] | None = None
    provided_column: str | None = model.PROVIDED_COL
    change_id_column: str | None = model.CHANGE_ID_COL
    commit_time_column: str | None = model.COMMIT_TIME_COL
    table: str = "<table>"

    def __post_init__(self) -> None:
        for f in ("keys", "column_list", "except_column_list", "track_history_column_list",
                  "track_history_except_column_list", "ignore_null_updates_column_list",
                  "ignore_null_updates_except_column_list"):
            object.__setattr__(self, f, _tuple(getattr(self, f)))
        if isinstance(self.stored_as_scd_type, str) and self.stored_as_scd_type.isdigit():
            object.__setattr__(self, "stored_as_scd_type", int(self.stored_as_scd_type))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_table_config(cls, cfg: TableConfig, stored_as_scd_type: int = 1, **overrides: Any) -> "ApplyChangesSpec":
        """The spec for one SCD type of an onboarded table (``config.TableConfig``)."""
        kwargs: dict[str, Any] = dict(
            keys=cfg.keys,
            sequence_by=cfg.sequence_by or model.SEQ_COL,
            column_list=cfg.column_list,
            except_column_list=cfg.except_column_list,
            stored_as_scd_type=stored_as_scd_type,
            track_history_column_list=cfg.track_history_column_list if stored_as_scd_type == 2 else None,
            track_history_except_column_list=(
                cfg.track_history_except_column_list if stored_as_scd_type == 2 else None
            ),
            ignore_null_updates=cfg.ignore_null_updates,
            ignore_null_updates_column_list=cfg.ignore_null_updates_column_list,
            ignore_null_updates_except_column_list=cfg.ignore_null_updates_except_column_list,
            table=cfg.name,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    # ------------------------------------------------------------------ columns
    @property
    def meta_columns(self) -> tuple[str, ...]:
        """Columns of the apply frame that are never data (never reach the target)."""
        extra = [c for c in (self.provided_column, self.change_id_column, self.commit_time_column) if c]
        out = list(model.APPLY_META_COLUMNS)
        out += [c for c in extra if c not in out]
        if self.sequence_by == model.SEQ_COL and model.SEQ_COL not in out:
            out.append(model.SEQ_COL)
        return tuple(out)

    def data_columns(self, schema: StructType) -> list[str]:
        """Every non-meta column of ``schema``, in frame order."""
        meta = set(self.meta_columns)
        return [f.name for f in schema.fields if f.name not in meta]

    def output_columns(self, schema: StructType) -> list[str]:
        """The target's data columns: data columns after ``column_list``/``except_column_list``."""
        cols = self.data_columns(schema)
        if self.column_list is not None:
            keep = set(self.column_list)
            cols = [c for c in cols if c in keep]
        elif self.except_column_list is not None:
            drop = set(self.except_column_list)
            cols = [c for c in cols if c not in drop]
        return cols

    def ignores_null(self, column: str) -> bool:
        """True when an upsert's NULL in ``column`` keeps the previous value (the ignore-null options)."""
        if self.ignore_null_updates_column_list is not None:
            return column in self.ignore_null_updates_column_list
        if self.ignore_null_updates_except_column_list is not None:
            return column not in self.ignore_null_updates_except_column_list
        return bool(self.ignore_null_updates)

    def tracked_columns(self, schema: StructType) -> list[str]:
        """SCD2: the non-key output columns whose change opens a new version."""
        out = [c for c in self.output_columns(schema) if c not in self.keys]
        if self.track_history_column_list is not None:
            keep = set(self.track_history_column_list)
            return [c for c in out if c in keep]
        if self.track_history_except_column_list is not None:
            drop = set(self.track_history_except_column_list)
            return [c for c in out if c not in drop]
        return out

    # ------------------------------------------------------------------ validation
    def problems(self, schema: StructType) -> list[str]:
        """Every config mistake against ``schema``, as ``table: field: message`` strings."""
        t = self.table
        out: list[str] = []
        by_name = {f.name: f for f in schema.fields}
        data = self.data_columns(schema)
        avail = ", ".join(data)

        if not self.keys:
            out.append(f"{t}: keys: at least one key column is required")
        for k in self.keys or ():
            if k not in by_name:
                out.append(f"{t}: keys: unknown column {k!r} (columns: {avail})")
            elif k not in data:
                out.append(f"{t}: keys: {k!r} is a meta column of the apply frame, not a data column")

        if self.sequence_by not in by_name:
            out.append(f"{t}: sequence_by: unknown column {self.sequence_by!r} (columns: {', '.join(by_name)})")
        elif by_name[self.sequence_by].nullable:
            out.append(
                f"{t}: sequence_by: column {self.sequence_by!r} is nullable; the sequence must never be "
                "NULL (build it with sqlcdc.lsn.sequence, or coalesce it to a NOT NULL value)"
            )

        if self.stored_as_scd_type not in (1, 2):
            out.append(f"{t}: stored_as_scd_type: must be 1 or 2, not {self.stored_as_scd_type!r}")
        if self.column_list is not None and self.except_column_list is not None:
            out.append(f"{t}: column_list: give column_list or except_column_list, not both")
        if self.track_history_column_list is not None and self.track_history_except_column_list is not None:
            out.append(
                f"{t}: track_history_column_list: give track_history_column_list or "
                "track_history_except_column_list, not both"
            )
        if self.stored_as_scd_type == 1 and (
            self.track_history_column_list is not None or self.track_history_except_column_list is not None
        ):
            field_name = ("track_history_column_list" if self.track_history_column_list is not None
                          else "track_history_except_column_list")
            out.append(f"{t}: {field_name}: only valid with stored_as_scd_type=2")

        ignore_null = [n for n in ("ignore_null_updates", "ignore_null_updates_column_list",
                                   "ignore_null_updates_except_column_list")
                       if getattr(self, n) not in (None, False)]
        if len(ignore_null) > 1:
            out.append(f"{t}: {ignore_null[1]}: give one of {', '.join(ignore_null)}, not several")
        for name in ("column_list", "except_column_list", "ignore_null_updates_column_list",
                     "ignore_null_updates_except_column_list"):
            for c in getattr(self, name) or ():
                if c not in data:
                    out.append(f"{t}: {name}: unknown column {c!r} (data columns: {avail})")
        if self.column_list is not None:
            for k in self.keys or ():
                if k in data and k not in self.column_list:
                    out.append(f"{t}: column_list: must include key column {k!r}")
        if self.except_column_list is not None:
            for k in self.keys or ():
                if k in self.except_column_list:
                    out.append(f"{t}: except_column_list: cannot exclude key column {k!r}")
        if self.column_list is None or self.except_column_list is None:
            outcols = set(self.output_columns(schema))
            for name in ("track_history_column_list", "track_history_except_column_list"):
                for c in getattr(self, name) or ():
                    if c not in outcols:
                        out.append(f"{t}: {name}: unknown column {c!r} (target columns: {', '.join(sorted(outcols))})")

        if self.provided_column is not None:
            f = by_name.get(self.provided_column)
            if f is None:
                out.append(
                    f"{t}: provided_column: unknown column {self.provided_column!r}; "
                    "set provided_column=None when every event carries every column"
                )
            elif f.dataType.simpleString() != "array<string>":
                out.append(f"{t}: provided_column: {self.provided_column!r} must be array<string>, "
                           f"not {f.dataType.simpleString()}")
        for name in ("change_id_column", "commit_time_column"):
            c = getattr(self, name)
            if c is not None and c not in by_name and c not in model.APPLY_META_COLUMNS:
                out.append(f"{t}: {name}: unknown column {c!r}")
        return out

    def validate(self, schema: StructType) -> None:
        """Refuse config mistakes before a run: raise :class:`ConfigError` listing every one.

        Example::

            >>> ApplyChangesSpec(keys=["idd"], table="orders").validate(frame.schema)  # doctest: +SKIP
            ConfigError: 1 config problem(s):
              - orders: keys: unknown column 'idd' (columns: id, name)
        """
        problems = self.problems(schema)
        if problems:
            raise ConfigError(problems)

    # ------------------------------------------------------------------ Databricks
    def to_auto_cdc_kwargs(self, target: str, source: str) -> dict[str, Any]:
        """Keyword arguments for Databricks ``dp.create_auto_cdc_flow`` with the same options.

        The meta columns of the apply frame are put in ``except_column_list`` (or left out of
        ``column_list``) so the native target has the same columns as the local one.

        Presence maps onto ``columns_to_update`` (AUTO CDC's Python parameter; SQL ``COLUMNS TO
        UPDATE columnName``): a source column naming, per row, the columns an update sets; the
        others keep the target's value. ``source`` must then be :meth:`auto_cdc_source`'s frame,
        which names them on every row (the apply frame's NULL, "every column", is spelled out, so
        nothing rests on how the platform reads a NULL list).

        ``keys`` and the column lists are read there as ``col(name)``, which takes ``unit.price`` for a
        field of a struct: such names are backtick-quoted (:func:`sqlcdc.names.column_ref`).

        Example::

            dp.create_auto_cdc_flow(**spec.to_auto_cdc_kwargs("gold_orders", "changes_orders"))
        """
        def refs(names: Iterable[str]) -> list[str]:  # parsed as column names there: `unit.price`
            return [column_ref(n) for n in names]

        kwargs: dict[str, Any] = {
            "target": target,
            "source": source,
            "keys": refs(self.keys),
            "sequence_by": self.sequence_by,
            "stored_as_scd_type": int(self.stored_as_scd_type),
        }
        if self.ignore_null_updates_column_list is not None:
            kwargs["ignore_null_updates_column_list"] = refs(self.ignore_null_updates_column_list)
        elif self.ignore_null_updates_except_column_list is not None:
            kwargs["ignore_null_updates_except_column_list"] = refs(self.ignore_null_updates_except_column_list)
        else:
            kwargs["ignore_null_updates"] = bool(self.ignore_null_updates)
        if self.apply_as_deletes is not None:
            kwargs["apply_as_deletes"] = self.apply_as_deletes
        if self.apply_as_truncates is not None and self.stored_as_scd_type == 1:
            # Databricks accepts truncates on SCD1 targets only.
            kwargs["apply_as_truncates"] = self.apply_as_truncates
        meta = list(self.meta_columns)
        if self.column_list is not None:
            kwargs["column_list"] = refs(c for c in self.column_list if c not in meta)
        else:
            excl = list(self.except_column_list or ())
            kwargs["except_column_list"] = refs(excl + [c for c in meta if c not in excl])
        if self.provided_column:
            kwargs["columns_to_update"] = column_ref(self.provided_column)
        if self.stored_as_scd_type == 2:
            if self.track_history_column_list is not None:
                kwargs["track_history_column_list"] = refs(self.track_history_column_list)
            if self.track_history_except_column_list is not None:
                kwargs["track_history_except_column_list"] = refs(self.track_history_except_column_list)
        return kwargs

    def auto_cdc_source(self, frame: DataFrame, schema: StructType | None = None) -> DataFrame:
        """``frame`` (an apply frame) as AUTO CDC reads it under :meth:`to_auto_cdc_kwargs`: the
        presence column names, on every row, the target columns the row sets -- its own list
        (limited to the target's columns), or every target column where the list is NULL.
        ``schema``: ``frame``'s, when it may not be analysed (inside a pipeline query function).

        Example::

            >>> spec = ApplyChangesSpec(keys=["id"], table="t")
            >>> spec.auto_cdc_source(frame).select("id", "_provided")   # doctest: +SKIP
            [Row(id=1, _provided=['id', 'name', 'city']), Row(id=1, _provided=['id', 'city'])]
        """
        if not self.provided_column:
            return frame
        target = F.array(*[F.lit(c) for c in self.output_columns(schema or frame.schema)])
        every = F.coalesce(F.col(self.provided_column), target)
        return frame.withColumn(self.provided_column, F.array_intersect(target, every))


# ====================================================================== gold tables of a table config


def target(table: TableConfig, scd_type: int) -> str:
    """The name of ``table``'s gold table of SCD type ``scd_type`` (``scd1_table`` / ``scd2_table``
    of its config: ``gold_<table>_scd1`` unless renamed)."""
    return table.scd1_table if scd_type == 1 else table.scd2_table


def layout(table: TableConfig) -> dict[str, list[str]]:
    """``partition_cols`` / ``cluster_by`` of ``table``'s gold tables, as keyword arguments of the
    SDP table declaration. They name data columns, which only gold has at the top level (silver
    keeps them inside ``before`` / ``after``).

    Example::

        >>> layout(replace(cfg, cluster_by=("customer_id",)))  # doctest: +SKIP
        {'cluster_by': ['customer_id']}
    """
    if table.partition_cols:
        return {"partition_cols": list(table.partition_cols)}
    if table.cluster_by:
        return {"cluster_by": list(table.cluster_by)}
    return {}


TOMBSTONE_PROPERTY = "pipelines.cdc.tombstoneGCThresholdInSeconds"


def auto_cdc_table_properties(table: TableConfig, scd_type: int) -> dict[str, str]:
    """Table properties of an AUTO CDC target on Databricks: the table's own, plus the tombstone
    retention (``tombstone_retention_days``) of an SCD1 target, which AUTO CDC reads from
    ``pipelines.cdc.tombstoneGCThresholdInSeconds``.

    Example::

        >>> auto_cdc_table_properties(replace(cfg, tombstone_retention_days=2), 1)  # doctest: +SKIP
        {'pipelines.cdc.tombstoneGCThresholdInSeconds': '172800'}
    """
    props = dict(table.table_properties)
    if scd_type == 1 and table.tombstone_retention_days is not None:
        props[TOMBSTONE_PROPERTY] = str(int(table.tombstone_retention_days * 86400))
    return props
