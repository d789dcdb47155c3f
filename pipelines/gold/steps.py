"""What a gold batch costs, step by step: wall seconds and Spark jobs.

A batch is a handful of steps (:data:`STEPS`): ``plan`` (the profile and each table's mirror), ``decide``
(the one pass that checks, keys, marks stale changes and counts), ``fold`` (each key's changes reduced to
the state they leave), ``write`` (key state, pending changes, quarantine and every due mirror, side by
side) and ``record`` (progress and the batch's ``dq_results``). The gold stage logs each batch's costs and
adds them to :class:`~pipelines.gold.batch.GoldStats`, which ``python -m bench`` prints per section.

Jobs are read from the DAG scheduler's counter of a classic session; a Spark Connect session has no such
counter, and its steps count no jobs (``None``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.spark_logs import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The steps of a gold batch, in the order they run.
STEPS = ("plan", "decide", "fold", "write", "record")
#: How many batches' seconds per step a run keeps (the newest, :attr:`~pipelines.gold.batch.GoldStats.batches`):
#: bounded whatever the run's length.
KEPT_BATCHES = 500


def spark_jobs(spark: SparkSession) -> int | None:
    """Spark jobs submitted so far in the session's context; None where that cannot be read (Spark Connect)."""
    try:
        return int(spark.sparkContext._jsc.sc().dagScheduler().numTotalJobs())
    except Exception:  # noqa: BLE001 - a Connect session, or another runtime: jobs are not counted
        return None


def _context(spark: SparkSession):
    """The session's SparkContext; None over Spark Connect (no context on the client)."""
    return None if is_connect(spark) else spark.sparkContext


@dataclass
class StepCost:
    """What one step cost (summed over the batches it ran in)."""

    seconds: float = 0.0
    jobs: int | None = 0
    batches: int = 0

    def add(self, other: StepCost) -> None:
        self.seconds += other.seconds
        self.jobs = None if self.jobs is None or other.jobs is None else self.jobs + other.jobs
        self.batches += other.batches

    def as_dict(self) -> dict:
        return {"seconds": round(self.seconds, 3), "jobs": self.jobs, "batches": self.batches}


class StepClock:
    """Times the steps of one batch (:meth:`step`); :attr:`costs` by step name. ``unit`` names the jobs' part of
    the run (``gold``; ``run`` for the one query's steps, :mod:`pipelines.one_query`)."""

    def __init__(self, spark: SparkSession, unit: str = "gold") -> None:
        self.spark, self.unit = spark, unit
        self.costs: dict[str, StepCost] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Time the block as step ``name``; its Spark jobs carry the description ``<unit> <name>`` (the Spark UI,
        and ``python -m bench.gold_profile``, group them by it)."""
        jobs0, began = spark_jobs(self.spark), time.perf_counter()
        context = _context(self.spark)
        described = context.getLocalProperty("spark.job.description") if context else None
        if context:
            context.setJobDescription(f"{self.unit} {name}")
        try:
            yield
        finally:
            if context:
                context.setJobDescription(described)
            jobs1 = spark_jobs(self.spark)
            jobs = None if jobs0 is None or jobs1 is None else jobs1 - jobs0
            self.costs.setdefault(name, StepCost(batches=1)).add(StepCost(time.perf_counter() - began, jobs, 0))

    def seconds(self, batch_id: int) -> dict:
        """One batch's seconds per step, as :attr:`~pipelines.gold.batch.GoldStats.batches` keeps them."""
        return {"batch": batch_id, **{name: round(cost.seconds, 3) for name, cost in self.costs.items()}}

    def summary(self) -> str:
        """``plan 2 jobs 0.41 s, decide ...`` in step order."""
        parts = []
        for name in sorted(self.costs, key=lambda n: STEPS.index(n) if n in STEPS else len(STEPS)):
            c = self.costs[name]
            jobs = "" if c.jobs is None else f"{c.jobs} jobs "
            parts.append(f"{name} {jobs}{c.seconds:.2f} s")
        return ", ".join(parts)
