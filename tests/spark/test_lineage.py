"""`lakecdc why`, the consistent point and `lakecdc erase` on one small Debezium warehouse, three runs:

1. customer 1 inserted and updated (one batch: the insert folds), a second customer, an update a ``drop`` rule
   quarantines, an update silver cannot decode (a value of the wrong type), and transaction tx0 (an order and
   its item) whole, END included;
2. a late update of customer 1 (older than the one applied: stale) and the first half of transaction tx1
   (the order; its item and END come later);
3. the second half of tx1.

The consistent read after run 2 shows tx0 and none of tx1; after run 3, all of tx1. Erase runs last (it
changes the warehouse): after it and VACUUM, no file under the warehouse holds customer 1's values, and a
rebuild from bronze does not bring them back. Parquet is written uncompressed here, so the bytes are
greppable (dictionary pages keep strings whole).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from pipelines.cli import main
from pipelines.config import load_config
from pipelines.consistent import export_consistent, read_points
from pipelines.formats.base import Change, DecodeContext
from pipelines.formats.debezium import DECODER
from pipelines.runner import rebuild, run_pipeline
from pipelines.warehouse import Warehouse
from pipelines.why import explain_key

CUSTOMER = {"id": "int", "name": "varchar(40)", "email": "varchar(60)", "age": "int"}
ORDER = {"id": "int", "customer_id": "int", "total": "decimal(10,2)"}
ITEM = {"id": "int", "order_id": "int", "sku": "varchar(20)"}
SECRET = "Zebulon-Quuxley-7f3a"  # customer 1's name: what erase must leave nowhere
MIRROR = "shop.customers"


def _msg(op, table, before, after, seq, txn=None, types=None):
    types = types or {"customers": CUSTOMER, "orders": ORDER, "items": ITEM}[table]
    change = Change(op=op, db="shop", table=table, before=before, after=after, col_types=types, seq=(1, seq, 0),
                    event_time=f"2026-01-01T00:{seq // 60:02d}:{seq % 60:02d}Z", txn=txn)  # fmt: skip
    return DECODER.encode(change, DecodeContext())


def _marker(status, txn, counts=None):
    collections = [{"data_collection": f"shop.{t}", "event_count": n} for t, n in (counts or {}).items()]
    count = sum(counts.values()) if counts else None
    return json.dumps({"status": status, "id": txn, "event_count": count, "data_collections": collections}).encode()


def _runs() -> list[list[bytes]]:
    c1 = {"id": "1", "name": SECRET, "email": "zq@erase.example", "age": "30"}
    c1b = {**c1, "name": SECRET + "-2"}
    return [
        [
            _msg("INSERT", "customers", None, c1, 100),
            _msg("INSERT", "customers", None, {"id": "2", "name": "Other", "email": "o@x", "age": "40"}, 110),
            _msg("UPDATE", "customers", c1, c1b, 200),
            _msg("UPDATE", "customers", c1b, {**c1b, "age": "999"}, 250),  # the drop rule age_sane
            _msg("UPDATE", "customers", c1b, {**c1b, "age": "x1"}, 260, types={**CUSTOMER, "age": "varchar(9)"}),
            _marker("BEGIN", "tx0"),
            _msg("INSERT", "orders", None, {"id": "9", "customer_id": "2", "total": "5.00"}, 300, txn="tx0"),
            _msg("INSERT", "items", None, {"id": "90", "order_id": "9", "sku": "A"}, 301, txn="tx0"),
            _marker("END", "tx0", {"orders": 1, "items": 1}),
        ],
        [
            _msg("UPDATE", "customers", c1, {**c1, "age": "31"}, 150),  # late: older than seq 200
            _marker("BEGIN", "tx1"),
            _msg("INSERT", "orders", None, {"id": "10", "customer_id": "1", "total": "7.50"}, 400, txn="tx1"),
        ],
        [
            _msg("INSERT", "items", None, {"id": "100", "order_id": "10", "sku": "B"}, 401, txn="tx1"),
            _marker("END", "tx1", {"orders": 1, "items": 1}),
        ],
    ]


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("lineage")
    rule = {"name": "age_sane", "expect": "between", "column": "age", "min": 0, "max": 150, "action": "drop"}
    conf = {
        "warehouse": str(root / "warehouse"),
        "sources": [{"name": "shop", "format": "debezium", "path": str(root / "landing")}],
        "tables": {
            "shop.customers": {"key": ["id"], "columns": CUSTOMER, "expectations": [rule]},
            "shop.orders": {"key": ["id"], "columns": ORDER},
            "shop.items": {"key": ["id"], "columns": ITEM},
        },
        "quality_checks": False,
    }
    path = root / "pipeline.yaml"
    path.write_text(yaml.safe_dump(conf))
    cfg = load_config(path)
    codec = spark.conf.get("spark.sql.parquet.compression.codec")
    spark.conf.set("spark.sql.parquet.compression.codec", "uncompressed")
    consistent = []
    try:
        (root / "landing").mkdir()
        for n, messages in enumerate(_runs()):
            (root / "landing" / f"run-{n}.jsonl").write_bytes(b"\n".join(messages) + b"\n")
            run_pipeline(spark, cfg)
            consistent.append(export_consistent(spark, Warehouse.from_config(cfg)))
        yield SimpleNamespace(root=root, conf=path, cfg=cfg, wh=Warehouse.from_config(cfg), consistent=consistent)
    finally:
        spark.conf.set("spark.sql.parquet.compression.codec", codec)


def test_why_tells_each_change_of_the_key(spark, shop):
    report = explain_key(spark, shop.wh, shop.cfg, MIRROR, {"id": "1"})
    got = [(c["op"], c["seq"].split(".")[1].lstrip("0"), c["decision"]["status"]) for c in report.changes]
    assert got == [
        ("INSERT", "100", "applied"),
        ("UPDATE", "150", "stale"),
        ("UPDATE", "200", "applied"),
        ("UPDATE", "250", "quarantined"),
    ]  # the undecodable update names no key: silver's quarantine, not the key's changes
    insert, late, update, dropped = report.changes
    assert insert["decision"]["last"] is False and update["decision"]["last"] is True  # one batch, folded
    assert insert["decision"]["batch"] == update["decision"]["batch"]
    assert late["decision"]["against_seq"] == update["seq"]
    assert dropped["decision"]["rule"] == "age_sane"
    assert insert["bronze_position"].endswith("run-0.jsonl#1") and late["bronze_position"].endswith("run-1.jsonl#1")
    # the version that applied the update holds it, and the one before does not have the key yet
    version = update["mirror_version"]
    rows = spark.sql(f"SELECT name, _seq FROM {report.target.ref.sql} VERSION AS OF {version} WHERE id = 1").collect()
    assert [(r["name"], r["_seq"]) for r in rows] == [(SECRET + "-2", update["seq"])]
    before = spark.sql(f"SELECT * FROM {report.target.ref.sql} VERSION AS OF {version - 1} WHERE id = 1")
    assert before.count() == 0
    assert report.now["_seq"] == update["seq"]
    assert set(report.reads) >= {"silver changes", "key state", "mirror log"}


def test_why_command_json_and_exit_codes(shop, capsys):
    assert main(["why", "--conf", str(shop.conf), "--table", MIRROR, "--key", "id=1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["key"] == {"id": "1"} and len(doc["changes"]) == 4
    assert main(["why", "--conf", str(shop.conf), "--table", MIRROR, "--key", "id=77"]) == 1  # no change
    assert main(["why", "--conf", str(shop.conf), "--table", MIRROR, "--key", "name=x"]) == 2  # not its key


def test_the_consistent_read_never_shows_half_a_transaction(spark, shop):
    after_1, after_2, after_3 = shop.consistent
    orders, items = "shop.orders", "shop.items"
    assert [r["id"] for r in after_1[orders]] == [9] and [r["id"] for r in after_1[items]] == [90]
    # run 2 delivered tx1's order only: the point stays at run 1 (the order is in the mirror, not in the read)
    assert [r["id"] for r in after_2[orders]] == [9] and [r["id"] for r in after_2[items]] == [90]
    assert [r["id"] for r in after_3[orders]] == [9, 10] and [r["id"] for r in after_3[items]] == [90, 100]
    point = read_points(spark, shop.wh)["shop"]
    assert point.held_by is None and point.complete_up_to.startswith("2026-01-01 00:06:41")
    held = spark.read.format("delta").load(f"{shop.wh.root}/gold/_state/consistent").where("held_by IS NOT NULL")
    assert [r["held_by"] for r in held.collect()] == ["tx1"]


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.mark.long  # make test-all: minutes of erase, VACUUM, a pipeline run and a rebuild (passed 2026-12-02, 1108 s at load 7)
def test_erase_leaves_no_value_and_a_rebuild_does_not_bring_it_back(spark, shop, capsys):
    wh, needle = shop.wh, SECRET.encode()
    warehouse = Path(wh.root)
    assert _files_holding(warehouse, needle)  # the value is there to begin with
    args = ["erase", "--conf", str(shop.conf), "--table", MIRROR, "--key", "id=1"]
    assert main([*args, "--json"]) == 1  # a dry run
    plan = json.loads(capsys.readouterr().out)
    assert plan["would_remove"]["mirror"] == 1 and plan["messages"] == 5  # 4 of the key + 1 silver could not read
    assert main([*args, "--yes", "--json", "--requested-by", "dpo", "--reason", "ticket 7"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["removed"]["bronze"] == 5 and result["requested_by"] == "dpo"
    audit = spark.read.format("delta").load(f"{wh.root}/bronze/erasures").collect()
    assert [(a["mirror"], a["reason"]) for a in audit] == [(MIRROR, "ticket 7")]
    assert len(audit[0]["key_hash"]) == 64  # a hash, never the key
    assert spark.read.format("delta").load(f"{wh.root}/gold/shop__customers").where("id = 1").count() == 0
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        for table in warehouse.rglob("_delta_log"):
            spark.sql(f"VACUUM delta.`{table.parent}` RETAIN 0 HOURS")
    finally:
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "true")
    held = _files_holding(warehouse, needle)
    # only the Delta log's commits may still name it, in the min/max statistics of files now removed
    assert [f for f in held if "/_delta_log/" not in f] == []
    for f in held:  # a commit's add/remove actions, a checksum's file list: statistics of files, nothing else
        for line in (warehouse / f).read_text().splitlines():
            if SECRET not in line:
                continue
            doc = json.loads(line)
            files = [doc[k] for k in ("add", "remove") if k in doc] + list(doc.get("allFiles") or [])
            assert SECRET not in json.dumps({k: v for k, v in doc.items() if k not in ("add", "remove", "allFiles")})
            assert all(SECRET not in json.dumps({k: v for k, v in a.items() if k != "stats"}) for a in files), f
    run_pipeline(spark, shop.cfg)  # the streams skip the rewrites (dataChange=false): nothing new, no failure
    assert spark.read.format("delta").load(f"{wh.root}/gold/shop__customers").where("id = 1").count() == 0
    # a rebuild from bronze: the redacted messages are quarantined, customer 1 stays gone, the rest is back
    rebuild(spark, shop.cfg)
    customers = spark.read.format("delta").load(f"{wh.root}/gold/shop__customers")
    assert [r["id"] for r in customers.collect()] == [2]
    assert spark.read.format("delta").load(f"{wh.root}/gold/shop__orders").count() == 2
    from pipelines.silver import reconcile

    counts = reconcile(spark, wh)
    assert counts["bronze_messages"] == counts["accounted"]
