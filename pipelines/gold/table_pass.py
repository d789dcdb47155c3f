"""The table pass of a micro-batch: which mirrors are due, and the writes (steps 3 and 4 of
:mod:`pipelines.gold.stage`).

:class:`MicroBatch` is a decided :class:`~pipelines.gold.batch_pass.BatchPass` that writes: it chooses the
mirrors due now (:mod:`pipelines.gold.due`), folds what each due mirror writes (this batch's changes, and
those that waited for it), and runs side by side (:mod:`pipelines.gold.parallel`) the batch's shared writes
(key state, pending changes, quarantine: one each) and one write per due mirror
(:mod:`pipelines.gold.keyed`, the SCD type 2 history, a TRUNCATE; :mod:`pipelines.gold.multiset` for a table
without a key), then progress and the batch's one ``dq_results`` append.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipelines.delta_writes import append_once, checkpointed, quarantine_frame, release_checkpoint
from pipelines.gold.batch import BatchContext, MirrorCounts, Step, WrittenMirror, batch_results_stamp, commit_marker
from pipelines.gold.batch_pass import GE_LOCK, BatchPass, kept_if_failing, micros_to_seconds
from pipelines.gold.decide import key_state_rows
from pipelines.gold.due import Budget, Waiting, due_mirrors
from pipelines.gold.fold import fold_per_key
from pipelines.gold.history import merge_history
from pipelines.gold.keyed import KeyWrites, apply_keyed, typed_key
from pipelines.gold.multiset import apply_multiset
from pipelines.gold.parallel import apply_all
from pipelines.gold.plan import TablePlan
from pipelines.gold.profile import SOURCE_TABLE
from pipelines.gold.soft import is_soft, soft_mirrors
from pipelines.gold.state import LATER, Pending
from pipelines.gold.truncate import after_truncate_sql, apply_truncate, close_history, truncate_mirror
from pipelines.quality.batch import check_mirror
from pipelines.quality.invalid_values import invalid_value_rows
from pipelines.quality.storage import dq_results_ref, results_frame
from pipelines.quality.written import key_check_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


class MicroBatch(BatchPass):
    """A decided batch that writes (see the module docstring)."""

    def write(self) -> None:
        """Steps 3 and 4: choose the due mirrors, write, record progress and the batch's checks."""
        from pyspark.sql import functions as F

        stream = self.stream
        self.keyed = {p.mirror: p for p in self.plans.values() if p.keyed}
        due = self._due()
        self.waited = {m: self._through(self.keyed[m]) for m in due if m in stream.pending}
        deferred = [m for m in self.keyed if m not in due and self._fresh(m)]
        with self.clock.step("fold"):
            fresh_folded = fold_per_key(self.fresh, soft=soft_mirrors(self.plans.values())).localCheckpoint()
        try:
            tasks: dict[str, Callable[[SparkSession], object]] = {}
            if any(self._fresh(m) for m in self.keyed):
                tasks["key state"] = lambda s: self.state.append_keys(
                    key_state_rows(fresh_folded, self.lookups, self.state_batch)
                )
            if deferred:
                waiting_rows = self.fresh.where(F.col("mirror").isin(deferred))
                tasks["pending changes"] = lambda s: self.state.append_pending(waiting_rows)
            if self.stats.quarantined:
                tasks["quarantine"] = lambda s: self._quarantine()
            if self.later_rows is not None:
                later_round = stream.later_round + 1
                tasks["new tables waiting"] = lambda s: self.state.append_later(
                    self.later_rows, later_round, self.state_batch
                )
            with self._apply_set(fresh_folded, due) as folded:
                with self.clock.step("fold"):
                    writes = self._expected(folded)
                for mirror in due:
                    tasks[mirror] = lambda s, m=mirror: self._apply_keyed(s, self.keyed[m], folded[m], writes[m])
                for plan in self.plans.values():
                    if plan.keyless and plan.profile.changes:
                        tasks[plan.mirror] = lambda s, p=plan: self._apply_keyless(s, p)
                    elif plan.keyed and plan.profile.invalid_values and plan.invalid_policy == "null":
                        tasks[f"{plan.mirror} (invalid values)"] = lambda s, p=plan: self._invalid_values(p)
                parallelism = self.cfg.gold_parallelism
                with self.clock.step("write"):
                    apply_all(
                        self.spark, list(tasks), lambda s, n: tasks[n](s), parallelism, self._describe,
                        workers=stream.workers_for(parallelism), settings=self.settings,
                    )  # fmt: skip
        finally:
            release_checkpoint(fresh_folded)
        with self.clock.step("record"):
            self._record(due, deferred)

    def _record(self, due: Mapping[str, str], deferred: list[str]) -> None:
        """Progress, the stream's waiting changes, and the batch's checks (its one ``dq_results`` append)."""
        stream = self.stream
        self.state.record_applied(self.spark, list(self.waited), self.state_batch)
        if self.later_rows is not None:
            stream.later_round, stream.later_batch = stream.later_round + 1, self.state_batch
        if self.later_read is not None:  # what waited is applied now, or waits again in the new round
            self.state.record_applied(self.spark, [LATER], self.later_read)
            stream.through[LATER] = self.later_read
        for mirror in due:
            stream.pending.pop(mirror, None)
            stream.through[mirror] = self.state_batch
        for mirror in deferred:
            c = self.counts[self.keyed[mirror].name]
            stream.pending.setdefault(mirror, Pending()).add(
                c["fresh"], micros_to_seconds(c["oldest"]), self.state_batch
            )
        for mirror in due:
            plan = self.keyed[mirror]
            self._written(plan)
            c = self.counts.get(plan.name)
            if c is not None and c["newest"] is not None:
                self.stats.applied_through[plan.ident.mirror_name] = micros_to_seconds(c["newest"])
        for mirror, plan in self.keyed.items():
            held = stream.pending.get(mirror)
            self.stats.pending[plan.ident.mirror_name] = (held.changes, held.oldest) if held else (0, None)
        self.stats.waiting = stream.waiting
        self._write_results()

    def _written(self, plan: TablePlan) -> WrittenMirror:
        """The batch's record of a mirror it writes."""
        if plan.mirror not in self.stats.written:
            self.stats.written[plan.mirror] = WrittenMirror(
                plan.ident.mirror_name, plan.ident.ref, plan.name, set(plan.profile.sources)
            )
        return self.stats.written[plan.mirror]

    def _fresh(self, mirror: str) -> int:
        """The batch's fresh changes of a mirror."""
        c = self.counts.get(self.keyed[mirror].name)
        return c["fresh"] if c else 0

    def _due(self) -> dict[str, str]:
        """The mirrors to write now, each with why (:mod:`pipelines.gold.due`)."""
        waiting, budgets = {}, {}
        for mirror, plan in self.keyed.items():
            c = self.counts.get(plan.name)
            held = self.stream.pending.get(mirror) or Pending()
            oldest = min(
                (t for t in (micros_to_seconds(c["oldest"] if c else None), held.oldest) if t is not None), default=None
            )
            waiting[mirror] = Waiting(
                held.changes + self._fresh(mirror), oldest, "truncate" if plan.truncates else None
            )
            budgets[mirror] = Budget(plan.max_delay, self.cfg.gold_max_pending)
        return due_mirrors(waiting, budgets, time.time(), self.stream.drain, self.cfg.gold_parallelism)

    def _through(self, plan: TablePlan) -> int:
        """The batch a mirror's pending changes are applied through (a mirror made again since: its start)."""
        return max(self.stream.through.get(plan.mirror, -2), (plan.since or 0) - 1)

    @contextmanager
    def _apply_set(self, fresh_folded: DataFrame, due: Mapping[str, str]) -> Iterator[dict[str, DataFrame]]:
        """Per due mirror, its folded keys (``mirror`` filtered): this batch's fold, or for a mirror with
        changes waiting, the fold of those and this batch's together (one checkpoint for all such mirrors).
        ``self.changes_of`` gives each due mirror's changes themselves (what its history reads)."""
        from pyspark.sql import functions as F

        def mine(frame: DataFrame, mirror: str) -> DataFrame:
            return frame.where(F.col("mirror") == mirror)

        folded = {m: mine(fresh_folded, m) for m in due if m not in self.waited}
        self.changes_of = {m: mine(self.fresh, m) for m in due}
        if not self.waited:
            yield folded
            return
        before = self.state_batch + 1 if self.flush else self.state_batch
        waiting = self.state.pending_changes(self.spark, dict(self.waited), before)
        both = self.fresh.where(F.col("mirror").isin(list(self.waited))).unionByName(waiting, allowMissingColumns=True)
        self.changes_of.update({m: mine(both, m) for m in self.waited})
        with checkpointed(fold_per_key(both, soft=soft_mirrors(self.plans.values()))) as joined:
            folded.update({m: mine(joined, m) for m in self.waited})
            yield folded

    def _expected(self, folded: Mapping[str, DataFrame]) -> dict[str, KeyWrites]:
        """Per due mirror, what key state expects its write to do to its keys: one aggregation for all."""
        from pyspark.sql import functions as F

        out = {m: KeyWrites() for m in folded}
        if not folded:
            return out
        frames = list(folded.values())
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        rows = (
            union.groupBy("mirror")
            .agg(
                F.count_if(F.expr("st.live AND NOT first_prev_live")).alias("ins"),
                F.count_if(F.expr("st.live AND first_prev_live")).alias("upd"),
                F.count_if(F.expr("NOT st.live AND first_prev_live")).alias("dele"),
                F.count_if(F.expr("exists(map_values(kimg), v -> v IS NULL)")).alias("nulls"),
                F.count_if(F.expr("last.op = 'SNAPSHOT'")).alias("snapshots"),
                F.count_if(F.expr("last.op != 'SNAPSHOT'")).alias("others"),
            )
            .collect()
        )
        for r in rows:
            w = out[r["mirror"]]
            w.expected_inserted, w.expected_updated, w.expected_deleted = r["ins"], r["upd"], r["dele"]
            w.null_keys = r["nulls"]
            written = self._written(self.keyed[r["mirror"]])
            written.loaded, written.changed = bool(r["snapshots"]), bool(r["others"])
        return out

    def _apply_keyed(self, session: SparkSession, plan: TablePlan, folded: DataFrame, writes: KeyWrites) -> None:
        from pyspark.sql import functions as F

        ctx = self._context(session, plan)
        soft = is_soft(plan.tc)  # a soft mirror's TRUNCATEs mark rows after the write (pipelines.gold.truncate)
        if plan.truncates and not soft:
            truncate_mirror(ctx, plan.profile, plan.truncated_seq, plan.history)
            self.stream.cache.forget(plan.ident.ref)
        if plan.truncates and soft:  # the history as a hard mirror's: closed first, changes after it merged
            close_history(ctx, plan.profile, plan.history, every=True)
        if plan.history is not None:
            changes = self.changes_of[plan.mirror].withColumn("k", F.expr(typed_key(plan.key, plan.shape)))
            if plan.truncates and soft:
                changes = changes.where(after_truncate_sql(plan.profile))
            merge_history(ctx, changes, plan.key, plan.shape, plan.history, tracked_columns(plan))
        writes = apply_keyed(
            ctx,
            folded,
            plan.key,
            plan.shape,
            writes,
            careful=self.stream.careful,
            may_append=plan.mirror not in self.waited,
            soft=soft,
        )
        if plan.truncates and soft:
            truncate_mirror(ctx, plan.profile, plan.truncated_seq, None, soft=True)
            self.stream.cache.forget(plan.ident.ref)
        if self.cfg.quality_checks:
            ctx.record(key_check_rows(plan.ident.mirror_name, plan.key, writes, self.app_id, self.batch_id))
        self._mirror_expectations(ctx, plan)
        log.info(
            "gold: %s → %s: %s %d keys (%d new, %d updated, %d deleted)",
            plan.ident.source_table,
            plan.ident.mirror_name,
            "appended" if writes.appended else "merged",
            writes.keys,
            writes.expected_inserted,
            writes.expected_updated,
            writes.expected_deleted,
        )

    def _apply_keyless(self, session: SparkSession, plan: TablePlan) -> None:
        """A table without a key: multiset semantics (:mod:`pipelines.gold.multiset`), every batch."""
        from pyspark.sql import functions as F

        ctx = self._context(session, plan)
        changes = self.checked.where((F.col(SOURCE_TABLE) == plan.name) & F.col("reason").isNull())
        if plan.tc and plan.tc.history:
            log.warning("gold: %s has no key: no SCD type 2 history (a version needs a key)", plan.name)
        apply_multiset(ctx, apply_truncate(ctx, changes, plan.profile, plan.truncated_seq), plan.shape)
        with self._lock:  # counted as it wrote (gold.multiset): into the batch's figures and its mirror's
            self.stats.applied += ctx.stats.applied
            self.stats.stale += ctx.stats.stale
            counted = MirrorCounts(applied=ctx.stats.applied, stale=ctx.stats.stale)
            self.stats.mirror(plan.ident.mirror_name).add(counted)
            self._written(plan).changed = True
        self._mirror_expectations(ctx, plan)

    def _invalid_values(self, plan: TablePlan) -> None:
        """``cdc_invalid_value`` rows of a table whose changes carry values the source holds as invalid."""
        from pyspark.sql import functions as F

        changes = self.checked.where((F.col(SOURCE_TABLE) == plan.name) & F.col("reason").isNull())
        rows = invalid_value_rows(plan.ident.mirror_name, changes, plan.key, self.app_id, self.batch_id)
        with self._lock:
            self.results += rows

    def _mirror_expectations(self, ctx: BatchContext, plan: TablePlan) -> None:
        """The table's rules on the whole mirror, after its write."""
        rules = [r for r in (plan.tc.expectations if plan.tc else ()) if r.scope == "mirror"]
        if not rules:
            return
        with kept_if_failing(self, plan, Step.MIRROR_EXPECTATION_RESULTS), GE_LOCK:
            rows = check_mirror(
                ctx.spark, plan.ident.mirror_name, plan.ident.ref.read(ctx.spark), rules, self.app_id, self.batch_id,
                key_cols=plan.key,
            )  # fmt: skip
        ctx.record(rows)

    def _quarantine(self) -> None:
        """Every change the batch sends to quarantine, in one append (once, however often the batch runs)."""
        from pyspark.sql import functions as F

        bad = self.checked.where("reason IS NOT NULL").withColumn("stage", F.lit("gold"))
        marker = commit_marker(f"{self.app_id}-{Step.QUARANTINE.value}", self.batch_id)
        append_once(quarantine_frame(bad), self.wh.silver("quarantine"), marker, check=self.stream.careful)
        for plan in self.plans.values():
            c = self.counts.get(plan.name)
            if c and c["quarantined"]:
                log.warning("gold: %s: %d changes quarantined", plan.ident.source_table, c["quarantined"])

    def _write_results(self) -> None:
        """The batch's ``dq_results`` rows, all tables' in one append (once, however often the batch runs)."""
        rows = self.results
        if rows:
            marker = commit_marker(batch_results_stamp(self.app_id), self.batch_id)
            append_once(results_frame(self.spark, rows), dq_results_ref(self.wh), marker, check=self.stream.careful)
        self.stats.results = len(rows)
        self.stats.failed = sum(1 for r in rows if r.get("success") is False)


def tracked_columns(plan: TablePlan) -> list[str] | None:
    """The columns whose changes open a new history version (``history: {columns}`` or ``{except_columns}``);
    None: every column (``history: true``)."""
    tc = plan.tc
    if tc is None or (tc.history_columns is None and not tc.history_except_columns):
        return None
    data = [c for c in plan.shape.columns if c not in plan.key]
    if tc.history_columns is not None:
        return [c for c in data if c in tc.history_columns]
    return [c for c in data if c not in tc.history_except_columns]
