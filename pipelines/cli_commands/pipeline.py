"""The pipeline commands: ``run``, ``status``, ``rebuild``, ``replay`` and ``export``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.cli_commands.shared import (
    context_config,
    holding_warehouse,
    progress_line,
    reporting_batches,
    target_warehouse,
)

if TYPE_CHECKING:
    from pipelines.config import PipelineConfig


def cmd_run(args: argparse.Namespace) -> int:
    from pipelines.config import STAGES, load_config
    from pipelines.spark import get_spark

    cfg = with_locations(load_config(args.conf), args)
    stages = STAGES if args.stage == "all" else (args.stage,)
    available_now = args.once or cfg.trigger == "available_now"
    with holding_warehouse(cfg, "run", args.wait):
        spark = get_spark("lakecdc-run", master=args.master)
        from pipelines.runner import run_pipeline

        with reporting_batches(spark, enabled=available_now) as progress:
            summary = run_pipeline(spark, cfg, stages, available_now, progress=progress)
    skipped = f", {summary.skipped} of tables left out (include/exclude)" if summary.skipped else ""
    print(  # the result: stdout (progress went to stderr)
        f"finished {', '.join(summary.stages)}: {summary.applied} changes applied, {summary.stale} stale "
        f"skipped, {summary.gold_quarantined} quarantined in gold{skipped}"
    )
    return 0


def with_locations(cfg: PipelineConfig, args: argparse.Namespace) -> PipelineConfig:
    """``cfg`` with ``--catalog``/``--schema``/``--checkpoints`` over its own: one file serves every target
    of the Databricks bundle, and each target's tables and checkpoints stay its own."""
    from dataclasses import replace

    from pipelines.config import check_locations

    given = {name: value for name in ("catalog", "schema", "checkpoints") if (value := getattr(args, name))}
    return check_locations(replace(cfg, **given))


def cmd_status(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from pipelines.config import load_config
    from pipelines.spark import get_spark
    from pipelines.status import collect_status, render

    cfg = with_locations(load_config(args.conf), args)
    flags = ("max_lag_seconds", "max_staleness_seconds")
    thresholds = replace(cfg.status, **{n: v for n in flags if (v := getattr(args, n)) is not None})
    spark = get_spark("lakecdc-status", master=args.master)
    status = collect_status(spark, cfg, thresholds)
    print(json.dumps(status.to_json(), ensure_ascii=False, indent=2) if args.json else render(status))
    return 0 if status.ok else 1


def cmd_rebuild(args: argparse.Namespace) -> int:
    from pipelines.config import load_config
    from pipelines.runner import rebuild
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    cfg = with_locations(load_config(args.conf), args)
    spark = get_spark("lakecdc-rebuild", master=args.master)
    if not args.yes:
        for item in Warehouse.from_config(cfg).derived(spark):
            print(f"would drop {item}")
        print("nothing dropped: add --yes to rebuild silver and gold from bronze")
        return 1
    with holding_warehouse(cfg, "rebuild", args.wait), reporting_batches(spark) as progress:
        summary = rebuild(spark, cfg, progress=progress)
    print(  # the result: stdout (progress went to stderr)
        f"rebuilt {', '.join(summary.stages)} from bronze: {summary.applied} changes applied, {summary.stale} "
        f"stale skipped, {summary.gold_quarantined} quarantined in gold"
    )
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    import hashlib
    import shutil
    from dataclasses import replace

    from pipelines.config import replay_source
    from pipelines.runner import run_pipeline
    from pipelines.silver import reconcile
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    src = Path(args.input)
    if not src.is_file():
        raise FileNotFoundError(f"--input {src}: no such file")
    warehouse = Path(args.warehouse).resolve()
    landing = warehouse / "_landing" / f"replay_{args.format}"
    cfg = context_config(args, args.format)  # the file's sources: the replayed one keeps its options
    source = replay_source(cfg, args.format, str(landing), getattr(args, "source", None))
    cfg = replace(cfg, sources=(source,), warehouse=str(warehouse))
    landing.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    target = landing / f"{src.stem}-{digest}.jsonl"
    if target.exists():
        progress_line(f"{src} was landed before as {target.name}: nothing new to apply")
    else:
        shutil.copyfile(src, target)
    with holding_warehouse(cfg, "replay", args.wait):
        spark = get_spark("lakecdc-replay", master=args.master)
        with reporting_batches(spark) as progress:
            summary = run_pipeline(spark, cfg, available_now=True, progress=progress)
        counts = reconcile(spark, Warehouse.from_config(cfg))
    print(
        f"replayed {src}: {counts['bronze_messages']} messages in bronze; {counts['changes']} with row changes, "
        f"{counts['heartbeats']} heartbeats, {counts['ddl_log']} DDL, {counts['quarantine']} quarantined, "
        f"{counts['skipped']} with changes of skipped tables; "
        f"this run applied {summary.applied} changes ({summary.stale} stale skipped, "
        f"{summary.gold_quarantined} quarantined in gold"
        + (f", {summary.filtered} outside a where)" if summary.filtered else ")")
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pipelines.export import export_warehouse
    from pipelines.spark import get_spark

    wh, _cfg = target_warehouse(args)
    spark = get_spark("lakecdc-export", master=args.master)
    if getattr(args, "as_of_consistent", False):
        from pipelines.consistent import export_consistent

        result = export_consistent(spark, wh, args.table, args.source, args.with_system_columns)
        print(json.dumps(result, ensure_ascii=False, indent=None))
        return 0
    certified = getattr(args, "certified", False)
    result = export_warehouse(spark, wh, args.table, args.with_system_columns, certified=certified)
    print(json.dumps(result, ensure_ascii=False, indent=None))
    return 0
