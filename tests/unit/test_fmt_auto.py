"""Format "auto": the sniffing table, delegation, and rejects."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from pipelines.formats import ALL_FORMAT_IDS
from pipelines.formats.auto import DECODER, sniff
from pipelines.formats.base import DecodeContext, Reject

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "fixtures" / "seeds"
CONFORMANCE = Path("/work/shared/conformance/flink")
CTX = DecodeContext()

SHAPES = [
    ({"allMetaData": {}, "recordType": "INSERT", "postStruct": {"a": 1}}, "oms_default"),
    ({"allMetaData": {}, "recordType": "HEARTBEAT"}, "oms_default"),
    ({"allMetaData": {}, "recordType": "INSERT", "postStruct": {"a": 1, "__light_type": {}}}, "oms_default_extend"),
    ({"meta": {"op": "ins", "table": "a.b"}, "data": {}}, "oms_shareplex"),
    ({"meta": {"op": "ins", "userid": 84}, "data": {}}, "dts_shareplex"),
    ({"id": 1, "op": "INSERT", "db": "d", "coll": "c", "value": "{}"}, "drs_mongo"),
    (
        {
            "schema": {"dataColumn": None, "primaryKey": None, "source": None},
            "payload": {"op": "MHEARTBEAT", "timestamp": {}},
        },
        "dataworks_kafka",
    ),
    ({"payload": {"op": "INSERT", "sequenceId": "1", "after": {"dataColumn": {}}}}, "dataworks_kafka"),
    ({"version": "2.0", "payload": {"op": "HEARTBEAT", "timestamp": {}}}, "oms_dataworks"),
    (
        {"schema": {"column": [], "pk": [], "source": {}}, "payload": {"op": "INSERT", "after": {"data": {}}}},
        "oms_dataworks",
    ),
    ({"schema": {"type": "struct", "fields": []}, "payload": {"op": "c", "source": {}, "after": {}}}, "oms_debezium"),
    ({"payload": {"op": "HEARTBEAT", "source": {}, "ts_ms": 1}}, "oms_debezium"),
    ({"op": "u", "source": {}, "before": {}, "after": {}, "ts_ms": 1}, "oms_debezium_flatten"),
    ({"columnType": {}, "schema": "s", "opType": "UPDATE", "type": "UPDATE", "table": "t"}, "drs_gaussdb"),
    ({"database": "d", "table": "t", "type": "insert", "ts": 1, "xid": 1, "data": {}}, "maxwell"),
    ({"database": "d", "table": "t", "type": "table-create", "def": {}}, "maxwell"),
    ({"jobId": "j", "database": "d", "table": "t", "type": "INIT", "id": 1, "isDdl": False}, "drs_json"),
    ({"database": "d", "table": "t", "type": "INIT_DDL", "id": 0, "isDdl": True}, "drs_json"),
    (
        {
            "database": "d",
            "table": "t",
            "type": "UPDATE",
            "id": 5,
            "isDdl": False,
            "mysqlType": {"c5": "timestamp"},
            "data": [{"c5": "1624614713.201"}],
        },
        "drs_json",
    ),
    ({"database": "d", "table": "t", "type": "INSERT", "isDdl": False, "data": [], "es": 1, "ts": 1}, "oms_canal"),
    (
        {
            "database": "d",
            "table": "t",
            "type": "INSERT",
            "id": 5,
            "isDdl": False,
            "data": [],
            "mysqlType": {"c5": "timestamp"},
        },
        "dts_canal",
    ),
    ({"a": "1", "__deleted": "false"}, "oms_debezium_smt"),
]


@pytest.mark.parametrize("obj, format_id", SHAPES)
def test_sniffing_table(obj, format_id):
    assert sniff(obj) == format_id


def test_every_json_format_has_a_rule_or_must_be_named():
    sniffed = {fid for _obj, fid in SHAPES}
    named_only = {"drs_json_c", "drs_avro", "oms_avro", "dts_avro", "auto"}
    assert sniffed | named_only == set(ALL_FORMAT_IDS)


@pytest.mark.parametrize("obj", [{}, {"a": 1}, {"payload": {"x": 1}}, {"data": [], "b": 2}])
def test_unknown_shapes_reject_listing_keys(obj):
    with pytest.raises(Reject, match="cannot tell the message format"):
        sniff(obj)
    with pytest.raises(Reject, match="name the format"):
        DECODER.decode(json.dumps(obj).encode(), CTX)


@pytest.mark.parametrize("format_id", ["dataworks_kafka", "drs_mongo", "drs_gaussdb"])
def test_delegates_to_the_recognised_decoder(format_id):
    own = importlib.import_module(f"pipelines.formats.{format_id}").DECODER
    for raw in (SEEDS / f"{format_id}.jsonl").read_bytes().splitlines():
        assert DECODER.decode(raw, CTX) == own.decode(raw, CTX)


# Fixtures of other formats (written by other helpers) that exist when this runs: each line
# must be recognised as its own format, or as one it is documented to share a shape with.
ALTERNATES = {
    "drs_json_c": {"drs_json", "dts_canal"},
    "drs_json": {"drs_json", "dts_canal"},
    "oms_debezium": {"oms_debezium", "oms_debezium_flatten"},
}


@pytest.mark.parametrize("path", sorted(SEEDS.glob("*.jsonl")), ids=lambda p: p.stem)
def test_fixtures_present_are_recognised(path):
    format_id = path.stem
    if format_id not in ALL_FORMAT_IDS or format_id in ("oms_avro", "dts_avro", "drs_avro", "oms_debezium_smt"):
        pytest.skip("not a sniffable JSON fixture")
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            assert sniff(json.loads(raw)) in ALTERNATES.get(format_id, {format_id})


@pytest.mark.parametrize(
    "name, format_id",
    [
        ("canal-data.txt", "dts_canal"),
        ("debezium-data-schema-exclude.txt", "oms_debezium_flatten"),
        ("maxwell-data.txt", "maxwell"),
        ("product_changelog.txt", "oms_debezium_flatten"),
    ],
)
def test_conformance_shapes(name, format_id):
    path = CONFORMANCE / name
    if not path.exists():
        pytest.skip("conformance corpus not present")
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            assert sniff(json.loads(raw)) == format_id


BAD = [
    b'{"payload": {',
    b"not json at all",
    b"[1, 2]",
    b"42",
    b"\xff\xfe\x00\x01",
    b"[" * 10000 + b"]" * 10000,
    b'{"database": "d", "type": 5}',
    b'{"x": ' * 10000,
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_inputs_only_reject(raw):
    with pytest.raises(Reject):
        DECODER.decode(raw, CTX)
    with pytest.raises(Reject, match="over the limit"):
        DECODER.decode(raw + b" " * 10, DecodeContext(max_message_bytes=len(raw)))


def test_delegate_failure_becomes_reject():
    with pytest.raises(Reject, match="^as drs_mongo: "):
        DECODER.decode(b'{"op": "INSERT", "coll": "c", "value": "{}"}', CTX)


def _auto_mirror(name: str):
    from pipelines.testing.model import MirrorModel

    path = CONFORMANCE / name
    if not path.exists():
        pytest.skip("conformance corpus not present")
    changes = [c for raw in path.read_bytes().splitlines() if raw.strip() for c in DECODER.decode(raw, CTX)]
    model = MirrorModel().add_all(changes)
    return {t: model.rows(t) for t in model.tables()}


@pytest.mark.parametrize("name", ["canal-data.txt", "maxwell-data.txt"])
def test_conformance_mirror_through_auto_canal_and_maxwell(name):
    [rows] = _auto_mirror(name).values()
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id, key=int) == ["101", "104", "105", "106", "107", "108", "109", "110"]
    assert by_id["101"]["weight"] == "5.17" and by_id["107"]["weight"] == "5.1"
    assert by_id["106"]["description"] == "18oz carpenter hammer"
    assert (by_id["110"]["description"], by_id["110"]["weight"]) == ("new water resistent white wind breaker", "0.5")


def test_conformance_mirror_through_auto_debezium():
    [rows] = _auto_mirror("debezium-data-schema-exclude.txt").values()
    assert sorted(int(r["id"]) for r in rows) == list(range(101, 111))
    sums: dict[str, float] = {}
    for r in rows:
        sums[r["name"]] = sums.get(r["name"], 0.0) + float(r["weight"])
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
    assert all(abs(sums[k] - v) < 1e-5 for k, v in expected.items())
    assert all(rows == [] for rows in _auto_mirror("product_changelog.txt").values())
