"""The one place a SparkSession is made, for jobs, the CLI and tests alike.

Where it runs decides what it sets:

* **Spark Connect**: ``get_spark(remote="sc://host:port")`` (``lakecdc run --remote``), or ``$SPARK_REMOTE``
  (Databricks serverless and standard access mode set it): a Connect session. The server brings Delta's jars and
  extension and its own logs; of :data:`_PIPELINE_CONF` only what a session may set is set (:data:`SESSION_CONF`),
  and a setting the server refuses is a warning. The runtime's JVM reaches take their Connect path
  (:func:`pipelines.spark_logs.is_connect`).
* **Databricks**, or any process that already has a session or SparkContext: that session, untouched.
* **Launched by spark-submit** (``spark-submit jobs/run_stage.py``): the master, jars and settings
  spark-submit was given win; only what the pipeline needs and the launch left unset is added. The
  driver must already have Delta's jar (``--packages`` or ``--jars``, see :func:`submit_jars`).
* **A master from outside**: ``get_spark(master=...)`` (``lakecdc run --master URL``), else
  ``$SPARK_MASTER``, else ``spark.master`` in Spark's own ``spark-defaults.conf``. The cached Delta
  and Kafka jars go into ``spark.jars``, so a cluster's executors fetch them from the driver.
* **Nothing given**: the embedded ``local[2]`` session sized for 2 cores (2 shuffle partitions,
  loopback only, no UI).

Settings in ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else the installed Spark's ``conf/``) or
given to spark-submit are never overridden; ``extra_conf`` is applied last.

Delta's and Kafka's jars come from Maven Central: the first start resolves them once, in a child
``spark-submit`` whose chatty Ivy output goes to a log file (one progress line on the console), into
an Ivy cache under the build dir, and records the resolved jar list; later starts put those jars on
the classpath directly and resolve nothing.

What the driver logs (ERROR on a console, WARN with ``lakecdc -v``) is set in :mod:`pipelines.spark_logs`.

Build and cache dirs never depend on where the package is installed (an installed wheel
would write into site-packages): ``$LAKECDC_BUILD_DIR``, else ``./build`` under the current
working directory, with a per-cache env var on top (``$LAKECDC_IVY_DIR``, ...).

Longer than 400 lines because it is the one place a session is made, in each of the five ways above, with the
jar resolution they share.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.spark_logs import log4j2_file, query_context_loggers, quiet_loggers, spark_log_level

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def build_dir() -> Path:
    """Where build inputs, caches and logs go: ``$LAKECDC_BUILD_DIR``, else ``./build`` under the
    current working directory (git-ignored in a source checkout)."""
    return Path(os.environ.get("LAKECDC_BUILD_DIR") or "build").resolve()


def cache_dir(name: str, env_var: str) -> Path:
    """One cache under the build dir: ``$<env_var>``, else ``<build_dir>/<name>``."""
    if os.environ.get(env_var):
        return Path(os.environ[env_var]).resolve()
    return build_dir() / name


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


def delta_package() -> str:
    """Delta's jar for the installed delta-spark and Spark (``delta-spark_4.1_2.13``): the
    coordinate ``delta.configure_spark_with_delta_pip`` would pick."""
    from importlib.metadata import version

    import pyspark

    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{version('delta-spark')}"


def kafka_package() -> str:
    """The Kafka source, at exactly Spark's version."""
    import pyspark

    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__.split('+')[0]}"


#: Left out of resolution: the version the Kafka source asks for is missing (see above).
_EXCLUDED_PACKAGES = ["org.apache.spark:spark-token-provider-kafka-0-10_2.13"]
#: What the resolving ``spark-submit`` runs: it joins the JVM that just resolved the packages
#: and writes the jar list Spark would use (``spark.jars``) to the file named by its argument.
_LIST_JARS_SCRIPT = """\
import json, sys
from pyspark import SparkConf, SparkContext
SparkContext._ensure_initialized()
with open(sys.argv[1], "w") as out:
    json.dump([jar for jar in SparkConf().get("spark.jars", "").split(",") if jar], out)
"""


def _token_provider_jar(ivy: Path) -> Path:
    url = os.environ.get("LAKECDC_KAFKA_TOKEN_PROVIDER_URL", KAFKA_TOKEN_PROVIDER_URL)
    target = ivy / "extra" / url.rsplit("/", 1)[-1]
    if not target.exists():
        import urllib.request

        target.parent.mkdir(parents=True, exist_ok=True)
        log.info("downloading %s", url)
        with urllib.request.urlopen(url, timeout=120) as resp:
            data = resp.read()
        tmp = target.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(target)
    return target


def resolved_jars(ivy: Path) -> list[str]:
    """Local paths of the Delta and Kafka jars with their dependencies.

    The first call resolves them from Maven Central into ``ivy`` and records the list in
    ``ivy/lakecdc-jars.json``; later calls (same packages, jars still there) read the record.
    A lock file keeps concurrent first starts from resolving into one Ivy cache at once."""
    import fcntl

    wanted = {"packages": [delta_package(), kafka_package()], "excludes": _EXCLUDED_PACKAGES}
    record = ivy / "lakecdc-jars.json"
    ivy.mkdir(parents=True, exist_ok=True)
    with open(ivy / ".lakecdc-resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            known = json.loads(record.read_text())
        except (OSError, ValueError):
            known = {}
        if (
            {k: known.get(k) for k in wanted} == wanted
            and known.get("jars")
            and all(Path(jar).is_file() for jar in known["jars"])
        ):
            return known["jars"]
        jars = _resolve(ivy, wanted["packages"], wanted["excludes"])
        partial = record.with_suffix(".part")
        partial.write_text(json.dumps({**wanted, "jars": jars}, indent=1))
        partial.replace(record)
        return jars


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when inside it (``build/ivy``), else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _resolve(ivy: Path, packages: list[str], excludes: list[str]) -> list[str]:
    """Resolve ``packages`` in a child ``spark-submit``: one progress line here, Ivy's output (dozens
    of lines, among them repositories this machine cannot reach) in a log file, shown on failure."""
    from urllib.parse import unquote, urlparse

    from pyspark.find_spark_home import _find_spark_home

    log_file = build_dir() / "logs" / "jar-resolution.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"[lakecdc] resolving Delta and Kafka jars from Maven Central into {_shown(ivy)} (first run only)…",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="lakecdc-resolve-") as tmp:
        script, listing = Path(tmp, "list_jars.py"), Path(tmp, "jars.json")
        script.write_text(_LIST_JARS_SCRIPT)
        command = [
            str(Path(_find_spark_home(), "bin", "spark-submit")),
            "--master",
            "local[1]",
            "--conf",
            f"spark.jars.ivy={ivy}",
            "--conf",
            f"spark.jars.packages={','.join(packages)}",
            "--conf",
            f"spark.jars.excludes={','.join(excludes)}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.driver.bindAddress=127.0.0.1",
            str(script),
            str(listing),
        ]
        with open(log_file, "wb") as out:
            out.write(("$ " + " ".join(command) + "\n").encode())
            out.flush()
            done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        if done.returncode != 0 or not listing.exists():
            sys.stderr.write(log_file.read_text(errors="replace"))
            raise RuntimeError(
                f"could not resolve the Delta and Kafka jars (spark-submit exited with "
                f"{done.returncode}); its output is above and in {log_file}"
            )
        uris = json.loads(listing.read_text())
    return [unquote(urlparse(uri).path) if uri.startswith("file:") else uri for uri in uris]


def cached_jars() -> list[str]:
    """Local paths of Delta's and Kafka's jars with their dependencies (resolved into the Ivy cache on
    first use), the token-provider jar included: what ``spark.jars`` or ``spark-submit --jars`` takes."""
    ivy = ivy_dir()
    return resolved_jars(ivy) + [str(_token_provider_jar(ivy))]


def submit_jars() -> str:
    """The cached jars as ``spark-submit --jars`` takes them (comma-separated);
    ``python -m pipelines.spark jars`` prints it."""
    return ",".join(cached_jars())


#: How many tables' Delta logs the driver keeps open (Delta's own default: 10,000, and an hour).
DELTA_LOG_CACHE_TABLES = 100
#: How many compiled classes Spark keeps (its own default: 100). A gold batch with Delta's queries compiles more
#: than that, so with 100 every batch compiled its code again (4.35 s of a 100,000-change batch's bench case);
#: with this many the stream's second batch finds its code compiled (0.17 s; ``python -m bench.codegen_cases``).
CODEGEN_CACHE_ENTRIES = 2048
#: Delta's classes, which the driver must be able to load.
_DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
#: What the pipeline needs wherever it runs: Delta as the catalog, UTC, last-wins map keys, FAIR pools.
_PIPELINE_CONF = {
    "spark.sql.extensions": _DELTA_EXTENSION,
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    "spark.databricks.delta.autoCompact.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # gold applies the tables of a batch in threads, each in its own pool (pipelines.gold.parallel)
    "spark.scheduler.mode": "FAIR",
    # Delta keeps every table it has opened in the driver, each about 3 to 7 MiB of plans: 200 mirrors
    # and their tombstones filled a 3 GiB heap. Bounded, a table evicted is read again from its log
    # (measured no slower a MERGE here); the tables in use stay, being the most recently used.
    "spark.databricks.delta.delta.log.cacheSize": str(DELTA_LOG_CACHE_TABLES),
    # code compiled once per stream, not once per batch (a static setting: the session's start only)
    "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
}
#: What a running session may set of :data:`_PIPELINE_CONF` (the rest is fixed when the server starts): all a
#: Spark Connect session gets from lakecdc.
SESSION_CONF = (
    "spark.sql.session.timeZone",
    "spark.sql.mapKeyDedupPolicy",
    "spark.databricks.delta.autoCompact.enabled",
)
#: The embedded session only: one machine, 2 cores, loopback, no UI.
_LOCAL_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
}


def get_spark(
    app_name: str = "lakecdc",
    *,
    master: str | None = None,
    extra_conf: dict[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """The session to run on: a Spark Connect one (``remote``, else ``$SPARK_REMOTE``), the existing one
    (Databricks), else one built on the master and settings given from outside (module docstring), else the
    embedded ``local[2]`` one."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote:
        return connect_session(remote, app_name, extra_conf)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if SparkContext._active_spark_context is not None or os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return SparkSession.builder.getOrCreate()  # the runtime's session, as its cluster configured it

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # the JVM started this Python: spark-submit
    outside = _submitted_conf() if submitted else _defaults_file_conf()
    if master is None and not submitted:
        master = (
            os.environ.get("SPARK_MASTER")
            or os.environ.get("LAKECDC_SPARK_MASTER")
            or outside.get("spark.master")
            or "local[2]"
        )
    if master is not None:
        outside.pop("spark.master", None)  # an explicit master wins over the defaults file
    local = (master or outside.get("spark.master", "local")).startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # only loopback, never the LAN
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv's pyarrow

    level = spark_log_level(submitted)
    conf = {**_PIPELINE_CONF, **(_LOCAL_CONF if local else {})}
    if submitted:
        _require_delta_on_driver()
    else:
        conf.update(_launch_conf(local, level), **{"spark.app.name": app_name})
    conf = {key: value for key, value in conf.items() if key not in outside}
    if not submitted:
        jars = _with_cached_jars(outside.get("spark.jars"), outside.get("spark.jars.packages"))
        if jars:
            conf["spark.jars"] = jars
    conf.update(extra_conf or {})
    scratch = {}
    if local and not submitted and "spark.local.dir" not in conf and "spark.local.dir" not in outside:
        # the local JVM's scratch dir, given as Spark's environment variable: as spark.local.dir,
        # SparkConf warns at every start that a cluster manager would override it
        scratch = {"SPARK_LOCAL_DIRS": str(_spark_tmp())}

    builder = SparkSession.builder
    if master is not None:
        builder = builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _launch_environment(scratch):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(level)
    quiet_loggers(spark)
    query_context_loggers()
    return spark


def connect_session(url: str, app_name: str = "lakecdc", extra_conf: dict[str, str] | None = None) -> SparkSession:
    """A Spark Connect session on ``url`` (``sc://host:port``) with :data:`SESSION_CONF` set, and
    ``extra_conf``; a setting the server refuses (serverless allows few) is logged, not raised."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    wanted = {key: _PIPELINE_CONF[key] for key in SESSION_CONF} | dict(extra_conf or {})
    for key, value in wanted.items():
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - the server's policy; the pipeline says what it then lacks
            log.warning("Spark Connect: the server refused %s=%s: %s", key, value, str(exc).splitlines()[0])
    query_context_loggers()
    return spark


def _spark_tmp() -> Path:
    """The driver's scratch dir: Derby, the log4j2 file, a local JVM's shuffle and spill files."""
    tmp = build_dir() / "spark-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def _java_option(name: str, value: Path) -> str:
    """``-Dname=value`` as ``spark.driver.extraJavaOptions`` splits it (double quotes keep a space)."""
    return f'-D{name}="{value}"' if " " in str(value) else f"-D{name}={value}"


def _launch_conf(local: bool, level: str) -> dict[str, str]:
    """Settings that only take effect when this process starts the driver's JVM: Derby's home and the
    log4j2 file in the scratch dir, and the driver's memory."""
    tmp = _spark_tmp()
    options = [
        _java_option("derby.system.home", tmp),
        _java_option("log4j2.configurationFile", log4j2_file(tmp, level)),
    ]
    conf = {"spark.driver.extraJavaOptions": " ".join(options)}
    memory = os.environ.get("LAKECDC_DRIVER_MEMORY") or ("3g" if local else None)
    if memory:
        conf["spark.driver.memory"] = memory
    return conf


@contextmanager
def _launch_environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` in the environment while the JVM is launched (it copies the environment), then
    as they were: the variables are for that JVM, not for this process's other children."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update({name: value for name, value in variables.items() if before[name] is None})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)


def _with_cached_jars(jars: str | None, packages: str | None) -> str | None:
    """``spark.jars`` with the cached Delta and Kafka jars added, unless the settings from outside
    already bring Delta (its jar in ``spark.jars``, or its package in ``spark.jars.packages``)."""
    if "delta" in f"{jars or ''},{packages or ''}".lower():
        return None
    return ",".join([*(jar for jar in (jars or "").split(",") if jar), *cached_jars()])


def _submitted_conf() -> dict[str, str]:
    """What spark-submit gave the JVM that started this Python (command line, spark-defaults.conf)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def _require_delta_on_driver() -> None:
    """Under spark-submit the driver's classpath is fixed before Python runs: without Delta's jar
    the session would start and fail later, on the first table, with a ClassNotFoundException."""
    from pyspark import SparkContext

    if not SparkContext._jvm.org.apache.spark.util.Utils.classIsLoadable(_DELTA_EXTENSION):
        raise RuntimeError(
            "Delta Lake's jar is not on the driver's classpath: run spark-submit with "
            f"--packages {delta_package()},{kafka_package()} (from Maven Central) or with "
            '--jars "$(python -m pipelines.spark jars)" (the jars a local run cached)'
        )


def _defaults_file_conf() -> dict[str, str]:
    """Spark's ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else the installed Spark's ``conf/``):
    ``key value`` lines as java.util.Properties reads them (``=`` or ``:`` also separate; ``#`` and
    ``!`` start comments)."""
    from pyspark.find_spark_home import _find_spark_home

    folder = os.environ.get("SPARK_CONF_DIR") or os.path.join(_find_spark_home(), "conf")
    path = Path(folder, "spark-defaults.conf")
    if not path.is_file():
        return {}
    conf = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            pair = re.match(r"(\S+?)(?:\s*[=:]\s*|\s+)(.*)$", line)
            conf[pair.group(1) if pair else line] = pair.group(2).strip() if pair else ""
    return conf


if __name__ == "__main__":
    if sys.argv[1:] != ["jars"]:
        sys.exit("usage: python -m pipelines.spark jars   (the cached Delta and Kafka jars, for spark-submit --jars)")
    print(submit_jars())
