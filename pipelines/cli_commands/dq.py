"""The data-quality command: ``dq report`` (summary table and chart of dq_results) and ``dq check``
(the built-in checks on every mirror now)."""

from __future__ import annotations

import argparse

from pipelines.cli_commands.shared import _target_warehouse


def cmd_dq(args: argparse.Namespace) -> int:
    from pipelines.quality.report import chart, report
    from pipelines.quality.storage import dq_dir
    from pipelines.spark import get_spark

    wh, cfg = _target_warehouse(args)
    spark = get_spark("lakecdc-dq", master=args.master)
    if args.action == "check":
        from pipelines.runner import RunSummary, check_every_mirror

        summary = RunSummary()
        check_every_mirror(spark, cfg, wh, summary)
        print(f"{summary.dq_results} built-in checks, {summary.dq_failed} failed; Data Docs: {summary.data_docs}")
        return 1 if summary.dq_failed else 0
    print(report(spark, wh))
    png = chart(spark, wh, args.chart or str(dq_dir(wh) / "dq_chart.png"))
    docs = dq_dir(wh) / "data_docs" / "index.html"
    print(f"\nchart: {png}" + (f"\nData Docs: {docs}" if docs.exists() else ""))
    return 0
