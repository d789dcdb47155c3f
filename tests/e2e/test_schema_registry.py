"""Debezium as Confluent Avro through a REAL schema registry (Apicurio Registry 3.0.9, ccompat API) and a
real Kafka broker, bronze → silver → gold, to mirrors equal to the rows the generator knows it wrote."""

from __future__ import annotations

import base64
import datetime as dt
import io
import random
import shutil
from decimal import Decimal

import fastavro
import pytest
import yaml

from pipelines.config import load_config
from pipelines.export import expected_rows, export_warehouse
from pipelines.formats.confluent import frame
from pipelines.runner import run_pipeline
from pipelines.silver import reconcile
from pipelines.warehouse import Warehouse

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

TABLE = "shop.orders"
COLUMNS = {
    "id": "bigint",
    "name": "varchar(64)",
    "amount": "decimal(12,2)",
    "created": "datetime(6)",
    "day": "date",
    "blob": "blob",
}

VALUE = {
    "type": "record",
    "name": "Value",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {
            "name": "amount",
            "type": {
                "type": "bytes",
                "scale": 2,
                "precision": 12,
                "connect.version": 1,
                "connect.parameters": {"scale": "2", "connect.decimal.precision": "12"},
                "connect.name": "org.apache.kafka.connect.data.Decimal",
                "logicalType": "decimal",
            },
        },
        {
            "name": "created",
            "type": ["null", {"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"}],
            "default": None,
        },
        {
            "name": "day",
            "type": ["null", {"type": "int", "connect.version": 1, "connect.name": "io.debezium.time.Date"}],
            "default": None,
        },
        {"name": "blob", "type": ["null", "bytes"], "default": None},
    ],
    "connect.name": "srv.shop.orders.Value",
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "srv.shop.orders",
    "fields": [
        {"name": "before", "type": ["null", VALUE], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.mysql",
                "fields": [
                    {"name": "version", "type": "string"},
                    {"name": "connector", "type": "string"},
                    {"name": "name", "type": "string"},
                    {"name": "ts_ms", "type": "long"},
                    {"name": "db", "type": "string"},
                    {"name": "table", "type": ["null", "string"], "default": None},
                    {"name": "server_id", "type": "long"},
                    {"name": "file", "type": "string"},
                    {"name": "pos", "type": "long"},
                    {"name": "row", "type": "int"},
                ],
                "connect.name": "io.debezium.connector.mysql.Source",
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
    "connect.name": "srv.shop.orders.Envelope",
}
KEY = {
    "type": "record",
    "name": "Key",
    "namespace": "srv.shop.orders",
    "fields": [{"name": "id", "type": "long"}],
    "connect.name": "srv.shop.orders.Key",
}


@pytest.fixture(scope="module")
def registry():
    from pipelines.spark import build_dir
    from pipelines.testing.schema_registry import APICURIO_VERSION, LocalRegistry

    cached = (build_dir() / "apicurio" / APICURIO_VERSION / "lib").is_dir()
    if shutil.which("java") is None or (not cached and shutil.which("mvn") is None):
        pytest.skip("java, and mvn (or a cached Apicurio Registry under build/apicurio), are needed")
    with LocalRegistry() as reg:
        yield reg


def _avro(schema: dict, datum: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


def _wall_clock(value: dt.datetime) -> str:
    """Canonical DATETIME text: ISO-8601 without zone, fraction without trailing zeros."""
    text = value.isoformat()
    return text.rstrip("0").rstrip(".") if "." in text else text


def _generate(n: int, seed: int):
    """Debezium MySQL changes (c/u/d, a tombstone after each delete); and the final rows, canonical."""
    rng = random.Random(seed)
    state: dict[int, dict] = {}
    changes = []
    pos = 4
    epoch = dt.datetime(1970, 1, 1)
    for step in range(n):
        key = rng.randint(1, 20)
        pos += rng.randint(1, 900)
        created = dt.datetime(2024, 1, 1) + dt.timedelta(seconds=step * 37, microseconds=rng.randint(0, 999999))
        row = {
            "id": key,
            "name": rng.choice(["Ada", "Björn", "Chen Wei", None]),
            "amount": Decimal(rng.randint(-(10**11), 10**11)).scaleb(-2),
            "created": (created - epoch) // dt.timedelta(microseconds=1),
            "day": (created.date() - dt.date(1970, 1, 1)).days,
            "blob": bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 6))) if rng.random() < 0.8 else None,
        }
        before = state.get(key)
        if before is None:
            op, after = "c", row
        elif rng.random() < 0.25:
            op, after = "d", None
        else:
            op, after = "u", row
        if after is None:
            state.pop(key)
        else:
            state[key] = after
        source = {
            "version": "2.4.0.Final",
            "connector": "mysql",
            "name": "srv",
            "ts_ms": 1704067200000 + step * 1000,
            "db": "shop",
            "table": "orders",
            "server_id": 1,
            "file": "mysql-bin.000003",
            "pos": pos,
            "row": 0,
        }
        changes.append((key, {"before": before, "after": after, "source": source, "op": op, "ts_ms": source["ts_ms"]}))
    final = [
        {
            "id": str(r["id"]),
            "name": r["name"],
            "amount": str(r["amount"]),
            "created": _wall_clock(epoch + dt.timedelta(microseconds=r["created"])),
            "day": (dt.date(1970, 1, 1) + dt.timedelta(days=r["day"])).isoformat(),
            "blob": base64.b64encode(r["blob"]).decode() if r["blob"] is not None else None,
        }
        for r in state.values()
    ]
    return changes, final


def test_debezium_avro_through_a_real_registry_and_kafka_mirrors_exactly(registry, kafka_broker, spark, tmp_path):
    topic = kafka_broker.unique_topic("dbz-avro", partitions=3)
    value_id = registry.register(f"{topic}-value", ENVELOPE)
    key_id = registry.register(f"{topic}-key", KEY)
    assert value_id != key_id
    changes, final = _generate(150, seed=11)
    records = []
    for key, envelope in changes:
        framed_key = frame(key_id, _avro(KEY, {"id": key}))
        records.append((framed_key, frame(value_id, _avro(ENVELOPE, envelope))))
        if envelope["op"] == "d":
            records.append((framed_key, None))  # Debezium's tombstone after a delete
    tombstones = sum(1 for _k, v in records if v is None)
    assert tombstones > 0
    records.append((b"poison", b'{"not": "confluent avro"}'))
    records.append((b"unknown-id", frame(999_999, b"\x02")))
    kafka_broker.produce(topic, records)

    conf = {
        "warehouse": str(tmp_path / "warehouse"),
        "sources": [
            {
                "name": "dbz",
                "format": "debezium_avro",
                "kafka": {"bootstrap_servers": kafka_broker.bootstrap, "topics": [topic]},
            }
        ],
        "tables": {TABLE: {"key": ["id"], "columns": COLUMNS}},
        "format_options": {"debezium_avro": {"schema_registry": {"url": registry.url, "timeout": 20}}},
        "quality_checks": False,
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(conf))
    cfg = load_config(path)
    run_pipeline(spark, cfg)

    wh = Warehouse.from_config(cfg)
    got, want = export_warehouse(spark, wh), {TABLE: expected_rows(final, COLUMNS, ["id"])}
    assert list(got) == [TABLE]
    by_id = {r["id"]: r for r in got[TABLE]}
    wrong = {r["id"]: (by_id.get(r["id"]), r) for r in want[TABLE] if by_id.get(r["id"]) != r}
    assert not wrong and len(got[TABLE]) == len(want[TABLE]), wrong
    assert got == want
    counts = reconcile(spark, wh)
    assert counts["bronze_messages"] == len(records)
    assert counts["quarantine"] == 2  # the unframed message and the unknown schema id; tombstones are not
    quarantine = {r["reason"] for r in wh.silver("quarantine").read(spark).select("reason").collect()}
    assert any("not the magic byte" in r for r in quarantine)
    assert any("schema id 999999 is not in the schema registry" in r and registry.url in r for r in quarantine)
