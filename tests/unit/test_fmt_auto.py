"""Format "auto": the sniffing table, delegation, and rejects."""

from __future__ import annotations

import base64
import importlib
import importlib.util
import json
from pathlib import Path

import pytest
from _real_fixtures import REAL, records

from pipelines.formats import ALL_FORMAT_IDS
from pipelines.formats.auto import CANDIDATES, DECODER, sniff
from pipelines.formats.base import DecodeContext, Num, Reject

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
        "canal",
    ),
    ({"a": "1", "__deleted": "false"}, "oms_debezium_smt"),
    # Debezium as the Debezium project writes it: a source field OMS never writes, or a numeric pos
    (
        {
            "schema": {"type": "struct", "name": "dbserver1.inventory.customers.Envelope"},
            "payload": {
                "op": "c",
                "after": {"id": 1},
                "source": {"connector": "postgresql", "lsn": 1, "snapshot": "false"},
            },
        },
        "debezium",
    ),
    (
        {"op": "u", "before": {}, "after": {}, "source": {"connector": "mysql", "file": "", "pos": 0, "row": 0}},
        "debezium",
    ),
    ({"op": "c", "after": {}, "source": {"connector": "mysql", "name": "n", "pos": Num("4")}}, "debezium"),
    ({"id": 1, "__op": "c", "__table": "customers", "__deleted": "false"}, "debezium"),
    ({"id": 1, "type": "x", "table": "y", "__op": "u", "__source_ts_ms": 1}, "debezium"),
    ({"schema": {"type": "struct"}, "payload": {"id": 1, "__op": "d", "__deleted": "true"}}, "debezium"),
    ({"ts_ms": Num("1589362330904")}, "debezium"),  # heartbeat
    ({"status": "BEGIN", "id": "571:53195829", "event_count": None, "data_collections": None}, "debezium"),
    ({"source": {"server": "mysql"}, "databaseName": "inventory", "ddl": "CREATE TABLE t (id INT)"}, "debezium"),
    ({"schema": {"name": "io.debezium.connector.common.Heartbeat"}, "payload": {"ts_ms": Num("1")}}, "debezium"),
    (
        {
            "table": "QASOURCE.TCUSTMER",
            "op_type": "I",
            "op_ts": "2015-11-05 18:45:36.000000",
            "current_ts": "2016-10-05T10:15:51.267000",
            "pos": "00000000000000002928",
            "after": {"CUST_CODE": "WILL"},
        },
        "ogg_json",
    ),
    (
        {"$schema": "http://json-schema.org/draft-04/schema#", "title": "QASOURCE.TCUSTORD", "type": "object"},
        "ogg_json",
    ),
    (
        {
            "data": {"id": 1},
            "metadata": {
                "timestamp": "2023-01-01T00:00:00.000000Z",
                "record-type": "data",
                "operation": "insert",
                "partition-key-type": "primary-key",
                "schema-name": "s",
                "table-name": "t",
                "transaction-id": 12,
            },
        },
        "aws_dms",
    ),
]


@pytest.mark.parametrize("obj, format_id", SHAPES)
def test_sniffing_table(obj, format_id):
    assert sniff(obj) == format_id


def test_every_json_format_has_a_rule_or_must_be_named():
    sniffed = {fid for _obj, fid in SHAPES}
    named_only = {"drs_json_c", "dts_canal", "drs_avro", "oms_avro", "dts_avro", "debezium_avro", "auto"}
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
    "drs_json_c": {"drs_json", "canal"},
    "drs_json": {"drs_json", "canal"},
    "dts_canal": {"canal"},  # DTS Canal JSON has open-source Canal's shape: named only (module docstring)
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
        ("canal-data.txt", "canal"),
        ("debezium-data-schema-exclude.txt", "debezium"),
        ("maxwell-data.txt", "maxwell"),
        ("product_changelog.txt", "debezium"),
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
    _needs("debezium")
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


# ---------------------------------------------------------------- the formats beyond the seeds


def _needs(format_id: str) -> None:
    """Skip while another helper's format module is not written yet (re-run once it is)."""
    if importlib.util.find_spec(f"pipelines.formats.{format_id}") is None:
        pytest.skip(f"pipelines/formats/{format_id}.py does not exist yet")


@pytest.mark.parametrize("obj", [{}, {"a": 1}, {"metadata": {"x": 1}}, {"type": 5, "database": "d"}])
def test_an_unclassifiable_message_names_every_candidate_and_why_it_failed(obj):
    with pytest.raises(Reject) as err:
        DECODER.decode(json.dumps(obj).encode(), CTX)
    reason = str(err.value)
    for ids, _shape in CANDIDATES:
        assert ids in reason
    for fid in ("debezium", "canal", "oms_canal", "ogg_json", "aws_dms", "maxwell"):
        assert fid in reason
    assert "name the format" in reason
    if "metadata" in obj:
        assert "no 'record-type' in 'metadata'" in reason
    if "type" in obj:
        assert "'type' is a number" in reason


@pytest.mark.parametrize("fmt", ["canal", "maxwell", "ogg_json", "aws_dms"])
def test_real_messages_of_other_projects_are_recognised(fmt):
    paths = sorted(p for p in (REAL / fmt).rglob("*") if p.suffix in (".txt", ".json", ".jsonl"))
    if not paths:
        pytest.skip(f"no real {fmt} messages in tests/fixtures/real/{fmt}")
    seen = 0
    for path in paths:
        for raw in records(path):
            obj = json.loads(raw)
            if fmt == "canal" and not ({"database", "table"} & set(obj)):
                # Paimon's "incomplete" messages name no table: nothing to tell them by (canal tests
                # decode them with default_table); auto must say so rather than guess
                with pytest.raises(Reject, match="candidates considered"):
                    sniff(obj)
                continue
            assert sniff(obj) == fmt, (path.name, raw[:120])
            seen += 1
    assert seen > 10


@pytest.mark.parametrize("fmt", ["canal", "maxwell", "ogg_json", "aws_dms", "debezium"])
def test_auto_decodes_the_new_formats_as_their_own_decoders_do(fmt):
    _needs(fmt)
    own = importlib.import_module(f"pipelines.formats.{fmt}").DECODER
    paths = [SEEDS / f"{fmt}.jsonl"] + sorted((REAL / fmt).rglob("*.txt"))
    compared = 0
    for path in paths:
        if not path.exists():
            continue
        for raw in records(path):
            try:
                if sniff(json.loads(raw)) != fmt:
                    continue  # a Kafka record key stored next to Debezium's values
            except Reject:
                continue  # Paimon's "incomplete" canal messages (test_real_messages_..._are_recognised)
            try:
                expected = own.decode(raw, CTX)
            except Reject as exc:
                with pytest.raises(Reject, match=f"^as {fmt}: ") as err:
                    DECODER.decode(raw, CTX)
                assert str(err.value) == f"as {fmt}: {exc}"
                continue
            assert DECODER.decode(raw, CTX) == expected
            compared += 1
    if compared == 0:
        pytest.skip(f"no {fmt} fixtures yet")


def test_canal_and_oms_canal_are_told_apart_by_id_and_why_not_by_the_bytes():
    msg = {
        "data": [{"k": "1", "b": "abcd"}],
        "database": "d",
        "table": "t",
        "es": 1683168155000,
        "isDdl": False,
        "mysqlType": {"k": "INT", "b": "VARBINARY(10)"},
        "sqlType": {"k": 4, "b": -3},
        "old": None,
        "pkNames": ["k"],
        "sql": "",
        "ts": 1683168155270,
        "type": "INSERT",
    }
    with_id = {**msg, "id": 55}
    assert sniff(msg) == "oms_canal" and sniff(with_id) == "canal"
    # "abcd" is valid Base64 (3 bytes) and ISO-8859-1 text (4 bytes): the bytes cannot tell the writer
    [oms] = DECODER.decode(json.dumps(msg).encode(), CTX)
    [canal] = DECODER.decode(json.dumps(with_id).encode(), CTX)
    assert base64.b64decode(oms.after["b"]) == bytes.fromhex("69b71d")
    assert base64.b64decode(canal.after["b"]) == b"abcd"
    # Canal's own binaries (Paimon: "nine.bin") are no Base64 at all: oms_canal would quarantine them
    nine = {**with_id, "data": [{"k": "9", "b": "nine.bin"}]}
    [change] = DECODER.decode(json.dumps(nine).encode(), CTX)
    assert base64.b64decode(change.after["b"]) == b"nine.bin"
    with pytest.raises(Reject, match="as oms_canal: .*not valid Base64"):
        DECODER.decode(json.dumps({**msg, "data": [{"k": "9", "b": "nine.bin"}]}).encode(), CTX)


def test_debezium_project_and_oms_debezium_are_told_apart_by_source():
    oms = [
        json.loads(raw) for name in ("oms_debezium", "oms_debezium_flatten") for raw in records(SEEDS / f"{name}.jsonl")
    ]
    assert oms and all(sniff(obj) in ("oms_debezium", "oms_debezium_flatten") for obj in oms)
    for obj in oms:  # the same message with one field OMS never writes is Debezium's own
        payload = obj.get("payload", obj)
        if isinstance(payload.get("source"), dict):
            payload["source"]["snapshot"] = "false"
            assert sniff(obj) == "debezium"


def test_a_tombstone_is_debeziums_and_a_record_key_reaches_the_debezium_decoder():
    _needs("debezium")
    own = importlib.import_module("pipelines.formats.debezium").DECODER
    for value in (None, b"", b"null"):
        assert DECODER.decode_record(b'{"id": 1}', value, CTX) == own.decode_record(b'{"id": 1}', None, CTX)
    path = CONFORMANCE / "debezium-data-schema-exclude.txt"
    if not path.exists():
        pytest.skip("conformance corpus not present")
    raw = records(path)[0]
    key = b'{"id": 101}'
    assert DECODER.decode_record(key, raw, CTX) == own.decode_record(key, raw, CTX)
