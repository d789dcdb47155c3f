"""Spark Connect (issue 33): a Connect session has no py4j gateway, so each JVM reach of the runtime takes its
Connect path. Checked with a stand-in of Connect's classes (no Connect server needed): nothing touches
``sparkContext``, ``_jvm``, ``_jdf`` or ``_jdt``, and each says what it does instead."""

from __future__ import annotations

import pytest

from pipelines import delta_writes, spark_logs
from pipelines.kafka_offsets import KafkaProbe


class _NoJvm:
    """Any attribute of the JVM world fails loudly, as Connect's objects do."""

    def __getattr__(self, name: str):
        raise AssertionError(f"a Connect path reached {name}")


def _connect(kind: str) -> object:
    module = {"session": "pyspark.sql.connect.session", "frame": "pyspark.sql.connect.dataframe"}[kind]
    return type("SparkSession" if kind == "session" else "DataFrame", (_NoJvm,), {"__module__": module})()


def test_connect_objects_are_told_from_classic_ones_by_their_class():
    assert spark_logs.is_connect(_connect("session")) and spark_logs.is_connect(_connect("frame"))
    assert not spark_logs.is_connect(object()) and not spark_logs.is_connect(_NoJvm())


def test_log_levels_are_left_to_the_connect_server():
    spark_logs.quiet_loggers(_connect("session"))  # no sparkContext reached


def test_a_connect_session_has_no_table_size_so_merges_write_deletion_vectors():
    assert delta_writes.table_size_bytes(_connect("session"), ref=None) is None


def test_a_checkpoint_over_connect_is_left_to_the_servers_cleaner():
    delta_writes.release_checkpoint(_connect("frame"))  # no _jdf reached


def test_kafka_offsets_over_connect_say_why_they_are_unknown():
    with pytest.raises(RuntimeError, match="no JVM gateway \\(Spark Connect\\)"):
        KafkaProbe(_connect("session"), {"kafka.bootstrap.servers": "127.0.0.1:9"})
