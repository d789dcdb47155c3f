"""SharePlex JSON: oms_shareplex (seeds 000, 001) and dts_shareplex (seed 004)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _oms_strategies import COL_TYPES, epoch_instants, rows
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.testing.model import MirrorModel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
OMS = get_decoder("oms_shareplex")
DTS = get_decoder("dts_shareplex")
ROWID = "mock_database.mock_table-3\u0001129"
TYPES = {
    "col1": "datetime",
    "col2": "varchar(20)",
    "col3": "varchar(30)",
    "col4": "float",
    "col5": "decimal(65,30)",
    "col6": "smallint",
    "col7": "time",
    "col8": "bool",
    "col9": "timestamp with time zone",
    "col10": "int",
    "col11": "bigint",
    "col12": "blob",
    "col13": "varchar(30)",
    "col14": "tinyint",
    "col15": "date",
    "col16": "decimal(65,30)",
    "col17": "bigint unsigned",
    "col18": "timestamp",
}
INSERT_ROW = {
    "col1": "2020-11-25T00:01:02",
    "col2": "hello world",
    "col3": "INTERVAL '3' DAY",
    "col4": "1.2222",
    "col5": "9.999999999999999308",
    "col6": "129",
    "col7": "00:01:02",
    "col8": "true",
    "col9": "2020-11-24T16:01:02.012345Z",
    "col10": "2147483646",
    "col11": "9223372036854775806",
    "col12": "aGVsbG8gd29ybGQ=",
    "col13": "INTERVAL '4' YEAR",
    "col14": "3",
    "col15": "2020-11-25",
    "col16": "9.9999999999308",
    "col17": "10223372036854775806",
    "col18": "2020-11-24T16:01:02.012345Z",
}
TYPED = DecodeContext(tables={"mock_database.mock_table": TableSpec(columns=TYPES)})
KEYED = DecodeContext(tables={"mock_database.mock_table": TableSpec(key=("col14", "col6"), columns=TYPES)})


def lines(format_id: str) -> list[bytes]:
    return (FIXTURES / f"{format_id}.jsonl").read_bytes().splitlines()


def decode_all(decoder, format_id, ctx):
    return [c for raw in lines(format_id) for c in decoder.decode(raw, ctx)]


# ---------------------------------------------------------------- oms_shareplex fixtures


def test_oms_ops():
    assert [c.op for c in decode_all(OMS, "oms_shareplex", TYPED)] == [
        "INSERT",
        "UPDATE",
        "DELETE",
        "DDL",
        "INSERT",
        "UPDATE",
        "DELETE",
    ]


def test_oms_insert_exact_with_rowid_key():
    [change] = OMS.decode(lines("oms_shareplex")[0], TYPED)
    assert change == Change(
        op="INSERT",
        db="mock_database",
        table="mock_table",
        key_columns=("__rowid",),
        before=None,
        after={**INSERT_ROW, "__rowid": ROWID},
        col_types=TYPES,
        seq=(123456789, 1),
        event_time="2020-11-25T00:01:02Z",
        txn="shareplex_transaction_id",
        detail="ins",
    )


def test_oms_update_partial_after_and_key_before():
    [change] = OMS.decode(lines("oms_shareplex")[1], KEYED)
    assert change.key_columns == ("col14", "col6")
    assert change.after == {"col2": "hello world 2020"} and change.changed == ("col2",)
    assert change.before == {**INSERT_ROW, "col5": "9.9999999999999308"}
    assert change.seq == (123456789, 2)


def test_oms_update_untyped_keeps_text_and_uses_rowid():
    [change] = OMS.decode(lines("oms_shareplex")[1], DecodeContext())
    assert change.after == {"col2": "hello world 2020", "__rowid": ROWID}
    assert change.changed == ("col2", "__rowid") and change.col_types is None
    assert change.before["col5"] == "9.9999999999999308" and change.before["col18"] == "1606233662.012345"


def test_oms_ddl_has_no_seq_and_no_rowid_key():
    [change] = OMS.decode(lines("oms_shareplex")[3], TYPED)
    assert change == Change(
        op="DDL",
        db="connector_test",
        table="all_mysql_type_test",
        seq=(),
        ddl="ALTER TABLE connector_test.all_mysql_type_test ADD COLUMN c90 VARCHAR(30) DEFAULT \"test\" comment 'test'",
        event_time="2022-12-16T15:53:29Z",
        detail="ddl",
    )


def test_oms_seed_001_long_decimal_exact():
    [change] = OMS.decode(lines("oms_shareplex")[4], TYPED)
    assert change.after["col5"].startswith("0." + "0" * 307 + "99999999999999990932662533724846")
    assert change.after["col5"].endswith("2452392578125")


@pytest.mark.parametrize("ctx", [TYPED, KEYED])
def test_oms_mirror(ctx):
    changes = decode_all(OMS, "oms_shareplex", ctx)
    assert MirrorModel().add_all(changes).rows("mock_database.mock_table") == []
    [row] = MirrorModel().add_all(changes[:2]).rows("mock_database.mock_table")
    assert row["col2"] == "hello world 2020" and row["col17"] == "10223372036854775806"


# ---------------------------------------------------------------- dts_shareplex fixtures


def test_dts_fixture_exact():
    changes = decode_all(DTS, "dts_shareplex", DecodeContext())
    assert changes[0] == Change(
        op="INSERT",
        db="CL_BIZ1",
        table="MIO_LOG",
        key_columns=("__rowid",),
        after={"MIO_LOG_ID": "32539737", "__rowid": "AAATGpAAIAAItcIAAA"},
        seq=(14589063118712, 1),
        event_time="2017-06-16T14:24:34Z",
        txn="7.0.411499",
        detail="ins",
    )
    assert changes[1].after == {"CNTR_NO": "1171201606", "__rowid": "AAATGpAAIAAItcIAAB"}
    assert changes[1].before["CNTR_NO"] == "1171201606syui26" and changes[1].before["POL_CODE"] is None
    assert changes[2].op == "DELETE" and changes[2].before["CG_NO"] is None


def test_dts_mirror_with_configured_key():
    ctx = DecodeContext(
        tables={"cl_biz1.mio_log": TableSpec(key=("MIO_LOG_ID",), columns={"MIO_LOG_ID": "number(19)"})}
    )
    changes = decode_all(DTS, "dts_shareplex", ctx)
    assert [c.key_columns for c in changes] == [("MIO_LOG_ID",)] * 3
    rows_ = MirrorModel().add_all(changes).rows("CL_BIZ1.MIO_LOG")
    # The partial UPDATE of row 32537893 (not held by the mirror) lands on its before-image (`key`),
    # so the row keeps its key and the columns the message does not carry; only CNTR_NO changes.
    assert rows_ == [
        {
            "MIO_LOG_ID": "32537893",
            "PLNMIO_REC_ID": "31557806",
            "POL_CODE": None,
            "CNTR_TYPE": None,
            "CNTR_NO": "1171201606",
        },
        {"MIO_LOG_ID": "32539737"},
    ]


def _dts(op: str, data=None, key=None, **meta) -> bytes:
    msg = {
        "meta": {
            "op": op,
            "table": "S.T",
            "scn": "100",
            "seq": 2,
            "rowid": "AAAB",
            "time": "2017-06-16T14:24:34Z",
            **meta,
        },
        "data": data if data is not None else {},
    }
    if key is not None:
        msg["key"] = key
    return json.dumps(msg).encode()


def test_dts_long_op_names():
    ctx = DecodeContext()
    assert DTS.decode(_dts("INSERT", {"A": "1"}), ctx)[0].op == "INSERT"
    assert DTS.decode(_dts("TRUNCATE"), ctx)[0] == Change(
        op="TRUNCATE", db="S", table="T", seq=(100, 2), event_time="2017-06-16T14:24:34Z", detail="TRUNCATE"
    )
    drop = DTS.decode(
        json.dumps(
            {"meta": {"op": "DROP COLUMN", "table": "S.T"}, "data": {}, "sql": {"ddl": "ALTER TABLE T DROP COLUMN B"}}
        ).encode(),
        ctx,
    )[0]
    assert (drop.op, drop.ddl, drop.detail) == ("DDL", "ALTER TABLE T DROP COLUMN B", "DROP COLUMN")
    before = DTS.decode(_dts("UPDATE BEFORE", {"A": "1", "B": "x"}), ctx)[0]
    assert (before.op, before.detail, before.table) == ("HEARTBEAT", "UPDATE BEFORE", "T")
    after = DTS.decode(_dts("UPDATE AFTER", {"B": "y"}, key={"A": "1", "B": "x"}), ctx)[0]
    assert (after.op, after.after, after.changed) == ("UPDATE", {"B": "y", "__rowid": "AAAB"}, ("B", "__rowid"))


def test_dts_oracle_date_with_time():
    ctx = DecodeContext(tables={"s.t": TableSpec(key=("A",), columns={"A": "number", "D": "date"})})
    change = DTS.decode(_dts("ins", {"A": "1", "D": "2017-06-16 14:24:34"}), ctx)[0]
    assert change.after == {"A": "1", "D": "2017-06-16T14:24:34"}


def test_oms_rejects_dts_only_ops():
    with pytest.raises(Reject, match="unknown op 'TRUNCATE'"):
        OMS.decode(_dts("TRUNCATE"), DecodeContext())


# ---------------------------------------------------------------- round trips


@st.composite
def shareplex_changes(draw, rowid: bool):
    op = draw(st.sampled_from(["INSERT", "UPDATE", "DELETE"]))
    before = draw(rows()) if op != "INSERT" else None
    after = draw(rows()) if op != "DELETE" else None
    changed = None
    if op == "UPDATE":
        cols = draw(st.lists(st.sampled_from(list(COL_TYPES)), unique=True, min_size=1))
        after = {c: after[c] for c in cols}
        changed = tuple(cols)
    key = ("id",)
    if rowid:
        rid = draw(st.text(alphabet="ABCDEFGHIJ+/", min_size=1, max_size=18))
        for image in (before, after):
            if image is not None:
                image["__rowid"] = rid
        key = ("__rowid",)
        changed = changed + ("__rowid",) if changed else None
    seq = draw(st.tuples(st.integers(0, 10**15), st.integers(0, 10**6)))  # a row change needs its scn
    return Change(
        op=op,
        db="S",
        table="T",
        key_columns=key,
        before=before,
        after=after,
        changed=changed,
        col_types=dict(COL_TYPES),
        seq=seq,
        event_time=draw(st.none() | epoch_instants),
        txn=draw(st.none() | st.just("7.0.411499")),
        detail={"INSERT": "ins", "UPDATE": "upd", "DELETE": "del"}[op],
    )


@pytest.mark.parametrize("decoder", [OMS, DTS])
@settings(max_examples=50, deadline=None)
@given(change=shareplex_changes(rowid=False))
def test_round_trip_configured_key(decoder, change):
    ctx = DecodeContext(tables={"s.t": TableSpec(key=("id",), columns=COL_TYPES)})
    assert decoder.decode(decoder.encode(change, ctx), ctx) == [change]


@settings(max_examples=50, deadline=None)
@given(change=shareplex_changes(rowid=True))
def test_round_trip_rowid_key(change):
    ctx = DecodeContext(tables={"s.t": TableSpec(columns=COL_TYPES)})
    assert OMS.decode(OMS.encode(change, ctx), ctx) == [change]


@pytest.mark.parametrize("decoder", [OMS, DTS])
def test_ddl_round_trip(decoder):
    change = Change(op="DDL", db="S", table="T", ddl="DROP TABLE T", detail="ddl", event_time="2022-12-16T15:53:29Z")
    assert decoder.decode(decoder.encode(change, DecodeContext()), DecodeContext()) == [change]


# ---------------------------------------------------------------- bad input


BAD = [
    b"{",
    b"not json",
    b"[]",
    b"3",
    b"\xff\xfe",
    b"[" * 10000 + b"]" * 10000,
    b'{"data": {}}',
    b'{"meta": {"op": "ins"}, "data": {"a": 1}}',
    b'{"meta": {"op": "merge", "table": "a.b"}, "data": {}}',
    b'{"meta": {"op": "ins", "table": "a.b"}, "data": []}',
    b'{"meta": {"op": "ins", "table": "a.b"}}',
    b'{"meta": {"op": "ins", "table": "a.b", "scn": "x1"}, "data": {}}',
    b'{"meta": {"op": "ins", "table": "a.b", "time": "soon"}, "data": {}}',
    b'{"meta": {"op": 5, "table": "a.b"}, "data": {}}',
    b'{"meta": "x"}',
]


@pytest.mark.parametrize("decoder", [OMS, DTS])
@pytest.mark.parametrize("raw", BAD)
def test_bad_input_rejects(decoder, raw):
    with pytest.raises(Reject):
        decoder.decode(raw, DecodeContext())
