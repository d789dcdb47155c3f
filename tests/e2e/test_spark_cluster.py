"""The demo pipeline on a real Spark standalone cluster: one master and two 1-core workers on 127.0.0.1, started
from the installed pyspark's own ``spark-class``.

It runs twice there, as users run it: ``spark-submit --master spark://... jobs/run_stage.py`` (settings and the
cached jars given to spark-submit) and ``lakecdc run --master spark://...`` (settings from a ``spark-defaults.conf``;
``get_spark`` ships the cached jars through ``spark.jars``). Proof that executors did the work, not the driver
alone: the master's JSON endpoint shows each application with cores granted while it ran and FINISHED after, and
each worker's work dir holds that application's executor log with finished tasks. Both runs' mirrors equal those of
a local run of the same data.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

# long (make test-all): two demo runs, local and on the cluster, cost about six minutes on 2 cores; CI's slice of
# "it runs distributed too" is the Spark Connect e2e test (tests/e2e/test_spark_connect.py)
pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[2]
CHANGES = 150  # enough for every op, DDL and quarantine of the demo; small for 2 cores
STEP_TIMEOUT = 600  # seconds for one pipeline run on the cluster (a busy 2-core machine is slow)
#: Settings for the cluster runs, sized for this machine (two 1-core workers): without them every Delta snapshot
#: is 50 tasks and every shuffle 200, minutes of task overhead for a few hundred rows. No driver UI.
CLUSTER_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.executor.memory": "768m",
    # short-lived JVMs: the quick JIT tier only (the optimising one costs more CPU than it saves here)
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    "spark.ui.enabled": "false",
}


def _die_with_parent() -> None:  # runs in the child between fork and exec: no daemon outlives the test run
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the finalizer still stops them
        pass


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _master_state(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as resp:
        return json.load(resp)


@dataclass
class Cluster:
    url: str
    ui_port: int
    work_dirs: list[Path]
    env: dict[str, str]
    max_cores: dict[str, int] = field(default_factory=dict)  # application name → most cores seen granted

    def state(self) -> dict:
        return _master_state(self.ui_port)

    def app(self, name: str, timeout: float = 60) -> dict:
        """The completed application of that name (its last run).

        The master files an application as completed only after it notices the driver has gone, which can be a
        few seconds after the driver process exits on a busy machine: wait for it, bounded.
        """
        deadline = time.monotonic() + timeout
        while True:
            completed = self.state()["completedapps"]
            apps = [a for a in completed if a["name"] == name]
            if apps:
                return apps[-1]
            assert time.monotonic() < deadline, f"no completed application {name!r} on the master: {completed}"
            time.sleep(0.5)

    def executor_logs(self, app_id: str) -> list[Path]:
        """Each worker's executor stderr of the application (``<work dir>/<app id>/<executor id>/stderr``)."""
        return [log for work in self.work_dirs for log in sorted((work / app_id).glob("*/stderr"))]


def _wait(what: str, ready, timeout: float, procs: list[subprocess.Popen], logs: list[Path]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc, log in zip(procs, logs):
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: a daemon exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not ready after {timeout:.0f}s; logs in {', '.join(map(str, logs))}")


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each daemon (a worker stops its executors), bounded waits, SIGKILL what stays."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("java (17+) is not installed")
    from pyspark.find_spark_home import _find_spark_home

    spark_class = Path(_find_spark_home(), "bin", "spark-class")
    base = tmp_path_factory.mktemp("spark-cluster")
    conf_dir = base / "conf"  # empty: nothing from a spark-defaults.conf elsewhere
    conf_dir.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK_GATEWAY")}
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_DAEMON_MEMORY="384m",
        PYSPARK_PYTHON=sys.executable,
    )
    port, ui_port = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    daemons = [
        (
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui_port),
            ],
        )
    ]
    work_dirs = [base / f"worker-{i}" for i in (1, 2)]
    for i, work in enumerate(work_dirs, start=1):
        daemons.append(
            (
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(_free_port()),
                    "--webui-port",
                    str(_free_port()),
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--work-dir",
                    str(work),
                    url,
                ],
            )
        )
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    try:
        for name, args in daemons:
            logs.append(base / f"{name}.log")
            with open(logs[-1], "wb") as out:
                procs.append(
                    subprocess.Popen(
                        [str(spark_class), *args],
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                        preexec_fn=_die_with_parent,
                    )
                )
            if name == "master":
                _wait("master", lambda: _master_state(ui_port)["status"] == "ALIVE", 90, procs, logs)
        _wait("workers", lambda: _master_state(ui_port)["aliveworkers"] == 2, 90, procs, logs)
        found = Cluster(url=url, ui_port=ui_port, work_dirs=work_dirs, env=env)
        stop_polling = threading.Event()
        poller = threading.Thread(target=_poll_cores, args=(found, stop_polling), daemon=True)
        poller.start()
        yield found
        stop_polling.set()
        poller.join(timeout=5)
    finally:
        _stop(procs[::-1])


def _poll_cores(cluster: Cluster, stop: threading.Event) -> None:
    """Record the cores granted to each running application (a finished one shows none)."""
    while not stop.wait(0.5):
        try:
            for app in cluster.state()["activeapps"]:
                cluster.max_cores[app["name"]] = max(cluster.max_cores.get(app["name"], 0), app["cores"])
        except OSError:
            pass


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's landing files (two sources, three tables, DDL, heartbeats, poison messages)."""
    from pipelines.testing.demo import generate, write_landing

    data = tmp_path_factory.mktemp("demo")
    write_landing(data, generate(CHANGES, seed=7))
    return data


def _conf(demo_data: Path, warehouse: Path) -> Path:
    from pipelines.testing.demo import demo_config

    conf = {**demo_config(demo_data, quality=False), "warehouse": str(warehouse)}
    path = warehouse.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(conf, sort_keys=False))
    return path


def _run(command: list[str], env: dict[str, str], log: Path) -> None:
    began = time.monotonic()
    with open(log, "wb") as out:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=STEP_TIMEOUT,
        )
    print(f"{' '.join(command[:3])} ... took {time.monotonic() - began:.0f}s")
    assert done.returncode == 0, f"{command} exited with {done.returncode}:\n{log.read_text()[-6000:]}"


def _assert_ran_on_executors(cluster: Cluster, name: str) -> None:
    app = cluster.app(name)
    assert app["state"] == "FINISHED", app
    assert cluster.max_cores.get(name, 0) >= 1, f"{name} was never granted cores: {cluster.max_cores}"
    logs = cluster.executor_logs(app["id"])
    assert len(logs) == 2, f"expected one executor per worker for {app['id']}, found {logs}"
    for log in logs:
        assert "Finished task" in log.read_text(errors="replace"), f"{log} shows no finished task"


def _mirrors(spark, warehouse: Path) -> dict:
    from pipelines.export import export_warehouse
    from pipelines.warehouse import Warehouse

    return export_warehouse(spark, Warehouse(str(warehouse)))


def test_demo_on_a_standalone_cluster_equals_a_local_run(
    cluster: Cluster, demo_data: Path, spark, tmp_path: Path
) -> None:
    from pyspark.find_spark_home import _find_spark_home

    from pipelines.config import load_config
    from pipelines.runner import run_pipeline
    from pipelines.spark import submit_jars

    # 1. spark-submit jobs/run_stage.py: master, settings and jars given to spark-submit.
    submitted = tmp_path / "wh-submit"
    settings = [arg for key, value in CLUSTER_CONF.items() for arg in ("--conf", f"{key}={value}")]
    _run(
        [
            str(Path(_find_spark_home(), "bin", "spark-submit")),
            "--master",
            cluster.url,
            "--name",
            "lakecdc-cluster-submit",
            "--jars",
            submit_jars(),
            *settings,
            str(ROOT / "jobs" / "run_stage.py"),
            "--conf",
            str(_conf(demo_data, submitted)),
            "--once",
        ],
        cluster.env,
        tmp_path / "submit.log",
    )
    _assert_ran_on_executors(cluster, "lakecdc-cluster-submit")

    # 2. lakecdc run --master: settings from spark-defaults.conf, the cached jars shipped by get_spark.
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{key} {value}\n" for key, value in CLUSTER_CONF.items()))
    lakecdc = Path(sys.executable).with_name("lakecdc")
    command = [str(lakecdc)] if lakecdc.exists() else [sys.executable, "-m", "pipelines.cli"]
    with_master = tmp_path / "wh-master"
    _run(
        [*command, "run", "--conf", str(_conf(demo_data, with_master)), "--once", "--master", cluster.url],
        {**cluster.env, "SPARK_CONF_DIR": str(conf_dir)},
        tmp_path / "run-master.log",
    )
    _assert_ran_on_executors(cluster, "lakecdc-run")

    # 3. The same data on the embedded local[2] session; every mirror equal, row for row.
    local = tmp_path / "wh-local"
    run_pipeline(spark, load_config(_conf(demo_data, local)))
    expected = _mirrors(spark, local)
    assert set(expected) == {"demo_tenant.shop.customers", "demo_tenant.shop.orders", "inventory.stock"}
    assert all(expected.values()), {name: len(rows) for name, rows in expected.items()}
    assert _mirrors(spark, submitted) == expected
    assert _mirrors(spark, with_master) == expected
