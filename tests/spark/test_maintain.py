"""``lakecdc maintain`` on real Delta tables: gold's state tables compacted (every key's newest state, the
same mirrors and status), every table OPTIMIZEd and VACUUMed, and a later run applies as on an unmaintained
warehouse."""

from __future__ import annotations

import pytest
import yaml

from pipelines.cli import main
from pipelines.config import load_config
from pipelines.export import export_warehouse
from pipelines.gold.state import GoldState
from pipelines.runner import run_pipeline
from pipelines.testing.demo import demo_config, generate, write_landing
from pipelines.warehouse import Warehouse


def _files(spark, ref) -> int:
    return spark.sql(f"DESCRIBE DETAIL {ref.sql}").first()["numFiles"]


def _keys(spark, state: GoldState) -> list[tuple]:
    return sorted(tuple(r) for r in state.current_keys(spark).collect())


@pytest.fixture
def warehouse(spark, tmp_path):
    """The demo's traffic, landed in three rounds and run once each: key state rows of three gold batches, a key
    in more than one; a fourth round waits in ``round3`` for the run after maintenance."""
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(yaml.safe_dump(demo_config(tmp_path, quality=False)))
    cfg = load_config(conf)
    traffic = generate(120, seed=3)
    for n in range(4):
        write_landing(
            tmp_path / f"round{n}", {s: m[n * len(m) // 4 : (n + 1) * len(m) // 4] for s, m in traffic.items()}
        )
    for n in range(3):
        _land(tmp_path, n)
        run_pipeline(spark, cfg, available_now=True)
    return conf, cfg, Warehouse.from_config(cfg)


def _land(root, n: int) -> None:
    """Round ``n``'s files into the landing directories the configuration reads."""
    for source in ("shop_oms", "inventory_canal"):
        landing = root / "landing" / source
        landing.mkdir(parents=True, exist_ok=True)
        for f in (root / f"round{n}" / "landing" / source).iterdir():
            f.rename(landing / f"{n}-{f.name}")


@pytest.mark.long  # about 6 minutes (OPTIMIZE and VACUUM of every table, three times over): make test-all
def test_maintain_compacts_state_and_keeps_every_mirror(spark, warehouse, capsys):
    conf, cfg, wh = warehouse
    state = GoldState(wh)
    mirrors, keys = export_warehouse(spark, wh), _keys(spark, state)
    key_rows = state.keys.read(spark).count()
    newest = state.keys.read(spark).agg({"batch": "max"}).first()[0]
    newest_rows = state.keys.read(spark).where(f"batch = {newest}").count()
    older_keys = state.keys.read(spark).where(f"batch < {newest}").select("mirror", "k").distinct().count()
    bronze_files = _files(spark, wh.bronze)
    capsys.readouterr()

    assert main(["maintain", "--conf", str(conf), "--dry-run"]) == 0
    assert state.keys.read(spark).count() == key_rows, "a dry run changes nothing"
    listed = capsys.readouterr().out
    assert "raw_messages" in listed and "_state/keys" in listed and "demo_tenant__shop__orders" in listed

    assert main(["maintain", "--conf", str(conf)]) == 0
    printed = capsys.readouterr().out
    assert f"gold state: compacted below batch {newest}" in printed
    assert printed.count("vacuumed") == listed.count("would OPTIMIZE")
    assert _keys(spark, state) == keys and export_warehouse(spark, wh) == mirrors
    # each key's newest row of the older batches, and the newest batch's rows as they were
    assert state.keys.read(spark).count() == older_keys + newest_rows < key_rows
    assert _files(spark, wh.bronze) < bronze_files, "OPTIMIZE put small files together"

    _land(conf.parent, 3)
    run_pipeline(spark, cfg, available_now=True)
    after = export_warehouse(spark, wh)
    assert after != mirrors and all(after[name] for name in mirrors), "a later run applies on compacted state"
