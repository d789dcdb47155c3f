"""Pipeline: the whole lakecdc pipeline against the three-stream job a user would write by hand (issue 32).

One local broker (:class:`pipelines.testing.kafka_broker.LocalBroker`), the same OMS Canal traffic for both
(:func:`bench.latency.messages`: inserts and updates over 4 tables, keyed by table and key, 3 partitions).

The hand-written job (:func:`hand_written_streams`): Kafka → a Delta append of the value as text and its
partition and offset → ``from_json`` with an explicit schema, ``data`` exploded, into a second Delta table →
``foreachBatch``: per table, the latest change per key (by offset: a key's changes share a partition) MERGEd
into that table's target. No quarantine, no counts, no DDL, no checks: what lakecdc adds is the difference.

The whole pipeline runs in both its shapes (``queries: per_stage``, three streaming queries; ``queries: one``,
one query that lands, decodes and applies each batch: :mod:`pipelines.one_query`), each on a warehouse of its own.
The verdict is the default shape's; the one query's is ``one_query_verdict``.

Two measures, all pipelines in the same run:

* catch-up: ``messages`` already in a topic, each pipeline run until caught up (``availableNow``, stage after
  stage, as ``lakecdc run --once`` does; lakecdc with its checks), wall seconds; the ratio whole/hand-written;
* latency at ``rate`` msg/s for ``seconds``, each pipeline continuous (trigger ``trigger``) on its own topic,
  one after the other: produce → visible in a target table. lakecdc: the mirrors' change data feed
  (:func:`bench.latency.visible_offsets`); the hand-written job: the time of each MERGE batch's end and the newest
  offset per partition it merged. A message never visible counts as infinitely late.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

from bench.latency import (
    RateProducer,
    continuous_config,
    drain,
    last_offsets,
    latencies_of,
    messages,
    mirrors_caught_up,
    percentile,
    rounded,
    stage_batches,
    start_continuous,
    step_seconds,
    stop_continuous,
    visibility,
    visible_offsets,
)
from pipelines.runner import run_pipeline
from pipelines.warehouse import Warehouse

#: The hand-written job's schema of an OMS Canal message of the bench's tables (bench.latency.TYPES).
CANAL_SCHEMA = (
    "id BIGINT, database STRING, table STRING, type STRING, isDdl BOOLEAN, es BIGINT, ts BIGINT, "
    "data ARRAY<STRUCT<id: BIGINT, name: STRING, amount: DECIMAL(12,2), updated_at: STRING>>"
)
PARTITIONS = 3
#: The whole pipeline's two shapes (``queries:``): three streaming queries, and one query landing, decoding and
#: applying each batch (pipelines.one_query).
QUERIES = ("per_stage", "one")
#: Issue 41's targets: the catch-up in at most the hand-written job's time; a latency p99 of at most 15 s and of
#: at most half the hand-written job's in the same run.
MAX_CATCH_UP, MAX_P99_SECONDS, MAX_P99_RATIO = 1.0, 15.0, 0.5


def _say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


class HandWritten:
    """The three streams of the hand-written job over ``topic``, under ``root``; ``merged`` gets (partition,
    newest offset, end ms) of every MERGE batch."""

    def __init__(self, spark, root: Path, bootstrap: str, topic: str) -> None:
        self.spark, self.root, self.bootstrap, self.topic = spark, root, bootstrap, topic
        self.merged: list[tuple[int, int, int]] = []

    def _raw(self):
        from pyspark.sql import functions as F

        kafka = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.topic)
            .option("startingOffsets", "earliest")
            .load()
        )
        return kafka.select(F.col("value").cast("string").alias("value"), "partition", "offset", "timestamp")

    def _parsed(self):
        from pyspark.sql import functions as F

        raw = self.spark.readStream.format("delta").load(str(self.root / "raw"))
        msg = raw.select(F.from_json("value", CANAL_SCHEMA).alias("m"), "partition", "offset")
        return msg.select(
            F.col("m.table").alias("tbl"), F.col("m.type").alias("op"), F.explode("m.data").alias("row"),
            "partition", "offset",
        ).select("tbl", "op", "row.*", "partition", "offset")  # fmt: skip

    def _merge(self, df, batch_id: int) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        df = df.persist()
        try:
            latest = df.withColumn(
                "rn", F.row_number().over(Window.partitionBy("tbl", "id").orderBy(F.col("offset").desc()))
            ).where("rn = 1")
            for (table,) in df.select("tbl").distinct().collect():
                rows = latest.where(F.col("tbl") == table).drop("rn", "tbl")
                path = str(self.root / "target" / table)
                if not DeltaTable.isDeltaTable(self.spark, path):
                    rows.limit(0).write.format("delta").save(path)
                target = DeltaTable.forPath(self.spark, path).alias("t")
                target.merge(rows.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
            ends = df.groupBy("partition").agg(F.max("offset").alias("o")).collect()
            now = int(time.time() * 1000)
            self.merged += [(r["partition"], r["o"], now) for r in ends]
        finally:
            df.unpersist()

    def start(self, available_now: bool, trigger: str = "2 seconds"):
        """The three queries (started in flow order); with ``available_now`` each runs until caught up first."""
        queries = []
        for name, frame, sink in (
            ("hand_raw", self._raw, "raw"),
            ("hand_parsed", self._parsed, "parsed"),
            ("hand_merge", lambda: self.spark.readStream.format("delta").load(str(self.root / "parsed")), None),
        ):
            writer = frame().writeStream.queryName(name).option("checkpointLocation", str(self.root / "_cp" / name))
            writer = writer.foreachBatch(self._merge) if sink is None else writer.format("delta")
            writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=trigger)
            if sink is not None and not (self.root / sink).exists():  # the next stream reads it from the start
                frame_schema = frame().schema
                self.spark.createDataFrame([], frame_schema).write.format("delta").save(str(self.root / sink))
            query = writer.start(str(self.root / sink)) if sink is not None else writer.start()
            if available_now:
                query.awaitTermination()
            queries.append(query)
        return queries


def _produce_all(bootstrap: str, topic: str, records) -> None:
    producer = RateProducer(bootstrap, topic, records, rate=1e9)
    producer.run()
    if producer.errors or len(producer.delivered) != len(records):
        raise RuntimeError(f"producing the catch-up traffic failed: {producer.errors[:3]}")


def catch_up(spark, work: Path, broker, sizes: dict, checks: bool) -> dict:
    """Both pipelines drain the same ``messages`` already in one topic, the hand-written one first."""
    topic = "bench-pipeline-catchup"
    broker.create_topic(topic, PARTITIONS)
    _produce_all(broker.bootstrap, topic, messages(sizes["messages"], sizes["tables"]))
    began = time.perf_counter()
    HandWritten(spark, work / "hand-catchup", broker.bootstrap, topic).start(available_now=True)
    hand = time.perf_counter() - began
    _say(f"pipeline: catch-up of {sizes['messages']} messages, hand-written {hand:.1f} s ...")
    out = {"hand_seconds": round(hand, 2)}
    for queries in QUERIES:
        cfg = continuous_config(
            work / f"whole-catchup-{queries}", broker.bootstrap, topic, "catchup", checks, sizes["trigger"],
            queries=queries,
        )  # fmt: skip
        began = time.perf_counter()
        summary = run_pipeline(spark, cfg, available_now=True)
        whole = time.perf_counter() - began
        _say(f"pipeline: catch-up, queries: {queries} {whole:.1f} s ({summary.seconds}), {summary.applied} applied")
        out[queries] = {
            "whole_seconds": round(whole, 2),
            "stage_seconds": summary.seconds,
            "gold_batches": len(summary.batches),
            "batch_steps": step_seconds(summary.batches),
        }
        _say(f"pipeline: catch-up, queries: {queries}, per batch (median s): {_medians(out[queries]['batch_steps'])}")
    return out


def _latency_summary(delivered, visible, producer_seconds: float, stages: dict) -> dict:
    latencies = latencies_of(delivered, visible)
    finite = [x for x in latencies if math.isfinite(x)]
    return {
        "delivered": len(delivered),
        "rate_achieved": round(len(delivered) / producer_seconds, 1) if producer_seconds else None,
        "not_visible": len(latencies) - len(finite),
        "p50_seconds": rounded(percentile(latencies, 0.50)),
        "p99_seconds": rounded(percentile(latencies, 0.99)),
        "p99": percentile(latencies, 0.99),
        "max_seconds": rounded(max(finite)) if finite else None,
        "stage_batches": stages,
    }


def latency_hand(spark, work: Path, broker, records, sizes: dict) -> dict:
    topic = "bench-pipeline-hand"
    broker.create_topic(topic, PARTITIONS)
    job = HandWritten(spark, work / "hand-latency", broker.bootstrap, topic)
    queries = job.start(available_now=False, trigger=sizes["trigger"])
    time.sleep(5)  # the first, empty triggers
    producer = RateProducer(broker.bootstrap, topic, records, sizes["rate"])
    producer.run()
    last = last_offsets(producer.delivered)

    def caught_up() -> bool:
        return all(any(p == q and o >= want for q, o, _ms in list(job.merged)) for p, want in last.items())

    drain(spark, lambda: all(q.isActive for q in queries), caught_up, sizes["drain"])
    stages = stage_batches(queries)
    for q in queries:
        q.stop()
    return _latency_summary(producer.delivered, visibility(job.merged), producer.seconds, stages)


def latency_whole(spark, work: Path, broker, records, sizes: dict, checks: bool, queries: str) -> dict:
    topic = f"bench-pipeline-whole-{queries}"
    broker.create_topic(topic, PARTITIONS)
    cfg = continuous_config(
        work / f"whole-latency-{queries}", broker.bootstrap, topic, "whole", checks, sizes["trigger"], queries=queries
    )
    wh, summaries = Warehouse.from_config(cfg), []
    runner, failure = start_continuous(spark, cfg, sizes["timeout"], summaries)
    producer = RateProducer(broker.bootstrap, topic, records, sizes["rate"])
    producer.run()
    last = last_offsets(producer.delivered)
    drain(spark, runner.is_alive, lambda: mirrors_caught_up(spark, wh, topic, last), sizes["drain"])
    stages = stop_continuous(spark, runner, failure)
    out = _latency_summary(producer.delivered, visible_offsets(spark, wh, topic), producer.seconds, stages)
    batches = summaries[0].batches if summaries else []
    out["gold_batches"] = batches  # each batch's seconds per step, in order
    out["batch_steps"] = step_seconds(batches)
    return out


def run_pipeline_section(spark, work: Path, sizes: dict, checks: bool) -> dict:
    from pipelines.testing.kafka_broker import LocalBroker

    shutil.rmtree(work, ignore_errors=True)
    broker = LocalBroker(data_dir=work / "kafka", fresh=True).start()
    try:
        caught = catch_up(spark, work, broker, sizes, checks)
        records = messages(int(sizes["rate"] * sizes["seconds"]), sizes["tables"])
        _say(f"pipeline: latency, {len(records)} messages at {sizes['rate']}/s, hand-written then whole ...")
        hand = latency_hand(spark, work, broker, records, sizes)
        _say(f"pipeline: latency, hand-written p50 {hand['p50_seconds']} s, p99 {hand['p99_seconds']} s")
        _say(f"pipeline: latency, hand-written, per batch (median s): {_query_medians(hand['stage_batches'])}")
        whole = {}
        for queries in QUERIES:
            whole[queries] = latency_whole(spark, work, broker, records, sizes, checks, queries)
            got = whole[queries]
            _say(f"pipeline: latency, queries: {queries} p50 {got['p50_seconds']} s, p99 {got['p99_seconds']} s")
            _say(f"pipeline: latency, queries: {queries}, per batch (median s): {_query_medians(got['stage_batches'])}")
            _say(f"pipeline: latency, queries: {queries}, gold's batches (median s): {_medians(got['batch_steps'])}")
    finally:
        for q in spark.streams.active:
            q.stop()
        broker.stop()
    shutil.rmtree(work, ignore_errors=True)
    return _figures(sizes, caught, hand, whole)


def _medians(steps: dict[str, dict]) -> str:
    """``land 1.2, decode 3.4, ...``: each step's median seconds per batch (:func:`~bench.latency.step_seconds`)."""
    return ", ".join(f"{name} {s['median_seconds']}" for name, s in steps.items()) or "no batch"


def _query_medians(stages: dict[str, dict]) -> str:
    """``gold_apply 25.3 (addBatch 25.1), ...``: each query's median batch and the median of its own work in it."""
    return ", ".join(
        f"{name} {q['median_seconds']} (addBatch {q['trigger_steps'].get('addBatch', {}).get('median_seconds')})"
        for name, q in stages.items()
    )


def _ratio(value: float, compare: float) -> float | None:
    return value / compare if math.isfinite(value) and math.isfinite(compare) and compare else None


def _shape_figures(sizes: dict, caught: dict, hand: dict, whole: dict, queries: str, hand_p99: float) -> tuple:
    """The figures of one shape of the whole pipeline against the hand-written job, and whether it meets the
    targets."""
    catch_ratio = _ratio(caught[queries]["whole_seconds"], caught["hand_seconds"])
    p99 = whole.pop("p99")
    p99_ratio = _ratio(p99, hand_p99)
    ok = catch_ratio is not None and catch_ratio <= MAX_CATCH_UP and p99 <= MAX_P99_SECONDS
    ok = ok and p99_ratio is not None and p99_ratio <= MAX_P99_RATIO
    rate, shape = sizes["rate"], f"queries: {queries}"
    figures = [
        {
            "name": f"catch-up of {sizes['messages']:,} messages, {sizes['tables']} tables, {shape}",
            "value": caught[queries]["whole_seconds"],
            "unit": "s",
            "compare_name": "hand-written three streams",
            "compare_value": caught["hand_seconds"],
            "ratio": rounded(catch_ratio) if catch_ratio else None,
            "ratio_meaning": "whole / hand-written",
        },
        {
            "name": f"latency p99 at {rate} msg/s, {shape}",
            "value": whole["p99_seconds"],
            "unit": "s",
            "compare_name": "hand-written p99",
            "compare_value": hand["p99_seconds"],
            "ratio": rounded(p99_ratio) if p99_ratio else None,
            "ratio_meaning": "whole / hand-written",
        },
        {
            "name": f"latency p50 at {rate} msg/s, {shape}",
            "value": whole["p50_seconds"],
            "unit": "s",
            "compare_name": "hand-written p50",
            "compare_value": hand["p50_seconds"],
            "ratio": None,
            "ratio_meaning": "",
        },
    ]
    return figures, catch_ratio, ok


def _figures(sizes: dict, caught: dict, hand: dict, whole: dict) -> dict:
    """Both shapes' figures; the verdict is the default shape's (``queries: per_stage``), the one query's apart."""
    hand_p99 = hand.pop("p99")
    shapes = {q: _shape_figures(sizes, caught, hand, whole[q], q, hand_p99) for q in QUERIES}
    catch_ratio, ok = shapes["per_stage"][1], shapes["per_stage"][2]
    return {
        "cases": [{"catch_up": caught, "latency_hand_written": hand, "latency_whole": whole}],
        "figures": [figure for q in QUERIES for figure in shapes[q][0]],
        "ratio": rounded(catch_ratio) if catch_ratio else None,
        "target": {
            "text": (
                f"catch-up ≤ {MAX_CATCH_UP}× hand-written; p99 ≤ {MAX_P99_SECONDS:g} s and ≤ {MAX_P99_RATIO}× "
                "hand-written at 200 msg/s"
            ),
            "max": MAX_CATCH_UP,
            "max_p99_seconds": MAX_P99_SECONDS,
            "max_p99_ratio": MAX_P99_RATIO,
        },
        "verdict": "PASS" if ok else "FAIL",
        "one_query_verdict": "PASS" if shapes["one"][2] else "FAIL",
    }


__all__ = ["HandWritten", "run_pipeline_section"]
