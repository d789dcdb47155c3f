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
import uuid
from pathlib import Path
from typing import Iterator

from pipelines.config import PipelineConfig
from pipelines.formats import Change, DecodeContext, Reject, get_decoder
from pipelines.formats.base import ROW_OPS
from pipelines.warehouse import Warehouse

log = logging.getLogger(__name__)

#: Quarantine keeps this much of the raw message inline; the pointer leads to all of it.
RAW_EXCERPT_BYTES = 4096

DECODED_DDL = (
    "kind STRING, source STRING, format STRING, db STRING, `schema` STRING, `table` STRING, op STRING, "
    "key_columns ARRAY<STRING>, before MAP<STRING, STRING>, after MAP<STRING, STRING>, changed ARRAY<STRING>, "
    "col_types MAP<STRING, STRING>, seq STRING, queue_pos STRING, change_index INT, event_time STRING, "
    "txn STRING, ddl STRING, detail STRING, reason STRING, raw_excerpt BINARY, bronze_position STRING, "
    "ingest_time TIMESTAMP"
)
_BRONZE_COLUMNS = ("source", "format", "value", "position", "queue_pos", "ingest_time")


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
        yield {
            **base, "kind": kind, "db": ch.db, "schema": ch.schema, "table": ch.table, "op": ch.op,
            "key_columns": list(ch.key_columns), "before": ch.before, "after": ch.after,
            "changed": list(ch.changed) if ch.changed is not None else None, "col_types": ch.col_types,
            "seq": seq_text(ch.seq), "change_index": index, "event_time": ch.event_time, "txn": ch.txn,
            "ddl": ch.ddl, "detail": ch.detail,
        }


def make_decode_batches(contexts: dict[str, DecodeContext], default_ctx: DecodeContext):
    """The ``mapInArrow`` function: bronze Arrow batches → silver Arrow batches."""

    def decode_batches(batches):
        import pyarrow as pa

        from pipelines.spark_schema import arrow_schema_of

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
    return df.select(*_BRONZE_COLUMNS).mapInArrow(make_decode_batches(contexts, cfg.decode_context()), DECODED_DDL)


# ---------------------------------------------------------------- writing the four tables

CHANGES_COLUMNS = (
    "source", "format", "db", "schema", "table", "op", "key_columns", "before", "after", "changed",
    "col_types", "seq", "queue_pos", "change_index", "event_time", "txn", "detail", "bronze_position",
    "ingest_time",
)
HEARTBEAT_COLUMNS = ("source", "format", "db", "schema", "table", "op", "detail", "seq", "queue_pos",
                     "event_time", "txn", "bronze_position", "ingest_time")
DDL_COLUMNS = ("source", "format", "db", "schema", "table", "ddl", "detail", "seq", "queue_pos", "event_time",
               "txn", "bronze_position", "ingest_time")
QUARANTINE_COLUMNS = ("stage", "source", "format", "db", "table", "reason", "rule", "bad_value",
                      "bronze_position", "queue_pos", "raw_excerpt", "ingest_time")


def quarantine_frame(df):
    """Shape any rows with reason/bronze_position into the quarantine table's columns."""
    from pyspark.sql import functions as F

    cols = []
    for c in QUARANTINE_COLUMNS:
        if c in df.columns:
            cols.append(F.col(c))
        else:
            typ = {"raw_excerpt": "binary", "ingest_time": "timestamp"}.get(c, "string")
            cols.append(F.lit(None).cast(typ).alias(c))
    return df.select(*cols)


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


def append_idempotent(frame, ref, app_id: str, version: int) -> None:
    """Append; a retry of the same (app_id, version) is skipped by Delta itself."""
    writer = (frame.write.format("delta").mode("append").option("txnAppId", app_id)
              .option("txnVersion", version).option("mergeSchema", "true"))
    ref.save(writer)


def run_id(checkpoint: str) -> str:
    """A stable id for one checkpoint's life: replaying from a fresh checkpoint gets a new id,
    so Delta's idempotency never mistakes a replay for a retry."""
    marker = Path(checkpoint) / "lakecdc_run_id"
    if marker.exists():
        return marker.read_text().strip()
    marker.parent.mkdir(parents=True, exist_ok=True)
    value = uuid.uuid4().hex
    marker.write_text(value)
    return value


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
