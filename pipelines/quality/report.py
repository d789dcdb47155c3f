"""``lakecdc dq report``: a per-table summary of ``dq_results`` as text, and its chart as a PNG."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.quality.storage import dq_results_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import Warehouse


def _summary(spark: SparkSession, warehouse: Warehouse | str) -> tuple[DataFrame, list[Any]] | None:
    """dq_results and one row per table (checks, passed, failures, quarantined, last checked)."""
    from pyspark.sql import functions as F

    ref = dq_results_ref(warehouse)
    if not ref.exists(spark):
        return None
    df = ref.read(spark)
    return df, (
        df.groupBy("table")
        .agg(
            F.count(F.lit(1)).alias("checks"),
            F.sum(F.when(F.col("success"), 1).otherwise(0)).alias("passed"),
            F.sum(F.when(~F.col("success") | F.col("success").isNull(), 1).otherwise(0)).alias("failures"),
            F.sum(F.when((F.col("action") == "drop"), F.coalesce("unexpected_count", F.lit(0))).otherwise(0)).alias(
                "quarantined"
            ),
            F.max("checked_at").alias("last_checked"),
        )
        .orderBy("table")
        .collect()
    )


def report(spark: SparkSession, warehouse: Warehouse | str) -> str:
    """Per table: checks run, pass rate, failures, quarantined changes, and the failing checks."""
    from pyspark.sql import functions as F

    got = _summary(spark, warehouse)
    if got is None:
        return f"no data-quality results yet ({dq_results_ref(warehouse).path or dq_results_ref(warehouse).name})"
    df, rows = got
    head = ("table", "checks", "pass rate", "failures", "quarantined", "last checked")
    body = [
        (
            r["table"],
            str(r["checks"]),
            f"{100.0 * r['passed'] / r['checks']:.1f}%" if r["checks"] else "-",
            str(r["failures"]),
            str(r["quarantined"]),
            r["last_checked"].strftime("%Y-%m-%d %H:%M:%S") if r["last_checked"] else "-",
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]

    def fmt(cells: Any) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body]
    failing = (
        df.where("NOT success OR success IS NULL")
        .groupBy("table", "expectation", "action")
        .agg(F.count(F.lit(1)).alias("times"), F.sum(F.coalesce("unexpected_count", F.lit(0))).alias("rows"))
        .orderBy("table", "expectation")
        .collect()
    )
    if failing:
        lines += ["", "failing checks:"]
        lines += [
            f"  {r['table']}: {r['expectation']} ({r['action']}) failed {r['times']}x, {r['rows']} rows"
            for r in failing
        ]
    return "\n".join(lines)


def chart(spark: SparkSession, warehouse: Warehouse | str, png_path: str | os.PathLike) -> str:
    """PNG: pass rate (%) and quarantined changes per table over time, one point per batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pyspark.sql import functions as F

    ref = dq_results_ref(warehouse)
    png = Path(png_path)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if ref.exists(spark):
        pts = (
            ref.read(spark)
            .groupBy("table", "run_id", "batch_id")
            .agg(
                F.min("checked_at").alias("t"),
                (100.0 * F.avg(F.when(F.col("success"), 1.0).otherwise(0.0))).alias("pass_rate"),
                F.sum(F.when(F.col("action") == "drop", F.coalesce("unexpected_count", F.lit(0))).otherwise(0)).alias(
                    "quarantined"
                ),
            )
            .orderBy("t")
            .collect()
        )
        tables = sorted({p["table"] for p in pts})
        for tbl in tables:
            mine = [p for p in pts if p["table"] == tbl]
            ts = [p["t"] for p in mine]
            ax1.plot(ts, [p["pass_rate"] for p in mine], marker="o", label=tbl)
            ax2.plot(ts, [p["quarantined"] for p in mine], marker="s", label=tbl)
        if tables:
            ax1.legend(loc="lower left", fontsize=8)
    ax1.set_ylabel("pass rate (%)")
    ax1.set_ylim(-5, 105)
    ax1.set_title("Data quality per table")
    ax2.set_ylabel("quarantined changes")
    ax2.set_xlabel("checked at")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return str(png)
