"""PySpark's Kafka source (spark-sql-kafka-0-10) reads the local broker: counts and bytes match."""

from __future__ import annotations

import os

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


# Spark's Kafka source must match the installed Spark exactly.  pyspark here is 4.1.3 (4.1.4 is
# not on Maven Central), and spark.jars.packages=...spark-sql-kafka-0-10_2.13:4.1.3 fails because
# its dependency spark-token-provider-kafka-0-10_2.13:4.1.3 is missing from the repository; so the
# jars come from ensure_spark_kafka_jars() and go in through spark.jars.


@pytest.fixture(scope="module")
def spark_with_kafka():
    pyspark = pytest.importorskip("pyspark")
    pytest.importorskip("delta")
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    from pipelines.kafka.broker import PROJECT_ROOT

    active = SparkSession.getActiveSession()
    if active is not None:
        if "spark-sql-kafka" not in active.conf.get("spark.jars", "") + active.conf.get("spark.jars.packages", ""):
            pytest.skip("a Spark session without spark-sql-kafka already runs in this process")
        yield active
        return
    from pipelines.kafka.broker import ensure_spark_kafka_jars

    jars = ",".join(str(p) for p in ensure_spark_kafka_jars())
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("lakecdc-kafka-e2e")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars.ivy", str(PROJECT_ROOT / "build" / "ivy"))
        .config("spark.ui.enabled", "false")
        .config("spark.jars", jars)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    )
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    assert pyspark.__version__.startswith("4.1")
    yield spark  # left running: a shared session fixture may reuse it; the JVM ends with pytest


def test_spark_batch_read_matches_produced_bytes(kafka_broker, spark_with_kafka):
    topic = kafka_broker.unique_topic("spark", partitions=3)
    records = [(f"k{i % 7}".encode(), bytes([i % 256, 0xFF, 0x00]) + os.urandom(i % 13)) for i in range(200)]
    records.append((None, b"\xc3\x28\xa0\xa1"))  # no key, invalid UTF-8
    kafka_broker.produce(topic, records)

    df = (
        spark_with_kafka.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    assert [f.name for f in df.schema.fields][:7] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
    ]
    rows = df.select("key", "value", "partition", "offset").collect()
    assert len(rows) == len(records)
    def order(kv):
        return (kv[0] is not None, kv[0] or b"", kv[1])

    got = [(bytes(r.key) if r.key is not None else None, bytes(r.value)) for r in rows]
    assert sorted(got, key=order) == sorted(records, key=order)
    assert {r.partition for r in rows} == {0, 1, 2}

    # Spark sees the same (partition, offset) placement as the Python consumer
    py = {(r.partition, r.offset): (r.key, r.value) for r in kafka_broker.consume(topic)}
    sp = {(r.partition, r.offset): (bytes(r.key) if r.key is not None else None, bytes(r.value)) for r in rows}
    assert sp == py


def test_spark_structured_streaming_available_now(kafka_broker, spark_with_kafka, tmp_path):
    topic = kafka_broker.unique_topic("stream", partitions=3)
    records = [(f"id-{i}".encode(), b"\x00\xff" + i.to_bytes(4, "big")) for i in range(50)]
    kafka_broker.produce(topic, records)
    stream = (
        spark_with_kafka.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
    )
    out = tmp_path / "delta_out"
    q = (
        stream.writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start(str(out))
    )
    assert q.awaitTermination(180)
    rows = spark_with_kafka.read.format("delta").load(str(out)).collect()
    assert sorted((bytes(r.key), bytes(r.value)) for r in rows) == sorted(records)
