"""The dev-tool commands: ``demo``, ``soak``, ``produce`` and ``kafka``. They run ``pipelines.testing``
(simulator, demo traffic, local Kafka), imported only when the command runs: the wheel deployed to
Databricks leaves it out, and there each of them says so in one line (exit 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from pipelines.cli_commands.shared import batch_reporter, progress_line


def _dev_tools_present(command: str) -> bool:
    """Whether ``pipelines.testing`` (simulator, demo traffic, local Kafka) is importable; the wheel
    deployed to Databricks leaves it out, so a dev subcommand there says so in one line (exit 2)."""
    if importlib.util.find_spec("pipelines.testing") is not None:
        return True
    print(f"lakecdc {command} is a dev tool: run it from a source checkout (pip install -e .)", file=sys.stderr)
    return False


def cmd_demo(args: argparse.Namespace) -> int:
    if not _dev_tools_present("demo"):
        return 2
    from pipelines.spark import build_dir, get_spark
    from pipelines.testing.demo import run_demo

    workdir = Path(args.dir) if args.dir else build_dir() / "lakecdc-demo"
    if args.master:
        get_spark("lakecdc-demo", master=args.master)  # run_demo goes on with this active session
    return run_demo(workdir, changes=args.changes, seed=args.seed, progress=progress_line, kafka=args.kafka)


def cmd_soak(args: argparse.Namespace) -> int:
    if not _dev_tools_present("soak"):
        return 2
    from pipelines.testing.simulator import soak

    report = soak(args.format, args.changes, args.seed, progress=progress_line)
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
    report = batch_reporter()
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


def cmd_kafka(args: argparse.Namespace) -> int:
    if not _dev_tools_present("kafka"):
        return 2
    from pipelines.testing.kafka_broker import LocalBroker

    if args.action == "up":
        broker = LocalBroker(data_dir=args.data_dir, port=args.port, fresh=args.fresh).start(detach=True)
        print(broker.bootstrap)
        progress_line(f"broker running (pid {broker.pid}); stop it with: lakecdc kafka down")
    elif args.action == "down":
        stopped = LocalBroker.down(args.data_dir)
        progress_line("broker stopped" if stopped else "no broker was running")
    else:
        state = LocalBroker.status(args.data_dir)
        print(json.dumps(state, default=str))
        return 0 if state.get("running") else 1
    return 0
