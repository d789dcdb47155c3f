"""Deciding a gold micro-batch (steps 1 and 2 of :mod:`pipelines.gold.stage`): :func:`decide_batch` returns a
:class:`DecidedBatch`, the frozen record of every decision for all of the batch's tables at once (who runs the
batch, and its settings: :mod:`pipelines.gold.batch_run`).

Its steps, each one operation:

1. :func:`with_waiting_new_tables` – the changes of new tables an earlier batch held back (state's ``later``);
2. :func:`ordered_batch` – routed (``from``), typed (``type_mapping``) and ordered by the format's sequence;
3. :func:`plan_batch` – the profile (one Spark job), the new tables past ``limits.new_mirrors_per_batch`` held
   back, and per source table its mirror, key and shape (:mod:`pipelines.gold.plan`); mirrors written before key
   state are adopted;
4. :func:`checked_changes` – each change's quarantine reason (:mod:`pipelines.gold.decide`), computed columns, a
   ``where`` that raises, and the tables' row rules (Great Expectations: ``drop`` gives a reason);
5. :func:`rows_with_key_state` – keys, the key state before the batch, staleness, and the change checks;
6. :func:`count_decisions` – one aggregation of every table's counts and change checks, into the batch's stats;
7. the fresh changes as the fold reads them (:func:`~pipelines.gold.decide.fold_inputs`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from pipelines.delta_writes import kept
from pipelines.gold.batch import COUNTS, MirrorCounts, Step
from pipelines.gold.batch_run import GE_LOCK, BatchRun, BatchSettings, kept_if_failing
from pipelines.gold.computed import with_computed
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
from pipelines.gold.plan import TablePlan, describe_table, mirror_identity, plan_tables
from pipelines.gold.profile import SOURCE_TABLE, TableProfile, profile_batch, source_table_col
from pipelines.gold.soft import is_soft
from pipelines.gold.state import LATER, adopt_mirror
from pipelines.gold.stream import GoldStream
from pipelines.gold.type_mapping import map_batch_types
from pipelines.gold.where import filtered, skipped_per_table, where_refusals
from pipelines.quality.batch import check_batch, typed_changes
from pipelines.quality.written import change_check_rows
from pipelines.routing import route_shards
from pipelines.warehouse import SOURCE_IDENTITY_PROPERTY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

log = logging.getLogger(__name__)

#: A batch of at most this many changes meets key state by broadcast joins (its keys, and their state, sent
#: to every task) instead of shuffles: a small batch then costs no exchange of the key state table.
BROADCAST_CHANGES = 200_000


@dataclass(frozen=True, eq=False)
class DecidedBatch:
    """What :func:`decide_batch` decided for every table of the batch. Its frames stay cached until
    :meth:`release`."""

    run: BatchRun
    plans: Mapping[str, TablePlan]  # by source table (its identity)
    lookups: Lookups  # the tables' facts, as SQL over the batch
    checked: DataFrame  # every change, ``reason`` NULL unless it goes to quarantine (cached)
    rows: DataFrame  # the good keyed changes with their key state, ``stale`` and the change checks (cached)
    fresh: DataFrame  # the changes to write (not stale), as the fold and the pending table read them
    counts: Mapping[str, Row]  # per source table: :func:`~pipelines.gold.decide.table_counts`
    settings: Mapping[str, str]  # the session settings the batch's writes run with
    later_rows: DataFrame | None = None  # the changes of new tables past limits.new_mirrors_per_batch: they wait
    later_read: int | None = None  # the round of new tables' waiting changes this batch read through
    cached: tuple[DataFrame, ...] = ()  # each made from the ones before it
    large_write_settings: Mapping[str, str] = field(default_factory=dict)  # over ``settings``: BatchSettings

    @cached_property
    def keyed(self) -> dict[str, TablePlan]:
        """The plans of tables with a key, by mirror (made once: the steps after look mirrors up in it)."""
        return {p.mirror: p for p in self.plans.values() if p.keyed}

    @cached_property
    def whole_images(self) -> bool:
        """No change the batch decided is a partial image (nor made one by ``ignore_null_updates``): the fold takes
        each key's last change (:func:`~pipelines.gold.fold.fold_per_key`, ``whole``)."""
        no_partial = not any(c["partial"] for c in self.counts.values())
        return no_partial and ignore_nulls_sql(self.plans, self.run.cfg) == "false"

    def fresh_changes(self, plan: TablePlan) -> int:
        """The batch's fresh changes of a table."""
        c = self.counts.get(plan.name)
        return c["fresh"] if c else 0

    def good_changes(self, plan: TablePlan) -> DataFrame:
        """A table's changes that go to no quarantine."""
        return good_changes_of(self.checked, plan)

    def release(self) -> None:
        """Uncache the frames, the ones made from others first: uncaching a frame another cached frame was made
        from makes Spark plan that one again (and over gold's expressions that takes minutes)."""
        uncache(self.cached)


def decide_batch(run: BatchRun, batch_df: DataFrame, stream: GoldStream, settings: BatchSettings) -> DecidedBatch:
    """Plan and decide one batch (see the module docstring)."""
    from pyspark.sql import functions as F

    if "invalid" not in batch_df.columns:  # silver written before invalid values were kept
        batch_df = batch_df.withColumn("invalid", F.lit(None).cast("map<string,string>"))
    with run.clock.step("plan"):
        batch_df, later_read = with_waiting_new_tables(run, batch_df, stream)
    batch = ordered_batch(run, batch_df)
    cached = [batch]
    try:
        with run.clock.step("plan"):
            plans, later = plan_batch(run, batch, stream)
            lookups = table_lookups(plans)
        later_rows = None
        if later:
            held = F.col(SOURCE_TABLE).isin(list(later))
            later_rows, batch = batch.where(held).select(*batch_df.columns), batch.where(~held)
        changes = sum(p.profile.changes for p in plans.values())
        settings.fit(changes)
        stream.last_changes = changes
        with run.clock.step("decide"):
            checked = kept(checked_changes(run, batch, plans, lookups))
            cached.append(checked)
            good, skipped = filtered(checked.where("reason IS NULL"), plans)  # tables.<name>.where
            rows = kept(rows_with_key_state(run, good, plans, lookups, small=changes <= BROADCAST_CHANGES))
            cached.append(rows)
            counts = count_decisions(run, plans, lookups, checked, good, rows, skipped)
            fresh = fold_inputs(rows.where("NOT stale"), run.state_batch, ignore_nulls_sql(plans, run.cfg))
    except BaseException:
        uncache(cached)
        raise
    return DecidedBatch(
        run, plans, lookups, checked, rows, fresh, counts, settings.current, later_rows, later_read,
        cached=tuple(cached), large_write_settings=settings.large_writes,
    )  # fmt: skip


def uncache(frames: Sequence[DataFrame]) -> None:
    """Uncache ``frames``, each made from the ones before it: the last first (:meth:`DecidedBatch.release`)."""
    for frame in reversed(frames):
        frame.unpersist()


def good_changes_of(checked: DataFrame, plan: TablePlan) -> DataFrame:
    """A table's changes in ``checked`` that no reason sends to quarantine (yet)."""
    from pyspark.sql import functions as F

    return checked.where((F.col(SOURCE_TABLE) == plan.name) & F.col("reason").isNull())


# -- 1. plan
def with_waiting_new_tables(run: BatchRun, batch_df: DataFrame, stream: GoldStream) -> tuple[DataFrame, int | None]:
    """The batch with the changes of new tables an earlier batch left for it, and the round of them read
    (None: none waited). The stream's first batch makes the state tables."""
    if stream.pending is None:  # the stream's first batch: from here on the state tables exist
        run.state.ensure(run.spark)
    stream.load(run.spark, run.state, before=run.state_batch)
    if not stream.later_waiting:
        return batch_df, None
    waiting = run.state.later_changes(run.spark, stream.through.get(LATER, -1))
    waiting = waiting.select(*[c for c in batch_df.columns if c in waiting.columns])
    # a retried batch may find its own changes there too (its first attempt held them back)
    both = batch_df.unionByName(waiting, allowMissingColumns=True).dropDuplicates(["bronze_position", "change_index"])
    return both, stream.later_round


def ordered_batch(run: BatchRun, batch_df: DataFrame) -> DataFrame:
    """The batch routed (``from``), typed (``type_mapping``), with its source table and the format's order:
    cached, for the profile and the decisions."""
    batch_df = map_batch_types(route_shards(batch_df, run.cfg), run.cfg)
    return kept(with_order(batch_df.withColumn(SOURCE_TABLE, source_table_col())))


def plan_batch(run: BatchRun, batch: DataFrame, stream: GoldStream) -> tuple[dict[str, TablePlan], tuple[str, ...]]:
    """A plan for every source table of the batch and every mirror with changes waiting (it may be due although
    the batch has none of its changes), and the new tables held back (:func:`new_tables_past_limit`)."""
    profiles = profile_batch(batch)
    later = new_tables_past_limit(run, profiles, stream)
    profiles = {n: p for n, p in profiles.items() if n not in later}
    for mirror in stream.pending or {}:
        meta = stream.cache.get(run.spark, run.wh.mirror_of_state_key(mirror))
        identity = (meta.props if meta else {}).get(SOURCE_IDENTITY_PROPERTY)
        if identity and identity not in profiles:
            profiles[identity] = TableProfile(identity)
    plans = plan_tables(run.spark, run.cfg, run.wh, profiles, stream.cache, run.state_batch)
    for plan in plans.values():
        if plan.keyed and plan.since is None:  # a mirror written before key state
            adopt_mirror(run.spark, run.state, plan.ident, plan.key, run.state_batch)
            stream.cache.forget(plan.ident.ref)
            plan.since = -1
    return plans, later


def new_tables_past_limit(run: BatchRun, profiles: Mapping[str, TableProfile], stream: GoldStream) -> tuple[str, ...]:
    """The batch's new tables past ``limits.new_mirrors_per_batch`` (in name order, those that waited already
    first): creating a mirror costs about a second, so a stream naming thousands of new tables would hold every
    mirror back for an hour. Theirs wait, durably, in state's ``later`` table, for the next batch."""
    limit, new = run.cfg.new_mirrors_per_batch, []
    waited = set(stream.later_tables)
    for name in sorted(profiles, key=lambda n: (n not in waited, n)):
        if stream.cache.get(run.spark, mirror_identity(run.cfg, run.wh, name).ref) is None:
            new.append(name)
    later = tuple(new[limit:])
    stream.later_tables = list(later)
    if later:
        waiting = sum(profiles[n].changes for n in later)
        log.warning(
            "gold: %d new tables in this batch, past limits.new_mirrors_per_batch (%d): the %d changes of %d of "
            "them wait for the next batch (first: %s)",
            len(new), limit, waiting, len(later), describe_table(run.cfg, run.wh, later[0]),
        )  # fmt: skip
        run.stats.later = waiting
    return later


def table_lookups(plans: Mapping[str, TablePlan]) -> Lookups:
    """The facts of every table with a shape, as the decisions' SQL reads them."""
    lookups = Lookups()
    for plan in plans.values():
        if plan.shape is not None:
            lookups.add(plan.name, plan.mirror, plan.shape.columns, plan.key)
    return lookups


# -- 2. decide
def checked_changes(run: BatchRun, batch: DataFrame, plans: Mapping[str, TablePlan], lookups: Lookups) -> DataFrame:
    """Every change with its quarantine ``reason`` (NULL: good): a value or schema change that does not fit, a
    computed column or a ``where`` that raises, a row rule's ``drop``."""
    checked = with_computed(run.spark, check_changes(batch, plans, lookups), plans)  # computed
    checked = where_refusals(run.spark, checked, plans)  # a where that raises on a row: quarantined
    return batch_expectations(run, checked, plans)


def rows_with_key_state(
    run: BatchRun, good: DataFrame, plans: Mapping[str, TablePlan], lookups: Lookups, small: bool
) -> DataFrame:
    """The good changes of keyed tables with their key, the key's state before the batch, ``stale``, and with
    ``quality_checks`` the change checks' columns. ``small``: key state meets the batch by broadcast."""
    from pyspark.sql import functions as F

    keyed = keyed_changes(good, lookups)
    wanted = keyed.select(F.col(MIRROR).alias("mirror"), "k").distinct()
    state = run.state.key_state(run.spark, wanted, run.state_batch, small)
    rows = with_key_state(keyed, state, plans, small)
    return with_change_checks(rows, lookups) if run.cfg.quality_checks else rows


def count_decisions(
    run: BatchRun,
    plans: Mapping[str, TablePlan],
    lookups: Lookups,
    checked: DataFrame,
    good: DataFrame,
    rows: DataFrame,
    skipped: DataFrame | None,
) -> dict[str, Row]:
    """Every table's counts in one aggregation (the keyed rows, the quarantined changes, the TRUNCATEs), into the
    batch's stats (:func:`count_table`); the change checks' ``dq_results`` rows."""
    from pyspark.sql import functions as F

    checks = run.cfg.quality_checks
    truncates = good.where(f"op = 'TRUNCATE' AND size({lookups.key_sql()}) > 0").withColumn("truncate", F.lit(True))
    decided = (
        rows.withColumn("truncate", F.lit(False))
        .unionByName(checked.where("reason IS NOT NULL"), allowMissingColumns=True)
        .unionByName(truncates, allowMissingColumns=True)
    )
    counts = {r[SOURCE_TABLE]: r for r in table_counts(decided, checks).collect()}
    outside = skipped_per_table(skipped) if skipped is not None else {}  # into the stats per table
    for plan in plans.values():
        count_table(run, plan, counts.get(plan.name), outside.get(plan.name, 0))
        if checks and plan.keyed and plan.name in counts:
            probe = rows.where((F.col(MIRROR) == plan.mirror) & F.col("probe"))
            with GE_LOCK:
                run.results.extend(
                    change_check_rows(
                        plan.ident.mirror_name, counts[plan.name], probe, run_id=run.app_id, batch_id=run.batch_id
                    )
                )
    return counts


def count_table(run: BatchRun, plan: TablePlan, c: Row | None, skipped: int) -> None:
    """A table's decisions into the batch's stats, and into its mirror's (:attr:`GoldStats.mirrors`; a keyless
    table's applied and stale are counted as it writes)."""
    stats = run.stats
    quarantined = c["quarantined"] if c else 0
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


def batch_expectations(run: BatchRun, checked: DataFrame, plans: Mapping[str, TablePlan]) -> DataFrame:
    """The tables' row rules (Great Expectations) on their changes: ``drop`` gives the offending changes
    a reason (the rule), ``warn`` records, ``fail`` stops the stream."""
    from pyspark.sql import functions as F

    checked = checked.withColumn("rule", F.lit(None).cast("string")).withColumn("bad_value", F.lit(None).cast("string"))
    dropped = []
    for plan in plans.values():
        rules = [r for r in (plan.tc.expectations if plan.tc else ()) if r.scope == "batch"]
        if not rules or plan.shape is None or not plan.profile.changes:
            continue
        changes = good_changes_of(checked, plan)
        with kept_if_failing(run, plan, Step.EXPECTATION_RESULTS), GE_LOCK:
            quality = check_batch(
                run.spark, plan.ident.mirror_name, typed_changes(changes, plan.shape.columns), rules, run.app_id,
                run.batch_id,
            )  # fmt: skip
        run.results.extend(quality.results)
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
