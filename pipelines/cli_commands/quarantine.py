"""``lakecdc quarantine list|show|replay`` (:mod:`pipelines.quarantine`) and ``lakecdc rebuild --table``."""

from __future__ import annotations

import argparse
import json
import sys
import uuid

from pipelines.cli_commands.shared import holding_warehouse, progress_line, reporting_batches

_LIST_COLUMNS = ("stage", "table", "rule", "count", "reason", "bronze pointer", "raw excerpt")


def cmd_quarantine(args: argparse.Namespace) -> int:
    from pipelines.cli_commands.pipeline import with_locations
    from pipelines.config import load_config
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    cfg = with_locations(load_config(args.conf), args)
    wh = Warehouse.from_config(cfg)
    if args.action == "replay" and args.yes:
        with holding_warehouse(cfg, "quarantine-replay", args.wait):
            spark = get_spark("lakecdc-quarantine", master=args.master)
            return _replay(spark, cfg, wh, args)
    spark = get_spark("lakecdc-quarantine", master=args.master)
    groups = _groups(spark, wh, args)
    if args.action == "list":
        return _list(groups, args)
    if args.action == "show":
        return _show(spark, wh, groups, args)
    return _replay(spark, cfg, wh, args, groups)


def _groups(spark, wh, args) -> list[dict]:
    from pipelines.quarantine import filtered, group_rows, unresolved_quarantine

    frame = unresolved_quarantine(spark, wh, include_resolved=getattr(args, "all", False))
    if frame is None:
        return []
    frame = filtered(frame, args.table, args.reason, args.rule, args.stage, args.position)
    return group_rows(frame, args.limit if args.action != "replay" else None)


def _table(group: dict) -> str:
    return ".".join(p for p in (group.get("db"), group.get("table")) if p) or "-"


def _list(groups: list[dict], args) -> int:
    from pipelines.quarantine import LIST_EXCERPT_CHARS, excerpt_text

    if args.json:
        print(json.dumps({"groups": groups, "count": sum(g["count"] for g in groups)}, ensure_ascii=False, indent=2))
        return 0
    if not groups:
        print("nothing quarantined" + ("" if args.all else " unresolved") + " matches")
        return 0
    rows = []
    for g in groups:
        count = str(g["count"]) + (f" (+{g['resolved']} resolved)" if g["resolved"] else "")
        raw = excerpt_text(g["raw_excerpt"], LIST_EXCERPT_CHARS) if g["raw_excerpt"] else f"bad value: {g['bad_value']}"
        rows.append((g["stage"], _table(g), g["rule"] or "-", count, (g["reason"] or "-")[:80],
                     g["bronze_position"] or "-", raw))  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_LIST_COLUMNS)]
    for line in (_LIST_COLUMNS, *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    print(f"{sum(g['count'] for g in groups)} unresolved quarantined rows in {len(groups)} groups")
    return 0


def _show(spark, wh, groups: list[dict], args) -> int:
    from pipelines.quarantine import bronze_message, excerpt_text, resolutions

    out = []
    for g in groups:
        out.append({**g, "bronze": bronze_message(spark, wh, g["bronze_position"]) if g["bronze_position"] else None})
    if args.json:
        print(json.dumps({"groups": out, "resolutions": resolutions(spark, wh, out)}, ensure_ascii=False, indent=2))
        return 0 if out else 1
    if not out:
        print("nothing quarantined matches")
        return 1
    for g in out:
        print(f"{g['stage']} quarantine of {_table(g)} from source {g['source']} ({g['format']}): {g['count']} rows")
        print(f"  reason:   {g['reason']}")
        if g["rule"]:
            print(f"  rule:     {g['rule']}   bad value: {g['bad_value']}")
        print(f"  bronze:   {g['bronze_position']}   queue position: {g['queue_pos']}   ingested {g['ingest_time']}")
        b = g["bronze"]
        if b is None:
            print("  message:  not in bronze (" + ("no pointer)" if not g["bronze_position"] else "dropped?)"))
            continue
        if b["key"] is not None:
            print(f"  key ({b['key']['encoding']}): {excerpt_text(b['key'])}")
        value = b["value"]
        print(f"  message ({value['encoding'] if value else 'null'}): {excerpt_text(value)}")
    return 0


def _replay(spark, cfg, wh, args, groups: list[dict] | None = None) -> int:
    from pipelines.one_query import require_finished
    from pipelines.quarantine import commit, replay_plan

    if groups is None:
        groups = _groups(spark, wh, args)
    plan = replay_plan(spark, cfg, wh, groups)
    replaying = [o for o in plan.outcomes if o.outcome == "replay"]
    still = [o for o in plan.outcomes if o.outcome == "still"]
    if not args.yes:
        if args.json:
            print(json.dumps({**plan.to_json(), "replayed": False}, ensure_ascii=False, indent=2))
        else:
            for o in plan.outcomes:
                what = {
                    "replay": f"would replay {o.changes} changes of",
                    "nothing": "would resolve (no row change now)",
                    "still": "still rejected, would stay:",
                }[o.outcome]
                tail = f" ({o.reason})" if o.reason else ""
                print(f"{what} {o.group['stage']} {_table(o.group)} {o.group['bronze_position']}{tail}")
            print(
                f"nothing replayed: {len(replaying)} groups ({plan.change_count} changes) would be replayed under the "
                f"current configuration, {len(still)} are still rejected; add --yes to replay them"
            )
        return 1
    if not plan.outcomes:
        print(json.dumps({**plan.to_json(), "replayed": True}) if args.json else "nothing to replay")
        return 0
    require_finished(wh, "quarantine replay")
    run = f"quarantine-replay-{uuid.uuid4().hex[:12]}"
    commit(spark, wh, plan, run)
    progress_line(f"{run}: {plan.change_count} changes of {len(replaying)} groups appended to silver changes")
    summary = _gold(spark, cfg, run)
    result = _result(plan, "replayed", run, summary)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(
            f"{run}: replayed {plan.change_count} changes of {len(replaying)} quarantine groups, "
            f"{len(plan.resolves) - len(replaying)} resolved with no row change, {len(still)} still rejected; gold "
            f"applied {summary.applied} changes ({summary.stale} stale skipped, {summary.gold_quarantined} "
            "quarantined again)"
        )
    return 0


def _gold(spark, cfg, run: str):
    """Run gold until caught up: it applies what ``run`` appended to silver, with every other change waiting. A
    warehouse run as one query (its shape, whatever ``queries:`` says) has no gold stream over silver: gold reads
    from that append on."""
    from pipelines.one_query import is_one_query
    from pipelines.quarantine import appended_commit
    from pipelines.runner import RunSummary, run_pipeline
    from pipelines.warehouse import Warehouse

    wh, from_version = Warehouse.from_config(cfg), None
    if is_one_query(wh):
        appended = appended_commit(spark, wh, run)
        if appended is None:  # nothing appended: nothing to apply
            return RunSummary()
        from_version = appended[0]
    with reporting_batches(spark) as progress:
        return run_pipeline(spark, cfg, ("gold",), available_now=True, progress=progress, from_version=from_version)


def cmd_rebuild_some(args: argparse.Namespace) -> int:
    """``lakecdc rebuild``: with ``--table``, one mirror (:func:`rebuild_table`); else all of silver and gold
    (:func:`pipelines.cli_commands.pipeline.cmd_rebuild`)."""
    from pipelines.cli_commands.pipeline import cmd_rebuild

    return rebuild_table(args) if args.table else cmd_rebuild(args)


def rebuild_table(args: argparse.Namespace) -> int:
    """``lakecdc rebuild --table T``: one mirror (and its history) again from bronze (:mod:`pipelines.quarantine`)."""
    from pipelines.cli_commands.pipeline import with_locations
    from pipelines.config import load_config
    from pipelines.one_query import require_finished
    from pipelines.quarantine import rebuild_mirror, rebuild_plan
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    cfg = with_locations(load_config(args.conf), args)
    wh = Warehouse.from_config(cfg)
    if not args.yes:
        spark = get_spark("lakecdc-rebuild", master=args.master)
        plan = _table_plan(spark, cfg, wh, args.table, rebuild_plan)
        if plan is None:
            return 2
        if args.json:
            print(json.dumps({**plan.to_json(), "rebuilt": False}, ensure_ascii=False, indent=2))
            return 1
        for ref in plan.drops:
            print(f"would drop {ref.name or ref.path}")
        print(f"would drop the gold state rows of {plan.state_key} (key state, waiting changes, progress)")
        print(
            f"nothing dropped: add --yes to rebuild {plan.mirror} from the {plan.change_count} changes bronze holds "
            f"for it (resolving {len(plan.resolves)} of its quarantine groups); the other mirrors keep their state"
        )
        return 1
    asked = _ask_running(wh, args)
    if asked is not None:
        return asked
    with holding_warehouse(cfg, "rebuild", args.wait):
        spark = get_spark("lakecdc-rebuild", master=args.master)
        require_finished(wh, f"lakecdc rebuild --table {args.table}")
        run = f"rebuild-{uuid.uuid4().hex[:12]}"
        rebuilt = _table_plan(spark, cfg, wh, args.table, lambda s, c, w, n: rebuild_mirror(s, c, w, n, run))
        if rebuilt is None:
            return 2
        plan, dropped = rebuilt
        for item in dropped:
            progress_line(f"dropped {item}")
        summary = _gold(spark, cfg, run)
    result = _result(plan, "rebuilt", run, summary)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(
            f"{run}: rebuilt {plan.mirror} from bronze ({plan.change_count} changes); gold applied {summary.applied} "
            f"changes ({summary.stale} stale skipped, {summary.gold_quarantined} quarantined); the other mirrors kept "
            "their state"
        )
    return 0


def _ask_running(wh, args) -> int | None:
    """``rebuild --table --yes`` while a continuous run holds the warehouse: ask that run to rebuild the mirror
    between its batches (:mod:`pipelines.serving`) and wait for its answer; its other mirrors stay current
    meanwhile. None: no run that serves requests holds the warehouse (take the lease as usual)."""
    import time

    from pipelines.lock import lease_holder
    from pipelines.run_requests import RequestBox

    box = RequestBox.of(wh.checkpoint_root)
    holder = lease_holder(wh.checkpoint_root)
    if box is None or holder is None or not box.serves(holder):
        return None
    request = box.ask("rebuild", table=args.table)
    progress_line(
        f"the warehouse is held by a continuous run (host {holder.get('host')}, pid {holder.get('pid')}): asked it to "
        f"rebuild {args.table} between its batches ({request['id']}); its other mirrors stay current meanwhile"
    )
    answer, said, began = None, None, time.monotonic()
    try:
        while True:
            answer = box.answer_of(request) or answer
            if answer is not None and (not answer.get("ok") or answer.get("applied") or answer.get("note")):
                break
            # read again after serves(): a run that answered and then stopped must not be taken for one that
            # stopped before it took the request
            if not box.serves(holder) and box.answer_of(request) is None:
                if answer is None:  # it stopped before it began: rebuild here, under the lease
                    box.withdraw(request)
                    progress_line("the run stopped before it took the request: rebuilding here")
                    return None
                break
            state = "queued, being applied" if answer is not None else "waiting for a pause between the run's batches"
            if state != said or time.monotonic() - began > 30:
                progress_line(f"{args.table}: {state}")
                said, began = state, time.monotonic()
            time.sleep(1)
    finally:
        box.withdraw(request)
    return _print_answer(args, answer, holder)


def _print_answer(args, answer: dict, holder: dict) -> int:
    if not answer.get("ok"):
        print(f"lakecdc: error: {answer.get('error')}", file=sys.stderr)
        return 2
    by = {"host": holder.get("host"), "pid": holder.get("pid"), "run": holder.get("run")}
    if args.json:
        print(json.dumps({**answer, "rebuilt": bool(answer.get("applied")), "by": by}, ensure_ascii=False, indent=2))
        return 0
    done = "rebuilt" if answer.get("applied") else "dropped and queued"
    tail = f" ({answer['note']})" if answer.get("note") else ""
    print(
        f"{answer['run']}: {done} {answer['mirror']} from bronze ({answer['changes']} changes) by the running pipeline "
        f"(pid {by['pid']}) between its batches; the other mirrors kept their state and stayed current{tail}"
    )
    return 0


def _table_plan(spark, cfg, wh, name, make):
    """``make(spark, cfg, wh, name)``, or None with the error printed: a table the configuration or bronze does not
    know."""
    try:
        return make(spark, cfg, wh, name)
    except (KeyError, ValueError) as exc:
        print(f"lakecdc: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return None


def _result(plan, done: str, run: str, summary) -> dict:
    """What a replay or a one-table rebuild did, as ``--json`` prints it: the plan, ``done`` true, the run and gold's
    counts."""
    gold = {"applied": summary.applied, "stale": summary.stale, "quarantined": summary.gold_quarantined}
    return {**plan.to_json(), done: True, "run": run, "gold": gold}
