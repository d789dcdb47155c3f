"""Silver: decode bronze messages into canonical changes; nothing is lost silently.

Each bronze row goes through the decoder of its format (the same decoder object
``lakecdc decode`` uses) inside ``mapInArrow``, and comes out as rows of one of five
kinds, written to five tables (and their counts to a sixth, ``batch_counts``):

* ``changes``     one row per row change (INSERT, UPDATE, DELETE, SNAPSHOT, TRUNCATE)
* ``heartbeats``  heartbeats and progress events (transaction markers, GTID, ...)
* ``ddl_log``     DDL statements
* ``quarantine``  messages that could not be decoded: reason + pointer to the bronze row
* ``skipped``     changes and DDL of tables the configuration's ``include`` / ``exclude`` leave out:
                  pointer, table, op and the list that skipped it, never the row (pipelines.selection)

Silver also drops the columns a table's ``columns_include`` / ``columns_exclude`` keep out, right
after decoding: nothing after silver sees them. Bronze keeps every message as it came.

Reconciliation per message: every bronze row yields at least one silver row, and
``messages in = messages with changes + heartbeats + DDL + quarantined + skipped``.
A micro-batch is decoded once (persisted), counted in one aggregate and appended with one commit per
table it has rows for, each commit marked with the batch, so a batch retried after a crash is never
appended twice (:func:`write_silver_batch`). Its counts and high-water marks go to ``batch_counts``
(:mod:`pipelines.silver_counts`): reconciliation and freshness read those, not the history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig
from pipelines.connect_relay import open_relay, send
from pipelines.delta_writes import append_once, may_be_retried, quarantine_frame, run_id
from pipelines.errors import Outage
from pipelines.formats import Change, DecodeContext, Reject, get_decoder
from pipelines.formats.base import MAX_SEQ_DIGITS, ROW_OPS, Decoder, check_changes, message_budget
from pipelines.layout import (
    BRONZE_COLUMNS,
    CHANGE_FIELDS,
    CHANGES_COLUMNS,
    DDL_COLUMNS,
    DECODED_DDL,
    HEARTBEAT_COLUMNS,
    SKIPPED_COLUMNS,
)
from pipelines.selection import Selection
from pipelines.silver_counts import count_rows, counts_frame, ensure_batch_counts, last_seen, reconcile
from pipelines.spark_schema import arrow_schema_of
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

#: Quarantine keeps this much of the raw message inline; the pointer leads to all of it.
RAW_EXCERPT_BYTES = 4096
#: Longest quarantine reason kept (one reached 10 MB); a longer one is cut and says so.
MAX_REASON_CHARS = 2000


def seq_text(seq: tuple[int, ...]) -> str:
    """Vendor ordering as fixed-width text, so string order is tuple order (Spark and Python agree).

    Only components of 0 to 20 digits keep that promise; :func:`decode_message` quarantines any
    other (``formats.base.check_changes``), and this refuses one that got here anyway.
    """
    parts = []
    for c in seq:
        text = f"{int(c):020d}"
        if len(text) > MAX_SEQ_DIGITS or text.startswith("-"):
            raise Reject(
                f"ordering component {text[:40]} is not a non-negative integer of at most {MAX_SEQ_DIGITS} digits"
            )
        parts.append(text)
    return ".".join(parts)


def decode_message(decoder: Decoder, raw: bytes | None, ctx: DecodeContext, key: bytes | None = None) -> list[Change]:
    """Decode one message (its value ``raw`` and Kafka record ``key``, None from landing files); any
    failure becomes Reject (a bug in a decoder must not stop the stream).

    The decoder's ``decode_record`` decides what a null value is: most reject it; Debezium counts a
    tombstone as a heartbeat. The changes are checked before they leave
    (``formats.base.check_changes``): a name or value UTF-8 cannot encode (a lone surrogate), an
    overlong type name or an ordering component silver cannot sort makes the whole message a
    quarantined one, never a failed batch. The message's budget (``formats.base.message_budget``)
    bounds the text its changes may hold, so no message multiplies itself in memory.
    """
    try:
        # any object with ``decode`` is served: the base class's record rule applies to one without its own
        read = decoder.decode_record if isinstance(decoder, Decoder) else partial(Decoder.decode_record, decoder)
        size = len(raw or b"") + len(key or b"")
        with message_budget(size, ctx.max_message_bytes) as budget:
            changes = read(key, raw, ctx)
        return check_changes(changes, budget)
    except Reject:
        raise
    except RecursionError:
        raise Reject("message nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - quarantined with the error named
        raise Reject(f"decoder {decoder.format_id} failed: {type(exc).__name__}: {exc}") from None


def quarantine_reason(reason: str) -> str:
    """A reject reason as silver stores and prints it: valid UTF-8 (odd characters escaped) and at
    most :data:`MAX_REASON_CHARS` characters, marked where it was cut."""
    text = str(reason) or "rejected"
    if len(text) > MAX_REASON_CHARS:
        text = text[:MAX_REASON_CHARS] + f" ...[reason cut: {len(text)} characters]"
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def decoded_rows(
    bronze: dict, changes: list[Change] | None, reason: str | None, selection: Selection | None = None
) -> Iterator[dict]:
    """The silver rows of one bronze message (a quarantine row when ``reason`` is set); with a
    ``selection``, the changes of tables it skips are ``skipped`` rows and the others lose the columns
    their table keeps out (:class:`~pipelines.errors.Reject` when that would drop a key column)."""
    base = {
        "source": bronze["source"],
        "format": bronze["format"],
        "bronze_position": bronze["position"],
        "queue_pos": bronze["queue_pos"],
        "ingest_time": bronze["ingest_time"],
    }
    if reason is not None:
        raw = bronze.get("value")
        yield {
            **base,
            "kind": "quarantine",
            "reason": quarantine_reason(reason),
            "change_index": 0,
            "raw_excerpt": raw[:RAW_EXCERPT_BYTES] if raw is not None else None,
        }
        return
    if not changes:
        # Consumed but nothing to apply (e.g. a half of a split update the decoder keeps): a progress event.
        yield {**base, "kind": "heartbeat", "op": "HEARTBEAT", "detail": "no row change", "change_index": 0}
        return
    decided = selection.decide(bronze["source"], changes) if selection is not None else [(c, None) for c in changes]
    for index, (ch, skipped) in enumerate(decided):
        if skipped is not None:
            yield {**base, "kind": "skipped", "change_index": index, "reason": skipped, **_origin_fields(ch)}
            continue
        kind = "change" if ch.op in ROW_OPS else ("ddl" if ch.op == "DDL" else "heartbeat")
        yield {**base, "kind": kind, "change_index": index, **_silver_fields(ch)}


def _origin_fields(ch: Change) -> dict:
    """What a ``skipped`` row keeps of a change: its table, op and ordering, none of its values."""
    return {
        "db": ch.db,
        "schema": ch.schema,
        "table": ch.table,
        "op": ch.op,
        "seq": seq_text(ch.seq),
        "event_time": ch.event_time,
        "txn": ch.txn,
        "detail": ch.detail,
    }


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


def make_decode_batches(
    contexts: dict[str, DecodeContext], default_ctx: DecodeContext, selection: Selection | None = None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function: bronze Arrow batches → silver Arrow batches.

    It never raises for a message: whatever goes wrong with one (a decoder bug, an unknown format
    id, a row Arrow cannot store) becomes that message's quarantine row, and every bronze row
    yields at least one silver row. ``selection``: the tables and columns kept (None: all).
    """

    def decode_batches(batches):
        for batch in batches:
            yield _arrow_batch(
                [(bronze, _message_rows(bronze, contexts, default_ctx, selection)) for bronze in batch.to_pylist()]
            )

    return decode_batches


def _message_rows(
    bronze: dict, contexts: dict[str, DecodeContext], default_ctx: DecodeContext, selection: Selection | None = None
) -> list[dict]:
    """The silver rows of one bronze row; a failure of any kind is its quarantine row, except an
    :class:`~pipelines.errors.Outage` (a schema registry down), which fails the batch to be retried."""
    fmt = bronze["format"]
    try:
        changes = decode_message(get_decoder(fmt), bronze["value"], contexts.get(fmt, default_ctx), bronze.get("key"))
        return list(decoded_rows(bronze, changes, None, selection))
    except Outage:
        raise
    except KeyError as exc:  # unknown format id in bronze
        return list(decoded_rows(bronze, None, str(exc)))
    except Exception as exc:  # noqa: BLE001 - Reject, or a silver bug: either way this message only
        reason = str(exc) if isinstance(exc, Reject) else f"silver failed: {type(exc).__name__}: {exc}"
        return list(decoded_rows(bronze, None, reason))


def _arrow_batch(messages: list[tuple[dict, list[dict]]]):
    """One Arrow batch of every message's rows; a message whose rows Arrow refuses is quarantined alone."""
    import pyarrow as pa

    schema = arrow_schema_of(DECODED_DDL)
    try:
        return pa.RecordBatch.from_pylist([row for _bronze, rows in messages for row in rows], schema=schema)
    except Exception:  # noqa: BLE001 - find the message(s) at fault below
        pass
    kept: list[dict] = []
    for bronze, rows in messages:
        try:
            pa.RecordBatch.from_pylist(rows, schema=schema)
            kept.extend(rows)
        except Exception as exc:  # noqa: BLE001
            kept.extend(
                decoded_rows(bronze, None, f"silver cannot store the decoded change: {type(exc).__name__}: {exc}")
            )
    return pa.RecordBatch.from_pylist(kept, schema=schema)


def bronze_input(df: DataFrame) -> DataFrame:
    """The bronze columns the decoder reads, as ``mapInArrow`` receives them. A bronze table written
    before the key was read (or a test's frame) has no key column: NULL keys."""
    from pyspark.sql import functions as F

    return df.select(
        *[F.lit(None).cast("binary").alias(c) if c == "key" and c not in df.columns else c for c in BRONZE_COLUMNS]
    )


def decode_frame(df: DataFrame, cfg: PipelineConfig) -> DataFrame:
    """Bronze DataFrame (batch or stream) → decoded silver rows of all four kinds."""
    formats = {s.format for s in cfg.sources} | set(cfg.format_options) | {"auto"}
    contexts = {fmt: cfg.decode_context(fmt) for fmt in formats}
    decode = make_decode_batches(contexts, cfg.decode_context(), cfg.selection())
    return bronze_input(df).mapInArrow(decode, DECODED_DDL)


# ---------------------------------------------------------------- writing the five tables


def _event_time(col):
    from pyspark.sql import functions as F

    return F.to_timestamp(col).alias("event_time")


#: Each silver table, the kind of decoded row it keeps and its columns (quarantine: its own shape).
_OUTPUTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("changes", "change", CHANGES_COLUMNS),
    ("heartbeats", "heartbeat", HEARTBEAT_COLUMNS),
    ("ddl_log", "ddl", DDL_COLUMNS),
    ("quarantine", "quarantine", ()),
    ("skipped", "skipped", SKIPPED_COLUMNS),
)


def _shaped(decoded: DataFrame, table: str, columns: tuple[str, ...]) -> DataFrame:
    """Decoded rows in the columns of a silver table."""
    from pyspark.sql import functions as F

    if table == "quarantine":
        return quarantine_frame(decoded.withColumn("stage", F.lit("silver")))
    return decoded.select(*[_event_time("event_time") if c == "event_time" else c for c in columns])


@dataclass
class SilverStats:
    """What silver wrote in a run: rows per kind (``change``, ``heartbeat``, ``ddl``, ``quarantine``,
    ``skipped``), added up over its micro-batches."""

    rows: dict[str, int] = field(default_factory=lambda: {kind: 0 for _t, kind, _c in _OUTPUTS})

    def add(self, counts: dict[str, int]) -> None:
        for kind, n in counts.items():
            self.rows[kind] = self.rows.get(kind, 0) + n

    @property
    def skipped(self) -> int:
        return self.rows.get("skipped", 0)


def batch_marker(app_id: str, table: str, batch_id: int) -> str:
    """The ``userMetadata`` of silver's append of one batch to one table."""
    return f"lakecdc:{app_id}-{table}:{batch_id}"


def write_silver_batch(
    spark: SparkSession, batch_df: DataFrame, batch_id: int, wh: Warehouse, app_id: str, check: bool = True
) -> dict[str, int]:
    """Append one decoded micro-batch to the silver tables it has rows for, and its counts and marks to
    ``batch_counts`` (:mod:`pipelines.silver_counts`): the batch decoded once (persisted), counted in one
    aggregate, one commit per table with rows. Returns the rows written per kind.

    Each append carries a commit marker (:func:`~pipelines.delta_writes.append_once`); with ``check`` (a
    batch an earlier run began and did not finish, :func:`~pipelines.delta_writes.may_be_retried`, or a direct
    call) it first looks for the marker and skips a write an earlier attempt made. Open-source Delta checks a
    ``txnAppId`` stamp by rebuilding the table's state (Spark jobs on every write); a marker costs a look only
    where a retry can be."""
    batch_df = batch_df.persist()
    try:
        return write_decoded(spark, batch_df, batch_id, wh, app_id, check)
    finally:
        batch_df.unpersist()


def write_decoded(
    spark: SparkSession, decoded: DataFrame, batch_id: int, wh: Warehouse, app_id: str, check: bool
) -> dict[str, int]:
    """:func:`write_silver_batch` of a batch the caller has persisted (it reads ``decoded`` once per table)."""
    per_source = count_rows(decoded)
    counts = {kind: sum(int(r[f"{kind}_rows"]) for r in per_source) for _t, kind, _c in _OUTPUTS}
    for table, kind, columns in _OUTPUTS:
        if counts[kind]:
            frame = _shaped(decoded.where(f"kind = '{kind}'"), table, columns)
            append_once(frame, wh.silver(table), batch_marker(app_id, table, batch_id), check)
    if per_source:
        frame = counts_frame(spark, app_id, batch_id, per_source)
        append_once(frame, wh.silver("batch_counts"), batch_marker(app_id, "batch_counts", batch_id), check)
    log.info(
        "silver batch %d: %d changes, %d heartbeats, %d ddl, %d quarantined, %d skipped",
        batch_id,
        counts["change"],
        counts["heartbeat"],
        counts["ddl"],
        counts["quarantine"],
        counts["skipped"],
    )
    return counts


def changes_of(decoded: DataFrame) -> DataFrame:
    """The rows of ``changes`` a decoded batch appends, in that table's columns (what gold reads of it)."""
    return _shaped(decoded.where("kind = 'change'"), "changes", CHANGES_COLUMNS)


def ensure_silver(spark: SparkSession, wh: Warehouse) -> None:
    """Create the silver tables that do not exist yet (``skipped`` and ``batch_counts`` too, in a warehouse
    older than them: ``batch_counts`` then starts with the counts of what silver holds)."""
    ensure_batch_counts(spark, wh)
    empty = decode_frame_schema_only(spark)
    for table, _kind, columns in _OUTPUTS:
        if not wh.silver(table).exists(spark):
            wh.silver(table).save(_shaped(empty, table, columns).write.format("delta").mode("append"))


def decode_frame_schema_only(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], DECODED_DDL)


def silver_checkpoint(wh: Warehouse) -> str:
    """Where the silver query keeps its checkpoint."""
    return wh.checkpoint("silver", "decode")


def start_silver(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, available_now: bool, stats: SilverStats | None = None
) -> StreamingQuery:
    """Start the silver query: bronze → decoded rows → the silver tables, checkpointed. ``stats``, when
    given, adds up the rows of each kind the run writes (the run summary's skipped changes). Only a batch
    an earlier run began and did not finish (:func:`~pipelines.delta_writes.may_be_retried`) looks for its
    commit markers."""
    ensure_silver(spark, wh)
    checkpoint = silver_checkpoint(wh)
    app_id = f"lakecdc-silver-{run_id(checkpoint)}"
    bounded = wh.bronze.read_stream(spark, maxBytesPerTrigger=str(cfg.batch_bytes))  # limits.batch_bytes
    decoded = decode_frame(bounded, cfg)
    retried = may_be_retried(checkpoint)
    relay = open_relay(spark, checkpoint)
    if relay is not None:  # the batches run in a worker beside the server, on copies: pipelines.connect_relay
        stats = SilverStats()

    def each_batch(df: DataFrame, batch_id: int) -> None:
        counts = write_silver_batch(spark, df, batch_id, wh, app_id, check=retried(batch_id))
        if stats is not None:
            stats.add(counts)
        if relay is not None:
            send(spark, relay, stats)

    writer = (
        decoded.writeStream.queryName("silver_decode").option("checkpointLocation", checkpoint).foreachBatch(each_batch)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=cfg.processing_time)
    return writer.start()


__all__ = [
    "SilverStats",
    "batch_marker",
    "changes_of",
    "decode_frame",
    "last_seen",
    "reconcile",
    "seq_text",
    "start_silver",
    "write_decoded",
    "write_silver_batch",
]
