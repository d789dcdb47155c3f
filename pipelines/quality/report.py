"""``lakecdc dq report``: a per-table summary of ``dq_results`` over a window (default: the last day) as
text or JSON, and its chart as a PNG: one point per checked batch, joined by a line only where batches
follow each other closely (:data:`JOIN_GAP`), so runs far apart never read as a trend."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.quality.storage import dq_results_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import Warehouse

#: The window when none is given.
DEFAULT_WINDOW = _dt.timedelta(days=1)
#: Points of one table closer than this are joined by a line; farther apart they stand alone.
JOIN_GAP = _dt.timedelta(minutes=10)


def _results(spark: SparkSession, warehouse: Warehouse | str, since: _dt.timedelta | None) -> DataFrame | None:
    """dq_results checked within ``since`` of now (None: all of it); None when there is no table yet."""
    from pyspark.sql import functions as F

    ref = dq_results_ref(warehouse)
    if not ref.exists(spark):
        return None
    df = ref.read(spark)
    if since is not None:
        start = _dt.datetime.now() - since  # naive local, as Spark compares a TIMESTAMP with it
        df = df.where(F.col("checked_at") >= F.lit(start))
    return df


def _window_text(since: _dt.timedelta | None) -> str:
    if since is None:
        return "all results"
    secs = since.total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if secs >= size and secs % size == 0:
            n = int(secs // size)
            return f"the last {n} {unit}{'s' if n != 1 else ''}" if n != 1 else f"the last {unit}"
    return f"the last {int(secs)} seconds"


def _summary(df: DataFrame) -> list[Any]:
    """One row per table (checks, passed, failures, quarantined, last checked)."""
    from pyspark.sql import functions as F

    return (
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


def _failing(df: DataFrame) -> list[Any]:
    from pyspark.sql import functions as F

    return (
        df.where("NOT success OR success IS NULL")
        .groupBy("table", "expectation", "action")
        .agg(F.count(F.lit(1)).alias("times"), F.sum(F.coalesce("unexpected_count", F.lit(0))).alias("rows"))
        .orderBy("table", "expectation")
        .collect()
    )


def summary_json(spark: SparkSession, warehouse: Warehouse | str, since: _dt.timedelta | None = DEFAULT_WINDOW) -> dict:
    """``dq report --json``: the window and, per table, the figures :func:`report` prints."""
    df = _results(spark, warehouse, since)
    doc: dict[str, Any] = {"window_seconds": since.total_seconds() if since else None, "tables": [], "failing": []}
    if df is None:
        return doc
    for r in _summary(df):
        doc["tables"].append(
            {
                "table": r["table"],
                "checks": r["checks"],
                "passed": r["passed"],
                "pass_rate": round(100.0 * r["passed"] / r["checks"], 1) if r["checks"] else None,
                "failures": r["failures"],
                "quarantined": r["quarantined"],
                "last_checked": r["last_checked"].isoformat() if r["last_checked"] else None,
            }
        )
    doc["failing"] = [
        {"table": r["table"], "check": r["expectation"], "action": r["action"], "times": r["times"], "rows": r["rows"]}
        for r in _failing(df)
    ]
    return doc


def report(spark: SparkSession, warehouse: Warehouse | str, since: _dt.timedelta | None = DEFAULT_WINDOW) -> str:
    """Per table over the window: checks run, pass rate, failures, quarantined changes, and the failing checks."""
    df = _results(spark, warehouse, since)
    if df is None:
        return f"no data-quality results yet ({dq_results_ref(warehouse).path or dq_results_ref(warehouse).name})"
    rows = _summary(df)
    window = f"data quality over {_window_text(since)}"
    if not rows:
        return f"{window}: no checks ran in that window"
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

    lines = [window, "", fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body]
    failing = _failing(df)
    if failing:
        lines += ["", "failing checks:"]
        lines += [
            f"  {r['table']}: {r['expectation']} ({r['action']}) failed {r['times']}x, {r['rows']} rows"
            for r in failing
        ]
    return "\n".join(lines)


def segments(times: list[_dt.datetime], gap: _dt.timedelta = JOIN_GAP) -> list[tuple[int, int]]:
    """Index ranges [start, end) of ``times`` (sorted) whose neighbours are within ``gap``: each is a line,
    a range of one a lone point."""
    out, start = [], 0
    for i in range(1, len(times) + 1):
        if i == len(times) or times[i] - times[i - 1] > gap:
            out.append((start, i))
            start = i
    return out


def chart(
    spark: SparkSession,
    warehouse: Warehouse | str,
    png_path: str | os.PathLike,
    since: _dt.timedelta | None = DEFAULT_WINDOW,
) -> str:
    """PNG: pass rate (%) and quarantined changes per table over the window, one point per checked batch;
    lines join only points within :data:`JOIN_GAP` of each other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pyspark.sql import functions as F

    png = Path(png_path)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    df = _results(spark, warehouse, since)
    if df is not None:
        pts = (
            df.groupBy("table", "run_id", "batch_id")
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
        for n, tbl in enumerate(tables):
            mine = [p for p in pts if p["table"] == tbl]
            ts = [p["t"] for p in mine]
            color = f"C{n % 10}"
            ax1.scatter(ts, [p["pass_rate"] for p in mine], marker="o", color=color, label=tbl, zorder=3)
            ax2.scatter(ts, [p["quarantined"] for p in mine], marker="s", color=color, zorder=3)
            for a, b in segments(ts):
                if b - a > 1:
                    ax1.plot(ts[a:b], [p["pass_rate"] for p in mine[a:b]], color=color, linewidth=1)
                    ax2.plot(ts[a:b], [p["quarantined"] for p in mine[a:b]], color=color, linewidth=1)
        if tables:
            ax1.legend(loc="lower left", fontsize=8)
    ax1.set_ylabel("pass rate (%)")
    ax1.set_ylim(-5, 105)
    ax1.set_title(f"Data quality per table, {_window_text(since)} (one point per checked batch)")
    ax2.set_ylabel("quarantined changes")
    ax2.set_xlabel("checked at")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return str(png)
