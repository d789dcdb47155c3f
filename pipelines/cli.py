"""The ``lakecdc`` command line: the parser (every subcommand and its arguments), :func:`main` and the
console entry point. Results go to stdout; progress and logs go to stderr.

The command bodies are in :mod:`pipelines.cli_commands`, one module per group; each imports what its
command needs when it runs, so ``lakecdc --help`` stays quick and the wheel (no dev tools) works.
This is the one layer that may import everything below it. Longer than 420 lines because it is the parser of
every subcommand.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from pipelines import __version__
from pipelines.cli_commands.dev import cmd_demo, cmd_kafka, cmd_produce, cmd_soak
from pipelines.cli_commands.dq import cmd_dq
from pipelines.cli_commands.formats import cmd_decode, cmd_formats
from pipelines.cli_commands.lineage import cmd_erase, cmd_why
from pipelines.cli_commands.maintain import DEFAULT_RETAIN_HOURS, cmd_maintain
from pipelines.cli_commands.metrics import cmd_metrics
from pipelines.cli_commands.pipeline import (
    cmd_export,
    cmd_replay,
    cmd_run,
    cmd_status,
)
from pipelines.cli_commands.quarantine import cmd_quarantine, cmd_rebuild_some
from pipelines.formats import ALL_FORMAT_IDS

log = logging.getLogger("lakecdc")

#: Libraries whose Python loggers show errors on the console, and warnings too with ``-v``, like Spark's JVM
#: (:func:`pipelines.spark_logs.spark_log_level`); their INFO lines are their own bookkeeping (GE: hundreds
#: per run about its docs decorators; py4j: each callback).
LIBRARY_LOGGERS = ("py4j", "pyspark", "great_expectations")


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
    if getattr(args, "remote", None):
        os.environ["SPARK_REMOTE"] = args.remote  # every session of the command: pipelines.spark.get_spark
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING if args.verbose else logging.ERROR)
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


def _wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        action="store_true",
        help="when another run holds the warehouse, wait for it to finish (default: stop at once, naming it)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lakecdc",
        description="CDC messages of many vendors' formats (`lakecdc formats` lists them) into Delta mirror tables: "
        "bronze → silver → gold.",
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
    _wait_option(r)
    r.set_defaults(func=cmd_run)

    st = sub.add_parser(
        "status",
        help="queue lag and freshness per source; rows, last change, quarantine and the last result of each "
        "DQ check per mirror; exit 1 when a threshold is breached",
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

    me = sub.add_parser(
        "metrics",
        help="per-mirror and per-source figures (rows, waiting, staleness, quarantined, lag) in the Prometheus "
        "text format: printed once, or served on 127.0.0.1 with --serve",
    )
    me.add_argument("--conf", required=True, help="pipeline YAML (see conf/pipeline.example.yaml)")
    me.add_argument("--json", action="store_true", help="print the samples as JSON (name, labels, value)")
    me.add_argument("--serve", action="store_true", help="serve GET /metrics on 127.0.0.1 until Ctrl-C")
    me.add_argument("--port", type=int, default=9464, help="--serve's port on 127.0.0.1 (default 9464; 0: any free)")
    _location_options(me)
    _master_option(me)
    me.set_defaults(func=cmd_metrics)

    rb = sub.add_parser(
        "rebuild",
        help="drop silver and gold (tables and checkpoints) and rebuild them from bronze; with --table, only "
        "one mirror (and its history) while the others keep their state",
    )
    rb.add_argument("--conf", required=True, help="pipeline YAML (see conf/pipeline.example.yaml)")
    rb.add_argument("--yes", action="store_true", help="really drop; without it, only list what would be dropped")
    rb.add_argument(
        "--table",
        metavar="MIRROR",
        help="rebuild only this mirror (its name as `lakecdc status` and `export` show it) from every change bronze "
        "holds for its source table, decoded under the current configuration",
    )
    rb.add_argument("--json", action="store_true", help="with --table: print the plan or the result as JSON")
    _location_options(rb)
    _master_option(rb)
    _wait_option(rb)
    rb.set_defaults(func=cmd_rebuild_some)  # --table: one mirror, else cmd_rebuild

    mt = sub.add_parser(
        "maintain",
        help="between runs: compact gold's state tables, then OPTIMIZE and VACUUM bronze, silver, state and mirrors",
    )
    mt.add_argument("--conf", required=True, help="pipeline YAML (see conf/pipeline.example.yaml)")
    mt.add_argument(
        "--retain-hours",
        type=_positive("hours"),
        default=DEFAULT_RETAIN_HOURS,
        metavar="H",
        help=f"VACUUM keeps the files of the last H hours (default {DEFAULT_RETAIN_HOURS}, Delta's own)",
    )
    mt.add_argument("--dry-run", action="store_true", help="list the tables and change nothing")
    _location_options(mt)
    _master_option(mt)
    mt.set_defaults(func=cmd_maintain)

    qu = sub.add_parser(
        "quarantine",
        help="`list` and `show` what is quarantined (unresolved), `replay` it from bronze under the current "
        "configuration (a dry run without --yes)",
    )
    qu.add_argument("action", choices=["list", "show", "replay"])
    qu.add_argument("--conf", required=True, help="pipeline YAML (the warehouse, sources and rules to replay with)")
    qu.add_argument("--table", metavar="DB.TABLE", help="only quarantine rows of this source table")
    qu.add_argument("--reason", metavar="TEXT", help="only rows whose reason contains TEXT (case-insensitive)")
    qu.add_argument("--rule", metavar="NAME", help="only rows a data-quality rule of this name quarantined")
    qu.add_argument("--stage", choices=["silver", "gold"], help="only rows of this stage")
    qu.add_argument("--position", metavar="POINTER", help="only rows of this bronze pointer (file#line, kafka:...)")
    qu.add_argument("--all", action="store_true", help="`list`, `show`: resolved groups too")
    qu.add_argument("--limit", type=int, default=100, metavar="N", help="`list`, `show`: at most N groups (100)")
    qu.add_argument("--yes", action="store_true", help="`replay`: really replay; without it, say what would be")
    qu.add_argument("--json", action="store_true", help="print one JSON document")
    _location_options(qu)
    _master_option(qu)
    _wait_option(qu)
    qu.set_defaults(func=cmd_quarantine)

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
    rp.add_argument(
        "--source",
        metavar="NAME",
        help="the --conf source the messages come from: its options (type_mapping, ignore_null_updates, "
        "include/exclude) apply (default: the file's only source of --format)",
    )
    _table_options(rp)
    _master_option(rp)
    _wait_option(rp)
    rp.set_defaults(func=cmd_replay)

    e = sub.add_parser("export", help="print mirrors as one JSON object of canonical rows sorted by primary key")
    _warehouse_options(e)
    e.add_argument("--table", help="only this mirror (db.table)")
    e.add_argument("--with-system-columns", action="store_true", help="include lineage columns (_seq, _op, ...)")
    e.add_argument(
        "--as-of-consistent",
        action="store_true",
        help="every mirror as of its source's consistent point: no transaction half visible (lakecdc status shows it)",
    )
    e.add_argument("--source", metavar="NAME", help="with --as-of-consistent: only this source's point and mirrors")
    e.add_argument(
        "--certified",
        action="store_true",
        help="each mirror as of its certified version, the last whose checks passed (mirrors never certified "
        "are left out)",
    )
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
        help="data quality: `report` (summary and chart of dq_results over a window), `check` (the checks on "
        "every mirror now; exit 1 when one fails), `certified` (each mirror's last version whose checks passed)",
        description="Data quality of the mirrors. Actions:\n"
        "  report     per mirror over a window (--since, default the last day): checks run, pass rate, failures,\n"
        "             changes quarantined, the failing checks; a PNG chart (--chart) and the Data Docs path\n"
        "  check      the built-in checks (key not NULL and unique, freshness, reconciliation) on every mirror\n"
        "             now, or one (--table); --rules: the table's configured rules on its current rows too;\n"
        "             records them in dq_results, certifies the mirrors that pass; exit 1 when one fails\n"
        "  certified  each mirror's certified version (the last whose checks passed) beside its newest",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    q.add_argument("action", choices=["report", "check", "certified"])
    _warehouse_options(q)
    q.add_argument(
        "--chart",
        help="where `report` writes the PNG chart (default: dq_chart.png next to the Data Docs)",
    )
    q.add_argument(
        "--since",
        metavar="DURATION",
        help="`report`: the window, back from now: '1 day' (default), '6 hours', '30 minutes', or 'all'",
    )
    q.add_argument("--table", metavar="MIRROR", help="`check`, `certified`: only this mirror (or source table)")
    q.add_argument(
        "--rules",
        action="store_true",
        help="`check`: also run each table's configured expectations over its mirror's current rows "
        "(a new or changed rule on old rows; needs --conf)",
    )
    q.add_argument(
        "--views",
        action="store_true",
        help="`certified`, in a catalog: create or replace the view <mirror>__certified of each certified mirror "
        "(each certification keeps it current after)",
    )
    q.add_argument("--json", action="store_true", help="print the result as one JSON document")
    _master_option(q)
    q.set_defaults(func=cmd_dq)

    wy = sub.add_parser(
        "why",
        help="every change one key of a mirror has had, oldest first: bronze position, sequence, what gold "
        "decided (applied, stale, waiting, quarantined) and the mirror version that applied it; exit 1: none",
    )
    _warehouse_options(wy)
    wy.add_argument("--table", required=True, metavar="MIRROR", help="the mirror (its name as export shows it)")
    wy.add_argument(
        "--key", required=True, action="append", metavar="COL=VALUE[,COL=VALUE]", help="the key (repeatable)"
    )
    wy.add_argument("--json", action="store_true", help="print one JSON document")
    _master_option(wy)
    wy.set_defaults(func=cmd_why)

    er = sub.add_parser(
        "erase",
        help="remove one key's values from bronze, silver, quarantine, the mirror, its history and key state, "
        "with an audit row in `erasures`; without --yes, only list what would be removed (exit 1)",
    )
    _warehouse_options(er)
    er.add_argument("--table", required=True, metavar="MIRROR", help="the mirror (its name as export shows it)")
    er.add_argument(
        "--key", required=True, action="append", metavar="COL=VALUE[,COL=VALUE]", help="the key (repeatable)"
    )
    er.add_argument("--yes", action="store_true", help="really erase; without it, only list what would be removed")
    er.add_argument("--requested-by", metavar="WHO", help="who asked, for the audit row (default: the OS user)")
    er.add_argument("--reason", metavar="TEXT", help="why, for the audit row (e.g. a ticket id)")
    er.add_argument("--json", action="store_true", help="print one JSON document")
    _master_option(er)
    _wait_option(er)
    er.set_defaults(func=cmd_erase)

    f = sub.add_parser("formats", help="list the supported formats: ordering, table and key, types, quirks")
    f.add_argument("--markdown", action="store_true", help="as Markdown: a section per format (docs/formats.md)")
    f.set_defaults(func=cmd_formats)
    return p


def _master_option(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (default: spark-submit's, else $SPARK_MASTER, else "
        "spark.master in spark-defaults.conf, else the embedded local[2])",
    )
    where.add_argument(
        "--remote",
        metavar="URL",
        help="a Spark Connect server, e.g. sc://127.0.0.1:15002 (default: $SPARK_REMOTE); its Spark needs "
        "Delta's jars and spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
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


def _positive(unit: str):
    """An argparse type: a positive, finite number of ``unit``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"expected a positive number of {unit}, got {text!r}")
        return value

    return parse


_positive_seconds = _positive("seconds")


def _table_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conf", help="pipeline YAML for table keys and column types (same file as `run`)")
    p.add_argument("--table", help="db.table for formats whose messages name none (oms_debezium_smt)")
    p.add_argument(
        "--key", action="append", default=[], metavar="DB.TABLE=COL1,COL2", help="primary key of a table (repeatable)"
    )


def console_main(argv: list[str] | None = None) -> None:
    """The ``lakecdc`` console script and the Databricks wheel task's entry point: a failure raises
    SystemExit with the non-zero status (a wheel task ignores a returned value, so a failed stage
    would otherwise show as a successful run); success returns normally."""
    code = main(argv)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    console_main()
