"""Gold applies the tables of a batch concurrently (``gold.parallelism``): each thread has its own
session and stamp, a failing table stops the batch and is named, and a batch killed while several
tables commit at once is applied exactly once when it is retried."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.delta_writes import checkpointed, checkpointed_merge_settings, idempotent_dml, table_size_bytes
from pipelines.export import export_warehouse
from pipelines.gold.parallel import TXN_CONFS, apply_all
from pipelines.gold.schema import SchemaChangeError
from pipelines.gold.stage import apply_gold_batch
from pipelines.quality.storage import dq_results_ref
from pipelines.testing.simulator import compare, deliver, generate_history
from pipelines.warehouse import Warehouse
from tests.conftest import ROOT
from tests.spark.test_gold_semantics import Gold, _row, change


def _commits(path: Path) -> int:
    return len(list((path / "_delta_log").glob("*.json")))


def _txn_stamps(path: Path) -> Counter:
    """How many commits of a Delta table carry each write's mark: a MERGE's txnAppId, an append's commit
    marker (its commitInfo's userMetadata)."""
    stamps: Counter = Counter()
    for commit in (path / "_delta_log").glob("*.json"):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                stamps[action["txn"]["appId"]] += 1
            if (action.get("commitInfo") or {}).get("userMetadata"):
                stamps[action["commitInfo"]["userMetadata"]] += 1
    return stamps


def test_parallelism_is_validated():
    base = {"sources": [{"name": "s", "format": "oms_canal", "path": "/x"}]}
    assert parse_config(base).gold_parallelism == 4
    assert parse_config({**base, "gold": {"parallelism": 1}}).gold_parallelism == 1
    for bad in (0, -2, "4", True, 65):
        with pytest.raises(ConfigError, match="gold.parallelism"):
            parse_config({**base, "gold": {"parallelism": bad}})
    with pytest.raises(ConfigError, match="gold.threads"):
        parse_config({**base, "gold": {"threads": 2}})


def test_each_thread_session_stamps_its_own_writes(spark, tmp_path):
    """Both threads hold their txnAppId at the same time; each MERGE commits its own, once."""
    from delta.tables import DeltaTable

    paths = {name: tmp_path / name for name in ("a", "b")}
    for path in paths.values():
        spark.createDataFrame([(1, 0)], "id INT, v INT").write.format("delta").save(str(path))
    barrier = threading.Barrier(2)

    def work(session, name: str) -> str:
        with idempotent_dml(session, f"app-{name}", 0):
            barrier.wait(timeout=300)  # both stamps are set before either table is written
            DeltaTable.forPath(session, str(paths[name])).update(set={"v": "v + 1"})
            return session.conf.get(TXN_CONFS[0])

    assert apply_all(spark, ["a", "b"], work, parallelism=2) == ["app-a", "app-b"]
    assert spark.conf.get(TXN_CONFS[0], None) is None, "the caller's session carries no stamp"
    commits = {name: _commits(path) for name, path in paths.items()}
    barrier.reset()
    apply_all(spark, ["a", "b"], work, parallelism=2)  # the retry of the same batch
    assert {name: _commits(path) for name, path in paths.items()} == commits
    for name, path in paths.items():
        assert _txn_stamps(path) == {f"app-{name}": 1}
        assert spark.read.format("delta").load(str(path)).collect()[0]["v"] == 1, "applied exactly once"


def test_a_merge_setting_lasts_for_its_block_and_the_earlier_value_comes_back(spark, tmp_path):
    """The settings of a checkpointed MERGE (no second copy of its source; a small table rewritten, a large
    one given deletion vectors) hold inside the stamped block only; a value the session had before returns."""
    from pipelines.warehouse import TableRef

    materialize, vectors = (
        "spark.databricks.delta.merge.materializeSource",
        "spark.databricks.delta.merge.deletionVectors.persistent",
    )
    ref = TableRef(path=str(tmp_path / "t"))
    spark.range(3).write.format("delta").save(ref.path)
    settings = checkpointed_merge_settings(spark, ref)
    assert settings == {materialize: "none", vectors: "false"}, "a table of a few bytes is rewritten"
    assert 0 < table_size_bytes(spark, ref) < 100_000
    session = spark.newSession()
    session.conf.set(materialize, "all")
    with idempotent_dml(session, "app", 0, settings):
        assert (session.conf.get(materialize), session.conf.get(vectors)) == ("none", "false")
        assert session.conf.get(TXN_CONFS[0]) == "app"
    assert session.conf.get(materialize) == "all", "the session's own value is restored"
    assert session.conf.get(vectors, None) is None and session.conf.get(TXN_CONFS[0], None) is None
    assert table_size_bytes(spark, TableRef(path=str(tmp_path / "missing"))) is None


def test_a_checkpointed_merge_source_reads_the_same_twice_and_its_blocks_are_released(spark):
    """A MERGE reads its source twice (the matching scan, then the writes): the checkpoint is computed once,
    so even ``rand()`` reads alike, and its blocks are gone once the block ends, not at the next GC."""
    context = spark.sparkContext._jsc.sc()

    def cached_rdds() -> set[int]:
        return {info.id() for info in context.getRDDStorageInfo()}

    before = cached_rdds()
    with checkpointed(spark.range(50).selectExpr("id", "rand() AS r")) as source:
        assert source.collect() == source.collect()
        assert cached_rdds() - before, "the checkpoint holds blocks while it is read"
    assert not cached_rdds() - before, "the checkpoint's blocks are released"


def test_the_driver_keeps_a_bounded_number_of_delta_logs_and_the_newest_stay(spark, tmp_path):
    """Delta keeps each table it opens in the driver (3 to 7 MiB of plans a table); the session keeps about
    DELTA_LOG_CACHE_TABLES: after many more other tables the first is opened afresh, while the table in use
    stays the same object. (Guava's cache evicts per segment, a quarter of the bound each, so only well past
    the bound is the first table sure to be gone.)"""
    from pipelines.spark import DELTA_LOG_CACHE_TABLES

    jvm = spark.sparkContext._jvm

    def opened(name: str) -> int:
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(tmp_path / name))
        return jvm.System.identityHashCode(log)

    assert spark.conf.get("spark.databricks.delta.delta.log.cacheSize") == str(DELTA_LOG_CACHE_TABLES)
    first = opened("t0")
    assert opened("t0") == first, "a table opened again is Delta's same object"
    others = 4 * DELTA_LOG_CACHE_TABLES
    for n in range(1, others + 1):
        latest = opened(f"t{n}")
    assert opened(f"t{others}") == latest
    assert opened("t0") != first, "the least recently used table was let go"


def test_a_finished_tables_dataframes_are_freed_so_the_driver_keeps_none_of_their_plans(spark, tmp_path):
    """A JVM object (a DataFrame's plan, the snapshots and cached data under it) lives as long as its
    py4j proxy, and the proxies sit in reference cycles that only Python's collector frees; Great
    Expectations' tracebacks add the apply's frames. With Python's automatic collection off, a batch of
    four tables whose checks run GE (drift) leaves only the batch's own few proxies waiting (21 here;
    1,866 without a collection after each table)."""
    from py4j.finalizer import ThreadSafeFinalizer

    gold = Gold(spark, tmp_path)
    gold.cfg = parse_config({**_doc(gold), "quality_checks": True, "gold": {"parallelism": 2}})
    tables = [f"t{i}" for i in range(4)]
    gold.apply([change("INSERT", 1, after=_row(1, a="5"), table=t) for t in tables])
    drifted = [change("UPDATE", 2, before=_row(1, a="4"), after=_row(1, a="6"), table=t) for t in tables]
    gc.collect()
    gc.disable()
    try:
        before = len(ThreadSafeFinalizer.finalizers)
        stats = gold.apply(drifted)
        alive = len(ThreadSafeFinalizer.finalizers) - before
        gc.collect()
        left = len(ThreadSafeFinalizer.finalizers) - before
    finally:
        gc.enable()
    assert stats.applied == 4
    drift = dq_results_ref(gold.wh).read(spark).where("expectation = 'cdc_source_drift' AND batch_id = 1")
    assert drift.where("NOT success").count() == 4, "each table's drift was found (Great Expectations ran)"
    assert alive - left < 100, f"{alive - left} py4j proxies of the batch were waiting for Python's collection"


def test_a_failing_table_stops_the_batch_and_is_named(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    gold.cfg = parse_config({**_doc(gold), "gold": {"parallelism": 2}})
    wide = {"id": "bigint", "a": "bigint"}
    tables = [f"t{i}" for i in range(6)]
    gold.apply([change("INSERT", 1, after=_row(1, a="5"), types=wide, table=t) for t in tables])
    failing = gold.wh.mirror("shop.t2").path
    before = _commits(Path(failing))
    narrowed = [
        change("INSERT", 2, after=_row(2, a="7"), types={"id": "bigint", "a": "int"} if t == "t2" else wide, table=t)
        for t in tables
    ]
    with pytest.raises(SchemaChangeError, match=r"column 'a' narrowed from bigint to int") as info:
        gold.apply(narrowed)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "source table shop.t2" in notes and "mirror shop.t2" in notes and '"t2"' in notes
    assert _commits(Path(failing)) == before, "nothing of the failing table was committed"
    assert gold.rows("shop.t2") == [{"id": 1, "a": 5}]


def _doc(gold: Gold) -> dict:
    return {
        "warehouse": gold.cfg.warehouse,
        "quality_checks": False,
        "sources": [{"name": "s", "format": "oms_canal", "path": "/none"}],
    }


#: Run by the killed process: decode a simulated history of 12 tables into a silver Delta table,
#: then apply it as one gold batch, four tables at a time.
_KILLED = textwrap.dedent(
    """
    import sys
    from pipelines.config import parse_config
    from pipelines.gold.stage import apply_gold_batch
    from pipelines.silver import decode_frame, ensure_silver
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse
    from tests.spark.test_gold_parallel import config, history_and_delivery

    work = sys.argv[1]
    spark = get_spark("killed-gold")
    cfg = parse_config(config(work))
    wh = Warehouse.from_config(cfg)
    ensure_silver(spark, wh)
    _history, delivery = history_and_delivery()
    rows = [("s", "oms_canal", raw, f"f#{i}", f"p#{i:08d}", None) for i, (_p, _o, raw) in enumerate(delivery.messages)]
    bronze = spark.createDataFrame(
        rows, "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
    )
    decode_frame(bronze, cfg).where("kind = 'change'").drop("kind").write.format("delta").save(work + "/silver_in")
    apply_gold_batch(spark, spark.read.format("delta").load(work + "/silver_in"), 0, cfg, wh, "app-killed")
    """
)


def history_and_delivery():
    history = generate_history("oms_canal", 5, n_changes=360, n_tables=12, composite_keys=False)
    return history, deliver(history, 5, partitions=1, dup_rate=0.0)


def config(work: str) -> dict:
    history, _ = history_and_delivery()
    return {
        "warehouse": f"{work}/wh",
        "quality_checks": False,
        "gold": {"parallelism": 4},
        "sources": [{"name": "s", "format": "oms_canal", "path": f"{work}/none"}],
        "tables": history.config_tables(),
    }


def test_many_tables_killed_mid_batch_then_retried_equal_the_model(spark, tmp_path):
    """SIGKILL while four threads commit; the retried batch gives the model's mirrors, each table once."""
    work = str(tmp_path)
    script = tmp_path / "killed.py"
    script.write_text(_KILLED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(script), work],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=str(ROOT),
        start_new_session=True,
    )
    gold = tmp_path / "wh" / "gold"
    deadline = time.time() + 600
    try:
        while time.time() < deadline and proc.poll() is None:
            if any(gold.glob("*/_delta_log/00000000000000000001.json")):  # a mirror's first MERGE committed
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the batch had finished (or failed) before it could be killed"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    merged = [p.parent.parent.name for p in gold.glob("*/_delta_log/00000000000000000001.json")]
    assert 0 < len(merged) < 12, f"killed mid-batch: {len(merged)} of 12 mirrors merged"

    cfg = parse_config(config(work))
    wh = Warehouse.from_config(cfg)
    silver = spark.read.format("delta").load(f"{work}/silver_in")
    stats = apply_gold_batch(spark, silver, 0, cfg, wh, "app-killed")  # the stream retries the batch
    assert len(stats.tables) == 12 and stats.changes == silver.count() and stats.unaccounted == 0, stats
    history, delivery = history_and_delivery()
    exported = export_warehouse(spark, wh)
    assert len(exported) == 12
    assert compare(delivery.expected, exported, history.keys(), history.column_types()) == []
    stamped = 0
    for table in gold.iterdir():  # every write committed once
        if (table / "_delta_log").is_dir():
            stamps = _txn_stamps(table)  # (none: a table whose changes a TRUNCATE all superseded)
            assert all(n == 1 for n in stamps.values()), (table.name, stamps)
            stamped += bool(stamps)
    assert stamped >= len(merged)
    commits = {p.name: _commits(p) for p in gold.iterdir() if (p / "_delta_log").is_dir()}
    apply_gold_batch(spark, silver, 0, cfg, wh, "app-killed")  # and a second retry commits nothing
    assert {p.name: _commits(p) for p in gold.iterdir() if (p / "_delta_log").is_dir()} == commits
