"""The one place a SparkSession is made, for jobs, the CLI and tests alike.

On Databricks (or any cluster where a session already exists) it returns the active
session untouched. Locally it builds ``local[2]`` with Delta Lake and the Kafka
source, resolving their jars from Maven Central through
``configure_spark_with_delta_pip`` (which picks the Spark-suffixed
``delta-spark_4.1_2.13`` jar) into an Ivy cache under the project's ignored
``build/`` folder, so only the first run downloads.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)

_PROJECT_ROOT = Path(__file__).resolve().parent.parent


def cache_dir(name: str, env_var: str) -> Path:
    """Where downloaded build inputs are kept: ``$<env_var>``, else ``build/<name>`` in a source
    checkout (git-ignored), else ``~/.cache/lakecdc/<name>``."""
    if os.environ.get(env_var):
        return Path(os.environ[env_var])
    if (_PROJECT_ROOT / "pyproject.toml").exists():
        return _PROJECT_ROOT / "build" / name
    return Path.home() / ".cache" / "lakecdc" / name


def ivy_dir() -> Path:
    """The Ivy cache of the Delta and Kafka jars (``$LAKECDC_IVY_DIR`` overrides)."""
    return cache_dir("ivy", "LAKECDC_IVY_DIR")


#: The Maven Central this project resolves from carries no
#: ``spark-token-provider-kafka-0-10`` for Spark 4.1.x (only up to 4.0.0), although the
#: Kafka source depends on it. Its delegation-token helper API is unchanged since 3.x,
#: so we exclude the missing version from resolution and add this jar, downloaded once
#: into the Ivy folder. ``$LAKECDC_KAFKA_TOKEN_PROVIDER_URL`` overrides it.
KAFKA_TOKEN_PROVIDER_URL = (
    "https://repo1.maven.org/maven2/org/apache/spark/spark-token-provider-kafka-0-10_2.13/4.0.0/"
    "spark-token-provider-kafka-0-10_2.13-4.0.0.jar"
)


def kafka_package() -> str:
    """The Kafka source, at exactly Spark's version."""
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__.split('+')[0]}"


def _token_provider_jar(ivy: Path) -> Path:
    url = os.environ.get("LAKECDC_KAFKA_TOKEN_PROVIDER_URL", KAFKA_TOKEN_PROVIDER_URL)
    target = ivy / "extra" / url.rsplit("/", 1)[-1]
    if not target.exists():
        import urllib.request

        target.parent.mkdir(parents=True, exist_ok=True)
        log.warning("downloading %s", url)
        with urllib.request.urlopen(url, timeout=120) as resp:
            data = resp.read()
        tmp = target.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(target)
    return target


def get_spark(app_name: str = "lakecdc", *, master: str | None = None, extra_conf: dict | None = None):
    """The active session if there is one (Databricks), else a local one sized for 2 cores."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active

    from delta import configure_spark_with_delta_pip

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # only loopback, never the LAN
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv's pyarrow

    ivy = ivy_dir()
    ivy.mkdir(parents=True, exist_ok=True)
    first_run = not any(ivy.glob("jars/*.jar"))
    if first_run:
        log.warning("first run: resolving Delta and Kafka jars from Maven Central into %s", ivy)
    tmp = _PROJECT_ROOT / "build" / "spark-tmp" if (_PROJECT_ROOT / "pyproject.toml").exists() else None
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or os.environ.get("LAKECDC_SPARK_MASTER", "local[2]"))
        .config("spark.jars.ivy", str(ivy))
        .config("spark.jars.excludes", "org.apache.spark:spark-token-provider-kafka-0-10_2.13")
        .config("spark.jars", str(_token_provider_jar(ivy)))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.mapKeyDedupPolicy", "LAST_WIN")
        .config("spark.driver.memory", os.environ.get("LAKECDC_DRIVER_MEMORY", "3g"))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.databricks.delta.autoCompact.enabled", "false")
        .config("spark.sql.adaptive.coalescePartitions.initialPartitionNum", "2")
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + str(tmp or "/tmp"))
    )
    if tmp is not None:
        tmp.mkdir(parents=True, exist_ok=True)
        builder = builder.config("spark.local.dir", str(tmp))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = configure_spark_with_delta_pip(builder, extra_packages=[kafka_package()]).getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("LAKECDC_SPARK_LOG_LEVEL", "WARN"))
    return spark
