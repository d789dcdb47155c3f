"""``python -m bench [--quick] [--only SECTIONS] [--scale F] [--out DIR]``: run, record, chart, print.

Exit status 0 when every selected section ran (a missed target is a FAIL in the table, not an error),
1 when a section could not run (its error is in results.json and printed).
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from bench.env import ROOT, MemorySampler, git_info, machine_info

SECTIONS = (
    "decode", "tables", "run", "apply", "scale", "cost", "latency", "freshness", "pipeline", "new_tables", "memory",
)  # fmt: skip
GIB = 2**30

#: Full sizes (issue 14). ``--quick`` uses :data:`QUICK` (about 1%); ``--scale`` multiplies counts further.
FULL = {
    "new_tables": {"tables": 1_000, "rows_per_table": 2},
    "decode": {"messages": 200_000, "pool": 5_000, "repeat": 3},
    "tables": {"changes": 20_000, "rows": 20_000, "table_counts": [1, 50, 200]},
    "run": {"changes": 4_000, "table_counts": [1, 50, 200]},
    "apply": {"changes": 1_000_000, "rows": 1_000_000, "setup_chunk": 2_000_000, "scale_factor": 10},
    "cost": {"rows": 100_000, "changes": [1_000, 10_000, 100_000]},
    "latency": {"rate": 2000, "seconds": 60, "tables": 4, "drain": 900, "trigger": "2 seconds", "timeout": 3600},
    "freshness": {
        "hot_rate": 500,
        "cold_tables": 199,
        "cold_every": 10,
        "budget_seconds": 300,
        "seconds": 660,
        "trigger": "2 seconds",
        "timeout": 3600,
    },
    "pipeline": {
        "messages": 100_000,
        "tables": 4,
        "rate": 200,
        "seconds": 60,
        "trigger": "2 seconds",
        "drain": 600,
        "timeout": 3600,
    },
}
QUICK = {
    "new_tables": {"tables": 20, "rows_per_table": 2},
    "decode": {"messages": 2_000, "pool": 500, "repeat": 1},
    "tables": {"changes": 10_000, "rows": 10_000, "table_counts": [1, 2]},
    "run": {"changes": 400, "table_counts": [1, 2]},
    "apply": {"changes": 10_000, "rows": 10_000, "setup_chunk": 2_000_000, "scale_factor": 10},
    "cost": {"rows": 2_000, "changes": [100, 500, 2_000]},
    "latency": {"rate": 50, "seconds": 20, "tables": 1, "drain": 600, "trigger": "2 seconds", "timeout": 900},
    "freshness": {
        "hot_rate": 20,
        "cold_tables": 4,
        "cold_every": 5,
        "budget_seconds": 20,
        "seconds": 45,
        "trigger": "2 seconds",
        "timeout": 900,
    },
    "pipeline": {
        "messages": 2_000,
        "tables": 4,
        "rate": 50,
        "seconds": 20,
        "trigger": "2 seconds",
        "drain": 300,
        "timeout": 900,
    },
}
_SCALED = {("decode", "messages"), ("decode", "pool"), ("tables", "changes"), ("tables", "rows")}
_SCALED |= {("apply", "changes"), ("apply", "rows"), ("latency", "rate"), ("run", "changes")}
_SCALED |= {("pipeline", "messages"), ("pipeline", "rate")}


def sizes_for(quick: bool, scale: float, table_counts: list[int] | None) -> dict:
    sizes = copy.deepcopy(QUICK if quick else FULL)
    for section, key in _SCALED:
        value = sizes[section][key] * scale
        sizes[section][key] = max(1, round(value)) if key != "rate" else max(1.0, round(value, 1))
    sizes["decode"]["pool"] = max(50, sizes["decode"]["pool"])
    if table_counts:
        sizes["tables"]["table_counts"] = table_counts
    return sizes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="about 1%% of the full sizes (CI: proves the harness runs)")
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {', '.join(SECTIONS)}")
    p.add_argument("--scale", type=float, default=1.0, help="multiply the counts (messages, changes, rows, rate)")
    p.add_argument("--table-counts", default=None, help="table counts of the tables section, e.g. 1,10,50,200")
    p.add_argument("--no-checks", action="store_true", help="quality_checks: false (default: on, as in production)")
    p.add_argument("--out", default=str(ROOT / "build" / "bench"), help="where results.json and the PNGs go")
    p.add_argument("--fresh", action="store_true", help="start a new results.json instead of updating the sections run")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        print(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
        return 2
    counts = [int(x) for x in args.table_counts.split(",")] if args.table_counts else None
    sizes = sizes_for(args.quick, args.scale, counts)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    results_path = out / "results.json"
    results = {} if args.fresh or not results_path.exists() else json.loads(results_path.read_text())
    results.setdefault("sections", {})
    checks = not args.no_checks
    mode = "quick" if args.quick else "full"
    if args.scale != 1.0:
        mode += f" ×{args.scale:g}"

    sampler = MemorySampler().start()
    began = time.monotonic()
    print(f"[bench] {mode} run of {', '.join(only)}; results in {results_path}", flush=True)
    from pipelines.spark import get_spark

    spark = get_spark("lakecdc-bench")
    machine = machine_info(spark)
    results.update(
        {
            "schema_version": 1,
            "command": "python -m bench " + " ".join(argv if argv is not None else _argv()),
            "mode": mode,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine,
            "git": git_info(),
            "quality_checks": checks,
        }
    )
    errors = 0
    run: dict[str, dict] = {}

    def section(name: str, fn) -> dict:
        nonlocal errors
        sampler.mark(name)
        t0, load0 = time.monotonic(), machine_info()["loadavg_1_5_15"][0]
        try:
            body = fn()
        except Exception as exc:  # noqa: BLE001 - recorded, the other sections still run
            errors += 1
            traceback.print_exc()
            body = {"error": f"{type(exc).__name__}: {exc}", "verdict": "ERROR", "figures": []}
        body["seconds"] = round(time.monotonic() - t0, 1)
        body["mode"] = mode
        body["git_commit"] = results["git"]["commit"]  # a section rerun with --only keeps its own
        body["measured_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        body["loadavg_1m_before_after"] = [load0, machine_info()["loadavg_1_5_15"][0]]
        body["memory_peak"] = sampler.peak(since=t0 - began)
        run[name] = body
        return body

    if "decode" in only:
        from bench.decode import run_decode

        section("decode", lambda: {"sizes": sizes["decode"], **run_decode(spark, work / "decode", sizes["decode"])})
    if "tables" in only:
        from bench.gold_sections import run_tables

        section("tables", lambda: {"sizes": sizes["tables"], **run_tables(spark, work, sizes["tables"], checks)})
    if "run" in only:
        from bench.whole_run import run_whole

        section("run", lambda: {"sizes": sizes["run"], **run_whole(spark, work, sizes["run"], checks)})
    wanted = sorted(s for s in ("apply", "scale") if s in only)
    if wanted:
        from bench.gold_sections import run_apply_scale

        label = "+".join(wanted)
        combined = section(label, lambda: {"parts": run_apply_scale(spark, work, sizes["apply"], checks, set(wanted))})
        del run[label]
        for name in wanted:
            part = combined.get("parts", {}).get(name) or {
                "error": combined.get("error", "not run"),
                "verdict": "ERROR",
                "figures": [],
            }
            run[name] = {"sizes": sizes["apply"], **part}
            run[name].update({k: combined[k] for k in ("seconds", "mode", "measured_at", "memory_peak")})
            if len(wanted) > 1:
                run[name]["note"] = "apply and scale share the 1x mirror case; seconds are for both"
    if "cost" in only:
        from bench.cost import run_cost

        section("cost", lambda: {"sizes": sizes["cost"], **run_cost(spark, work, sizes["cost"], checks)})
    if "latency" in only:
        from bench.latency import run_latency

        section(
            "latency",
            lambda: {"sizes": sizes["latency"], **run_latency(spark, work / "latency", sizes["latency"], checks)},
        )
    if "freshness" in only:
        from bench.freshness import run_freshness

        section(
            "freshness",
            lambda: {
                "sizes": sizes["freshness"],
                **run_freshness(spark, work / "freshness", sizes["freshness"], checks),
            },
        )
    if "pipeline" in only:
        from bench.pipeline import run_pipeline_section

        section(
            "pipeline",
            lambda: {
                "sizes": sizes["pipeline"],
                **run_pipeline_section(spark, work / "pipeline", sizes["pipeline"], checks),
            },
        )
    if "new_tables" in only:
        from bench.gold_sections import run_new_tables

        section(
            "new_tables",
            lambda: {
                "sizes": sizes["new_tables"],
                **run_new_tables(spark, work / "new_tables", sizes["new_tables"], checks),
            },
        )
    sampler.sample()
    sampler.stop()
    if "memory" in only:
        run["memory"] = memory_section(sampler, machine, mode, [s for s in only if s != "memory"])
    results["sections"].update(run)
    results["seconds"] = round(time.monotonic() - began, 1)
    shutil.rmtree(work, ignore_errors=True)
    try:
        from bench.charts import draw

        results["charts"] = draw(results, out)
    except Exception as exc:  # noqa: BLE001 - the figures stay in results.json
        errors += 1
        traceback.print_exc()
        results["charts_error"] = f"{type(exc).__name__}: {exc}"
    results_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(render(results, only))
    print(f"[bench] results: {results_path}; charts: {', '.join(results.get('charts', []))} in {out}")
    return 1 if errors else 0


def _argv() -> list[str]:
    import sys

    return sys.argv[1:]


def memory_section(sampler: MemorySampler, machine: dict, mode: str, workloads: list[str]) -> dict:
    """Peak RSS over the whole run: the driver JVM (kernel high-water mark) and the Python workers."""
    peak = sampler.peak()
    driver = peak["driver_rss_bytes"] / GIB
    workers = peak["workers_rss_sum_bytes"] / GIB
    heap = machine.get("driver_memory")
    return {
        "mode": mode,
        "seconds": round(sampler.elapsed(), 1),
        "workloads": workloads,
        "peak": peak,
        "figures": [
            {
                "name": "driver JVM peak RSS",
                "value": round(driver, 2),
                "unit": "GiB",
                "compare_name": f"spark.driver.memory (heap) {heap}",
                "compare_value": _gib(heap),
                "ratio": round(driver / 4.0, 2),
                "ratio_meaning": "peak / 4 GiB target",
            },
            {
                "name": "Python workers peak RSS (sum)",
                "value": round(workers, 2),
                "unit": "GiB",
                "compare_name": f"largest single worker, of {peak['max_workers']} at most",
                "compare_value": round((peak["workers_rss_max_single_bytes"] or 0) / GIB, 2),
                "ratio": None,
                "ratio_meaning": "",
            },
        ],
        "ratio": round(driver / 4.0, 2),
        "target": {"text": "driver < 4 GiB", "max_gib": 4.0},
        "verdict": "PASS" if 0 < driver < 4.0 else "FAIL",
        "timeline": sampler.timeline(),
        "marks": sampler.section_marks,
    }


def _gib(text: str | None) -> float | None:
    if not text:
        return None
    units = {"k": 2**-20, "m": 2**-10, "g": 1, "t": 1024}
    try:
        return float(text[:-1]) * units[text[-1].lower()] if text[-1].isalpha() else float(text) / GIB
    except (KeyError, ValueError):
        return None


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and not value.is_integer():
        text = f"{value:,.2f}"
    else:
        text = f"{int(value):,}" if isinstance(value, (int, float)) else str(value)
    return f"{text} {unit}".strip()


def steps_text(case: dict) -> str:
    """A gold case's cost per batch by step: ``plan 1 job 0.41 s · decide ...`` (pipelines.gold.steps)."""
    batches = max(1, case.get("gold_batches") or 1)
    parts = []
    for name, cost in case["gold_steps"].items():
        jobs = "" if cost.get("jobs") is None else f"{cost['jobs'] / batches:.0f} jobs "
        parts.append(f"{name} {jobs}{cost['seconds'] / batches:.2f} s")
    return " · ".join(parts) + f" (per batch, {case.get('gold_jobs')} jobs in all)"


def render(results: dict, only: list[str]) -> str:
    """The figures as a text table: each next to its comparison, each section's target and verdict."""
    head = ("section", "figure", "value", "comparison", "compared value", "ratio", "target", "verdict")
    rows = []
    for name in SECTIONS:
        body = results.get("sections", {}).get(name)
        if not body:
            continue
        rerun = "" if name in only else " (earlier run)"
        target = body.get("target", {}).get("text", "")
        verdict = body.get("verdict", "")
        if body.get("error"):
            rows.append((name + rerun, "error: " + body["error"][:70], "", "", "", "", "", "ERROR"))
            continue
        figures = body.get("figures", [])
        for i, f in enumerate(figures):
            last = i == len(figures) - 1
            rows.append(
                (
                    name + rerun if i == 0 else "",
                    f["name"],
                    _fmt(f.get("value"), f.get("unit", "")),
                    f.get("compare_name", ""),
                    _fmt(f.get("compare_value"), f.get("unit", "") if f.get("unit") != "×" else "×"),
                    _fmt(f.get("ratio"), "×") if f.get("ratio") is not None else "",
                    target if last else "",
                    f"{verdict} ({body.get('mode', '')})" if last else "",
                )
            )
        for case in [*body.get("cases", []), *([body["small_case"]] if body.get("small_case") else [])]:
            if case.get("gold_steps") and not case.get("reused"):
                rows.append(
                    ("", f"gold per step, {case['tables']} table(s): {steps_text(case)}", "", "", "", "", "", "")
                )
        uses = body.get("gold_uses")
        if uses:
            rows.append(("", "gold's mirror uses: " + ", ".join(uses), "", "", "", "", "", ""))
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(str(c).ljust(w) for c, w in zip(head, widths)), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    m, g = results.get("machine", {}), results.get("git", {})
    out.append(line)
    dirty = " (+ local changes)" if g.get("dirty") else ""
    out.append(
        f"machine: {m.get('cores')} cores, {m.get('memory_gib')} GiB, Spark {m.get('spark')}, "
        f"Delta {m.get('delta_spark')}, load {m.get('loadavg_1_5_15')}; commit {str(g.get('commit'))[:12]}{dirty}; "
        f"quality checks {'on' if results.get('quality_checks') else 'off'}"
    )
    return "\n".join(out)
