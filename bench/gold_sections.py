"""The gold sections: many tables, apply, scale. Each gold figure stands next to the naive MERGE's.

Every case has its own warehouse under the work dir: a setup batch (the mirrors' initial rows, through
gold as well, so the mirrors are gold's own) and then the measured batch, one micro-batch of gold. The
naive mirrors get the same initial rows written directly, then the same measured changes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from bench.changes import (
    append_changes,
    autocdc_tables,
    bench_config,
    changes_frame,
    mirror_features,
    naive_tables,
    run_autocdc,
    run_gold,
    run_naive,
)
from pipelines.warehouse import Warehouse


def _say(msg: str) -> None:
    print(f"[bench] {msg}", flush=True)


def gold_case(
    spark,
    work: Path,
    *,
    rows: int,
    changes: int,
    tables: int,
    checks: bool,
    setup_chunk: int,
    batch_keys: int | None = None,
    anchor: bool = False,
) -> dict:
    """Mirror(s) of ``rows`` rows over ``tables`` tables, then one measured batch of ``changes`` (updating and
    deleting keys ``1 … batch_keys``, default all of them); gold and naive. A case already measured in this
    run (the 1-table case of ``tables`` is ``apply``'s when their sizes agree, as in ``--quick``) is reused.
    ``anchor``: the same batch through Spark's AUTO CDC shape too (:func:`bench.changes.autocdc_batch`)."""
    memo = (rows, changes, tables, checks, min(setup_chunk, rows), batch_keys or rows)
    if memo in _CASES and (_CASES[memo]["autocdc_seconds"] is not None or not anchor):
        return {**_CASES[memo], "reused": True}
    shutil.rmtree(work, ignore_errors=True)
    cfg = bench_config(work / "warehouse", checks)
    setup_cfg = bench_config(work / "warehouse", False)  # the initial rows: no need to check them
    wh = Warehouse.from_config(cfg)
    began = time.perf_counter()
    for start in range(0, rows, setup_chunk):  # the initial rows, through gold, in chunks
        n = min(setup_chunk, rows - start)
        append_changes(spark, wh, changes_frame(spark, n, tables=tables, seq_base=10**15 + start, first_key=start + 1))
        run_gold(spark, setup_cfg)
    setup = time.perf_counter() - began
    version = append_changes(spark, wh, changes_frame(spark, changes, tables=tables, existing=batch_keys or rows))
    gold = run_gold(spark, cfg)
    naive_root = work / "naive"
    naive_tables(spark, naive_root, rows, tables)
    naive = run_naive(spark, wh, naive_root, version, work / "naive_checkpoint")
    autocdc = None
    if anchor:  # the tables section's cases: the AUTO CDC shape beside them
        autocdc_root = work / "autocdc"
        autocdc_tables(spark, autocdc_root, rows, tables)
        autocdc = run_autocdc(spark, wh, autocdc_root, version, work / "autocdc_checkpoint")
    out = {
        "rows": rows,
        "changes": changes,
        "tables": tables,
        "setup_seconds": round(setup, 2),
        "gold_seconds": round(gold.batch_seconds, 2),
        "gold_wall_seconds": round(gold.wall, 2),
        "gold_batches": gold.batches,
        "gold_jobs": gold.jobs,
        "gold_commits": gold.commits,
        "gold_stats": gold.stats,
        "gold_steps": gold.stats.get("steps", {}),
        "naive_seconds": round(naive.batch_seconds, 2),
        "naive_wall_seconds": round(naive.wall, 2),
        "naive_jobs": naive.jobs,
        "autocdc_seconds": round(autocdc.batch_seconds, 2) if autocdc else None,
        "autocdc_jobs": autocdc.jobs if autocdc else None,
        "features": _features(spark, work),
    }
    shutil.rmtree(work, ignore_errors=True)
    _CASES[memo] = out
    return out


#: Targets (issue 31): gold / naive seconds per batch at 1 table and at more, a small batch / one MERGE,
#: and gold's apply speed / naive's.
TABLES_TARGET_ONE, TABLES_TARGET_MANY, SMALL_BATCH_TARGET, APPLY_TARGET = 1.5, 1.0, 2.0, 0.8
#: Cases measured in this run (see :func:`gold_case`).
_CASES: dict[tuple, dict] = {}


def forget_cases() -> None:
    """The cases measured so far are measured again when asked for (:mod:`bench.codegen_cases`)."""
    _CASES.clear()


def run_tables(spark, work: Path, sizes: dict, checks: bool) -> dict:
    """The same changes over 1 … N tables: gold seconds per batch, and the naive MERGE per table (the
    target, issue 27: gold no slower than naive at any table count)."""
    cases = []
    for n in sizes["table_counts"]:
        _say(f"tables: {sizes['changes']} changes over {n} table(s) ...")
        case = gold_case(
            spark,
            work / f"gold-{n}",
            rows=sizes["rows"],
            changes=sizes["changes"],
            tables=n,
            checks=checks,
            setup_chunk=sizes["rows"],
            anchor=True,
        )
        _say(f"tables: {n}: gold {case['gold_seconds']} s, naive {case['naive_seconds']} s")
        cases.append(case)
    one, most = cases[0], cases[-1]
    ratio = most["gold_seconds"] / one["gold_seconds"] if one["gold_seconds"] else None
    figures = [
        {
            "name": f"gold, {c['tables']} table(s)",
            "value": c["gold_seconds"],
            "unit": "s/batch",
            "compare_name": "naive MERGE per table",
            "compare_value": c["naive_seconds"],
            "ratio": round(c["gold_seconds"] / c["naive_seconds"], 2) if c["naive_seconds"] else None,
            "ratio_meaning": "gold / naive seconds",
        }
        for c in cases
    ]
    naive_ratio = most["naive_seconds"] / one["naive_seconds"] if one["naive_seconds"] else None
    figures.append(
        {
            "name": f"gold {most['tables']} tables / 1 table",
            "value": round(ratio, 2) if ratio is not None else None,
            "unit": "×",
            "compare_name": f"naive {most['tables']} tables / 1 table",
            "compare_value": round(naive_ratio, 2) if naive_ratio is not None else None,
            "ratio": round(ratio, 2) if ratio is not None else None,
            "ratio_meaning": "gold seconds at the most tables / at 1 table",
        }
    )
    small_changes = sizes.get("small_changes", 100)
    _say(f"tables: one small batch, {small_changes} changes into 1 table ...")
    small = gold_case(
        spark, work / "gold-small", rows=min(sizes["rows"], 1_000), changes=small_changes, tables=1,
        checks=checks, setup_chunk=sizes["rows"], batch_keys=min(sizes["rows"], small_changes), anchor=True,
    )  # fmt: skip
    small_ratio = small["gold_seconds"] / small["naive_seconds"] if small["naive_seconds"] else None
    figures.append(
        {
            "name": f"gold, one batch of {small_changes} changes, 1 table",
            "value": small["gold_seconds"],
            "unit": "s/batch",
            "compare_name": "one naive MERGE of the same batch",
            "compare_value": small["naive_seconds"],
            "ratio": round(small_ratio, 2) if small_ratio is not None else None,
            "ratio_meaning": "gold / naive seconds",
        }
    )
    limits = [(f, TABLES_TARGET_ONE if c["tables"] == 1 else TABLES_TARGET_MANY) for f, c in zip(figures, cases)]
    limits.append((figures[-1], SMALL_BATCH_TARGET))
    missed = [f["name"] for f, limit in limits if f["ratio"] is None or f["ratio"] > limit]
    worst = max((f["ratio"] for f, _ in limits if f["ratio"] is not None), default=None)
    figures += [_autocdc_figure(c, f"{c['tables']} table(s)") for c in cases]
    figures.append(_autocdc_figure(small, f"one batch of {small_changes} changes"))
    return {
        "cases": cases,
        "small_case": small,
        "figures": figures,
        "ratio": worst,
        "target": {
            "text": f"gold ≤ {TABLES_TARGET_ONE}× naive at 1 table, ≤ {TABLES_TARGET_MANY}× at more; "
            f"a small batch ≤ {SMALL_BATCH_TARGET}× one MERGE",
            "max": TABLES_TARGET_MANY,
            "missed": missed,
        },
        "verdict": _verdict(not missed),
    }


def _autocdc_figure(case: dict, what: str) -> dict:
    """The AUTO CDC shape's seconds for a case beside the naive MERGE's: what the anchor design costs by itself
    (:func:`bench.changes.autocdc_batch`: two MERGEs a table, no checks), so gold's ratio reads against it."""
    seconds, naive = case.get("autocdc_seconds"), case["naive_seconds"]
    return {
        "name": f"Spark AUTO CDC shape (tombstones + mirror MERGE), {what}",
        "value": seconds,
        "unit": "s/batch",
        "compare_name": "naive MERGE per table",
        "compare_value": naive,
        "ratio": round(seconds / naive, 2) if seconds and naive else None,
        "ratio_meaning": "AUTO CDC shape / naive seconds",
    }


def run_apply_scale(spark, work: Path, sizes: dict, checks: bool, sections: set[str]) -> dict[str, dict]:
    """Apply (batch into a mirror of ``rows``) and scale (the same batch into one 10× larger)."""
    out: dict[str, dict] = {}
    small = None
    if "apply" in sections or "scale" in sections:
        _say(f"apply: {sizes['changes']} changes into a {sizes['rows']}-row mirror ...")
        small = gold_case(
            spark,
            work / "gold-1",
            rows=sizes["rows"],
            changes=sizes["changes"],
            tables=1,
            checks=checks,
            setup_chunk=sizes["setup_chunk"],
        )
        _say(f"apply: gold {small['gold_seconds']} s, naive {small['naive_seconds']} s")
    if "apply" in sections and small is not None:
        speed = small["naive_seconds"] / small["gold_seconds"] if small["gold_seconds"] else None
        out["apply"] = {
            "cases": [small],
            "figures": [
                {
                    "name": "gold apply",
                    "value": round(small["changes"] / small["gold_seconds"]) if small["gold_seconds"] else None,
                    "unit": "changes/s",
                    "compare_name": "naive foreachBatch MERGE",
                    "compare_value": round(small["changes"] / small["naive_seconds"])
                    if small["naive_seconds"]
                    else None,
                    "ratio": round(speed, 2) if speed is not None else None,
                    "ratio_meaning": "gold speed / naive speed",
                }
            ],
            "ratio": round(speed, 2) if speed is not None else None,
            "target": {"text": f"gold ≥ {APPLY_TARGET}× the naive MERGE's speed", "min": APPLY_TARGET},
            "verdict": _verdict(speed is not None and speed >= APPLY_TARGET),
        }
    if "scale" in sections and small is not None:
        big_rows = sizes["rows"] * sizes["scale_factor"]
        _say(f"scale: the same {sizes['changes']} changes into a {big_rows}-row mirror ...")
        big = gold_case(
            spark,
            work / "scale",
            rows=big_rows,
            changes=sizes["changes"],
            tables=1,
            checks=checks,
            setup_chunk=sizes["setup_chunk"],
            batch_keys=sizes["rows"],  # the same batch as into the smaller mirror
        )
        _say(f"scale: gold {big['gold_seconds']} s, naive {big['naive_seconds']} s")
        ratio = big["gold_seconds"] / small["gold_seconds"] if small["gold_seconds"] else None
        naive_ratio = big["naive_seconds"] / small["naive_seconds"] if small["naive_seconds"] else None
        feats = big["features"]
        uses = [
            name
            for name, on in (
                ("file pruning", feats.get("file_pruning")),
                ("liquid clustering", feats.get("liquid_clustering")),
                ("deletion vectors", feats.get("deletion_vectors")),
            )
            if on
        ]
        out["scale"] = {
            "cases": [small, big],
            "figures": [
                {
                    "name": f"gold, {small['rows']}-row mirror",
                    "value": small["gold_seconds"],
                    "unit": "s/batch",
                    "compare_name": "naive MERGE",
                    "compare_value": small["naive_seconds"],
                    "ratio": round(small["gold_seconds"] / small["naive_seconds"], 2)
                    if small["naive_seconds"]
                    else None,
                    "ratio_meaning": "gold / naive seconds",
                },
                {
                    "name": f"gold, {big_rows}-row mirror",
                    "value": big["gold_seconds"],
                    "unit": "s/batch",
                    "compare_name": "naive MERGE",
                    "compare_value": big["naive_seconds"],
                    "ratio": round(big["gold_seconds"] / big["naive_seconds"], 2) if big["naive_seconds"] else None,
                    "ratio_meaning": "gold / naive seconds",
                },
                {
                    "name": f"gold {sizes['scale_factor']}× mirror / 1× mirror",
                    "value": round(ratio, 2) if ratio is not None else None,
                    "unit": "×",
                    "compare_name": "naive, the same",
                    "compare_value": round(naive_ratio, 2) if naive_ratio is not None else None,
                    "ratio": round(ratio, 2) if ratio is not None else None,
                    "ratio_meaning": "gold seconds, larger mirror / smaller",
                },
            ],
            "ratio": round(ratio, 2) if ratio is not None else None,
            "target": {"text": f"a {sizes['scale_factor']}× larger mirror ≤ 2× the time", "max": 2.0},
            "verdict": _verdict(ratio is not None and ratio <= 2.0),
            "gold_uses": uses or ["no file pruning, clustering or deletion vectors"],
        }
    return out


def _features(spark, work: Path) -> dict:
    wh = Warehouse(str(work / "warehouse"))
    paths = wh.mirror_paths()
    return mirror_features(spark, paths[0]) if paths else {}


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def run_new_tables(spark, work: Path, sizes: dict, checks: bool) -> dict:
    """One batch naming ``tables`` tables gold has never seen (``limits.new_mirrors_per_batch`` raised to let it
    make them all): seconds per new mirror, and the batch's cost by step (issue 35: a stream naming thousands of
    new tables must not hold gold for an hour without a word; the limit, default 100, bounds one batch)."""
    tables = sizes["tables"]
    shutil.rmtree(work, ignore_errors=True)
    cfg = bench_config(work / "warehouse", checks, limits={"new_mirrors_per_batch": tables})
    wh = Warehouse.from_config(cfg)
    _say(f"new_tables: one batch of {tables} new tables ...")
    append_changes(spark, wh, changes_frame(spark, tables * sizes["rows_per_table"], tables=tables, seq_base=10**15))
    gold = run_gold(spark, cfg)
    shutil.rmtree(work, ignore_errors=True)
    per_table = gold.batch_seconds / tables
    _say(f"new_tables: {tables} mirrors in {gold.batch_seconds:.1f} s, {per_table:.2f} s each")
    case = {"tables": tables, "gold_seconds": round(gold.batch_seconds, 2), "gold_batches": gold.batches,
            "gold_jobs": gold.jobs, "gold_steps": gold.stats.get("steps", {}), "gold_stats": gold.stats}  # fmt: skip
    return {
        "cases": [case],
        "figures": [
            {
                "name": f"one batch of {tables} new tables",
                "value": round(per_table, 3),
                "unit": "s/new mirror",
                "compare_name": "",
                "compare_value": None,
                "ratio": None,
                "ratio_meaning": "seconds per mirror: a batch making the default limit (100) spends 100 times that",
            }
        ],
        "ratio": None,
        "target": {"text": "shown, not a target: seconds per new mirror (limits.new_mirrors_per_batch bounds a batch)"},
        "verdict": "PASS" if gold.stats.get("tables") == tables else "FAIL",
    }
