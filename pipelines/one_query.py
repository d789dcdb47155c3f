"""A run of every stage as one streaming query (``queries: one``): each micro-batch of the sources lands, decodes
and applies, so a change waits for one trigger between its message and its mirror, not three.

One query reads every source (their streams unioned: each keeps its own offsets in the query's checkpoint) and
its ``foreachBatch`` does, in flow order, what the three stages' queries do:

1. **land**: the batch's raw messages appended to bronze, as bronze's own stream would land them;
2. **decode**: the same messages decoded (:func:`pipelines.silver.decode_frame`) and appended to the silver tables
   (:func:`pipelines.silver.write_decoded`), counts and marks included;
3. **apply**: the batch's changes applied to the mirrors (:func:`pipelines.gold.stage.apply_gold_batch`), with
   gold's freshness budgets, deferral and checks as in a gold stream.

Every write is idempotent: bronze's and silver's appends carry commit markers (looked for only in the batch an
earlier run began and did not finish, :func:`pipelines.delta_writes.may_be_retried`), gold's commits carry its own.
A batch is replayed from the source's offsets in the checkpoint, so a crash at any point followed by a restart
gives the same tables. The stage tables are the same as the per-stage run's: replay, rebuild, ``quarantine
replay``, status and the checks read them alike.

A warehouse keeps the shape it was first run with: the stages' checkpoints and this query's each record how far
the sources were read, so running the other shape on it would land every message again
(:func:`uses_one_query` refuses it).

Day two works on it as on a per-stage warehouse: ``lakecdc rebuild`` runs silver and gold again from bronze,
``quarantine replay`` and ``rebuild --table`` apply what they append to silver through a gold stream of their own
(no gold stream reads silver here). Those are a second writer of gold's state, numbered apart
(:class:`pipelines.gold.stream.StateBases`): the one query's next batches start above what they wrote
(:func:`continue_above_state`). They wait for the run's lease, and refuse while the one query has a batch an
earlier run began and did not finish (:func:`require_finished`): its retry would append to silver again what
silver, rebuilt or replayed into meanwhile, already holds. A continuous one-query run does not take
``rebuild --table`` between its batches, as a per-stage run's gold does: the command waits for its lease.
"""

from __future__ import annotations

import logging
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.bronze import ensure_bronze, source_stream
from pipelines.config import STAGES, PipelineConfig
from pipelines.connect_relay import open_relay, receive, relay_key, send
from pipelines.delta_writes import append_once, logged_batches, may_be_retried, run_id, unfinished_batch
from pipelines.errors import ConfigError
from pipelines.gold.batch import GoldStats
from pipelines.gold.stage import apply_gold_batch
from pipelines.gold.state import GoldState
from pipelines.gold.steps import StepClock
from pipelines.gold.stream import GoldStream, StateBases
from pipelines.silver import (
    SilverStats,
    batch_marker,
    changes_of,
    decode_frame,
    ensure_silver,
    write_decoded,
)
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

#: The name of the one query (Spark's UI, a query's progress lines).
QUERY_NAME = "lakecdc_run"
#: What a run summary names the one query's part of a run (its stages, its seconds).
ONE_QUERY_UNIT = "bronze+silver+gold"


def one_query_checkpoint(wh: Warehouse) -> str:
    """Where the one query keeps its checkpoint (the sources' offsets, for all three stages)."""
    return wh.checkpoint("run", "one_query")


def is_one_query(wh: Warehouse) -> bool:
    """Whether the one query ran on this warehouse (its checkpoint is there): its shape, whatever the config says."""
    return Path(one_query_checkpoint(wh)).is_dir()


def uses_one_query(wh: Warehouse, cfg: PipelineConfig, stages: tuple[str, ...]) -> bool:
    """Whether this run is the one query: every stage asked for, and ``queries: one`` (or a warehouse the one query
    ran before). Raises :class:`ConfigError` for a run of the other shape than the warehouse's, which would read the
    sources (or bronze) from the start again and land every message twice."""
    one = is_one_query(wh)
    bronze = Path(wh.checkpoint_root) / "bronze"
    per_stage = bronze.is_dir() and any(bronze.iterdir())
    if tuple(stages) != tuple(STAGES):
        if one:
            raise ConfigError(
                f"this warehouse is run as one query ({one_query_checkpoint(wh)}): --stage {','.join(stages)} would "
                "read what it already holds again; run every stage (no --stage), or lakecdc rebuild"
            )
        return False
    if cfg.queries == "one" and per_stage:
        raise ConfigError(
            f"queries: one, but this warehouse's stages run as queries of their own ({bronze}): the one query "
            "would land every message again; keep queries: per_stage for it, or start a new warehouse"
        )
    if cfg.queries == "per_stage" and one:
        raise ConfigError(
            f"queries: per_stage, but this warehouse is run as one query ({one_query_checkpoint(wh)}): its stages' "
            "queries would land every message again; keep queries: one for it, or start a new warehouse"
        )
    return cfg.queries == "one"


def start_one_query(
    spark: SparkSession,
    cfg: PipelineConfig,
    wh: Warehouse,
    available_now: bool,
    silver_stats: SilverStats,
    gold_stats: GoldStats,
    stream: GoldStream,
) -> StreamingQuery:
    """Start the one query over every source (see the module docstring); its batches add to the stats given. Over
    Spark Connect the batches run in a worker beside the server on copies, each merging every mirror, and
    :func:`take_relayed` brings their stats back once the query has stopped."""
    ensure_bronze(spark, wh)
    ensure_silver(spark, wh)
    checkpoint = one_query_checkpoint(wh)
    run = run_id(checkpoint)
    bronze_app, silver_app, gold_app = (f"lakecdc-{stage}-{run}" for stage in STAGES)
    stream.drain, stream.app_id, stream.bases = available_now, gold_app, StateBases.of(checkpoint)
    retried = may_be_retried(checkpoint)
    relay = open_relay(spark, checkpoint)
    if relay is not None:  # pipelines.connect_relay: no flush between batches reaches the worker's stream
        silver_stats, gold_stats = SilverStats(), GoldStats()
        stream = GoldStream(drain=True, app_id=gold_app, bases=stream.bases)

    def each_batch(df: DataFrame, batch_id: int) -> None:
        check, clock = retried(batch_id), StepClock(spark, "run")
        landed = df.persist()  # the messages of the batch, read from the sources once
        try:
            with clock.step("land"):
                append_once(landed, wh.bronze, batch_marker(bronze_app, "raw_messages", batch_id), check)
            decoded = decode_frame(landed, cfg).persist()  # decoded once: silver's tables and gold read it
            try:
                with clock.step("decode"):  # the decode runs in silver's first append
                    silver_stats.add(write_decoded(spark, decoded, batch_id, wh, silver_app, check))
                with clock.step("apply"):
                    applied = apply_gold_batch(spark, changes_of(decoded), batch_id, cfg, wh, gold_app, stream)
            finally:
                decoded.unpersist()
        finally:
            landed.unpersist()
        gold_stats.add(with_run_steps(applied, clock.seconds(batch_id)))
        log.info("one query batch %d: %s", batch_id, clock.summary())
        if relay is not None:
            send(spark, relay, (silver_stats, gold_stats))

    sources = [source_stream(spark, source) for source in cfg.sources]
    messages = reduce(lambda a, b: a.unionByName(b), sources)
    writer = (
        messages.writeStream.queryName(QUERY_NAME).option("checkpointLocation", checkpoint).foreachBatch(each_batch)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=cfg.processing_time)
    log.info("one query over %d sources: land, decode and apply each batch (%s)", len(sources), checkpoint)
    return writer.start()


def with_run_steps(applied: GoldStats, seconds: dict) -> GoldStats:
    """Gold's stats of a one-query batch, its seconds per step (``plan`` ... ``record``) beside the one query's own
    (``land``, ``decode``, ``apply``): one record per batch, from its message to its mirror."""
    gold = applied.batches[-1] if applied.batches else {}
    applied.batches = [{**seconds, **{step: s for step, s in gold.items() if step != "batch"}}]
    return applied


def require_finished(wh: Warehouse, command: str) -> None:
    """Refuse ``command`` (a day-two command that writes silver) while the one query has a batch an earlier run
    began and did not finish: its retry would append its messages to silver again."""
    if not is_one_query(wh):
        return
    checkpoint = one_query_checkpoint(wh)
    batch = unfinished_batch(checkpoint)
    if batch is not None:
        raise ConfigError(
            f"the one query's batch {batch} was interrupted ({checkpoint}): run lakecdc run --once to finish it, "
            f"then {command}"
        )


def continue_above_state(spark: SparkSession, wh: Warehouse) -> None:
    """After a day-two command applied changes through a gold stream of its own: the one query's next batches
    numbered above what it wrote to gold's state (nothing on a warehouse the one query never ran)."""
    checkpoint = one_query_checkpoint(wh)
    committed = logged_batches(checkpoint, "commits")
    if committed:
        StateBases.of(checkpoint).start_above(max(committed) + 1, GoldState(wh).newest_batch(spark))


def take_relayed(spark: SparkSession, wh: Warehouse) -> tuple[SilverStats, GoldStats] | None:
    """Over Spark Connect, what the one query's batches counted in the worker (None: nothing, or a classic session)."""
    return receive(spark, relay_key(one_query_checkpoint(wh)))


__all__ = [
    "ONE_QUERY_UNIT",
    "QUERY_NAME",
    "continue_above_state",
    "is_one_query",
    "one_query_checkpoint",
    "require_finished",
    "start_one_query",
    "take_relayed",
    "uses_one_query",
]
