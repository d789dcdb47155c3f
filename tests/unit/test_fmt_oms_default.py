"""OMS Default and DefaultExtendColumnType (seeds 000, 001): fixtures, decisions, round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _oms_strategies import COL_TYPES, epoch_instants, rows
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats import get_decoder
from pipelines.formats._oms_default_family import split_store_sequence
from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.testing.model import MirrorModel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
DEFAULT = get_decoder("oms_default")
EXTEND = get_decoder("oms_default_extend")

TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "bigInt": "bigint unsigned",
    "float32": "float",
    "float64": "double",
    "string": "varchar(20)",
    "bytes": "blob",
    "decimal": "decimal(65,30)",
    "localDate": "date",
    "localTime": "time",
    "localDateTime": "datetime",
    "timestamp_in_long": "timestamp",
}
CTX = DecodeContext(
    tables={
        "tenant.database.table": TableSpec(columns=TYPES),
        "tenant.database.table_name": TableSpec(columns=TYPES),
    }
)
ROW = {
    "int8": "3",
    "int16": "129",
    "int32": "2147483646",
    "int64": "9223372036854775806",
    "bigInt": "10223372036854775806",
    "float32": "1.2222",
    "float64": "9.999999",
    "string": "hello world",
    "bytes": "aGVsbG8gd29ybGQ=",
    "decimal": "9.99999999999",
    "localDate": "2020-11-25",
    "localTime": "00:01:02",
    "localDateTime": "2020-11-25T00:01:02",
    "timestamp_in_long": "2020-11-24T16:01:02.012345Z",
}
KEY = ("int8", "int16")


def lines(format_id: str) -> list[bytes]:
    return (FIXTURES / f"{format_id}.jsonl").read_bytes().splitlines()


def decode_all(decoder, format_id: str, ctx: DecodeContext = CTX) -> list[Change]:
    return [c for raw in lines(format_id) for c in decoder.decode(raw, ctx)]


# ---------------------------------------------------------------- oms_default fixtures


def test_default_fixture_count_and_all_decode():
    changes = decode_all(DEFAULT, "oms_default")
    assert [c.op for c in changes] == [
        "INSERT",
        "SNAPSHOT",
        "UPDATE",
        "DELETE",
        "DDL",
        "INSERT",
        "UPDATE",
        "DELETE",
        "HEARTBEAT",
    ]


def test_default_insert_exact():
    [change] = DEFAULT.decode(lines("oms_default")[0], CTX)
    assert change == Change(
        op="INSERT",
        db="tenant.database",
        table="table",
        key_columns=KEY,
        before=None,
        after=ROW,
        col_types=TYPES,
        seq=(1609344671, 1),
        event_time="2020-12-30T16:11:11Z",
        txn="1xxx_3152xxx",
        detail="INSERT",
    )


def test_default_row_is_snapshot_without_sequence():
    [change] = DEFAULT.decode(lines("oms_default")[1], CTX)
    assert (change.op, change.seq, change.detail, change.after) == ("SNAPSHOT", (), "ROW", ROW)


def test_default_update_full_images():
    [change] = DEFAULT.decode(lines("oms_default")[2], CTX)
    assert change.op == "UPDATE" and change.changed is None and change.seq == (1609344671, 2)
    assert change.before == {**ROW, "float64": "9.999999999999", "decimal": "9.999999999999"}
    assert change.after == {**change.before, "string": "hello world 2020"}


def test_default_delete_before_only():
    [change] = DEFAULT.decode(lines("oms_default")[3], CTX)
    assert change.after is None
    assert change.before == {**ROW, "float64": "9.99999999", "decimal": "9.999999999"}


def test_default_ddl():
    [change] = DEFAULT.decode(lines("oms_default")[4], CTX)
    assert change == Change(
        op="DDL",
        db="connector_test",
        table="all_mysql_type_test",
        ddl="ALTER TABLE connector_test.all_mysql_type_test ADD column c90 VARCHAR(30) DEFAULT \"test\" COMMENT 'test'",
        event_time="2022-12-16T07:50:57Z",
        detail="ALTER_TABLE",
    )


def test_default_heartbeat_without_table():
    [change] = DEFAULT.decode(lines("oms_default")[8], CTX)
    assert change == Change(
        op="HEARTBEAT", db="tenant.database", seq=(1609344680, 0), event_time="2020-12-30T16:11:20Z", detail="HEARTBEAT"
    )


def test_default_seed_001_lines():
    changes = [DEFAULT.decode(raw, CTX)[0] for raw in lines("oms_default")[5:8]]
    assert [c.table for c in changes] == ["table_name"] * 3
    assert [c.seq for c in changes] == [(1609344671, 4), (1609344671, 5), (1609344671, 6)]  # text form
    assert changes[0].after == ROW and changes[0].txn is None


def test_default_mirror():
    changes = decode_all(DEFAULT, "oms_default")
    assert MirrorModel().add_all(changes).rows("tenant.database.table") == []
    upto_update = MirrorModel().add_all(changes[:3]).rows("tenant.database.table")
    assert upto_update == [
        {**ROW, "float64": "9.999999999999", "decimal": "9.999999999999", "string": "hello world 2020"}
    ]


def test_default_untyped_values_keep_exact_text():
    [change] = DEFAULT.decode(lines("oms_default")[0], DecodeContext())
    assert change.col_types is None
    assert change.after["timestamp_in_long"] == "1606233662.012345"
    assert change.after["localDateTime"] == "2020-11-25 00:01:02"
    assert change.after["bigInt"] == "10223372036854775806"


# ---------------------------------------------------------------- decisions


@pytest.mark.parametrize(
    "raw, seq",
    [
        ("160934467100001", (1609344671, 1)),  # padded increment
        ("16093446711", (1609344671, 1)),  # unpadded increment
        ("160934467199999", (1609344671, 99999)),
        ("160934467100012345", (1609344671000, 12345)),  # 13-digit millisecond timestamp
        (None, ()),
        ("null", ()),
    ],
)
def test_store_data_sequence_split(raw, seq):
    assert split_store_sequence(raw) == seq


def test_store_data_sequence_orders_by_timestamp_then_increment():
    # As one number (or text) 160934467199999 > 16093446721; as the vendor means it, it is earlier.
    assert split_store_sequence("160934467199999") < split_store_sequence("16093446721")


@pytest.mark.parametrize("raw", ["1609344671", "abc", "1234567890123456789"])
def test_store_data_sequence_rejects(raw):
    with pytest.raises(Reject, match="storeDataSequence"):
        split_store_sequence(raw)


def _msg(post: dict, db_type: str = "OB_MYSQL") -> bytes:
    return json.dumps(
        {
            "allMetaData": {
                "db": "t.d",
                "table_name": "x",
                "dbType": db_type,
                "record_primary_key": "id",
                "storeDataSequence": "160934467100001",
            },
            "recordType": "INSERT",
            "postStruct": {"id": 1, **post},
        }
    ).encode()


def _ctx(**types: str) -> DecodeContext:
    return DecodeContext(tables={"t.d.x": TableSpec(columns={"id": "int", **types})})


@pytest.mark.parametrize(
    "col_type, value, canon",
    [
        ("datetime", "2020-11-25 00:01:02.012345 Asia/Shanghai", "2020-11-25T00:01:02.012345"),
        ("datetime", "2020-11-25T00:01", "2020-11-25T00:01:00"),  # before OMS CE V3.3.0
        ("time", "00:01:02.123456789", "00:01:02.123456789"),
        ("timestamp", "1606233662", "2020-11-24T16:01:02Z"),  # before V3.3.0: seconds
        ("timestamp", "1606233662.123456789", "2020-11-24T16:01:02.123456789Z"),
        ("decimal(10,2)", "1.10E+2", "110"),
        ("bool", 1, "true"),
        ("bit(8)", "AQ==", "AQ=="),
        ("json", {"a": [1, 2.50]}, '{"a":[1,2.50]}'),
    ],
)
def test_oms_type_rules(col_type, value, canon):
    raw = _msg({"v": value}).replace(b"2.5", b"2.50")
    assert DEFAULT.decode(raw, _ctx(v=col_type))[0].after["v"] == canon


def test_oracle_date_keeps_time_of_day():
    change = DEFAULT.decode(_msg({"v": "2020-11-25 00:01:02"}, "OB_ORACLE"), _ctx(v="date"))[0]
    assert change.after["v"] == "2020-11-25T00:01:02"


@pytest.mark.parametrize(
    "col_type, value",
    [
        ("date", "0000-00-00"),
        ("datetime", "0000-00-00 00:00:00"),
        ("timestamp", "0000-00-00 00:00:00"),
        ("date", "2019-02-29"),
    ],
)
def test_the_sources_invalid_dates_keep_the_row(col_type, value):
    """Seeds 000/001: invalid dates display the original string, invalid timestamps 0000-00-00 00:00:00.
    The row decodes with the value NULL and its raw text in ``invalid`` (gold's invalid_values policy)."""
    [change] = DEFAULT.decode(_msg({"v": value}), _ctx(v=col_type))
    assert change.after["v"] is None and change.invalid == {"v": value}


@pytest.mark.parametrize(
    "col_type, value",
    [
        ("date", "0000/00/00"),
        ("datetime", "yesterday"),
        ("int", "abc"),
        ("blob", "not base64!"),
    ],
)
def test_invalid_values_reject_naming_column_and_value(col_type, value):
    with pytest.raises(Reject) as exc:
        DEFAULT.decode(_msg({"v": value}), _ctx(v=col_type))
    assert "'v'" in str(exc.value) and value[:4] in str(exc.value)


def test_key_from_configuration_when_message_has_none():
    raw = json.dumps(
        {
            "allMetaData": {"db": "t.d", "table_name": "x", "storeDataSequence": 160934467100001},
            "recordType": "INSERT",
            "postStruct": {"id": 1},
        }
    ).encode()
    ctx = DecodeContext(tables={"t.d.x": TableSpec(key=("id",))})
    assert DEFAULT.decode(raw, ctx)[0].key_columns == ("id",)


# ---------------------------------------------------------------- oms_default_extend


def test_extend_insert_exact_types_from_light_type():
    [change] = EXTEND.decode(lines("oms_default_extend")[0], DecodeContext())
    assert "__light_type" not in change.after
    assert change.col_types == {
        **TYPES,
        "float32": "float",
        "string": "varchar",
        "decimal": "decimal",
        "bigInt": "bigint unsigned",
        "int64": "int64",
    }
    assert change.after == {
        **ROW,
        "float64": "9.99999999999999909326625337248",
        "decimal": "9.99999999999999909326625337248461995470488734032045693707225049338",
    }
    assert (change.seq, change.key_columns, change.event_time) == ((1609344671, 1), KEY, "2020-12-30T16:11:11Z")


def test_extend_seed_001_exact_long_decimal():
    [change] = EXTEND.decode(lines("oms_default_extend")[5], DecodeContext())
    dec = change.after["decimal"]
    assert dec.startswith("0." + "0" * 307 + "9999999999999999093266253372484619954704887340320456937")
    assert dec.endswith("2452392578125")
    assert change.db == "database"


def test_extend_all_lines_and_mirror():
    changes = decode_all(EXTEND, "oms_default_extend", DecodeContext())
    assert [c.op for c in changes] == ["INSERT", "SNAPSHOT", "UPDATE", "DELETE", "DDL", "INSERT", "UPDATE", "DELETE"]
    assert all("__light_type" not in (c.after or {}) and "__light_type" not in (c.before or {}) for c in changes)
    assert MirrorModel().add_all(changes).rows("tenant.database.table") == []
    assert MirrorModel().add_all(changes[:3]).rows("tenant.database.table")[0]["string"] == "hello world 2020"


def test_extend_configured_types_decide_over_message_types():
    """A configured type decides where it meets ``__light_type`` (issue 35); the message's types fill the rest."""
    [change] = EXTEND.decode(
        lines("oms_default_extend")[0],
        DecodeContext(tables={"tenant.database.table": TableSpec(columns={"string": "text", "extra": "int"})}),
    )
    assert change.col_types["string"] == "text" and change.col_types["extra"] == "int"
    [plain] = EXTEND.decode(lines("oms_default_extend")[0], DecodeContext())
    assert plain.col_types["string"] == "varchar"


# ---------------------------------------------------------------- round trips


@st.composite
def default_changes(draw, with_types: bool):
    op = draw(st.sampled_from(["INSERT", "UPDATE", "DELETE", "SNAPSHOT"]))
    before = draw(rows()) if op in ("UPDATE", "DELETE") else None
    after = draw(rows()) if op != "DELETE" else None
    seq = draw(st.tuples(st.integers(10**9, 9_999_999_999), st.integers(0, 99_999)))  # required on I/U/D
    if op == "SNAPSHOT":  # full load (ROW) carries none (seed 000)
        seq = draw(st.none() | st.just(seq))
    return Change(
        op=op,
        db="t.db",
        table="tbl",
        key_columns=("id",),
        before=before,
        after=after,
        col_types=dict(COL_TYPES),
        seq=seq or (),
        event_time=draw(st.none() | epoch_instants),
        txn=draw(st.none() | st.text(max_size=8).filter(lambda s: s.isprintable() and s)),
        detail="ROW" if op == "SNAPSHOT" else op,
    )


@settings(max_examples=50, deadline=None)
@given(default_changes(with_types=False))
def test_default_round_trip(change):
    ctx = DecodeContext(tables={"t.db.tbl": TableSpec(columns=COL_TYPES)})
    assert DEFAULT.decode(DEFAULT.encode(change, ctx), ctx) == [change]


@settings(max_examples=50, deadline=None)
@given(default_changes(with_types=True))
def test_extend_round_trip(change):
    raw = EXTEND.encode(change, DecodeContext())
    assert b"__light_type" in raw
    assert EXTEND.decode(raw, DecodeContext()) == [change]


@pytest.mark.parametrize("decoder", [DEFAULT, EXTEND])
def test_ddl_and_heartbeat_round_trip(decoder):
    for change in (
        Change(
            op="DDL", db="t.db", table="x", ddl="DROP TABLE x", detail="DROP_TABLE", event_time="2022-12-16T07:50:57Z"
        ),
        Change(op="HEARTBEAT", db="t.db", seq=(1609344680, 7), detail="HEARTBEAT"),
    ):
        assert decoder.decode(decoder.encode(change, DecodeContext()), DecodeContext()) == [change]


# ---------------------------------------------------------------- bad input


BAD = [
    b"{",
    b"not json",
    b"[]",
    b"3",
    b"\xff\xfe",
    b"[" * 10000 + b"]" * 10000,
    b'{"recordType": 1}',
    b'{"recordType": "INSERT", "allMetaData": {"db": "a"}, "postStruct": {}}',
    b'{"recordType": "MERGE", "allMetaData": {"table_name": "t"}}',
    b'{"recordType": "INSERT", "allMetaData": {"table_name": "t"}, "postStruct": []}',
    b'{"recordType": "DELETE", "allMetaData": {"table_name": "t"}}',
    b'{"recordType": "DDL", "allMetaData": []}',
    b'{"recordType": "INSERT", "allMetaData": {"table_name": "t", "storeDataSequence": "x"}, "postStruct": {}}',
    b'{"recordType": "INSERT", "allMetaData": {"table_name": "t", "timestamp": "yesterday"}, "postStruct": {}}',
]


@pytest.mark.parametrize("decoder", [DEFAULT, EXTEND])
@pytest.mark.parametrize("raw", BAD)
def test_bad_input_rejects(decoder, raw):
    with pytest.raises(Reject):
        decoder.decode(raw, DecodeContext(max_message_bytes=100_000))


def test_extend_rejects_malformed_light_type():
    with pytest.raises(Reject, match="__light_type"):
        EXTEND.decode(
            b'{"recordType": "INSERT", "allMetaData": {"table_name": "t"}, "postStruct": {"__light_type": 5}}',
            DecodeContext(),
        )


def test_oversize_rejects():
    with pytest.raises(Reject, match="over the limit"):
        DEFAULT.decode(lines("oms_default")[0], DecodeContext(max_message_bytes=100))
