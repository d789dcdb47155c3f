"""`lakecdc status` on a small demo warehouse: every figure equals what the tables hold; lag, thresholds
and exit codes; per-batch progress from every stage; export and dq through --conf, also on catalog tables."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from types import SimpleNamespace

import pytest
import yaml

from pipelines.cli import main
from pipelines.config import load_config
from pipelines.export import mirror_refs
from pipelines.gold.state import GoldState
from pipelines.mirror_columns import table_properties
from pipelines.progress import ProgressReporter, batch_progress
from pipelines.quality.storage import dq_results_ref
from pipelines.runner import run_pipeline
from pipelines.status import collect_status
from pipelines.testing.demo import demo_config, generate, write_landing
from pipelines.warehouse import Warehouse, state_key

STAGE_QUERIES = {"bronze_shop_oms", "bronze_inventory_canal", "silver_decode", "gold_apply"}


def _iso(value: dt.datetime | None) -> str | None:
    """A timestamp as collected (naive, local time) in status's ISO form."""
    if value is None:
        return None
    return dt.datetime.fromtimestamp(value.timestamp(), dt.timezone.utc).isoformat(timespec="seconds")[:-6] + "Z"


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory):
    """The demo's traffic (with rows that break its expectations), through every stage once."""
    root = tmp_path_factory.mktemp("status")
    write_landing(root, generate(120, seed=11, dq_faults=True))
    conf = {**demo_config(root, quality=True), "quality_checks": False}  # expectations; no run-end checks
    for source in conf["sources"]:  # the demo's traffic starts half an hour ago: within a day (the one setting)
        source["freshness"] = "1 day"
    conf_path = root / "pipeline.yaml"
    conf_path.write_text(yaml.safe_dump(conf))
    cfg = load_config(conf_path)
    lines: list[str] = []
    with batch_progress(spark, ProgressReporter(emit=lines.append, is_tty=True)) as listener:
        run_pipeline(spark, cfg)
        assert listener.drain(timeout=60)  # progress events arrive after the fact, each query's end last
    return SimpleNamespace(
        conf=conf_path, cfg=cfg, wh=Warehouse.from_config(cfg), seen=dict(listener.seen), lines=lines
    )


def test_every_figure_equals_what_the_tables_hold(spark, demo):
    status = collect_status(spark, demo.cfg)
    wh = demo.wh
    quarantine = wh.silver("quarantine").read(spark)
    refs = mirror_refs(spark, wh)
    checked_dq = 0
    assert [m.name for m in status.mirrors] == sorted(refs)
    for m in status.mirrors:
        ref = refs[m.name]
        mirror = ref.read(spark)
        deleted = GoldState(wh).current_keys(spark).where(f"mirror = '{state_key(ref)}' AND NOT live")
        assert m.rows == mirror.count()
        assert m.tombstones == deleted.count()
        both = mirror.select("_seq", "_event_time").union(deleted.select("seq", "event_time"))
        newest = both.agg({"_event_time": "max"}).first()[0]
        assert m.last_event_time == _iso(newest)
        assert m.last_seq in {r["_seq"] for r in both.where(both["_event_time"] == newest).collect()}
        db, _schema, table = json.loads(table_properties(spark, ref)["lakecdc.source_identity"])
        held = quarantine.where((quarantine["db"] == db) & (quarantine["table"] == table))
        assert m.quarantined_gold == held.where("stage = 'gold'").count()
        assert m.quarantined_silver == held.where("stage = 'silver'").count()
        # its own sources only (the stock mirror is inventory_canal's alone), judged on their heartbeats
        assert m.sources == sorted(r[0] for r in mirror.select("_source").distinct().collect())
        assert m.freshness_seconds == 86400 and m.pending == 0 and m.waiting_reason is None
        src = next(s for s in status.sources if s.name == m.sources[0])
        assert len(m.sources) == 1 and m.staleness_seconds == src.staleness_seconds and not m.stale
        results = dq_results_ref(wh).read(spark).where(f"`table` = '{m.name}'")
        rows = results.collect()
        if not rows:  # no expectations on this table, and no run-end checks in this configuration
            assert m.dq is None
            continue
        newest = {}  # each check's own newest result
        for r in sorted(rows, key=lambda r: (r["checked_at"], r["batch_id"])):
            newest[r["expectation"]] = r
        assert m.dq["checks"] == len(newest)
        assert m.dq["failing"] == sorted(e for e, r in newest.items() if not r["success"])
        checked_dq += 1
    assert checked_dq == 2  # the two tables with expectations
    orders = next(m for m in status.mirrors if m.name.endswith("orders"))
    assert orders.quarantined_gold > 0, "the demo's negative amounts are dropped by amount_positive"
    assert next(m for m in status.mirrors if m.name == "inventory.stock").sources == ["inventory_canal"]

    heartbeats = wh.silver("heartbeats").read(spark)
    changes = wh.silver("changes").read(spark)
    for s in status.sources:
        assert (s.kind, s.pending, s.pending_bytes, s.lag_seconds, s.error) == ("landing", 0, 0, 0.0, None)
        assert s.quarantined == quarantine.where(quarantine["source"] == s.name).count()
        last_hb = heartbeats.where(heartbeats["source"] == s.name).agg({"event_time": "max"}).first()[0]
        last_change = changes.where(changes["source"] == s.name).agg({"event_time": "max"}).first()[0]
        assert (s.last_heartbeat_time, s.last_event_time) == (_iso(last_hb), _iso(last_change))
        newest = max(t for t in (last_hb, last_change) if t is not None).timestamp()
        checked = dt.datetime.fromisoformat(status.checked_at.replace("Z", "+00:00")).timestamp()
        assert abs(s.staleness_seconds - (checked - newest)) < 2  # as of the reading, to its second
    assert status.ok and status.breaches == []  # no thresholds configured


def test_an_unread_landing_file_is_lag_and_a_breached_threshold_exits_1(spark, demo, capsys):
    landing = demo.cfg.source("shop_oms").path
    late = os.path.join(landing, "zz-late.jsonl")
    with open(os.path.join(landing, "shop_oms-0000.jsonl"), "rb") as first:
        content = first.read()
    with open(late, "wb") as out:
        out.write(content)
    hour_ago = time.time() - 3600
    os.utime(late, (hour_ago, hour_ago))
    try:
        shop = next(s for s in collect_status(spark, demo.cfg).sources if s.name == "shop_oms")
        assert (shop.pending, shop.pending_bytes) == (1, len(content))
        assert 3600 <= shop.lag_seconds < 3600 + 600
        capsys.readouterr()
        assert main(["status", "--conf", str(demo.conf), "--json", "--max-lag-seconds", "60"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert doc["ok"] is False and [b.split(":")[0] for b in doc["breaches"]] == ["shop_oms"]
        assert main(["status", "--conf", str(demo.conf), "--max-lag-seconds", "86400"]) == 0
        assert "OK: within max_lag_seconds 86400" in capsys.readouterr().out
    finally:
        os.remove(late)
    # the demo's source commit times are about half an hour old: a tiny staleness threshold is breached
    assert main(["status", "--conf", str(demo.conf), "--max-staleness-seconds", "1"]) == 1
    out = capsys.readouterr().out
    assert "BREACHED (max_staleness_seconds 1):" in out and "inventory_canal: last change or heartbeat" in out


def test_progress_events_arrived_from_every_stage(demo):
    assert STAGE_QUERIES <= set(demo.seen), demo.seen
    for query in STAGE_QUERIES:
        assert any(line.startswith(f"{query}: batch ") and "rows so far" in line for line in demo.lines), query


def test_export_and_dq_report_through_conf_equal_through_warehouse(spark, demo, capsys):
    capsys.readouterr()
    assert main(["export", "--conf", str(demo.conf)]) == 0
    by_conf = json.loads(capsys.readouterr().out)
    assert main(["export", "--warehouse", demo.wh.root]) == 0
    assert by_conf == json.loads(capsys.readouterr().out) and len(by_conf) == 3
    assert main(["dq", "report", "--conf", str(demo.conf), "--chart", str(demo.conf.parent / "c.png")]) == 0
    report = capsys.readouterr().out
    assert "amount_positive" in report and (demo.conf.parent / "c.png").stat().st_size > 0


def test_the_built_in_checks_through_conf_are_the_last_dq_run_status_shows(spark, demo, capsys):
    capsys.readouterr()
    code = main(["dq", "check", "--conf", str(demo.conf)])
    printed = capsys.readouterr().out
    results = dq_results_ref(demo.wh).read(spark)
    run_id = results.orderBy(results["checked_at"].desc()).first()["run_id"]
    run = results.where(results["run_id"] == run_id).collect()
    assert run_id.startswith("run-") and {r["table"] for r in run} == set(mirror_refs(spark, demo.wh))
    failed = sum(1 for r in run if not r["success"])
    assert code == (1 if failed else 0) and printed.startswith(f"{len(run)} built-in checks, {failed} failed")
    # inventory.stock is judged on its own source: shop_oms's heartbeats are not its own
    from pipelines.quality.checks import freshness_frame

    stock = mirror_refs(spark, demo.wh)["inventory.stock"].read(spark)
    heartbeats = demo.wh.silver("heartbeats").read(spark)
    assert heartbeats.where("source = 'shop_oms'").count() > 0
    frame = freshness_frame(spark, stock, heartbeats, "1 day", dt.datetime.now(dt.timezone.utc))
    assert [r["source"] for r in frame.collect()] == ["inventory_canal"]
    after = {m.name: m.dq for m in collect_status(spark, demo.cfg).mirrors}
    assert {dq["run_id"] for dq in after.values()} == {run_id}
    # the run's per-batch expectations keep their own last result: a passing check run hides no failure
    orders = next(dq for name, dq in after.items() if name.endswith("orders"))
    assert "amount_positive" in orders["failing"] and orders["checks"] > len(
        [r for r in run if r["table"].endswith("orders")]
    )


def test_catalog_tables_through_conf(spark, tmp_path, capsys):
    """Spark's own (Hive-less) catalog stands in for Unity Catalog: --conf names the tables by catalog and schema."""
    schema = f"lakecdc_status_{os.getpid()}"
    conf = {
        "catalog": "spark_catalog",
        "schema": schema,
        "checkpoints": str(tmp_path / "checkpoints"),
        "sources": [{"name": "s1", "format": "oms_default", "path": str(tmp_path / "landing")}],
    }
    (tmp_path / "landing").mkdir()
    conf_path = tmp_path / "pipeline.yaml"
    conf_path.write_text(yaml.safe_dump(conf))
    wh = Warehouse.from_config(load_config(conf_path))
    mirror, tombs = wh.mirror("shop.orders"), wh.tombstones("shop.orders")
    lineage = "_seq STRING, _queue_pos STRING, _event_time TIMESTAMP"
    spark.sql(f"CREATE SCHEMA spark_catalog.{schema} LOCATION '{tmp_path / 'tables'}'")
    try:
        spark.sql(
            f"CREATE TABLE {mirror.sql} (id BIGINT, note STRING, {lineage}) USING delta TBLPROPERTIES ("
            "'lakecdc.mirror_name' = 'shop.orders', 'lakecdc.key' = 'id', "
            """'lakecdc.source_identity' = '["shop",null,"orders"]')"""
        )
        spark.sql(f"CREATE TABLE {tombs.sql} (id BIGINT, {lineage}) USING delta")
        spark.sql(f"INSERT INTO {mirror.sql} VALUES (2, 'b', '5', 'p:1', TIMESTAMP'2026-01-01 00:00:05'), "
                  "(1, 'a', '3', 'p:0', TIMESTAMP'2026-01-01 00:00:03')")  # fmt: skip
        spark.sql(f"INSERT INTO {tombs.sql} VALUES (3, '9', 'p:2', TIMESTAMP'2026-01-01 00:00:09')")
        capsys.readouterr()
        assert main(["export", "--conf", str(conf_path)]) == 0
        assert json.loads(capsys.readouterr().out) == {"shop.orders": [{"id": 1, "note": "a"}, {"id": 2, "note": "b"}]}
        status = collect_status(spark, load_config(conf_path))
        [m] = status.mirrors
        assert (m.name, m.table, m.rows, m.tombstones, m.last_seq) == ("shop.orders", mirror.name, 2, 1, "9")
        assert status.sources[0].pending == 0 and status.sources[0].staleness_seconds is None
    finally:
        spark.sql(f"DROP SCHEMA IF EXISTS spark_catalog.{schema} CASCADE")
