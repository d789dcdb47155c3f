"""``python -m bench.gold_profile [--rows N] [--changes N] [--codegen] [--functions]``: where one gold batch
spends its time.

A mirror of ``--rows`` rows is built through gold, then one batch of ``--changes`` changes (updates and deletes
of existing keys, as the ``cost`` section's) is applied with Spark's UI store on (127.0.0.1 only), and three
tables are printed: gold's own steps (:mod:`pipelines.gold.steps`), executor time per Spark stage grouped by
the Python line that started it (the stage's call site), and the SQL operators' time metrics summed by
operator name, each also in milliseconds per 1,000 changes. ``--codegen`` runs the batch with generated code
(gold's small-batch settings switch it off). ``--functions`` adds where the batch's CPU goes by function: the
JVM's samples (Java Flight Recorder) and the driver's Python (``cProfile``), :mod:`bench.jvm_profile`. A figure
for people, not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import urllib.request
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

import pipelines.gold.stage as gold_stage
from bench.changes import append_changes, bench_config, changes_frame, run_gold
from bench.cost import codegen_seconds, compiled_since, gold_codegen_on
from bench.jvm_profile import jvm_samples, print_python, print_samples, python_profile
from pipelines.warehouse import Warehouse

UI_PORT = 4399
_DURATION = re.compile(r"([\d.,]+) (ms|s|m|h)\b")
_UNIT = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def _get(path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{UI_PORT}/api/v1{path}", timeout=120) as r:  # noqa: S310 - loopback
        return json.loads(r.read())


def _ms(text: str) -> float:
    """The total of a Spark UI time metric (``total (min, med, max)\\n12.3 s (...)``) in milliseconds."""
    m = _DURATION.search(text.split("\n")[-1] if "\n" in text else text)
    return float(m.group(1).replace(",", "")) * _UNIT[m.group(2)] if m else 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.gold_profile", description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--changes", type=int, default=100_000)
    p.add_argument("--codegen", action="store_true", help="generated code on for the measured batch")
    p.add_argument("--functions", action="store_true", help="JVM samples and driver Python by function too")
    p.add_argument("--work", default="build/bench/profile")
    args = p.parse_args(argv)

    from pipelines.spark import get_spark

    spark = get_spark(
        "lakecdc-gold-profile",
        extra_conf={"spark.ui.enabled": "true", "spark.ui.port": str(UI_PORT), "spark.ui.retainedStages": "10000"},
    )
    app = spark.sparkContext.applicationId
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    wh_path = work / "warehouse"
    wh = Warehouse.from_config(bench_config(wh_path, False))
    append_changes(spark, wh, changes_frame(spark, args.rows, tables=1, seq_base=10**15, first_key=1))
    run_gold(spark, bench_config(wh_path, False))
    append_changes(spark, wh, changes_frame(spark, args.changes, tables=1, existing=args.rows))
    if args.codegen:
        gold_codegen_on()
    stages_before = {s["stageId"] for s in _get(f"/applications/{app}/stages")}
    sql_before = {e["id"] for e in _get(f"/applications/{app}/sql?details=false&length=100000")}
    compiled = codegen_seconds(spark)
    with ExitStack() as stack:
        if args.functions:
            samples = stack.enter_context(jvm_samples(spark, work / "batch.jfr"))
            driver = stack.enter_context(python_profile(gold_stage, "apply_gold_batch"))
        run = run_gold(spark, bench_config(wh_path, True))
    compiled = compiled_since(spark, compiled)
    per_k = 1000.0 / args.changes

    print(f"gold: one batch of {args.changes} changes into {args.rows} rows: {run.batch_seconds:.2f} s in the batch, "
          f"{run.jobs} Spark jobs, codegen {'on' if args.codegen else 'off (gold small-batch settings)'}, "
          f"compiling generated code {compiled} s")  # fmt: skip
    print("\ngold's steps (s, ms per 1,000 changes):")
    for name, cost in run.stats["steps"].items():
        print(
            f"  {name:<8} {cost['seconds']:8.2f} s {cost['seconds'] * 1000 * per_k:9.1f} ms/1k  {cost.get('jobs')} jobs"
        )

    by_site: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for s in _get(f"/applications/{app}/stages"):
        if s["stageId"] in stages_before or s.get("status") != "COMPLETE":
            continue
        site = s.get("name", "?")
        by_site[site][0] += s.get("executorRunTime", 0)
        by_site[site][1] += 1
    print("\nexecutor time by the call site that started the stage (ms, ms per 1,000 changes, stages):")
    for site, (ms, n) in sorted(by_site.items(), key=lambda kv: -kv[1][0])[:25]:
        print(f"  {ms:9.0f} ms {ms * per_k:8.1f} ms/1k  {n:3d}  {site}")

    by_op: dict[str, float] = defaultdict(float)
    executions = [e for e in _get(f"/applications/{app}/sql?details=true&planDescription=false&length=100000")
                  if e["id"] not in sql_before]  # fmt: skip
    (work / "sql.json").write_text(json.dumps(executions, indent=1))
    print(f"\nSQL executions of the batch: {len(executions)} (raw metrics in {work / 'sql.json'}); the longest:")
    for e in sorted(executions, key=lambda e: -e.get("duration", 0))[:12]:
        print(f"  {e.get('duration', 0):9.0f} ms  {e.get('description', '').splitlines()[0][:110]}")
    cores = spark.sparkContext.defaultParallelism
    for e in executions:
        for node in e.get("nodes", []):
            for metric in node.get("metrics", []):
                if not any(w in metric["name"] for w in ("time", "duration")):
                    continue
                ms = _ms(metric["value"])
                if ms > e.get("duration", 0) * cores:  # more than the query could spend: a metric Spark got wrong
                    print(f"  left out: {node['nodeName']}: {metric['name']} {ms:.0f} ms in a query of "
                          f"{e.get('duration', 0)} ms ({e.get('description', '').splitlines()[0][:60]})")  # fmt: skip
                    continue
                by_op[f"{node['nodeName']}: {metric['name']}"] += ms
    by_step: dict[str, float] = defaultdict(float)
    for e in executions:
        by_step[e.get("description", "").splitlines()[0][:60]] += e.get("duration", 0)
    print("\nSQL execution time by job description (gold's step, ms, ms per 1,000 changes):")
    for step, ms in sorted(by_step.items(), key=lambda kv: -kv[1]):
        print(f"  {ms:9.0f} ms {ms * per_k:8.1f} ms/1k  {step}")
    print("\nSQL operators' time metrics, summed over the batch's queries (ms, ms per 1,000 changes):")
    for op, ms in sorted(by_op.items(), key=lambda kv: -kv[1])[:30]:
        print(f"  {ms:9.0f} ms {ms * per_k:8.1f} ms/1k  {op}")
    if args.functions:
        print(f"\nthe batch by function (JVM samples in {work / 'batch.jfr'}):")
        print_samples(samples, per_k=per_k)
        print_python(driver)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
