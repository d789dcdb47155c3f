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

Per mirror: rows (a ``deletes: soft`` mirror's also: how many are marked deleted), the newest change applied
(``_seq``, ``_queue_pos``, ``_event_time`` of the newest row or tombstone by source commit time), tombstones,
quarantined changes of its source table (silver and gold), and the newest result of each data-quality check
on it (``dq_results``).

Longer than 420 lines because it is two reports (sources, mirrors), each gathered and rendered.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.bronze import kafka_options
from pipelines.config import PipelineConfig, Source, StatusThresholds
from pipelines.consistent import status_lines, status_points
from pipelines.export import mirror_refs
from pipelines.gold.identity import SOURCE_IDENTITY_PROPERTY
from pipelines.gold.plan import table_config
from pipelines.gold.state import KEY_STATE_PROPERTY, GoldState, Pending
from pipelines.kafka_offsets import KafkaProbe
from pipelines.mirror_columns import table_properties
from pipelines.quality.storage import dq_results_ref
from pipelines.quarantine import unresolved_quarantine
from pipelines.silver import last_seen
from pipelines.warehouse import TableRef, Warehouse, state_key

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
    quarantined: int = 0
    error: str | None = None


@dataclass
class MirrorStatus:
    name: str
    table: str
    rows: int
    tombstones: int | None
    last_seq: str | None
    last_queue_pos: str | None
    last_event_time: str | None
    quarantined_silver: int
    quarantined_gold: int
    dq: dict[str, Any] | None  # the last result of each check: checks, failed, failing, newest run_id, checked_at
    pending: int = 0  # changes waiting for the mirror's next merge (continuous runs)
    oldest_pending_seconds: float | None = None  # how long the oldest of them has waited
    max_delay_seconds: float | None = None  # the mirror's freshness budget
    soft_deleted: int | None = None  # rows marked deleted (``deletes: soft``; None: not a soft mirror)


@dataclass
class Status:
    checked_at: str
    conf: str
    thresholds: StatusThresholds
    sources: list[SourceStatus]
    mirrors: list[MirrorStatus]
    breaches: list[str] = field(default_factory=list)
    consistent: list[dict] = field(default_factory=list)  # pipelines.consistent.status_points

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
            "thresholds": asdict(self.thresholds),
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
            _iso, (change, heartbeat, ingest)
        )
        newest = max((t for t in (change, heartbeat) if t is not None), default=None)
        status.staleness_seconds = None if newest is None else round(max(0.0, now - newest), 3)
        status.quarantined = sum(n for (stage, src, _db, _t), n in quarantine.items() if src == source.name)
        sources.append(status)
    keys = _key_state(spark, wh)
    mirrors = [
        _mirror_status(spark, cfg, wh, name, ref, quarantine, keys, now)
        for name, ref in sorted(mirror_refs(spark, wh).items())
    ]
    status = Status(_iso(now), cfg.origin, thresholds, sources, mirrors)
    status.breaches = breaches(status, thresholds)
    status.consistent = status_points(spark, wh)
    return status


def breaches(status: Status, thresholds: StatusThresholds) -> list[str]:
    """What exceeds a threshold. A lag that cannot be measured, and a source never seen, count as breaches
    of the threshold that needs them (an alert that stays silent when it cannot look is no alert)."""
    out = []
    for s in status.sources:
        if thresholds.max_lag_seconds is not None:
            if s.lag_seconds is None:
                out.append(f"{s.name}: lag unknown ({s.error or 'not measurable'})")
            elif s.lag_seconds > thresholds.max_lag_seconds:
                out.append(
                    f"{s.name}: lag {_age(s.lag_seconds)} > max_lag_seconds {thresholds.max_lag_seconds:g} "
                    f"({s.pending} {'messages' if s.kind == 'kafka' else 'files'} unread)"
                )
        if thresholds.max_staleness_seconds is not None:
            if s.staleness_seconds is None:
                out.append(f"{s.name}: no change or heartbeat seen yet")
            elif s.staleness_seconds > thresholds.max_staleness_seconds:
                out.append(
                    f"{s.name}: last change or heartbeat {_age(s.staleness_seconds)} ago > max_staleness_seconds "
                    f"{thresholds.max_staleness_seconds:g}"
                )
    for m in status.mirrors:
        if m.oldest_pending_seconds is not None and m.max_delay_seconds is not None:
            if m.oldest_pending_seconds > m.max_delay_seconds:
                out.append(
                    f"{m.name}: {m.pending} changes waiting, the oldest {_age(m.oldest_pending_seconds)} > its "
                    f"max_delay {m.max_delay_seconds:g} s (is the gold stream running?)"
                )
    return out


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


@dataclass
class _KeyFacts:
    """What gold's shared state says of one mirror."""

    tombstones: int = 0
    last_deleted: tuple[str | None, str | None, float | None] | None = None  # seq, queue_pos, event time
    pending: Pending | None = None


def _key_state(spark: SparkSession, wh: Warehouse) -> dict[str, _KeyFacts]:
    """Per mirror (state key): its deleted keys and the changes waiting for it (:mod:`pipelines.gold.state`)."""
    state = GoldState(wh)
    if not state.keys.exists(spark):
        return {}
    facts = {m: _KeyFacts(n, last) for m, (n, last) in state.deleted_keys(spark).items()}
    for mirror, pending in state.pending_now(spark, state.progress_now(spark)).items():
        facts.setdefault(mirror, _KeyFacts()).pending = pending
    return facts


def _mirror_status(
    spark: SparkSession,
    cfg: PipelineConfig,
    wh: Warehouse,
    name: str,
    ref: TableRef,
    quarantine: Mapping[tuple, int],
    keys: Mapping[str, _KeyFacts],
    now: float,
) -> MirrorStatus:

    mirror = ref.read(spark)
    rows = mirror.count()
    props = table_properties(spark, ref)
    facts = keys.get(state_key(ref))
    if facts is not None or KEY_STATE_PROPERTY in props:
        tombstones, deleted = (facts.tombstones, facts.last_deleted) if facts else (0, None)
    else:  # a mirror written before key state, not adopted yet: its tombstones table
        tomb_ref = wh.side_of(ref, "tombstones")
        tombs = tomb_ref.read(spark) if tomb_ref.exists(spark) else None
        tombstones, deleted = (None, None) if tombs is None else (tombs.count(), _newest_lineage(tombs))
    newest = max(
        (x for x in (_newest_lineage(mirror), deleted) if x), key=lambda x: (x[2] or 0, x[1] or ""), default=None
    )
    identity = props.get(SOURCE_IDENTITY_PROPERTY)
    db, _schema, table = json.loads(identity) if identity else (None, None, None)
    held = {stage: 0 for stage in ("silver", "gold")}
    for (stage, _src, q_db, q_table), n in quarantine.items():
        if identity and q_table == table and q_db == db and stage in held:
            held[stage] += n
    tc = table_config(cfg, props.get("lakecdc.source_table", name))
    pending = facts.pending if facts and facts.pending else None
    return MirrorStatus(
        name=name,
        table=ref.path or ref.name or "",
        rows=rows,
        tombstones=tombstones,
        last_seq=newest[0] if newest else None,
        last_queue_pos=newest[1] if newest else None,
        last_event_time=_iso(newest[2]) if newest else None,
        quarantined_silver=held["silver"],
        quarantined_gold=held["gold"],
        dq=_last_dq(spark, wh, name),
        pending=pending.changes if pending else 0,
        oldest_pending_seconds=round(max(0.0, now - pending.oldest), 3) if pending and pending.oldest else None,
        max_delay_seconds=tc.max_delay if tc and tc.max_delay else cfg.gold_max_delay,
        soft_deleted=mirror.where("_deleted").count() if "_deleted" in mirror.columns else None,
    )


def _newest_lineage(table: DataFrame) -> tuple[str | None, str | None, float | None] | None:
    """(``_seq``, ``_queue_pos``, ``_event_time`` in epoch seconds) of a table's newest row by source commit time."""
    from pyspark.sql import functions as F

    last = (
        table.orderBy(F.col("_event_time").desc_nulls_last(), F.col("_queue_pos").desc_nulls_last())
        .select("_seq", "_queue_pos", (F.unix_micros("_event_time") / 1e6).alias("t"))
        .first()
    )
    return (last["_seq"], last["_queue_pos"], last["t"]) if last else None


def _last_dq(spark: SparkSession, wh: Warehouse, name: str) -> dict[str, Any] | None:
    """The newest result of each check on the mirror (per-batch expectations and run-end checks write
    under different run ids: the newest run alone may pass while an older check still fails)."""
    from pyspark.sql import functions as F

    ref = dq_results_ref(wh)
    if not ref.exists(spark):
        return None
    newest_first = F.expr("row_number() OVER (PARTITION BY expectation ORDER BY checked_at DESC, batch_id DESC)")
    last = (
        ref.read(spark).where(F.col("table") == name).withColumn("n", newest_first)
        .where("n = 1").select("run_id", "expectation", "success", F.unix_micros("checked_at").alias("t")).collect()
    )  # fmt: skip
    if not last:
        return None  # no check has run on this mirror
    newest = max(last, key=lambda r: r["t"])
    failing = sorted(r["expectation"] for r in last if r["success"] is not True)
    return {"run_id": newest["run_id"], "checked_at": _iso(newest["t"] / 1e6), "checks": len(last),
            "failed": len(failing), "failing": failing}  # fmt: skip


# ---------------------------------------------------------------- output


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            return f"{s // size}{unit}{(s % size) // sub_size:02d}{sub}"
    return f"{s}s"


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
            (s.name, s.format, s.kind, pending(s), _age(s.lag_seconds), s.last_event_time or "-",
             s.last_heartbeat_time or "-", _age(s.staleness_seconds), str(s.quarantined))
            for s in status.sources
        ],
    )  # fmt: skip
    lines += [f"  {s.name}: {s.error}" for s in status.sources if s.error]
    lines.append("")
    lines += _table(
        ("mirror", "rows", "tombstones", "last seq", "last change", "waiting", "quarantined silver/gold", "last DQ"),
        [
            (m.name, f"{m.rows}" + ("" if m.soft_deleted is None else f" ({m.soft_deleted} soft-deleted)"),
             "-" if m.tombstones is None else str(m.tombstones), m.last_seq or "-",
             m.last_event_time or "-", _waiting_text(m), f"{m.quarantined_silver}/{m.quarantined_gold}",
             _dq_text(m.dq))
            for m in status.mirrors
        ],
    )  # fmt: skip
    lines += ["", *status_lines(status.consistent)] if status.consistent else []
    t = status.thresholds
    named = (("max_lag_seconds", t.max_lag_seconds), ("max_staleness_seconds", t.max_staleness_seconds))
    limits = ", ".join(f"{n} {v:g}" for n, v in named if v)
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


def _waiting_text(m: MirrorStatus) -> str:
    if not m.pending:
        return "-"
    return f"{m.pending} (oldest {_age(m.oldest_pending_seconds)} of {_age(m.max_delay_seconds)})"


def _dq_text(dq: dict[str, Any] | None) -> str:
    if not dq:
        return "-"
    verdict = "passed" if not dq["failed"] else f"{dq['failed']} failed ({', '.join(dq['failing'][:3])})"
    return f"{dq['checks'] - dq['failed']}/{dq['checks']} {verdict} at {dq['checked_at']}"
