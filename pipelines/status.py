"""``lakecdc status``: how far behind each source is, how fresh it is, and what each mirror holds.

Per source:

* **queue lag**, what bronze has not read yet. Kafka: each partition's end offset against the next offset
  bronze would read (``max(offset) + 1`` of that partition in bronze, which the Delta sink commits exactly
  once; a partition bronze never read counts from its beginning offset). Landing files: files in the
  directory that bronze holds no line of (non-empty files only: an empty file lands nothing).
* ``lag_seconds``: the age of the oldest message (its Kafka timestamp) or file (its modification time)
  bronze has not read; 0 when caught up.
* the last change and heartbeat (silver, source commit time), and ``staleness_seconds``: how long ago the
  newer of the two was. Heartbeats keep a quiet source fresh.

End offsets come from the Kafka consumer that Spark's Kafka source ships (``kafka-clients`` on the driver,
through the py4j gateway): metadata only, no record is read except the first unread one per partition (its
timestamp), and it takes the source's own ``kafka.*`` settings, so what authenticates bronze authenticates
status. Spark Connect has no gateway: there the lag of a Kafka source is reported as unknown.

Per mirror: rows (a ``deletes: soft`` mirror's also: how many are marked deleted), its sources (the
``_source`` of its rows and of the changes waiting for it), the newest change applied (``_seq``,
``_queue_pos``, ``_event_time`` of the newest row or tombstone by source commit time), tombstones,
quarantined changes of its source table (silver and gold), what waits for its next merge and why (gold's
``pending`` table against the mirror's freshness budget, :mod:`pipelines.gold.due`), its staleness, and the
newest result of each data-quality check on it (``dq_results``).

Staleness is judged against one setting, each source's ``freshness`` (default 1 hour), which the
``cdc_freshness`` check of ``lakecdc dq check`` and of a run reads too; a mirror is judged on its own
sources only: complete up to the oldest of its sources' newest change or heartbeat, or, while changes wait
for it, up to the oldest of those.

Every figure comes from a few Spark jobs for the whole warehouse, not a few per mirror: one aggregation
each of key state, pending changes, progress, ``dq_results``, quarantine and bronze's queue positions, and
each mirror's properties from its Delta log. A mirror's rows are read only where gold's state does not hold
its figures (no key, ``deletes: soft``, changes waiting, :mod:`pipelines.status_mirrors` says which): one
scan of those mirrors' lineage columns together (a ``UNION ALL``). docs/operations.md says how long it
takes over 200 mirrors.

Longer than 420 lines because it is two reports (sources, mirrors), each gathered and rendered.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.bronze import kafka_options
from pipelines.config import PipelineConfig, Source, StatusThresholds, freshness_seconds
from pipelines.consistent import status_lines, status_points
from pipelines.export import mirror_refs
from pipelines.kafka_offsets import KafkaProbe
from pipelines.quarantine import unresolved_quarantine
from pipelines.silver import last_seen
from pipelines.status_mirrors import (
    MirrorStatus,
    age,
    counted,
    iso,
    key_facts,
    last_dq,
    lineages,
    mirror_metadata,
    mirror_status,
    origins,
)
from pipelines.warehouse import Warehouse, state_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class SourceStatus:
    name: str
    format: str
    kind: str  # kafka | landing
    pending: int | None = None  # Kafka: messages; landing: files; None: unknown
    pending_bytes: int | None = None  # landing files only
    lag_seconds: float | None = None  # age of the oldest unread message or file; 0 when caught up
    partitions: list[dict[str, Any]] = field(default_factory=list)  # Kafka: topic, partition, end, next, lag
    last_event_time: str | None = None  # newest change (source commit time, UTC)
    last_heartbeat_time: str | None = None
    last_ingest_time: str | None = None  # newest change or heartbeat landed
    staleness_seconds: float | None = None
    freshness_seconds: float | None = None  # its ``freshness`` (or --max-staleness-seconds): stale beyond it
    quarantined: int = 0
    error: str | None = None


@dataclass
class Status:
    checked_at: str
    conf: str
    thresholds: StatusThresholds
    sources: list[SourceStatus]
    mirrors: list[MirrorStatus]
    breaches: list[str] = field(default_factory=list)
    consistent: list[dict] = field(default_factory=list)  # pipelines.consistent.status_points
    scanned: list[str] = field(default_factory=list)  # the mirrors whose rows were read (not in --json)

    @property
    def ok(self) -> bool:
        return not self.breaches

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document: every key always present, lists sorted by name."""
        return {
            "checked_at": self.checked_at,
            "conf": self.conf,
            "ok": self.ok,
            "breaches": self.breaches,
            "thresholds": {
                **asdict(self.thresholds),
                "freshness_seconds": {s.name: s.freshness_seconds for s in self.sources},
            },
            "sources": [asdict(s) for s in self.sources],
            "mirrors": [asdict(m) for m in self.mirrors],
            "consistent_points": self.consistent,
        }


def collect_status(
    spark: SparkSession, cfg: PipelineConfig, thresholds: StatusThresholds | None = None, now: float | None = None
) -> Status:
    """Read the warehouse (and the queues) once; ``breaches`` lists every threshold exceeded."""
    now = time.time() if now is None else now
    wh = Warehouse.from_config(cfg)
    thresholds = thresholds or cfg.status
    bronze = wh.bronze.read(spark) if wh.bronze.exists(spark) else None
    seen = last_seen(spark, wh)
    quarantine = _quarantine_counts(spark, wh)
    sources = []
    for source in sorted(cfg.sources, key=lambda s: s.name):
        status = SourceStatus(source.name, source.format, "kafka" if source.kafka else "landing")
        try:
            (_kafka_lag if source.kafka else _landing_lag)(spark, source, bronze, status, now)
        except Exception as exc:  # noqa: BLE001 - one source's queue unreachable: say so, report the rest
            status.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        change, heartbeat, ingest = seen.get(source.name, (None, None, None))
        status.last_event_time, status.last_heartbeat_time, status.last_ingest_time = map(
            iso, (change, heartbeat, ingest)
        )
        newest = _newest_seen(seen, source.name)
        status.staleness_seconds = None if newest is None else round(max(0.0, now - newest), 3)
        status.freshness_seconds = _freshness(cfg, source.name, thresholds)
        status.quarantined = sum(n for (stage, src, _db, _t), n in quarantine.items() if src == source.name)
        sources.append(status)
    refs = mirror_refs(spark, wh)
    meta = mirror_metadata(spark, refs)
    kept = {state_key(refs[n]): c for n, (props, cols) in meta.items() if (c := counted(props, cols)) is not None}
    keys = key_facts(spark, wh, kept, origins(spark, wh) if kept else None)
    lineage = {n: f.lineage for n, ref in refs.items() if (f := keys.get(state_key(ref))) and f.lineage}
    scanned = {n: ref for n, ref in refs.items() if n not in lineage}
    lineage.update(lineages(spark, scanned))
    dq = last_dq(spark, wh)
    mirrors = []
    for name, ref in sorted(refs.items()):
        m, since = mirror_status(
            spark, cfg, wh, name, ref, meta[name], lineage.get(name), quarantine, keys, dq.get(name), now
        )
        _judge(m, cfg, seen, thresholds, now, since)
        mirrors.append(m)
    status = Status(iso(now), cfg.origin, thresholds, sources, mirrors, scanned=sorted(scanned))
    status.breaches = breaches(status, thresholds)
    status.consistent = status_points(spark, wh)
    return status


def _newest_seen(seen: Mapping[str, tuple], source: str) -> float | None:
    """A source's newest change or heartbeat (source commit time, epoch seconds)."""
    change, heartbeat, _ingest = seen.get(source, (None, None, None))
    return max((t for t in (change, heartbeat) if t is not None), default=None)


def _freshness(cfg: PipelineConfig, source: str, thresholds: StatusThresholds) -> float:
    """The staleness a source may have: ``--max-staleness-seconds`` for this call, else its ``freshness``
    (the setting ``cdc_freshness`` reads; a source not configured, such as a replay's, has the default)."""
    if thresholds.max_staleness_seconds is not None:
        return float(thresholds.max_staleness_seconds)
    configured = next((s for s in cfg.sources if s.name == source), None)
    return freshness_seconds(configured.freshness if configured else None)


def _judge(
    m: MirrorStatus, cfg: PipelineConfig, seen: Mapping, t: StatusThresholds, now: float, since: float | None
) -> None:
    """A mirror's staleness from its own sources: complete up to the oldest of their newest change or
    heartbeat, or to its oldest waiting change (``since``, source commit time) where one waits."""
    if not m.sources:
        return
    points = [_newest_seen(seen, s) for s in m.sources]
    complete = None if any(p is None for p in points) else min(points)
    if complete is not None and since is not None:
        complete = min(complete, since)
    m.freshness_seconds = min(_freshness(cfg, s, t) for s in m.sources)
    if complete is not None:
        m.complete_to = iso(complete)
        m.staleness_seconds = round(max(0.0, now - complete), 3)
        m.stale = m.staleness_seconds > m.freshness_seconds


def breaches(status: Status, thresholds: StatusThresholds) -> list[str]:
    """What exceeds a threshold. A lag that cannot be measured, and a source never seen, count as breaches
    of the threshold that needs them (an alert that stays silent when it cannot look is no alert). A source
    staler than its ``freshness`` names the mirrors it feeds."""
    out = []
    for s in status.sources:
        if thresholds.max_lag_seconds is not None:
            if s.lag_seconds is None:
                out.append(f"{s.name}: lag unknown ({s.error or 'not measurable'})")
            elif s.lag_seconds > thresholds.max_lag_seconds:
                out.append(
                    f"{s.name}: lag {age(s.lag_seconds)} > max_lag_seconds {thresholds.max_lag_seconds:g} "
                    f"({s.pending} {'messages' if s.kind == 'kafka' else 'files'} unread)"
                )
        override = thresholds.max_staleness_seconds
        limit = override if override is not None else s.freshness_seconds
        if limit is not None:
            if s.staleness_seconds is None:
                out.append(f"{s.name}: no change or heartbeat seen yet")
            elif s.staleness_seconds > limit:
                fed = [m.name for m in status.mirrors if s.name in m.sources]
                named = f"; its mirrors {_names(fed)}" if fed else ""
                what = f"max_staleness_seconds {limit:g}" if override is not None else f"its freshness {age(limit)}"
                out.append(f"{s.name}: last change or heartbeat {age(s.staleness_seconds)} ago > {what}{named}")
    for m in status.mirrors:
        if m.oldest_pending_seconds is not None and m.max_delay_seconds is not None:
            if m.oldest_pending_seconds > m.max_delay_seconds:
                out.append(
                    f"{m.name}: {m.pending} changes waiting, the oldest {age(m.oldest_pending_seconds)} > its "
                    f"max_delay {m.max_delay_seconds:g} s (is the gold stream running?)"
                )
    return out


def _names(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


# ---------------------------------------------------------------- sources


def _landing_lag(spark: SparkSession, source: Source, bronze: DataFrame | None, out: SourceStatus, now: float) -> None:
    """Files in the landing directory (as Spark's file source names them) that bronze holds no line of."""
    from pyspark.sql import functions as F

    files = (
        spark.read.format("binaryFile")  # only path, length and time are read: content is pruned
        .option("recursiveFileLookup", "true")
        .load(source.path)
        .where("length > 0")
        .select(F.col("path").alias("file"), "length", F.unix_micros("modificationTime").alias("mtime"))
    )
    if bronze is not None:
        landed = bronze.where(F.col("source") == source.name).select("file").distinct()
        files = files.join(landed, "file", "left_anti")
    row = files.agg(
        F.count(F.lit(1)).alias("n"), F.sum("length").alias("bytes"), F.min("mtime").alias("oldest")
    ).first()
    out.pending, out.pending_bytes = int(row["n"]), int(row["bytes"] or 0)
    out.lag_seconds = 0.0 if row["oldest"] is None else round(max(0.0, now - row["oldest"] / 1e6), 3)


def _kafka_lag(spark: SparkSession, source: Source, bronze: DataFrame | None, out: SourceStatus, now: float) -> None:
    from pyspark.sql import functions as F

    nxt: dict[tuple[str, int], int] = {}
    if bronze is not None:
        rows = (
            bronze.where((F.col("source") == source.name) & F.col("topic").isNotNull())
            .groupBy("topic", "partition")
            .agg((F.max("offset") + 1).alias("next"))
            .collect()
        )
        nxt = {(r["topic"], r["partition"]): r["next"] for r in rows}
    with KafkaProbe(spark, kafka_options(source.kafka)) as probe:
        parts = probe.partitions(source.kafka.topics, source.kafka.topic_pattern)
        ends, begins = probe.offsets(parts, "end"), probe.offsets(parts, "beginning")
        position = {tp: max(nxt.get(tp, begins[tp]), begins[tp]) for tp in parts}  # aged-out offsets are gone
        lagging = {tp: position[tp] for tp in parts if ends[tp] > position[tp]}
        first, markers = probe.first_timestamps(lagging, ends) if lagging else ({}, set())
    for tp in markers:  # only transaction markers after what bronze read: nothing to read
        position[tp] = ends[tp]
        del lagging[tp]
    out.partitions = [
        {"topic": t, "partition": p, "end_offset": ends[(t, p)], "next_offset": position[(t, p)],
         "lag": max(0, ends[(t, p)] - position[(t, p)])}
        for t, p in sorted(parts)
    ]  # fmt: skip
    out.pending = sum(p["lag"] for p in out.partitions)
    oldest = min(first.values(), default=None)
    out.lag_seconds = 0.0 if not lagging else None if oldest is None else round(max(0.0, now - oldest / 1e3), 3)


def _quarantine_counts(spark: SparkSession, wh: Warehouse) -> dict[tuple[str, str, str | None, str | None], int]:
    groups = unresolved_quarantine(spark, wh)  # what a replay resolved is not counted
    if groups is None:
        return {}
    rows = groups.groupBy("stage", "source", "db", "table").agg({"count": "sum"}).collect()
    return {(r["stage"], r["source"], r["db"], r["table"]): int(r["sum(count)"]) for r in rows}


# ---------------------------------------------------------------- mirrors


# ---------------------------------------------------------------- output


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *rows]]


def render(status: Status) -> str:
    """The human view: one table of sources, one of mirrors, then the verdict."""

    def pending(s: SourceStatus) -> str:
        if s.pending is None:
            return "?"
        return f"{s.pending} msgs" if s.kind == "kafka" else f"{s.pending} files"

    lines = [f"lakecdc status at {status.checked_at} ({status.conf})", ""]
    lines += _table(
        ("source", "format", "queue", "unread", "lag", "last change", "last heartbeat", "stale", "quarantined"),
        [
            (s.name, s.format, s.kind, pending(s), age(s.lag_seconds), s.last_event_time or "-",
             s.last_heartbeat_time or "-", age(s.staleness_seconds), str(s.quarantined))
            for s in status.sources
        ],
    )  # fmt: skip
    lines += [f"  {s.name}: {s.error}" for s in status.sources if s.error]
    lines.append("")
    lines += _table(
        ("mirror", "rows", "tombstones", "last seq", "last change", "sources", "stale", "waiting",
         "quarantined silver/gold", "last DQ"),
        [
            (m.name, f"{m.rows}" + ("" if m.soft_deleted is None else f" ({m.soft_deleted} soft-deleted)"),
             "-" if m.tombstones is None else str(m.tombstones), m.last_seq or "-",
             m.last_event_time or "-", ",".join(m.sources) or "-", _stale_text(m), _waiting_text(m),
             f"{m.quarantined_silver}/{m.quarantined_gold}", _dq_text(m.dq))
            for m in status.mirrors
        ],
    )  # fmt: skip
    lines += [f"  {m.name}: waiting {m.waiting_reason}" for m in status.mirrors if m.waiting_reason]
    lines += ["", *status_lines(status.consistent)] if status.consistent else []
    t = status.thresholds
    named = [("max_lag_seconds", t.max_lag_seconds), ("max_staleness_seconds", t.max_staleness_seconds)]
    limits = ", ".join(f"{n} {v:g}" for n, v in named if v)
    if t.max_staleness_seconds is None and status.sources:
        ages = sorted({age(s.freshness_seconds) for s in status.sources if s.freshness_seconds is not None})
        if ages:
            limits = ", ".join(x for x in (limits, f"freshness {'/'.join(ages)}") if x)
    lines.append("")
    if not limits:
        lines.append(
            "thresholds: none set (status: in the configuration, or --max-lag-seconds/--max-staleness-seconds)"
        )
    elif status.ok:
        lines.append(f"OK: within {limits}")
    else:
        lines += [f"BREACHED ({limits}):"] + [f"  {b}" for b in status.breaches]
    return "\n".join(lines)


def _stale_text(m: MirrorStatus) -> str:
    """``12m03s`` within its freshness, ``1h05m > 1h00m`` beyond it, ``-`` unknown."""
    if m.staleness_seconds is None:
        return "-"
    if m.stale:
        return f"{age(m.staleness_seconds)} > {age(m.freshness_seconds)}"
    return age(m.staleness_seconds)


def _waiting_text(m: MirrorStatus) -> str:
    if not m.pending:
        return "-"
    return f"{m.pending} (oldest {age(m.oldest_pending_seconds)} of {age(m.max_delay_seconds)})"


def _dq_text(dq: dict[str, Any] | None) -> str:
    if not dq:
        return "-"
    verdict = "passed" if not dq["failed"] else f"{dq['failed']} failed ({', '.join(dq['failing'][:3])})"
    return f"{dq['checks'] - dq['failed']}/{dq['checks']} {verdict} at {dq['checked_at']}"
