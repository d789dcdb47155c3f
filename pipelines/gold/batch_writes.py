"""Choosing and writing a decided gold micro-batch (steps 3 and 4 of :mod:`pipelines.gold.stage`).

:func:`choose_due` gives the mirrors due now (:mod:`pipelines.gold.due`) as a frozen :class:`DueMirrors`;
:func:`write_batch` writes them, in named steps of one operation each:

1. :func:`fold_fresh` – each key's fresh changes reduced to the state they leave (``fold``);
2. :func:`shared_writes` – the batch's writes every mirror shares: key state, the changes of mirrors not due
   (pending), quarantine, the changes of new tables held back (one each);
3. :func:`folded_due` – per due mirror what it writes: this batch's fold, or that of the changes that waited for it
   and this batch's together; :func:`expected_writes` – what key state expects each write to do to its keys;
4. :func:`mirror_writes` – one write per due mirror (:mod:`pipelines.gold.keyed`, the SCD type 2 history, a
   TRUNCATE; :mod:`pipelines.gold.multiset` for a table without a key), all of them and the shared writes side by
   side (:mod:`pipelines.gold.parallel`), a large one with generated code (:func:`compiled_large_writes`);
5. :func:`record_batch` – progress, the stream's waiting changes, and the batch's one ``dq_results`` append.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.delta_writes import append_once, checkpointed, quarantine_frame, release_checkpoint, session_conf
from pipelines.gold.batch import BatchContext, MirrorCounts, Step, WrittenMirror, batch_results_stamp, commit_marker
from pipelines.gold.batch_decision import DecidedBatch
from pipelines.gold.batch_run import GE_LOCK, kept_if_failing, micros_to_seconds
from pipelines.gold.decide import key_state_rows
from pipelines.gold.due import Budget, Waiting, due_mirrors
from pipelines.gold.fold import fold_per_key
from pipelines.gold.history import merge_history
from pipelines.gold.keyed import KeyWrites, apply_keyed, typed_key
from pipelines.gold.multiset import apply_multiset
from pipelines.gold.parallel import apply_all
from pipelines.gold.plan import TablePlan
from pipelines.gold.settings import compiled_write
from pipelines.gold.soft import is_soft, soft_mirrors
from pipelines.gold.state import LATER, Pending
from pipelines.gold.stream import GoldStream
from pipelines.gold.truncate import after_truncate_sql, apply_truncate, close_history, truncate_mirror
from pipelines.quality.batch import check_mirror
from pipelines.quality.invalid_values import invalid_value_rows
from pipelines.quality.storage import dq_results_ref, results_frame
from pipelines.quality.written import key_check_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: A write of the batch: a name for logs and errors, and what it runs on the session it is given.
Writes = dict[str, Callable[["SparkSession"], object]]
#: The name of the key state's write (:func:`shared_writes`; :func:`compiled_large_writes` counts its keys).
KEY_STATE_WRITE = "key state"


@dataclass(frozen=True)
class DueMirrors:
    """Which keyed mirrors a batch writes now, and which wait."""

    now: Mapping[str, str]  # mirror → why it is due (pipelines.gold.due)
    waited: Mapping[str, int]  # due mirrors with changes waiting → the batch those are applied through
    deferred: tuple[str, ...]  # mirrors not due whose fresh changes wait (the pending table)


def choose_due(decided: DecidedBatch, stream: GoldStream) -> DueMirrors:
    """The mirrors to write now, each with why (:mod:`pipelines.gold.due`): every one with changes in a run until
    caught up; in a continuous stream those past their freshness budget or with many changes waiting."""
    run, waiting, budgets = decided.run, {}, {}
    for mirror, plan in decided.keyed.items():
        c = decided.counts.get(plan.name)
        held = stream.pending.get(mirror) or Pending()
        oldest = min(
            (t for t in (micros_to_seconds(c["oldest"] if c else None), held.oldest) if t is not None), default=None
        )
        fresh = decided.fresh_changes(plan)
        waiting[mirror] = Waiting(held.changes + fresh, oldest, "truncate" if plan.truncates else None)
        budgets[mirror] = Budget(plan.max_delay, run.cfg.gold_max_pending)
    now = due_mirrors(waiting, budgets, time.time(), stream.drain, run.cfg.gold_parallelism)
    waited = {m: applied_through(stream, decided.keyed[m]) for m in now if m in stream.pending}
    deferred = tuple(m for m, p in decided.keyed.items() if m not in now and decided.fresh_changes(p))
    return DueMirrors(now, waited, deferred)


def applied_through(stream: GoldStream, plan: TablePlan) -> int:
    """The batch a mirror's pending changes are applied through (a mirror made again since: its start)."""
    return max(stream.through.get(plan.mirror, -2), (plan.since or 0) - 1)


def write_batch(decided: DecidedBatch, due: DueMirrors, stream: GoldStream) -> None:
    """Fold, write (shared writes and the due mirrors side by side) and record the batch (the module docstring)."""
    run = decided.run
    with run.clock.step("fold"):
        fresh_folded = fold_fresh(decided)
    try:
        writes = shared_writes(decided, due, stream, fresh_folded)
        with folded_due(decided, due, fresh_folded) as (folded, changes_of):
            with run.clock.step("fold"):
                expected = expected_writes(decided, folded)
            writes |= mirror_writes(decided, due, stream, folded, changes_of, expected)
            writes = compiled_large_writes(decided, writes, expected)
            parallelism = run.cfg.gold_parallelism
            with run.clock.step("write"):
                apply_all(
                    run.spark, list(writes), lambda s, n: writes[n](s), parallelism,
                    lambda task: run.describe(decided.plans, task), workers=stream.workers_for(parallelism),
                    settings=decided.settings,
                )  # fmt: skip
    finally:
        release_checkpoint(fresh_folded)
    with run.clock.step("record"):
        record_batch(decided, due, stream)


def fold_fresh(decided: DecidedBatch) -> DataFrame:
    """The batch's fresh changes folded per key (checkpointed: key state and the due mirrors read it)."""
    soft = soft_mirrors(decided.plans.values())
    return fold_per_key(decided.fresh, soft=soft, whole=decided.whole_images).localCheckpoint()


def shared_writes(decided: DecidedBatch, due: DueMirrors, stream: GoldStream, fresh_folded: DataFrame) -> Writes:
    """The batch's writes that are no mirror's own: key state, the pending changes of mirrors not due, the
    quarantine, and the changes of new tables held back."""
    from pyspark.sql import functions as F

    run, writes = decided.run, {}
    if any(decided.fresh_changes(p) for p in decided.keyed.values()):
        writes[KEY_STATE_WRITE] = lambda s: run.state.append_keys(
            key_state_rows(fresh_folded, decided.lookups, run.state_batch)
        )
    if due.deferred:
        waiting_rows = decided.fresh.where(F.col("mirror").isin(list(due.deferred)))
        writes["pending changes"] = lambda s: run.state.append_pending(waiting_rows)
    if run.stats.quarantined:
        writes["quarantine"] = lambda s: quarantine(decided, careful=stream.careful)
    if decided.later_rows is not None:
        later_round = stream.later_round + 1
        writes["new tables waiting"] = lambda s: run.state.append_later(
            decided.later_rows, later_round, run.state_batch
        )
    return writes


@contextmanager
def folded_due(
    decided: DecidedBatch, due: DueMirrors, fresh_folded: DataFrame
) -> Iterator[tuple[dict[str, DataFrame], dict[str, DataFrame]]]:
    """Per due mirror, its folded keys (``mirror`` filtered): this batch's fold, or for a mirror with changes
    waiting, the fold of those and this batch's together (one checkpoint for all such mirrors); and per due mirror
    its changes themselves (what its history reads)."""
    from pyspark.sql import functions as F

    def mine(frame: DataFrame, mirror: str) -> DataFrame:
        return frame.where(F.col("mirror") == mirror)

    run = decided.run
    folded = {m: mine(fresh_folded, m) for m in due.now if m not in due.waited}
    changes_of = {m: mine(decided.fresh, m) for m in due.now}
    if not due.waited:
        yield folded, changes_of
        return
    before = run.state_batch + 1 if run.flush else run.state_batch
    waiting = run.state.pending_changes(run.spark, dict(due.waited), before)
    both = decided.fresh.where(F.col("mirror").isin(list(due.waited))).unionByName(waiting, allowMissingColumns=True)
    changes_of.update({m: mine(both, m) for m in due.waited})
    with checkpointed(fold_per_key(both, soft=soft_mirrors(decided.plans.values()))) as joined:
        folded.update({m: mine(joined, m) for m in due.waited})
        yield folded, changes_of


def expected_writes(decided: DecidedBatch, folded: Mapping[str, DataFrame]) -> dict[str, KeyWrites]:
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
        written = written_mirror(decided, decided.keyed[r["mirror"]])
        written.loaded, written.changed = bool(r["snapshots"]), bool(r["others"])
    return out


def mirror_writes(
    decided: DecidedBatch,
    due: DueMirrors,
    stream: GoldStream,
    folded: Mapping[str, DataFrame],
    changes_of: Mapping[str, DataFrame],
    expected: Mapping[str, KeyWrites],
) -> Writes:
    """One write per due keyed mirror, per keyless table with changes, and the invalid-value records of a keyed
    table whose values the source holds as invalid."""
    writes: Writes = {}
    for mirror in due.now:
        plan = decided.keyed[mirror]
        writes[mirror] = lambda s, p=plan: write_keyed(
            decided, s, p, stream, folded[p.mirror], changes_of[p.mirror], expected[p.mirror],
            may_append=p.mirror not in due.waited,
        )  # fmt: skip
    for plan in decided.plans.values():
        if plan.keyless and plan.profile.changes:
            writes[plan.mirror] = lambda s, p=plan: write_keyless(decided, s, p)
        elif plan.keyed and plan.profile.invalid_values and plan.invalid_policy == "null":
            writes[f"{plan.mirror} (invalid values)"] = lambda s, p=plan: invalid_values(decided, p)
    return writes


def compiled_large_writes(decided: DecidedBatch, writes: Writes, expected: Mapping[str, KeyWrites]) -> Writes:
    """The writes of many keys (a mirror's, key state's) run with generated code, the others as the batch runs
    (:func:`~pipelines.gold.settings.compiled_write`)."""
    settings = decided.large_write_settings
    if not settings:
        return writes
    keys = {mirror: w.keys for mirror, w in expected.items()}
    keys[KEY_STATE_WRITE] = sum(decided.fresh_changes(p) for p in decided.keyed.values())

    def compiled(work: Callable[[SparkSession], object]) -> Callable[[SparkSession], object]:
        def run(session: SparkSession) -> object:
            with session_conf(session, settings):
                return work(session)

        return run

    return {name: compiled(w) if compiled_write(keys.get(name, 0)) else w for name, w in writes.items()}


def write_keyed(
    decided: DecidedBatch,
    session: SparkSession,
    plan: TablePlan,
    stream: GoldStream,
    folded: DataFrame,
    changes: DataFrame,
    writes: KeyWrites,
    may_append: bool,
) -> None:
    """A due keyed mirror's write: a hard TRUNCATE first, its history, the MERGE (or an append into an empty
    mirror), a soft TRUNCATE's marks after it, the key checks and the mirror's rules."""
    from pyspark.sql import functions as F

    run = decided.run
    ctx = run.context(session, plan)
    soft = is_soft(plan.tc)  # a soft mirror's TRUNCATEs mark rows after the write (pipelines.gold.truncate)
    if plan.truncates and not soft:
        truncate_mirror(ctx, plan.profile, plan.truncated_seq, plan.history)
        stream.cache.forget(plan.ident.ref)
    if plan.truncates and soft:  # the history as a hard mirror's: closed first, changes after it merged
        close_history(ctx, plan.profile, plan.history, every=True)
    if plan.history is not None:
        changes = changes.withColumn("k", F.expr(typed_key(plan.key, plan.shape)))
        if plan.truncates and soft:
            changes = changes.where(after_truncate_sql(plan.profile))
        merge_history(ctx, changes, plan.key, plan.shape, plan.history, tracked_columns(plan))
    writes = apply_keyed(
        ctx, folded, plan.key, plan.shape, writes, careful=stream.careful, may_append=may_append, soft=soft
    )
    if plan.truncates and soft:
        truncate_mirror(ctx, plan.profile, plan.truncated_seq, None, soft=True)
        stream.cache.forget(plan.ident.ref)
    if run.cfg.quality_checks:
        ctx.record(key_check_rows(plan.ident.mirror_name, plan.key, writes, run.app_id, run.batch_id))
    mirror_expectations(decided, ctx, plan)
    log.info(
        "gold: %s → %s: %s %d keys (%d new, %d updated, %d deleted)",
        plan.ident.source_table, plan.ident.mirror_name, "appended" if writes.appended else "merged", writes.keys,
        writes.expected_inserted, writes.expected_updated, writes.expected_deleted,
    )  # fmt: skip


def write_keyless(decided: DecidedBatch, session: SparkSession, plan: TablePlan) -> None:
    """A table without a key: multiset semantics (:mod:`pipelines.gold.multiset`), every batch."""
    run = decided.run
    ctx = run.context(session, plan)
    changes = decided.good_changes(plan)
    if plan.tc and plan.tc.history:
        log.warning("gold: %s has no key: no SCD type 2 history (a version needs a key)", plan.name)
    apply_multiset(ctx, apply_truncate(ctx, changes, plan.profile, plan.truncated_seq), plan.shape)
    with run.lock:  # counted as it wrote (gold.multiset): into the batch's figures and its mirror's
        run.stats.applied += ctx.stats.applied
        run.stats.stale += ctx.stats.stale
        counted = MirrorCounts(applied=ctx.stats.applied, stale=ctx.stats.stale)
        run.stats.mirror(plan.ident.mirror_name).add(counted)
        written_mirror(decided, plan).changed = True
    mirror_expectations(decided, ctx, plan)


def invalid_values(decided: DecidedBatch, plan: TablePlan) -> None:
    """``cdc_invalid_value`` rows of a table whose changes carry values the source holds as invalid."""
    run = decided.run
    rows = invalid_value_rows(plan.ident.mirror_name, decided.good_changes(plan), plan.key, run.app_id, run.batch_id)
    with run.lock:
        run.results.extend(rows)


def mirror_expectations(decided: DecidedBatch, ctx: BatchContext, plan: TablePlan) -> None:
    """The table's rules on the whole mirror, after its write."""
    run = decided.run
    rules = [r for r in (plan.tc.expectations if plan.tc else ()) if r.scope == "mirror"]
    if not rules:
        return
    with kept_if_failing(run, plan, Step.MIRROR_EXPECTATION_RESULTS), GE_LOCK:
        rows = check_mirror(
            ctx.spark, plan.ident.mirror_name, plan.ident.ref.read(ctx.spark), rules, run.app_id, run.batch_id,
            key_cols=plan.key,
        )  # fmt: skip
    ctx.record(rows)


def quarantine(decided: DecidedBatch, careful: bool) -> None:
    """Every change the batch sends to quarantine, in one append (once, however often the batch runs)."""
    from pyspark.sql import functions as F

    run = decided.run
    bad = decided.checked.where("reason IS NOT NULL").withColumn("stage", F.lit("gold"))
    marker = commit_marker(f"{run.app_id}-{Step.QUARANTINE.value}", run.batch_id)
    append_once(quarantine_frame(bad), run.wh.silver("quarantine"), marker, check=careful)
    for plan in decided.plans.values():
        c = decided.counts.get(plan.name)
        if c and c["quarantined"]:
            log.warning("gold: %s: %d changes quarantined", plan.ident.source_table, c["quarantined"])


def record_batch(decided: DecidedBatch, due: DueMirrors, stream: GoldStream) -> None:
    """Progress, the stream's waiting changes, and the batch's checks (its one ``dq_results`` append)."""
    run = decided.run
    run.state.record_applied(run.spark, list(due.waited), run.state_batch)
    if decided.later_rows is not None:
        stream.later_round, stream.later_batch = stream.later_round + 1, run.state_batch
    if decided.later_read is not None:  # what waited is applied now, or waits again in the new round
        run.state.record_applied(run.spark, [LATER], decided.later_read)
        stream.through[LATER] = decided.later_read
    for mirror in due.now:
        stream.pending.pop(mirror, None)
        stream.through[mirror] = run.state_batch
    for mirror in due.deferred:
        c = decided.counts[decided.keyed[mirror].name]
        stream.pending.setdefault(mirror, Pending()).add(c["fresh"], micros_to_seconds(c["oldest"]), run.state_batch)
    for mirror in due.now:
        plan = decided.keyed[mirror]
        written_mirror(decided, plan)
        c = decided.counts.get(plan.name)
        if c is not None and c["newest"] is not None:
            run.stats.applied_through[plan.ident.mirror_name] = micros_to_seconds(c["newest"])
    for mirror, plan in decided.keyed.items():
        held = stream.pending.get(mirror)
        run.stats.pending[plan.ident.mirror_name] = (held.changes, held.oldest) if held else (0, None)
    run.stats.waiting = stream.waiting
    write_results(decided, careful=stream.careful)


def written_mirror(decided: DecidedBatch, plan: TablePlan) -> WrittenMirror:
    """The batch's record of a mirror it writes."""
    written = decided.run.stats.written
    if plan.mirror not in written:
        ident = plan.ident
        written[plan.mirror] = WrittenMirror(ident.mirror_name, ident.ref, plan.name, set(plan.profile.sources))
    return written[plan.mirror]


def write_results(decided: DecidedBatch, careful: bool) -> None:
    """The batch's ``dq_results`` rows, all tables' in one append (once, however often the batch runs)."""
    run = decided.run
    rows = run.results
    if rows:
        marker = commit_marker(batch_results_stamp(run.app_id), run.batch_id)
        append_once(results_frame(run.spark, rows), dq_results_ref(run.wh), marker, check=careful)
    run.stats.results = len(rows)
    run.stats.failed = sum(1 for r in rows if r.get("success") is False)


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
