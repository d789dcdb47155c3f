"""Every decoder rejects bad input with a reason, and never raises anything else.

Truncated JSON, a non-JSON line, an array or scalar where an object belongs, a missing
table name, an unknown op, nesting 10,000 levels deep, a message over the size limit,
and invalid UTF-8. Avro formats get the byte-level equivalents.
"""

from __future__ import annotations

import json

import pytest

from pipelines.formats import FORMAT_IDS, DecodeContext, Reject, get_decoder
from pipelines.formats.base import ROW_OPS, TableSpec
from tests.conftest import CONFORMANCE, ROOT, SEEDS_FIXTURES

JSON_FORMATS = [f for f in FORMAT_IDS + ("maxwell",) if not get_decoder(f).binary]
AVRO_FORMATS = [f for f in FORMAT_IDS if get_decoder(f).binary]
TABLE_KEYS = {"table", "table_name", "tableName", "coll", "objectName"}
OP_KEYS = {"recordType", "type", "op", "opType", "operation"}
SMT_CTX = DecodeContext(default_table="shop.t", tables={"shop.t": TableSpec(key=("field1",))})


def _ctx(fmt: str) -> DecodeContext:
    if fmt == "oms_debezium_smt":
        return SMT_CTX
    if fmt == "drs_avro":
        return DecodeContext(options={"schema": str(ROOT / "conf" / "schemas" / "drs_record.avsc")})
    return DecodeContext()


def _sample_lines(fmt: str) -> list[bytes]:
    path = SEEDS_FIXTURES / f"{fmt}.jsonl"
    if fmt == "maxwell":
        path = CONFORMANCE / "flink" / "maxwell-data.txt"
        if not path.exists():  # as the other tests of the shared files do (LAKECDC_SHARED names them)
            pytest.skip("the shared conformance files are not mounted")
    return [line for line in path.read_bytes().split(b"\n") if line.strip()]


def _row_message(fmt: str) -> dict:
    """A message of the format that decodes to a row change."""
    ctx = _ctx(fmt)
    for raw in _sample_lines(fmt):
        changes = get_decoder(fmt).decode(raw, ctx)
        if changes and changes[0].op in ROW_OPS:
            return json.loads(raw)
    raise AssertionError(f"{fmt}: no fixture line gives a row change")


def _without_keys(value, keys):
    if isinstance(value, dict):
        return {k: _without_keys(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without_keys(v, keys) for v in value]
    return value


def _with_op(value, op):
    if isinstance(value, dict):
        return {k: (op if k in OP_KEYS and isinstance(v, str) else _with_op(v, op)) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_op(v, op) for v in value]
    return value


def _rejects(fmt: str, raw: bytes, ctx: DecodeContext | None = None) -> str:
    with pytest.raises(Reject) as info:
        get_decoder(fmt).decode(raw, ctx or _ctx(fmt))
    assert str(info.value), f"{fmt}: a reject must say why"
    return str(info.value)


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_json_decoders_reject_malformed_messages(fmt):
    good = _sample_lines(fmt)[0]
    _rejects(fmt, good[: len(good) // 2])  # truncated
    _rejects(fmt, b"this is not json at all")
    _rejects(fmt, b"[" + good + b"]")
    _rejects(fmt, b"42")
    _rejects(fmt, b'"a string"')
    _rejects(fmt, b"null")
    assert "deep" in _rejects(fmt, b"[" * 10_000 + b"]" * 10_000)
    assert "deep" in _rejects(fmt, b'{"a":' * 10_000 + b"1" + b"}" * 10_000)
    assert "UTF-8" in _rejects(fmt, good[:10] + b"\xff\xfe" + good[10:])
    small = DecodeContext(tables=_ctx(fmt).tables, default_table=_ctx(fmt).default_table, max_message_bytes=64)
    assert "limit" in _rejects(fmt, good + b" " * 100, small)


@pytest.mark.parametrize("fmt", [f for f in JSON_FORMATS if f != "oms_debezium_smt"])
def test_json_decoders_reject_a_row_change_without_table(fmt):
    msg = _without_keys(_row_message(fmt), TABLE_KEYS)
    _rejects(fmt, json.dumps(msg).encode())


def test_smt_without_configured_table_says_to_pass_table():
    raw = _sample_lines("oms_debezium_smt")[0]
    assert "--table" in _rejects("oms_debezium_smt", raw, DecodeContext())


@pytest.mark.parametrize("fmt", [f for f in JSON_FORMATS if f != "oms_debezium_smt"])
def test_json_decoders_reject_an_unknown_op(fmt):
    msg = _with_op(_row_message(fmt), "FROBNICATE")
    _rejects(fmt, json.dumps(msg).encode())


@pytest.mark.parametrize("fmt", AVRO_FORMATS)
def test_avro_decoders_reject_malformed_messages(fmt):
    sample = sorted((ROOT / "tests" / "fixtures" / "avro" / fmt).glob("*.avro"))[0].read_bytes()
    assert get_decoder(fmt).decode(sample, _ctx(fmt)), "the sample itself decodes"
    _rejects(fmt, sample[: len(sample) // 2])
    _rejects(fmt, b"this is not avro")
    _rejects(fmt, b"")
    _rejects(fmt, b"\xff" * 64)
    _rejects(fmt, b"[" * 10_000)
    small = DecodeContext(options=_ctx(fmt).options, max_message_bytes=16)
    assert "limit" in _rejects(fmt, sample, small)
