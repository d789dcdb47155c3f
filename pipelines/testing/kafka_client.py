"""Thin confluent-kafka helpers: produce records, read a topic back (tests), config from env.

Requirement: ``confluent-kafka>=2.6`` (its wheels bundle librdkafka; no system library needed).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

__all__ = ["ConsumedRecord", "client_config_from_env", "produce", "consume"]

Headers = Sequence[tuple[str, bytes | None]]


class ConsumedRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int | None


# environment variable -> librdkafka property (for a real, secured cluster)
_ENV_MAP = {
    "KAFKA_SECURITY_PROTOCOL": "security.protocol",  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    "KAFKA_SASL_MECHANISM": "sasl.mechanism",  # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
    "KAFKA_SASL_USERNAME": "sasl.username",
    "KAFKA_SASL_PASSWORD": "sasl.password",
    "KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
    "KAFKA_SSL_CERTIFICATE_LOCATION": "ssl.certificate.location",
    "KAFKA_SSL_KEY_LOCATION": "ssl.key.location",
    "KAFKA_SSL_KEY_PASSWORD": "ssl.key.password",
    "KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "ssl.endpoint.identification.algorithm",
}


def client_config_from_env(bootstrap: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """librdkafka config: ``bootstrap.servers`` (arg or ``KAFKA_BOOTSTRAP_SERVERS``) + SASL/SSL from env.

    Variables: KAFKA_BOOTSTRAP_SERVERS, KAFKA_SECURITY_PROTOCOL, KAFKA_SASL_MECHANISM,
    KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_SSL_CA_LOCATION, KAFKA_SSL_CERTIFICATE_LOCATION,
    KAFKA_SSL_KEY_LOCATION, KAFKA_SSL_KEY_PASSWORD, KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM.
    """
    env = os.environ if env is None else env
    servers = bootstrap or env.get("KAFKA_BOOTSTRAP_SERVERS")
    if not servers:
        raise ValueError("no bootstrap servers: pass bootstrap= or set KAFKA_BOOTSTRAP_SERVERS")
    conf: dict[str, Any] = {"bootstrap.servers": servers}
    for var, prop in _ENV_MAP.items():
        if env.get(var):
            conf[prop] = env[var]
    return conf


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]] | Iterable[tuple[bytes | None, bytes | None, Headers]],
    *,
    partition: int | None = None,
    config: dict[str, Any] | None = None,
    timeout: float = 30.0,
) -> int:
    """Produce ``(key, value)`` or ``(key, value, headers)`` records; block until all are acknowledged.

    Keys are hashed to partitions by librdkafka's ``murmur2_random`` partitioner (same as the Java
    client) unless ``partition`` is given.  Idempotent, ``acks=all``: ordering per key is kept.
    Returns the number of records delivered; raises ``KafkaException`` on the first delivery error.
    """
    from confluent_kafka import KafkaException, Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        "log_level": 3,
    }
    conf.update(config or {})
    producer = Producer(conf)
    errors: list[Any] = []
    delivered = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(err)
        else:
            delivered += 1

    sent = 0
    for rec in records:
        key, value, *rest = rec
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if rest and rest[0]:
            kwargs["headers"] = list(rest[0])
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: serve callbacks and retry
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
        if errors:
            break
    remaining = producer.flush(timeout)
    if errors:
        raise KafkaException(errors[0])
    if remaining or delivered != sent:
        raise TimeoutError(f"{sent - delivered} of {sent} records not acknowledged after {timeout}s")
    return delivered


def consume(
    bootstrap: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = 30.0,
    config: dict[str, Any] | None = None,
) -> list[ConsumedRecord]:
    """Read ``topic`` from the beginning of every partition (no consumer group commits).

    Stops once ``expected`` records were read, or — when ``expected`` is None — once every
    partition has reached the high watermark seen at the start.  Raises ``TimeoutError`` if that
    does not happen within ``timeout`` seconds.  Records come ordered by (partition, offset).
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"lakecdc-test-{os.getpid()}-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
        "auto.offset.reset": "earliest",
        "log_level": 3,
    }
    conf.update(config or {})
    consumer = Consumer(conf)
    try:
        md = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if md.error is not None:
            raise KafkaException(md.error)
        parts = sorted(md.partitions)
        ends = {}
        for p in parts:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[ConsumedRecord] = []
        done_parts = {p for p in parts if ends[p] == 0} if expected is None else set()
        deadline = time.monotonic() + timeout
        while True:
            if expected is not None and len(out) >= expected:
                break
            if expected is None and len(done_parts) == len(parts):
                break
            if time.monotonic() > deadline:
                got = len(out)
                want = expected if expected is not None else sum(ends.values())
                raise TimeoutError(f"read {got} of {want} records from {topic!r} in {timeout}s")
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                ts_type, ts = msg.timestamp()
                out.append(
                    ConsumedRecord(
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        list(msg.headers() or []),
                        ts if ts_type else None,
                    )
                )
                if expected is None and msg.offset() + 1 >= ends[msg.partition()]:
                    done_parts.add(msg.partition())
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()
