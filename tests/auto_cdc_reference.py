"""A plain-Python reference of Databricks AUTO CDC, driven by the keyword arguments sqlcdc passes to
``dp.create_auto_cdc_flow`` (:meth:`sqlcdc.gold.ApplyChangesSpec.to_auto_cdc_kwargs`).

It knows nothing of sqlcdc's engine: it reads the kwargs and the rows of the flow's source (the
view :meth:`~sqlcdc.gold.ApplyChangesSpec.auto_cdc_source` gives), and applies them as the AUTO CDC
reference documents them:

* rows are applied in ``sequence_by`` order, whatever order they arrive in;
* ``apply_as_deletes``: the key is removed (SCD1), its current version closed at the delete's
  sequence (SCD2); ``apply_as_truncates`` (SCD1 only) empties the table;
* an upsert sets the columns its row names in the ``columns_to_update`` column (every target column
  without that option); the others keep the target's value, NULL for a key not in the target;
* ``ignore_null_updates`` / ``ignore_null_updates_column_list`` / ``_except_column_list``: a NULL in
  such a column keeps the target's value;
* the target's columns are the source's minus ``except_column_list`` (or ``column_list``);
* SCD2: ``__START_AT``/``__END_AT`` hold ``sequence_by`` values; an upsert that changes a tracked
  column (``track_history_*``, default every non-key column) closes the current version and opens
  a new one, one that changes only untracked columns updates the current version in place.

``columns_to_update`` is in the reference's parameter list (Python) and syntax (SQL ``COLUMNS TO
UPDATE columnName``); its meaning here -- a column naming, per row, the columns an update sets --
is the one recorded in the project's DESIGN.md. Two rows of one key at the same sequence are
undefined in AUTO CDC: this reference refuses them rather than pick.

Column names in ``keys`` and the column lists are read as ``col(name)`` reads them: a backtick-quoted
name is one column (```unit.price```), an unquoted one with a dot is a struct's field, which no
source here has (refused, as the platform would fail to resolve it).

The delete and truncate conditions are SQL; the caller evaluates them (with Spark) into the boolean
fields ``__delete`` and ``__truncate`` of each row, so this module parses no SQL.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

START_AT, END_AT = "__START_AT", "__END_AT"
DELETE, TRUNCATE = "__delete", "__truncate"


_NAME_LISTS = ("keys", "column_list", "except_column_list", "ignore_null_updates_column_list",
               "ignore_null_updates_except_column_list", "track_history_column_list",
               "track_history_except_column_list")


def _column(ref: str) -> str:
    """The column ``col(ref)`` names: ```a``b``` is a`b; ``a.b`` would be field b of a struct a."""
    if len(ref) > 1 and ref[0] == ref[-1] == "`":
        return ref[1:-1].replace("``", "`")
    if "." in ref or "`" in ref:
        raise ValueError(f"{ref!r}: col() reads it as a nested field, not as one column")
    return ref


def _named(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    for k in _NAME_LISTS:
        if out.get(k) is not None:
            out[k] = [_column(r) for r in out[k]]
    if out.get("columns_to_update"):
        out["columns_to_update"] = _column(out["columns_to_update"])
    return out


def target_columns(kwargs: Mapping[str, Any], source_columns: Iterable[str]) -> list[str]:
    return _target_columns(_named(kwargs), source_columns)


def _target_columns(kwargs: Mapping[str, Any], source_columns: Iterable[str]) -> list[str]:
    cols = [c for c in source_columns if c not in (DELETE, TRUNCATE)]
    if kwargs.get("column_list") is not None:
        return [c for c in cols if c in kwargs["column_list"]]
    return [c for c in cols if c not in (kwargs.get("except_column_list") or [])]


def _ignores_null(kwargs: Mapping[str, Any], column: str) -> bool:
    if kwargs.get("ignore_null_updates_column_list") is not None:
        return column in kwargs["ignore_null_updates_column_list"]
    if kwargs.get("ignore_null_updates_except_column_list") is not None:
        return column not in kwargs["ignore_null_updates_except_column_list"]
    return bool(kwargs.get("ignore_null_updates"))


def _tracked(kwargs: Mapping[str, Any], columns: list[str]) -> list[str]:
    out = [c for c in columns if c not in kwargs["keys"]]
    if kwargs.get("track_history_column_list") is not None:
        return [c for c in out if c in kwargs["track_history_column_list"]]
    if kwargs.get("track_history_except_column_list") is not None:
        return [c for c in out if c not in kwargs["track_history_except_column_list"]]
    return out


def apply(kwargs: Mapping[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The target table's rows after applying ``rows`` (dicts of the source's columns plus
    ``__delete``/``__truncate``) under ``kwargs``: SCD1 rows, or SCD2 versions with
    ``__START_AT``/``__END_AT``."""
    if not rows:
        return []
    kwargs = _named(kwargs)
    columns = _target_columns(kwargs, rows[0].keys())
    keys, seq_col, scd = list(kwargs["keys"]), kwargs["sequence_by"], int(kwargs["stored_as_scd_type"])
    update_col = kwargs.get("columns_to_update")
    tracked = _tracked(kwargs, columns)

    seen: dict[tuple, Any] = {}
    for r in rows:
        if not r.get(TRUNCATE):
            at = (tuple(r[k] for k in keys), r[seq_col])
            if at in seen:
                raise ValueError(f"two rows of key {at[0]} at sequence {at[1]}: undefined in AUTO CDC")
            seen[at] = r
    current: dict[tuple, dict[str, Any]] = {}  # SCD1 row, or SCD2 open version, by key
    closed: list[dict[str, Any]] = []
    for r in sorted(rows, key=lambda r: r[seq_col]):
        seq = r[seq_col]
        if r.get(TRUNCATE):
            if scd == 2:
                raise ValueError("apply_as_truncates is SCD1-only in AUTO CDC")
            current.clear()
            continue
        key = tuple(r[k] for k in keys)
        old = current.get(key)
        if r.get(DELETE):
            if old is not None:
                del current[key]
                if scd == 2:
                    closed.append({**old, END_AT: seq})
            continue
        sets = set(columns) if update_col is None or r[update_col] is None else set(r[update_col])
        new = {c: (old[c] if old is not None else None) for c in columns}
        for c in columns:
            if c in keys:
                new[c] = r[c]
            elif c in sets and not (r[c] is None and old is not None and _ignores_null(kwargs, c)):
                new[c] = r[c]
        if scd == 1:
            current[key] = new
        elif old is None:
            current[key] = {**new, START_AT: seq, END_AT: None}
        elif any(new[c] != old[c] for c in tracked):
            closed.append({**old, END_AT: seq})
            current[key] = {**new, START_AT: seq, END_AT: None}
        else:
            current[key] = {**new, START_AT: old[START_AT], END_AT: None}
    return list(current.values()) + closed
