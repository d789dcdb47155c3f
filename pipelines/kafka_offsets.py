"""Kafka partitions, their offsets and the timestamp of a record, from the driver's JVM.

``lakecdc status`` compares these with what bronze holds. The consumer is the one Spark's Kafka source brings
(``kafka-clients`` from ``spark-sql-kafka``; Databricks shades it as ``kafkashaded.org.apache.kafka``), reached
through the py4j gateway: no extra Python dependency in the wheel, and it takes the source's own ``kafka.*``
settings, so what authenticates bronze authenticates status. It asks for metadata only, except one fetch per
lagging partition for the timestamp of its first unread record. Spark Connect has no gateway: there it raises.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipelines.spark_logs import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: How long to wait for the brokers (metadata, offsets, the first unread records).
KAFKA_TIMEOUT_SECONDS = 10.0

Partition = tuple[str, int]


class KafkaProbe:
    """The Kafka consumer of the driver's JVM (``kafka-clients``, which Spark's Kafka source brings;
    Databricks shades it as ``kafkashaded.org.apache.kafka``), with the source's ``kafka.*`` settings."""

    def __init__(self, spark: SparkSession, options: Mapping[str, str]) -> None:
        """``options``: Spark Kafka source options; the ``kafka.*`` ones configure the consumer."""
        jvm = None if is_connect(spark) else getattr(spark.sparkContext, "_jvm", None)
        if jvm is None:
            raise RuntimeError("no JVM gateway (Spark Connect): Kafka end offsets cannot be read here")
        self.jvm, self.consumer, last = jvm, None, None
        for prefix in ("", "kafkashaded."):
            try:
                props = jvm.java.util.Properties()
                for key, value in options.items():
                    if key.startswith("kafka."):
                        props.setProperty(key[len("kafka.") :], value)
                deserializer = f"{prefix}org.apache.kafka.common.serialization.ByteArrayDeserializer"
                for key, value in {
                    "key.deserializer": deserializer,
                    "value.deserializer": deserializer,
                    "enable.auto.commit": "false",
                    "max.partition.fetch.bytes": "65536",
                    "default.api.timeout.ms": str(int(KAFKA_TIMEOUT_SECONDS * 1000)),
                    "client.id": "lakecdc-status",
                }.items():
                    props.setProperty(key, value)
                self.kafka = _jvm_path(jvm, f"{prefix}org.apache.kafka")
                self.consumer = self.kafka.clients.consumer.KafkaConsumer(props)
                return
            except Exception as exc:  # noqa: BLE001 - try the shaded name, then say why neither works
                last = exc
        raise RuntimeError(f"no Kafka client on the driver's classpath (spark-sql-kafka): {last}")

    def __enter__(self) -> KafkaProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()

    def partitions(self, topics: tuple[str, ...], pattern: str | None) -> list[Partition]:
        if pattern:
            found = self.consumer.listTopics()
            topics = tuple(t for t in found.keySet() if re.fullmatch(pattern, t))
        out = []
        for topic in topics:
            infos = self.consumer.partitionsFor(topic)
            if infos is None or infos.isEmpty():
                raise RuntimeError(f"topic {topic!r} does not exist")
            out += [(topic, int(info.partition())) for info in infos]
        return sorted(out)

    def _tps(self, parts: Any) -> Any:
        tps = self.jvm.java.util.ArrayList()
        for topic, partition in parts:
            tps.add(self.kafka.common.TopicPartition(topic, partition))
        return tps

    def offsets(self, parts: list[Partition], which: str) -> dict[Partition, int]:
        got = (self.consumer.endOffsets if which == "end" else self.consumer.beginningOffsets)(self._tps(parts))
        return {(tp.topic(), int(tp.partition())): int(got.get(tp)) for tp in got.keySet()}

    def first_timestamps(
        self, positions: Mapping[Partition, int], ends: Mapping[Partition, int]
    ) -> tuple[dict[Partition, int], set[Partition]]:
        """The timestamp (epoch ms) of the record at each position (the oldest message not yet read), and the
        partitions that hold no record there: only transaction markers (a transactional producer's commit
        markers take offsets too), so the consumer's position jumps to the end."""
        tps = self._tps(positions)
        self.consumer.assign(tps)
        for tp in tps:
            self.consumer.seek(tp, positions[(tp.topic(), int(tp.partition()))])
        found: dict[Partition, int] = {}
        markers: set[Partition] = set()
        deadline = time.monotonic() + KAFKA_TIMEOUT_SECONDS
        duration = self.jvm.java.time.Duration.ofMillis(500)
        while len(found) + len(markers) < len(positions) and time.monotonic() < deadline:
            records = self.consumer.poll(duration)
            for tp in records.partitions():
                batch = records.records(tp)
                if not batch.isEmpty():
                    found.setdefault((tp.topic(), int(tp.partition())), int(batch.get(0).timestamp()))
                    self.consumer.pause(self.jvm.java.util.Collections.singletonList(tp))
            for tp in tps:
                part = (tp.topic(), int(tp.partition()))
                if part not in found and part not in markers and int(self.consumer.position(tp)) >= ends[part]:
                    markers.add(part)
        return found, markers


def _jvm_path(jvm: Any, dotted: str) -> Any:
    node = jvm
    for part in dotted.split("."):
        node = getattr(node, part)
    return node
