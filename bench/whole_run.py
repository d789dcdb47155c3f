"""Whole runs: a ``--once`` run of the whole pipeline against its gold time, then a run with nothing new.

The same traffic as the many-tables section, but as messages: OMS Canal inserts and updates spread evenly
over 1 … N tables (:func:`bench.latency.messages`), landed as one JSON-lines file and run through bronze,
silver, gold and the checks after the run with :func:`pipelines.runner.run_pipeline` (what ``lakecdc run
--once`` and ``lakecdc replay`` call), in this process's session. Two figures per table count:

* the run's wall clock against its gold stage's seconds (bronze, silver and the checks are the rest);
* a second run over the same warehouse with no new message: every stream starts, finds nothing, stops;
  the checks look only at what the run wrote (nothing).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from bench.latency import messages
from pipelines.config import parse_config
from pipelines.runner import run_pipeline

#: A run with nothing new over the warehouse's mirrors, JVM already up (issue 31).
IDLE_TARGET = 10.0


def _say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


def whole_case(spark, work: Path, *, changes: int, tables: int, checks: bool) -> dict:
    """Land ``changes`` messages over ``tables`` tables, run the pipeline until caught up, then again."""
    shutil.rmtree(work, ignore_errors=True)
    landing = work / "landing"
    landing.mkdir(parents=True)
    (landing / "changes.jsonl").write_bytes(b"\n".join(value for _key, value in messages(changes, tables)) + b"\n")
    cfg = parse_config(
        {
            "warehouse": str(work / "warehouse"),
            "quality_checks": checks,
            "sources": [{"name": "bench", "format": "oms_canal", "path": str(landing)}],
        },
        origin="bench-run",
    )
    began = time.perf_counter()
    first = run_pipeline(spark, cfg)
    wall = time.perf_counter() - began
    began = time.perf_counter()
    again = run_pipeline(spark, cfg)
    idle = time.perf_counter() - began
    shutil.rmtree(work, ignore_errors=True)
    return {
        "changes": changes,
        "tables": tables,
        "wall_seconds": round(wall, 2),
        "stage_seconds": first.seconds,
        "gold_seconds": first.seconds.get("gold"),
        "applied": first.applied,
        "dq_results": first.dq_results,
        "idle_wall_seconds": round(idle, 2),
        "idle_stage_seconds": again.seconds,
        "idle_dq_results": again.dq_results,
    }


def run_whole(spark, work: Path, sizes: dict, checks: bool) -> dict:
    cases = []
    for n in sizes["table_counts"]:
        _say(f"run: {sizes['changes']} messages over {n} table(s), then a run with nothing new ...")
        case = whole_case(spark, work / f"run-{n}", changes=sizes["changes"], tables=n, checks=checks)
        whole, gold, idle = case["wall_seconds"], case["gold_seconds"], case["idle_wall_seconds"]
        _say(f"run: {n}: whole {whole} s (gold {gold} s); nothing new {idle} s")
        cases.append(case)
    most = cases[-1]
    ratio = most["wall_seconds"] / most["gold_seconds"] if most["gold_seconds"] else None
    figures = []
    for c in cases:
        figures.append(
            {
                "name": f"whole run, {c['tables']} table(s)",
                "value": c["wall_seconds"],
                "unit": "s",
                "compare_name": "its gold stage",
                "compare_value": c["gold_seconds"],
                "ratio": round(c["wall_seconds"] / c["gold_seconds"], 2) if c["gold_seconds"] else None,
                "ratio_meaning": "whole run / gold seconds",
            }
        )
    for c in cases:
        figures.append(
            {
                "name": f"a run with nothing new, {c['tables']} mirror(s)",
                "value": c["idle_wall_seconds"],
                "unit": "s",
                "compare_name": "target",
                "compare_value": IDLE_TARGET,
                "ratio": round(c["idle_wall_seconds"] / IDLE_TARGET, 2),
                "ratio_meaning": f"seconds / {IDLE_TARGET:g} s",
            }
        )
    idle_ok = all(c["idle_wall_seconds"] <= IDLE_TARGET for c in cases)
    return {
        "cases": cases,
        "figures": figures,
        "ratio": round(ratio, 2) if ratio is not None else None,
        "target": {
            "text": f"whole run ≤ 1.2× its gold time at {most['tables']} tables; nothing new ≤ {IDLE_TARGET:g} s",
            "max": 1.2,
            "idle_max_seconds": IDLE_TARGET,
        },
        "verdict": "PASS" if ratio is not None and ratio <= 1.2 and idle_ok else "FAIL",
    }
