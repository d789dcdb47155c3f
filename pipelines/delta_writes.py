"""Idempotent Delta writes and the quarantine shape, shared by silver, gold and the dq results.

Every write of a stage is stamped with Delta's ``txnAppId``/``txnVersion``: the app id names the
stage's run and the step, the version is the micro-batch id, so a batch retried after a crash is
applied once (:func:`append_idempotent` for appends, :func:`idempotent_dml` for MERGE and DELETE).
:func:`run_id` gives each checkpoint's life its own id, so a replay from a fresh checkpoint is never
mistaken for a retry.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.layout import QUARANTINE_FIELDS
from pipelines.spark_logs import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import TableRef

log = logging.getLogger(__name__)

#: A MERGE into a table smaller than this rewrites the files it touches rather than writing deletion
#: vectors: for one small file the rewrite is the cheaper write (eight fewer Spark jobs a MERGE), and its
#: readers have no vectors to apply. A larger table keeps them, so a MERGE of a few rows never copies the
#: rest of its files (:data:`pipelines.gold.identity.DELETION_VECTORS`). Measured with ``bench.gold_profile``
#: and ``python -m bench --only cost`` (docs/benchmark.md, "Deletion vectors"): 1,000 and 10,000 changes into
#: a 100,000-row mirror of 4.2 MiB cost about 1.2 s a batch less with vectors (32 MiB had rewritten it);
#: 200 changes into a 20,000-row mirror of 0.85 MiB were cheaper rewritten (3.2 s against 3.8 s, one run).
REWRITE_BELOW_BYTES = 1024 * 1024
#: A MERGE that updates or deletes at least one target row per this many bytes of the table rewrites it
#: whatever its size: it touches a large share of the rows and nearly every file, so vectors add their own writes
#: (100,000 changes into that 100,000-row mirror, 44 bytes a row, 55% of its rows touched: 0.6-0.8 s a batch
#: more with vectors; 9% touched: 1.1 s less). Between the two the crossover is near a third of its rows,
#: 128 bytes a touched row.
REWRITE_FROM_BYTES_PER_TOUCHED_ROW = 128


def append_idempotent(frame: DataFrame, ref: TableRef, app_id: str | None, version: int | None) -> None:
    """Append; a retry of the same (app_id, version) is skipped by Delta itself. Without a stamp
    (either is ``None``: a write outside a micro-batch) a plain append."""
    writer = frame.write.format("delta").mode("append")
    if app_id is not None and version is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", int(version))
    ref.save(writer.option("mergeSchema", "true"))


#: How many of a table's newest commits :func:`append_once` searches for its marker.
MARKER_LOOKBACK = 50


def append_once(frame: DataFrame, ref: TableRef, marker: str, check: bool) -> bool:
    """Append ``frame`` to ``ref`` with ``marker`` as the commit's ``userMetadata``; with ``check`` (a write
    that may repeat an earlier attempt's), first look for a commit with that marker among the table's
    :data:`MARKER_LOOKBACK` newest and skip the append if there is one. Returns whether it appended.

    The same guarantee as a ``txnAppId`` stamp, at the cost of a look only where a retry is possible:
    open-source Delta rebuilds a table's state (a Spark job) to check a stamp, on every write."""
    spark = frame.sparkSession
    if check and ref.exists(spark):
        history = spark.sql(f"DESCRIBE HISTORY {ref.sql} LIMIT {MARKER_LOOKBACK}")
        if history.where(history["userMetadata"] == marker).limit(1).count():
            log.info("%s: an earlier attempt of this batch already appended (%s)", ref.path or ref.name, marker)
            return False
    ref.save(frame.write.format("delta").mode("append").option("userMetadata", marker).option("mergeSchema", "true"))
    return True


@contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` in the session for the block; each one's earlier value (or none) is restored after it."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def idempotent_dml(
    spark: SparkSession, app_id: str, version: int, settings: Mapping[str, str] | None = None
) -> AbstractContextManager[None]:
    """Delta idempotent DML: a MERGE/DELETE/UPDATE stamped with an (appId, version) already
    committed to the table is skipped. The stamp (and any other ``settings``) lasts for the block only."""
    stamp = {"spark.databricks.delta.write.txnAppId": app_id, "spark.databricks.delta.write.txnVersion": str(version)}
    return session_conf(spark, {**stamp, **(settings or {})})


def kept(frame: DataFrame) -> DataFrame:
    """``frame`` kept for several reads: persisted on a classic session. Over Spark Connect, a lazy local
    checkpoint instead: the client sends a persisted frame's whole plan with every query built on it, and
    Python's protobuf library refuses a plan nested deeper than 100 (``Exceeded upb_DecodeOptions_MaxDepth``),
    which a gold batch with expectations reaches; a checkpoint is one relation deep."""
    return frame.localCheckpoint(eager=False) if is_connect(frame) else frame.persist()


@contextmanager
def checkpointed(frame: DataFrame) -> Iterator[DataFrame]:
    """``frame`` computed once, into a checkpoint (``DataFrame.localCheckpoint``) that cannot change
    between two reads; its blocks are released after the block, not when the driver's garbage collector
    next finds the frame unreachable (up to ``spark.cleaner.periodicGC.interval``, 30 minutes)."""
    copy = frame.localCheckpoint()
    try:
        yield copy
    finally:
        release_checkpoint(copy)


def release_checkpoint(checkpoint: DataFrame) -> None:
    """Unpersist a local checkpoint's blocks now; over Spark Connect (no JVM plan here) and on another
    runtime, the server's cleaner releases them later."""
    if is_connect(checkpoint):
        return
    try:
        checkpoint._jdf.queryExecution().logical().rdd().unpersist(False)
    except Exception as exc:  # noqa: BLE001 - another runtime's plan: the cleaner releases them later
        log.debug("checkpoint blocks left to the cleaner: %s", exc)


def checkpointed_merge_settings(spark: SparkSession, target: TableRef, touched_rows: int = 0) -> dict[str, str]:
    """Settings of a MERGE into ``target`` whose source is already a checkpoint (:func:`checkpointed`):
    Delta need not copy the source again before it reads it twice (``merge.materializeSource``; Delta
    copies any source that is not a plain Delta scan), and the MERGE rewrites the files it touches instead
    of writing deletion vectors where the table is under :data:`REWRITE_BELOW_BYTES` or the ``touched_rows``
    it updates or deletes (as key state expects) reach one per :data:`REWRITE_FROM_BYTES_PER_TOUCHED_ROW`."""
    settings = {"spark.databricks.delta.merge.materializeSource": "none"}
    if rewrites_files(table_size_bytes(spark, target), touched_rows):
        settings["spark.databricks.delta.merge.deletionVectors.persistent"] = "false"
    return settings


def rewrites_files(size: int | None, touched_rows: int) -> bool:
    """Whether a MERGE into a table of ``size`` bytes (None: unknown) that updates or deletes
    ``touched_rows`` of its rows is the cheaper write rewriting the files it touches (the constants above)."""
    if size is None:
        return False
    return size < REWRITE_BELOW_BYTES or touched_rows * REWRITE_FROM_BYTES_PER_TOUCHED_ROW >= size


def table_size_bytes(spark: SparkSession, ref: TableRef) -> int | None:
    """The table's size in bytes from the version checksum of the snapshot last read (no Spark job); None
    where there is none (``Snapshot.sizeInBytes`` would then replay the log in a job of its own, about half
    a second a MERGE), or where this Delta does not say (another runtime's internals, or Spark Connect,
    whose DeltaTable has no JVM object): deletion vectors, then."""
    if is_connect(spark):
        return None
    try:
        checksum = ref.delta(spark)._jdt.deltaLog().unsafeVolatileSnapshot().checksumOpt()
        return int(checksum.get().tableSizeBytes()) if checksum.isDefined() else None
    except Exception as exc:  # noqa: BLE001 - a size only picks the cheaper write; never fail a MERGE over it
        log.debug("the size of %s is unknown: %s", ref, exc)
        return None


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


def logged_batches(checkpoint: str, log_name: str) -> set[int]:
    """The batch ids in a stream checkpoint's ``offsets`` or ``commits`` log (none: the log is not there yet).
    Raises OSError where the checkpoint cannot be listed."""
    log_dir = Path(checkpoint) / log_name
    return {int(p.name) for p in log_dir.iterdir() if p.name.isdigit()} if log_dir.is_dir() else set()


def unfinished_batch(checkpoint: str) -> int | None:
    """The batch an earlier run of the stream at ``checkpoint`` began and did not finish: the newest in its
    ``offsets`` log with no entry in its ``commits`` log (Spark writes the first before a batch, the second after
    it); None: none. Raises OSError where the checkpoint cannot be listed."""
    unfinished = max(logged_batches(checkpoint, "offsets"), default=None)
    return None if unfinished is None or unfinished in logged_batches(checkpoint, "commits") else unfinished


def may_be_retried(checkpoint: str) -> Callable[[int], bool]:
    """Whether a batch of the stream about to start from ``checkpoint`` may have been written before: only
    the one an earlier run began and did not finish (:func:`unfinished_batch`). Where the checkpoint cannot be
    listed, the stream's first batch, the one a restart runs again."""
    try:
        unfinished = unfinished_batch(checkpoint)
    except OSError:
        first = [True]

        def first_only(batch_id: int) -> bool:
            was, first[0] = first[0], False
            return was

        return first_only
    return lambda batch_id: unfinished is not None and batch_id == unfinished


def quarantine_frame(df: DataFrame) -> DataFrame:
    """Shape any rows with reason/bronze_position into the quarantine table's columns."""
    from pyspark.sql import functions as F

    return df.select(*[F.col(c) if c in df.columns else F.lit(None).cast(t).alias(c) for c, t in QUARANTINE_FIELDS])
