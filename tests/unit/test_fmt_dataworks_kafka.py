"""DataWorks full-database real-time sync to Kafka (seed 002): fixtures, mirror, rejects, round trip."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.formats.dataworks_kafka import DECODER, ROW_ID
from pipelines.testing.model import MirrorModel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "dataworks_kafka.jsonl"
LINES = FIXTURE.read_bytes().splitlines()
CTX = DecodeContext()
NOPK_TYPES = {"name": "string", "job": "string", "sex": "string", ROW_ID: "long"}


def decode(raw: bytes, ctx: DecodeContext = CTX) -> list[Change]:
    return DECODER.decode(raw, ctx)


def row(sex: str) -> dict:
    return {"name": "name11", "job": "job11", "sex": sex, ROW_ID: "15"}


def test_fixture_has_every_seed_example():
    assert len(LINES) == 8


def test_overall_example_is_a_key_changing_update():
    [c] = decode(LINES[0])
    assert c == Change(
        op="UPDATE",
        db="myDatabase",
        schema="mySchema",
        table="tableName",
        key_columns=("id",),
        before={
            "id": "111",
            "name": "scooter",
            "binData": "aGVsbG8gd29ybGQ=",
            "ts": "2020-05-24T10:14:29Z",
            "rowid": "AAIUMPAAFAACxExAAE",
        },
        after={
            "id": "222",
            "name": "donald",
            "binData": "aGVsbG8gd29ybGQ=",
            "ts": "2020-05-24T10:14:29Z",
            "rowid": "AAIUMPAAFAACxExAAE",
        },
        col_types={"id": "long", "name": "string", "binData": "bytes", "ts": "timestamp", "rowid": "string"},
        seq=(1590315269000000007, 1),
        event_time="2020-05-24T10:14:29Z",
        txn="2345678",
        detail="UPDATE_AFTER",
    )


def test_ddl_and_heartbeat():
    [ddl] = decode(LINES[1])
    assert (ddl.op, ddl.table, ddl.ddl, ddl.detail, ddl.seq) == (
        "DDL",
        "tableName",
        "ALTER TABLE mySchema.tableName ADD COLUMN note VARCHAR(20)",
        "ALTER",
        (1590315269000000008, 1),
    )
    [hb] = decode(LINES[2])
    assert hb == Change(op="HEARTBEAT", seq=(), event_time="2021-05-08T07:07:39Z", detail="MHEARTBEAT")


def test_keyless_insert_uses_hidden_row_id():
    [c] = decode(LINES[3])
    assert c == Change(
        op="INSERT",
        db="pkset_test",
        table="pkset_test_no_pk",
        key_columns=(ROW_ID,),
        after=row("man"),
        col_types=NOPK_TYPES,
        seq=(1620457642589000000, 1),
        event_time="2021-05-08T07:11:36Z",
        detail="INSERT",
    )


def test_split_update_is_delete_then_full_update_with_shared_sequence():
    [b] = decode(LINES[4])
    [a] = decode(LINES[5])
    assert (b.op, b.before, b.after, b.detail, b.seq) == (
        "DELETE",
        row("man"),
        None,
        "UPDATE_BEFOR",
        (1620457642589000001, 0),
    )
    assert (a.op, a.before, a.after, a.changed, a.detail, a.seq) == (
        "UPDATE",
        None,
        row("woman"),
        None,
        "UPDATE_AFTER",
        (1620457642589000001, 1),
    )


def test_single_message_update_and_delete():
    [u] = decode(LINES[6])
    assert (u.op, u.before, u.after, u.seq) == ("UPDATE", row("man"), row("woman"), (1620457642589000001, 1))
    [d] = decode(LINES[7])
    assert (d.op, d.before, d.after, d.detail) == ("DELETE", row("woman"), None, "DELETE")


def mirror(lines: list[bytes], table: str = "pkset_test.pkset_test_no_pk") -> list[dict]:
    return MirrorModel().add_all(c for raw in lines for c in decode(raw)).rows(table)


def test_mirror_split_update_and_single_update_agree():
    assert mirror([LINES[3], LINES[4], LINES[5]]) == [row("woman")]
    assert mirror([LINES[3], LINES[6]]) == [row("woman")]
    assert mirror([LINES[3], LINES[4], LINES[5], LINES[7]]) == []
    # the two halves are ordered by the message (phase), not by arrival
    assert mirror([LINES[3], LINES[5], LINES[4]]) == [row("woman")]


def _msg(op: str, before: dict | None, after: dict | None, seq: str) -> bytes:
    img = lambda d: None if d is None else {"dataColumn": d}  # noqa: E731
    return json.dumps(
        {
            "schema": {
                "dataColumn": [{"name": "id", "type": "LONG"}, {"name": "v", "type": "STRING"}],
                "primaryKey": ["id"],
                "source": {"dbName": "d", "tableName": "t"},
            },
            "payload": {
                "before": img(before),
                "after": img(after),
                "sequenceId": seq,
                "op": op,
                "timestamp": {"eventTime": 1620457896000},
                "ddl": None,
            },
        }
    ).encode()


def test_mirror_key_change_split_and_single():
    ins = _msg("INSERT", None, {"id": 111, "v": "a"}, "100")
    split = [
        _msg("UPDATE_BEFOR", {"id": 111, "v": "a"}, None, "101"),
        _msg("UPDATE_AFTER", None, {"id": 222, "v": "b"}, "101"),
    ]
    single = _msg("UPDATE_AFTER", {"id": 111, "v": "a"}, {"id": 222, "v": "b"}, "101")
    assert mirror([ins, *split], "d.t") == [{"id": "222", "v": "b"}]
    assert mirror([ins, *reversed(split)], "d.t") == [{"id": "222", "v": "b"}]
    assert mirror([ins, single], "d.t") == [{"id": "222", "v": "b"}]
    assert mirror([LINES[0]], "myDatabase.mySchema.tableName")[0]["id"] == "222"  # an Oracle schema is part of the name


def test_configured_key_wins_over_row_id():
    ctx = DecodeContext(tables={"pkset_test.pkset_test_no_pk": TableSpec(key=("name",))})
    assert decode(LINES[3], ctx)[0].key_columns == ("name",)


def _one(dtype: str, value) -> bytes:
    return json.dumps(
        {
            "schema": {
                "dataColumn": [{"name": "c", "type": dtype}],
                "primaryKey": None,
                "source": {"dbName": "d", "tableName": "t"},
            },
            "payload": {"after": {"dataColumn": {"c": value}}, "sequenceId": "1", "op": "INSERT"},
        }
    ).encode()


def test_six_types():
    assert decode(_one("DATE", 1590315269123))[0].after == {"c": "2020-05-24T10:14:29.123Z"}
    assert decode(_one("BYTES", "aGVsbG8="))[0].after == {"c": "aGVsbG8="}
    assert decode(_one("BOOLEAN", True))[0].after == {"c": "true"}
    assert decode(
        b'{"schema":{"dataColumn":[{"name":"c","type":"DOUBLE"}],"source":{"tableName":"t"}},'
        b'"payload":{"after":{"dataColumn":{"c":9.999999999999999093266253}},"sequenceId":"1","op":"INSERT"}}'
    )[0].after == {"c": "9.999999999999999093266253"}
    assert decode(_one("LONG", 9223372036854775807))[0].after == {"c": "9223372036854775807"}
    assert decode(_one("STRING", "10223372036854775806"))[0].after == {"c": "10223372036854775806"}
    assert decode(_one("STRING", None))[0].after == {"c": None}


@pytest.mark.parametrize(
    "raw, reason",
    [
        (_one("LONG", 10223372036854775806), "64-bit"),
        (_one("DATE", "2020-01-01"), "epoch milliseconds"),
        (_one("BYTES", "not base64!"), "Base64"),
        (_one("BOOLEAN", "maybe"), "boolean"),
        (_msg("UPSERT", None, {"id": 1}, "1"), "unknown op 'UPSERT'"),
        (_msg("INSERT", None, {"id": 1}, None), "sequenceId"),
        (_msg("DELETE", None, {"id": 1}, "1"), "payload.before"),
        (
            b'{"schema":{"source":{"dbName":"d"}},"payload":{"op":"INSERT","sequenceId":"1","after":{"dataColumn":{}}}}',
            "table",
        ),
        (
            b'{"payload":{"op":"INSERT","sequenceId":"1-2","after":{"dataColumn":{}}},"schema":{"source":{"tableName":"t"}}}',
            "sequenceId",
        ),
    ],
)
def test_rejects(raw, reason):
    with pytest.raises(Reject, match=reason):
        decode(raw)


BAD = [
    b'{"schema": {',
    b"not json",
    b"[1,2]",
    b"3",
    b"\xff\xfe",
    b"[" * 10000 + b"]" * 10000,
    b'{"payload": 5}',
    b'{"payload": {"op": 7}}',
    b'{"schema": [], "payload": {"op": "INSERT"}}',
    b'{"payload": {"op": "INSERT", "sequenceId": "1", "after": {"dataColumn": []}}, "schema": {"source": {"tableName": "t"}}}',
    b'{"payload": {"op": "INSERT", "sequenceId": "1", "after": {"dataColumn": {}}, "timestamp": {"eventTime": "x"}}, "schema": {"source": {"tableName": "t"}}}',
    b'{"payload": {"op": "INSERT", "sequenceId": "1", "after": {"dataColumn": {}}}, "schema": {"primaryKey": [1], "source": {"tableName": "t"}}}',
    b'{"payload": {"op": "INSERT", "sequenceId": "1", "after": {"dataColumn": {}}}, "schema": {"dataColumn": [1], "source": {"tableName": "t"}}}',
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_inputs_only_reject(raw):
    with pytest.raises(Reject):
        decode(raw)
    with pytest.raises(Reject):
        decode(raw, DecodeContext(max_message_bytes=4))


# ---------------------------------------------------------------- round trip

_VALUES = {
    "long": st.integers(-(2**63), 2**63 - 1).map(str),
    "double": st.decimals(allow_nan=False, allow_infinity=False, places=None)
    .map(str)
    .filter(lambda s: not s.startswith("-0") or s == "-0"),
    "boolean": st.sampled_from(["true", "false"]),
    "timestamp": st.integers(-2208988800000, 4102444800000).map(
        lambda ms: __import__("pipelines.values", fromlist=["x"]).instant_from_epoch(ms, "ms")
    ),
    "bytes": st.binary(max_size=20).map(lambda b: base64.b64encode(b).decode()),
    "string": st.one_of(st.text(max_size=20), st.just("10223372036854775806"), st.just("")),
}


@st.composite
def changes(draw):
    names = draw(st.lists(st.text("abcxyz_", min_size=1, max_size=6), min_size=1, max_size=5, unique=True))
    types = {n: draw(st.sampled_from(sorted(_VALUES))) for n in names}
    image = lambda: {n: draw(st.one_of(st.none(), _VALUES[t])) for n, t in types.items()}  # noqa: E731
    vendor = draw(st.sampled_from(["INSERT", "UPDATE_BEFOR", "UPDATE_AFTER", "UPDATE_AFTER1", "DELETE"]))
    op = {"INSERT": "INSERT", "UPDATE_BEFOR": "DELETE", "DELETE": "DELETE"}.get(vendor, "UPDATE")
    before = image() if vendor in ("UPDATE_BEFOR", "DELETE", "UPDATE_AFTER1") else None
    after = image() if vendor.startswith(("INSERT", "UPDATE_AFTER")) else None
    seq = draw(st.integers(0, 2**63 - 1))
    return Change(
        op=op,
        db=draw(st.text(max_size=8)),
        table=draw(st.text(min_size=1, max_size=8)),
        key_columns=(names[0],),
        before=before,
        after=after,
        col_types=types,
        seq=(seq, 0 if vendor == "UPDATE_BEFOR" else 1),
        event_time=draw(_VALUES["timestamp"]),
        txn=draw(st.one_of(st.none(), st.just("77"))),
        detail=vendor.rstrip("1"),
    )


@settings(max_examples=50, deadline=None)
@given(changes())
def test_round_trip(change):
    assert decode(DECODER.encode(change, CTX)) == [change]
