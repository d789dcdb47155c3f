"""Which mirrors a batch merges: a freshness budget per table, so hot tables stay fresh while cold ones wait.

A mirror's MERGE is Delta's floor (one commit, a dozen small Spark jobs), so 200 quiet tables must not
cost 200 MERGEs per batch. In a continuous stream a mirror is *due* when

* its waiting changes (pending ones and this batch's) reach ``gold.max_pending`` (a hot table: merged
  every batch), or
* its oldest waiting change has waited ``max_delay`` (``gold.max_delay``, or the table's own), or
* the batch changes the mirror in ways that do not wait: a TRUNCATE, a mirror created by this batch,
  a table without a key (multiset mirrors apply every batch), or history configured.

Cold tables that start together would fall due together, and one batch would then merge them all while
the hot tables wait behind it. So a mirror whose oldest change has waited :data:`EARLY` of its budget may
be merged early, a few per batch (:func:`early_limit`, the most overdue first): the cold tables' merges
spread over time, and each is merged before its budget runs out. At its full budget a mirror is merged
whatever the count.

The others' changes wait in gold's ``pending`` table (:mod:`pipelines.gold.state`): durable, in order, and
merged together when their mirror is due; nothing is lost or reordered (a late change is decided stale
against key state, which includes what waits). A run until caught up (``--once``) and a direct call of
``apply_gold_batch`` merge every mirror: nothing is left waiting. A stream also flushes mirrors past their
budget between batches, when no batch comes (``pipelines.gold.stage.flush_due``).

Defaults: a table of 100 changes a minute waits at most a minute (its hundredth change merges it), a quiet
one 5 minutes (as
the Iceberg Kafka Connect sink's commit interval); one with 100 changes waiting is merged at once (a
table of 50 changes a second: every batch or two). Both are settings (``gold.max_delay``, ``gold.max_pending``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pipelines.config import DEFAULT_GOLD_MAX_DELAY, DEFAULT_GOLD_MAX_PENDING


@dataclass(frozen=True)
class Waiting:
    """What waits for one mirror as a batch is decided: its pending changes and this batch's."""

    changes: int  # pending + this batch's fresh changes
    oldest: float | None  # epoch seconds of the oldest one's ingest time
    forced: str | None = None  # why the mirror cannot wait (truncate, new mirror, keyless, history)


@dataclass(frozen=True)
class Budget:
    """The freshness budget of one mirror."""

    max_delay: float = DEFAULT_GOLD_MAX_DELAY
    max_pending: int = DEFAULT_GOLD_MAX_PENDING


def due_reason(waiting: Waiting, budget: Budget, now: float) -> str | None:
    """Why the mirror is merged now (None: it waits)."""
    if waiting.forced:
        return waiting.forced
    if waiting.changes >= budget.max_pending:
        return f"{waiting.changes} changes waiting (max_pending {budget.max_pending})"
    if waiting.oldest is not None and now - waiting.oldest >= budget.max_delay:
        return f"oldest change waited {now - waiting.oldest:.0f} s (max_delay {budget.max_delay:g} s)"
    return None


#: The share of its budget after which a mirror's changes may be merged early (see the module docstring).
EARLY = 0.5


def early_limit(eligible: int, parallelism: int) -> int:
    """How many mirrors a batch merges early: enough that a few hundred cold tables cycle well within their
    budget, few enough that a batch stays short (twice the tables gold writes at a time, or an eighth of
    those eligible)."""
    return max(2 * parallelism, -(-eligible // 8))


def due_mirrors(
    waiting: Mapping[str, Waiting],
    budgets: Mapping[str, Budget],
    now: float,
    drain: bool,
    parallelism: int = 1,
) -> dict[str, str]:
    """The mirrors to merge now, each with why. ``drain``: every mirror with something waiting."""
    out, early = {}, []
    for mirror, w in sorted(waiting.items()):
        if not w.changes and not w.forced:
            continue
        budget = budgets.get(mirror, Budget())
        reason = "drain" if drain else due_reason(w, budget, now)
        if reason:
            out[mirror] = reason
        elif w.oldest is not None and now - w.oldest >= EARLY * budget.max_delay:
            early.append((w.oldest, mirror))
    for oldest, mirror in sorted(early)[: early_limit(len(early), parallelism)]:
        out[mirror] = f"oldest change waited {now - oldest:.0f} s, merged early to spread the merges"
    return out


def overdue(waiting: Waiting, budget: Budget, now: float) -> float:
    """Seconds past its budget a mirror's oldest waiting change is (0: within it)."""
    if waiting.oldest is None:
        return 0.0
    return max(0.0, now - waiting.oldest - budget.max_delay)
