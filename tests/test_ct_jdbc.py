"""The JDBC window reader's logic, against an in-memory fake of SQL Server's CDC functions.

No SQL Server here: the fake answers sys.fn_cdc_get_min_lsn / get_max_lsn / increment_lsn and
cdc.fn_cdc_get_all_changes_<ci> the way the documentation describes them, including Msg 313 for a
window outside the validity interval, so the tests show the reader never gets that far.
"""

from __future__ import annotations

import json

import pytest

from sqlcdc.transport import jdbc as ct_jdbc
from sqlcdc.transport.jdbc import (
    CaptureInstanceNotFound,
    ChangeWindowReader,
    OutOfValidityInterval,
    StateError,
    Window,
)


def L(n: int) -> bytes:
    return n.to_bytes(10, "big")


class Msg313(RuntimeError):
    pass


class FakeServer:
    """One capture instance ``dbo_orders``; LSNs are integers; each commit takes 10 LSNs."""

    def __init__(self):
        self.log: list[tuple[int, dict]] = []
        self.low, self.high = 1, 0
        self.calls: list[tuple[int, int]] = []

    def commit(self, *rows: dict) -> int:
        self.high += 10
        self.log += [(self.high, r) for r in rows]
        return self.high

    def cleanup(self, upto: int) -> None:
        """sys.sp_cdc_cleanup_change_table: drop entries <= upto; the validity interval moves up."""
        self.log = [(n, r) for n, r in self.log if n > upto]
        self.low = upto + 1

    def min_lsn(self, ci: str) -> bytes:
        return L(self.low) if ci == "dbo_orders" else bytes(10)

    def max_lsn(self) -> bytes | None:
        return L(self.high) if self.high else None

    def increment_lsn(self, lsn: bytes) -> bytes:
        return L(int.from_bytes(lsn, "big") + 1)

    def all_changes(self, ci: str, from_lsn: bytes, to_lsn: bytes):
        f, t = int.from_bytes(from_lsn, "big"), int.from_bytes(to_lsn, "big")
        if f < self.low or t > self.high or f > t:
            raise Msg313(f"Msg 313, Level 16, State 3: An insufficient number of arguments were supplied for the "
                         f"procedure or function cdc.fn_cdc_get_all_changes_{ci}")
        self.calls.append((f, t))
        return [r for n, r in self.log if f <= n <= t]


class Landing:
    def __init__(self, fail: bool = False):
        self.rows: list[dict] = []
        self.windows: list[Window] = []
        self.fail = fail

    def __call__(self, rows, window):
        if self.fail:
            raise OSError("disk full")
        self.rows += rows
        self.windows.append(window)


def test_windows_cover_every_change_exactly_once(tmp_path):
    server, landing = FakeServer(), Landing()
    state = tmp_path / "state" / "dbo_orders.json"
    reader = ChangeWindowReader(server, "dbo_orders", state)
    server.commit({"id": 1}, {"id": 2})
    server.commit({"id": 3})

    first = reader.pull(landing)
    assert (first.from_lsn, first.to_lsn) == (L(1), L(20))  # from sys.fn_cdc_get_min_lsn to get_max_lsn
    assert json.loads(state.read_text())["last_to_lsn"] == "0x" + L(20).hex().upper()

    assert reader.pull(landing) is None  # nothing committed since: no query at all
    assert server.calls == [(1, 20)]

    server.commit({"id": 4})
    second = reader.pull(landing)
    assert (second.from_lsn, second.to_lsn) == (L(21), L(30))  # increment_lsn(20) .. new max
    assert [r["id"] for r in landing.rows] == [1, 2, 3, 4]


def test_a_failed_landing_does_not_move_the_position(tmp_path):
    server = FakeServer()
    server.commit({"id": 1})
    reader = ChangeWindowReader(server, "dbo_orders", tmp_path / "s.json")
    with pytest.raises(OSError, match="disk full"):
        reader.pull(Landing(fail=True))
    assert not (tmp_path / "s.json").exists()
    landing = Landing()
    again = reader.pull(landing)
    assert (again.from_lsn, again.to_lsn) == (L(1), L(10)) and landing.rows == [{"id": 1}]


def test_cleanup_past_the_saved_position_is_a_clear_error_not_msg_313(tmp_path):
    server = FakeServer()
    server.commit({"id": 1})  # 10
    state = tmp_path / "s.json"
    reader = ChangeWindowReader(server, "dbo_orders", state)
    reader.pull(Landing())  # position 10
    server.commit({"id": 2})  # 20
    server.commit({"id": 3})  # 30
    server.cleanup(upto=20)  # change 2 is gone before we read it
    with pytest.raises(OutOfValidityInterval) as err:
        reader.pull(Landing())
    msg = str(err.value)
    assert msg.startswith(
        "capture instance dbo_orders: changes after the saved position 0x0000000000000000000A "
        f"(state file {state}) are no longer available: the validity interval now starts at "
        "0x00000000000000000015 (cleanup ran, or the capture instance was re-created)"
    )
    assert server.calls == [(1, 10)]  # the out-of-range window was never queried
    assert json.loads(state.read_text())["last_to_lsn"] == "0x0000000000000000000A"  # position kept


def test_cleanup_up_to_the_saved_position_loses_nothing(tmp_path):
    server = FakeServer()
    server.commit({"id": 1})
    reader = ChangeWindowReader(server, "dbo_orders", tmp_path / "s.json")
    reader.pull(Landing())
    server.commit({"id": 2})
    server.cleanup(upto=10)  # exactly what we already read
    landing = Landing()
    w = reader.pull(landing)
    assert (w.from_lsn, w.to_lsn) == (L(11), L(20)) and landing.rows == [{"id": 2}]


def test_unknown_capture_instance_and_cdc_not_running(tmp_path):
    server = FakeServer()
    server.commit({"id": 1})
    with pytest.raises(CaptureInstanceNotFound, match=r"capture instance dbo_nope: sys.fn_cdc_get_min_lsn returned 0x0+: "
                       r"the capture instance does not exist, or this login lacks SELECT"):
        ChangeWindowReader(server, "dbo_nope", tmp_path / "s.json").next_window()
    with pytest.raises(CaptureInstanceNotFound, match="change data capture is not enabled"):
        ChangeWindowReader(FakeServer(), "dbo_orders", tmp_path / "s.json").next_window()


def test_saved_position_ahead_of_the_server(tmp_path):
    server = FakeServer()
    server.commit({"id": 1})
    state = tmp_path / "s.json"
    ct_jdbc.save_state(state, "dbo_orders", Window("dbo_orders", L(1), L(500)))
    with pytest.raises(OutOfValidityInterval, match=r"saved position 0x0+1F4 .* is after the server's max LSN 0x0+A"):
        ChangeWindowReader(server, "dbo_orders", state).next_window()


def test_state_file_problems_name_the_file(tmp_path):
    server = FakeServer()
    server.commit({"id": 1})
    other = tmp_path / "other.json"
    ct_jdbc.save_state(other, "dbo_customers", Window("dbo_customers", L(1), L(5)))
    with pytest.raises(StateError, match=rf"state file {other} belongs to capture instance 'dbo_customers', not 'dbo_orders'"):
        ChangeWindowReader(server, "dbo_orders", other).next_window()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(StateError, match=rf"state file {broken}: unreadable"):
        ChangeWindowReader(server, "dbo_orders", broken).next_window()


@pytest.mark.parametrize("bad", ["dbo_orders; DROP TABLE x", "dbo]orders", "dbo orders", "1dbo", "", "x" * 101, None])
def test_capture_instance_must_be_a_plain_identifier(bad):
    with pytest.raises(ValueError, match="is not a plain identifier"):
        ct_jdbc.validate_capture_instance(bad)
    with pytest.raises(ValueError):
        ct_jdbc.all_changes_sql(bad, L(1), L(2))


def test_sql_text_quotes_names_and_formats_lsns_from_bytes():
    assert ct_jdbc.quote_ident("a]b") == "[a]]b]"
    assert ct_jdbc.sql_nstring("it's") == "N'it''s'"
    assert ct_jdbc.min_lsn_sql("dbo_orders") == "SELECT sys.fn_cdc_get_min_lsn(N'dbo_orders') AS lsn"
    assert ct_jdbc.increment_lsn_sql("0x00000027000001000010") == (
        "SELECT sys.fn_cdc_increment_lsn(0x00000027000001000010) AS lsn"
    )
    assert ct_jdbc.all_changes_sql("dbo_orders", L(1), L(2)) == (
        "SELECT c.*, t.[__$command_id] FROM cdc.[fn_cdc_get_all_changes_dbo_orders]"
        "(0x00000000000000000001, 0x00000000000000000002, N'all update old') AS c "
        "JOIN cdc.[dbo_orders_CT] AS t ON t.[__$start_lsn] = c.[__$start_lsn] AND t.[__$seqval] = c.[__$seqval] "
        "AND t.[__$operation] = c.[__$operation]"
    )
    with pytest.raises(ValueError, match="is not an LSN"):
        ct_jdbc.lsn_literal("0x12; SELECT 1")
    with pytest.raises(ValueError, match="an LSN has 10 bytes"):
        ct_jdbc.lsn_literal(b"\x01\x02")


def test_landed_windows_decode_like_any_export(spark, tmp_path):
    """Windows landed by parquet_lander (native binary LSNs) decode with cdc_ct; a window landed
    twice (crash between landing and saving the position) gives no duplicate change."""
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    from sqlcdc.config import SourceConfig, TableConfig
    from sqlcdc.formats import cdc_ct

    schema = StructType([
        StructField("__$start_lsn", BinaryType()), StructField("__$seqval", BinaryType()),
        StructField("__$operation", IntegerType()), StructField("__$update_mask", BinaryType()),
        StructField("id", IntegerType()), StructField("name", StringType()),
        StructField("__$command_id", IntegerType()),
    ])

    class SparkFake(FakeServer):
        def all_changes(self, ci, f, t):
            return spark.createDataFrame(super().all_changes(ci, f, t), schema)

    server = SparkFake()
    server.commit((L(10), L(8), 2, b"\x03", 1, "a", 1))
    reader = ChangeWindowReader(server, "dbo_orders", tmp_path / "state.json")
    land = ct_jdbc.parquet_lander(tmp_path / "landing")
    reader.pull(land)
    server.commit((L(20), L(18), 3, b"\x02", 1, "a", 1), (L(20), L(18), 4, b"\x02", 1, "b", 1))
    w = reader.next_window()
    land(server.all_changes("dbo_orders", w.from_lsn, w.to_lsn), w)  # landed, then a crash: position not saved
    assert reader.pull(land) == w  # the same window again

    src = SourceConfig(name="ct", format="cdc_ct", landing=str(tmp_path / "landing"), file="pipeline.yml")
    table = TableConfig(name="orders", source=src, schema="dbo", table="orders", keys=("id",),
                        columns=({"name": "id", "type": "int"}, {"name": "name", "type": "string"}), file="t.yml")
    decoded = cdc_ct.decode(cdc_ct.read_bronze(spark, src), table, cdc_ct.columns_for(table, src))
    got = [(r.op, r.after.name, r.changed_columns, tuple(r.sequence)) for r in decoded.changes.orderBy("sequence").collect()]
    assert got == [
        ("INSERT", "a", ["id", "name"], ("0000000000000000000A", "00000000000000000008", 1)),
        ("UPDATE", "b", ["name"], ("00000000000000000014", "00000000000000000012", 2)),
    ]
    assert decoded.quarantine.count() == 0
