"""Bronze: land raw messages untouched, one row per message, with where they came from.

Two inputs, one table:

* a landing directory of JSON-lines files (the local stand-in for a queue): each
  non-blank line is one message, kept as its exact bytes (invalid UTF-8 included:
  silver quarantines it, bronze never judges). Binary formats (Avro) cannot be
  newline-framed, so their landing lines hold one Base64-encoded message each and
  bronze stores the decoded bytes;
* a Kafka topic list or pattern through Spark's Kafka source: key, value, topic,
  partition, offset, timestamp and headers.

``queue_pos`` is the queue's own order, the tie-break after the format's
sequence: ``<partition>:<offset>`` for Kafka, ``<file>#<line>`` for landing files.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pipelines.config import KafkaSource, PipelineConfig, Source, resolve_secret
from pipelines.formats import get_decoder
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

BRONZE_DDL = (
    "source STRING, format STRING, key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, headers ARRAY<STRUCT<key: STRING, value: BINARY>>, file STRING, line BIGINT, "
    "position STRING, queue_pos STRING, ingest_time TIMESTAMP"
)
_LINES_DDL = "file STRING, line BIGINT, value BINARY"


def split_landing_file(path: str, content: bytes, binary: bool) -> Iterator[tuple[int, bytes]]:
    """(line number, message bytes) for each non-blank line of a landing file."""
    for number, line in enumerate(content.split(b"\n"), start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            continue
        if binary:
            try:
                line = base64.b64decode(line.strip(), validate=True)
            except ValueError:
                pass  # kept as is: silver quarantines it with the decoder's reason
        yield number, line


def _split_batches(binary_formats: frozenset[str], fmt: str):
    binary = fmt in binary_formats

    def split(batches):
        import pyarrow as pa

        for batch in batches:
            files, lines, values = [], [], []
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
                for number, value in split_landing_file(path, content or b"", binary):
                    files.append(path)
                    lines.append(number)
                    values.append(value)
            yield pa.RecordBatch.from_arrays(
                [pa.array(files, pa.string()), pa.array(lines, pa.int64()), pa.array(values, pa.binary())],
                names=["file", "line", "value"],
            )

    return split


def landing_stream(spark: SparkSession, source: Source, max_files_per_trigger: int = 100) -> DataFrame:
    """Raw messages of a landing directory, as bronze rows (a streaming DataFrame)."""
    from pyspark.sql import functions as F

    binary_formats = (
        frozenset({source.format}) if source.format != "auto" and get_decoder(source.format).binary else frozenset()
    )
    files = (
        spark.readStream.format("binaryFile")
        .schema("path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .option("recursiveFileLookup", "true")
        .load(source.path)
        .select("path", "content")
    )
    lines = files.mapInArrow(_split_batches(binary_formats, source.format), _LINES_DDL)
    return lines.select(
        F.lit(source.name).alias("source"),
        F.lit(source.format).alias("format"),
        F.lit(None).cast("binary").alias("key"),
        "value",
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("bigint").alias("offset"),
        F.lit(None).cast("timestamp").alias("timestamp"),
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
        "file",
        "line",
        F.concat("file", F.lit("#"), F.col("line").cast("string")).alias("position"),  # file:/path#line
        F.concat("file", F.lit("#"), F.lpad(F.col("line").cast("string"), 12, "0")).alias("queue_pos"),
        F.current_timestamp().alias("ingest_time"),
    )


def kafka_options(kafka: KafkaSource) -> dict[str, str]:
    """Spark Kafka source options. Secrets come from ``${ENV}`` references, never from YAML."""
    opts = {
        "kafka.bootstrap.servers": resolve_secret(kafka.bootstrap_servers),  # ${KAFKA_BOOTSTRAP_SERVERS} too
        "startingOffsets": kafka.starting_offsets,
        # Documented choice: fail loudly when offsets were aged out or a topic was recreated,
        # because a silent skip is a hole in the mirror. Set fail_on_data_loss: false to accept it.
        "failOnDataLoss": "true" if kafka.fail_on_data_loss else "false",
        "includeHeaders": "true",
    }
    if kafka.topics:
        opts["subscribe"] = ",".join(kafka.topics)
    else:
        opts["subscribePattern"] = kafka.topic_pattern
    if kafka.max_offsets_per_trigger:
        opts["maxOffsetsPerTrigger"] = str(kafka.max_offsets_per_trigger)
    for key, value in kafka.security.items():
        opts[key if key.startswith("kafka.") else f"kafka.{key}"] = resolve_secret(value)
    for key, value in kafka.options.items():
        opts[key] = resolve_secret(value)
    return opts


def kafka_stream(spark: SparkSession, source: Source) -> DataFrame:
    from pyspark.sql import functions as F

    raw = spark.readStream.format("kafka").options(**kafka_options(source.kafka)).load()
    return raw.select(
        F.lit(source.name).alias("source"),
        F.lit(source.format).alias("format"),
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "headers",
        F.lit(None).cast("string").alias("file"),
        F.lit(None).cast("bigint").alias("line"),
        F.format_string("kafka:%s/%d@%d", "topic", "partition", "offset").alias("position"),
        F.format_string("%s:%06d:%020d", "topic", "partition", "offset").alias("queue_pos"),
        F.current_timestamp().alias("ingest_time"),
    )


def source_stream(spark: SparkSession, source: Source) -> DataFrame:
    """A source's raw messages as bronze rows (a streaming DataFrame): its Kafka topics or landing directory."""
    return kafka_stream(spark, source) if source.kafka else landing_stream(spark, source)


def ensure_bronze(spark: SparkSession, wh: Warehouse) -> None:
    if not wh.bronze.exists(spark):
        wh.bronze.save(spark.createDataFrame([], BRONZE_DDL).write.format("delta").mode("append"))


def start_bronze(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, source: Source, available_now: bool
) -> StreamingQuery:
    """One checkpointed stream per source, appending to the one bronze table."""
    ensure_bronze(spark, wh)
    stream = source_stream(spark, source)
    writer = (
        stream.writeStream.format("delta")
        .queryName(f"bronze_{source.name}")
        .option("checkpointLocation", wh.checkpoint("bronze", source.name))
        .outputMode("append")
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=cfg.processing_time)
    log.info(
        "bronze: source %s (%s) from %s",
        source.name,
        source.format,
        source.path or ",".join(source.kafka.topics) or source.kafka.topic_pattern,
    )
    return wh.bronze.start_stream(writer)
