"""OMS DataWorks 2.0 (seeds 000, 001): fixtures, op list, 13.9-digit times, round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _oms_strategies import COL_TYPES, ms_instants, rows
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, Reject
from pipelines.testing.model import MirrorModel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
DW = get_decoder("oms_dataworks")
CTX = DecodeContext()
TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "int64",
    "float32": "float",
    "float64": "double",
    "bigInt": "bigint unsigned",
    "boolean": "boolean",
    "string": "varchar",
    "bytes": "blob",
    "decimal": "decimal",
    "localDate": "date",
    "localTime": "time",
    "localDateTime": "datetime",
    "timestamp": "timestamp",
    "zonedDateTime": "zoned_datetime",
    "intervalDayToSecond": "interval_day_to_second",
    "intervalYearToMonth": "interval_year_to_month",
}
AFTER = {
    "int8": "3",
    "int16": "129",
    "int32": "2147483646",
    "int64": "9223372036854775806",
    "float32": "1.2222",
    "float64": "0.0000000000000008125",
    "bigInt": "10223372036854775806",
    "boolean": "true",
    "string": "hello world",
    "bytes": "aGVsbG8gd29ybGQ=",
    "decimal": "0.000000000000125",
    "localDate": "2020-11-25",
    "localTime": "00:01:02",
    "localDateTime": "2020-11-25T00:01:02",
    "timestamp": "2020-11-24T16:01:02.012345Z",
    "zonedDateTime": "2020-11-25 00:01:02.012345 Asia/Shanghai",
    "intervalDayToSecond": "INTERVAL '3' DAY",
    "intervalYearToMonth": "INTERVAL '4' YEAR",
}


def lines() -> list[bytes]:
    return (FIXTURES / "oms_dataworks.jsonl").read_bytes().splitlines()


def test_all_fixture_lines():
    changes = [c for raw in lines() for c in DW.decode(raw, CTX)]
    assert [c.op for c in changes] == [
        "INSERT",
        "UPDATE",
        "DELETE",
        "DDL",
        "INSERT",
        "UPDATE",
        "DELETE",
        "HEARTBEAT",
        "UPDATE",
    ]


def test_insert_exact():
    [change] = DW.decode(lines()[0], CTX)
    assert change == Change(
        op="INSERT",
        db="db",
        table="tab",
        key_columns=("int8", "int16"),
        after=AFTER,
        col_types=TYPES,
        seq=(),
        event_time="2022-03-18T05:23:20Z",
        detail="INSERT",
    )


def test_update_and_delete():
    [upd] = DW.decode(lines()[1], CTX)
    assert upd.before["float64"] == "0.000000000000000125" and upd.after["string"] == "hello world 2020"
    assert upd.changed is None and upd.event_time == "2022-03-18T05:23:58Z"
    [dele] = DW.decode(lines()[2], CTX)
    assert dele.after is None and dele.before["decimal"] == "0.0000000000125"


def test_ddl():
    [change] = DW.decode(lines()[3], CTX)
    assert change == Change(
        op="DDL",
        db="connector_test",
        table="all_mysql_type_test",
        ddl="ALTER TABLE connector_test.all_mysql_type_test ADD COLUMN c90 VARCHAR(30) DEFAULT \"test\" COMMENT 'test'",
        event_time="2022-12-16T07:53:29Z",
        detail="ALTER",
    )


def test_seed_001_long_decimal_exact():
    [change] = DW.decode(lines()[4], CTX)
    assert change.after["decimal"].startswith("0." + "0" * 307 + "99999999999999990932662533724846")
    assert change.after["float64"] == change.after["decimal"]


def test_heartbeat_without_schema():
    [change] = DW.decode(lines()[7], CTX)
    assert change == Change(op="HEARTBEAT", event_time="2021-05-08T07:07:39Z", detail="HEARTBEAT")


def test_13_9_digit_datetime_and_binary():
    [change] = DW.decode(lines()[8], CTX)
    assert change.before == {
        "id": "111",
        "name": "scooter",
        "mydata": "aGVsbG8=",
        "ts": "2020-05-24T10:14:29.123456789",
    }
    assert change.after == {"id": "222", "name": "donald", "mydata": "d29ybGQ=", "ts": "2020-05-24T10:14:29"}
    assert (change.schema, change.seq, change.key_columns) == ("mySchema", (1,), ("id",))


def test_mirror():
    changes = [c for raw in lines() for c in DW.decode(raw, CTX)]
    assert MirrorModel().add_all(changes).rows("db.tab") == []
    [row] = MirrorModel().add_all(changes[:2]).rows("db.tab")
    assert row["string"] == "hello world 2020" and row["bigInt"] == "10223372036854775806"
    assert MirrorModel().add_all(changes).rows("myDatabase.mySchema.tableName") == [  # Oracle: the schema names it too
        {"id": "222", "name": "donald", "mydata": "d29ybGQ=", "ts": "2020-05-24T10:14:29"}
    ]


def _msg(op: str, **payload) -> bytes:
    return json.dumps(
        {
            "version": "2.0",
            "schema": {"source": {"dbName": "d", "table": "t"}},
            "payload": {"op": op, "scn": "42", "timestamp": {"eventTime": 1620457659000}, **payload},
        }
    ).encode()


@pytest.mark.parametrize("op", ["TRANSACTION_BEGIN", "TRANSACTION_END", "GTID", "XACOMMIT", "XAROLLBACK", "HEARTBEAT"])
def test_progress_ops_are_heartbeats(op):
    assert DW.decode(_msg(op), CTX) == [
        Change(op="HEARTBEAT", db="d", table="t", seq=(42,), event_time="2021-05-08T07:07:39Z", detail=op)
    ]


@pytest.mark.parametrize("op", ["CREATE", "ALTER", "ERASE", "QUERY", "RENAME", "CINDEX", "DINDEX"])
def test_ddl_ops(op):
    [change] = DW.decode(_msg(op, ddl={"text": "DROP TABLE t"}), CTX)
    assert (change.op, change.ddl, change.detail) == ("DDL", "DROP TABLE t", op)


def test_truncate():
    assert DW.decode(_msg("TRUNCATE"), CTX)[0].op == "TRUNCATE"


def test_zero_dates_are_kept_as_invalid_values():
    """Seed 000: invalid dates display the original string: the row decodes, the value is NULL and noted."""
    raw = json.dumps(
        {
            "schema": {"source": {"table": "t"}, "column": [{"name": "v", "type": "DATE"}]},
            "payload": {"op": "INSERT", "after": {"data": {"v": "0000-00-00"}}},
        }
    ).encode()
    [change] = DW.decode(raw, CTX)
    assert change.after == {"v": None} and change.invalid == {"v": "0000-00-00"}


@pytest.mark.parametrize(
    "raw",
    [
        _msg("insert", after={"data": {}}),  # ops are case-sensitive
        _msg("MERGE"),
        _msg("ALTER"),
        _msg("INSERT"),
        _msg("DELETE", before={"data": []}),
        _msg("INSERT", after={"data": {"x": 1}}).replace(b'"scn": "42"', b'"scn": "abc"'),
        json.dumps({"version": "3.0", "payload": {"op": "HEARTBEAT"}}).encode(),
        json.dumps({"payload": {"op": "INSERT", "after": {"data": {}}}}).encode(),  # no table
        json.dumps(
            {
                "schema": {"source": {"table": "t"}, "column": [{"name": "v", "type": "DATE"}]},
                "payload": {"op": "INSERT", "after": {"data": {"v": "00/00/0000"}}},
            }
        ).encode(),
        b"{",
        b"[]",
        b"3",
        b"\xff",
        b"[" * 10000 + b"]" * 10000,
        b'{"payload": 1}',
    ],
)
def test_bad_input_rejects(raw):
    with pytest.raises(Reject):
        DW.decode(raw, CTX)


@st.composite
def dw_changes(draw):
    op = draw(st.sampled_from(["INSERT", "UPDATE", "DELETE"]))
    return Change(
        op=op,
        db="d",
        table="t",
        schema=draw(st.none() | st.just("s")),
        key_columns=("id",),
        before=draw(rows()) if op != "INSERT" else None,
        after=draw(rows()) if op != "DELETE" else None,
        col_types=dict(COL_TYPES),
        seq=draw(st.none() | st.integers(0, 10**18).map(lambda n: (n,))) or (),
        event_time=draw(st.none() | ms_instants),
        detail=op,
    )


@settings(max_examples=50, deadline=None)
@given(dw_changes())
def test_round_trip(change):
    assert DW.decode(DW.encode(change, CTX), CTX) == [change]


def test_ddl_and_heartbeat_round_trip():
    for change in (
        Change(op="DDL", db="d", table="t", ddl="ALTER TABLE t ADD c INT", detail="ALTER"),
        Change(op="HEARTBEAT", seq=(7,), event_time="2021-05-08T07:07:39.5Z", detail="GTID"),
    ):
        assert DW.decode(DW.encode(change, CTX), CTX) == [change]
