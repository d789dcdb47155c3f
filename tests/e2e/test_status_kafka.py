"""`lakecdc status` against a real Kafka broker: what bronze has not read yet is the lag."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from pipelines.cli import main
from pipelines.config import load_config
from pipelines.runner import run_pipeline
from pipelines.status import collect_status
from pipelines.testing.demo import generate_keyed

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_messages_produced_after_bronze_ran_are_the_lag(kafka_broker, spark, tmp_path, capsys):
    topic = kafka_broker.unique_topic("status", partitions=3)
    conf_path = tmp_path / "pipeline.yaml"
    conf = {
        "warehouse": str(tmp_path / "warehouse"),
        "quality_checks": False,
        "sources": [
            {"name": "shop", "format": "oms_default", "kafka": {"bootstrap_servers": kafka_broker.bootstrap, "topics": [topic]}}
        ],
    }  # fmt: skip
    conf_path.write_text(yaml.safe_dump(conf))
    cfg = load_config(conf_path)
    pairs = generate_keyed(30, seed=4)["shop_oms"]
    first, rest = pairs[:20], pairs[20:]

    kafka_broker.produce(topic, first)
    before = collect_status(spark, cfg)  # bronze has read nothing: everything is lag
    assert before.sources[0].pending == len(first)
    run_pipeline(spark, cfg, stages=("bronze",))
    produced_at = time.time()
    kafka_broker.produce(topic, rest)
    time.sleep(1.5)

    [shop] = collect_status(spark, cfg).sources
    assert shop.error is None
    assert shop.pending == len(rest)
    assert sum(p["end_offset"] for p in shop.partitions) == len(pairs)
    assert sum(p["next_offset"] for p in shop.partitions) == len(first)
    assert [(p["topic"], p["partition"]) for p in shop.partitions] == [(topic, 0), (topic, 1), (topic, 2)]
    assert 1.0 <= shop.lag_seconds <= time.time() - produced_at + 1  # the oldest unread message's age

    capsys.readouterr()
    assert main(["status", "--conf", str(conf_path), "--json", "--max-lag-seconds", "0.5"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["sources"][0]["pending"] == len(rest) and doc["breaches"][0].startswith("shop: lag ")

    run_pipeline(spark, cfg, stages=("bronze",))
    [caught_up] = collect_status(spark, cfg).sources
    assert (caught_up.pending, caught_up.lag_seconds) == (0, 0.0)
