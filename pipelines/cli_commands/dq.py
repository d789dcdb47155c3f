"""The data-quality command: ``dq report`` (summary and chart of dq_results over a window), ``dq check``
(the built-in checks on every mirror now, and with ``--rules`` the configured rules on its current rows)
and ``dq certified`` (each mirror's last version whose checks passed)."""

from __future__ import annotations

import argparse
import json
import sys

from pipelines.cli_commands.shared import target_warehouse

#: The window of ``dq report`` when none is given.
DEFAULT_WINDOW = "1 day"


def _window(text: str | None):
    """``--since``: a duration back from now (default :data:`DEFAULT_WINDOW`), or ``all`` (None)."""
    from pipelines.quality.rules import parse_duration

    if text is not None and text.strip().lower() == "all":
        return None
    return parse_duration(text or DEFAULT_WINDOW, "--since")


def cmd_dq(args: argparse.Namespace) -> int:
    from pipelines.quality.report import chart, report, summary_json
    from pipelines.quality.storage import dq_dir
    from pipelines.spark import get_spark

    rules, table, as_json = getattr(args, "rules", False), getattr(args, "table", None), getattr(args, "json", False)
    if rules and not args.conf:
        print("lakecdc: error: dq check --rules needs --conf (the rules are the configuration's)", file=sys.stderr)
        return 2
    if args.action == "report" and (rules or table):
        print("lakecdc: error: --table and --rules go with `check` (and --table with `certified`)", file=sys.stderr)
        return 2
    window = _window(getattr(args, "since", None)) if args.action == "report" else None
    wh, cfg = target_warehouse(args)
    spark = get_spark("lakecdc-dq", master=args.master)
    if args.action == "check":
        from pipelines.runner import RunSummary, check_every_mirror

        summary = RunSummary()
        check_every_mirror(spark, cfg, wh, summary, table=table, rules=rules)
        certified = [v for v in summary.certified if v.certified]
        if as_json:
            doc = {
                "checks": summary.dq_results,
                "failed": summary.dq_failed,
                "data_docs": summary.data_docs,
                "mirrors": [v.to_json() for v in summary.certified],
            }
            print(json.dumps(doc, ensure_ascii=False, indent=2))
        else:
            what = "checks (built-in and configured rules on the current rows)" if rules else "built-in checks"
            print(f"{summary.dq_results} {what}, {summary.dq_failed} failed; Data Docs: {summary.data_docs}")
            for v in summary.certified:
                print(f"  {v.mirror}: " + (f"version {v.version} certified" if v.certified else v.reason))
            if certified:
                print(f"{len(certified)} mirrors certified (lakecdc export --certified reads them)")
        return 1 if summary.dq_failed else 0
    if args.action == "certified":
        return _certified(spark, wh, table, as_json, getattr(args, "views", False))
    png = chart(spark, wh, args.chart or str(dq_dir(wh) / "dq_chart.png"), since=window)
    docs = dq_dir(wh) / "data_docs" / "index.html"
    if as_json:
        doc = summary_json(spark, wh, since=window)
        doc.update(chart=png, data_docs=str(docs) if docs.exists() else None)
        print(json.dumps(doc, ensure_ascii=False, indent=2, default=str))
        return 0
    print(report(spark, wh, since=window))
    print(f"\nchart: {png}" + (f"\nData Docs: {docs}" if docs.exists() else ""))
    return 0


def _certified(spark, wh, table: str | None, as_json: bool, views: bool = False) -> int:
    """``dq certified``: per mirror, its certified version and when, beside its newest version; ``views``:
    (in a catalog) the view of each certified mirror made or replaced."""
    from pipelines.export import mirror_refs
    from pipelines.quality.certify import Verdict, certified_versions, newest_version, refresh_views, view_name

    if views and not wh.catalog:
        print("lakecdc: error: --views needs a catalog (--conf naming catalog and schema)", file=sys.stderr)
        return 2
    refs = mirror_refs(spark, wh, table)
    certified = certified_versions(spark, wh, refs)
    made = set()
    if views:
        verdicts = [Verdict(m, True, c.version, "certified") for m, c in certified.items()]
        made = set(refresh_views(spark, wh, verdicts, refs, create=True))
    rows = []
    for name, ref in sorted(refs.items()):
        c = certified.get(name)
        rows.append(
            {
                "mirror": name,
                "certified_version": c.version if c else None,
                "certified_at": c.certified_at.isoformat() if c and c.certified_at else None,
                "newest_version": newest_version(spark, ref),
                "view": view_name(ref) if c and (view_name(ref) in made or _exists(spark, view_name(ref))) else None,
            }
        )
    if as_json:
        print(json.dumps({"mirrors": rows}, ensure_ascii=False, indent=2))
        return 0
    head = ("mirror", "certified", "certified at", "newest")
    body = [
        (
            r["mirror"],
            "-" if r["certified_version"] is None else str(r["certified_version"]),
            r["certified_at"] or "-",
            str(r["newest_version"]),
        )
        for r in rows
    ]
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(head)]
    for cells in [head, *body]:
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
    return 0


def _exists(spark, name: str | None) -> bool:
    return bool(name) and spark.catalog.tableExists(name)
