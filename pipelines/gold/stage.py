"""The gold stage: a streaming query over silver ``changes``; each micro-batch is decided once for all its
tables, then one write per mirror that is due.

:func:`apply_gold_batch` reads as the flow it implements (:func:`run_batch`):

1. **plan** and 2. **decide** – :func:`~pipelines.gold.batch_decision.decide_batch`: profile the batch (one Spark
   job), per source table its mirror, key and shape (:mod:`pipelines.gold.plan`: metadata only; schema changes run
   their DDL here), then one pass over the batch for all tables (:mod:`pipelines.gold.decide`): quarantine
   reasons, keys, staleness against key state, counts and the change checks. It returns a frozen
   :class:`~pipelines.gold.batch_decision.DecidedBatch`;
3. **choose** – :func:`~pipelines.gold.batch_writes.choose_due`: which mirrors are due
   (:mod:`pipelines.gold.due`): all of them in a run until caught up, and in a continuous stream those past their
   freshness budget or with many changes waiting; the others' changes wait in ``pending``;
4. **write** – :func:`~pipelines.gold.batch_writes.write_batch`: the fold, the batch's shared state (key state,
   pending changes, quarantine) and one write per due mirror (:mod:`pipelines.gold.keyed`;
   :mod:`pipelines.gold.multiset` for a table without a key), side by side (:mod:`pipelines.gold.parallel`);
   then progress and the batch's ``dq_results`` rows, once.

What a stream keeps from batch to batch is a :class:`~pipelines.gold.stream.GoldStream`.

Configured expectations keep their hooks: a table's row rules run on its changes before the decision
(``drop`` quarantines, ``fail`` stops the stream), its mirror rules after its write.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig
from pipelines.connect_relay import open_relay, send
from pipelines.delta_writes import run_id
from pipelines.gold.batch import GoldStats
from pipelines.gold.batch_decision import decide_batch
from pipelines.gold.batch_run import BatchRun, batch_session, log_batch
from pipelines.gold.batch_writes import choose_due, write_batch
from pipelines.gold.due import EARLY
from pipelines.gold.profile import SOURCE_IDENTITY_SQL, source_table_col
from pipelines.gold.state import GoldState
from pipelines.gold.stream import GoldStream, StateBases
from pipelines.silver import ensure_silver
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = [
    "SOURCE_IDENTITY_SQL",
    "GoldStats",
    "appended_checkpoint",
    "GoldStream",
    "apply_gold_batch",
    "flush_due",
    "gold_checkpoint",
    "source_table_col",
    "start_gold",
]


def apply_gold_batch(
    spark: SparkSession,
    batch_df: DataFrame,
    batch_id: int,
    cfg: PipelineConfig,
    wh: Warehouse,
    app_id: str,
    stream: GoldStream | None = None,
) -> GoldStats:
    """Apply one micro-batch of silver changes (see the module docstring). Without ``stream`` (a direct
    call) every mirror is merged and every write first looks for its commit marker, as a retry must."""
    own = stream is None
    stream = stream or GoldStream()
    if stream.bases is not None:
        stream.base = stream.bases.base_for(batch_id)
    try:
        with stream.lock:
            stats = run_batch(BatchRun.of(spark, cfg, wh, app_id, batch_id, stream), batch_df, stream)
    finally:
        if own:
            stream.close()
    stream.careful, stream.last_batch = False, batch_id
    return stats


def run_batch(run: BatchRun, batch_df: DataFrame, stream: GoldStream) -> GoldStats:
    """Decide, choose and write one batch; its stats carry what each step cost (:mod:`pipelines.gold.steps`)."""
    with batch_session(run, batch_df, stream) as settings:
        decided = decide_batch(run, batch_df, stream, settings)
        try:
            write_batch(decided, choose_due(decided, stream), stream)
        finally:
            decided.release()
    run.stats.steps = run.clock.costs
    run.stats.batches = [{**run.clock.seconds(run.batch_id), **({"flush": True} if run.flush else {})}]
    log_batch(run)
    return run.stats


def gold_checkpoint(wh: Warehouse) -> str:
    """Where the gold query keeps its checkpoint."""
    return wh.checkpoint("gold", "apply")


def start_gold(
    spark: SparkSession,
    cfg: PipelineConfig,
    wh: Warehouse,
    available_now: bool,
    stats: GoldStats | None = None,
    stream: GoldStream | None = None,
    from_version: int | None = None,
) -> StreamingQuery:
    """Start the gold query: silver ``changes`` → :func:`apply_gold_batch`, checkpointed. Run until caught
    up (``available_now``), every mirror is merged each batch; run continuously, mirrors wait within their
    freshness budget (:mod:`pipelines.gold.due`). Over Spark Connect the batches run in a worker beside the
    server, on a stream and stats of their own: every batch merges every mirror (the runner's flushes between
    batches cannot reach that stream), and the runner takes the stats back once the query has stopped
    (:mod:`pipelines.connect_relay`). ``from_version``: read silver from that version on, checkpointed apart
    (:func:`appended_checkpoint`): what a day-two command appended, in a warehouse run as one query, whose gold
    reads no silver stream."""
    ensure_silver(spark, wh)
    checkpoint = gold_checkpoint(wh) if from_version is None else appended_checkpoint(wh, from_version)
    app_id = f"lakecdc-gold-{run_id(checkpoint)}"
    stats = stats if stats is not None else GoldStats()
    stream = stream or GoldStream()
    stream.drain, stream.app_id = available_now, app_id
    if from_version is not None:  # a second writer of gold's state: its batches numbered above the state's
        stream.bases = StateBases.of(checkpoint)
        if not stream.bases.entries():
            stream.bases.start_above(0, GoldState(wh).newest_batch(spark))
    relay = open_relay(spark, checkpoint)
    if relay is not None:  # the batches run in a worker beside the server, on copies: pipelines.connect_relay
        # no flush between batches can reach the worker's stream: every batch merges every mirror it has
        stats, stream = GoldStats(), GoldStream(drain=True, app_id=app_id, bases=stream.bases)

    def each_batch(df: DataFrame, batch_id: int) -> None:
        stats.add(apply_gold_batch(spark, df, batch_id, cfg, wh, app_id, stream))
        if relay is not None:
            send(spark, relay, stats)

    starting = {} if from_version is None else {"startingVersion": str(from_version)}
    writer = (
        wh.silver("changes")
        .read_stream(spark, maxBytesPerTrigger=str(cfg.batch_bytes), **starting)  # limits.batch_bytes: bounded batches
        .writeStream.queryName("gold_apply")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(each_batch)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=cfg.processing_time)
    return writer.start()


def appended_checkpoint(wh: Warehouse, version: int) -> str:
    """Where a gold stream over silver from ``version`` on keeps its checkpoint (:func:`start_gold`)."""
    return wh.checkpoint("gold", f"appended-{version}")


def flush_due(
    spark: SparkSession,
    cfg: PipelineConfig,
    wh: Warehouse,
    stream: GoldStream,
    *,
    drain: bool = False,
    wait: bool = True,
) -> GoldStats | None:
    """Merge the mirrors whose waiting changes are past their budget (``drain``: every mirror with changes
    waiting), outside any batch: a continuous run calls this between batches, so that a quiet topic keeps its
    budgets, and a run until caught up at its end. The changes of new tables past
    ``limits.new_mirrors_per_batch`` get their mirrors here too, that many per flush (``drain``: until none
    waits). ``wait`` False: return None at once if a batch is running. Nothing waits: no Spark job."""
    if not stream.lock.acquire(blocking=wait):
        return None
    try:
        state = GoldState(wh)
        if stream.pending is None:
            if not state.pending.exists(spark):
                return GoldStats()
            stream.load(spark, state)
        stats = GoldStats()
        while True:
            due = stream.pending and (drain or stream.drain or _past_budget(cfg, stream))
            if not due and not stream.later_waiting:
                return stats
            stats.add(_flush(spark, cfg, wh, stream, drain))
            if not (drain or stream.drain) or not stream.later_waiting:
                return stats
    finally:
        stream.lock.release()


def _flush(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, stream: GoldStream, drain: bool) -> GoldStats:
    """One flush: a batch of no changes of its own, after the stream's last (its id: what waits is before it)."""
    last = stream.last_batch
    if last is None:  # nothing applied by this stream yet: the newest batch that left changes waiting
        batches = [max(p.batches) for p in stream.pending.values()]
        last = max(batches + [stream.later_batch if stream.later_batch is not None else -1]) - stream.base
    app_id = stream.app_id or f"lakecdc-gold-{run_id(gold_checkpoint(wh))}"
    drain_before, stream.drain = stream.drain, drain or stream.drain
    try:
        empty = spark.createDataFrame([], wh.silver("changes").read(spark).schema)
        return run_batch(BatchRun.of(spark, cfg, wh, app_id, last, stream, flush=True), empty, stream)
    finally:
        stream.drain = drain_before


def _past_budget(cfg: PipelineConfig, stream: GoldStream) -> bool:
    """Whether a mirror's oldest waiting change may be due, early or not (measured against the smallest
    budget configured): only then is a flush worth its planning."""
    budgets = [cfg.gold_max_delay] + [t.max_delay for t in cfg.tables.values() if t.max_delay]
    oldest = min((p.oldest for p in stream.pending.values() if p.oldest is not None), default=None)
    return oldest is not None and time.time() - oldest >= EARLY * min(budgets)
