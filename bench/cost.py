"""The ``cost`` section: gold's fixed and per-change cost beside the naive MERGE's and the AUTO CDC shape's.

One 100,000-row mirror (quick: smaller), and one measured batch of 1,000, 10,000 and 100,000 changes into it,
each through gold, the naive MERGE and the AUTO CDC shape (:func:`bench.gold_sections.gold_case`). A line
``seconds = fixed + per_change × changes`` is fitted by least squares for each, and the time Spark spent
compiling generated code during gold's batch is printed beside it: a plan whose text changes from batch to
batch compiles again every batch (issue 39).
"""

from __future__ import annotations

from pathlib import Path

from bench.gold_sections import gold_case

#: Targets (issue 39): one batch of the largest size, gold / naive MERGE seconds.
COST_TARGET = 1.25


def fit(points: list[tuple[float, float]]) -> dict:
    """Least-squares ``y = fixed + slope × x`` over ``points`` (x: changes, y: seconds); slope per 1,000 changes."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return {"fixed_seconds": round(my - slope * mx, 3), "ms_per_1000_changes": round(slope * 1e6, 2)}


def codegen_seconds(spark) -> float | None:
    """Seconds the driver's JVM has spent compiling generated code so far (Spark's ``CodeGenerator.compileTime``,
    nanoseconds); None where the JVM is out of reach (Spark Connect)."""
    try:
        gen = spark.sparkContext._jvm.org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator
        return gen.compileTime() / 1e9
    except Exception:  # noqa: BLE001 - a figure for people, not a result
        return None


def compiled_since(spark, before: float | None) -> float | None:
    """Seconds spent compiling generated code since :func:`codegen_seconds` gave ``before`` (2 decimals); None
    where either reading is out of reach."""
    after = codegen_seconds(spark)
    return None if before is None or after is None else round(after - before, 2)


def gold_codegen_on() -> None:
    """Gold's batches keep generated code on from here (this process): its small-batch settings without
    :data:`~pipelines.gold.settings.CODEGEN_SWITCHES`. A batch's settings read ``small_batch_conf`` by its name in
    :mod:`pipelines.gold.batch_run`, so that is replaced."""
    import pipelines.gold.batch_run as batch_run
    from pipelines.gold.settings import CODEGEN_SWITCHES, small_batch_conf

    batch_run.small_batch_conf = lambda spark: {
        k: v for k, v in small_batch_conf(spark).items() if k not in CODEGEN_SWITCHES
    }


def run_cost(spark, work: Path, sizes: dict, checks: bool) -> dict:
    """Every size through the three jobs, the fits, and the verdict at the largest size."""
    cases = []
    # a first case of its own, not measured: the JVM's warm-up (class loading, JIT) would fall on the smallest
    # batch and make the fitted fixed cost larger and the cost per change smaller than they are
    gold_case(spark, work / "cost_warmup", rows=min(1_000, sizes["rows"]), changes=sizes["changes"][0], tables=1,
              checks=checks, setup_chunk=sizes["rows"], anchor=True)  # fmt: skip
    for changes in sizes["changes"]:
        before = codegen_seconds(spark)
        case = gold_case(
            spark, work / f"cost_{changes}", rows=sizes["rows"], changes=changes, tables=1, checks=checks,
            setup_chunk=sizes["rows"], anchor=True,
        )  # fmt: skip
        case["codegen_seconds"] = compiled_since(spark, before)
        cases.append(case)
        print(
            f"[bench] cost: {changes} changes: gold {case['gold_seconds']} s, naive {case['naive_seconds']} s, "
            f"AUTO CDC shape {case['autocdc_seconds']} s; codegen during the case {case['codegen_seconds']} s",
            flush=True,
        )
    fits = {
        job: fit([(c["changes"], c[f"{job}_seconds"]) for c in cases if c.get(f"{job}_seconds") is not None])
        for job in ("gold", "naive", "autocdc")
    }
    largest = cases[-1]
    ratio = largest["gold_seconds"] / largest["naive_seconds"] if largest["naive_seconds"] else None
    figures = []
    for c in cases:
        figures.append(
            {"name": f"gold, {c['changes']} changes into {c['rows']} rows", "value": c["gold_seconds"], "unit": "s",
             "compare_name": "naive MERGE", "compare_value": c["naive_seconds"],
             "ratio": round(c["gold_seconds"] / c["naive_seconds"], 2) if c["naive_seconds"] else None}
        )  # fmt: skip
        figures.append(
            {"name": f"gold, {c['changes']} changes, beside the AUTO CDC shape", "value": c["gold_seconds"],
             "unit": "s", "compare_name": "AUTO CDC shape", "compare_value": c["autocdc_seconds"],
             "ratio": round(c["gold_seconds"] / c["autocdc_seconds"], 2) if c["autocdc_seconds"] else None}
        )  # fmt: skip
    for job, f in fits.items():
        figures.append({"name": f"{job}: fixed cost per batch (fit)", "value": f["fixed_seconds"], "unit": "s"})
        figures.append(
            {"name": f"{job}: cost per 1,000 changes (fit)", "value": f["ms_per_1000_changes"], "unit": "ms"}
        )
    return {
        "cases": cases,
        "fits": fits,
        "figures": figures,
        "target": {
            "text": f"gold ≤ {COST_TARGET}× the naive MERGE at {largest['changes']} changes",
            "value": COST_TARGET,
        },
        "verdict": "PASS" if ratio is not None and ratio <= COST_TARGET else "FAIL",
    }
