"""The pipeline reading a real Kafka broker: mixed formats, duplicates, poison, restarts, continuous runs."""

from __future__ import annotations

import random

import pytest
import yaml

from pipelines.config import load_config
from pipelines.export import expected_rows, export_warehouse
from pipelines.formats import Reject, get_decoder
from pipelines.runner import run_pipeline
from pipelines.silver import reconcile
from pipelines.testing.demo import KEYS, demo_config, generate_keyed, produce_to_kafka
from pipelines.testing.demo_model import as_mirrored, mirror_model, mirror_types
from pipelines.warehouse import Warehouse

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _expected(keyed: dict, cfg) -> dict:
    """The reference model over every distinct message, decoded in source order."""
    model = mirror_model()
    for source, pairs in keyed.items():
        fmt = cfg.source(source).format
        ctx = cfg.decode_context(fmt)
        for _key, raw in pairs:
            try:
                model.add_all(as_mirrored(c) for c in get_decoder(fmt).decode(raw, ctx))
            except Reject:
                pass
    return {t: expected_rows(model.rows(t), mirror_types(t), KEYS[t]) for t in model.tables()}


def _conf(tmp_path, bootstrap, topics, **extra):
    conf = {**demo_config(tmp_path, bootstrap, topics, quality=False), **extra}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(conf))
    return load_config(path)


def test_two_topics_three_partitions_duplicates_poison_and_a_restart(kafka_broker, spark, tmp_path):
    keyed = generate_keyed(140, seed=5)
    topics = {source: kafka_broker.unique_topic(source, partitions=3) for source in keyed}
    cfg = _conf(tmp_path, kafka_broker.bootstrap, topics)
    rng = random.Random(3)
    first = {s: pairs[: len(pairs) // 2] for s, pairs in keyed.items()}
    rest = {s: pairs[len(pairs) // 2 :] for s, pairs in keyed.items()}
    duplicates = {s: [p for p in pairs if p[0] != b"orders:?" and rng.random() < 0.15] for s, pairs in first.items()}

    produce_to_kafka(kafka_broker.bootstrap, first, topics)
    run_pipeline(spark, cfg)  # until caught up, then stopped: a restart follows
    produce_to_kafka(kafka_broker.bootstrap, rest, topics)
    produce_to_kafka(kafka_broker.bootstrap, duplicates, topics)  # at-least-once redelivery
    kafka_broker.produce(topics["shop_oms"], [(b"orders:?", b"\x00\xff poison, not a message")])
    summary = run_pipeline(spark, cfg)

    wh = Warehouse.from_config(cfg)
    assert export_warehouse(spark, wh) == _expected(keyed, cfg)
    counts = reconcile(spark, wh)
    sent = sum(map(len, keyed.values())) + sum(map(len, duplicates.values())) + 1
    assert counts["bronze_messages"] == sent, "every message landed once, none lost or doubled"
    assert counts["accounted"] == sent
    assert counts["quarantine"] == 3 + 1  # the demo's three malformed messages and the poison one
    bronze = wh.bronze.read(spark)
    assert bronze.select("topic", "partition", "offset").distinct().count() == sent
    assert bronze.select("partition").distinct().count() == 3
    assert summary.applied > 0


@pytest.mark.long  # make test-all: a continuous run of its own (CI: the run until caught up, restarted)
def test_continuous_run_picks_up_what_is_produced_while_it_runs(kafka_broker, spark, tmp_path):
    keyed = generate_keyed(60, seed=9)
    topics = {source: kafka_broker.unique_topic(source, partitions=3) for source in keyed}
    cfg = _conf(tmp_path, kafka_broker.bootstrap, topics, trigger="continuous", processing_time="2 seconds")
    produce_to_kafka(kafka_broker.bootstrap, keyed, topics)
    run_pipeline(spark, cfg, available_now=False, stop_after=45)
    assert export_warehouse(spark, Warehouse.from_config(cfg)) == _expected(keyed, cfg)


def test_a_recreated_topic_fails_loudly_by_default(kafka_broker, spark, tmp_path):
    """Documented choice: failOnDataLoss=true, so offsets that went backwards stop the stream."""
    keyed = generate_keyed(20, seed=2)
    topics = {source: kafka_broker.unique_topic(source, partitions=1) for source in keyed}
    cfg = _conf(tmp_path, kafka_broker.bootstrap, topics)
    produce_to_kafka(kafka_broker.bootstrap, keyed, topics)
    run_pipeline(spark, cfg, stages=("bronze",))
    kafka_broker.delete_topic(topics["shop_oms"])
    kafka_broker.create_topic(topics["shop_oms"], 1)
    kafka_broker.produce(topics["shop_oms"], keyed["shop_oms"][:2])
    with pytest.raises(RuntimeError, match="(?i)data loss|offset.*changed|missed|failOnDataLoss"):
        run_pipeline(spark, cfg, stages=("bronze",))


@pytest.mark.long  # a broker of its own, stopped and started (CI's slice: the restart of the first test here)
def test_broker_restart_while_the_pipeline_runs_loses_nothing(spark, tmp_path):
    """Stop and start the broker under a continuous pipeline: it recovers (the Kafka client retries),
    or fails with a clear error and then resumes from its checkpoint; either way nothing is lost."""
    import threading
    import time

    from pipelines.testing.kafka_broker import LocalBroker, free_port

    port, controller_port = free_port(), free_port()
    broker = LocalBroker(data_dir=tmp_path / "kafka", port=port, controller_port=controller_port, fresh=True).start()
    try:
        keyed = generate_keyed(80, seed=13)
        topics = {source: source for source in keyed}
        first = {s: pairs[: len(pairs) // 2] for s, pairs in keyed.items()}
        rest = {s: pairs[len(pairs) // 2 :] for s, pairs in keyed.items()}
        cfg = _conf(tmp_path, broker.bootstrap, topics, trigger="continuous", processing_time="2 seconds")
        produce_to_kafka(broker.bootstrap, first, topics)
        outcome: dict = {}

        def run():
            try:
                run_pipeline(spark, cfg, available_now=False, stop_after=60)
                outcome["ok"] = True
            except Exception as exc:  # noqa: BLE001 - a clear error is one of the two accepted outcomes
                outcome["error"] = str(exc)

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(20)
        broker.stop()
        time.sleep(5)
        broker = LocalBroker(data_dir=tmp_path / "kafka", port=port, controller_port=controller_port).start()
        produce_to_kafka(broker.bootstrap, rest, topics)
        worker.join(timeout=240)
        assert not worker.is_alive()
        if "error" in outcome:
            assert "stream" in outcome["error"] and "failed" in outcome["error"]
        run_pipeline(spark, cfg)  # resume until caught up
        wh = Warehouse.from_config(cfg)
        assert export_warehouse(spark, wh) == _expected(keyed, cfg)
        assert reconcile(spark, wh)["bronze_messages"] == sum(map(len, keyed.values()))
    finally:
        broker.stop()
