"""`lakecdc status` reads a keyed mirror's rows, sources and newest change from gold's key state, not from the
mirror: the figures equal a scan of the mirror's rows after deletes, a TRUNCATE and a mirror dropped by hand
and made again; a keyless and a ``deletes: soft`` mirror are still scanned (pipelines.status_mirrors)."""

from __future__ import annotations

import shutil

import pytest

from pipelines.config import parse_config
from pipelines.export import mirror_refs
from pipelines.formats import Change, DecodeContext, get_decoder
from pipelines.gold.state import GoldState
from pipelines.runner import run_pipeline
from pipelines.status import collect_status
from pipelines.status_mirrors import iso, lineages
from pipelines.warehouse import Warehouse, state_key

TYPES = {"id": "bigint", "v": "varchar(20)"}


def _messages(changes: list[tuple[str, str, str | None, int]]) -> bytes:
    """OMS Canal lines of (op, table, id, seq); a table named ``nokey`` has no key."""
    enc, ctx = get_decoder("oms_canal"), DecodeContext()
    lines = []
    for op, table, key, seq in changes:
        image = {"id": key, "v": f"v{seq}"} if key is not None else None
        keyed = key is not None and table != "nokey"
        lines.append(
            enc.encode(
                Change(op=op, db="shop", table=table, key_columns=("id",) if keyed else (),
                       before=image if op in ("UPDATE", "DELETE") else None,
                       after=image if op in ("INSERT", "UPDATE") else None,
                       col_types=dict(TYPES) if image else None, seq=(1_000 + seq,),
                       event_time=f"2026-01-01T00:{seq // 60:02d}:{seq % 60:02d}Z"),
                ctx,
            )
        )  # fmt: skip
    return b"\n".join(lines) + b"\n"


def _scanned_figures(spark, wh: Warehouse) -> dict[str, tuple]:
    """Per mirror, from a scan of its rows (and its deleted keys): rows, sources, newest seq and time."""
    refs = mirror_refs(spark, wh)
    scan = lineages(spark, refs)
    deleted = GoldState(wh).deleted_keys(spark)
    out = {}
    for name, ref in refs.items():
        lin = scan.get(name)
        gone = deleted.get(state_key(ref), (0, None))[1]
        newest = max([x for x in (lin.newest if lin else None, gone) if x], key=lambda x: (x[2] or 0, x[1] or ""))
        out[name] = (lin.rows if lin else 0, list(lin.sources) if lin else [], newest[0], iso(newest[2]))
    return out


def _status_figures(status) -> dict[str, tuple]:
    return {m.name: (m.rows, m.sources, m.last_seq, m.last_event_time) for m in status.mirrors}


@pytest.mark.long  # two pipeline runs (9 minutes on the loaded 2-core machine): make test-all runs it
def test_rows_sources_and_newest_change_from_key_state_equal_a_scan(spark, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    doc = {
        "warehouse": str(tmp_path / "warehouse"),
        "quality_checks": False,
        "sources": [{"name": "canal", "format": "oms_canal", "path": str(landing)}],
        "tables": {"shop.soft": {"deletes": "soft"}},
    }
    cfg = parse_config(doc)
    wh = Warehouse.from_config(cfg)
    first = [("INSERT", t, str(k), 10 * i + k) for i, t in enumerate(("keyed", "trunc", "soft")) for k in range(3)]
    first += [("UPDATE", "keyed", "1", 40), ("DELETE", "keyed", "2", 41), ("DELETE", "soft", "0", 42)]
    first += [("TRUNCATE", "trunc", None, 43), ("INSERT", "trunc", "7", 44), ("INSERT", "nokey", "5", 45)]
    (landing / "a.jsonl").write_bytes(_messages(first))
    run_pipeline(spark, cfg)

    status = collect_status(spark, cfg)
    assert _status_figures(status) == _scanned_figures(spark, wh)
    by_name = {m.name: m for m in status.mirrors}
    assert (by_name["shop.keyed"].rows, by_name["shop.keyed"].tombstones, by_name["shop.trunc"].rows) == (2, 1, 1)
    assert by_name["shop.keyed"].sources == ["canal"] and by_name["shop.keyed"].last_seq is not None
    assert status.scanned == ["shop.nokey", "shop.soft"], "keyed mirrors come from key state"

    # the mirror dropped by hand: made again by the next run; its old keys in key state no longer count
    shutil.rmtree(mirror_refs(spark, wh)["shop.keyed"].path)
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # as a new process finds it
    (landing / "b.jsonl").write_bytes(_messages([("INSERT", "keyed", "9", 50), ("INSERT", "trunc", "8", 51)]))
    run_pipeline(spark, cfg)
    again = collect_status(spark, cfg)
    assert _status_figures(again) == _scanned_figures(spark, wh)
    assert {m.name: m.rows for m in again.mirrors}["shop.keyed"] == 1
    assert "shop.keyed" not in again.scanned and "shop.trunc" not in again.scanned
