"""The lineage commands: ``why`` (every change of one key and what became of it) and ``erase`` (one key's
values out of every layer)."""

from __future__ import annotations

import argparse
import json

from pipelines.cli_commands.shared import holding_warehouse, progress_line, target_warehouse


def cmd_why(args: argparse.Namespace) -> int:
    from pipelines.spark import get_spark
    from pipelines.why import explain_key, parse_key, render

    values = parse_key(args.key)
    wh, cfg = target_warehouse(args)
    spark = get_spark("lakecdc-why", master=args.master)
    report = explain_key(spark, wh, cfg, args.table, values)
    print(json.dumps(report.to_json(), ensure_ascii=False, indent=2, default=str) if args.json else render(report))
    return 0 if report.changes or report.now else 1


def cmd_erase(args: argparse.Namespace) -> int:
    import getpass

    from pipelines.erase import erase_key, plan_erase, render_plan, render_result
    from pipelines.spark import get_spark
    from pipelines.why import parse_key

    values = parse_key(args.key)
    wh, cfg = target_warehouse(args)
    spark = get_spark("lakecdc-erase", master=args.master)
    plan = plan_erase(spark, wh, cfg, args.table, values)
    if not args.yes:
        print(json.dumps(plan.to_json(), ensure_ascii=False, indent=2) if args.json else render_plan(plan))
        if not args.json:
            print("nothing removed: add --yes to erase")
        return 1
    if plan.empty:
        print(json.dumps(plan.to_json(), ensure_ascii=False, indent=2) if args.json else render_plan(plan))
        return 1
    requester = args.requested_by or getpass.getuser()
    with holding_warehouse(cfg, "erase", args.wait):
        result = erase_key(spark, wh, plan, requester, args.reason, progress=progress_line)
    print(json.dumps(result, ensure_ascii=False, indent=2, default=str) if args.json else render_result(result))
    return 0
