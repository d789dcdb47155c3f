"""Freshness: one hot table beside many cold ones in one topic, run continuously through the local broker.

One hot table at a steady rate (500 changes/s at full size) and N cold tables at one change every 10 s each,
in one Kafka topic, through :func:`pipelines.runner.run_pipeline` in continuous mode, with a freshness budget
for the cold tables (``gold.max_delay``, 5 minutes at full size) and long enough that every cold table is
merged at least twice. The hot table is merged as soon as enough of its changes wait (``gold.max_pending``);
the cold ones within their budget, spread over the batches (:mod:`pipelines.gold.due`).

Visible in a mirror: its change data feed gives, per written row, its ``_position`` (topic, partition,
offset) and the commit's time. A message is visible at the first commit of *its table's* mirror that wrote
it or a later offset of the same table and partition (a mirror applies its changes in order; a change
folded into a later one of its key is covered that way). Latency = that time − the produce timestamp;
a message never visible counts as infinitely late.
"""

from __future__ import annotations

import bisect
import math
import shutil
import time
from pathlib import Path

from bench.latency import TYPES, RateProducer, continuous_config, percentile, rounded, stage_batches, start_continuous
from pipelines.formats import Change, DecodeContext, get_decoder
from pipelines.warehouse import Warehouse

HOT = "hot"


def _say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


def schedule(hot_rate: float, cold_tables: int, cold_every: float, seconds: float) -> list[tuple[bytes, bytes]]:
    """(Kafka key, OMS Canal message) in send order at a steady combined rate: the hot table's changes
    (inserts, every third an update) interleaved with the cold tables' (one insert each in turn)."""
    enc, ctx = get_decoder("oms_canal"), DecodeContext()
    cold_rate = cold_tables / cold_every
    total = int((hot_rate + cold_rate) * seconds)
    share = cold_rate / (hot_rate + cold_rate)
    out, hot_keys, cold_sent = [], 0, 0
    for i in range(total):
        cold = math.floor((i + 1) * share) > math.floor(i * share)
        if cold:
            table, key, update = f"c{cold_sent % cold_tables:03d}", cold_sent // cold_tables, False
            cold_sent += 1
        else:
            update = i % 3 == 0 and hot_keys > 0
            table, key = HOT, ((i // 3) % hot_keys if update else hot_keys)
            hot_keys += 0 if update else 1
        row = {"id": str(key), "name": f"name-{i}", "amount": f"{i % 100000}.{i % 100:02d}",
               "updated_at": "2024-01-01T00:00:00"}  # fmt: skip
        change = Change(
            op="UPDATE" if update else "INSERT",
            db="fresh",
            table=table,
            key_columns=("id",),
            after=row,
            col_types=dict(TYPES),
            seq=(1_700_000_000_000 + i,),
            event_time="2024-01-01T00:00:00Z",
        )
        out.append((f"{table}:{key}".encode(), enc.encode(change, ctx)))
    return out


def _visible(spark, wh: Warehouse, topic: str) -> dict[tuple[str, int], tuple[list[int], list[int]]]:
    """Per (mirror, partition): the offsets its mirror wrote (sorted) and, aligned, the earliest commit (ms)
    at or after each; and per mirror, how many writes it took (its MERGEs and appends)."""
    from pyspark.sql import functions as F

    pattern = rf"^kafka:{topic}/(\d+)@(\d+)$"
    out: dict[tuple[str, int], tuple[list[int], list[int]]] = {}
    for path in wh.mirror_paths():
        name = Path(path).name
        rows = (
            spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(path)
            .where("_change_type IN ('insert', 'update_postimage')")
            .select(
                F.regexp_extract("_position", pattern, 1).cast("int").alias("p"),
                F.regexp_extract("_position", pattern, 2).cast("bigint").alias("o"),
                F.unix_millis("_commit_timestamp").alias("ms"),
            )
            .where("p IS NOT NULL").groupBy("p", "o").agg(F.min("ms").alias("ms")).collect()
        )  # fmt: skip
        per: dict[int, list[tuple[int, int]]] = {}
        for r in rows:
            per.setdefault(r["p"], []).append((r["o"], r["ms"]))
        for p, pairs in per.items():
            pairs.sort()
            suffix, best = [0] * len(pairs), math.inf
            for i in range(len(pairs) - 1, -1, -1):
                best = min(best, pairs[i][1])
                suffix[i] = best
            out[(name, p)] = ([o for o, _ in pairs], suffix)
    return out


def _writes(spark, wh: Warehouse) -> dict[str, int]:
    """Per mirror: the commits that wrote rows (MERGE or append), its creation aside."""
    out = {}
    for path in wh.mirror_paths():
        ops = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("operation").collect()
        out[Path(path).name] = sum(1 for r in ops if r["operation"] in ("MERGE", "WRITE"))
    return out


def run_freshness(spark, work: Path, sizes: dict, checks: bool) -> dict:
    from pipelines.testing.kafka_broker import LocalBroker

    shutil.rmtree(work, ignore_errors=True)
    budget = float(sizes["budget_seconds"])
    records = schedule(sizes["hot_rate"], sizes["cold_tables"], sizes["cold_every"], sizes["seconds"])
    rate = sizes["hot_rate"] + sizes["cold_tables"] / sizes["cold_every"]
    broker = LocalBroker(data_dir=work / "kafka", fresh=True).start()
    try:
        topic = "bench-freshness"
        broker.create_topic(topic, 3)
        cfg = continuous_config(
            work, broker.bootstrap, topic, "fresh", checks, sizes["trigger"], gold={"max_delay": budget}
        )
        wh = Warehouse.from_config(cfg)
        runner, failure = start_continuous(spark, cfg, sizes["timeout"])
        _say(f"freshness: producing {len(records)} messages at {rate:g}/s for {sizes['seconds']} s "
             f"(1 hot table, {sizes['cold_tables']} cold ones, budget {budget:g} s) ...")  # fmt: skip
        producer = RateProducer(broker.bootstrap, topic, records, rate)
        producer.start()
        producer.join()
        _say("freshness: produced; waiting for every cold table's budget to pass ...")
        wait_until = time.monotonic() + budget + 30
        while time.monotonic() < wait_until and runner.is_alive():
            time.sleep(5)
        stages = stage_batches(spark.streams.active)
        # read before the stop: a run that stops merges what waits, and that last write is not the budget's
        visible, writes = _visible(spark, wh, topic), _writes(spark, wh)
        for q in spark.streams.active:
            q.stop()
        runner.join(timeout=300)
        if failure:
            raise RuntimeError(f"the pipeline failed during the freshness run: {failure[0]}")
    finally:
        broker.stop()
    hot, cold = [], {}
    for (p, o, ts), key in zip(producer.delivered, producer.keys):
        table = key.split(":", 1)[0]
        offsets, first = visible.get((f"fresh__{table}", p), ([], []))
        i = bisect.bisect_left(offsets, o)
        latency = math.inf if i == len(offsets) else (first[i] - ts) / 1000
        (hot.append(latency) if table == HOT else cold.setdefault(table, []).append(latency))
    hot.sort()
    cold_worst = {t: max(v) for t, v in cold.items()}
    cold_writes = [writes.get(f"fresh__{t}", 0) for t in cold]
    worst = max(cold_worst.values(), default=math.inf)
    p99 = percentile(hot, 0.99)
    within = sum(1 for v in cold_worst.values() if v <= budget)
    shutil.rmtree(work, ignore_errors=True)
    verdict = math.isfinite(p99) and p99 <= 30.0 and within == sizes["cold_tables"] and min(cold_writes, default=0) >= 2
    return {
        "cases": [
            {
                "messages": len(records),
                "delivered": len(producer.delivered),
                "rate": rate,
                "rate_achieved": round(len(producer.delivered) / producer.seconds, 1) if producer.seconds else None,
                "hot_p50_seconds": rounded(percentile(hot, 0.5)),
                "hot_p90_seconds": rounded(percentile(hot, 0.9)),
                "hot_p99_seconds": rounded(p99),
                "hot_max_seconds": rounded(max((x for x in hot if math.isfinite(x)), default=math.nan)),
                "hot_not_visible": sum(1 for x in hot if not math.isfinite(x)),
                "cold_tables": len(cold),
                "cold_within_budget": within,
                "cold_worst_seconds": rounded(worst),
                "cold_median_worst_seconds": rounded(sorted(cold_worst.values())[len(cold_worst) // 2])
                if cold_worst
                else None,
                "cold_writes_min": min(cold_writes, default=0),
                "cold_writes_max": max(cold_writes, default=0),
                "hot_writes": writes.get(f"fresh__{HOT}", 0),
                "stage_batches": stages,
            }
        ],
        "figures": [
            {
                "name": f"hot table p99, {sizes['hot_rate']:g} changes/s",
                "value": rounded(p99),
                "unit": "s",
                "compare_name": "target",
                "compare_value": 30.0,
                "ratio": rounded(p99 / 30.0) if math.isfinite(p99) else None,
                "ratio_meaning": "p99 / 30 s",
            },
            {
                "name": f"cold tables within their budget (of {sizes['cold_tables']})",
                "value": within,
                "unit": "",
                "compare_name": f"worst cold latency, s (budget {budget:g} s)",
                "compare_value": rounded(worst),
                "ratio": rounded(worst / budget) if math.isfinite(worst) else None,
                "ratio_meaning": "worst cold latency / budget",
            },
            {
                "name": "writes per cold mirror (fewest)",
                "value": min(cold_writes, default=0),
                "unit": "",
                "compare_name": "hot mirror's writes",
                "compare_value": writes.get(f"fresh__{HOT}", 0),
                "ratio": None,
                "ratio_meaning": "",
            },
        ],
        "ratio": rounded(p99 / 30.0) if math.isfinite(p99) else None,
        "target": {"text": "hot p99 ≤ 30 s; every cold table within its budget, merged ≥ 2 times", "max_seconds": 30.0},
        "verdict": "PASS" if verdict else "FAIL",
    }
