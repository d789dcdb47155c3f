"""debezium_avro: Confluent Avro → what Kafka Connect's JsonConverter writes → the debezium decoder.

Real fixtures (tests/fixtures/real/debezium_avro/, Apache Paimon, Apache-2.0): the same Debezium MySQL
all-types table as Debezium wrote it with the JsonConverter (debezium-avro-data-1.txt) and the Avro
key/value schemas Debezium + Confluent's AvroConverter registered for it (paimon_all_types_*.avsc).
"""

from __future__ import annotations

import base64
import io
import json
from decimal import Decimal
from pathlib import Path

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.formats import DecodeContext, Reject, get_decoder
from pipelines.formats.base import Num, TableSpec, check_changes, loads_exact
from pipelines.formats.confluent import RegistrySchema, frame, unframe
from pipelines.formats.debezium_avro import connect_converter, to_connect
from pipelines.testing.schema_registry import RecordedRegistry

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "debezium_avro"
VALUE_SCHEMA = json.loads((REAL / "paimon_all_types_value.avsc").read_text())
KEY_SCHEMA = json.loads((REAL / "paimon_all_types_key.avsc").read_text())
GEOMETRY_REUSED = ("_linestring", "_polygon", "_multipoint", "_multiline", "_multipolygon", "_geometrycollection")


def _json_lines() -> list[dict]:
    """The key/value JSON lines (the Apache header comment skipped), Avro's topic prefix applied."""
    text = (REAL / "debezium-avro-data-1.txt").read_text()
    return [loads_exact(line.replace("test_json.", "test_avro.")) for line in text.splitlines() if line.startswith("{")]


def _schema(avro, schema_id: int = 1) -> RegistrySchema:
    return RegistrySchema(schema_id, "http://registry.test", avro)


def _to_avro(value, avro, named):
    """A JsonConverter payload → the Avro datum AvroConverter writes (the inverse, for building inputs)."""
    if isinstance(avro, str) and avro in named:
        avro = named[avro]
    if isinstance(avro, list):
        if value is None:
            return None
        return _to_avro(value, next(b for b in avro if b != "null"), named)
    kind = avro if isinstance(avro, str) else avro["type"]
    if isinstance(kind, (dict, list)):
        return _to_avro(value, kind, named)
    if kind == "record":
        return {f["name"]: _to_avro(value.get(f["name"]), f["type"], named) for f in avro["fields"]}
    if kind in ("bytes", "fixed"):
        return base64.b64decode(value)
    if kind in ("int", "long"):
        return int(value)
    if kind in ("float", "double"):
        return float(value)
    return value


def _avro_bytes(datum, avro) -> bytes:
    rs = _schema(avro)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, rs.plain[0], datum)
    return buf.getvalue()


def _diff(mine, theirs, path=""):
    """Paths where two JSON trees differ."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        out = []
        for k in sorted(set(mine) | set(theirs)):
            out += _diff(mine.get(k, "<absent>"), theirs.get(k, "<absent>"), f"{path}/{k}")
        return out
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        out = []
        for i, (a, b) in enumerate(zip(mine, theirs)):
            out += _diff(a, b, f"{path}/{a.get('field', i) if isinstance(a, dict) else i}")
        return out
    return [] if mine == theirs else [path]


# ---------------------------------------------------------------- real fixtures


def test_paimon_avro_value_schema_converts_to_the_json_converters_schema():
    rs = _schema(VALUE_SCHEMA)
    mine, _ = connect_converter(*rs.logical)
    theirs = _json_lines()[1]["schema"]
    # The only differences are Avro's: the six geometry columns after _geometry reuse its named record
    # io.debezium.data.geometry.Geometry, so they carry _geometry's connect.parameters.
    expected = {
        f"/fields/{image}/fields/{col}/parameters/__debezium.source.column.{p}"
        for image in ("before", "after")
        for col in GEOMETRY_REUSED
        for p in ("name", "type")
    }
    assert set(_diff(mine, theirs)) == expected
    after = next(f for f in mine["fields"] if f["field"] == "after")
    columns = {f["field"]: f for f in after["fields"]}
    assert columns["_tinyint"]["type"] == "int16" and columns["_float"]["type"] == "float"
    assert columns["_date"] == {**theirs["fields"][1]["fields"][42], "field": "_date"}
    assert columns["_point"]["doc"] == "Geometry (POINT)" and columns["_point"]["version"] == Num("1")
    source = next(f for f in mine["fields"] if f["field"] == "source")
    assert next(f for f in source["fields"] if f["field"] == "snapshot")["default"] == "false"


def test_paimon_payloads_survive_avro_exactly():
    lines = _json_lines()
    value_rs, key_rs = _schema(VALUE_SCHEMA, 1), _schema(KEY_SCHEMA, 2)
    assert len(lines) == 4
    for i in range(0, len(lines), 2):
        for line, rs in ((lines[i], key_rs), (lines[i + 1], value_rs)):
            parsed, named = rs.plain
            datum = _to_avro(line["payload"], parsed, named)
            framed = frame(rs.schema_id, _avro_bytes(datum, rs.schema))
            schema_id, body = unframe(framed)
            got = to_connect(rs.read(body, plain=True), rs)
            assert got["payload"] == line["payload"]
    first = to_connect(
        value_rs.read(_avro_bytes(_to_avro(lines[1]["payload"], *value_rs.plain), VALUE_SCHEMA), plain=True), value_rs
    )
    after = first["payload"]["after"]
    assert after["_real"] == Num("1.000001")  # float32: the shortest text, as Jackson writes it
    assert after["_bin"] == "Ynl0ZXMAAAAAAA==" and after["_datetime6"] == Num("1679581805123456")
    assert after["_point"] == {"x": Num("1.0"), "y": Num("1.0"), "wkb": "AQEAAAAAAAAAAADwPwAAAAAAAPA/", "srid": None}


# ---------------------------------------------------------------- logical types, exact values


def _record(*fields) -> dict:
    return {
        "type": "record",
        "name": "Value",
        "namespace": "srv.db.t",
        "fields": [{"name": n, "type": t} for n, t in fields],
    }


LOGICAL = _record(
    ("dec", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}),
    ("fixed_dec", {"type": "fixed", "name": "F", "size": 16, "logicalType": "decimal", "precision": 30, "scale": 2}),
    ("d", {"type": "int", "logicalType": "date"}),
    ("tm", {"type": "int", "logicalType": "time-millis"}),
    ("tu", {"type": "long", "logicalType": "time-micros"}),
    ("tsm", {"type": "long", "logicalType": "timestamp-millis"}),
    ("tsu", {"type": "long", "logicalType": "timestamp-micros"}),
    ("ltsm", {"type": "long", "logicalType": "local-timestamp-millis"}),
    ("ltsu", {"type": "long", "logicalType": "local-timestamp-micros"}),
    ("u", {"type": "string", "logicalType": "uuid"}),
    ("b", ["null", "bytes"]),
    ("f", "float"),
    ("g", "double"),
    ("e", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}),
    ("arr", {"type": "array", "items": "long"}),
    ("m", {"type": "map", "values": "string"}),
)


def _logical_value() -> dict:
    import datetime as dt
    import uuid

    return {
        "dec": Decimal("-12345678901234567890.123456789"),
        "fixed_dec": Decimal("1234567890123456789012345678.90"),
        "d": dt.date(2023, 3, 23),
        "tm": dt.time(10, 13, 23, 123000),
        "tu": dt.time(10, 13, 23, 123456),
        "tsm": dt.datetime(2023, 3, 23, 14, 30, 5, 123000, tzinfo=dt.timezone.utc),
        "tsu": dt.datetime(2023, 3, 23, 14, 30, 5, 123456, tzinfo=dt.timezone.utc),
        "ltsm": dt.datetime(2023, 3, 23, 14, 30, 5, 123000),
        "ltsu": dt.datetime(2023, 3, 23, 14, 30, 5, 123456),
        "u": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "b": b"\x00\xff\x10",
        "f": 21.8,
        "g": float("nan"),
        "e": "GREEN",
        "arr": [1, -2],
        "m": {"k": "v"},
    }


def test_every_avro_logical_type_maps_to_its_connect_name_and_keeps_the_written_value():
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(LOGICAL), _logical_value())  # logical writer
    rs = _schema(LOGICAL)
    got = to_connect(rs.read(buf.getvalue(), plain=True), rs)
    fields = {f["field"]: f for f in got["schema"]["fields"]}
    names = {k: f.get("name") for k, f in fields.items()}
    assert names == {
        "dec": "org.apache.kafka.connect.data.Decimal",
        "fixed_dec": "org.apache.kafka.connect.data.Decimal",
        "d": "org.apache.kafka.connect.data.Date",
        "tm": "org.apache.kafka.connect.data.Time",
        "tu": "io.debezium.time.MicroTime",
        "tsm": "org.apache.kafka.connect.data.Timestamp",
        "tsu": "io.debezium.time.MicroTimestamp",
        "ltsm": "io.debezium.time.Timestamp",
        "ltsu": "io.debezium.time.MicroTimestamp",
        "u": "io.debezium.data.Uuid",
        "b": None,
        "f": None,
        "g": None,
        "e": None,
        "arr": None,
        "m": None,
    }
    assert fields["dec"]["parameters"] == {"scale": "9", "connect.decimal.precision": "38"}
    assert fields["fixed_dec"]["type"] == "bytes" and fields["fixed_dec"]["parameters"]["scale"] == "2"
    assert fields["b"]["optional"] is True and fields["b"]["type"] == "bytes"
    assert (fields["f"]["type"], fields["g"]["type"]) == ("float", "double")
    assert fields["e"]["parameters"] == {
        "io.confluent.connect.avro.Enum": "srv.db.t.Color",
        "io.confluent.connect.avro.Enum.RED": "RED",
        "io.confluent.connect.avro.Enum.GREEN": "GREEN",
    }
    assert fields["arr"]["items"] == {"type": "int64", "optional": False}
    p = got["payload"]
    unscaled = int.from_bytes(base64.b64decode(p["dec"]), "big", signed=True)
    assert unscaled == -12345678901234567890123456789 and fields["dec"]["parameters"]["scale"] == "9"  # exact
    assert int.from_bytes(base64.b64decode(p["fixed_dec"]), "big", signed=True) == 123456789012345678901234567890
    assert p["d"] == Num("19439")
    assert p["tm"] == Num(str((10 * 3600 + 13 * 60 + 23) * 1000 + 123))
    assert p["tu"] == Num(str((10 * 3600 + 13 * 60 + 23) * 1_000_000 + 123456))
    assert p["tsm"] == Num("1679581805123") and p["tsu"] == Num("1679581805123456")
    assert p["ltsm"] == Num("1679581805123") and p["ltsu"] == Num("1679581805123456")
    assert p["u"] == "12345678-1234-5678-1234-567812345678"
    assert p["b"] == "AP8Q" and p["f"] == Num("21.8") and p["g"] == "NaN"
    assert p["e"] == "GREEN" and p["arr"] == [Num("1"), Num("-2")] and p["m"] == {"k": "v"}


def test_connect_decimal_keeps_connect_name_and_parameters():
    avro = _record(
        (
            "amount",
            {
                "type": "bytes",
                "scale": 2,
                "precision": 10,
                "connect.version": 1,
                "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
                "connect.name": "org.apache.kafka.connect.data.Decimal",
                "logicalType": "decimal",
            },
        ),
        ("small", {"type": "int", "connect.type": "int8"}),
    )
    schema, _ = connect_converter(*_schema(avro).logical)
    assert schema["fields"][0] == {
        "type": "bytes",
        "optional": False,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": Num("1"),
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "amount",
    }
    assert schema["fields"][1]["type"] == "int8" and schema["name"] == "srv.db.t.Value"


@pytest.mark.parametrize(
    "avro, words",
    [
        (_record(("x", ["null", "int", "string"])), "union of 2 non-null types"),
        ({"type": "record", "name": "N", "fields": [{"name": "next", "type": ["null", "N"]}]}, "nested deeper"),
    ],
)
def test_schemas_without_a_connect_form_are_rejected(avro, words):
    with pytest.raises(Reject, match=words):
        connect_converter(*_schema(avro).logical)


# ---------------------------------------------------------------- the decoder


def test_decoder_needs_a_registry_setting():
    with pytest.raises(Reject, match="needs format_options.debezium_avro.schema_registry.url"):
        get_decoder("debezium_avro").decode(frame(1, b"\x00"), DecodeContext())


def test_real_all_types_record_decodes_like_its_json_twin():
    decoder = get_decoder("debezium_avro")
    lines = _json_lines()
    value_rs, key_rs = _schema(VALUE_SCHEMA, 1), _schema(KEY_SCHEMA, 2)
    with RecordedRegistry({1: VALUE_SCHEMA, 2: KEY_SCHEMA}) as reg:
        ctx = DecodeContext(options={"schema_registry": {"url": reg.url}})
        for i in range(0, len(lines), 2):
            key = frame(2, _avro_bytes(_to_avro(lines[i]["payload"], *key_rs.plain), KEY_SCHEMA))
            value = frame(1, _avro_bytes(_to_avro(lines[i + 1]["payload"], *value_rs.plain), VALUE_SCHEMA))
            got = [c.to_json_dict() for c in decoder.decode_record(key, value, ctx)]
            twin = get_decoder("debezium").decode_connect(lines[i + 1], lines[i], DecodeContext())
            assert got == [c.to_json_dict() for c in twin]
            assert got[0]["op"] == "INSERT" and got[0]["key"] == ["_id"]
        tombstone = decoder.decode_record(key, None, ctx)
        assert [c.op for c in tombstone] == [c.op for c in get_decoder("debezium").decode_connect(None, None, ctx)]
        assert len(reg.requests) == 2  # each schema id fetched once


def test_decimal_column_is_exact_through_the_whole_decoder():
    envelope = {
        "type": "record",
        "name": "Envelope",
        "namespace": "srv.shop.orders",
        "connect.name": "srv.shop.orders.Envelope",
        "fields": [
            {
                "name": "before",
                "type": ["null", _record(("id", "long"), ("amount", LOGICAL["fields"][0]["type"]))],
                "default": None,
            },
            {"name": "after", "type": ["null", "srv.db.t.Value"], "default": None},
            {
                "name": "source",
                "type": _record(
                    ("db", "string"),
                    ("table", "string"),
                    ("file", "string"),
                    ("pos", "long"),
                    ("row", "int"),
                    ("ts_ms", "long"),
                    ("connector", "string"),
                ),
            },
            {"name": "op", "type": "string"},
        ],
    }
    envelope["fields"][2]["type"]["name"] = "Source"
    datum = {
        "before": None,
        "after": {"id": 1, "amount": Decimal("99999999999999999999.999999999")},
        "source": {
            "db": "shop",
            "table": "orders",
            "file": "mysql-bin.000003",
            "pos": 154,
            "row": 0,
            "ts_ms": 1700000000000,
            "connector": "mysql",
        },
        "op": "c",
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(envelope), datum)
    with RecordedRegistry({9: envelope}) as reg:
        ctx = DecodeContext(
            tables={"shop.orders": TableSpec(key=("id",))}, options={"schema_registry": {"url": reg.url}}
        )
        (change,) = get_decoder("debezium_avro").decode(frame(9, buf.getvalue()), ctx)
    assert change.op == "INSERT" and change.after == {"id": "1", "amount": "99999999999999999999.999999999"}
    assert change.seq[:2] == (3, 154)


# ---------------------------------------------------------------- Flink's messages, and mutations of them

FLINK_SCHEMA = json.loads((REAL / "flink-debezium-test-schema.json").read_text())
FLINK_MESSAGES = sorted((REAL.parents[1] / "avro" / "debezium_avro").glob("*.avro"))


@pytest.fixture(scope="module")
def flink_registry():
    with RecordedRegistry({81: FLINK_SCHEMA}) as reg:
        yield reg


def test_flink_messages_decode_to_what_flinks_test_asserts(flink_registry):
    """Flink's DebeziumAvroSerDeSchemaTest: +I(1,lisi,test debezium avro data,21.799999237060547), then
    -U/+U to zhangsan, then -D (our fixtures rebuild its messages, see make_fixtures.py)."""
    ctx = DecodeContext(
        tables={"test1.person": TableSpec(key=("id",))}, options={"schema_registry": {"url": flink_registry.url}}
    )
    decoder = get_decoder("debezium_avro")
    got = [c for path in FLINK_MESSAGES for c in decoder.decode(path.read_bytes(), ctx)]
    lisi = {"id": "1", "name": "lisi", "description": "test debezium avro data", "weight": "21.799999237060547"}
    assert [(c.op, c.db, c.table, c.before, c.after) for c in got] == [
        ("INSERT", "test1", "person", None, lisi),
        ("UPDATE", "test1", "person", lisi, {**lisi, "name": "zhangsan"}),
        ("DELETE", "test1", "person", {**lisi, "name": "zhangsan"}, None),
    ]
    assert got[0].seq[:2] == (5, 213795) and got[0].event_time == "2020-09-04T08:17:52Z"
    assert flink_registry.requests.count("/apis/ccompat/v7/schemas/ids/81") == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_messages_only_reject_or_decode(flink_registry, data):
    raw = bytearray(data.draw(st.sampled_from(FLINK_MESSAGES)).read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        i = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if kind == "flip" and raw:
            raw[i] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del raw[i:]
        else:
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=4))
    ctx = DecodeContext(options={"schema_registry": {"url": flink_registry.url}})
    try:
        changes = get_decoder("debezium_avro").decode(bytes(raw), ctx)
    except Reject:
        return
    assert check_changes(changes) is changes
