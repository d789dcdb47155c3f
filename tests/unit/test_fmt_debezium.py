"""OMS Debezium family: seed fixtures, conformance files, bad input, round trips."""

from __future__ import annotations

import base64
import math
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.testing.model import MirrorModel

SEEDS = Path(__file__).resolve().parents[1] / "fixtures" / "seeds"
CONF = Path("/work/shared/conformance/flink")
DBZ, FLAT, SMT = (get_decoder(f) for f in ("oms_debezium", "oms_debezium_flatten", "oms_debezium_smt"))
# The seed's real MySQL types (seed 000 table): c03 DECIMAL, c04.. BLOBs, c21 TIMESTAMP, c22 DATE, c23 TIME, c24 DATETIME.
SEED_TYPES = {
    "c01": "int",
    "c03": "decimal(10,5)",
    "c04": "blob",
    "c19": "varbinary(16)",
    "c21": "timestamp",
    "c22": "date",
    "c23": "time",
    "c24": "datetime",
    "c25": "year",
    "c09": "double",
}
TYPED = DecodeContext(tables={"test.table_name": TableSpec(key=("c01",), columns=SEED_TYPES)})


def lines(fid):
    return [line.encode() for line in (SEEDS / f"{fid}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def decode_all(decoder, raws, ctx):
    return [c for raw in raws for c in decoder.decode(raw, ctx)]


def test_seed_schema_payload_examples_untyped():
    ch = decode_all(DBZ, lines("oms_debezium"), DecodeContext())
    assert [c.op for c in ch] == [
        "INSERT",
        "INSERT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "HEARTBEAT",
        "INSERT",
        "INSERT",
        "DELETE",
        "DELETE",
    ]
    ins = ch[2]
    assert (ins.db, ins.table, ins.key_columns) == ("test", "table_name", ())
    assert ins.seq == (1668491600, 703223)  # pos "703223@1668491600" → (seconds, first part)
    assert ins.event_time == "2022-11-15T05:53:41Z"  # source.ts_ms milliseconds
    # schema present: bytes are Base16 → Base64; primitive-only schema keeps DATE/TIME as numbers
    assert ins.after["c04"] == "YQ==" and ins.after["c20"] == "ag==" and ins.after["c19"] == "aQAAAAAAAA=="
    assert ins.after["c03"] == "1241.41000" and ins.after["c10"] == "2.4212412" and ins.after["c22"] == "19311"
    assert ins.col_types["c04"] == "bytes" and ins.col_types["c09"] == "double" and ins.col_types["c01"] == "int"
    # odd-length hex (BIT with its leading zero trimmed, seed 000 note) gets its nibble back
    assert ch[4].before["c19"] == "BpAAAAAA"
    assert ch[5].detail == "HEARTBEAT" and ch[5].table is None and ch[5].seq == (1668496120, 553140)
    # payload-only and nothing configured: exact text
    assert ch[7].after["c22"] == "19311" and ch[7].col_types is None and ch[7].after["c15"] == "65"
    assert ch[0].event_time == "2022-11-15T07:29:27.188Z"  # full sync: source.ts_ms 0 → envelope ts_ms


def test_seed_with_configured_types():
    ch = decode_all(DBZ, lines("oms_debezium")[2:5], TYPED)
    ins, upd, dele = ch
    assert ins.key_columns == ("c01",)
    assert ins.after["c22"] == "2022-11-15" and ins.after["c23"] == "10:01:00"
    assert ins.after["c24"] == "2022-11-15T05:12:11" and ins.after["c21"] == "2022-11-15T05:12:11Z"
    assert ins.after["c03"] == "1241.41000" and ins.col_types["c22"] == "date"
    assert upd.before["c11"] == "a" and upd.after["c11"] == "aa" and upd.changed is None
    rows = MirrorModel().add_all(ch).rows("test.table_name")
    assert [r["c01"] for r in rows] == ["2"]  # c01=1 updated then deleted; c01=2 inserted


def test_payload_only_types_from_configuration():
    ctx = DecodeContext(tables={"test.table1": TableSpec(key=("c01",), columns={**SEED_TYPES, "c15": "blob"})})
    ins = DBZ.decode(lines("oms_debezium")[7], ctx)[0]
    assert ins.after["c15"] == "ZQ==" and ins.after["c22"] == "2022-11-15" and ins.after["c25"] == "2022"
    assert ins.col_types["c15"] == "blob"


def test_flatten_and_smt_seed_examples():
    ch = decode_all(FLAT, lines("oms_debezium_flatten"), TYPED)
    assert [c.op for c in ch] == ["INSERT", "INSERT", "UPDATE", "DELETE", "HEARTBEAT"]
    assert (
        ch[2].before["c19"] == base64.b64encode(bytes.fromhex("0690" + "00" * 15)).decode()
        and ch[2].after["c11"] == "aa"
    )
    assert MirrorModel().add_all(ch).rows("test.table_name")[0]["c01"] == "2"
    with pytest.raises(Reject, match="oms_debezium"):
        FLAT.decode(lines("oms_debezium")[1], DecodeContext())
    ctx = DecodeContext(default_table="shop.t", tables={"shop.t": TableSpec(key=("field1",))})
    sm = decode_all(SMT, lines("oms_debezium_smt"), ctx)
    assert [(c.op, c.detail) for c in sm] == [("UPDATE", "__deleted=false")] * 3 + [("DELETE", "__deleted=true")]
    assert sm[0].after == {"field1": "after_value1", "field2": "after_value2"} and sm[0].seq == ()
    assert sm[3].before == {"field1": "after_value1", "field2": "after_value2"} and sm[3].after is None
    assert MirrorModel().add_all(sm).rows("shop.t") == []
    with pytest.raises(Reject, match="--table"):
        SMT.decode(lines("oms_debezium_smt")[0], DecodeContext())


@pytest.mark.parametrize("decoder", [DBZ, FLAT])
def test_conformance_schema_exclude(decoder):
    ctx = DecodeContext(tables={"inventory.products": TableSpec(key=("id",))})
    raws = [l for l in (CONF / "debezium-data-schema-exclude.txt").read_bytes().splitlines() if l.strip()]
    rows = MirrorModel().add_all(decode_all(decoder, raws, ctx)).rows("inventory.products")
    assert [r["id"] for r in rows] == [str(i) for i in range(101, 111)]
    sums = defaultdict(float)
    for r in rows:
        sums[r["name"]] += float(r["weight"])
    expected = {
        "scooter": 3.14,
        "car battery": 8.1,
        "12-pack drill bits": 0.8,
        "hammer": 2.625,
        "rocks": 5.1,
        "jacket": 0.6,
        "spare tire": 22.2,
    }
    assert sums.keys() == expected.keys()
    assert all(math.isclose(sums[k], v, rel_tol=1e-6) for k, v in expected.items())


def test_conformance_product_changelog():
    ctx = DecodeContext(tables={"inventory.products": TableSpec(key=("product_id",))})
    raws = [l for l in (CONF / "product_changelog.txt").read_bytes().splitlines() if l.strip()]
    ch = decode_all(DBZ, raws, ctx)
    assert len(ch) == len(raws) and ch[2].seq == (3, 2443, 0)
    assert MirrorModel().add_all(ch).rows("inventory.products") == []


BAD = [
    b'{"payload": {"op": "c"',
    b"not json",
    b"[1,2]",
    b'"x"',
    b"null",
    b"\xff\xfe",
    b'{"payload": {"op": "c", "source": {"db": "a"}, "after": {"x": 1}}}',
    b'{"payload": {"op": "zz", "source": {"db": "a", "table": "t"}, "after": {}}}',
    b"[" * 10000 + b"]" * 10000,
    b'{"payload": 5}',
    b'{"op": "c", "source": {"table": "t", "pos": "x@y"}, "after": {}}',
    b'{"op": "u", "source": {"table": "t"}, "before": null, "after": "x"}',
    b'{"schema": {"fields": [{"field": "after", "fields": [{"field": "d", "type": "int32", "name": "io.debezium.time.Date"}]}]},'
    b' "payload": {"op": "c", "source": {"table": "t"}, "after": {"d": "zz"}}}',
    b'{"__deleted": "maybe"}',
]


@pytest.mark.parametrize("raw", BAD)
@pytest.mark.parametrize("decoder", [DBZ, FLAT])
def test_bad_inputs_reject(decoder, raw):
    with pytest.raises(Reject):
        decoder.decode(raw, DecodeContext(default_table="a.t", max_message_bytes=100_000))


@pytest.mark.parametrize("raw", BAD[:6] + BAD[8:9] + [b'{"__deleted": "maybe"}', b'{"d": "x"}'])
def test_bad_inputs_reject_smt(raw):
    # any JSON object is a row to DebeziumSmt; non-objects, bad flags and mistyped values are not
    ctx = DecodeContext(default_table="a.t", tables={"a.t": TableSpec(columns={"d": "date"})})
    with pytest.raises(Reject):
        SMT.decode(raw, ctx)


def test_oversize_rejected():
    with pytest.raises(Reject, match="over the limit"):
        DBZ.decode(b" " * 200, DecodeContext(max_message_bytes=100))


TYPES = [
    "int",
    "bigint",
    "bigint unsigned",
    "decimal(38,24)",
    "double",
    "varchar(20)",
    "blob",
    "date",
    "time",
    "datetime",
    "timestamp",
    "json",
    "boolean",
]


def _value(t):
    return {
        "int": st.integers(-(2**31), 2**31 - 1).map(str),
        "bigint": st.integers(-(2**63), 2**63 - 1).map(str),
        "bigint unsigned": st.integers(0, 2**64 - 1).map(str),
        "decimal(38,24)": st.decimals(allow_nan=False, allow_infinity=False, places=24).map(lambda d: format(d, "f")),
        "double": st.floats(allow_nan=False, allow_infinity=False).map(repr),
        "varchar(20)": st.text(),
        "blob": st.binary(max_size=20).map(lambda b: __import__("base64").b64encode(b).decode()),
        "date": st.dates(min_value=__import__("datetime").date(1000, 1, 1)).map(lambda d: d.isoformat()),
        "time": st.times().map(lambda t: t.isoformat()),
        "datetime": st.datetimes(min_value=__import__("datetime").datetime(1000, 1, 1)).map(lambda d: d.isoformat()),
        "timestamp": st.datetimes(min_value=__import__("datetime").datetime(1970, 1, 1)).map(
            lambda d: d.isoformat() + "Z"
        ),
        "json": st.just('{"a": [1, 2.50]}'),
        "boolean": st.sampled_from(["true", "false"]),
    }[t]


def _canon(t, v):
    from pipelines import values as V

    return V.canonical(V.family(t), v)


@st.composite
def changes(draw):
    cols = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=6, unique=True))
    types = {f"c{i}": t for i, t in enumerate(cols)}
    row = {c: (None if draw(st.booleans()) and c != "c0" else _canon(t, draw(_value(t)))) for c, t in types.items()}
    op = draw(st.sampled_from(["INSERT", "UPDATE", "DELETE", "SNAPSHOT"]))
    ms = draw(st.integers(1, 2**41))
    from pipelines import values as V

    ch = Change(
        op=op,
        db="d",
        table="t",
        key_columns=("c0",),
        col_types=types,
        seq=(draw(st.integers(1, 2**31)), draw(st.integers(0, 2**31))),
        event_time=V.instant_from_epoch(ms, "ms"),
        detail={"INSERT": "c", "UPDATE": "u", "DELETE": "d", "SNAPSHOT": "r"}[op],
    )
    if op in ("INSERT", "SNAPSHOT"):
        ch.after = row
    elif op == "DELETE":
        ch.before = row
    else:
        ch.before, ch.after = row, dict(row)
    return ch


@settings(max_examples=50, deadline=None)
@given(changes())
def test_round_trip_debezium_and_flatten(change):
    ctx = DecodeContext(tables={"d.t": TableSpec(key=("c0",), columns=change.col_types)})
    assert DBZ.decode(DBZ.encode(change, ctx), ctx) == [change]
    assert FLAT.decode(FLAT.encode(change, ctx), ctx) == [change]


@settings(max_examples=50, deadline=None)
@given(changes())
def test_round_trip_smt(change):
    ctx = DecodeContext(default_table="d.t", tables={"d.t": TableSpec(key=("c0",), columns=change.col_types)})
    image = change.before if change.op == "DELETE" else change.after
    expected = Change(
        op="DELETE" if change.op == "DELETE" else "UPDATE",
        db="d",
        table="t",
        key_columns=("c0",),
        before=image if change.op == "DELETE" else None,
        after=None if change.op == "DELETE" else image,
        col_types=change.col_types,
        detail="__deleted=true" if change.op == "DELETE" else "__deleted=false",
    )
    assert SMT.decode(SMT.encode(change, ctx), ctx) == [expected]


def test_round_trip_untyped_heartbeat():
    hb = Change(op="HEARTBEAT", seq=(1668496120, 553140), event_time="2022-11-15T07:08:40Z", detail="HEARTBEAT")
    assert DBZ.decode(DBZ.encode(hb, DecodeContext()), DecodeContext()) == [hb]
