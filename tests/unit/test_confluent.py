"""The Confluent wire format and the schema registry client (pipelines.formats.confluent).

The registry here is :class:`RecordedRegistry`: a stdlib HTTP server on 127.0.0.1 replaying the answers
recorded from the real Apicurio Registry 3.0.9 (ccompat v7); tests/e2e/test_schema_registry.py runs
against the real one.
"""

from __future__ import annotations

import io
import json
import socket
import threading
import time

import fastavro
import pytest

from pipelines.config import load_config
from pipelines.errors import ConfigError
from pipelines.formats import DecodeContext, Reject, get_decoder
from pipelines.formats._dts_record import RECORD_SCHEMA, RECORD_SCHEMA_BORN
from pipelines.formats.base import Change
from pipelines.formats.confluent import (
    RegistryUnavailable,
    SchemaRegistry,
    frame,
    read_framed,
    registry_for,
    registry_settings,
    unframe,
)
from pipelines.testing.schema_registry import RecordedRegistry

SCHEMA = {
    "type": "record",
    "name": "Row",
    "namespace": "t",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"], "default": None}],
}


def _body(schema, datum) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


@pytest.fixture
def recorded():
    with RecordedRegistry({7: SCHEMA}) as reg:
        yield reg


# ---------------------------------------------------------------- framing


def test_frame_and_unframe_are_inverse_big_endian_id():
    raw = frame(0x01020304, b"body")
    assert raw == b"\x00\x01\x02\x03\x04body"
    assert unframe(raw) == (0x01020304, b"body")
    assert unframe(frame(2**32 - 1, b""))[0] == 2**32 - 1


@pytest.mark.parametrize(
    "raw, words",
    [
        (b"", "0 bytes is too short"),
        (b"\x00\x00\x00\x01", "4 bytes is too short"),
        (b'{"op":"c"}', "first byte is 0x7b, not the magic byte"),
        (b"\x01\x00\x00\x00\x07\x02", "first byte is 0x01"),
    ],
)
def test_unframed_or_short_messages_are_rejected_with_the_reason(raw, words):
    with pytest.raises(Reject, match=words):
        unframe(raw)


# ---------------------------------------------------------------- client


def test_fetches_parses_and_reads_a_framed_record(recorded):
    reg = SchemaRegistry(recorded.url)
    datum, schema = read_framed(frame(7, _body(SCHEMA, {"id": 5, "name": "x"})), reg)
    assert datum == {"id": 5, "name": "x"}
    assert schema.schema_id == 7 and schema.parsed["name"] == "t.Row"
    assert recorded.requests == ["/apis/ccompat/v7/schemas/ids/7"]


def test_cache_hit_does_not_fetch_again(recorded):
    reg = SchemaRegistry(recorded.url)
    for i in range(5):
        read_framed(frame(7, _body(SCHEMA, {"id": i, "name": None})), reg)
    assert len(recorded.requests) == 1 and reg.requests == 1


def test_concurrent_misses_of_one_id_fetch_it_once(recorded):
    recorded.delay = 0.2
    reg = SchemaRegistry(recorded.url)
    results = []
    threads = [threading.Thread(target=lambda: results.append(reg.schema(7).schema_id)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [7, 7, 7, 7] and len(recorded.requests) == 1


def test_unknown_id_is_a_reject_naming_registry_and_id_and_is_remembered(recorded):
    reg = SchemaRegistry(recorded.url)
    with pytest.raises(Reject) as exc:
        reg.schema(99)
    assert not isinstance(exc.value, RegistryUnavailable)
    text = str(exc.value)
    assert "schema id 99" in text and recorded.url in text and "40403" in text
    assert "No content with ID '99' was found." in text
    with pytest.raises(Reject, match="schema id 99"):
        reg.schema(99)
    assert len(recorded.requests) == 1  # remembered for retry_after seconds


def test_body_that_does_not_match_its_schema_or_leaves_bytes_is_rejected(recorded):
    reg = SchemaRegistry(recorded.url)
    with pytest.raises(Reject, match="does not match schema id 7"):
        read_framed(frame(7, b"\x02"), reg)  # id 1, then the union index is missing
    with pytest.raises(Reject, match="1 bytes left over after the Avro datum of schema id 7"):
        read_framed(frame(7, _body(SCHEMA, {"id": 1, "name": None}) + b"\x00"), reg)


def test_basic_auth_header_from_environment_variables(monkeypatch):
    monkeypatch.setenv("LAKECDC_TEST_REG_USER", "svc-cdc")
    monkeypatch.setenv("LAKECDC_TEST_REG_PASS", "s3cr:et")
    with RecordedRegistry({7: SCHEMA}, credentials=("svc-cdc", "s3cr:et")) as reg:
        options = {
            "schema_registry": {
                "url": reg.url,
                "username": "${LAKECDC_TEST_REG_USER}",
                "password": "${LAKECDC_TEST_REG_PASS}",
            }
        }
        client = registry_for(options)
        assert client.schema(7).schema_id == 7
        assert reg.auth_headers == ["Basic c3ZjLWNkYzpzM2NyOmV0"]  # base64("svc-cdc:s3cr:et")
        assert "s3cr" not in repr(client) and "s3cr" not in repr(registry_settings(options))
        assert registry_for(options) is client  # one client per configuration and process


def test_wrong_credentials_are_an_outage_not_a_quarantine_of_bad_data():
    with RecordedRegistry({7: SCHEMA}, credentials=("a", "b")) as reg:
        client = SchemaRegistry(reg.url, "a", "wrong")
        with pytest.raises(RegistryUnavailable, match=r"refused the credentials \(HTTP 401, error_code 401"):
            client.schema(7)


def test_unset_environment_variable_is_named(monkeypatch):
    monkeypatch.delenv("LAKECDC_TEST_UNSET", raising=False)
    options = {"schema_registry": {"url": "http://127.0.0.1:1", "username": "u", "password": "${LAKECDC_TEST_UNSET}"}}
    with pytest.raises(RegistryUnavailable, match="LAKECDC_TEST_UNSET is not set"):
        registry_for(options)


def test_timeout_is_bounded_and_then_fails_fast():
    # a server that accepts the connection and never answers
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        reg = SchemaRegistry(f"http://127.0.0.1:{port}", timeout=0.5, retry_after=30)
        start = time.monotonic()
        with pytest.raises(RegistryUnavailable, match=r"unavailable fetching schema id 7"):
            reg.schema(7)
        assert time.monotonic() - start < 3
        start = time.monotonic()
        with pytest.raises(RegistryUnavailable, match=r"not asked again for 30 s"):
            reg.schema(8)  # within retry_after: no request, no wait
        assert time.monotonic() - start < 0.1 and reg.requests == 1
    finally:
        listener.close()


def test_refused_connection_and_5xx_are_outages():
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    closed = port.getsockname()[1]
    port.close()
    with pytest.raises(RegistryUnavailable, match="ConnectionRefusedError"):
        SchemaRegistry(f"http://127.0.0.1:{closed}").schema(1)
    with RecordedRegistry({7: SCHEMA}, status=503) as reg:
        with pytest.raises(RegistryUnavailable, match="HTTP 503, error_code 50300"):
            SchemaRegistry(reg.url).schema(7)


def test_outage_is_retried_after_the_window(recorded):
    recorded.status = 503
    reg = SchemaRegistry(recorded.url, retry_after=0.2)
    with pytest.raises(RegistryUnavailable):
        reg.schema(7)
    recorded.status = None
    time.sleep(0.25)
    assert reg.schema(7).schema_id == 7


def test_non_avro_schema_is_rejected():
    with RecordedRegistry() as reg:
        reg.answer = lambda path, auth: (200, {"schema": "syntax = 'proto3';", "schemaType": "PROTOBUF"})
        with pytest.raises(Reject, match="is a PROTOBUF schema, not Avro"):
            SchemaRegistry(reg.url).schema(3)


# ---------------------------------------------------------------- settings


@pytest.mark.parametrize(
    "setting, words",
    [
        ({"url": "ftp://h/x"}, "must be an http:// or https:// URL"),
        ({"url": "http://u:p@h:8081"}, "must not carry credentials"),
        ({}, "url is required"),
        ({"url": "http://h", "username": "u"}, "username and password go together"),
        ({"url": "http://h", "timeout": 0}, "timeout should be a number of seconds"),
        ({"url": "http://h", "subject": "x"}, "unknown settings subject"),
        ([1], "should be a mapping"),
    ],
)
def test_bad_settings_are_named(setting, words):
    with pytest.raises(Reject, match=words):
        registry_settings({"schema_registry": setting})


def test_config_rejects_a_bad_registry_setting_at_load_time(tmp_path):
    conf = tmp_path / "p.yaml"
    conf.write_text(
        "sources: [{name: s, format: debezium_avro, path: " + str(tmp_path) + "}]\n"
        "format_options: {debezium_avro: {schema_registry: {url: 'file:///etc/passwd'}}}\n"
    )
    with pytest.raises(ConfigError, match=r"format_options.debezium_avro: schema_registry.url must be an http"):
        load_config(conf)


def test_no_registry_option_means_no_client():
    assert registry_for({}) is None and registry_for({"schema": "x.avsc"}) is None


# ---------------------------------------------------------------- the other Avro formats


def _oms_change() -> Change:
    return Change(
        op="INSERT",
        db="shop",
        table="orders",
        key_columns=("id",),
        after={"id": "7", "note": "hello"},
        col_types={"id": "bigint", "note": "varchar(20)"},
        seq=(170236975822100001,),
        event_time="2023-12-12T08:29:18Z",
    )


@pytest.mark.parametrize("format_id", ["oms_avro", "dts_avro"])
def test_dts_record_formats_read_confluent_framed_messages_with_the_registry_schema(format_id):
    decoder = get_decoder(format_id)
    plain = decoder.encode(_oms_change(), DecodeContext())
    expected = [c.to_json_dict() for c in decoder.decode(plain, DecodeContext())]
    assert expected[0]["after"] == {"id": "7", "note": "hello"}
    record = fastavro.schemaless_reader(io.BytesIO(plain), fastavro.parse_schema(RECORD_SCHEMA_BORN))
    older, newer = io.BytesIO(), io.BytesIO()  # both generations, as a registry holding each would serve them
    fastavro.schemaless_writer(older, fastavro.parse_schema(RECORD_SCHEMA), record)
    fastavro.schemaless_writer(newer, fastavro.parse_schema(RECORD_SCHEMA_BORN), {**record, "bornTimestamp": 9})
    with RecordedRegistry({21: RECORD_SCHEMA, 22: RECORD_SCHEMA_BORN}) as reg:
        ctx = DecodeContext(options={"schema_registry": {"url": reg.url}})
        assert [c.to_json_dict() for c in decoder.decode(frame(21, older.getvalue()), ctx)] == expected
        assert [c.to_json_dict() for c in decoder.decode(frame(22, newer.getvalue()), ctx)] == expected
        with pytest.raises(Reject, match="not the magic byte"):
            decoder.decode(plain, ctx)  # with a registry configured, an unframed message is refused
        with pytest.raises(Reject, match="1 bytes left over"):
            decoder.decode(frame(21, older.getvalue() + b"\x00"), ctx)


def test_drs_avro_reads_the_registry_schema_instead_of_options_schema():
    schema = json.loads(open("conf/schemas/drs_record.avsc", encoding="utf-8").read())
    decoder = get_decoder("drs_avro")
    change = Change(
        op="INSERT",
        db="shop",
        table="t",
        key_columns=("id",),
        after={"id": "1", "v": "x"},
        col_types={"id": "int", "v": "varchar(5)"},
        seq=(42,),
        event_time="2021-06-25T09:51:53.201Z",
    )
    raw = decoder.encode(change, DecodeContext(options={"schema": schema}))
    expected = [c.to_json_dict() for c in decoder.decode(raw, DecodeContext(options={"schema": schema}))]
    with RecordedRegistry({5: schema}) as reg:
        got = decoder.decode(frame(5, raw), DecodeContext(options={"schema_registry": {"url": reg.url}}))
    assert [c.to_json_dict() for c in got] == expected
    assert expected[0]["after"] == {"id": "1", "v": "x"}


def test_silver_fails_the_batch_on_a_registry_outage_but_quarantines_an_unknown_id():
    """An outage is not bad data: quarantining would let later changes apply past the message, so silver's
    batch function raises (the stream retries the batch) — while an unknown schema id is the message's fault."""
    import pyarrow as pa

    from pipelines.layout import BRONZE_COLUMNS
    from pipelines.silver import make_decode_batches

    decoder = get_decoder("oms_avro")
    plain = decoder.encode(_oms_change(), DecodeContext())

    def bronze(raw: bytes) -> pa.RecordBatch:
        row = dict.fromkeys(BRONZE_COLUMNS) | {"source": "s", "format": "oms_avro", "value": raw, "position": "p#0"}
        return pa.RecordBatch.from_pylist([row | {"queue_pos": "000000000000"}])

    with RecordedRegistry({21: RECORD_SCHEMA}) as reg:
        ctx = DecodeContext(options={"schema_registry": {"url": reg.url}})
        decode = make_decode_batches({"oms_avro": ctx}, ctx)
        rows = [r for out in decode([bronze(frame(99, plain))]) for r in out.to_pylist()]
        assert [(r["kind"], "99" in r["reason"]) for r in rows] == [("quarantine", True)]
        reg.status = 503
        with pytest.raises(RegistryUnavailable, match="HTTP 503"):
            list(decode([bronze(frame(21, plain))]))
