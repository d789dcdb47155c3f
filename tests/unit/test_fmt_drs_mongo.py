"""Huawei DRS MongoDB (DDS) JSON (seed 003): fixtures, extended JSON, mirror, rejects, round trip."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.formats.drs_mongo import DECODER, column_value, parse_document
from pipelines.testing.model import MirrorModel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "drs_mongo.jsonl"
LINES = FIXTURE.read_bytes().splitlines()
CTX = DecodeContext()
OID = "64650cf67dc36a464e76e583"


def decode(raw: bytes, ctx: DecodeContext = CTX) -> list[Change]:
    return DECODER.decode(raw, ctx)


def test_fixture_has_every_seed_example():
    assert len(LINES) == 5


def test_insert():
    [c] = decode(LINES[0])
    assert c == Change(
        op="INSERT",
        db="ljx",
        table="ljx",
        key_columns=("_id",),
        after={"_id": OID, "c1": "baz", "tags": '["mongodb","database","NoSQL"]'},
        col_types={"tags": "array"},  # an array: VARIANT in the mirror
        seq=(1684344064, 1, 256),
        event_time="2023-05-17T09:18:31.439Z",
        detail="INSERT/insert",
    )


def test_replace_is_a_full_image_update():
    [c] = decode(LINES[1])
    assert (c.op, c.before, c.after, c.changed, c.seq, c.detail) == (
        "UPDATE",
        {"_id": OID},
        {"_id": OID, "c1": "sss"},
        None,
        (1684344904, 9, 340),
        "UPDATE/replace",
    )


def test_set_and_unset_give_a_partial_image():
    [s] = decode(LINES[2])
    assert (s.after, s.changed, s.seq) == ({"_id": OID, "c1": "aaa"}, ("_id", "c1"), (1684345365, 1, 386))
    [u] = decode(LINES[3])
    assert (u.before, u.after, u.changed) == (
        {"_id": OID},
        {"_id": OID, "column1": "aaa", "c1": None},
        ("_id", "column1", "c1"),
    )


def test_delete_reads_the_id_from_value():
    [d] = decode(LINES[4])
    assert (d.op, d.before, d.after, d.seq, d.detail) == (
        "DELETE",
        {"_id": OID},
        None,
        (1684346209, 1, 471),
        "DELETE/doc",
    )


def rows(lines, ctx=CTX):
    return MirrorModel().add_all(c for raw in lines for c in decode(raw, ctx)).rows("ljx.ljx")


def test_mirror():
    tags = '["mongodb","database","NoSQL"]'
    # a replace is a full image (changed is None): fields it lacks are gone from the row
    assert rows(LINES[:4]) == [{"_id": OID, "c1": None, "column1": "aaa"}]
    assert tags not in str(rows(LINES[:4]))
    # with the collection's fields configured, the replace sets the fields it lacks to NULL
    ctx = DecodeContext(
        tables={
            "ljx.ljx": TableSpec(
                key=("_id",), columns={"_id": "string", "c1": "string", "tags": "json", "column1": "string"}
            )
        }
    )
    assert rows(LINES[:2], ctx) == [{"_id": OID, "c1": "sss", "tags": None, "column1": None}]
    assert rows(LINES[:4], ctx) == [{"_id": OID, "c1": None, "tags": None, "column1": "aaa"}]
    assert rows(LINES) == []


def test_extended_json_values():
    doc = parse_document(
        '{_id: ObjectId("64650CF67DC36A464E76E583"), "l": NumberLong("9223372036854775807"), "i": NumberInt(7),'
        ' "d": NumberDecimal("9.999999999999999093266253"), "t": ISODate("2023-05-17T17:18:31.439+08:00"),'
        ' "n": new Date(1684315111439), "b": BinData(0, "aGVsbG8="), "u": UUID("3B241101-E2BB-4255-8CAF-4136C566A962"),'
        ' "ts": Timestamp(1684344064, 1), "f": 1.50, "x": true, "z": null, "e": "",'
        ' "nested": {"o": ObjectId("64650cf67dc36a464e76e583"), "l": NumberLong(5), "a": [1, "二"]},'
        ' "canon": {"$oid": "64650cf67dc36a464e76e583"}, "cd": {"$date": {"$numberLong": "0"}}}',
        "value",
        64,
    )
    assert {k: column_value(v) for k, v in doc.items()} == {
        "_id": OID,
        "l": "9223372036854775807",  # NumberLong is BSON's int64 (issue 26: 10223372036854775806 is refused)
        "i": "7",
        "d": "9.999999999999999093266253",
        "t": "2023-05-17T09:18:31.439Z",
        "n": "2023-05-17T09:18:31.439Z",
        "b": "aGVsbG8=",
        "u": "3b241101-e2bb-4255-8caf-4136c566a962",
        "ts": '{"$timestamp":{"t":1684344064,"i":1}}',
        "f": "1.50",
        "x": "true",
        "z": None,
        "e": "",
        "nested": '{"o":{"$oid":"64650cf67dc36a464e76e583"},"l":{"$numberLong":"5"},"a":[1,"二"]}',
        "canon": OID,
        "cd": "1970-01-01T00:00:00Z",
    }


def _msg(**fields) -> bytes:
    base = {
        "id": 1,
        "op": "UPDATE",
        "dbType": "MongoDB",
        "db": "ljx",
        "coll": "ljx",
        "where": '{"_id": ObjectId("64650cf67dc36a464e76e583")}',
        "recordType": "update",
        "es": 1684316412008,
        "clusterTime": "1684345365:1",
    }
    base.update(fields)
    return json.dumps(base).encode()


def test_oplog_v2_diff_update():
    [c] = decode(_msg(value='{"$v": 2, "diff": {"u": {"a": 1}, "i": {"b": "x"}, "d": {"c": false}}}'))
    assert (c.after, c.changed) == ({"_id": OID, "a": "1", "b": "x", "c": None}, ("_id", "a", "b", "c"))


def test_full_sync_rows_are_snapshots():
    raw = _msg(op="INSERT", recordType="doc", where=None, value='{"_id": 5, "a": 1}')
    assert decode(raw)[0].op == "SNAPSHOT"
    assert decode(_msg(op="INIT", recordType=None, where=None, value='{"_id": 5}'))[0].op == "SNAPSHOT"


def test_configured_types_apply():
    ctx = DecodeContext(tables={"ljx.ljx": TableSpec(columns={"a": "decimal(10,2)"})})
    [c] = decode(_msg(value='{"$set": {"a": NumberDecimal("1E+2")}}'), ctx)
    assert c.after == {"_id": OID, "a": "100"} and c.col_types == {"a": "decimal(10,2)"}


@pytest.mark.parametrize(
    "raw, reason",
    [
        (_msg(value='{"$set": {"a.b": 1}}'), "nested path 'a.b'"),
        (_msg(value='{"$inc": {"a": 1}}'), "unsupported update operator '\\$inc'"),
        (_msg(value='{"$v": 2, "diff": {"sa": {"u": {"x": 1}}}}'), "nested-field"),
        (_msg(value='{"$set": {"a": 1}}', clusterTime=None), "clusterTime"),
        (_msg(value='{"$set": {"a": 1}}', clusterTime="12"), "seconds:increment"),
        (_msg(value='{"$set": {"a": 1}}', op="UPSERT"), "unknown op 'UPSERT'"),
        (_msg(value='{"$set": {"a": 1}}', coll=None), "collection"),
        (_msg(value='{"$set": {"a": 1}}', where='{"a": 1}'), "no _id"),
        (_msg(value='{"$set": {"a": 1}}', where='{"_id": ObjectId("123")}'), "24 hexadecimal"),
        (_msg(value='{"$set": {"a": Code("x")}}'), "unknown value 'Code'"),
        (_msg(value='{"$set": {"a": 1}'), "bad MongoDB extended JSON"),
        (_msg(value='{"$set": {"a": 1}} x'), "text after"),
        (_msg(value="[" * 100 + "]" * 100), "deeper"),
        (_msg(value=5), "not a document"),
        (_msg(value=[1]), "should be a document"),
        (_msg(value='{"$set": {"a": ISODate("yesterday")}}'), "date-time"),
    ],
)
def test_rejects(raw, reason):
    with pytest.raises(Reject, match=reason):
        decode(raw)


BAD = [
    b'{"op": "INSERT"',
    b"not json",
    b"[1]",
    b'"x"',
    b"\xc3\x28",
    b"{" * 10000,
    b'{"coll": "c"}',
    b'{"op": "INSERT", "coll": "c", "id": 1, "clusterTime": "1:1", "value": "{\\"_id\\": NumberLong(\\"x\\")}"}',
    b'{"op": "INSERT", "coll": "c", "id": 1, "clusterTime": "1:1", "value": "{\\"_id\\": 1, \\"b\\": BinData(0)}"}',
    b'{"op": "INSERT", "coll": "c", "id": 1, "clusterTime": "1:1", "value": "{\\"_id\\": \\"\\\\ud800\\"}", "es": "x"}',
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_inputs_only_reject(raw):
    with pytest.raises(Reject):
        decode(raw)


# ---------------------------------------------------------------- round trip

_TEXT = st.one_of(
    st.text(max_size=12),
    st.just("10223372036854775806"),
    st.just("9.999999999999999093266253"),
    st.just(""),
    st.just("true"),
    st.just('{"a":[1,2]}'),
    st.just("[1, 2]"),
    st.just("[1,2]"),
    st.just('ObjectId("64650cf67dc36a464e76e583")'),
    st.just("2023-05-17T09:18:31.439Z"),
    st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode()),
)
_IDS = st.one_of(st.just(OID), st.text(min_size=1, max_size=8), st.integers(0, 2**64).map(str))
_NAMES = st.text("abcxyz_", min_size=1, max_size=6)


@st.composite
def changes(draw):
    _id = draw(_IDS)
    fields = draw(st.dictionaries(_NAMES, st.one_of(st.none(), _TEXT), max_size=4))
    kind = draw(st.sampled_from(["insert", "snapshot", "replace", "update", "delete"]))
    meta = dict(
        db=draw(st.text(max_size=6)),
        table=draw(st.text(min_size=1, max_size=6)),
        key_columns=("_id",),
        seq=(draw(st.integers(0, 2**32)), draw(st.integers(0, 2**31)), draw(st.integers(0, 2**63))),
        event_time="2023-05-17T09:18:31.439Z",
    )
    documents = {'{"a":[1,2]}': "object", "[1,2]": "array"}  # in canonical form: read back as written
    typed = {c: documents[v] for c, v in fields.items() if v in documents and draw(st.booleans())}
    meta["col_types"] = typed or None
    doc = {"_id": _id, **fields}
    if kind == "insert":
        return Change(op="INSERT", after=doc, detail="INSERT/insert", **meta)
    if kind == "snapshot":
        return Change(op="SNAPSHOT", after=doc, detail="INSERT/doc", **meta)
    if kind == "delete":
        return Change(op="DELETE", before=doc, detail="DELETE/doc", **meta)
    if kind == "replace":
        return Change(op="UPDATE", before={"_id": _id}, after=doc, detail="UPDATE/replace", **meta)
    sets = {k: v for k, v in fields.items() if v is not None}
    after = {"_id": _id, **sets, **{k: None for k, v in fields.items() if v is None}}
    return Change(op="UPDATE", before={"_id": _id}, after=after, changed=tuple(after), detail="UPDATE/update", **meta)


@settings(max_examples=50, deadline=None)
@given(changes())
def test_round_trip(change):
    assert decode(DECODER.encode(change, CTX)) == [change]
