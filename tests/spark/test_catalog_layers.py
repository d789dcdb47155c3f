"""Unity Catalog's layout, proven on Spark's own Hive-less catalog (``spark_catalog`` with schemas):
a schema per layer, a ``target`` that chooses a mirror's schema and name, the built-in checks and
``rebuild`` on catalog tables. The same code names Unity Catalog tables on Databricks."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from pipelines.cli import main
from pipelines.testing.demo import demo_config, generate, write_landing

CATALOG = "spark_catalog"


def _tables(spark, schema: str) -> set[str]:
    return {r["tableName"] for r in spark.sql(f"SHOW TABLES IN {CATALOG}.{schema}").collect() if not r["isTemporary"]}


def _export(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["export", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def layered(spark, tmp_path):
    """The demo's configuration with a schema per layer, and orders mirrored as ``<sales>.orders``."""
    base = f"lakecdc_layers_{os.getpid()}"
    schemas = {layer: f"{base}_{layer}" for layer in ("bronze", "silver", "gold")}
    sales = f"{base}_sales"
    write_landing(tmp_path, generate(60, seed=11, dq_faults=True))
    doc = demo_config(tmp_path)
    doc.update(catalog=CATALOG, schemas=schemas, checkpoints=str(tmp_path / "volume" / "checkpoints"))
    [orders] = [name for name in doc["tables"] if name.endswith(".orders")]
    doc["tables"][orders]["target"] = f"{sales}.orders"
    conf = tmp_path / "catalog.yaml"
    conf.write_text(yaml.safe_dump(doc))
    local = dict(demo_config(tmp_path), quality_checks=False)  # the same pipeline on paths, as the reference
    local_conf = tmp_path / "local.yaml"
    local_conf.write_text(yaml.safe_dump(local))
    yield conf, local_conf, schemas, sales, orders
    for schema in [*schemas.values(), sales]:
        spark.sql(f"DROP SCHEMA IF EXISTS {CATALOG}.{schema} CASCADE")


def test_a_schema_per_layer_and_a_target_schema(spark, tmp_path, capsys, layered):
    conf, local_conf, schemas, sales, orders = layered
    capsys.readouterr()
    assert main(["run", "--conf", str(conf)]) == 2  # schemas are the administrator's: named, never created
    assert f"schema {CATALOG}.{schemas['bronze']}, " in capsys.readouterr().err
    for schema in [*schemas.values(), sales]:
        spark.sql(f"CREATE SCHEMA {CATALOG}.{schema} LOCATION '{tmp_path / 'tables' / schema}'")

    code = main(["run", "--conf", str(conf)])
    assert code == 0, capsys.readouterr().err[-3000:]
    assert main(["run", "--conf", str(local_conf)]) == 0

    assert _tables(spark, schemas["bronze"]) == {"raw_messages"}
    assert _tables(spark, schemas["silver"]) == {
        "changes",
        "quarantine",
        "heartbeats",
        "ddl_log",
        "skipped",
        "batch_counts",
        "dq_results",
        "dq_certified",  # the mirrors whose checks passed (pipelines.quality.certify)
    }
    gold = _tables(spark, schemas["gold"])
    mirrors = {t for t in gold if not t.startswith("_")}
    assert len(mirrors) == 2 and not any("orders" in m for m in mirrors), gold  # customers and stock
    # gold's state, and the consistent points the runner records after gold (pipelines.consistent)
    state = {"_lakecdc_keys", "_lakecdc_pending", "_lakecdc_progress", "_lakecdc_consistent"}
    assert {t for t in gold if t.startswith("_")} == state
    assert _tables(spark, sales) == {"orders"}, "a target schema holds its mirror; gold's state stays in gold's"

    exported = _export(capsys, "--conf", str(conf))
    reference = _export(capsys, "--conf", str(local_conf))
    assert exported == {f"{sales}.orders" if name == orders else name: rows for name, rows in reference.items()}
    assert sum(map(len, exported.values())) > 20

    # the built-in checks ran on the catalog tables, and their Data Docs sit under the checkpoints (a volume)
    results = spark.table(f"{CATALOG}.{schemas['silver']}.dq_results")
    checked = {r["table"] for r in results.where("expectation = 'cdc_key_unique'").collect()}
    assert checked == set(exported)
    assert (tmp_path / "volume" / "checkpoints" / "dq" / "data_docs" / "index.html").is_file()

    # rebuild drops silver and gold (not bronze, not the DQ record) and gives the same mirrors again
    capsys.readouterr()
    assert main(["rebuild", "--conf", str(conf)]) == 1  # without --yes: only what it would drop
    would = {line.removeprefix("would drop ") for line in capsys.readouterr().out.splitlines() if "would" in line}
    silver = {
        f"{CATALOG}.{schemas['silver']}.{t}"
        for t in ("changes", "quarantine", "heartbeats", "ddl_log", "skipped", "batch_counts")
    }
    gold_tables = {f"{CATALOG}.{schemas['gold']}.{t}" for t in gold} | {
        f"{CATALOG}.{sales}.{t}" for t in _tables(spark, sales)
    }
    assert {w for w in would if not w.startswith("/")} == silver | gold_tables  # not bronze, not dq_results
    assert main(["rebuild", "--conf", str(conf), "--yes"]) == 0
    assert _export(capsys, "--conf", str(conf)) == exported
    assert _tables(spark, schemas["bronze"]) == {"raw_messages"}
