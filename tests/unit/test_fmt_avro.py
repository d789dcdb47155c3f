"""OMS Avro, DTS Avro (Record.avsc, both generations) and DRS Avro (configured schema)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats import get_decoder
from pipelines.formats._dts_record import RECORD_SCHEMA
from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.testing.model import MirrorModel

ROOT = Path(__file__).resolve().parents[2]
AVRO = ROOT / "tests" / "fixtures" / "avro"
DRS_SCHEMA = str(ROOT / "conf" / "schemas" / "drs_record.avsc")
OMS, DTS, DRS = (get_decoder(f) for f in ("oms_avro", "dts_avro", "drs_avro"))
DRS_CTX = DecodeContext(options={"schema": DRS_SCHEMA})


def decode_dir(decoder, sub, ctx=DecodeContext(), pattern="*.avro"):
    return [c for p in sorted((AVRO / sub).glob(pattern)) for c in decoder.decode(p.read_bytes(), ctx)]


def test_embedded_schema_is_record_avsc():
    shared = Path("/work/shared/schemas/dts-avro/Record.avsc")
    if not shared.exists():
        pytest.skip("shared schema not mounted")
    canon = fastavro.schema.to_parsing_canonical_form
    assert canon(json.loads(shared.read_text())) == canon(RECORD_SCHEMA)


def test_oms_seed_examples():
    ch = decode_dir(OMS, "oms_avro")
    assert [(c.op, c.detail) for c in ch] == [
        ("SNAPSHOT", "INIT"),
        ("INSERT", "INSERT"),
        ("UPDATE", "UPDATE"),
        ("DELETE", "DELETE"),
        ("DDL", "DDL"),
    ]
    init, ins, upd, dele, ddl = ch
    assert init.after == {"id": "1", "bid": "11", "name": "yyy", "address": None} and init.seq == (0,)
    assert init.col_types == {"id": "decimal(1,0)", "bid": "int", "name": "varchar", "address": "char"}
    assert (ins.db, ins.table, ins.key_columns) == ("test", "test_tbl", ("id",))
    assert ins.seq == (170236922143600000,) and ins.event_time == "2023-12-12T08:18:12Z"
    assert upd.before == {"id": "3", "bid": "22", "name": "xxx"} and upd.after["bid"] == "44"
    assert dele.before["bid"] == "44" and dele.after is None
    assert ddl.ddl == "alter table multi_db_multi_tbl add column address char(20) default null"
    rows = MirrorModel().add_all(ch).rows("test.test_tbl")
    assert rows == [{"id": "1", "bid": "11", "name": "yyy", "address": None}, {"id": "2", "bid": "12", "name": "xxx"}]


@pytest.mark.parametrize("pattern", ["*_born.avro", "0[1-6]_[a-z]*[a-z].avro"])
def test_dts_both_generations(pattern):
    files = sorted((AVRO / "dts_avro").glob(pattern))
    if pattern != "*_born.avro":
        files = [p for p in files if not p.name.endswith("_born.avro")]
    ch = [c for p in files for c in DTS.decode(p.read_bytes(), DecodeContext())]
    assert [(c.op, c.detail) for c in ch] == [
        ("INSERT", "INSERT"),
        ("UPDATE", "UPDATE"),
        ("DELETE", "DELETE"),
        ("DDL", "DDL"),
        ("HEARTBEAT", "BEGIN"),
        ("HEARTBEAT", "HEARTBEAT"),
    ]
    ins, upd = ch[0], ch[1]
    assert ins.after == {
        "id": "7",
        "u64": "10223372036854775806",
        "price": "9.999999999999999093266253",
        "city": "杭州",
        "ratio": "0.1",
        "created": "2020-11-24T16:01:02.012345Z",
        "born": "2020-11-25",
        "at": "2020-11-25T00:01:02.5",
        "doc": '{"a": [1, 2.50]}',
        "pic": base64.b64encode(b"hello world").decode(),
        "note": None,
    }
    assert ins.col_types["u64"] == "bigint unsigned" and ins.col_types["price"] == "decimal(38,24)"
    assert ins.txn == "881" and ins.seq == (1001,) and ins.event_time == "2020-11-24T16:01:02Z"
    assert upd.after["city"] == "上海" and "note" not in upd.after  # EmptyObject NONE: not carried
    assert upd.changed == tuple(c for c in ins.after if c != "note")
    assert MirrorModel().add_all(ch).rows("shop.orders") == []


def test_drs_seed_examples():
    ch = decode_dir(DRS, "drs_avro", DRS_CTX)
    assert [(c.op, c.detail) for c in ch] == [("UPDATE", "UPDATE"), ("SNAPSHOT", "INIT"), ("DDL", "INIT_DDL")]
    upd = ch[0]
    assert upd.before["id"] == "103" and upd.after["id"] == "104" and upd.key_columns == ("id",)
    assert upd.after["c12"] == base64.b64encode(b"jgo").decode() and upd.after["c11"] == ""
    assert upd.after["c5"] == "2021-06-25T09:51:53.201Z" and upd.after["c4"] == "2021-06-25T17:51:53"
    assert upd.after["c8"] == "1.2510357E7" and upd.after["c9"] == "9874510357"
    assert upd.seq == (27677,) and upd.event_time == "2021-06-25T09:51:53Z"
    assert ch[2].ddl.startswith("CREATE TABLE `test`")
    assert [r["id"] for r in MirrorModel().add_all(ch[:2]).rows("test01.test")] == ["104"]


def test_drs_field_mapping_and_missing_schema():
    with pytest.raises(Reject, match="options.schema"):
        DRS.decode((AVRO / "drs_avro" / "01_update.avro").read_bytes(), DecodeContext())
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "kind", "type": "string"},
            {"name": "tbl", "type": "string"},
            {"name": "seqno", "type": "long"},
            {
                "name": "row",
                "type": {"type": "array", "items": {"type": "map", "values": ["null", "string", "bytes", "long"]}},
            },
        ],
    }
    import io

    buf = io.BytesIO()
    fastavro.schemaless_writer(
        buf,
        fastavro.parse_schema(schema),
        {"kind": "I", "tbl": "db1.t", "seqno": 9, "row": [{"k": 1, "b": b"\x00\x01", "s": None}]},
    )
    ctx = DecodeContext(
        options={
            "schema": schema,
            "ops": {"I": "INSERT"},
            "fields": {"op": "kind", "table": "tbl", "seq": "seqno", "after": "row"},
        },
        tables={"db1.t": TableSpec(key=("k",))},
    )
    (c,) = DRS.decode(buf.getvalue(), ctx)
    assert (c.op, c.table, c.seq, c.key_columns, c.after) == (
        "INSERT",
        "db1.t",
        (9,),
        ("k",),
        {"k": "1", "b": "AAE=", "s": None},
    )


BAD = [b"", b"\x00", b"garbage bytes here", os.urandom(64), b"\xff" * 40, b"{" * 10000]


@pytest.mark.parametrize("raw", BAD)
@pytest.mark.parametrize("decoder", [OMS, DTS, DRS])
def test_bad_inputs_reject(decoder, raw):
    with pytest.raises(Reject):
        decoder.decode(raw, DRS_CTX)


def test_truncated_and_padded_fixture_rejected():
    raw = (AVRO / "dts_avro" / "01_insert.avro").read_bytes()
    for bad in (raw[:-5], raw + b"\x00\x01"):
        with pytest.raises(Reject):
            DTS.decode(bad, DecodeContext())


TYPES = [
    "int",
    "bigint unsigned",
    "decimal(38,24)",
    "double",
    "varchar",
    "blob",
    "date",
    "time",
    "datetime",
    "timestamp",
    "json",
]
import datetime as _dt  # noqa: E402


def _value(t):
    return {
        "int": st.integers(-(2**31), 2**31 - 1).map(str),
        "bigint unsigned": st.integers(0, 2**64 - 1).map(str),
        "decimal(38,24)": st.decimals(allow_nan=False, allow_infinity=False, places=24).map(lambda d: format(d, "f")),
        "double": st.floats(allow_nan=False, allow_infinity=False).map(repr),
        "varchar": st.text(),
        "blob": st.binary(max_size=20).map(lambda b: base64.b64encode(b).decode()),
        "date": st.dates(min_value=_dt.date(1000, 1, 1)).map(lambda d: d.isoformat()),
        "time": st.times().map(lambda t: t.isoformat()),
        "datetime": st.datetimes(min_value=_dt.datetime(1000, 1, 1)).map(lambda d: d.isoformat()),
        "timestamp": st.datetimes(min_value=_dt.datetime(1970, 1, 1)).map(lambda d: d.isoformat() + "Z"),
        "json": st.just('{"a": [1, 2.50]}'),
    }[t]


@st.composite
def changes(draw, ops=("INSERT", "UPDATE", "DELETE", "SNAPSHOT")):
    from pipelines import values as V

    cols = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=6, unique=True))
    types = {f"c{i}": t for i, t in enumerate(cols)}
    row = {
        c: (None if draw(st.booleans()) and c != "c0" else V.canonical(V.family(t), draw(_value(t))))
        for c, t in types.items()
    }
    op = draw(st.sampled_from(ops))
    ch = Change(
        op=op,
        db="d",
        table="t",
        key_columns=("c0",),
        col_types=types,
        seq=(draw(st.integers(0, 2**62)),),
        event_time=V.instant_from_epoch(draw(st.integers(1, 2**33)), "s"),
        detail={"SNAPSHOT": "INIT"}.get(op, op),
    )
    if op in ("INSERT", "SNAPSHOT"):
        ch.after = row
    elif op == "DELETE":
        ch.before = row
    else:
        ch.before, ch.after = row, dict(row)
    return ch


@settings(max_examples=50, deadline=None)
@given(changes(), st.sampled_from(["old", "new"]))
def test_round_trip_dts(change, generation):
    ctx = DecodeContext(
        tables={"d.t": TableSpec(key=("c0",), columns=change.col_types)}, options={"generation": generation}
    )
    assert DTS.decode(DTS.encode(change, ctx), ctx) == [change]
    assert OMS.decode(OMS.encode(change, ctx), ctx) == [change]


@settings(max_examples=50, deadline=None)
@given(changes(ops=("INSERT", "UPDATE", "DELETE", "SNAPSHOT")))
def test_round_trip_drs(change):
    ctx = DecodeContext(options={"schema": DRS_SCHEMA})
    assert DRS.decode(DRS.encode(change, ctx), ctx) == [change]
