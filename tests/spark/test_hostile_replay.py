"""A replay of hostile traffic: poison messages, hostile table and column names, surrogates, zero
dates, NULL keys, long binaries, and every name collision of issue 10. The replay exits 0, the
counts reconcile, each distinct source table gets its own mirror, every column is kept, and
nothing is written outside the warehouse."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import yaml

from pipelines.cli import main
from pipelines.warehouse import Warehouse, safe_name
from tests.conftest import SEEDS_FIXTURES

LONG_BYTES = bytes(range(256)) * 2  # 512 bytes: Spark's chunked base64 would break it every 76 chars
HOSTILE_COLUMNS = ["a`b", "$% ^,& *(", "x.y", "名前", "sp ace"]


def canal(db, table, rows, *, op="INSERT", id_=1, es=1_700_000_000_000, types=None, pk=("id",)):
    msg = {
        "type": op,
        "database": db,
        "table": table,
        "id": id_,
        "es": es,
        "ts": es,
        "isDdl": False,
        "pkNames": list(pk) if pk else None,
        "data": rows,
        "mysqlType": types or {c: "varchar(64)" for c in rows[0]} | {"id": "bigint"},
    }
    return json.dumps(msg, ensure_ascii=False).encode()


def traffic() -> tuple[list[bytes], dict[tuple, int]]:
    """The messages, and per distinct source table (db, schema, table) the rows its mirror must hold."""
    lines: list[bytes] = []
    expect: dict[tuple, int] = {}
    es = 1_700_000_000_000

    def add(db, table, n=1, **kw):
        nonlocal es
        es += 1
        for i in range(n):
            lines.append(canal(db, table, [{"id": str(i + 1), "v": f"{db}|{table}|{i}"}], es=es, id_=es, **kw))
        expect[(db, None, table)] = n

    # collisions of the old safe_name: case, '.' in names, '__' against '.'
    add("shop", "orders", 2)
    add("Shop", "Orders", 3)
    add("a.b", "c", 1)
    add("a", "b.c", 2)
    add("a__b", "c", 3)
    add("a", "b__c", 1)
    # a crafted plain name spelling the hashed form of another
    crafted = safe_name(("Shop", "Orders")).split("__")
    add(crafted[0], "__".join(crafted[1:]) or "x", 1)
    # hostile table names: they stay inside the warehouse
    add("..", "../../etc", 1)
    add("db", "t/../../x", 1)
    # hostile column names, kept as they are; a zero date (row kept, column NULL); a long binary
    es += 1
    row = {
        "id": "1",
        **{c: f"value of {c}" for c in HOSTILE_COLUMNS},
        "born": "0000-00-00 00:00:00",
        "blob": base64.b64encode(LONG_BYTES).decode(),
    }
    types = {"id": "bigint", **{c: "varchar(64)" for c in HOSTILE_COLUMNS}, "born": "datetime", "blob": "blob"}
    lines.append(canal("hostile", "cols", [row], es=es, id_=es, types=types))
    expect[("hostile", None, "cols")] = 1
    # under invalid_values: quarantine (this table's setting) a zero date sends its change to quarantine
    es += 1
    lines.append(
        canal("strict", "t", [{"id": "1", "born": "0000-00-00"}], es=es, id_=es, types={"id": "bigint", "born": "date"})
    )
    expect[("strict", None, "t")] = 0
    # a NULL key goes to quarantine, the good row beside it applies
    es += 1
    lines.append(canal("nk", "t", [{"id": None, "v": "lost key"}], es=es, id_=es))
    lines.append(canal("nk", "t", [{"id": "7", "v": "kept"}], es=es + 1, id_=es + 1))
    expect[("nk", None, "t")] = 1
    # poison: not JSON, truncated, duplicate keys, unknown op, a regex bomb type, a surrogate name
    lines += [
        b"this is not json",
        canal("shop", "orders", [{"id": "9", "v": "x"}])[:40],
        b'{"type":"DELETE","database":"shop","table":"orders","type":"INSERT","id":5,"es":5,'
        b'"pkNames":["id"],"data":[{"id":"1"}]}',
        canal("shop", "orders", [{"id": "9", "v": "x"}], op="MERGE"),
        b'{"type":"INSERT","database":"d","table":"t","id":1,"es":1,"data":[{"c":"1"}],"mysqlType":{"c":"a'
        + b" " * 100
        + b'!"}}',
        b'{"type":"INSERT","database":"shop","table":"t\\ud800","id":1,"es":1,"pkNames":["id"],"data":[{"id":"1"}]}',
    ]
    expect[("d", None, "t")] = 1  # the hostile type name is only an unknown type: decoded quickly, kept as text
    return lines, expect


def test_hostile_replay(spark, tmp_path, capsys):
    lines, expect = traffic()
    source = tmp_path / "hostile.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    wh_dir = tmp_path / "wh"
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        yaml.safe_dump(
            {
                "quality_checks": False,
                "sources": [{"name": "unused", "format": "oms_canal", "path": "/nonexistent"}],
                "tables": {"strict.t": {"invalid_values": "quarantine"}},
            }
        )
    )
    before = {p for p in Path("/").glob("*")}

    assert (
        main(
            ["replay", "--format", "oms_canal", "--input", str(source), "--warehouse", str(wh_dir), "--conf", str(conf)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert f"{len(lines)} messages in bronze" in printed

    # GaussDB (PostgreSQL) schemas are part of the name: public.accounts and audit.accounts are two mirrors
    seed = (SEEDS_FIXTURES / "drs_gaussdb.jsonl").read_bytes().split(b"\n")
    gauss = next(line for line in seed if b'"opType": "INSERT"' in line)
    gauss_lines = [gauss.replace(b'"schema01"', b'"public"'), gauss.replace(b'"schema01"', b'"audit"')]
    gauss_file = tmp_path / "gauss.jsonl"
    gauss_file.write_bytes(b"\n".join(gauss_lines) + b"\n")
    replay = ["replay", "--format", "drs_gaussdb", "--input", str(gauss_file), "--warehouse", str(wh_dir)]
    assert main([*replay, "--conf", str(conf)]) == 0
    for schema in ("public", "audit"):
        expect[("database01", schema, "table01")] = 1
    lines += gauss_lines

    wh = Warehouse(str(wh_dir))
    # counts reconcile: every message is a change, heartbeat, DDL or quarantined
    from pipelines.silver import reconcile

    counts = reconcile(spark, wh)
    assert counts["accounted"] == counts["bronze_messages"] == len(lines)
    assert counts["quarantine"] >= 5  # the poison messages (the sixth, a hostile type name, decodes)

    # one mirror per distinct source table, each recording its identity, each holding its own rows
    mirrors = {}
    for path in wh.mirror_paths():
        props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
        db, schema, table = json.loads(props["lakecdc.source_identity"])
        mirrors[(db, schema, table)] = spark.read.format("delta").load(path)
    assert set(mirrors) == set(expect)
    for ident, frame in mirrors.items():
        assert frame.count() == expect[ident], ident
    assert {r["v"] for r in mirrors[("Shop", None, "Orders")].collect()} == {f"Shop|Orders|{i}" for i in range(3)}
    assert {r["v"] for r in mirrors[("a.b", None, "c")].collect()} == {"a.b|c|0"}

    # every column kept as the source names it; the zero date is NULL, its row is there
    hostile = mirrors[("hostile", None, "cols")]
    assert set(HOSTILE_COLUMNS) | {"id", "born", "blob"} <= set(hostile.columns)
    row = hostile.collect()[0].asDict()
    assert row["a`b"] == "value of a`b" and row["$% ^,& *("] == "value of $% ^,& *(" and row["born"] is None
    assert row["blob"] == LONG_BYTES

    # the NULL key is quarantined with a reason, its neighbour applied
    assert [r["v"] for r in mirrors[("nk", None, "t")].collect()] == ["kept"]
    reasons = [r["reason"] for r in wh.silver("quarantine").read(spark).where("stage = 'gold'").collect()]
    assert any("NULL" in r and "id" in r for r in reasons), reasons
    assert any("invalid_values: quarantine" in r and "0000-00-00" in r for r in reasons), reasons

    # the zero date left a data-quality record naming table, column and raw value
    dq = spark.read.format("delta").load(str(wh_dir / "dq" / "dq_results"))
    invalid = dq.where("expectation_type = 'cdc_invalid_value'").collect()
    assert invalid and "0000-00-00 00:00:00" in (invalid[0]["details"] or "") and "born" in invalid[0]["details"]

    # export prints one unbroken Base64 string
    capsys.readouterr()
    assert main(["export", "--warehouse", str(wh_dir), "--table", "hostile.cols"]) == 0
    exported = json.loads(capsys.readouterr().out)
    [exported_row] = exported["hostile.cols"]
    assert exported_row["blob"] == base64.b64encode(LONG_BYTES).decode()

    # nothing outside the warehouse: no new top-level entry, every table under wh/
    assert {p for p in Path("/").glob("*")} == before
    for root, dirs, _files in os.walk(tmp_path):
        for d in dirs:
            if d == "_delta_log":
                assert Path(root).resolve().is_relative_to(wh_dir.resolve()), root
