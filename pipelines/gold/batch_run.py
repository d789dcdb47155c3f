"""Who runs one gold micro-batch, and with which session settings: :class:`BatchRun` (the session,
configuration, warehouse, stamps, state tables and what the batch records as it goes) and :class:`BatchSettings`
(:func:`batch_session`), which every step of :mod:`pipelines.gold.batch_decision` and
:mod:`pipelines.gold.batch_writes` shares; the batch's one log line (:func:`log_batch`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig
from pipelines.gold.batch import BatchContext, GoldStats, Step
from pipelines.gold.computed import ROW_OPTIONS_CONF
from pipelines.gold.plan import TablePlan, describe_table
from pipelines.gold.settings import GOLD_SESSION_CONF, SMALL_BATCH, batch_settings, small_batch_conf, write_conf
from pipelines.gold.state import GoldState
from pipelines.gold.steps import StepClock
from pipelines.gold.stream import GoldStream
from pipelines.quality.batch import QualityFailure
from pipelines.quality.storage import write_results
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: Great Expectations validations run one at a time (its context is not known to be thread-safe).
GE_LOCK = threading.Lock()


@dataclass
class BatchRun:
    """Who runs one batch and where: the session, configuration, warehouse, stamps, the state tables' batch id,
    what each step cost, and what the batch records as it goes (its stats and ``dq_results`` rows, added to
    under :attr:`lock` by mirrors written side by side)."""

    spark: SparkSession
    cfg: PipelineConfig
    wh: Warehouse
    app_id: str
    batch_id: int
    state_batch: int  # the state tables' batch: the stream's base + batch_id
    #: a flush between batches (:func:`pipelines.gold.stage.flush_due`): it has no changes of its own and takes
    #: the id of the batch it follows, so the changes that batch left waiting are before it
    flush: bool = False
    stats: GoldStats = field(default_factory=GoldStats)
    results: list[dict] = field(default_factory=list)  # the batch's dq_results rows, for its one append
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: GoldState = field(init=False)  # the state tables
    clock: StepClock = field(init=False)  # what each step cost

    def __post_init__(self) -> None:
        self.state = GoldState(self.wh)
        self.clock = StepClock(self.spark)

    @classmethod
    def of(
        cls,
        spark: SparkSession,
        cfg: PipelineConfig,
        wh: Warehouse,
        app_id: str,
        batch_id: int,
        stream: GoldStream,
        flush: bool = False,
    ) -> BatchRun:
        return cls(spark, cfg, wh, app_id, batch_id, stream.base + batch_id, flush)

    def context(self, session: SparkSession, plan: TablePlan) -> BatchContext:
        """One table's share of the batch: its stamps, and the batch's ``dq_results`` rows to add to (its
        stats of its own: a keyless table's write counts applied and stale in there)."""
        share = GoldStats(tables={plan.name})
        return BatchContext(session, plan.ident, self.wh, self.app_id, self.batch_id, share, self.results)

    def describe(self, plans: Mapping[str, TablePlan], task: str) -> str:
        plan = next((p for p in plans.values() if p.mirror == task), None)
        return describe_table(self.cfg, self.wh, plan.name) if plan else f"gold's {task}"


class BatchSettings:
    """The session settings a batch runs with, on the batch's sessions, for as long as it runs: gold's own,
    the row options' (ANSI), and a small batch's (:func:`~pipelines.gold.settings.small_batch_conf`) while the
    stream's last batch was small; a batch found larger than that switches back to the session's own."""

    def __init__(self, stack: ExitStack, sessions: list[SparkSession], hint: int | None) -> None:
        self.stack, self.sessions = stack, sessions
        self.small = small_batch_conf(sessions[0])
        self.usual = {key: sessions[0].conf.get(key) for key in self.small}
        self.current = self.small if hint is None or hint <= SMALL_BATCH else self.usual
        stack.enter_context(batch_settings(sessions, ROW_OPTIONS_CONF))  # where, computed: ANSI on, both
        stack.enter_context(batch_settings(sessions, self.current))

    @property
    def large_writes(self) -> dict[str, str]:
        """The settings the batch's large writes run with over :attr:`current`
        (:func:`~pipelines.gold.settings.write_conf`)."""
        return write_conf(self.current, self.usual)

    def fit(self, changes: int) -> None:
        """A batch larger than a small one, planned with a small one's settings: the session's own from here."""
        if changes > SMALL_BATCH and self.current is self.small:
            self.current = self.usual
            self.stack.enter_context(batch_settings(self.sessions, self.usual))


@contextmanager
def batch_session(run: BatchRun, batch_df: DataFrame, stream: GoldStream) -> Iterator[BatchSettings]:
    """The batch's session settings (:class:`BatchSettings`) for the block; each session as it was after it."""
    for key, value in GOLD_SESSION_CONF.items():
        run.spark.conf.set(key, value)
    sessions = list({id(s): s for s in (run.spark, batch_df.sparkSession)}.values())
    with ExitStack() as stack:
        yield BatchSettings(stack, sessions, stream.last_changes)


@contextmanager
def kept_if_failing(run: BatchRun, plan: TablePlan, step: Step) -> Iterator[None]:
    """A ``fail`` rule stops the stream, so the batch's one ``dq_results`` append never comes: the
    failing check's rows are written at once (stamped per mirror and step, so a retry writes them once)."""
    try:
        yield
    except QualityFailure as failure:
        ctx = run.context(run.spark, plan)
        write_results(run.spark, run.wh, failure.results, app_id=ctx.stamp(step), version=run.batch_id)
        raise


def micros_to_seconds(micros: int | None) -> float | None:
    return None if micros is None else micros / 1e6


def log_batch(run: BatchRun) -> None:
    """The batch, its writes done, in one line (and loudly, any change the counts lost)."""
    s = run.stats
    log.info(
        "gold batch %d: %d changes of %d tables: %d applied, %d stale, %d quarantined; %d mirrors written, "
        "%d changes waiting; %s",
        run.batch_id, s.changes, len(s.tables), s.applied, s.stale, s.quarantined, len(s.written), s.waiting,
        run.clock.summary(),
    )  # fmt: skip
    if s.unaccounted or s.mirrors_total != s.totals:
        log.error(
            "gold batch %d: %d of %d changes are neither applied, stale nor quarantined; per mirror %s, in all %s",
            run.batch_id, s.unaccounted, s.changes, s.mirrors_total, s.totals,
        )  # fmt: skip
