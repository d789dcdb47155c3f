"""Silver: decode bronze messages into canonical changes; nothing is lost silently.

Each bronze row goes through the decoder of its format (the same decoder object
``lakecdc decode`` uses) inside ``mapInArrow``, and comes out as rows of one of four
kinds, written to four tables:

* ``changes``     one row per row change (INSERT, UPDATE, DELETE, SNAPSHOT, TRUNCATE)
* ``heartbeats``  heartbeats and progress events (transaction markers, GTID, ...)
* ``ddl_log``     DDL statements
* ``quarantine``  messages that could not be decoded: reason + pointer to the bronze row

Reconciliation per message: every bronze row yields at least one silver row, and
``messages in = messages with changes + heartbeats + DDL + quarantined``.
Each micro-batch is written with Delta's idempotent ``txnAppId``/``txnVersion``, so a
batch retried after a crash is never appended twice.
"""
from __future__ import annotations

import logging
from typing import Iterator

from pipelines.config import PipelineConfig
from pipelines.delta_writes import append_idempotent, quarantine_frame, run_id
from pipelines.formats import Change, DecodeContext, Reject, get_decoder
from pipelines.formats.base import ROW_OPS
from pipelines.layout import BRONZE_COLUMNS, CHANGE_FIELDS, CHANGES_COLUMNS, DDL_COLUMNS, DECODED_DDL, HEARTBEAT_COLUMNS
from pipelines.spark_schema import arrow_schema_of
from pipelines.warehouse import Warehouse

log = logging.getLogger(__name__)

#: Quarantine keeps this much of the raw message inline; the pointer leads to all of it.
RAW_EXCERPT_BYTES = 4096


def seq_text(seq: tuple[int, ...]) -> str:
    """Vendor ordering as fixed-width text, so string order is tuple order (Spark and Python agree)."""
    return ".".join(f"{int(c):020d}" for c in seq)


def decode_message(decoder, raw: bytes | None, ctx: DecodeContext) -> list[Change]:
    """Decode one message; any failure becomes Reject (a bug in a decoder must not stop the stream)."""
    if raw is None:
        raise Reject("message value is null (a Kafka tombstone or an empty landing line)")
    try:
        return decoder.decode(raw, ctx)
    except Reject:
        raise
    except RecursionError:
        raise Reject("message nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - quarantined with the error named
        raise Reject(f"decoder {decoder.format_id} failed: {type(exc).__name__}: {exc}") from None


def decoded_rows(bronze: dict, changes: list[Change] | None, reason: str | None) -> Iterator[dict]:
    """The silver rows of one bronze message (a quarantine row when ``reason`` is set)."""
    base = {
        "source": bronze["source"], "format": bronze["format"], "bronze_position": bronze["position"],
        "queue_pos": bronze["queue_pos"], "ingest_time": bronze["ingest_time"],
    }
    if reason is not None:
        raw = bronze.get("value")
        yield {**base, "kind": "quarantine", "reason": reason, "change_index": 0,
               "raw_excerpt": raw[:RAW_EXCERPT_BYTES] if raw is not None else None}
        return
    if not changes:
        # Consumed but nothing to apply (e.g. a half of a split update the decoder keeps): a progress event.
        yield {**base, "kind": "heartbeat", "op": "HEARTBEAT", "detail": "no row change", "change_index": 0}
        return
    for index, ch in enumerate(changes):
        kind = "change" if ch.op in ROW_OPS else ("ddl" if ch.op == "DDL" else "heartbeat")
        yield {**base, "kind": kind, "change_index": index, **_silver_fields(ch)}


def _silver_fields(ch: Change) -> dict:
    """A change's fields as silver stores them: tuples as lists, the sequence as sortable text."""
    out = {}
    for name in CHANGE_FIELDS:
        value = getattr(ch, name)
        if name == "seq":
            value = seq_text(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def make_decode_batches(contexts: dict[str, DecodeContext], default_ctx: DecodeContext):
    """The ``mapInArrow`` function: bronze Arrow batches → silver Arrow batches."""

    def decode_batches(batches):
        import pyarrow as pa

        schema = arrow_schema_of(DECODED_DDL)
        for batch in batches:
            out: list[dict] = []
            for bronze in batch.to_pylist():
                fmt = bronze["format"]
                ctx = contexts.get(fmt, default_ctx)
                try:
                    changes = decode_message(get_decoder(fmt), bronze["value"], ctx)
                    out.extend(decoded_rows(bronze, changes, None))
                except Reject as exc:
                    out.extend(decoded_rows(bronze, None, str(exc) or "rejected"))
                except KeyError as exc:  # unknown format id in bronze
                    out.extend(decoded_rows(bronze, None, str(exc)))
            yield pa.RecordBatch.from_pylist(out, schema=schema)

    return decode_batches


def decode_frame(df, cfg: PipelineConfig):
    """Bronze DataFrame (batch or stream) → decoded silver rows of all four kinds."""
    formats = {s.format for s in cfg.sources} | set(cfg.format_options) | {"auto"}
    contexts = {fmt: cfg.decode_context(fmt) for fmt in formats}
    return df.select(*BRONZE_COLUMNS).mapInArrow(make_decode_batches(contexts, cfg.decode_context()), DECODED_DDL)


# ---------------------------------------------------------------- writing the four tables

def _event_time(col):
    from pyspark.sql import functions as F

    return F.to_timestamp(col).alias("event_time")


def write_silver_batch(spark, batch_df, batch_id: int, wh: Warehouse, app_id: str) -> dict[str, int]:
    """Append one decoded micro-batch to the four tables, each write idempotent by (app_id, batch_id)."""
    from pyspark.sql import functions as F

    batch_df = batch_df.persist()
    try:
        counts = {k: 0 for k in ("change", "heartbeat", "ddl", "quarantine")}
        for row in batch_df.groupBy("kind").count().collect():
            counts[row["kind"]] = row["count"]
        outputs = {
            "changes": batch_df.where("kind = 'change'").select(
                *[_event_time("event_time") if c == "event_time" else c for c in CHANGES_COLUMNS]),
            "heartbeats": batch_df.where("kind = 'heartbeat'").select(
                *[_event_time("event_time") if c == "event_time" else c for c in HEARTBEAT_COLUMNS]),
            "ddl_log": batch_df.where("kind = 'ddl'").select(
                *[_event_time("event_time") if c == "event_time" else c for c in DDL_COLUMNS]),
            "quarantine": quarantine_frame(batch_df.where("kind = 'quarantine'").withColumn("stage", F.lit("silver"))),
        }
        for name, frame in outputs.items():
            append_idempotent(frame, wh.silver(name), f"{app_id}-{name}", batch_id)
        log.info("silver batch %d: %d changes, %d heartbeats, %d ddl, %d quarantined", batch_id,
                 counts["change"], counts["heartbeat"], counts["ddl"], counts["quarantine"])
        return counts
    finally:
        batch_df.unpersist()


def ensure_silver(spark, wh: Warehouse) -> None:
    from pyspark.sql import functions as F

    empty = decode_frame_schema_only(spark)
    shapes = {
        "changes": empty.select(*[_event_time("event_time") if c == "event_time" else c for c in CHANGES_COLUMNS]),
        "heartbeats": empty.select(*[_event_time("event_time") if c == "event_time" else c for c in HEARTBEAT_COLUMNS]),
        "ddl_log": empty.select(*[_event_time("event_time") if c == "event_time" else c for c in DDL_COLUMNS]),
        "quarantine": quarantine_frame(empty.withColumn("stage", F.lit("silver"))),
    }
    for name, frame in shapes.items():
        if not wh.silver(name).exists(spark):
            wh.silver(name).save(frame.write.format("delta").mode("append"))


def decode_frame_schema_only(spark):
    return spark.createDataFrame([], DECODED_DDL)


def start_silver(spark, cfg: PipelineConfig, wh: Warehouse, available_now: bool):
    ensure_silver(spark, wh)
    checkpoint = wh.checkpoint("silver", "decode")
    app_id = f"lakecdc-silver-{run_id(checkpoint)}"
    decoded = decode_frame(wh.bronze.read_stream(spark), cfg)
    writer = (
        decoded.writeStream.queryName("silver_decode")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(lambda df, batch_id: write_silver_batch(spark, df, batch_id, wh, app_id))
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=cfg.processing_time)
    return writer.start()


def reconcile(spark, wh: Warehouse) -> dict[str, int]:
    """messages in (bronze) vs messages accounted for in silver, per kind."""
    bronze = wh.bronze.read(spark).count()
    out = {"bronze_messages": bronze}
    for name in ("changes", "heartbeats", "ddl_log", "quarantine"):
        df = wh.silver(name).read(spark)
        if name == "quarantine":
            df = df.where("stage = 'silver'")
        out[name] = df.select("bronze_position").distinct().count()
    out["accounted"] = wh.silver("changes").read(spark).select("bronze_position").union(
        wh.silver("heartbeats").read(spark).select("bronze_position")).union(
        wh.silver("ddl_log").read(spark).select("bronze_position")).union(
        wh.silver("quarantine").read(spark).where("stage = 'silver'").select("bronze_position")).distinct().count()
    return out


__all__ = ["decode_frame", "start_silver", "write_silver_batch", "reconcile", "seq_text"]
