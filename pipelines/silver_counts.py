"""Silver's counts and high-water marks, kept per micro-batch: reconciliation and freshness without a
rescan of the history.

Each silver micro-batch appends one row per source to ``silver.batch_counts`` (:data:`BATCH_COUNTS_FIELDS`):
its messages, the messages with a row of each kind, and the newest change event time, heartbeat event
time and ingest time. The row comes from the same aggregate that counts the batch's rows (one Spark job
over the persisted batch, :func:`count_rows`) and is appended once per batch like silver's other writes,
so a retried batch counts once. Every message of a batch is in that batch only, so a message counted
in a batch is counted once over all of them.

:func:`reconcile` (``lakecdc replay``, the demo summary) and :func:`last_seen` (``lakecdc status``, the
run's freshness check) add up or take the newest of those rows, and count bronze's messages from its
Delta log (Delta answers ``count()`` of a whole table from the files' statistics). A warehouse whose
silver was written before this table existed gets one row per source made by a scan of its silver
tables when the table is created (:func:`ensure_batch_counts`), so its counts stay exact; where the table
holds no row (silver never wrote a batch, or a test wrote silver's tables directly) both read silver's
tables, as they did before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.layout import ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import Warehouse

#: The silver tables whose messages are counted, and the kind of decoded row each keeps.
COUNTED: tuple[tuple[str, str], ...] = (
    ("changes", "change"),
    ("heartbeats", "heartbeat"),
    ("ddl_log", "ddl"),
    ("quarantine", "quarantine"),
    ("skipped", "skipped"),
)
#: The high-water marks kept per batch and source: what :func:`last_seen` returns, in its order.
MARKS = ("last_change_time", "last_heartbeat_time", "last_ingest_time")
#: ``silver.batch_counts``: per batch and source, messages (each counted once) and the marks.
BATCH_COUNTS_FIELDS: tuple[tuple[str, str], ...] = (
    ("app_id", "STRING"),
    ("batch_id", "BIGINT"),
    ("source", "STRING"),
    ("messages", "BIGINT"),
    *((table, "BIGINT") for table, _kind in COUNTED),
    *((f"{kind}_rows", "BIGINT") for _table, kind in COUNTED),
    *((mark, "TIMESTAMP") for mark in MARKS),
)
#: The batch id of the row a scan made for silver written before ``batch_counts`` existed.
BEFORE_COUNTS = -1


def count_rows(decoded: DataFrame) -> list[dict]:
    """Per source, in one aggregate: the messages (distinct ``bronze_position``), the messages and rows
    of each kind, and the marks as epoch microseconds (exact; :func:`counts_frame` makes them timestamps
    again). ``decoded``: silver rows with ``kind``, ``source``, ``bronze_position``, ``event_time`` (text or
    timestamp) and ``ingest_time``."""
    from pyspark.sql import functions as F

    kind, position = F.col("kind"), F.col("bronze_position")
    event = F.unix_micros(F.to_timestamp("event_time"))
    aggregates = [F.countDistinct(position).alias("messages")]
    for table, k in COUNTED:
        aggregates.append(F.countDistinct(F.when(kind == k, position)).alias(table))
        aggregates.append(F.count(F.when(kind == k, F.lit(1))).alias(f"{k}_rows"))
    aggregates += [
        F.max(F.when(kind == "change", event)).alias("last_change_time"),
        F.max(F.when(kind == "heartbeat", event)).alias("last_heartbeat_time"),
        F.max(F.when(kind.isin("change", "heartbeat"), F.unix_micros("ingest_time"))).alias("last_ingest_time"),
    ]
    return [row.asDict() for row in decoded.groupBy("source").agg(*aggregates).collect()]


def counts_frame(spark: SparkSession, app_id: str, batch_id: int, rows: list[dict]) -> DataFrame:
    """The ``batch_counts`` rows of one batch (``rows`` from :func:`count_rows`)."""
    from pyspark.sql import functions as F

    longs = [(name, "BIGINT" if kind == "TIMESTAMP" else kind) for name, kind in BATCH_COUNTS_FIELDS]
    data = [{**row, "app_id": app_id, "batch_id": int(batch_id)} for row in rows]
    frame = spark.createDataFrame(data, ddl(longs))
    return frame.select(*[F.timestamp_micros(c).alias(c) if c in MARKS else c for c, _t in BATCH_COUNTS_FIELDS])


def ensure_batch_counts(spark: SparkSession, wh: Warehouse) -> None:
    """Create ``batch_counts``; in a warehouse whose silver was written before it, with one row per source
    made by a scan of silver's tables (batch :data:`BEFORE_COUNTS`), once."""
    ref = wh.silver("batch_counts")
    if ref.exists(spark):
        return
    rows = count_rows(_silver_rows(spark, wh)) if _has_silver_rows(spark, wh) else []
    frame = counts_frame(spark, "before-batch-counts", BEFORE_COUNTS, rows)
    ref.save(frame.write.format("delta").mode("append"))


def _has_silver_rows(spark: SparkSession, wh: Warehouse) -> bool:
    return any(wh.silver(t).exists(spark) and wh.silver(t).read(spark).limit(1).count() for t, _k in COUNTED)


def _silver_rows(spark: SparkSession, wh: Warehouse) -> DataFrame:
    """Every silver row's source, kind, position and times (quarantine: silver's own rows), for a scan."""
    from pyspark.sql import functions as F

    frames = []
    for table, kind in COUNTED:
        ref = wh.silver(table)
        if not ref.exists(spark):  # a warehouse silver has not run on since the table was added
            continue
        df = ref.read(spark)
        if table == "quarantine":
            df = df.where("stage = 'silver'").withColumn("event_time", F.lit(None).cast("timestamp"))
        frames.append(df.select("source", F.lit(kind).alias("kind"), "bronze_position", "event_time", "ingest_time"))
    if not frames:
        return spark.createDataFrame([], "source STRING, kind STRING, bronze_position STRING, event_time "
                                         "TIMESTAMP, ingest_time TIMESTAMP")  # fmt: skip
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def kept_counts(spark: SparkSession, wh: Warehouse) -> list[dict]:
    """Per source: the kept counts added up and the newest marks (one read of ``batch_counts``); a scan
    of silver's tables where that table holds no row."""
    from pyspark.sql import functions as F

    ref = wh.silver("batch_counts")
    if ref.exists(spark):
        numbers = [name for name, kind in BATCH_COUNTS_FIELDS if kind == "BIGINT" and name != "batch_id"]
        rows = (
            ref.read(spark)
            .groupBy("source")
            .agg(*[F.sum(c).alias(c) for c in numbers], *[F.max(F.unix_micros(c)).alias(c) for c in MARKS])
            .collect()
        )
        if rows:
            return [row.asDict() for row in rows]
    return count_rows(_silver_rows(spark, wh))


def last_seen(spark: SparkSession, wh: Warehouse) -> dict[str, tuple[float | None, float | None, float | None]]:
    """source → (newest change event time, newest heartbeat event time, newest ingest time of a change or
    heartbeat), epoch seconds, from the kept marks (``lakecdc status``, the freshness check)."""
    return {
        row["source"]: tuple(None if row[m] is None else row[m] / 1e6 for m in MARKS)  # type: ignore[misc]
        for row in kept_counts(spark, wh)
    }


def reconcile(spark: SparkSession, wh: Warehouse) -> dict[str, int]:
    """Messages in (bronze) vs messages accounted for in silver: per table, the messages with a row
    there, and ``accounted``, the messages with a row anywhere (every one, when nothing is lost):
    ``bronze_messages = changes + heartbeats + ddl_log + quarantine + skipped`` where each message is
    of one kind. Silver's side from the kept counts (:func:`kept_counts`)."""
    rows = kept_counts(spark, wh)
    out = {"bronze_messages": wh.bronze.read(spark).count() if wh.bronze.exists(spark) else 0}
    for table, _kind in COUNTED:
        out[table] = sum(int(row[table] or 0) for row in rows)
    out["accounted"] = sum(int(row["messages"] or 0) for row in rows)
    return out
