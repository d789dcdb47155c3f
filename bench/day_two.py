"""Day-two reads over many mirrors: ``python -m bench.day_two [--tables N] [--warehouse PATH] [--repeat R]``.

Builds a warehouse of N mirrors (default 200) from one landing source: OMS Canal inserts and updates spread
evenly over the tables (:func:`bench.latency.messages`, 20 changes a table by default), a DELETE in every
tenth table and a TRUNCATE then two inserts in every fiftieth, run once with
:func:`pipelines.runner.run_pipeline` (run-end checks on) in this process's session (the small local
session :func:`pipelines.spark.get_spark` makes, as the other bench sections use). Then it times, each
``--repeat`` times in that session (the first reading of a session loads every Delta log the JVM has not
opened yet; a ``lakecdc`` command is always a first reading):

* ``status``: :func:`pipelines.status.collect_status` and its ``--json`` document (what ``lakecdc status
  --json`` runs), with its Spark jobs, and the mirrors whose rows it scanned;
* ``why``: :func:`pipelines.why.explain_key` for one key of the middle mirror (``lakecdc why``), with the
  seconds of each read it reports;
* ``metrics``: one reading of ``lakecdc metrics`` (a status reading and its Prometheus text), once.

``--compare`` also scans every mirror's rows as status did before it read key state (one ``UNION ALL`` of
all mirrors' lineage columns, :func:`pipelines.status_mirrors.lineages`), times it, and checks that each
mirror's rows, sources and newest change from status equal the scan's.

``--warehouse PATH`` builds the warehouse there, or reuses the one built there before (its ``pipeline.yaml``);
without it the warehouse is built afresh under ``build/bench/day_two``. Not part of ``python -m bench`` or CI.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import yaml

from bench.env import ROOT, machine_info
from bench.latency import TYPES, messages

#: The file that tells a built warehouse: its configuration, written after its run.
CONF_NAME = "pipeline.yaml"


def _say(msg: str) -> None:
    print(f"[day_two] {msg}", flush=True)


def traffic(tables: int, changes: int) -> list[bytes]:
    """OMS Canal messages: ``changes`` inserts and updates over ``tables`` tables, a DELETE of key 0 in
    every tenth table, and in every fiftieth a TRUNCATE then two inserts."""
    from pipelines.formats import Change, DecodeContext, get_decoder

    enc, ctx = get_decoder("oms_canal"), DecodeContext()
    out = [value for _key, value in messages(changes, tables)]
    seq = 1_700_000_000_000 + changes
    row = {"name": "late", "amount": "1.00", "updated_at": "2024-01-01T00:00:00"}

    def change(op: str, t: int, key: str | None) -> bytes:
        nonlocal seq
        seq += 1
        image = {"id": key, **row} if key is not None else None
        return enc.encode(
            Change(op=op, db="latency", table=f"t{t}", key_columns=("id",) if key is not None else (),
                   before=image if op == "DELETE" else None, after=image if op == "INSERT" else None,
                   col_types=dict(TYPES) if key is not None else None, seq=(seq,),
                   event_time="2024-01-01T00:00:01Z"),
            ctx,
        )  # fmt: skip

    for t in range(0, tables, 10):
        out.append(change("DELETE", t, "0"))
    for t in range(5, tables, 50):
        out += [change("TRUNCATE", t, None), change("INSERT", t, "1000000"), change("INSERT", t, "1000001")]
    return out


def build(spark, root: Path, tables: int, changes: int) -> Path:
    """Land the traffic, run the pipeline once, write the configuration (the sign that it is built)."""
    from pipelines.config import parse_config
    from pipelines.runner import run_pipeline

    shutil.rmtree(root, ignore_errors=True)
    landing = root / "landing"
    landing.mkdir(parents=True)
    (landing / "changes.jsonl").write_bytes(b"\n".join(traffic(tables, changes)) + b"\n")
    doc = {
        "warehouse": str(root / "warehouse"),
        "quality_checks": True,
        "sources": [{"name": "bench", "format": "oms_canal", "path": str(landing), "freshness": "100000 days"}],
    }
    cfg = parse_config(doc, origin=str(root / CONF_NAME))
    began = time.perf_counter()
    summary = run_pipeline(spark, cfg)
    _say(f"built {tables} mirrors from {changes} changes in {time.perf_counter() - began:.1f} s "
         f"(stages {summary.seconds})")  # fmt: skip
    (root / CONF_NAME).write_text(yaml.safe_dump(doc))
    return root / CONF_NAME


def _jobs(spark, group: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def timed(spark, label: str, fn, repeat: int) -> tuple[list[dict], object]:
    """Run ``fn`` ``repeat`` times, each in its own Spark job group: seconds and Spark jobs of each."""
    runs, result = [], None
    for i in range(repeat):
        group = f"day_two-{label}-{i}-{time.time_ns()}"
        spark.sparkContext.setJobGroup(group, f"bench.day_two {label}")
        began = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - began
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        runs.append({"seconds": round(seconds, 2), "spark_jobs": _jobs(spark, group)})
        _say(f"{label} #{i + 1}: {seconds:.2f} s, {runs[-1]['spark_jobs']} Spark jobs")
    return runs, result


def compare(spark, wh, reading) -> dict:
    """Scan every mirror's rows as status did before key state (timed), and list the mirrors whose rows,
    sources or newest change (the newest row or deleted key) differ from ``reading``'s."""
    from pipelines.export import mirror_refs
    from pipelines.gold.state import GoldState
    from pipelines.status_mirrors import iso, lineages
    from pipelines.warehouse import state_key

    refs = mirror_refs(spark, wh)
    runs, scan = timed(spark, "scan of every mirror", lambda: lineages(spark, refs), 1)
    deleted = GoldState(wh).deleted_keys(spark)
    differs = []
    for m in reading.mirrors:
        lin = scan.get(m.name)
        gone = deleted.get(state_key(refs[m.name]), (0, None))[1]
        candidates = [x for x in (lin.newest if lin else None, gone) if x]
        newest = max(candidates, key=lambda x: (x[2] or 0, x[1] or "")) if candidates else (None, None, None)
        sources = set(lin.sources if lin else ()) | set(m.sources if m.pending else ())
        theirs = (lin.rows if lin else 0, sorted(sources), newest[0], newest[1], iso(newest[2]))
        mine = (m.rows, m.sources, m.last_seq, m.last_queue_pos, m.last_event_time)
        if mine != theirs:
            differs.append({"mirror": m.name, "status": mine, "scan": theirs})
    _say(f"scan of every mirror: {runs[0]['seconds']} s; mirrors whose figures differ from status's: {len(differs)}")
    return {"runs": runs, "mirrors": len(reading.mirrors), "differs": differs}


def run(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    from pipelines.config import load_config
    from pipelines.spark import get_spark
    from pipelines.status import collect_status
    from pipelines.warehouse import Warehouse

    root = Path(args.warehouse) if args.warehouse else ROOT / "build" / "bench" / "day_two"
    spark = get_spark("lakecdc-bench-day-two")
    conf = root / CONF_NAME
    if args.warehouse and conf.exists():
        _say(f"reusing the warehouse built in {root}")
    else:
        _say(f"building {args.tables} mirrors in {root} ...")
        conf = build(spark, root, args.tables, args.changes or 20 * args.tables)
    cfg = load_config(conf)
    wh = Warehouse.from_config(cfg)
    out: dict = {"warehouse": str(root), "machine": machine_info(spark)}
    wanted = set(args.only.split(",")) if args.only else {"status", "why", "metrics"}

    if "status" in wanted:

        def reading_as_json():
            status = collect_status(spark, cfg)
            json.dumps(status.to_json(), default=str)  # what `lakecdc status --json` prints
            return status

        runs, reading = timed(spark, "status", reading_as_json, args.repeat)
        scanned = getattr(reading, "scanned", None)  # an older status has no such field: it scanned every mirror
        out["status"] = {
            "runs": runs,
            "mirrors": len(reading.mirrors),
            "scanned_mirrors": len(reading.mirrors) if scanned is None else len(scanned),
            "reads": "key state, pending, progress, dq_results, quarantine, silver batch_counts, bronze "
            "(queue positions, landed files), each mirror's properties and schema (Delta log), and the rows "
            "of the mirrors listed as scanned",
        }
        _say(f"status: {len(reading.mirrors)} mirrors, rows scanned of {out['status']['scanned_mirrors']}")
        if args.compare:
            out["scan_every_mirror"] = compare(spark, wh, reading)

    if "why" in wanted:
        from pipelines.why import explain_key

        table = f"latency.t{args.tables // 2}"
        runs, report = timed(spark, "why", lambda: explain_key(spark, wh, cfg, table, {"id": "1"}), args.repeat)
        out["why"] = {"runs": runs, "table": table, "key": {"id": "1"}, "changes": len(report.changes),
                      "read_seconds": report.reads}  # fmt: skip
        _say(f"why {table} id=1: {len(report.changes)} changes; reads {report.reads}")

    if "metrics" in wanted:
        from pipelines.metrics import status_metrics, text

        runs, body = timed(spark, "metrics", lambda: text(status_metrics(collect_status(spark, cfg))), 1)
        out["metrics"] = {"runs": runs, "lines": body.count("\n")}
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.day_two", description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=200, help="mirrors to build (default 200)")
    p.add_argument("--changes", type=int, default=None, help="changes over them (default 20 a table)")
    p.add_argument("--warehouse", help="build here, or reuse the warehouse built here before")
    p.add_argument("--repeat", type=int, default=3, help="readings of status and why (default 3)")
    p.add_argument("--only", help="comma-separated: status, why, metrics (default all)")
    p.add_argument("--compare", action="store_true", help="also scan every mirror as status did, and compare")
    p.add_argument("--out", help="write the figures as JSON here too")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    out = run(argv)
    text = json.dumps(out, indent=2, default=str)
    print(text)
    args = parse_args(argv)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
