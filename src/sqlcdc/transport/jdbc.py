"""Pull SQL Server change data over JDBC in LSN windows and land it for the ``cdc_ct`` decoder.

Each pull reads ``cdc.fn_cdc_get_all_changes_<ci>(@from, @to, N'all update old')`` for one closed
LSN window, as the change-data documentation prescribes:

- the first window starts at ``sys.fn_cdc_get_min_lsn('<ci>')`` (the low end of the capture
  instance's validity interval);
- every later window starts at ``sys.fn_cdc_increment_lsn(<upper bound of the previous window>)``
  (both bounds are inclusive, so this neither repeats nor skips a change);
- the upper bound is ``sys.fn_cdc_get_max_lsn()``.

The position (the last window's upper bound) is kept in a small JSON state file, written
atomically and only **after** the window's rows have been landed: a crash between the two
re-reads that window on the next run, and the decoder drops the duplicate rows (at least once
in, exactly once in silver).

Before querying, the reader checks the window against the validity interval. When cleanup has
moved the low end past the saved position (``increment_lsn(saved) < min_lsn``), changes between
the two are gone: it raises :class:`OutOfValidityInterval` naming the capture instance, both LSNs
and the state file, instead of letting the function fail with the misleading Msg 313 ("An
insufficient number of arguments were supplied...") or, worse, silently restarting from the new
low end. An all-zero / NULL min LSN (unknown capture instance, or no SELECT permission on it)
raises :class:`CaptureInstanceNotFound`.

The capture instance is data, not SQL: it must match ``[A-Za-z_][A-Za-z0-9_]*`` (at most 100
characters; SQL Server's derived names ``<schema>_<table>`` do) and is then bracket-quoted in the
function name and N-quoted as a string argument. LSNs are only ever formatted from bytes
(``0x`` + hex digits).

The window logic talks to a small :class:`CdcServer` interface, so it is tested with an in-memory
fake; :class:`JdbcCdcServer` implements it with Spark's JDBC source and Microsoft's driver
(``com.microsoft.sqlserver:mssql-jdbc`` from Maven Central, e.g. via ``spark.jars.packages``).

Not yet tried against a real SQL Server: the SQL text (checked only as text by the tests), the
driver's mapping of ``binary(10)`` to Spark ``binary``, and the ``__$command_id`` join below.

Example::

    from sqlcdc.transport.jdbc import ChangeWindowReader, JdbcCdcServer, parquet_lander
    server = JdbcCdcServer(spark, "jdbc:sqlserver://db:1433;databaseName=shop;encrypt=true",
                           {"user": os.environ["MSSQL_USER"], "password": os.environ["MSSQL_PASSWORD"]})
    reader = ChangeWindowReader(server, "dbo_orders", "state/dbo_orders.json")
    window = reader.pull(parquet_lander("landing/ct"))   # None when nothing is new
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

LSN_BYTES = 10
ZERO_LSN = bytes(LSN_BYTES)
ROW_FILTER = "all update old"
_CI = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


class CdcReadError(RuntimeError):
    """Base class of the reader's errors."""


class CaptureInstanceNotFound(CdcReadError):
    pass


class OutOfValidityInterval(CdcReadError):
    pass


class StateError(CdcReadError):
    pass


# --- identifiers and literals ----------------------------------------------------------------------


def validate_capture_instance(name: str) -> str:
    """The capture instance name, if it is a plain identifier; else :class:`ValueError`.

    >>> validate_capture_instance("dbo_orders")
    'dbo_orders'
    """
    if not isinstance(name, str) or not _CI.match(name):
        raise ValueError(
            f"capture instance {name!r} is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most 100 "
            "characters); refusing to build SQL with it"
        )
    return name


def quote_ident(name: str) -> str:
    """T-SQL bracket quoting: ``a]b`` -> ``[a]]b]``."""
    return "[" + name.replace("]", "]]") + "]"


def sql_nstring(value: str) -> str:
    """T-SQL Unicode string literal: ``it's`` -> ``N'it''s'``."""
    return "N'" + value.replace("'", "''") + "'"


def lsn_bytes(value: bytes | bytearray | str) -> bytes:
    """An LSN as 10 bytes, from bytes or ``0x``/bare hex text."""
    if isinstance(value, (bytes, bytearray)):
        b = bytes(value)
    else:
        text = str(value).strip()
        text = text[2:] if text[:2].lower() == "0x" else text
        if not re.fullmatch(r"[0-9A-Fa-f]{1,20}", text):
            raise ValueError(f"{value!r} is not an LSN (up to 20 hex digits)")
        b = bytes.fromhex(text.rjust(20, "0"))
    if len(b) != LSN_BYTES:
        raise ValueError(f"an LSN has {LSN_BYTES} bytes, got {len(b)}: {b.hex()}")
    return b


def lsn_literal(value: bytes | str) -> str:
    """``0x`` + 20 upper-case hex digits: the only way an LSN enters SQL text."""
    return "0x" + lsn_bytes(value).hex().upper()


# --- SQL -------------------------------------------------------------------------------------------


def min_lsn_sql(capture_instance: str) -> str:
    return f"SELECT sys.fn_cdc_get_min_lsn({sql_nstring(validate_capture_instance(capture_instance))}) AS lsn"


def max_lsn_sql() -> str:
    return "SELECT sys.fn_cdc_get_max_lsn() AS lsn"


def increment_lsn_sql(lsn: bytes | str) -> str:
    return f"SELECT sys.fn_cdc_increment_lsn({lsn_literal(lsn)}) AS lsn"


def all_changes_sql(capture_instance: str, from_lsn: bytes | str, to_lsn: bytes | str, *, with_command_id: bool = True) -> str:
    """The window query. ``with_command_id`` joins the change table for ``__$command_id`` (the
    function returns only four metadata columns; the documented order inside a transaction needs
    the command id). Set it False on servers older than the cumulative update that added it.

    >>> all_changes_sql("dbo_orders", b"\\0" * 9 + b"\\1", b"\\0" * 9 + b"\\2", with_command_id=False)
    "SELECT c.* FROM cdc.[fn_cdc_get_all_changes_dbo_orders](0x00000000000000000001, 0x00000000000000000002, N'all update old') AS c"
    """
    ci = validate_capture_instance(capture_instance)
    fn = "cdc." + quote_ident(f"fn_cdc_get_all_changes_{ci}")
    call = f"{fn}({lsn_literal(from_lsn)}, {lsn_literal(to_lsn)}, {sql_nstring(ROW_FILTER)})"
    if not with_command_id:
        return f"SELECT c.* FROM {call} AS c"
    ct = "cdc." + quote_ident(f"{ci}_CT")
    return (
        f"SELECT c.*, t.[__$command_id] FROM {call} AS c "
        f"JOIN {ct} AS t ON t.[__$start_lsn] = c.[__$start_lsn] AND t.[__$seqval] = c.[__$seqval] "
        "AND t.[__$operation] = c.[__$operation]"
    )


# --- the server ------------------------------------------------------------------------------------


class CdcServer(Protocol):
    """What the window logic needs from SQL Server (a fake answers it in tests)."""

    def min_lsn(self, capture_instance: str) -> bytes | None: ...

    def max_lsn(self) -> bytes | None: ...

    def increment_lsn(self, lsn: bytes) -> bytes: ...

    def all_changes(self, capture_instance: str, from_lsn: bytes, to_lsn: bytes) -> Any: ...


class JdbcCdcServer:
    """:class:`CdcServer` over Spark's JDBC source (Microsoft's driver on the classpath).

    ``properties`` are JDBC options (``user``, ``password``, ...): pass secrets from the
    environment or a secret scope, never from committed config. ``all_changes`` returns a lazy
    DataFrame (binary LSNs stay binary).
    """

    def __init__(self, spark: Any, url: str, properties: Mapping[str, str] | None = None, *, with_command_id: bool = True):
        self.spark, self.url = spark, url
        self.properties = dict(properties or {})
        self.properties.setdefault("driver", "com.microsoft.sqlserver.jdbc.SQLServerDriver")
        self.with_command_id = with_command_id

    def _query(self, sql: str):
        return self.spark.read.format("jdbc").option("url", self.url).option("query", sql).options(**self.properties).load()

    def _lsn(self, sql: str) -> bytes | None:
        row = self._query(sql).first()
        return None if row is None or row[0] is None else bytes(row[0])

    def min_lsn(self, capture_instance: str) -> bytes | None:
        return self._lsn(min_lsn_sql(capture_instance))

    def max_lsn(self) -> bytes | None:
        return self._lsn(max_lsn_sql())

    def increment_lsn(self, lsn: bytes) -> bytes:
        out = self._lsn(increment_lsn_sql(lsn))
        if out is None:
            raise CdcReadError(f"sys.fn_cdc_increment_lsn({lsn_literal(lsn)}) returned NULL")
        return out

    def all_changes(self, capture_instance: str, from_lsn: bytes, to_lsn: bytes):
        return self._query(all_changes_sql(capture_instance, from_lsn, to_lsn, with_command_id=self.with_command_id))


# --- position --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """One closed LSN interval ``[from_lsn, to_lsn]`` of one capture instance."""

    capture_instance: str
    from_lsn: bytes
    to_lsn: bytes

    @property
    def label(self) -> str:
        return f"{self.from_lsn.hex().upper()}-{self.to_lsn.hex().upper()}"


def load_state(path: str | os.PathLike[str], capture_instance: str) -> bytes | None:
    """The saved upper bound of the last landed window, or None before the first one."""
    p = Path(path)
    if not p.exists():
        return None
    try:
        doc = json.loads(p.read_text())
        saved_ci, last = doc["capture_instance"], doc["last_to_lsn"]
        last_b = lsn_bytes(last)
    except (ValueError, KeyError, TypeError) as e:
        raise StateError(f"state file {p}: unreadable ({e}); expected {{\"capture_instance\", \"last_to_lsn\"}}") from e
    if saved_ci != capture_instance:
        raise StateError(f"state file {p} belongs to capture instance {saved_ci!r}, not {capture_instance!r}")
    return last_b


def save_state(path: str | os.PathLike[str], capture_instance: str, window: Window) -> None:
    """Write the position atomically (temp file in the same folder, fsync, rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "capture_instance": capture_instance,
        "last_from_lsn": lsn_literal(window.from_lsn),
        "last_to_lsn": lsn_literal(window.to_lsn),
        "updated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class ChangeWindowReader:
    """Moves through one capture instance's change data window by window (see the module doc)."""

    def __init__(self, server: CdcServer, capture_instance: str, state_path: str | os.PathLike[str]):
        self.server = server
        self.capture_instance = validate_capture_instance(capture_instance)
        self.state_path = Path(state_path)

    def next_window(self) -> Window | None:
        """The next window to read, or None when nothing was committed since the last one."""
        ci = self.capture_instance
        low = self.server.min_lsn(ci)
        if low is None or bytes(low) == ZERO_LSN:
            raise CaptureInstanceNotFound(
                f"capture instance {ci}: sys.fn_cdc_get_min_lsn returned {'NULL' if low is None else lsn_literal(low)}: "
                "the capture instance does not exist, or this login lacks SELECT on its change data"
            )
        high = self.server.max_lsn()
        if high is None or bytes(high) == ZERO_LSN:
            raise CaptureInstanceNotFound(
                f"capture instance {ci}: sys.fn_cdc_get_max_lsn returned nothing: change data capture is not "
                "enabled for this database, or the capture job has not run yet"
            )
        low, high = bytes(low), bytes(high)
        saved = load_state(self.state_path, ci)
        if saved is None:
            start = low
        else:
            if saved > high:
                raise OutOfValidityInterval(
                    f"capture instance {ci}: the saved position {lsn_literal(saved)} (state file {self.state_path}) is "
                    f"after the server's max LSN {lsn_literal(high)}: is this the same database (restored from a backup?)"
                )
            start = bytes(self.server.increment_lsn(saved))
            if start < low:
                raise OutOfValidityInterval(
                    f"capture instance {ci}: changes after the saved position {lsn_literal(saved)} (state file "
                    f"{self.state_path}) are no longer available: the validity interval now starts at "
                    f"{lsn_literal(low)} (cleanup ran, or the capture instance was re-created). Changes between "
                    "the two are lost to this reader; re-snapshot the table, then delete the state file to "
                    "start again from the low end"
                )
        if start > high:
            return None
        return Window(ci, start, high)

    def pull(self, land: Callable[[Any, Window], None]) -> Window | None:
        """Read the next window, hand its rows to ``land``, then save the position. None = nothing new."""
        window = self.next_window()
        if window is None:
            return None
        rows = self.server.all_changes(self.capture_instance, window.from_lsn, window.to_lsn)
        land(rows, window)
        save_state(self.state_path, self.capture_instance, window)
        return window


def parquet_lander(landing: str | os.PathLike[str]) -> Callable[[Any, Window], None]:
    """A ``land`` callable writing a window's DataFrame as Parquet into the folder
    ``<landing>/<ci>_CT.<from>-<to>/`` (one folder per window; Spark's commit protocol makes it
    all-or-nothing, and a re-read window overwrites its own folder). The ``cdc_ct`` decoder
    reads that landing as is: the capture instance comes from the folder name."""

    def land(df: Any, window: Window) -> None:
        target = Path(landing) / f"{window.capture_instance}_CT.{window.label}"
        df.write.mode("overwrite").parquet(str(target))

    return land
