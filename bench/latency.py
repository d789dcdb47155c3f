"""Latency: continuous mode through the local Kafka broker at a steady rate, produce → visible in gold.

A local broker (:class:`pipelines.testing.kafka_broker.LocalBroker`) and :func:`pipelines.runner.run_pipeline`
in continuous mode (bronze, silver and gold together, ``processing_time`` triggers). Once gold is up, a
producer thread sends OMS Canal messages (made with the format's own encoder: inserts and updates over a
few tables, keyed by table and key) at a steady rate, each stamped with its send time as the Kafka
timestamp; then the pipeline drains, and the streams are stopped.

Visible in gold: each mirror's change data feed (gold creates mirrors with it) gives, per written row,
its ``_position`` (``kafka:<topic>/<partition>@<offset>``) and the commit's ``_commit_timestamp``. A
message is visible at the first gold commit that wrote it or a later offset of its partition (a stream
reads a partition in order, so a later offset visible means this one was processed too; a change folded
into a later one of its key is covered that way). Latency = that time − the produce timestamp. A message
never visible counts as infinitely late, so a pipeline that falls behind cannot pass.
"""

from __future__ import annotations

import bisect
import math
import shutil
import threading
import time
from pathlib import Path

from pipelines.config import parse_config
from pipelines.formats import Change, DecodeContext, get_decoder
from pipelines.runner import run_pipeline
from pipelines.warehouse import Warehouse

TYPES = {"id": "bigint", "name": "varchar(64)", "amount": "decimal(12,2)", "updated_at": "datetime"}


def _say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


def messages(n: int, tables: int = 4) -> list[tuple[bytes, bytes]]:
    """(Kafka key, OMS Canal message): inserts, and every third message an update of a row inserted
    earlier into the same table, over ``tables`` tables."""
    enc, ctx = get_decoder("oms_canal"), DecodeContext()
    out = []
    inserted: dict[int, int] = {}  # table → keys inserted so far (keys 0, 1, ... per table)
    for i in range(n):
        t = i % tables
        update = i % 3 == 0 and inserted.get(t, 0) > 0
        key = (i // 3) % inserted[t] if update else inserted.get(t, 0)
        if not update:
            inserted[t] = key + 1
        row = {"id": str(key), "name": f"name-{i}", "amount": f"{i % 100000}.{i % 100:02d}"}
        row["updated_at"] = "2024-01-01T00:00:00"
        ch = Change(
            op="UPDATE" if update else "INSERT",
            db="latency",
            table=f"t{t}",
            key_columns=("id",),
            before=None,
            after=row,
            col_types=dict(TYPES),
            seq=(1_700_000_000_000 + i,),
            event_time="2024-01-01T00:00:00Z",
        )
        out.append((f"t{t}:{key}".encode(), enc.encode(ch, ctx)))
    return out


class RateProducer(threading.Thread):
    """Sends ``records`` at ``rate`` per second in 50 ms slices; keeps (partition, offset, ts ms) of each."""

    def __init__(self, bootstrap: str, topic: str, records: list[tuple[bytes, bytes]], rate: float) -> None:
        super().__init__(name="bench-producer", daemon=True)
        self.bootstrap, self.topic, self.records, self.rate = bootstrap, topic, records, rate
        self.delivered: list[tuple[int, int, int]] = []
        self.keys: list[str] = []  # each delivered record's key, aligned with ``delivered``
        self.errors: list[str] = []
        self.seconds = 0.0

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "log_level": 3,
                "enable.idempotence": True,
            }
        )

        def done(err, msg) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.delivered.append((msg.partition(), msg.offset(), msg.timestamp()[1]))
                self.keys.append((msg.key() or b"").decode())

        began = time.monotonic()
        for i, (key, value) in enumerate(self.records):
            due = began + i / self.rate
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            while True:
                try:
                    producer.produce(
                        self.topic, key=key, value=value, timestamp=int(time.time() * 1000), on_delivery=done
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        producer.flush(60)
        self.seconds = time.monotonic() - began


def visible_offsets(spark, wh: Warehouse, topic: str) -> dict[int, tuple[list[int], list[int]]]:
    """Per partition: offsets written to a mirror (sorted) and, aligned, the earliest commit (ms) at or after each."""
    from pyspark.sql import functions as F

    frames = []
    for path in wh.mirror_paths():
        cdf = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .load(path)
            .where("_change_type IN ('insert', 'update_postimage')")
        )
        frames.append(cdf.select("_position", (F.unix_millis("_commit_timestamp")).alias("ms")))
    if not frames:
        return {}
    union = frames[0]
    for f in frames[1:]:
        union = union.unionByName(f)
    pattern = rf"^kafka:{topic}/(\d+)@(\d+)$"
    rows = (
        union.select(
            F.regexp_extract("_position", pattern, 1).cast("int").alias("p"),
            F.regexp_extract("_position", pattern, 2).cast("bigint").alias("o"),
            "ms",
        )
        .where("p IS NOT NULL")
        .groupBy("p", "o")
        .agg(F.min("ms").alias("ms"))
        .collect()
    )
    return visibility((r["p"], r["o"], r["ms"]) for r in rows)


def visibility(written) -> dict[int, tuple[list[int], list[int]]]:
    """From (partition, offset, commit ms) of what was written: per partition, the offsets (sorted) and,
    aligned, the earliest commit (ms) at or after each (a later offset visible covers an earlier one)."""
    per: dict[int, list[tuple[int, int]]] = {}
    for p, o, ms in written:
        per.setdefault(p, []).append((o, ms))
    out = {}
    for p, pairs in per.items():
        pairs.sort()
        offsets = [o for o, _ in pairs]
        suffix_min, best = [0] * len(pairs), math.inf
        for i in range(len(pairs) - 1, -1, -1):
            best = min(best, pairs[i][1])
            suffix_min[i] = best
        out[p] = (offsets, suffix_min)
    return out


def mirrors_caught_up(spark, wh: Warehouse, topic: str, last: dict[int, int]) -> bool:
    """Every partition's last produced message is in a mirror (its key's row holds it or a later one)."""
    from pyspark.sql import functions as F

    pattern = rf"^kafka:{topic}/(\d+)@(\d+)$"
    seen: dict[int, int] = {}
    try:
        for path in wh.mirror_paths():
            rows = (
                spark.read.format("delta")
                .load(path)
                .select(
                    F.regexp_extract("_position", pattern, 1).cast("int").alias("p"),
                    F.regexp_extract("_position", pattern, 2).cast("bigint").alias("o"),
                )
                .groupBy("p")
                .agg(F.max("o").alias("o"))
                .collect()
            )
            for r in rows:
                if r["p"] is not None:
                    seen[r["p"]] = max(r["o"], seen.get(r["p"], -1))
    except Exception:  # noqa: BLE001 - a mirror being created or written right now: ask again later
        return False
    return all(seen.get(p, -1) >= o for p, o in last.items())


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    i = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


def stage_batches(queries) -> dict[str, dict]:
    """Per streaming query, its recent micro-batches that read rows (Spark keeps the last 100 progress
    reports): how many, the rows they read, and their seconds (median, max, sum): which stage the lag builds in;
    ``trigger_steps``: the same per step of Spark's trigger (``durationMs``: ``latestOffset``, ``addBatch`` (the
    batch's own work), ``walCommit``, ...)."""
    out = {}
    for q in queries:
        busy = [p for p in q.recentProgress if p.get("numInputRows")]
        durations = [
            {"triggerExecution": 0, **{k: v / 1000 for k, v in (p.get("durationMs") or {}).items()}} for p in busy
        ]
        steps = step_seconds(durations)
        whole = steps.get("triggerExecution", {})
        out[q.name or str(q.id)] = {
            "batches": len(busy),
            "rows": sum(int(p["numInputRows"]) for p in busy),
            "median_seconds": whole.get("median_seconds"),
            "max_seconds": whole.get("max_seconds"),
            "sum_seconds": whole.get("sum_seconds", 0.0),
            "trigger_steps": steps,
        }
    return out


def step_seconds(batches: list[dict]) -> dict[str, dict]:
    """Per step, over the batches given (each ``{step: seconds}``; its ``batch`` id and ``flush`` mark are no
    steps): median, max and sum of its seconds per batch, in the order the steps first appear."""
    steps = dict.fromkeys(k for b in batches for k in b if k not in ("batch", "flush"))
    out = {}
    for step in steps:
        values = sorted(b[step] for b in batches if step in b)
        out[step] = {
            "batches": len(values),
            "median_seconds": rounded(values[len(values) // 2]),
            "max_seconds": rounded(values[-1]),
            "sum_seconds": rounded(sum(values)),
        }
    return out


def _active(spark, name: str):
    return next((q for q in spark.streams.active if q.name == name), None)


def continuous_config(work: Path, bootstrap: str, topic: str, source: str, checks: bool, trigger: str, **extra):
    """A continuous pipeline of one OMS Canal source ``source`` reading ``topic`` (``extra``: more top-level
    keys, e.g. ``gold``)."""
    return parse_config(
        {
            "warehouse": str(work / "warehouse"),
            "quality_checks": checks,
            "trigger": "continuous",
            "processing_time": trigger,
            **extra,
            "sources": [
                {"name": source, "format": "oms_canal", "kafka": {"bootstrap_servers": bootstrap, "topics": [topic]}}
            ],
        },
        origin=f"bench-{source}",
    )


def start_continuous(
    spark, cfg, timeout: float, summaries: list | None = None
) -> tuple[threading.Thread, list[BaseException]]:
    """Run the pipeline continuously in a thread (stopped after ``timeout`` s at the latest) and return once
    gold's stream is up and its first, empty triggers are done; the list gets the pipeline's failure, and
    ``summaries`` its :class:`~pipelines.runner.RunSummary` once it has stopped."""
    failure: list[BaseException] = []

    def pipeline() -> None:
        try:
            summary = run_pipeline(spark, cfg, available_now=False, stop_after=timeout)
            if summaries is not None:
                summaries.append(summary)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            failure.append(exc)

    runner = threading.Thread(target=pipeline, name="bench-pipeline", daemon=True)
    runner.start()
    deadline = time.monotonic() + 180
    last = "lakecdc_run" if cfg.queries == "one" else "gold_apply"  # the query that applies to the mirrors
    while _active(spark, last) is None and time.monotonic() < deadline and runner.is_alive():
        time.sleep(0.5)
    time.sleep(3)
    return runner, failure


def last_offsets(delivered: list[tuple[int, int, int]]) -> dict[int, int]:
    """Per partition, the newest offset of the delivered (partition, offset, ms)."""
    last: dict[int, int] = {}
    for p, o, _ts in delivered:
        last[p] = max(o, last.get(p, -1))
    return last


def drain(spark, alive, caught_up, limit: float, every: float = 2.0) -> None:
    """Wait until ``caught_up()`` (asked every ``every`` s) or ``limit`` s, while ``alive()``; then let the
    triggers that are running (the batch that got there, its checks) end, 180 s at most."""
    began = time.monotonic()
    while time.monotonic() - began < limit and alive():
        time.sleep(every)
        if caught_up():
            break
    idle_by = time.monotonic() + 180
    while time.monotonic() < idle_by and any(q.status.get("isTriggerActive") for q in spark.streams.active):
        time.sleep(1)


def stop_continuous(spark, runner: threading.Thread, failure: list[BaseException]) -> dict[str, dict]:
    """Stop the streams of a pipeline :func:`start_continuous` started; their batches (:func:`stage_batches`)."""
    stages = stage_batches(spark.streams.active)
    for q in spark.streams.active:
        q.stop()
    runner.join(timeout=300)
    if failure:
        raise RuntimeError(f"the pipeline failed during the latency run: {failure[0]}")
    return stages


def run_latency(spark, work: Path, sizes: dict, checks: bool) -> dict:
    from pipelines.testing.kafka_broker import LocalBroker

    shutil.rmtree(work, ignore_errors=True)
    rate, seconds = sizes["rate"], sizes["seconds"]
    records = messages(int(rate * seconds), sizes["tables"])
    broker = LocalBroker(data_dir=work / "kafka", fresh=True).start()
    try:
        topic = "bench-latency"
        broker.create_topic(topic, 3)
        cfg = continuous_config(work, broker.bootstrap, topic, "latency", checks, sizes["trigger"])
        wh = Warehouse.from_config(cfg)
        runner, failure = start_continuous(spark, cfg, sizes["timeout"])
        _say(f"latency: producing {len(records)} messages at {rate}/s ...")
        producer = RateProducer(broker.bootstrap, topic, records, rate)
        producer.start()
        producer.join()
        produced_at = time.monotonic()
        last = last_offsets(producer.delivered)
        drain(spark, runner.is_alive, lambda: mirrors_caught_up(spark, wh, topic, last), sizes["drain"], every=5)
        drained = time.monotonic() - produced_at
        stages = stop_continuous(spark, runner, failure)
        visible = visible_offsets(spark, wh, topic)
    finally:
        broker.stop()
    latencies = latencies_of(producer.delivered, visible)
    missing = sum(1 for x in latencies if not math.isfinite(x))
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    achieved = len(producer.delivered) / producer.seconds if producer.seconds else None
    finite = [x for x in latencies if math.isfinite(x)]
    shutil.rmtree(work, ignore_errors=True)
    return {
        "cases": [
            {
                "rate_target": rate,
                "rate_achieved": round(achieved, 1) if achieved else None,
                "messages": len(records),
                "delivered": len(producer.delivered),
                "producer_errors": producer.errors[:5],
                "not_visible": missing,
                "drain_seconds": round(drained, 1),
                "trigger": sizes["trigger"],
                "p50_seconds": rounded(p50),
                "p90_seconds": rounded(percentile(latencies, 0.90)),
                "p99_seconds": rounded(p99),
                "max_seconds": rounded(max(finite)) if finite else None,
                "histogram": _histogram(finite),
                "stage_batches": stages,
            }
        ],
        "figures": [
            {
                "name": f"latency p50 at {round(achieved or 0)} msg/s",
                "value": rounded(p50),
                "unit": "s",
                "compare_name": "trigger interval",
                "compare_value": _trigger_seconds(sizes["trigger"]),
                "ratio": None,
                "ratio_meaning": "",
            },
            {
                "name": f"latency p99 at {round(achieved or 0)} msg/s",
                "value": rounded(p99),
                "unit": "s",
                "compare_name": "target",
                "compare_value": 15.0,
                "ratio": rounded(p99 / 15.0) if math.isfinite(p99) else None,
                "ratio_meaning": "p99 / 15 s",
            },
        ],
        "ratio": rounded(p99 / 15.0) if math.isfinite(p99) else None,
        "target": {"text": "p99 < 15 s at 2,000 msg/s", "max_seconds": 15.0, "rate": 2000},
        "verdict": "PASS" if math.isfinite(p99) and p99 < 15.0 else "FAIL",
    }


def latencies_of(delivered: list[tuple[int, int, int]], visible: dict[int, tuple[list[int], list[int]]]) -> list[float]:
    """Seconds from each delivered (partition, offset, produce ms) to the first commit that made it or a later
    offset of its partition visible (``visible``: as :func:`visible_offsets` returns it), sorted; never visible: inf."""
    out = []
    for p, o, ts in delivered:
        offsets, first = visible.get(p, ([], []))
        i = bisect.bisect_left(offsets, o)
        out.append(math.inf if i == len(offsets) else (first[i] - ts) / 1000)
    return sorted(out)


def rounded(x: float) -> float | None:
    return round(x, 2) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _trigger_seconds(text: str) -> float | None:
    parts = text.split()
    try:
        value = float(parts[0])
    except (ValueError, IndexError):
        return None
    unit = parts[1] if len(parts) > 1 else "seconds"
    return value / 1000 if unit.startswith("milli") else value * 60 if unit.startswith("min") else value


def _histogram(values: list[float], bins: int = 30) -> dict:
    if not values:
        return {"edges": [], "counts": []}
    top = max(values) or 1.0
    width = top / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int(v / width) if width else 0)] += 1
    return {"edges": [round(i * width, 3) for i in range(bins + 1)], "counts": counts}
