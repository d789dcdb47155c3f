"""A continuous run rebuilds one mirror when another command asks it (:mod:`pipelines.run_requests`).

``lakecdc rebuild --table T`` cannot take the lease of a warehouse a continuous pipeline holds, so it asks
that run. Between gold's batches, holding the gold stream's lock (so no batch runs meanwhile), the run:

1. re-decodes from bronze every change of T's source table and appends them to silver
   (:func:`pipelines.quarantine.rebuild_mirror`), then drops T's mirror, side tables and gold-state rows;
2. makes its gold stream read state and mirrors again (:meth:`pipelines.gold.stream.GoldStream.reread`);
3. answers "queued", with the silver version it appended.

Gold's own stream then applies those changes in its next batches, bounded like any others, beside every other
mirror's: the other mirrors stay current while T fills. When a finished batch has read past the appended
version and none of T's changes waits within its freshness budget, the run answers "applied".
A copy of a change gold had applied before the drop is stale by its sequence (keyless: applied once by its id),
so the changes silver held for T already and their copies from bronze give the mirror once.
"""

from __future__ import annotations

import ast
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.config import PipelineConfig
from pipelines.gold.stream import GoldStream
from pipelines.quarantine import appended_commit, rebuild_mirror
from pipelines.run_requests import RequestBox
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)


@dataclass
class Rebuilding:
    """A rebuild queued and answered "queued": what it waits for before it is answered "applied"."""

    request: dict[str, Any]
    answer: dict[str, Any]
    state_key: str
    version: int | None  # the silver version it appended (None: nothing: applied at once)
    files: int


def read_through(query: StreamingQuery | None) -> tuple[int, int] | None:
    """(version, index) of silver the gold query's last finished batch read through (Delta's source offset:
    index -1 is before the version's first file), None before its first batch."""
    progress = query.lastProgress if query is not None else None
    if not progress or not progress.get("sources"):
        return None
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        try:
            end = json.loads(end)
        except ValueError:
            end = ast.literal_eval(end)  # PySpark may hand it back as a dict's repr
    if not isinstance(end, dict) or "reservoirVersion" not in end:
        return None
    return int(end["reservoirVersion"]), int(end.get("index", -1))


def has_read(through: tuple[int, int] | None, version: int, files: int) -> bool:
    """Whether a batch that read through ``through`` has read every file of ``version``."""
    if through is None:
        return False
    at, index = through
    return at > version or (at == version and index >= files - 1)


class RebuildServer:
    """The rebuilds a continuous run does for other commands: :meth:`serve` between batches, :meth:`close`
    as the run stops."""

    def __init__(self, spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, stream: GoldStream, box: RequestBox):
        self.spark, self.cfg, self.wh, self.stream, self.box = spark, cfg, wh, stream, box
        self.rebuilding: list[Rebuilding] = []
        box.open()

    @classmethod
    def of(cls, spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, stream: GoldStream) -> RebuildServer | None:
        """A server for the run's warehouse; None when its checkpoints are not local (no lease, no requests)."""
        box = RequestBox.of(wh.checkpoint_root)
        return None if box is None else cls(spark, cfg, wh, stream, box)

    def serve(self, gold: StreamingQuery | None, progress: Callable[[str], None]) -> None:
        """Answer what was applied since the last call, then do what was asked (when no batch runs)."""
        self._answer_applied(read_through(gold))
        asked = self.box.waiting()
        if not asked or not self.stream.lock.acquire(blocking=False):
            return
        try:
            for request in asked:
                self._rebuild(request, progress)
        finally:
            self.stream.lock.release()
        self._answer_applied(read_through(gold))

    def close(self, gold: StreamingQuery | None) -> None:
        """The run stops: answer every rebuild still open (what gold had read merges as the run stops; what it
        had not waits in silver for the next run) and stop serving."""
        through = read_through(gold)
        for r in self.rebuilding:
            done = r.version is None or has_read(through, r.version, r.files)
            note = None if done else "the run stopped first: the next run applies the rest of its changes from silver"
            self.box.answer(r.request, {**r.answer, "applied": done, "note": note})
        self.rebuilding = []
        self.box.close()

    def _rebuild(self, request: dict[str, Any], progress: Callable[[str], None]) -> None:
        name, run = str(request.get("table")), f"rebuild-{uuid.uuid4().hex[:12]}"
        progress(f"gold: rebuilding {name} from bronze between batches (asked by pid {request.get('pid')})")
        try:
            plan, dropped = rebuild_mirror(self.spark, self.cfg, self.wh, name, run)
            appended = appended_commit(self.spark, self.wh, run) if plan.change_count else None
        except (KeyError, ValueError) as exc:
            self.box.answer(request, {"ok": False, "error": str(exc.args[0] if exc.args else exc)})
            return
        except Exception as exc:  # noqa: BLE001 - a rebuild never stops the run: the requester is told
            log.exception("the rebuild of %s asked by %s failed", name, request["id"])
            self.box.answer(request, {"ok": False, "error": f"the rebuild failed ({type(exc).__name__}: {exc})"})
            return
        finally:
            self.stream.reread()  # whatever was dropped: the next batch reads state and mirrors again
        answer = {"ok": True, "run": run, **plan.to_json(), "dropped": dropped, "applied": False}
        version, files = appended if appended else (None, 0)
        answer["silver_version"] = version
        progress(f"gold: {name} dropped; its {plan.change_count} changes from bronze queued (silver version {version})")
        self.box.answer(request, answer)
        self.rebuilding.append(Rebuilding(request, answer, str(plan.state_key), version, files))

    def _answer_applied(self, through: tuple[int, int] | None) -> None:
        still = []
        for r in self.rebuilding:
            read = r.version is None or has_read(through, r.version, r.files)
            waiting = self.stream.pending is None or r.state_key in self.stream.pending
            if read and not waiting:
                self.box.answer(r.request, {**r.answer, "applied": True})
            else:
                still.append(r)
        self.rebuilding = still
