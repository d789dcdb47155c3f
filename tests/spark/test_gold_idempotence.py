"""A gold micro-batch retried after a crash is applied once: the mirrors' writes are stamped (Delta
txnAppId/txnVersion on MERGE, a commit marker on an append), and key state reads the same."""

from __future__ import annotations

from pipelines.config import parse_config
from pipelines.export import export_warehouse
from pipelines.gold.stage import apply_gold_batch
from pipelines.gold.state import GoldState
from pipelines.silver import decode_frame, ensure_silver
from pipelines.warehouse import Warehouse
from tests.conftest import SEEDS_FIXTURES


def _commits(path) -> int:
    return len(list((path / "_delta_log").glob("*.json")))


def test_retried_gold_batch_commits_nothing_new(spark, tmp_path):
    cfg = parse_config(
        {
            "warehouse": str(tmp_path / "wh"),
            "sources": [{"name": "s", "format": "oms_canal", "path": str(tmp_path / "none")}],
        }
    )
    wh = Warehouse.from_config(cfg)
    ensure_silver(spark, wh)
    lines = [l for l in (SEEDS_FIXTURES / "oms_canal.jsonl").read_bytes().split(b"\n") if l.strip()]
    bronze = spark.createDataFrame(
        [("s", "oms_canal", raw, f"file:/x#{i}", f"x#{i:012d}", None) for i, raw in enumerate(lines, 1)],
        "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP",
    )
    changes = decode_frame(bronze, cfg).where("kind = 'change'").drop("kind").cache()

    first = apply_gold_batch(spark, changes, 0, cfg, wh, "app-test")
    assert first.applied == first.changes == changes.count() > 0
    mirrors = [p for p in (tmp_path / "wh" / "gold").iterdir() if not p.name.startswith("_")]
    before = {p: _commits(p) for p in mirrors}
    exported = export_warehouse(spark, wh, with_system_columns=True)

    def key_state():
        return sorted(map(tuple, GoldState(wh).current_keys(spark).drop("vh").collect()))

    keys = key_state()
    assert len(keys) == len({(m, k) for m, k, *_ in keys}) > 0

    apply_gold_batch(spark, changes, 0, cfg, wh, "app-test")  # the same batch again: a retry
    assert {p: _commits(p) for p in mirrors} == before
    assert export_warehouse(spark, wh, with_system_columns=True) == exported
    assert key_state() == keys, "key state reads as after the first attempt"

    apply_gold_batch(spark, changes, 1, cfg, wh, "app-test")  # a later batch with the same changes
    assert export_warehouse(spark, wh, with_system_columns=True) == exported, "re-applying is harmless"
