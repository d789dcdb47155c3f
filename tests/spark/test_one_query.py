"""``queries: one`` (pipelines.one_query): one query lands, decodes and applies each batch. It gives the tables a
per-stage run gives, survives a SIGKILL at any point, and day two (quarantine replay, rebuild --table) works on it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from pipelines import cli
from pipelines.export import export_warehouse
from pipelines.quarantine import unresolved_quarantine
from pipelines.testing.demo import demo_config, generate, write_landing
from pipelines.testing.simulator import (
    compare,
    deliver,
    generate_history,
    landing_lines,
    pipeline_yaml_many,
    truth_safe_options,
)
from pipelines.warehouse import Warehouse

#: The silver tables of decoded rows.
SILVER = ("changes", "heartbeats", "ddl_log", "quarantine", "skipped")
#: Columns that differ from one run to the next whatever it decoded.
RUN_COLUMNS = ("ingest_time", "quarantined_at", "app_id")


def _warehouse(root: Path, messages: dict, queries: str) -> Path:
    """A landing directory of ``messages`` and a configuration whose run has the shape ``queries``."""
    write_landing(root, messages, files_per_source=6)
    conf = demo_config(root, quality=False)
    conf["tables"]["demo_tenant.shop.customers"]["columns"].pop("tier", None)  # learnt from messages instead
    conf["queries"] = queries
    path = root / "pipeline.yaml"
    path.write_text(yaml.safe_dump(conf))
    return path


def _rows(frame, wh: Path) -> list[str]:
    """A table's rows as text, sorted, with the warehouse's directory out of the positions."""
    return sorted(str(row).replace(str(wh.parent), "<root>") for row in frame.collect())


def _silver_rows(spark, wh: Path) -> dict[str, list]:
    """Each silver table's rows, without what differs from run to run (ingest time, app ids)."""
    rows = {}
    for table in SILVER:
        frame = spark.read.format("delta").load(str(wh / "silver" / table))
        rows[table] = _rows(frame.select(*sorted(c for c in frame.columns if c not in RUN_COLUMNS)), wh)
    return rows


def _bronze(spark, wh: Path) -> list:
    frame = spark.read.format("delta").load(str(wh / "bronze" / "raw_messages"))
    return _rows(frame.select("source", "format", "value", "position", "queue_pos"), wh)


def test_one_query_gives_the_per_stage_run_s_tables_and_keeps_its_shape(spark, tmp_path, capsys):
    messages = generate(160, seed=11)
    one, per = _warehouse(tmp_path / "one", messages, "one"), _warehouse(tmp_path / "per", messages, "per_stage")
    assert cli.main(["run", "--conf", str(one), "--once"]) == 0
    assert "bronze+silver+gold: done" in capsys.readouterr().err
    assert cli.main(["run", "--conf", str(per), "--once"]) == 0
    one_wh, per_wh = tmp_path / "one" / "warehouse", tmp_path / "per" / "warehouse"
    mirrors = export_warehouse(spark, Warehouse(str(one_wh)))
    assert mirrors == export_warehouse(spark, Warehouse(str(per_wh))) and sum(map(len, mirrors.values())) > 0
    assert _bronze(spark, one_wh) == _bronze(spark, per_wh)
    assert _silver_rows(spark, one_wh) == _silver_rows(spark, per_wh)
    assert (one_wh / "_checkpoints" / "run").is_dir() and not (one_wh / "_checkpoints" / "bronze").exists()

    # nothing new: the one query runs no batch, every table as it was
    versions = {p.parent.parent.name: len(list(p.parent.glob("*.json"))) for p in one_wh.rglob("_delta_log/*0.json")}
    assert cli.main(["run", "--conf", str(one), "--once"]) == 0
    again = {p.parent.parent.name: len(list(p.parent.glob("*.json"))) for p in one_wh.rglob("_delta_log/*0.json")}
    assert again == versions and export_warehouse(spark, Warehouse(str(one_wh))) == mirrors

    # a warehouse keeps its shape: a stage of its own would read what the one query landed again
    capsys.readouterr()
    assert cli.main(["run", "--conf", str(one), "--once", "--stage", "silver"]) == 2
    assert "is run as one query" in capsys.readouterr().err
    conf = yaml.safe_load(per.read_text())
    conf["queries"] = "one"
    per.write_text(yaml.safe_dump(conf))
    assert cli.main(["run", "--conf", str(per), "--once"]) == 2
    assert "queries: one, but this warehouse's stages run as queries of their own" in capsys.readouterr().err


def _run_killed(conf: Path, committed: Path) -> None:
    """Run the pipeline in a process of its own and SIGKILL it as soon as ``committed`` exists."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "run", "--conf", str(conf), "--once"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    deadline = time.time() + 300
    try:
        while time.time() < deadline and proc.poll() is None and not committed.exists():
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert committed.exists(), f"the run ended or timed out before {committed} was written"


def test_one_query_killed_after_landing_and_again_while_applying_resumes_without_duplicates_or_holes(spark, tmp_path):
    """SIGKILL the one query's process once bronze has its batch, restart, SIGKILL it again once a mirror has its
    first commit, restart: the tables are those of a clean per-stage run of the same messages."""
    messages = generate(160, seed=11)
    conf = _warehouse(tmp_path / "killed", messages, "one")
    wh = tmp_path / "killed" / "warehouse"
    _run_killed(conf, wh / "bronze" / "raw_messages" / "_delta_log" / f"{1:020d}.json")
    mirror = wh / "gold" / "demo_tenant__shop__orders" / "_delta_log" / f"{1:020d}.json"
    _run_killed(conf, mirror)
    assert cli.main(["run", "--conf", str(conf), "--once"]) == 0
    clean = _warehouse(tmp_path / "clean", messages, "per_stage")
    assert cli.main(["run", "--conf", str(clean), "--once"]) == 0
    clean_wh = tmp_path / "clean" / "warehouse"
    assert export_warehouse(spark, Warehouse(str(wh))) == export_warehouse(spark, Warehouse(str(clean_wh)))
    assert _bronze(spark, wh) == _bronze(spark, clean_wh), "bronze has duplicates or holes"
    assert _silver_rows(spark, wh) == _silver_rows(spark, clean_wh), "silver has duplicates or holes"


def test_day_two_on_a_one_query_warehouse(spark, tmp_path: Path, capsys):
    """quarantine replay and rebuild --table apply what they append to silver, though no gold stream reads it, and
    the one query's next batches, numbered above what they wrote to gold's state, apply after them."""
    fmt, seed = "oms_default", 5
    history = generate_history(fmt, seed, n_changes=40, n_tables=2, db="oq", **truth_safe_options(fmt))
    delivery = deliver(history, seed, partitions=3)
    landing, wh_dir, conf = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "pipeline.yaml"
    landing.mkdir()
    lines = landing_lines(history, delivery).splitlines(keepends=True)
    (landing / "a.jsonl").write_bytes(b"".join(lines[: len(lines) * 2 // 3]))
    doc = yaml.safe_load(pipeline_yaml_many([history], str(wh_dir), {fmt: str(landing)}))
    doc["queries"] = "one"
    doc["tables"]["oq.t0"]["expectations"] = [{"name": "even", "sql": "id % 2 = 0", "action": "drop"}]
    conf.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert cli.main(["run", "--once", "--conf", str(conf)]) == 0
    wh = Warehouse(str(wh_dir))
    keys, types = history.keys(), history.column_types()
    assert unresolved_quarantine(spark, wh).count() > 0

    doc["tables"]["oq.t0"].pop("expectations")  # the fix
    conf.write_text(yaml.safe_dump(doc), encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["quarantine", "replay", "--conf", str(conf), "--yes", "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["gold"]["applied"] > 0 and replayed["gold"]["quarantined"] == 0
    assert unresolved_quarantine(spark, wh).count() == 0

    (landing / "b.jsonl").write_bytes(b"".join(lines[len(lines) * 2 // 3 :]))  # the rest of the traffic
    assert cli.main(["run", "--once", "--conf", str(conf)]) == 0
    assert compare(delivery.expected, export_warehouse(spark, wh), keys=keys, col_types=types) == []

    spark.sql(f"DELETE FROM {wh.mirror(['oq', 't0']).sql} WHERE id % 2 = 1")  # damage one mirror
    assert cli.main(["rebuild", "--conf", str(conf), "--table", "oq.t0", "--yes"]) == 0
    assert "rebuilt oq.t0 from bronze" in capsys.readouterr().out
    assert compare(delivery.expected, export_warehouse(spark, wh), keys=keys, col_types=types) == []
    assert cli.main(["run", "--once", "--conf", str(conf)]) == 0  # nothing new: the mirrors as they were
    assert compare(delivery.expected, export_warehouse(spark, wh), keys=keys, col_types=types) == []
    assert not (wh_dir / "_checkpoints" / "bronze").exists(), "a day-two command ran a stage of its own"
