"""Local Apache Kafka for development and tests, plus thin client helpers.

- :func:`ensure_jars` / :class:`LocalBroker` (``pipelines.kafka.broker``): a real single-node
  KRaft broker on 127.0.0.1 from Maven Central jars cached in ``build/kafka``.
- :func:`produce` / :func:`consume` (``pipelines.kafka.client``): confluent-kafka based helpers.

The client helpers import ``confluent_kafka`` lazily, so importing this package needs no Kafka client.
"""

from pipelines.kafka.broker import (
    KAFKA_VERSION,
    BrokerError,
    LocalBroker,
    create_topic,
    delete_topic,
    ensure_jars,
    free_port,
    list_topics,
)
from pipelines.kafka.client import ConsumedRecord, client_config_from_env, consume, produce

__all__ = [
    "KAFKA_VERSION",
    "BrokerError",
    "ConsumedRecord",
    "LocalBroker",
    "client_config_from_env",
    "consume",
    "create_topic",
    "delete_topic",
    "ensure_jars",
    "free_port",
    "list_topics",
    "produce",
]
