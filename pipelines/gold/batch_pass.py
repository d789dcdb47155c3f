"""The batch pass of a micro-batch: every decision, for all of its tables at once (steps 1 and 2 of
:mod:`pipelines.gold.stage`).

:class:`BatchPass` plans the batch (the profile, one Spark job; each table's mirror, key and shape:
:mod:`pipelines.gold.plan`), adopts mirrors written before key state, and decides in one pass over the batch
(:mod:`pipelines.gold.decide`): quarantine reasons, keys, staleness against key state, one aggregation of
every table's counts and change checks, the fresh changes as the fold reads them. The configured row rules
run here too (Great Expectations, per table that has them): ``drop`` gives the offending changes a reason.
:class:`GoldStream` is what gold keeps from one batch of a stream to the next.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig
from pipelines.delta_writes import kept
from pipelines.gold.batch import COUNTS, BatchContext, GoldStats, MirrorCounts, Step
from pipelines.gold.computed import ROW_OPTIONS_CONF, with_computed
from pipelines.gold.decide import (
    check_changes,
    fold_inputs,
    ignore_nulls_sql,
    keyed_changes,
    table_counts,
    with_change_checks,
    with_key_state,
)
from pipelines.gold.lookups import MIRROR, Lookups
from pipelines.gold.order import with_order
from pipelines.gold.parallel import Workers
from pipelines.gold.plan import MirrorCache, TablePlan, describe_table, mirror_identity, plan_tables
from pipelines.gold.profile import SOURCE_TABLE, TableProfile, profile_batch, source_table_col
from pipelines.gold.settings import GOLD_SESSION_CONF, SMALL_BATCH, batch_settings, small_batch_conf
from pipelines.gold.soft import is_soft
from pipelines.gold.state import LATER, GoldState, Pending, adopt_mirror
from pipelines.gold.steps import StepClock
from pipelines.gold.type_mapping import map_batch_types
from pipelines.gold.where import filtered, skipped_per_table, where_refusals
from pipelines.quality.batch import QualityFailure, check_batch, typed_changes
from pipelines.quality.storage import write_results
from pipelines.quality.written import change_check_rows
from pipelines.routing import route_shards
from pipelines.warehouse import SOURCE_IDENTITY_PROPERTY, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: Great Expectations validations run one at a time (its context is not known to be thread-safe).
GE_LOCK = threading.Lock()
#: A batch of at most this many changes meets key state by broadcast joins (its keys, and their state, sent
#: to every task) instead of shuffles: a small batch then costs no exchange of the key state table.
BROADCAST_CHANGES = 200_000


@dataclass
class GoldStream:
    """What gold keeps between the batches of one stream: mirror metadata, the changes waiting per mirror,
    and whether the next batch may be a retry (the first of a stream may: its writes look for their commit
    markers first). ``drain``: merge every mirror each batch (a run until caught up; a direct call)."""

    drain: bool = True
    careful: bool = True
    base: int = 0  # the state tables' batch = base + the stream's batch id (a new checkpoint starts above)
    cache: MirrorCache = field(default_factory=MirrorCache)
    pending: dict[str, Pending] | None = None  # None: read from the state tables
    through: dict[str, int] = field(default_factory=dict)  # mirror → batch its pending changes are applied through
    last_batch: int | None = None
    last_changes: int | None = None  # the changes of the stream's last batch (a hint of the next one's size)
    lock: threading.Lock = field(default_factory=threading.Lock)
    workers: Workers | None = None  # the threads that apply mirrors side by side, kept from batch to batch
    later_round: int = -1  # the newest round of changes of new tables waiting (state's ``later`` table)
    later_batch: int | None = None  # ... and the batch that wrote it
    later_tables: list[str] = field(default_factory=list)  # the new tables whose changes wait (this stream's)

    def workers_for(self, parallelism: int) -> Workers | None:
        """The stream's kept threads (made on first use)."""
        if parallelism > 1 and (self.workers is None or self.workers.parallelism != parallelism):
            if self.workers is not None:
                self.workers.close()
            self.workers = Workers(parallelism)
        return self.workers

    def close(self) -> None:
        """Stop the kept threads (the stream ended)."""
        if self.workers is not None:
            self.workers.close()
            self.workers = None

    def load(self, spark: SparkSession, state: GoldState, before: int | None = None) -> None:
        """Read what waits (once per stream): progress, then the pending changes after it; inside a batch,
        of the batches ``before`` it (what a retried batch's first attempt left waiting is its own again)."""
        if self.pending is None:
            self.through = state.progress_now(spark)
            self.pending = state.pending_now(spark, self.through, before)
            self.later_round, self.later_batch = state.later_round(spark)

    def reread(self) -> None:
        """Read what waits and the mirrors' metadata again at the next batch: another command changed the
        state tables or a mirror between this stream's batches (:mod:`pipelines.run_requests`)."""
        self.pending, self.cache = None, MirrorCache()

    @property
    def waiting(self) -> int:
        return sum(p.changes for p in (self.pending or {}).values())

    @property
    def later_waiting(self) -> bool:
        """Changes of new tables past ``limits.new_mirrors_per_batch`` wait for a batch."""
        return self.later_round > self.through.get(LATER, -1)

    def __getstate__(self) -> dict:
        """A copy for another process (Spark Connect's ``foreachBatch`` worker): no lock, no threads, and a
        cache of its own."""
        return {k: v for k, v in self.__dict__.items() if k not in ("lock", "workers", "cache")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, lock=threading.Lock(), workers=None, cache=MirrorCache())


class BatchPass:
    """One micro-batch, planned and decided: the plans, the decided changes and their counts."""

    def __init__(
        self, spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, app_id: str, batch_id: int, stream: GoldStream
    ) -> None:
        self.spark, self.cfg, self.wh, self.app_id, self.batch_id, self.stream = (
            spark,
            cfg,
            wh,
            app_id,
            batch_id,
            stream,
        )
        self.state = GoldState(wh)
        self.state_batch = stream.base + batch_id
        #: a flush between batches (:func:`pipelines.gold.stage.flush_due`): it has no changes of its own and
        #: takes the id of the batch it follows, so the changes that batch left waiting are before it
        self.flush = False
        self.results: list[dict] = []
        self.stats = GoldStats()
        self._lock = threading.Lock()  # the stats and results of tables applied side by side
        self.clock = StepClock(spark)
        self.settings: dict[str, str] = {}  # the batch's own session settings (small_batch_conf)
        self.later_read: int | None = None  # the round of waiting changes of new tables read through
        self.later: list[str] = []  # new tables past the limit: their changes wait for the next batch
        self.later_rows: DataFrame | None = None
        self.skipped: dict[str, int] = {}  # per source table: changes outside its where

    @contextmanager
    def decided(self, batch_df: DataFrame) -> Iterator[BatchPass]:
        """Plan and decide the batch (steps 1 and 2); its frames stay cached for the table pass inside."""
        from pyspark.sql import functions as F

        spark = self.spark
        for key, value in GOLD_SESSION_CONF.items():
            spark.conf.set(key, value)
        if "invalid" not in batch_df.columns:  # silver written before invalid values were kept
            batch_df = batch_df.withColumn("invalid", F.lit(None).cast("map<string,string>"))
        hint = self.stream.last_changes
        small = small_batch_conf(spark)
        usual = {key: spark.conf.get(key) for key in small}
        self.settings = small if hint is None or hint <= SMALL_BATCH else usual
        sessions = list({id(s): s for s in (spark, batch_df.sparkSession)}.values())
        with ExitStack() as settings:
            settings.enter_context(batch_settings(sessions, ROW_OPTIONS_CONF))  # where, computed: ANSI on, both
            settings.enter_context(batch_settings(sessions, self.settings))
            with self.clock.step("plan"):
                if self.stream.pending is None:  # the stream's first batch: from here on the state tables exist
                    self.state.ensure(spark)
                self.stream.load(spark, self.state, before=self.state_batch)
                if self.stream.later_waiting:  # new tables' changes an earlier batch left for this one
                    self.later_read = self.stream.later_round
                    waiting = self.state.later_changes(spark, self.stream.through.get(LATER, -1))
                    waiting = waiting.select(*[c for c in batch_df.columns if c in waiting.columns])
                    # a retried batch may find its own changes there too (its first attempt held them back)
                    batch_df = batch_df.unionByName(waiting, allowMissingColumns=True).dropDuplicates(
                        ["bronze_position", "change_index"]
                    )
            batch_df = map_batch_types(route_shards(batch_df, self.cfg), self.cfg)  # from, type_mapping
            batch = cached = kept(with_order(batch_df.withColumn(SOURCE_TABLE, source_table_col())))
            try:
                with self.clock.step("plan"):
                    self.plans = self._plan(self._bounded(profile_batch(batch)))
                    self.lookups = _lookups(self.plans)
                if self.later:
                    held = F.col(SOURCE_TABLE).isin(self.later)
                    self.later_rows = batch.where(held).select(*batch_df.columns)
                    batch = batch.where(~held)
                changes = sum(p.profile.changes for p in self.plans.values())
                if changes > SMALL_BATCH and self.settings is small:  # larger than the last batch: adaptive
                    self.settings = usual
                    settings.enter_context(batch_settings(sessions, usual))
                self.stream.last_changes = changes
                with self.clock.step("decide"):
                    self._decide(batch)
                try:
                    yield self
                finally:
                    self.rows.unpersist()
                    self.checked.unpersist()
            finally:
                cached.unpersist()

    # -- 1. plan
    def _bounded(self, profiles: dict[str, TableProfile]) -> dict[str, TableProfile]:
        """The batch's tables less the new ones past ``limits.new_mirrors_per_batch`` (in name order): creating a
        mirror costs about a second, so a stream naming thousands of new tables would hold every mirror back
        for an hour. Theirs wait, durably, in state's ``later`` table (:attr:`later`), for the next batch."""
        limit, new = self.cfg.new_mirrors_per_batch, []
        waited = set(self.stream.later_tables)
        for name in sorted(profiles, key=lambda n: (n not in waited, n)):  # those that waited already first
            if self.stream.cache.get(self.spark, mirror_identity(self.cfg, self.wh, name).ref) is None:
                new.append(name)
        self.later = self.stream.later_tables = new[limit:]
        if self.later:
            waiting = sum(profiles[n].changes for n in self.later)
            log.warning(
                "gold: %d new tables in this batch, past limits.new_mirrors_per_batch (%d): the %d changes of %d of "
                "them wait for the next batch (first: %s)",
                len(new), limit, waiting, len(self.later), describe_table(self.cfg, self.wh, self.later[0]),
            )  # fmt: skip
            self.stats.later = waiting
        return {n: p for n, p in profiles.items() if n not in self.later}

    def _plan(self, profiles: dict[str, TableProfile]) -> dict[str, TablePlan]:
        """A plan for every source table of the batch, and for every mirror with changes waiting (it may be
        due although the batch has none of its changes)."""
        for mirror in self.stream.pending or {}:
            meta = self.stream.cache.get(self.spark, self.wh.mirror_of_state_key(mirror))
            identity = (meta.props if meta else {}).get(SOURCE_IDENTITY_PROPERTY)
            if identity and identity not in profiles:
                profiles[identity] = TableProfile(identity)
        plans = plan_tables(self.spark, self.cfg, self.wh, profiles, self.stream.cache, self.state_batch)
        for plan in plans.values():
            if plan.keyed and plan.since is None:  # a mirror written before key state
                adopt_mirror(self.spark, self.state, plan.ident, plan.key, self.state_batch)
                self.stream.cache.forget(plan.ident.ref)
                plan.since = -1
        return plans

    # -- 2. decide
    def _decide(self, batch: DataFrame) -> None:
        from pyspark.sql import functions as F

        checks = self.cfg.quality_checks
        checked = with_computed(self.spark, check_changes(batch, self.plans, self.lookups), self.plans)  # computed
        checked = where_refusals(self.spark, checked, self.plans)  # a where that raises on a row: quarantined
        self.checked = kept(self._batch_expectations(checked))
        good, skipped = filtered(self.checked.where("reason IS NULL"), self.plans)  # tables.<name>.where
        if skipped is not None:
            self.skipped = skipped_per_table(skipped)  # into the stats per table (_count)
        keyed = keyed_changes(good, self.lookups)
        wanted = keyed.select(F.col(MIRROR).alias("mirror"), "k").distinct()
        small = sum(p.profile.changes for p in self.plans.values()) <= BROADCAST_CHANGES
        state = self.state.key_state(self.spark, wanted, self.state_batch, small)
        rows = with_key_state(keyed, state, self.plans, small)
        self.rows = kept(with_change_checks(rows, self.lookups) if checks else rows)
        truncates = good.where(f"op = 'TRUNCATE' AND size({self.lookups.key_sql()}) > 0").withColumn(
            "truncate", F.lit(True)
        )
        decided = (
            self.rows.withColumn("truncate", F.lit(False))
            .unionByName(self.checked.where("reason IS NOT NULL"), allowMissingColumns=True)
            .unionByName(truncates, allowMissingColumns=True)
        )
        self.counts = {r[SOURCE_TABLE]: r for r in table_counts(decided, checks).collect()}
        for plan in self.plans.values():
            self._count(plan)
        self.fresh = fold_inputs(self.rows.where("NOT stale"), self.state_batch, ignore_nulls_sql(self.plans, self.cfg))

    def _count(self, plan: TablePlan) -> None:
        """The table's decisions into the batch's stats, and into its mirror's (:attr:`GoldStats.mirrors`; the
        table pass counts a keyless table's applied and stale as it writes), and its change checks' results."""
        from pyspark.sql import functions as F

        stats, c = self.stats, self.counts.get(plan.name)
        quarantined, skipped = (c["quarantined"] if c else 0), self.skipped.get(plan.name, 0)
        mine = MirrorCounts(changes=plan.profile.changes, quarantined=quarantined, skipped=skipped)
        if plan.profile.changes:
            stats.tables.add(plan.name)
        if c is not None and plan.keyed:
            mine.applied, mine.stale = c["applied"], c["stale"]
            if c["truncates"] and is_soft(plan.tc):  # soft: every TRUNCATE marks what it covers
                mine.applied += c["truncates"]
            elif c["truncates"]:  # the last TRUNCATE applies; the ones before it are superseded
                mine.applied += 1
                mine.stale += c["truncates"] - 1
        for name in COUNTS:
            setattr(stats, name, getattr(stats, name) + getattr(mine, name))
        if mine != MirrorCounts():
            stats.mirror(plan.ident.mirror_name).add(mine)
        if c is None or not plan.keyed or not self.cfg.quality_checks:
            return
        probe = self.rows.where((F.col(MIRROR) == plan.mirror) & F.col("probe"))
        with GE_LOCK:
            self.results += change_check_rows(
                plan.ident.mirror_name, c, probe, run_id=self.app_id, batch_id=self.batch_id
            )

    def _batch_expectations(self, checked: DataFrame) -> DataFrame:
        """The tables' row rules (Great Expectations) on their changes: ``drop`` gives the offending changes
        a reason (the rule), ``warn`` records, ``fail`` stops the stream."""
        from pyspark.sql import functions as F

        checked = checked.withColumn("rule", F.lit(None).cast("string")).withColumn(
            "bad_value", F.lit(None).cast("string")
        )
        dropped = []
        for plan in self.plans.values():
            rules = [r for r in (plan.tc.expectations if plan.tc else ()) if r.scope == "batch"]
            if not rules or plan.shape is None or not plan.profile.changes:
                continue
            changes = checked.where((F.col(SOURCE_TABLE) == plan.name) & F.col("reason").isNull())
            with kept_if_failing(self, plan, Step.EXPECTATION_RESULTS), GE_LOCK:
                quality = check_batch(
                    self.spark,
                    plan.ident.mirror_name,
                    typed_changes(changes, plan.shape.columns),
                    rules,
                    self.app_id,
                    self.batch_id,
                )
            self.results += quality.results
            if quality.dropped is not None and quality.dropped_count:  # quality's own warning names them
                dropped.append(quality.dropped)
        if not dropped:
            return checked
        drops = dropped[0]
        for more in dropped[1:]:
            drops = drops.unionByName(more)
        drops = drops.select(
            "bronze_position",
            "change_index",
            F.col("rule").alias("_rule"),
            F.col("bad_value").alias("_bad_value"),
            F.col("reason").alias("_reason"),
        )
        return (
            checked.join(drops, ["bronze_position", "change_index"], "left")
            .withColumn("reason", F.coalesce("reason", "_reason"))
            .withColumn("rule", F.coalesce("rule", "_rule"))
            .withColumn("bad_value", F.coalesce("bad_value", "_bad_value"))
            .drop("_rule", "_bad_value", "_reason")
        )

    def _context(self, session: SparkSession, plan: TablePlan) -> BatchContext:
        share = GoldStats(tables={plan.name})  # a keyless table's write counts applied and stale in here
        return BatchContext(session, plan.ident, self.wh, self.app_id, self.batch_id, share, self.results)

    def _describe(self, task: str) -> str:
        plan = next((p for p in self.plans.values() if p.mirror == task), None)
        return describe_table(self.cfg, self.wh, plan.name) if plan else f"gold's {task}"

    def log(self) -> None:
        """The batch, its writes done, in one line (and loudly, any change the counts lost)."""
        s = self.stats
        log.info(
            "gold batch %d: %d changes of %d tables: %d applied, %d stale, %d quarantined; %d mirrors written, "
            "%d changes waiting; %s",
            self.batch_id,
            s.changes,
            len(s.tables),
            s.applied,
            s.stale,
            s.quarantined,
            len(s.written),
            s.waiting,
            self.clock.summary(),
        )
        if s.unaccounted or s.mirrors_total != s.totals:
            log.error(
                "gold batch %d: %d of %d changes are neither applied, stale nor quarantined; per mirror %s, in all %s",
                self.batch_id,
                s.unaccounted,
                s.changes,
                s.mirrors_total,
                s.totals,
            )


def micros_to_seconds(micros: int | None) -> float | None:
    return None if micros is None else micros / 1e6


def _lookups(plans: Mapping[str, TablePlan]) -> Lookups:
    lookups = Lookups()
    for plan in plans.values():
        if plan.shape is not None:
            lookups.add(plan.name, plan.mirror, plan.shape.columns, plan.key)
    return lookups


@contextmanager
def kept_if_failing(batch: BatchPass, plan: TablePlan, step: Step) -> Iterator[None]:
    """A ``fail`` rule stops the stream, so the batch's one ``dq_results`` append never comes: the
    failing check's rows are written at once (stamped per mirror and step, so a retry writes them once)."""
    try:
        yield
    except QualityFailure as failure:
        ctx = batch._context(batch.spark, plan)
        write_results(batch.spark, batch.wh, failure.results, app_id=ctx.stamp(step), version=batch.batch_id)
        raise
