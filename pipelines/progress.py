"""Per-batch progress of the streaming stages, from Spark's own progress events.

A :class:`BatchProgressListener` (a ``StreamingQueryListener``) receives each micro-batch's progress of every
stage (``bronze_<source>``, ``silver_decode``, ``gold_apply``) and hands it to a :class:`ProgressReporter`:
one line per batch with its rows and rate, the batches and rows so far, and, for Kafka, the lag: messages
between the batch's end offsets and the latest ones. (Spark's file source and Delta's source, which silver and
gold read, report no latest offset, so their lines show no lag.)

The reporter prints only when stderr is a terminal (a scheduler's log stays quiet); elsewhere
each line is logged at INFO instead, so ``-v`` (or a log handler) still shows what happened.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("lakecdc.progress")


@dataclass
class _Totals:
    batches: int = 0
    rows: int = 0


@dataclass
class ProgressReporter:
    """Where progress lines go: ``emit`` (the CLI's stderr printer) when ``is_tty``, else the log (INFO)."""

    emit: Callable[[str], None]
    is_tty: bool
    totals: dict[str, _Totals] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, message: str) -> None:
        if self.is_tty:
            self.emit(message)
            log.debug("%s", message)  # shown once: on a terminal the log would repeat the line
        else:
            log.info("%s", message)

    def batch(self, progress: Mapping[str, Any]) -> None:
        """One micro-batch's progress (Spark's progress JSON as a dict)."""
        with self.lock:
            totals = self.totals.setdefault(progress.get("name") or "query", _Totals())
            totals.batches += 1
            totals.rows += int(progress.get("numInputRows") or 0)
            line = format_progress(progress, totals.batches, totals.rows)
        self(line)


def format_progress(progress: Mapping[str, Any], batches: int, rows: int) -> str:
    """``<query>: batch <id>: <n> rows (<r> rows/s); <batches> batches, <rows> rows so far[; lag ...]``."""
    name = progress.get("name") or "query"
    n = int(progress.get("numInputRows") or 0)
    rate = progress.get("processedRowsPerSecond")
    line = f"{name}: batch {progress.get('batchId')}: {n} rows"
    if rate:
        line += f" ({float(rate):,.0f} rows/s)"
    line += f"; {batches} {'batch' if batches == 1 else 'batches'}, {rows} rows so far"
    lag = source_lag(progress.get("sources") or [])
    return f"{line}; lag {lag}" if lag else line


def source_lag(sources: list[Mapping[str, Any]]) -> str | None:
    """Messages still waiting in Kafka after this batch: each partition's latest offset minus the batch's end
    offset. None when no source is Kafka (the file and Delta sources report no latest offset)."""
    behind, known = 0, False
    for source in sources:
        end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
        if end and latest and _is_kafka(latest):
            known = True
            behind += sum(
                max(0, int(off) - int(end.get(topic, {}).get(part, off)))
                for topic, parts in latest.items()
                for part, off in parts.items()
            )
    return f"{behind} messages" if known else None


def _offsets(value: Any) -> dict | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _is_kafka(offsets: Mapping[str, Any]) -> bool:
    """Kafka's offsets are ``{topic: {partition: offset}}``."""
    return all(isinstance(parts, dict) for parts in offsets.values()) and bool(offsets)


class BatchProgressListener(StreamingQueryListener):
    """Hands each micro-batch's progress to a reporter; keeps what it received (``seen``: query → batches).

    Spark delivers the events on its listener bus, after the fact: :meth:`drain` waits until every query
    that started has reported its end (its last progress comes before), so a stage's lines come before
    the next stage's."""

    def __init__(self, reporter: ProgressReporter) -> None:
        super().__init__()
        self.reporter = reporter
        self.seen: dict[str, int] = {}
        self._running: set[str] = set()
        self._changed = threading.Condition()

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
        with self._changed:
            self._running.add(str(event.id))

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        try:
            progress = json.loads(event.progress.json)
            name = progress.get("name") or "query"
            self.seen[name] = self.seen.get(name, 0) + 1
            self.reporter.batch(progress)
        except Exception:  # noqa: BLE001 - progress is a courtesy: never disturb the stream
            log.debug("progress event not shown", exc_info=True)

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        with self._changed:
            self._running.discard(str(event.id))
            self._changed.notify_all()

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait (at most ``timeout`` seconds) until every started query reported its end; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._running, timeout)


@contextmanager
def batch_progress(spark: SparkSession, reporter: ProgressReporter) -> Iterator[BatchProgressListener]:
    """Report every micro-batch of the streams started inside the block (and ended: the events of the
    block's queries are drained before the listener goes)."""
    listener = BatchProgressListener(reporter)
    spark.streams.addListener(listener)
    try:
        yield listener
        listener.drain()
    finally:
        spark.streams.removeListener(listener)
