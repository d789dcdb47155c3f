"""End-to-end fixtures: a real local Kafka broker (KRaft, 127.0.0.1) shared by the whole session."""

from __future__ import annotations

import atexit
import shutil
import sys
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:  # `pytest` (not `python -m pytest`) without an installed package
    sys.path.insert(0, str(_ROOT))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka: needs the local Kafka broker (real KRaft broker on 127.0.0.1)")


class KafkaFixture:
    """What ``kafka_broker`` yields: ``.bootstrap`` plus topic/produce/consume helpers."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def data_dir(self) -> Path:
        return self.broker.data_dir

    def unique_topic(self, prefix: str = "t", partitions: int = 3, **kw: Any) -> str:
        """Create and return a fresh topic name (tests never share topics)."""
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        self.broker.create_topic(name, partitions, **kw)
        return name

    def create_topic(self, name: str, partitions: int = 3, **kw: Any) -> None:
        self.broker.create_topic(name, partitions, **kw)

    def delete_topic(self, name: str, **kw: Any) -> None:
        self.broker.delete_topic(name, **kw)

    def list_topics(self, **kw: Any) -> list[str]:
        return self.broker.list_topics(**kw)

    def produce(self, topic: str, records: Iterable[tuple], **kw: Any) -> int:
        from pipelines.testing.kafka_client import produce

        return produce(self.bootstrap, topic, records, **kw)

    def consume(self, topic: str, **kw: Any) -> list:
        from pipelines.testing.kafka_client import consume

        return consume(self.bootstrap, topic, **kw)

    def __repr__(self) -> str:
        return f"KafkaFixture({self.bootstrap})"


def _skip_reason() -> str | None:
    if shutil.which("java") is None:
        return "java (17+) is not installed"
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed"
    from pipelines.spark import build_dir
    from pipelines.testing.kafka_broker import KAFKA_VERSION, _jars_present

    if shutil.which("mvn") is None and not _jars_present(build_dir() / "kafka" / "lib", KAFKA_VERSION):
        return "Kafka jars not cached and mvn is not installed"
    return None


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFixture]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from pipelines.testing.kafka_broker import LocalBroker

    broker = LocalBroker(data_dir=tmp_path_factory.mktemp("kafka"), fresh=True)
    atexit.register(broker.stop)  # also covered by LocalBroker's own atexit + PR_SET_PDEATHSIG
    try:
        broker.start()
        yield KafkaFixture(broker)
    finally:
        broker.stop()
