"""Producer hand-off: one table's gold fed by several sources, a change two of them carry applied once.

A table config may list ``sources:`` instead of one ``source:`` -- a change-table backfill, then a
Debezium stream; Debezium, then flattened Debezium after a connector change. Config loading turns it
into one :class:`~sqlcdc.config.TableConfig` per source (``<name>__<source>``, each with its own
silver, all with the same gold targets; ``handoff`` names the group, ``handoff_rank`` the place in
the list). Gold reads the silver of every part and applies their changes in LSN order, which all
these producers share (:mod:`sqlcdc.lsn`), so the overlap where two producers both delivered a
stretch of the log is where "the same change" must be recognised.

The same change, across producers, is the same **commit LSN**, the same **change position** -- the
producer's own field for the change's place in the log (the decoder's ``position_field``:
change tables ``__$seqval``, Debezium ``source.change_lsn``, flattened Debezium ``__change_lsn``) --
the same **operation** as gold applies it (upsert or delete) and the same **key**. A change-table
update (operations 3 and 4 at one ``__$seqval``) that changes the key and Debezium's delete and
create at that ``change_lsn`` are then the same two changes (delete of the old key, upsert of the
new). Of the copies of one change, gold applies the one of the source listed first; a copy that
lands after its change was applied (from any source) is not applied again. Producers without a
change position (CES: a per-transaction sequence number; Qlik: its own ``changeSequence``;
change-table *net* changes: one row per key and window) cannot be listed in ``sources:``: config
loading says so. docs/handoff.md has the table per pair of producers.

Example::

    from sqlcdc.gold import handoff
    for table, parts in handoff.groups(cfg.tables):   # (gold's table, its sources' parts)
        ...
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sqlcdc import formats, model
from sqlcdc.config import ConfigError, TableConfig
from sqlcdc.names import quote

__all__ = ["RANK_COL", "first_copies", "gold_table", "groups", "identified", "identity", "merged", "same_shape"]

RANK_COL = "__ac_handoff_rank"  # sqlcdc.names.RESERVED_PREFIX: no data column is so named


def groups(tables: Sequence[TableConfig]) -> list[tuple[TableConfig, list[TableConfig]]]:
    """``(table, parts)`` per gold, in config order: a table of one source is ``(t, [t])``; the parts
    of a hand-off, in their ``sources:`` order, come once, with the :func:`gold_table` that stands for them."""
    grouped: dict[tuple[bool, str], list[TableConfig]] = {}
    for t in tables:
        grouped.setdefault((t.handoff is not None, t.handoff or t.name), []).append(t)
    return [(gold_table(parts), sorted(parts, key=lambda p: p.handoff_rank)) if parts[0].handoff else (parts[0], parts)
            for parts in grouped.values()]


def gold_table(parts: Sequence[TableConfig]) -> TableConfig:
    """The table config gold uses for a hand-off's ``parts``: the first part, named after the group
    (run state ``_sqlcdc/gold/<name>``), with the gold targets the parts share."""
    first = min(parts, key=lambda p: p.handoff_rank)
    return dataclasses.replace(first, name=first.handoff or first.name)


def identified(silver: DataFrame, part: TableConfig) -> DataFrame:
    """``part``'s silver rows with ``change_id`` replaced by the change's place in the log,
    ``lsn:<commit LSN>:<change position>`` (the module doc), before they become the apply frame."""
    position = formats.get(part.source.format).change_position(part)
    return silver.withColumn("change_id", F.concat_ws(":", F.lit("lsn"), F.col("sequence.commit_lsn"), position))


def identity(keys: Sequence[str]) -> Column:
    """Over an apply frame of :func:`identified` silver: the change's identity across producers --
    place in the log, operation, key. (The apply frame marks the delete that ends an update's old key
    ``#old-key``; Debezium writes it as a delete of its own at the same place.)"""
    place = F.regexp_replace(F.col(model.CHANGE_ID_COL), "#old-key$", "")
    return F.concat_ws("|", place, F.col(model.OP_COL), F.to_json(F.struct(*[F.col(quote(k)) for k in keys])))


def merged(silvers: Sequence[tuple[TableConfig, DataFrame]], to_apply: Callable[[DataFrame], DataFrame],
           keys: Sequence[str]) -> DataFrame:
    """The parts' silvers as one apply frame (``to_apply`` makes one silver's), every row's
    ``_change_id`` its :func:`identity` and :data:`RANK_COL` its source's place in ``sources:``;
    copies of a change are all there (:func:`first_copies` keeps one)."""
    frames = [to_apply(identified(silver, part)).withColumn(model.CHANGE_ID_COL, identity(keys))
              .withColumn(RANK_COL, F.lit(part.handoff_rank)) for part, silver in silvers]
    out = frames[0]
    for frame in frames[1:]:
        out = out.union(frame)  # the same select list on every side (see sqlcdc.model.apply_frame)
    return out


def first_copies(frame: DataFrame) -> DataFrame:
    """One row per ``_change_id`` (the :func:`identity`): the copy of the source listed first
    (lowest :data:`RANK_COL`, which is then dropped)."""
    first = Window.partitionBy(model.CHANGE_ID_COL).orderBy(F.col(RANK_COL))
    copy = "__ac_copy"  # sqlcdc.names.RESERVED_PREFIX, as RANK_COL
    return frame.withColumn(copy, F.row_number().over(first)).where(F.col(copy) == 1).drop(copy, RANK_COL)


def same_shape(table: TableConfig, silvers: Sequence[tuple[TableConfig, DataFrame]]) -> None:
    """Raise :class:`ConfigError` when the parts' silver tables type the table's columns differently
    (gold would have to pick one): name the parts and the columns."""
    first_part, first = silvers[0]
    want = [(f.name, f.dataType.simpleString()) for f in first.schema["after"].dataType.fields]
    for part, silver in silvers[1:]:
        have = [(f.name, f.dataType.simpleString()) for f in silver.schema["after"].dataType.fields]
        if have != want:
            raise ConfigError([
                f"{table.file}:1: sources: {first_part.silver_table} and {part.silver_table} type {table.qualified}'s "
                f"columns differently ({', '.join(f'{n} {t}' for n, t in want)} vs {', '.join(f'{n} {t}' for n, t in have)}); "
                "give the table `columns:` so every source types them alike"
            ])
