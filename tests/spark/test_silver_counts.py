"""Silver's kept counts (pipelines.silver_counts): a retried batch counts once, counts reconcile after a
restart, they equal a scan of silver's tables, and a batch commits only to the tables it has rows for."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipelines.config import parse_config
from pipelines.runner import run_pipeline
from pipelines.silver import decode_frame, ensure_silver, write_silver_batch
from pipelines.silver_counts import COUNTED, _silver_rows, count_rows, kept_counts, last_seen, reconcile
from pipelines.warehouse import Warehouse
from tests.conftest import SEEDS_FIXTURES

#: A message no decoder reads: quarantined.
GARBAGE = b'{"not": "canal"'


def _canal(tmp_path: Path, name: str, extra: list[bytes] = ()) -> tuple[object, list[bytes]]:
    """A landing file of the Canal seed (changes, DDL) plus ``extra``, and a configuration reading it."""
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    lines = [x for x in (SEEDS_FIXTURES / "canal.jsonl").read_bytes().split(b"\n") if x.strip()] + list(extra)
    (landing / name).write_bytes(b"\n".join(lines) + b"\n")
    cfg = parse_config(
        {
            "warehouse": str(tmp_path / "wh"),
            "quality_checks": False,
            "sources": [{"name": "shop", "format": "canal", "path": str(landing)}],
        },
        origin="test",
    )
    return cfg, lines


def _scanned(spark, wh: Warehouse) -> dict[str, int]:
    """The counts a scan of silver's tables gives (what reconcile did before the counts were kept)."""
    rows = count_rows(_silver_rows(spark, wh))
    return {t: sum(r[t] for r in rows) for t, _k in COUNTED} | {"accounted": sum(r["messages"] for r in rows)}


def _versions(spark, wh: Warehouse, table: str) -> int:
    return wh.silver(table).delta(spark).history().count()


def test_a_retried_batch_counts_once_and_commits_only_where_it_has_rows(spark, tmp_path):
    cfg, lines = _canal(tmp_path, "a.jsonl", [GARBAGE])
    run_pipeline(spark, cfg, ("bronze",))
    wh = Warehouse.from_config(cfg)
    ensure_silver(spark, wh)
    decoded = decode_frame(wh.bronze.read(spark), cfg).localCheckpoint()
    before = {t: _versions(spark, wh, t) for t in ("heartbeats", "skipped")}
    first = write_silver_batch(spark, decoded, 7, wh, "app", check=False)
    again = write_silver_batch(spark, decoded, 7, wh, "app", check=True)  # the retry after a crash
    assert first == again and first["quarantine"] == 1 and first["change"] > 0 and first["ddl"] > 0
    counts = reconcile(spark, wh)
    assert counts["bronze_messages"] == counts["accounted"] == len(lines)
    assert {k: v for k, v in counts.items() if k != "bronze_messages"} == _scanned(spark, wh)
    assert wh.silver("changes").read(spark).count() == first["change"]  # appended once
    assert wh.silver("batch_counts").read(spark).count() == 1  # one row: one source, one batch
    # no row of these kinds in the batch: no commit to their tables
    assert {t: _versions(spark, wh, t) for t in ("heartbeats", "skipped")} == before
    # a later batch of the same stream is a new one, counted again
    write_silver_batch(spark, decoded, 8, wh, "app", check=False)
    assert reconcile(spark, wh)["accounted"] == 2 * len(lines)


def test_counts_reconcile_after_a_restart_that_retries_a_committed_batch(spark, tmp_path):
    cfg, lines = _canal(tmp_path, "a.jsonl", [GARBAGE])
    run_pipeline(spark, cfg, ("bronze", "silver"))
    wh = Warehouse.from_config(cfg)
    # a crash after silver wrote the batch, before the stream committed it: the restart runs it again
    commits = Path(wh.checkpoint("silver", "decode")) / "commits"
    last = max(commits.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last.unlink()
    (commits / f".{last.name}.crc").unlink(missing_ok=True)
    shutil.copyfile(tmp_path / "landing" / "a.jsonl", tmp_path / "landing" / "b.jsonl")  # and new messages
    run_pipeline(spark, cfg, ("bronze", "silver"))
    counts = reconcile(spark, wh)
    assert counts["bronze_messages"] == counts["accounted"] == 2 * len(lines)
    assert counts["quarantine"] == 2
    assert {k: v for k, v in counts.items() if k != "bronze_messages"} == _scanned(spark, wh)
    assert last_seen(spark, wh) == {
        r["source"]: tuple(None if r[m] is None else r[m] / 1e6 for m in ("last_change_time", "last_heartbeat_time",
                                                                          "last_ingest_time"))
        for r in count_rows(_silver_rows(spark, wh))
    }  # fmt: skip


def test_a_warehouse_older_than_the_counts_gets_them_from_a_scan(spark, tmp_path):
    cfg, lines = _canal(tmp_path, "a.jsonl", [GARBAGE])
    run_pipeline(spark, cfg, ("bronze", "silver"))
    wh = Warehouse.from_config(cfg)
    shutil.rmtree(wh.silver("batch_counts").path)  # silver written before batch_counts existed
    ensure_silver(spark, wh)
    (row,) = kept_counts(spark, wh)
    assert row["messages"] == len(lines) and row["quarantine"] == 1
    counts = reconcile(spark, wh)
    assert counts["bronze_messages"] == counts["accounted"] == len(lines)
