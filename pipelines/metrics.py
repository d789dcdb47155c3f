"""Metrics in the Prometheus text format (``prometheus_client``), for schedulers and on-call dashboards.

Two kinds, each from what lakecdc already keeps:

* **per mirror and per source**, from the warehouse as ``lakecdc status`` reads it (:func:`status_metrics`):
  rows, changes waiting for the next merge, staleness and the freshness it is judged by, quarantined changes
  (silver and gold), tombstones; per source the queue lag and staleness. ``lakecdc metrics`` prints them
  once, ``lakecdc metrics --serve`` serves them on 127.0.0.1 (read afresh at each scrape);
* **per batch of a running pipeline**, from gold's stats of each batch (:class:`RunMetrics`): per mirror the
  changes in, applied, stale, quarantined and outside a ``where`` (:attr:`~pipelines.gold.batch.GoldStats.mirrors`,
  which add up to the batch's counts: ``sum without (mirror)`` gives the run's) and the batches that wrote it;
  per mirror the batch planned, its changes waiting and when the oldest of them arrived (from gold's own
  ``pending``, :attr:`~pipelines.gold.batch.GoldStats.pending`) and per mirror written the newest source commit
  time applied (how far behind its source's changes it is); per batch the changes waiting, seconds and Spark
  jobs per step. The runner writes them to ``metrics_file``
  after every batch, atomically (a temporary file renamed over it: ``write_to_textfile``), where a
  node-exporter textfile collector reads them. ``status --json`` reads the warehouse, not these counters.

:func:`metrics_server` serves a registry read afresh at each scrape on 127.0.0.1 (``lakecdc metrics --serve``).
Names follow Prometheus' conventions: ``lakecdc_`` prefix, base units (seconds), ``_total`` for counters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, write_to_textfile

from pipelines.gold.batch import GoldStats

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

    from pipelines.status import Status

#: The counters of a run per mirror, each from the MirrorCounts field of the same name (GoldStats.mirrors).
RUN_COUNTERS = (
    (
        "changes",
        "lakecdc_changes_total",
        "Changes of the mirror gold read (each applied, stale, quarantined or filtered)",
    ),
    ("applied", "lakecdc_changes_applied_total", "Changes gold applied to the mirror"),
    ("stale", "lakecdc_changes_stale_total", "Changes older than the mirror's row, skipped"),
    ("quarantined", "lakecdc_changes_quarantined_total", "Changes of the mirror gold quarantined"),
    ("skipped", "lakecdc_changes_filtered_total", "Changes outside the mirror's where"),
)


#: The changes waiting per mirror, in both a status reading and a running pipeline's metrics.
WAITING_GAUGE = "lakecdc_mirror_changes_waiting"


def status_metrics(status: Status, registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """The per-mirror and per-source gauges of one ``lakecdc status`` reading."""
    registry = registry or CollectorRegistry()
    g = {
        name: Gauge(name, doc, labels, registry=registry)
        for name, doc, labels in (
            ("lakecdc_mirror_rows", "Rows the mirror holds", ["mirror"]),
            ("lakecdc_mirror_tombstones", "Deleted keys the mirror remembers", ["mirror"]),
            (WAITING_GAUGE, "Changes waiting for the mirror's next merge", ["mirror"]),
            ("lakecdc_mirror_oldest_waiting_seconds", "How long the oldest waiting change has waited", ["mirror"]),
            ("lakecdc_mirror_staleness_seconds", "Now minus the point the mirror is known complete to", ["mirror"]),
            ("lakecdc_mirror_freshness_seconds", "The staleness the mirror may have (its sources' freshness)",
             ["mirror"]),
            ("lakecdc_mirror_stale", "1 when the mirror's staleness is over its freshness", ["mirror"]),
            ("lakecdc_mirror_changes_quarantined", "Unresolved quarantined changes of the mirror's table",
             ["mirror", "stage"]),
            ("lakecdc_source_lag_seconds", "Age of the oldest message or file bronze has not read", ["source"]),
            ("lakecdc_source_unread", "Messages (Kafka) or files (landing) bronze has not read", ["source"]),
            ("lakecdc_source_staleness_seconds", "Now minus the source's newest change or heartbeat", ["source"]),
            ("lakecdc_source_changes_quarantined", "Unresolved quarantined changes of the source", ["source"]),
        )
    }  # fmt: skip
    Gauge("lakecdc_status_ok", "1 when no status threshold is breached", registry=registry).set(int(status.ok))
    for m in status.mirrors:
        g["lakecdc_mirror_rows"].labels(m.name).set(m.rows)
        if m.tombstones is not None:
            g["lakecdc_mirror_tombstones"].labels(m.name).set(m.tombstones)
        g["lakecdc_mirror_changes_waiting"].labels(m.name).set(m.pending)
        if m.oldest_pending_seconds is not None:
            g["lakecdc_mirror_oldest_waiting_seconds"].labels(m.name).set(m.oldest_pending_seconds)
        if m.staleness_seconds is not None:
            g["lakecdc_mirror_staleness_seconds"].labels(m.name).set(m.staleness_seconds)
            g["lakecdc_mirror_stale"].labels(m.name).set(int(m.stale))
        if m.freshness_seconds is not None:
            g["lakecdc_mirror_freshness_seconds"].labels(m.name).set(m.freshness_seconds)
        g["lakecdc_mirror_changes_quarantined"].labels(m.name, "silver").set(m.quarantined_silver)
        g["lakecdc_mirror_changes_quarantined"].labels(m.name, "gold").set(m.quarantined_gold)
    for s in status.sources:
        if s.lag_seconds is not None:
            g["lakecdc_source_lag_seconds"].labels(s.name).set(s.lag_seconds)
        if s.pending is not None:
            g["lakecdc_source_unread"].labels(s.name).set(s.pending)
        if s.staleness_seconds is not None:
            g["lakecdc_source_staleness_seconds"].labels(s.name).set(s.staleness_seconds)
        g["lakecdc_source_changes_quarantined"].labels(s.name).set(s.quarantined)
    return registry


def text(registry: CollectorRegistry) -> str:
    """The registry in the Prometheus text exposition format."""
    return generate_latest(registry).decode()


def metrics_server(read: Callable[[], CollectorRegistry], port: int = 9464) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1:``port`` (0: a free one, ``server.server_address[1]``), not serving yet
    (``serve_forever``; :func:`start_metrics_server`): ``GET /metrics`` (or ``/``) answers the text of a fresh
    ``read()``, one reading at a time (a scrape that comes while one runs waits for it); any other path is a
    404, a reading that fails a 500 for the scraper, not a crash."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from prometheus_client import CONTENT_TYPE_LATEST

    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.split("?")[0] not in ("/", "/metrics"):
                self.send_error(404)
                return
            try:
                with lock:
                    body = text(read()).encode()
            except Exception as exc:  # noqa: BLE001 - a failed reading is a 500 for the scraper, not a crash
                self.send_error(500, f"{type(exc).__name__}: {exc}"[:200])
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - http.server's signature
            pass

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def start_metrics_server(read: Callable[[], CollectorRegistry], port: int = 0) -> ThreadingHTTPServer:
    """:func:`metrics_server`, serving in a daemon thread; ``server.shutdown()`` and ``server_close()`` stop it."""
    server = metrics_server(read, port)
    threading.Thread(target=server.serve_forever, name="lakecdc-metrics", daemon=True).start()
    return server


class RunMetrics:
    """A running pipeline's counters, batch by batch (:meth:`batch` with each gold batch's stats), written to
    ``path`` after each batch when one is given (atomically: ``write_to_textfile`` renames a temporary file)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._through: dict[str, float] = {}  # per mirror: the newest source commit time applied so far
        self.counters = {
            attr: Counter(name.removesuffix("_total"), doc, ["mirror"], registry=self.registry)
            for attr, name, doc in RUN_COUNTERS
        }
        self.batches = Counter(
            "lakecdc_gold_batches", "Gold batches (and flushes between them)", registry=self.registry
        )
        self.step_seconds = Counter(
            "lakecdc_gold_step_seconds", "Wall seconds gold's batches spent per step", ["step"], registry=self.registry
        )
        self.step_jobs = Counter(
            "lakecdc_gold_step_spark_jobs", "Spark jobs gold's batches ran per step", ["step"], registry=self.registry
        )
        self.last_step = Gauge(
            "lakecdc_gold_last_batch_step_seconds", "Seconds of the last batch per step", ["step"],
            registry=self.registry,
        )  # fmt: skip
        self.waiting = Gauge(
            "lakecdc_changes_waiting", "Changes left waiting within their mirrors' budgets after the last batch",
            registry=self.registry,
        )  # fmt: skip
        self.mirror_waiting = Gauge(
            WAITING_GAUGE, "Changes waiting for the mirror's next merge (after the last batch that planned it)",
            ["mirror"], registry=self.registry,
        )  # fmt: skip
        self.mirror_oldest = Gauge(  # a time, not an age: a mirror no batch planned since keeps its figure
            "lakecdc_mirror_oldest_waiting_timestamp_seconds",
            "When the mirror's oldest waiting change arrived (epoch seconds; 0: none waits): time() - it is its wait",
            ["mirror"], registry=self.registry,
        )  # fmt: skip
        self.applied_through = Gauge(
            "lakecdc_mirror_applied_event_timestamp_seconds",
            "The newest source commit time (epoch seconds) among the changes the mirror's writes applied: "
            "time() - it is how far the mirror is behind its source's changes",
            ["mirror"], registry=self.registry,
        )  # fmt: skip
        self.written = Counter(
            "lakecdc_mirror_batches_written", "Gold batches that wrote the mirror", ["mirror"], registry=self.registry
        )
        self.last_written = Gauge(
            "lakecdc_mirror_last_written_timestamp_seconds", "When a batch last wrote the mirror (epoch seconds)",
            ["mirror"], registry=self.registry,
        )  # fmt: skip

    def batch(self, stats: GoldStats) -> None:
        """One gold batch's stats (a :class:`~pipelines.gold.batch.GoldStats` of that batch alone)."""
        import time

        with self._lock:
            for mirror, counts in stats.mirrors.items():
                for attr, counter in self.counters.items():
                    counter.labels(mirror).inc(max(0, int(getattr(counts, attr) or 0)))
            self.batches.inc()
            self.waiting.set(stats.waiting)
            for step, cost in stats.steps.items():
                self.step_seconds.labels(step).inc(max(0.0, cost.seconds))
                self.last_step.labels(step).set(cost.seconds)
                if cost.jobs is not None:
                    self.step_jobs.labels(step).inc(max(0, cost.jobs))
            now = time.time()
            for mirror, (waiting, oldest) in stats.pending.items():
                self.mirror_waiting.labels(mirror).set(waiting)
                self.mirror_oldest.labels(mirror).set(oldest or 0.0)
            for mirror, through in stats.applied_through.items():  # never back: a late change applies an older one
                self._through[mirror] = max(through, self._through.get(mirror, through))
                self.applied_through.labels(mirror).set(self._through[mirror])
            for mirror in stats.written.values():
                self.written.labels(mirror.name).inc()
                self.last_written.labels(mirror.name).set(now)
            if self.path:
                write_to_textfile(self.path, self.registry)

    def text(self) -> str:
        return text(self.registry)


class MeteredGoldStats(GoldStats):
    """The runner's GoldStats: each batch gold adds (:meth:`GoldStats.add`) is also counted in ``metrics``."""

    def __init__(self, metrics: RunMetrics) -> None:
        super().__init__()
        self.metrics = metrics

    def add(self, other: GoldStats) -> None:
        super().add(other)
        try:
            self.metrics.batch(other)
        except Exception:  # noqa: BLE001 - metrics are a courtesy: never fail a batch
            import logging

            logging.getLogger(__name__).warning("metrics: batch not recorded", exc_info=True)
