"""The ``lakecdc`` command line. Results go to stdout; progress and logs go to stderr.

The module is longer than 400 lines because it holds every subcommand's arguments and its thin handler in one
place, the one layer that may import everything below it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines import __version__
from pipelines.formats import ALL_FORMAT_IDS

log = logging.getLogger("lakecdc")


def _progress(message: str) -> None:
    print(f"[lakecdc] {message}", file=sys.stderr, flush=True)


def _reporter(is_tty: bool | None = None):
    """Per-batch progress: printed by :func:`_progress` when stderr is a terminal, else only logged (INFO)."""
    from pipelines.progress import ProgressReporter

    return ProgressReporter(emit=_progress, is_tty=sys.stderr.isatty() if is_tty is None else is_tty)


@contextmanager
def _batch_progress(spark, enabled: bool = True) -> Iterator:
    """Report each micro-batch of the streams run inside the block (rows, batches, lag). Yields the stage
    printer to give the runner: it prints a stage's batches before the stage's next line. A continuous run
    (``enabled`` false) reports its batches itself."""
    from pipelines.progress import batch_progress

    if not enabled:
        yield _progress
        return
    with batch_progress(spark, _reporter()) as listener:

        def stage_line(message: str) -> None:
            listener.drain()
            _progress(message)

        yield stage_line


def _dev_tools_present(command: str) -> bool:
    """Whether ``pipelines.testing`` (simulator, demo traffic, local Kafka) is importable; the wheel
    deployed to Databricks leaves it out, so a dev subcommand there says so in one line (exit 2)."""
    if importlib.util.find_spec("pipelines.testing") is not None:
        return True
    print(f"lakecdc {command} is a dev tool: run it from a source checkout (pip install -e .)", file=sys.stderr)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.verbose:
        logging.getLogger("pipelines").setLevel(logging.INFO)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - one clear line for people, the trace with -v
        from pipelines.config import ConfigError

        if args.verbose and not isinstance(exc, ConfigError):
            raise
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lakecdc",
        description="CDC messages (OMS, DataWorks, DTS, DRS formats) into Delta mirror tables: bronze → silver → gold.",
    )
    p.add_argument("--version", action="version", version=f"lakecdc {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log what each stage does (stderr)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser(
        "demo", help="generate CDC traffic for a small database and run the whole pipeline on it (dev tool)"
    )
    d.add_argument(
        "--dir",
        help="working directory for landing files and the warehouse (default: build/lakecdc-demo, "
        "or lakecdc-demo in $LAKECDC_BUILD_DIR; reset on every run)",
    )
    d.add_argument("--changes", type=int, default=400, help="row changes to generate (default 400)")
    d.add_argument("--seed", type=int, default=7, help="random seed of the traffic (default 7)")
    d.add_argument("--kafka", action="store_true", help="go through a local Kafka broker instead of landing files")
    _master_option(d)
    d.set_defaults(func=cmd_demo)

    r = sub.add_parser("run", help="run pipeline stages from a YAML configuration")
    r.add_argument("--conf", required=True, help="pipeline YAML (see conf/pipeline.example.yaml)")
    r.add_argument("--stage", choices=["bronze", "silver", "gold", "all"], default="all")
    r.add_argument("--once", action="store_true", help="run until caught up, then stop (availableNow)")
    _location_options(r)
    _master_option(r)
    r.set_defaults(func=cmd_run)

    st = sub.add_parser(
        "status",
        help="queue lag and freshness per source; rows, last change, quarantine and last DQ run per mirror; "
        "exit 1 when a threshold is breached",
    )
    st.add_argument("--conf", required=True, help="pipeline YAML (thresholds: its status: section)")
    st.add_argument("--json", action="store_true", help="print one JSON document instead of the tables")
    st.add_argument(
        "--max-lag-seconds",
        type=_positive_seconds,
        metavar="N",
        help="exit 1 when a source's oldest unread message or landing file is older (over status.max_lag_seconds)",
    )
    st.add_argument(
        "--max-staleness-seconds",
        type=_positive_seconds,
        metavar="N",
        help="exit 1 when a source's newest change or heartbeat is older (over status.max_staleness_seconds)",
    )
    _location_options(st)
    _master_option(st)
    st.set_defaults(func=cmd_status)

    rb = sub.add_parser("rebuild", help="drop silver and gold (tables and checkpoints) and rebuild them from bronze")
    rb.add_argument("--conf", required=True, help="pipeline YAML (see conf/pipeline.example.yaml)")
    rb.add_argument("--yes", action="store_true", help="really drop; without it, only list what would be dropped")
    _location_options(rb)
    _master_option(rb)
    rb.set_defaults(func=cmd_rebuild)

    dec = sub.add_parser("decode", help="decode messages (one per line) to canonical changes as JSON lines")
    dec.add_argument(
        "--format",
        required=True,
        choices=ALL_FORMAT_IDS,
        metavar="FORMAT",
        help="format id: " + ", ".join(ALL_FORMAT_IDS),
    )
    dec.add_argument("--input", help="file of messages, one per line (default: stdin)")
    _table_options(dec)
    dec.set_defaults(func=cmd_decode)

    rp = sub.add_parser("replay", help="land a file of messages as bronze in a warehouse, then decode and apply it")
    rp.add_argument(
        "--format",
        required=True,
        choices=ALL_FORMAT_IDS,
        metavar="FORMAT",
        help="format id: " + ", ".join(ALL_FORMAT_IDS),
    )
    rp.add_argument("--input", required=True, help="file of messages, one per line")
    rp.add_argument("--warehouse", required=True, help="warehouse directory (created if missing)")
    _table_options(rp)
    _master_option(rp)
    rp.set_defaults(func=cmd_replay)

    e = sub.add_parser("export", help="print mirrors as one JSON object of canonical rows sorted by primary key")
    _warehouse_options(e)
    e.add_argument("--table", help="only this mirror (db.table)")
    e.add_argument("--with-system-columns", action="store_true", help="include lineage columns (_seq, _op, ...)")
    _master_option(e)
    e.set_defaults(func=cmd_export)

    k = sub.add_parser("kafka", help="a local Apache Kafka broker (KRaft, 127.0.0.1) for development (dev tool)")
    k.add_argument("action", choices=["up", "down", "status"])
    k.add_argument("--port", type=int, help="listener port for `up` (default: a free port)")
    k.add_argument("--fresh", action="store_true", help="`up` with empty data (topics are otherwise kept)")
    k.add_argument("--data-dir", help="broker data directory (default: build/kafka/data)")
    k.set_defaults(func=cmd_kafka)

    so = sub.add_parser(
        "soak",
        help="long randomized check: simulator → encode → deliver (duplicates, partitions) "
        "→ decode → reference model, against the source tables (dev tool)",
    )
    so.add_argument("--format", required=True, choices=[f for f in ALL_FORMAT_IDS if f != "auto"], metavar="FORMAT")
    so.add_argument("--changes", type=int, default=100_000)
    so.add_argument("--seed", type=int, default=1)
    so.set_defaults(func=cmd_soak)

    pr = sub.add_parser(
        "produce", help="publish the simulator's CDC traffic to a Kafka topic, keyed by primary key (dev tool)"
    )
    pr.add_argument("--format", required=True, choices=[f for f in ALL_FORMAT_IDS if f != "auto"], metavar="FORMAT")
    pr.add_argument("--topic", required=True)
    pr.add_argument("--changes", type=int, default=1000)
    pr.add_argument("--rate", type=float, help="messages per second (default: as fast as possible)")
    pr.add_argument("--seed", type=int, default=1)
    pr.add_argument("--bootstrap", help="bootstrap servers (default: $KAFKA_BOOTSTRAP_SERVERS, else the local broker)")
    pr.set_defaults(func=cmd_produce)

    q = sub.add_parser(
        "dq",
        help="data quality: `report` (summary table and chart of dq_results), `check` (run the built-in "
        "checks on every mirror now; exit 1 when one fails)",
    )
    q.add_argument("action", choices=["report", "check"])
    _warehouse_options(q)
    q.add_argument(
        "--chart",
        help="where `report` writes the PNG chart (default: dq_chart.png next to the Data Docs)",
    )
    _master_option(q)
    q.set_defaults(func=cmd_dq)

    f = sub.add_parser("formats", help="list the supported formats: ordering, table and key, types, quirks")
    f.add_argument("--markdown", action="store_true", help="as README's Markdown table")
    f.set_defaults(func=cmd_formats)
    return p


def _master_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (default: spark-submit's, else $SPARK_MASTER, else "
        "spark.master in spark-defaults.conf, else the embedded local[2])",
    )


def _location_options(p: argparse.ArgumentParser) -> None:
    for name, what in (
        ("catalog", "Unity Catalog catalog (with --schema)"),
        ("schema", "schema of the tables"),
        ("checkpoints", "checkpoint location (a volume path on Databricks)"),
    ):
        p.add_argument(
            f"--{name}", help=f"{what}, over the configuration's; each Databricks bundle target passes its own"
        )


def _warehouse_options(p: argparse.ArgumentParser) -> None:
    """Exactly one of --warehouse (a local directory) and --conf (the tables a configuration names: its
    warehouse directory, or its catalog and schema)."""
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--warehouse", metavar="DIR", help="a local warehouse directory")
    where.add_argument(
        "--conf", metavar="FILE", help="pipeline YAML: the tables it names (its warehouse, or catalog and schema)"
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _table_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", help="pipeline YAML for table keys and column types (same file as `run`)")
    p.add_argument("--table", help="db.table for formats whose messages name none (oms_debezium_smt)")
    p.add_argument(
        "--key", action="append", default=[], metavar="DB.TABLE=COL1,COL2", help="primary key of a table (repeatable)"
    )


# ---------------------------------------------------------------- commands


def cmd_run(args: argparse.Namespace) -> int:
    from pipelines.config import STAGES, load_config
    from pipelines.spark import get_spark

    cfg = _with_locations(load_config(args.conf), args)
    stages = STAGES if args.stage == "all" else (args.stage,)
    spark = get_spark("lakecdc-run", master=args.master)
    available_now = args.once or cfg.trigger == "available_now"
    from pipelines.runner import run_pipeline

    with _batch_progress(spark, enabled=available_now) as progress:
        summary = run_pipeline(spark, cfg, stages, available_now, progress=progress)
    _progress(
        f"finished {', '.join(summary.stages)}: {summary.applied} changes applied, {summary.stale} stale "
        f"skipped, {summary.gold_quarantined} quarantined in gold"
    )
    return 0


def _with_locations(cfg, args):
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

    cfg = _with_locations(load_config(args.conf), args)
    flags = ("max_lag_seconds", "max_staleness_seconds")
    thresholds = replace(cfg.status, **{n: v for n in flags if (v := getattr(args, n)) is not None})
    spark = get_spark("lakecdc-status", master=args.master)
    status = collect_status(spark, cfg, thresholds)
    print(json.dumps(status.to_json(), ensure_ascii=False, indent=2) if args.json else render(status))
    return 0 if status.ok else 1


def _target_warehouse(args: argparse.Namespace):
    """(Warehouse, PipelineConfig) of --conf, or of --warehouse with an empty configuration."""
    from pipelines.config import PipelineConfig, check_locations, load_config
    from pipelines.warehouse import Warehouse

    if args.conf:
        cfg = check_locations(load_config(args.conf))
        wh = Warehouse.from_config(cfg)
        if not wh.catalog and not Path(wh.root).is_dir():
            raise FileNotFoundError(f"--conf {args.conf}: its warehouse {wh.root} does not exist (nothing ran yet?)")
        return wh, cfg
    wh = Warehouse(args.warehouse)
    if not Path(wh.root).is_dir():
        raise FileNotFoundError(f"--warehouse {args.warehouse}: no such directory")
    return wh, PipelineConfig(sources=(), tables={}, warehouse=wh.root)


def cmd_rebuild(args: argparse.Namespace) -> int:
    from pipelines.config import load_config
    from pipelines.runner import rebuild
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    cfg = _with_locations(load_config(args.conf), args)
    spark = get_spark("lakecdc-rebuild", master=args.master)
    if not args.yes:
        for item in Warehouse.from_config(cfg).derived(spark):
            print(f"would drop {item}")
        print("nothing dropped: add --yes to rebuild silver and gold from bronze")
        return 1
    with _batch_progress(spark) as progress:
        summary = rebuild(spark, cfg, progress=progress)
    _progress(
        f"rebuilt {', '.join(summary.stages)} from bronze: {summary.applied} changes applied, {summary.stale} "
        f"stale skipped, {summary.gold_quarantined} quarantined in gold"
    )
    return 0


def _context_config(args, format_id: str, source_path: str | None = None):
    """A PipelineConfig from --conf plus --table/--key, with one source for ``format_id``."""
    from dataclasses import replace

    from pipelines.config import ConfigError, PipelineConfig, Source, TableConfig, load_config

    cfg = load_config(args.conf) if getattr(args, "conf", None) else PipelineConfig(sources=(), tables={})
    tables = dict(cfg.tables)
    for item in args.key:
        name, eq, cols = item.partition("=")
        if not eq or "." not in name or not cols:
            raise ConfigError(f"--key {item!r}: expected DB.TABLE=COL1,COL2")
        old = tables.get(name)
        tables[name] = TableConfig(
            name=name,
            key=tuple(c.strip() for c in cols.split(",") if c.strip()),
            columns=old.columns if old else {},
            target=old.target if old else None,
        )
    if args.table and "." not in args.table:
        raise ConfigError(f"--table {args.table!r}: expected DB.TABLE")
    sources = cfg.sources
    if source_path is not None:
        sources = (Source(name=f"replay_{format_id}", format=format_id, path=source_path),)
    return replace(cfg, tables=tables, default_table=args.table or cfg.default_table, sources=sources)


def cmd_decode(args: argparse.Namespace) -> int:
    """Decode each line to JSON lines of changes; a line that cannot be decoded (whatever the reason)
    prints one quarantine line, and decoding goes on with the next line."""
    from pipelines.formats import Reject, get_decoder
    from pipelines.silver import decode_message, quarantine_reason

    def _quarantine_line(number: int, reason: str, ascii_only: bool = False) -> str:
        line = {"quarantine": {"line": number, "reason": quarantine_reason(reason)}}
        return json.dumps(line, ensure_ascii=ascii_only) + "\n"

    cfg = _context_config(args, args.format)
    ctx = cfg.decode_context(args.format)
    decoder = get_decoder(args.format)
    stream = open(args.input, "rb") if args.input else sys.stdin.buffer
    out = sys.stdout
    with stream:
        for number, raw in enumerate(stream, start=1):
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():
                continue
            if decoder.binary:
                import base64
                import binascii

                try:
                    raw = base64.b64decode(raw.strip(), validate=True)
                except binascii.Error:
                    pass
            try:
                text = "".join(
                    json.dumps(change.to_json_dict(), ensure_ascii=False) + "\n"
                    for change in decode_message(decoder, raw, ctx)
                )
            except Exception as exc:  # noqa: BLE001 - Reject, or anything else: this line only
                text = _quarantine_line(number, str(exc) if isinstance(exc, Reject) else f"{type(exc).__name__}: {exc}")
            try:
                out.write(text)
            except UnicodeEncodeError as exc:  # stdout's encoding cannot print it: say so, go on
                out.write(_quarantine_line(number, f"cannot print the change here: {exc.reason}", ascii_only=True))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    import hashlib
    import shutil

    from pipelines.runner import run_pipeline
    from pipelines.silver import reconcile
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    src = Path(args.input)
    if not src.is_file():
        raise FileNotFoundError(f"--input {src}: no such file")
    warehouse = Path(args.warehouse).resolve()
    landing = warehouse / "_landing" / f"replay_{args.format}"
    landing.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
    target = landing / f"{src.stem}-{digest}.jsonl"
    if target.exists():
        _progress(f"{src} was landed before as {target.name}: nothing new to apply")
    else:
        shutil.copyfile(src, target)
    from dataclasses import replace

    cfg = replace(_context_config(args, args.format, str(landing)), warehouse=str(warehouse))
    spark = get_spark("lakecdc-replay", master=args.master)
    with _batch_progress(spark) as progress:
        summary = run_pipeline(spark, cfg, available_now=True, progress=progress)
    counts = reconcile(spark, Warehouse.from_config(cfg))
    print(
        f"replayed {src}: {counts['bronze_messages']} messages in bronze; {counts['changes']} with row changes, "
        f"{counts['heartbeats']} heartbeats, {counts['ddl_log']} DDL, {counts['quarantine']} quarantined; "
        f"this run applied {summary.applied} changes ({summary.stale} stale skipped, "
        f"{summary.gold_quarantined} quarantined in gold)"
    )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pipelines.export import export_warehouse
    from pipelines.spark import get_spark

    wh, _cfg = _target_warehouse(args)
    spark = get_spark("lakecdc-export", master=args.master)
    result = export_warehouse(spark, wh, args.table, args.with_system_columns)
    print(json.dumps(result, ensure_ascii=False, indent=None))
    return 0


def cmd_formats(args: argparse.Namespace) -> int:
    from pipelines.formats import get_decoder

    rows = []
    for fid in ALL_FORMAT_IDS:
        try:
            d = get_decoder(fid)
        except (ImportError, AttributeError) as exc:
            rows.append((fid, "-", f"not available: {exc}", "", "", ""))
            continue
        rows.append((fid, d.seeds, d.ordering, d.table_and_key, d.type_mapping, "; ".join(d.quirks)))
    if args.markdown:
        print("| id | seeds | ordering | table and key | types | quirks handled |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in r) + " |")
    else:
        for r in rows:
            print(f"{r[0]:22} seeds {r[1]:8} ordering: {r[2]}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    if not _dev_tools_present("demo"):
        return 2
    from pipelines.spark import build_dir, get_spark
    from pipelines.testing.demo import run_demo

    workdir = Path(args.dir) if args.dir else build_dir() / "lakecdc-demo"
    if args.master:
        get_spark("lakecdc-demo", master=args.master)  # run_demo goes on with this active session
    return run_demo(workdir, changes=args.changes, seed=args.seed, progress=_progress, kafka=args.kafka)


def cmd_soak(args: argparse.Namespace) -> int:
    if not _dev_tools_present("soak"):
        return 2
    from pipelines.testing.simulator import soak

    report = soak(args.format, args.changes, args.seed, progress=_progress)
    print(report.summary())
    return 0 if report.ok and not report.truth_mismatches else 1


def cmd_produce(args: argparse.Namespace) -> int:
    import os
    import time

    if not _dev_tools_present("produce"):
        return 2
    from pipelines.testing.kafka_broker import LocalBroker, create_topic, list_topics
    from pipelines.testing.kafka_client import produce
    from pipelines.testing.simulator import generate_history

    bootstrap = args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or LocalBroker.status().get("bootstrap")
    if not bootstrap:
        raise RuntimeError(
            "no Kafka to produce to: pass --bootstrap, set KAFKA_BOOTSTRAP_SERVERS, or `lakecdc kafka up`"
        )
    if args.topic not in list_topics(bootstrap):
        create_topic(bootstrap, args.topic, partitions=3)
    history = generate_history(args.format, args.seed, n_changes=args.changes)
    records = []
    for change, raw in zip(history.changes, history.messages):
        row = change.after or change.before or {}
        key = ",".join(str(row.get(k)) for k in change.key_columns)
        records.append((f"{change.db}.{change.table}:{key}".encode(), raw))
    began, sent, batch = time.monotonic(), 0, max(1, int(args.rate or min(len(records), 1000)))
    report = _reporter()
    for number, start in enumerate(range(0, len(records), batch)):
        sent += produce(bootstrap, args.topic, records[start : start + batch])
        rate = sent / max(time.monotonic() - began, 1e-6)
        report(
            f"produce {args.topic}: batch {number}: {sent}/{len(records)} messages ({rate:,.0f} msgs/s); "
            f"{len(records) - sent} to go"
        )
        if args.rate and start + batch < len(records):
            time.sleep(max(0.0, (start + batch) / args.rate - (time.monotonic() - began)))
    print(
        f"produced {sent} {args.format} messages ({len(history.changes)} changes over {len(history.tables)} tables) "
        f"to {args.topic} at {bootstrap}"
    )
    return 0


def cmd_dq(args: argparse.Namespace) -> int:
    from pipelines.quality.report import chart, report
    from pipelines.quality.storage import dq_dir
    from pipelines.spark import get_spark

    wh, cfg = _target_warehouse(args)
    spark = get_spark("lakecdc-dq", master=args.master)
    if args.action == "check":
        from pipelines.runner import RunSummary, run_cdc_checks

        summary = RunSummary()
        run_cdc_checks(spark, cfg, wh, summary)
        print(f"{summary.dq_results} built-in checks, {summary.dq_failed} failed; Data Docs: {summary.data_docs}")
        return 1 if summary.dq_failed else 0
    print(report(spark, wh))
    png = chart(spark, wh, args.chart or str(dq_dir(wh) / "dq_chart.png"))
    docs = dq_dir(wh) / "data_docs" / "index.html"
    print(f"\nchart: {png}" + (f"\nData Docs: {docs}" if docs.exists() else ""))
    return 0


def cmd_kafka(args: argparse.Namespace) -> int:
    if not _dev_tools_present("kafka"):
        return 2
    from pipelines.testing.kafka_broker import LocalBroker

    if args.action == "up":
        broker = LocalBroker(data_dir=args.data_dir, port=args.port, fresh=args.fresh).start(detach=True)
        print(broker.bootstrap)
        _progress(f"broker running (pid {broker.pid}); stop it with: lakecdc kafka down")
    elif args.action == "down":
        stopped = LocalBroker.down(args.data_dir)
        _progress("broker stopped" if stopped else "no broker was running")
    else:
        state = LocalBroker.status(args.data_dir)
        print(json.dumps(state, default=str))
        return 0 if state.get("running") else 1
    return 0


def console_main(argv: list[str] | None = None) -> None:
    """The ``lakecdc`` console script and the Databricks wheel task's entry point: a failure raises
    SystemExit with the non-zero status (a wheel task ignores a returned value, so a failed stage
    would otherwise show as a successful run); success returns normally."""
    code = main(argv)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    console_main()
