"""Probe: gold seconds, Spark jobs and Delta commits per micro-batch over 1, 10, 25 ... tables.

The same number of changes (a simulated oms_canal history) spread over N tables, decoded to silver
rows and applied by :func:`pipelines.gold.stage.apply_gold_batch` in two batches (the first creates
the mirrors, the second is the steady state); the export is compared with the reference model.

    PYTHONPATH=. LAKECDC_BUILD_DIR=/work/main/build python bench/gold_tables_probe.py --tables 1 10 25
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

from pipelines.config import parse_config
from pipelines.export import export_warehouse
from pipelines.gold.stage import apply_gold_batch
from pipelines.gold.steps import spark_jobs
from pipelines.silver import decode_frame, ensure_silver
from pipelines.spark import get_spark
from pipelines.testing.simulator import compare, deliver, generate_history
from pipelines.warehouse import Warehouse


def _jobs(spark) -> int:
    """Jobs submitted so far in this SparkContext (:func:`pipelines.gold.steps.spark_jobs`)."""
    return spark_jobs(spark) or 0


#: The steps whose Spark jobs ``--profile`` counts: (module, function), the label is the function.
PROFILED = (
    ("pipelines.gold.batch_decision", "profile_batch"),
    ("pipelines.gold.batch_decision", "plan_tables"),
    ("pipelines.gold.batch_decision", "table_counts"),
    ("pipelines.gold.batch_writes", "fold_per_key"),
    ("pipelines.gold.batch_writes", "key_state_rows"),
    ("pipelines.gold.batch_writes", "apply_keyed"),
    ("pipelines.gold.keyed", "merge_keyed"),
    ("pipelines.gold.batch_writes", "key_check_rows"),
    ("pipelines.gold.parallel", "release_tables"),
)

#: Wall seconds spent in each :data:`PROFILED` step since the last :func:`_take_step_seconds`.
_STEP_SECONDS: dict[str, float] = {}


def _label_steps(spark) -> None:
    """Wrap each :data:`PROFILED` step so that the jobs it submits carry its name as their description."""
    import importlib

    sc = spark.sparkContext
    for module_name, name in PROFILED:
        module = importlib.import_module(module_name)
        inner = getattr(module, name)

        def labelled(*args, _inner=inner, _name=name, **kwargs):
            before = sc.getLocalProperty("spark.job.description")
            sc.setLocalProperty("spark.job.description", _name)
            t0 = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                _STEP_SECONDS[_name] = _STEP_SECONDS.get(_name, 0.0) + time.perf_counter() - t0
                sc.setLocalProperty("spark.job.description", before)

        setattr(module, name, labelled)


def _take_step_seconds() -> dict[str, float]:
    """Seconds per step since the last call, largest first (and start counting again)."""
    taken = {name: round(seconds, 2) for name, seconds in sorted(_STEP_SECONDS.items(), key=lambda kv: -kv[1])}
    _STEP_SECONDS.clear()
    return taken


def _jobs_by_step(spark, first_job: int) -> dict[str, int]:
    """Jobs since ``first_job`` per step label (unlabelled: ``other``)."""
    counts: dict[str, int] = {}
    it = spark.sparkContext._jsc.sc().statusStore().jobsList(None).iterator()
    while it.hasNext():
        job = it.next()
        if job.jobId() >= first_job:
            description = job.description()
            label = str(description.get()) if description.isDefined() else "other"
            counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _commits(root: Path) -> int:
    return sum(1 for p in root.rglob("_delta_log/*.json"))


def probe(
    spark,
    changes: int,
    tables: int,
    quality: bool,
    parallelism: int | None,
    seed: int = 3,
    profile: bool = False,
    initial_rows: bool = False,
) -> dict:
    work = Path(tempfile.mkdtemp(prefix="gold-probe-"))
    try:
        history = generate_history(
            "oms_canal", seed, n_changes=changes, n_tables=tables, composite_keys=False, initial_rows=initial_rows
        )
        delivery = deliver(history, seed, partitions=1, dup_rate=0.0)
        conf = {
            "warehouse": str(work / "wh"),
            "quality_checks": quality,
            "sources": [{"name": "s", "format": "oms_canal", "path": str(work / "none")}],
            "tables": history.config_tables(),
        }
        if parallelism is not None:
            conf["gold"] = {"parallelism": parallelism}
        cfg = parse_config(conf)
        wh = Warehouse.from_config(cfg)
        ensure_silver(spark, wh)
        rows = [
            ("s", "oms_canal", raw, f"f#{i}", f"p#{i:012d}", None) for i, (_p, _o, raw) in enumerate(delivery.messages)
        ]
        bronze = spark.createDataFrame(
            rows, "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
        )
        decoded = decode_frame(bronze, cfg).where("kind = 'change'").drop("kind")
        silver = str(work / "silver_in")
        decoded.write.format("delta").save(silver)
        half = len(rows) // 2
        out = {"tables": tables, "changes": len(history.changes), "batches": []}
        for batch_id, cond in enumerate((f"queue_pos < 'p#{half:012d}'", f"queue_pos >= 'p#{half:012d}'")):
            batch = spark.read.format("delta").load(silver).where(cond)
            jobs0, commits0, t0 = _jobs(spark), _commits(work / "wh"), time.perf_counter()
            _take_step_seconds()
            stats = apply_gold_batch(spark, batch, batch_id, cfg, wh, "probe")
            seconds = time.perf_counter() - t0
            jobs, commits = _jobs(spark) - jobs0, _commits(work / "wh") - commits0
            n = max(len(stats.tables), 1)
            out["batches"].append(
                {
                    "batch": batch_id,
                    "seconds": round(seconds, 1),
                    "jobs": jobs,
                    "commits": commits,
                    "tables_touched": len(stats.tables),
                    "jobs_per_table": round(jobs / n, 1),
                    "commits_per_table": round(commits / n, 1),
                    "changes": stats.changes,
                    "applied": stats.applied,
                    "stale": stats.stale,
                    "quarantined": stats.quarantined,
                    "unaccounted": stats.unaccounted,
                }
            )
            if profile:
                out["batches"][-1]["jobs_by_step"] = _jobs_by_step(spark, jobs0)
                out["batches"][-1]["seconds_by_step"] = _take_step_seconds()
        diffs = compare(delivery.expected, export_warehouse(spark, wh), history.keys(), history.column_types())
        out["model_diffs"] = len(diffs)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=2000)
    parser.add_argument("--tables", type=int, nargs="+", default=[1, 10, 25])
    parser.add_argument("--no-quality", action="store_true", help="quality_checks: false")
    parser.add_argument("--parallelism", type=int, default=None, help="gold.parallelism (default: the config's)")
    parser.add_argument("--profile", action="store_true", help="count each step's Spark jobs and seconds")
    parser.add_argument(
        "--initial-rows",
        action="store_true",
        help="the source tables hold rows before the stream starts: their UPDATEs and DELETEs find no mirror row "
        "until the full load (the drift check fails, and Great Expectations reports it)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spark = get_spark("gold-probe")
    if args.profile:
        _label_steps(spark)
    for n in args.tables:
        print(
            json.dumps(
                probe(
                    spark,
                    args.changes,
                    n,
                    not args.no_quality,
                    args.parallelism,
                    profile=args.profile,
                    initial_rows=args.initial_rows,
                )
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
