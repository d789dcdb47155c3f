"""The demo's pipeline through a local Spark Connect server (issue 33): pyspark's own ``spark-connect`` jar,
Delta's jars from the cache and Delta's session extension, bound to 127.0.0.1, and ``lakecdc run --remote``.
No Delta Connect plugin on the server: the runtime's Delta DML is SQL there (:mod:`pipelines.delta_dml`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_spark_cluster import ROOT, _die_with_parent, _free_port, _mirrors, _run, _stop, _wait

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pytest.importorskip(
    "grpc", reason="PySpark's connect extra (grpcio, grpcio-status, googleapis-common-protos, zstandard)"
)

CHANGES = 60
SERVER_TIMEOUT = 300  # seconds for the server's JVM to start on a busy 2-core machine


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:<port>`` of a Spark Connect server with Delta, stopped after the module."""
    from pyspark.find_spark_home import _find_spark_home

    from pipelines.spark import submit_jars

    port, log = _free_port(), tmp_path_factory.mktemp("connect") / "server.log"
    conf = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.databricks.delta.snapshotPartitions": "2",
    }
    command = [
        str(Path(_find_spark_home(), "bin", "spark-submit")),
        "--master", "local[2]", "--driver-memory", "1g",
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--jars", submit_jars(),
        *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
        "spark-internal",
    ]  # fmt: skip
    # the server's Python workers (foreachBatch) import this checkout's pipelines
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_REMOTE", None)
    with open(log, "wb") as out:
        server = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
    try:
        _wait("Spark Connect server", lambda: "Spark Connect server started" in log.read_text(errors="replace"),
              SERVER_TIMEOUT, [server], [log])  # fmt: skip
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop([server])


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipelines.testing.demo import generate, write_landing

    data = tmp_path_factory.mktemp("demo")
    write_landing(data, generate(CHANGES, seed=7))
    return data


def _remote_run(url: str, conf: Path, stage: str, log: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    command = [sys.executable, "-m", "pipelines.cli", "run", "--conf", str(conf), "--stage", stage, "--once"]
    _run([*command, "--remote", url], env, log)


def _bronze(spark, warehouse: Path) -> list[tuple]:
    from pipelines.warehouse import Warehouse

    rows = Warehouse(str(warehouse)).bronze.read(spark).select("source", "format", "value", "position", "queue_pos")
    return sorted(tuple(r) for r in rows.collect())


def test_the_demo_over_spark_connect_equals_a_classic_run(connect_url, demo_data, spark, tmp_path):
    """The whole demo, checks on: silver's and gold's batches run in the server's ``foreachBatch`` worker
    (Delta's Python API there becomes SQL, :mod:`pipelines.delta_dml`), their counts come back through the
    session (:mod:`pipelines.connect_relay`), and the client runs the checks."""
    from pipelines.config import load_config
    from pipelines.runner import run_pipeline

    remote, log = tmp_path / "wh-connect", tmp_path / "connect.log"
    _remote_run(connect_url, _demo_conf(demo_data, remote), "all", log)
    classic = tmp_path / "wh-classic"
    summary = run_pipeline(spark, load_config(_demo_conf(demo_data, classic)), available_now=True)
    landed = _bronze(spark, classic)
    assert len(landed) > CHANGES and _bronze(spark, remote) == landed
    assert _mirrors(spark, remote) == _mirrors(spark, classic)
    printed = log.read_text()
    assert summary.applied > 0 and f"{summary.applied} changes applied" in printed, printed[-3000:]
    assert f"{summary.dq_results} checks, {summary.dq_failed} failed" in printed, printed[-3000:]
    assert _results(spark, remote) == _results(spark, classic)


def _demo_conf(demo_data: Path, warehouse: Path) -> Path:
    """The demo's pipeline as ``make demo`` runs it: expectations and the built-in checks on."""
    from pipelines.testing.demo import demo_config

    path = warehouse.with_suffix(".yaml")
    path.write_text(yaml.safe_dump({**demo_config(demo_data), "warehouse": str(warehouse)}, sort_keys=False))
    return path


def _results(spark, warehouse: Path) -> list[tuple]:
    """Each data-quality result as (table, check, action, success, rows checked, unexpected rows)."""
    from pipelines.quality.storage import dq_results_ref

    rows = dq_results_ref(str(warehouse)).read(spark)
    columns = ("table", "expectation", "action", "success", "element_count", "unexpected_count")
    return sorted(tuple(r) for r in rows.select(*columns).collect())


@pytest.mark.long
def test_the_one_query_over_spark_connect_equals_a_classic_per_stage_run(connect_url, demo_data, spark, tmp_path):
    """``queries: one`` over Spark Connect: the one query's batches land, decode and apply in the server's
    ``foreachBatch`` worker, its counts come back through the session, and the tables are a classic per-stage
    run's."""
    from pipelines.config import load_config
    from pipelines.runner import run_pipeline

    remote, log = tmp_path / "wh-connect", tmp_path / "connect.log"
    conf = _demo_conf(demo_data, remote)
    conf.write_text(yaml.safe_dump({**yaml.safe_load(conf.read_text()), "queries": "one"}, sort_keys=False))
    _remote_run(connect_url, conf, "all", log)
    classic = tmp_path / "wh-classic"
    summary = run_pipeline(spark, load_config(_demo_conf(demo_data, classic)), available_now=True)
    printed = log.read_text()
    assert "bronze+silver+gold: done" in printed, printed[-3000:]
    assert _bronze(spark, remote) == _bronze(spark, classic) and _mirrors(spark, remote) == _mirrors(spark, classic)
    assert summary.applied > 0 and f"{summary.applied} changes applied" in printed, printed[-3000:]
    assert _results(spark, remote) == _results(spark, classic)
