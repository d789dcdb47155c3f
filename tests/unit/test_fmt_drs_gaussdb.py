"""Huawei DRS GaussDB / PostgreSQL JSON (seed 003): fixtures, values, mirror, rejects, round trip."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats.base import Change, DecodeContext, Reject
from pipelines.formats.drs_gaussdb import DECODER
from pipelines.testing.model import MirrorModel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "drs_gaussdb.jsonl"
LINES = FIXTURE.read_bytes().splitlines()
CTX = DecodeContext()
TYPES = {
    "timestamp_column": "timestamp without time zone",
    "tstzrange_column": "tstzrange",
    "int4range_column": "int4range",
    "char_column": "character",
    "jsonb_column": "json",
    "boolean_column": "boolean",
    "bit_column": "bit as text",
    "smallint_column": "smallint",
    "bytea_column": "bytea",
}
RANGE = '("2010-01-01 14:30:00+08","2010-01-01 15:30:00+08")'


def row(ts: str, flag: str) -> dict:
    return {
        "timestamp_column": ts,
        "tstzrange_column": RANGE,
        "int4range_column": "[11,20)",
        "char_column": "g",
        "jsonb_column": '{"key1": "value1", "key2": "value2"}',
        "boolean_column": flag,
        "bit_column": "1",
        "smallint_column": "12",
        "bytea_column": "Ynl0ZWFfZGF0YQ==",
    }


NEW, OLD = row("2021-12-16T12:31:49.344365", "false"), row("2014-07-02T06:14:00.742", "true")


def decode(raw: bytes, ctx: DecodeContext = CTX) -> list[Change]:
    return DECODER.decode(raw, ctx)


def test_seed_update_example():
    [c] = decode(LINES[0])
    assert c == Change(
        op="UPDATE",
        db="database01",
        schema="schema01",
        table="table01",
        key_columns=(),
        before=OLD,
        after=NEW,
        col_types=TYPES,
        seq=(332,),
        event_time="2021-12-16T03:43:07Z",
        detail="UPDATE",
    )


def test_derived_insert_delete_ddl():
    [i] = decode(LINES[1])
    assert (i.op, i.after, i.key_columns, i.seq) == ("INSERT", OLD, ("smallint_column",), (330,))
    [d] = decode(LINES[2])
    assert (d.op, d.before, d.after) == ("DELETE", NEW, None)
    [ddl] = decode(LINES[3])
    assert (ddl.op, ddl.ddl, ddl.schema) == ("DDL", "ALTER TABLE schema01.table01 ADD COLUMN note text", "schema01")


def test_mirror():
    keyed_update = json.loads(LINES[0])
    keyed_update["pkNames"] = ["smallint_column"]  # noqa: E702
    changes = [c for raw in (LINES[1], json.dumps(keyed_update).encode()) for c in decode(raw)]
    assert MirrorModel().add_all(changes).rows("database01.schema01.table01") == [NEW]
    changes += decode(LINES[2])
    assert MirrorModel().add_all(changes).rows("database01.schema01.table01") == []
    # keyless (the seed's own pkNames null): the update replaces the equal row
    keyless = [Change(op="INSERT", db="database01", table="table01", after=OLD, seq=(1,)), *decode(LINES[0])]
    assert MirrorModel().add_all(keyless).rows("database01.schema01.table01") == [NEW]


def _one(pg_type: str, value) -> bytes:
    return json.dumps(
        {
            "columnType": {"c": pg_type},
            "schema": "s",
            "opType": "INSERT",
            "type": "INSERT",
            "id": 1,
            "es": 1639626187000,
            "database": "d",
            "table": "t",
            "isDdl": False,
            "sql": "",
            "data": [{"c": value}],
            "old": None,
            "pkNames": ["c"],
        }
    ).encode()


@pytest.mark.parametrize(
    "pg_type, value, canon",
    [
        ("timestamp with time zone", "2010-01-01 14:30:00+08", "2010-01-01T06:30:00Z"),
        ("timestamptz", "2010-01-01 14:30:00.5+05:30", "2010-01-01T09:00:00.5Z"),
        ("timestamp(6) without time zone", "2021-12-16 12:31:49.344365", "2021-12-16T12:31:49.344365"),
        ("bytea", "\\x62797465", "Ynl0ZQ=="),
        ("bytea", "[106, 103]", "amc="),
        ("numeric(38,24)", "9.999999999999999093266253", "9.999999999999999093266253"),
        ("numeric", "10223372036854775806", "10223372036854775806"),
        ("bigint", "-9223372036854775808", "-9223372036854775808"),
        ("boolean", "t", "true"),
        ("date", "2021-12-16", "2021-12-16"),
        ("time without time zone", "12:31:49.5", "12:31:49.5"),
        ("integer[]", "{1,2,3}", "{1,2,3}"),
        ("bit varying(8)", "0101", "0101"),
        ("bit(4)", "0101", "0101"),
        ("money", "$1,000.00", "$1,000.00"),
        ("jsonb", '{"a": [1, 2]}', '{"a": [1, 2]}'),
        ("double precision", "1.2510357E7", "1.2510357E7"),
        ("text", "", ""),
        ("text", None, None),
    ],
)
def test_postgres_values(pg_type, value, canon):
    assert decode(_one(pg_type, value))[0].after == {"c": canon}


@pytest.mark.parametrize(
    "raw, reason",
    [
        (_one("bytea", "zz"), "hexadecimal"),
        (_one("date", "0000-00-00"), "column 'c'"),
        (_one("integer", "1.5"), "not an integer"),
        (_one("numeric", "abc"), "decimal"),
        (json.dumps({"opType": "MERGE", "table": "t", "id": 1}).encode(), "unknown op 'MERGE'"),
        (json.dumps({"opType": "INSERT", "type": "DELETE", "table": "t", "id": 1}).encode(), "disagree"),
        (json.dumps({"opType": "INSERT", "id": 1, "data": [{"a": "1"}]}).encode(), "table"),
        (json.dumps({"opType": "INSERT", "table": "t", "data": [{"a": "1"}]}).encode(), "'id'"),
        (
            json.dumps({"opType": "UPDATE", "table": "t", "id": 1, "data": [{"a": "1"}], "old": [{}, {}]}).encode(),
            "rows",
        ),
    ],
)
def test_rejects(raw, reason):
    with pytest.raises(Reject, match=reason):
        decode(raw)


BAD = [
    b'{"opType": "INSERT"',
    b"nope",
    b"[]",
    b"null",
    b"\xff",
    b"[" * 10000,
    b'{"opType": "INSERT", "table": "t", "id": 1, "data": [5]}',
    b'{"opType": "INSERT", "table": "t", "id": 1, "data": {"a": 1}}',
    b'{"opType": "INSERT", "table": "t", "id": "x", "data": [{"a": 1}]}',
    b'{"opType": "INSERT", "table": "t", "id": 1, "columnType": {"a": 3}, "data": [{"a": 1}]}',
    b'{"opType": "INSERT", "table": "t", "id": 1, "pkNames": [1], "data": [{"a": 1}]}',
    b'{"opType": "INSERT", "table": "t", "id": 1, "es": "soon", "data": [{"a": 1}]}',
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_inputs_only_reject(raw):
    with pytest.raises(Reject):
        decode(raw)


# ---------------------------------------------------------------- round trip

_VALUES = {
    "bigint": st.integers(-(2**63), 2**63 - 1).map(str),
    "numeric(65,30)": st.decimals(allow_nan=False, allow_infinity=False, places=30).map(lambda d: format(d, "f")),
    "numeric": st.just("10223372036854775806"),
    "boolean": st.sampled_from(["true", "false"]),
    "bytea": st.binary(max_size=16).map(lambda b: base64.b64encode(b).decode()),
    "text": st.one_of(st.text(max_size=16), st.just("")),
    "timestamp without time zone": st.just("2021-12-16T12:31:49.344365"),
    "timestamp with time zone": st.just("2010-01-01T06:30:00Z"),
    "tstzrange": st.just(RANGE),
    "json": st.just('{"k": ["v", 1]}'),
}


@st.composite
def changes(draw):
    names = draw(st.lists(st.text("abcxyz_", min_size=1, max_size=6), min_size=1, max_size=5, unique=True))
    types = {n: draw(st.sampled_from(sorted(_VALUES))) for n in names}
    image = lambda: {n: draw(st.one_of(st.none(), _VALUES[t])) for n, t in types.items()}  # noqa: E731
    op = draw(st.sampled_from(["INSERT", "UPDATE", "DELETE", "SNAPSHOT"]))
    before = image() if op in ("UPDATE", "DELETE") else None
    after = image() if op != "DELETE" else None
    return Change(
        op=op,
        db=draw(st.text(min_size=1, max_size=6)),
        schema="public",
        table=draw(st.text(min_size=1, max_size=6)),
        key_columns=(names[0],),
        before=before,
        after=after,
        col_types=types,
        seq=(draw(st.integers(0, 2**63)),),
        event_time="2021-12-16T03:43:07.001Z",
        detail={"SNAPSHOT": "INIT"}.get(op, op),
    )


@settings(max_examples=50, deadline=None)
@given(changes())
def test_round_trip(change):
    assert decode(DECODER.encode(change, CTX)) == [change]


def test_postgres_bit_strings_become_text_columns_not_binary():
    from pipelines.values import spark_type

    [c] = decode(_one("bit(4)", "0101"))
    assert c.col_types == {"c": "bit(4) as text"} and spark_type(c.col_types["c"]) == "STRING"
    assert spark_type("bit(1)") == "BINARY"  # MySQL/OMS BIT stays bytes (Base64 on the wire)
