"""Day two, in one small warehouse: a ``drop`` rule quarantines changes, the rule is fixed, ``lakecdc quarantine
replay`` applies them from bronze; then ``lakecdc rebuild --table`` rebuilds one mirror while the other table's
new changes wait in silver. Each step against the reference model (pipelines/testing/model.py)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pipelines import cli
from pipelines.export import export_warehouse
from pipelines.gold.state import GoldState
from pipelines.quarantine import unresolved_quarantine
from pipelines.testing.simulator import (
    compare,
    deliver,
    generate_history,
    landing_lines,
    model_rows,
    pipeline_yaml_many,
    truth_safe_options,
)
from pipelines.warehouse import Warehouse

FORMAT, SEED = "oms_default", 5
#: Drops every insert and update of qr.t0's odd keys and some of its even ones (never a DELETE): a key's later
#: change may pass while an earlier one is dropped, and a dropped key may be deleted later: a replayed old change
#: must then be stale.
RULE = {"name": "even_c6", "sql": "id % 2 = 0 AND (c6_bigint IS NULL OR c6_bigint % 2 = 0)", "action": "drop"}


def _diffs(history, expected: dict, exported: dict) -> list[str]:
    got = {t: exported.get(t, []) for t in expected}
    return compare(expected, got, keys=history.keys(), col_types=history.column_types())


def test_replay_after_a_fixed_rule_then_rebuild_one_table(spark, tmp_path: Path, capsys):
    history = generate_history(FORMAT, SEED, n_changes=40, n_tables=2, db="qr", **truth_safe_options(FORMAT))
    delivery = deliver(history, SEED, partitions=3)
    lines = landing_lines(history, delivery).splitlines(keepends=True)
    half = len(lines) // 2
    landing, wh_dir, conf = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "pipeline.yaml"
    landing.mkdir()
    (landing / "a.jsonl").write_bytes(b"".join(lines[:half]))
    doc = yaml.safe_load(pipeline_yaml_many([history], str(wh_dir), {FORMAT: str(landing)}))
    doc["tables"]["qr.t0"]["expectations"] = [RULE]
    conf.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert cli.main(["run", "--once", "--conf", str(conf)]) == 0
    wh = Warehouse(str(wh_dir))
    first = {raw for raw in (ln.rstrip(b"\n") for ln in lines[:half])}
    by_message = zip(history.messages, history.decoded_per_message)
    expected_first = {t.qualified: [] for t in history.tables}
    expected_first.update(model_rows(ch for raw, chs in by_message if raw in first for ch in chs))

    held = unresolved_quarantine(spark, wh).where("rule = 'even_c6'").collect()
    dropped = sum(r["count"] for r in held)
    assert dropped >= 3 and _diffs(history, expected_first, export_warehouse(spark, wh)), "the rule dropped nothing"
    capsys.readouterr()
    assert cli.main(["quarantine", "list", "--conf", str(conf), "--rule", "even_c6", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["count"] == dropped and {g["table"] for g in listed["groups"]} == {"t0"}
    assert all(g["bronze_position"].startswith("file:") for g in listed["groups"])
    assert cli.main(["quarantine", "show", "--conf", str(conf), "--position", held[0]["bronze_position"]]) == 0
    shown = capsys.readouterr().out
    assert "message (utf-8): {" in shown and "b'" not in shown

    doc["tables"]["qr.t0"].pop("expectations")  # the fix
    conf.write_text(yaml.safe_dump(doc), encoding="utf-8")
    before = export_warehouse(spark, wh)
    assert cli.main(["quarantine", "replay", "--conf", str(conf)]) == 1, "without --yes nothing is replayed"
    assert "would replay" in capsys.readouterr().out and export_warehouse(spark, wh) == before
    assert cli.main(["quarantine", "replay", "--conf", str(conf), "--yes", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["gold"]["quarantined"] == 0 and result["changes"] >= dropped
    assert _diffs(history, expected_first, export_warehouse(spark, wh)) == []
    lineage = export_warehouse(spark, wh, with_system_columns=True)
    assert {r["_source"] for rows in lineage.values() for r in rows} == {f"sim_{FORMAT}"}, "not their own source"
    assert unresolved_quarantine(spark, wh).count() == 0, "a replayed change is still counted as quarantined"
    assert cli.main(["status", "--conf", str(conf), "--json"]) in (0, 1)
    status = json.loads(capsys.readouterr().out)
    assert [s["quarantined"] for s in status["sources"]] == [0]
    assert cli.main(["quarantine", "replay", "--conf", str(conf), "--yes"]) == 0
    assert "nothing to replay" in capsys.readouterr().out

    # one table again from bronze, while the other's new changes wait in silver (landed, decoded, not applied)
    (landing / "b.jsonl").write_bytes(b"".join(lines[half:]))
    for stage in ("bronze", "silver"):
        assert cli.main(["run", "--once", "--stage", stage, "--conf", str(conf)]) == 0
    t0, t1 = (wh.mirror(["qr", t]) for t in ("t0", "t1"))
    spark.sql(f"DELETE FROM {t0.sql} WHERE id % 2 = 1")  # damage the one mirror
    t1_versions = t1.delta(spark).history().count()
    t1_keys = GoldState(wh).current_keys(spark).where("mirror = 't1' OR mirror LIKE '%t1'").count()
    assert cli.main(["rebuild", "--conf", str(conf), "--table", "qr.t0"]) == 1
    assert "would drop" in capsys.readouterr().out
    assert cli.main(["rebuild", "--conf", str(conf), "--table", "qr.t0", "--yes"]) == 0
    assert "rebuilt qr.t0 from bronze" in capsys.readouterr().out
    assert _diffs(history, delivery.expected, export_warehouse(spark, wh)) == []
    assert t1.delta(spark).history().count() > t1_versions, "t1 was not merged on from its own history"
    assert GoldState(wh).current_keys(spark).where("mirror = 't1' OR mirror LIKE '%t1'").count() >= t1_keys > 0
    assert unresolved_quarantine(spark, wh).count() == 0


def test_rebuild_one_table_while_a_continuous_run_keeps_the_others_current(spark, tmp_path: Path, capsys):
    """``rebuild --table`` while a continuous pipeline holds the warehouse: the running pipeline rebuilds the one
    mirror between its batches, the other keeps its state and its new changes; both end equal to the model."""
    import os
    import threading
    import time

    from pipelines.cli_commands.shared import holding_warehouse
    from pipelines.config import load_config
    from pipelines.runner import run_pipeline

    history = generate_history(FORMAT, SEED + 1, n_changes=60, n_tables=2, db="rr", **truth_safe_options(FORMAT))
    delivery = deliver(history, SEED + 1, partitions=3)
    lines = landing_lines(history, delivery).splitlines(keepends=True)
    parts = [lines[: len(lines) // 3], lines[len(lines) // 3 : 2 * len(lines) // 3], lines[2 * len(lines) // 3 :]]
    landing, wh_dir, conf = tmp_path / "landing", tmp_path / "warehouse", tmp_path / "pipeline.yaml"
    landing.mkdir()
    (landing / "a.jsonl").write_bytes(b"".join(parts[0]))
    doc = yaml.safe_load(pipeline_yaml_many([history], str(wh_dir), {FORMAT: str(landing)}))
    doc["processing_time"] = "1 second"
    doc["gold"] = {**doc.get("gold", {}), "max_pending": 1}  # every mirror with a change waiting is due
    conf.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert cli.main(["run", "--once", "--conf", str(conf)]) == 0
    wh = Warehouse(str(wh_dir))
    t0, t1 = (wh.mirror(["rr", t]) for t in ("t0", "t1"))
    spark.sql(f"DELETE FROM {t0.sql} WHERE id % 2 = 1")  # damage the one mirror
    t1_created = t1.delta(spark).history().agg({"timestamp": "min"}).first()[0]
    t1_versions = t1.delta(spark).history().count()

    failed: list[BaseException] = []

    def continuous() -> None:
        try:
            with holding_warehouse(load_config(str(conf)), "run"):
                run_pipeline(spark, load_config(str(conf)), available_now=False, stop_after=900)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failed.append(exc)

    runner = threading.Thread(target=continuous, name="continuous-run")
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while not (Path(wh.checkpoint_root) / "_lakecdc_requests" / "serving.json").exists():
            assert time.monotonic() < deadline and not failed, f"the continuous run did not start: {failed}"
            time.sleep(1)
        (landing / "b.jsonl").write_bytes(b"".join(parts[1]))  # both tables change while the rebuild is asked
        capsys.readouterr()
        assert cli.main(["rebuild", "--conf", str(conf), "--table", "rr.t0", "--yes", "--json"]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert answer["rebuilt"] is True and answer["by"]["pid"] == os.getpid(), "not rebuilt by the running run"
        assert answer["mirror"] == "rr.t0" and answer["changes"] > 0
        (landing / "c.jsonl").write_bytes(b"".join(parts[2]))
        deadline, diffs = time.monotonic() + 400, ["not read yet"]
        while diffs and time.monotonic() < deadline and not failed:
            time.sleep(5)
            try:
                diffs = _diffs(history, delivery.expected, export_warehouse(spark, wh))
            except Exception as exc:  # noqa: BLE001 - a mirror between two commits: read again
                diffs = [repr(exc)]
        assert runner.is_alive() and not failed, f"the continuous run stopped: {failed}"
    finally:
        for query in spark.streams.active:
            query.stop()
        runner.join(300)
    assert not failed, failed
    assert _diffs(history, delivery.expected, export_warehouse(spark, wh)) == []
    assert t1.delta(spark).history().agg({"timestamp": "min"}).first()[0] == t1_created, "t1 was dropped"
    assert t1.delta(spark).history().count() > t1_versions, "t1's new changes were not merged by the running run"
    assert not (Path(wh.checkpoint_root) / "_lakecdc_requests" / "serving.json").exists()
