"""One table's share of a gold micro-batch: where it goes, what it counts, and how it writes.

Every write gold makes is idempotent: Delta skips a commit stamped with a ``txnAppId`` and
``txnVersion`` the table has already committed, so a micro-batch retried after a crash is applied
once. The stamp is ``<app id>-<step>-<mirror>`` (:attr:`MirrorIdentity.stamp_name`: one per mirror,
so two source tables whose names read alike never share a stamp) with the batch id as version; :class:`Step`
names the steps. Their values are stored in every warehouse gold has written, so they never change.

The ``dq_results`` rows of every table of a batch (built-in checks, batch and mirror expectations)
are written together, in one commit (:func:`batch_results_stamp`), not one per table; only a
failing ``fail`` rule, which stops the stream, writes its rows on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from pipelines.delta_writes import append_idempotent, idempotent_dml
from pipelines.gold.identity import MirrorIdentity
from pipelines.gold.steps import KEPT_BATCHES, StepCost

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import TableRef, Warehouse


class Step(str, Enum):
    """The idempotent writes of one table in one batch (the values are part of the stored stamps)."""

    MIRROR = "m"  # the MERGE into the mirror
    TOMBSTONES = "d"  # the MERGE into (or the append to) the tombstones (deleted keys)
    TRUNCATE = "t"  # a TRUNCATE's DELETE from the mirror
    TRUNCATE_TOMBSTONES = "tt"  # ... and from the tombstones it supersedes
    TRUNCATE_HISTORY = "ht"  # ... and the history versions it closes
    HISTORY = "h"  # the MERGE into the SCD type 2 history
    APPLIED = "a"  # the ids of the keyless changes applied
    QUARANTINE = "q"  # changes whose values or schema changes do not fit
    EXPECTATION_QUARANTINE = "qdq"  # changes a ``drop`` expectation rejects
    # the results of a rule that stops the stream: a batch expectation, a mirror expectation (the rows
    # of rules that pass or warn go in the batch's one append, batch_results_stamp)
    EXPECTATION_RESULTS = "dq"
    MIRROR_EXPECTATION_RESULTS = "dqm"
    # the next two: stamps of earlier versions, one append per table (now: the batch's one append)
    CDC_CHECK_RESULTS = "dqc"  # results of the built-in per-batch CDC checks
    INVALID_VALUE_RESULTS = "dqi"  # records of values the source holds as invalid (invalid_values: null)
    # the changes of a source table its mirror refuses (stamped per source table: BatchContext.source_stamp)
    REFUSED = "qr"


#: The step of the one ``dq_results`` append per batch that carries every table's built-in check rows.
BATCH_RESULTS_STEP = "dqb"


def commit_marker(stamp: str, batch_id: int) -> str:
    """The ``userMetadata`` of an append gold makes once per batch: its stamp and the batch."""
    return f"lakecdc:{stamp}:{batch_id}"


def batch_results_stamp(app_id: str) -> str:
    """The ``txnAppId`` of a batch's one ``dq_results`` append (tests/unit/test_gold_steps.py)."""
    return f"{app_id}-{BATCH_RESULTS_STEP}"


@dataclass
class WrittenMirror:
    """A mirror gold wrote in a run: what the checks after the run need to know of it."""

    name: str  # the mirror for people (dq_results' ``table``)
    ref: TableRef
    source_key: str  # its source table's identity (JSON)
    sources: set[str] = field(default_factory=set)  # the configured sources its changes came from
    loaded: bool = False  # given full-load rows (SNAPSHOT)
    changed: bool = False  # given other changes

    def add(self, other: WrittenMirror) -> None:
        self.sources |= other.sources
        self.loaded |= other.loaded
        self.changed |= other.changed


#: The counts of changes, in :class:`GoldStats` and per mirror in :class:`MirrorCounts`.
COUNTS = ("changes", "applied", "stale", "quarantined", "skipped")


@dataclass
class MirrorCounts:
    """One mirror's share of :class:`GoldStats`' counts (:attr:`GoldStats.mirrors`): the mirrors' shares add
    up to the batch's counts (:attr:`GoldStats.mirrors_total`)."""

    changes: int = 0
    applied: int = 0
    stale: int = 0
    quarantined: int = 0
    skipped: int = 0

    def add(self, other: MirrorCounts) -> None:
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class GoldStats:
    """What gold did: changes applied, stale changes skipped, changes quarantined, tables touched.
    Every change of a batch is one of the three (:attr:`unaccounted` is 0), and the same per mirror
    (:attr:`mirrors`, which add up to the batch's counts)."""

    applied: int = 0
    stale: int = 0
    quarantined: int = 0
    skipped: int = 0  # changes a table's ``where`` leaves out (pipelines.gold.where)
    tables: set[str] = field(default_factory=set)
    changes: int = 0  # the changes the batch held for these tables
    written: dict[str, WrittenMirror] = field(default_factory=dict)  # by state key: mirrors written
    waiting: int = 0  # changes left pending for mirrors not due yet (after the last batch)
    later: int = 0  # changes of new tables past limits.new_mirrors_per_batch, waiting (after the last batch)
    results: int = 0  # dq_results rows written
    failed: int = 0  # ... of which failed
    steps: dict[str, StepCost] = field(default_factory=dict)  # seconds and Spark jobs per step (pipelines.gold.steps)
    #: each batch's seconds per step (``{"batch": id, "plan": s, ...}``, ``"flush": True`` for a flush between
    #: batches; the newest KEPT_BATCHES): where a batch's time goes, batch by batch (``StepClock.seconds``)
    batches: list[dict] = field(default_factory=list)
    mirrors: dict[str, MirrorCounts] = field(default_factory=dict)  # the counts above per mirror (name for people)
    #: per mirror (name for people) the batch planned: its changes waiting after it, and the oldest one's ingest
    #: time (epoch seconds; None when nothing waits)
    pending: dict[str, tuple[int, float | None]] = field(default_factory=dict)
    #: per mirror (name for people) written: the newest source commit time (epoch seconds) its writes applied
    applied_through: dict[str, float] = field(default_factory=dict)

    def add(self, other: GoldStats) -> None:
        self.applied += other.applied
        self.stale += other.stale
        self.quarantined += other.quarantined
        self.skipped += other.skipped
        self.tables |= other.tables
        self.changes += other.changes
        for key, mirror in other.written.items():
            if key in self.written:
                self.written[key].add(mirror)
            else:
                self.written[key] = mirror
        self.waiting = other.waiting
        self.later = other.later
        self.results += other.results
        self.failed += other.failed
        for name, cost in other.steps.items():
            self.steps.setdefault(name, StepCost()).add(cost)
        self.batches = (self.batches + other.batches)[-KEPT_BATCHES:]
        for name, counts in other.mirrors.items():
            self.mirror(name).add(counts)
        self.pending.update(other.pending)  # the later batch's view of each mirror it planned
        for name, through in other.applied_through.items():
            self.applied_through[name] = max(through, self.applied_through.get(name, through))

    def mirror(self, name: str) -> MirrorCounts:
        """The counts of one mirror (by its name for people), made on first use."""
        return self.mirrors.setdefault(name, MirrorCounts())

    @property
    def totals(self) -> MirrorCounts:
        """The batch's own counts, as one mirror's are kept."""
        return MirrorCounts(**{name: getattr(self, name) for name in COUNTS})

    @property
    def mirrors_total(self) -> MirrorCounts:
        """The mirrors' counts added up: the batch's own counts, else gold lost count of some mirror's."""
        total = MirrorCounts()
        for counts in self.mirrors.values():
            total.add(counts)
        return total

    @property
    def snapshot_only(self) -> list[WrittenMirror]:
        """Mirrors given only full-load rows in this run (their reconciliation runs after it)."""
        return [m for m in self.written.values() if m.loaded and not m.changed]

    @property
    def unaccounted(self) -> int:
        """Changes neither applied, stale, quarantined nor skipped: 0, else gold lost count of some."""
        return self.changes - self.applied - self.stale - self.quarantined - self.skipped


@dataclass
class BatchContext:
    """One table of one micro-batch: the session, the mirror, the warehouse, the stamp and the counts."""

    spark: SparkSession
    ident: MirrorIdentity
    wh: Warehouse
    app_id: str
    batch_id: int
    stats: GoldStats
    #: ``dq_results`` rows of this table, for the batch's one append (:func:`batch_results_stamp`)
    results: list[dict] = field(default_factory=list)

    def stamp(self, step: Step) -> str:
        """The ``txnAppId`` of one step's write to this mirror's tables (tests/unit/test_gold_steps.py)."""
        return f"{self.app_id}-{step.value}-{self.ident.stamp_name}"

    def source_stamp(self, step: Step) -> str:
        """A step's stamp per source table, not per mirror: for the changes of a source table that its
        mirror refuses, since several source tables may aim at one mirror in one batch."""
        digest = hashlib.sha256(self.ident.source_key.encode()).hexdigest()[:16]
        return f"{self.app_id}-{step.value}-{digest}"

    @contextmanager
    def txn(self, step: Step, settings: Mapping[str, str] | None = None) -> Iterator[None]:
        """The MERGE, DELETE or UPDATE inside runs once per batch, however often the batch is retried
        (with any other session ``settings`` it needs, for the block only)."""
        with idempotent_dml(self.spark, self.stamp(step), self.batch_id, settings):
            yield

    def marker(self, step: Step) -> str:
        """The commit marker of one step's append to this mirror's tables in this batch
        (:func:`~pipelines.delta_writes.append_once`)."""
        return commit_marker(self.stamp(step), self.batch_id)

    def append(self, frame: DataFrame, ref: TableRef, step: Step) -> None:
        """Append ``frame`` to ``ref`` once per batch, however often the batch is retried."""
        append_idempotent(frame, ref, self.stamp(step), self.batch_id)

    def record(self, rows: list[dict]) -> None:
        """``dq_results`` rows for the batch's one append."""
        self.results.extend(rows)
