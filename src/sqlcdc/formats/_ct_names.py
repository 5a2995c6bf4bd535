"""Names in SQL Server change-table exports: the metadata columns of a ``cdc.<capture_instance>_CT``
row, and the capture instance a landed file belongs to, told by its path.

Private to :mod:`sqlcdc.formats.cdc_ct` (which re-exports every name here) and its other ``_ct_*``
modules; see its docstring, "What lands".
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from pyspark.sql import Column
from pyspark.sql import functions as F

from sqlcdc.config import TableConfig
from sqlcdc.formats.base import landed_folder

__all__ = [
    "COMMAND_ID",
    "COMMIT_TIME_COLUMN",
    "END_LSN",
    "META_COLUMNS",
    "NAME",
    "OPERATION",
    "ROW_FILTERS",
    "SEQVAL",
    "START_LSN",
    "UPDATE_MASK",
    "capture_instance_col",
    "capture_instance_of",
    "changes_function",
    "row_filter",
    "table_capture_instance",
]

NAME = "cdc_ct"  # the format
START_LSN, END_LSN, SEQVAL = "__$start_lsn", "__$end_lsn", "__$seqval"
OPERATION, UPDATE_MASK, COMMAND_ID = "__$operation", "__$update_mask", "__$command_id"
META_COLUMNS = (START_LSN, END_LSN, SEQVAL, OPERATION, UPDATE_MASK, COMMAND_ID)
#: The columns an export must have to be read as change-table rows.
REQUIRED_COLUMNS = (START_LSN, OPERATION)
COMMIT_TIME_COLUMN = "tran_end_time"

# Capture instance from a file path (see the cdc_ct module docstring). Same patterns in Python and Spark.
_CI_FROM_NAME = r"^(?:cdc\.)?(.+)_CT(?:[._-].*)?$"
_CI_FROM_FOLDER = r"^(?:cdc\.)?(.+?)(?:_CT)?$"


# --- capture instance of a landed file -----------------------------------------------------------


def capture_instance_of(path: str) -> str:
    """The capture instance a landed file belongs to, from its path ('' when none can be told).

    >>> capture_instance_of("file:///landing/cdc.dbo_orders_CT.csv")
    'dbo_orders'
    >>> capture_instance_of("/landing/dbo_orders_CT_0001.parquet")
    'dbo_orders'
    >>> capture_instance_of("/landing/sales_Order%20Lines/part-0.json")
    'sales_Order Lines'
    """
    parts = [unquote(p) for p in path.rstrip("/").split("/")]
    m = re.match(_CI_FROM_NAME, parts[-1])
    if m:
        return m.group(1)
    if len(parts) >= 2:
        m = re.match(_CI_FROM_NAME, parts[-2]) or re.match(_CI_FROM_FOLDER, parts[-2])
        if m:
            return m.group(1)
    return ""


def capture_instance_col(path: Column) -> Column:
    """Spark version of :func:`capture_instance_of`."""
    name = F.url_decode(F.regexp_extract(path, r"([^/]+)/*$", 1))
    folder = landed_folder(path)
    from_name = F.regexp_extract(name, _CI_FROM_NAME, 1)
    folder_ct = F.regexp_extract(folder, _CI_FROM_NAME, 1)
    from_folder = F.regexp_extract(folder, _CI_FROM_FOLDER, 1)
    return F.when(from_name != "", from_name).when(folder_ct != "", folder_ct).otherwise(from_folder)


def table_capture_instance(table: TableConfig) -> str:
    """``options.capture_instance``, default ``<schema>_<table>``."""
    return str(table.options.get("capture_instance") or f"{table.schema}_{table.table}")


def row_filter(table: TableConfig) -> str:
    """The ``@row_filter_option`` the exports were made with (option ``row_filter``, table or source):
    ``all update old`` (the default of all changes; the change table itself has both images),
    ``all``, or net changes' ``all with mask`` / ``all with merge``."""
    default = "all" if changes_function(table) == "net_changes" else "all update old"
    return str(table.options.get("row_filter", table.source.options.get("row_filter", default)))


def changes_function(table: TableConfig) -> str:
    """What the exports are (option ``function``, table or source): ``all_changes`` (the change table
    or ``fn_cdc_get_all_changes_<ci>``, the default) or ``net_changes`` (``fn_cdc_get_net_changes_<ci>``)."""
    return str(table.options.get("function", table.source.options.get("function", "all_changes")))


#: The row filters each query function takes (SQL Server refuses the others).
ROW_FILTERS = {"all_changes": ("all update old", "all"), "net_changes": ("all", "all with mask", "all with merge")}
