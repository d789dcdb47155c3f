"""What gold keeps from one batch of a stream to the next (:class:`GoldStream`): the mirrors' metadata, the changes
waiting per mirror and the batch they are applied through, the new tables whose changes wait, and the threads that
write mirrors side by side. The state tables (:mod:`pipelines.gold.state`) hold the same durably; a stream reads
them once (:meth:`GoldStream.load`) and keeps its copy current as its batches write them.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.gold.parallel import Workers
from pipelines.gold.plan import MirrorCache
from pipelines.gold.state import LATER, GoldState, Pending

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class StateBases:
    """Where a stream's batches start in the state tables' numbering: batch ``b`` of the stream is state batch
    ``base + b``, ``base`` that of the newest entry (first batch, base) at or below ``b`` (0 without one), kept in
    a file of the stream's checkpoint. A warehouse run as one query has a second writer of gold's state: a
    day-two command applies what it appended to silver through a gold stream of its own (pipelines.one_query).
    Each numbers its batches above the other's: a batch reads key state of the batches below its own, so one
    numbered below the other's would take those later rows for none, or its own for history."""

    path: str

    @classmethod
    def of(cls, checkpoint: str) -> StateBases:
        return cls(f"{checkpoint}/lakecdc_state_bases.json")

    def entries(self) -> list[tuple[int, int]]:
        file = Path(self.path)
        return [(int(b), int(base)) for b, base in json.loads(file.read_text())] if file.is_file() else []

    def base_for(self, batch_id: int) -> int:
        return max(((b, base) for b, base in self.entries() if b <= batch_id), default=(0, 0))[1]

    def start_above(self, batch_id: int, newest: int) -> None:
        """From ``batch_id`` on, number the stream's batches above state batch ``newest`` (where they are not).
        The first call records its base whatever it is: a retry of the stream's first batch finds it."""
        entries, base = self.entries(), self.base_for(batch_id)
        if entries and base + batch_id > newest:
            return
        base = max(base, newest + 1 - batch_id)
        entries = [e for e in entries if e[0] < batch_id] + [(batch_id, base)]
        file = Path(self.path)
        file.parent.mkdir(parents=True, exist_ok=True)
        written = file.with_suffix(".tmp")
        written.write_text(json.dumps(entries))
        os.replace(written, file)  # whole or not at all: a crash leaves the entries before


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
    app_id: str | None = None  # the commit markers' id of the query whose batches this stream applies
    bases: StateBases | None = None  # where its batches start in the state tables' numbering (None: base)

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
