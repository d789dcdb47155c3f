"""What the Spark driver logs: lakecdc's console shows its own lines and Spark's errors, not Spark's warnings.

* **The level** (:func:`spark_log_level`): ERROR when lakecdc starts the JVM; WARN with ``lakecdc -v``
  (lakecdc's own INFO lines on) and under spark-submit (a job's log, read after the fact);
  ``$LAKECDC_SPARK_LOG_LEVEL`` over both. Delta, Hadoop and Kafka's client log through the same root logger.
* **At launch** (:func:`log4j2_file`): a log4j2 file given to the JVM with ``-Dlog4j2.configurationFile``,
  so what Spark and Hadoop log while starting (NativeCodeLoader, Spark's default-profile notes) follows the
  level too; ``SparkContext.setLogLevel`` alone comes after those lines.
* **Always quiet** (:data:`QUIET_LOGGERS`): loggers whose lines report no problem, at every level.
* **PySpark's query-context loggers** (:func:`query_context_loggers`): made once, before any thread raises.
* **Spark Connect** (:func:`is_connect`): a Connect session (Databricks serverless, Unity Catalog standard
  access mode, ``lakecdc run --remote``) has no driver JVM in this process: the server logs as its operator
  configured it, and the runtime's JVM reaches (``_jvm``, ``_jdf``, ``_jdt``, ``sparkContext``) take their
  Connect path instead.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Loggers whose ERROR or WARN lines report no problem, quiet at every level (``-v`` too).
#: Delta plans a read of a table with deletion vectors with its internal ``__delta_internal_is_row_deleted``
#: filter, which Parquet cannot take, logs "Failed to translate filter" at ERROR, and filters the rows itself
#: (delta-io/delta#2576: pushdown is off with deletion vectors).
#: The scheduler warns once per FAIR pool it creates on first use: gold's pools (pipelines.gold.parallel) are
#: made that way on purpose, with the default weight, so the warning is dropped and its errors kept.
#: Gold releases the checkpoint of each table's MERGE source once its MERGEs end
#: (``pipelines.delta_writes.checkpointed``), and Spark warns at each release that a local checkpoint cannot
#: be recomputed: once per table and batch, about nothing anyone needs to act on.
#: Each stream start warns that ``spark.sql.adaptive.enabled`` "is not supported in streaming" and "will be
#: disabled": true of the streaming plan itself (bronze's scan and append: nothing AQE would change), not of
#: the jobs silver and gold run inside ``foreachBatch``, which keep adaptive execution (measured on Spark
#: 4.1.3: a join inside ``foreachBatch`` plans as ``AdaptiveSparkPlan``). Turned off while a stream starts,
#: it would be off for those jobs too (the stream's session copies the setting when it starts: measured), so
#: the setting stays on and its warning is dropped.
#: Spark warns once per JVM that it cut a plan's text at ``spark.sql.debug.maxToStringFields``: the plan is
#: Delta's own log replay (``StateCache``), described for the SQL listener of each execution; nobody reads it.
QUIET_LOGGERS = {
    "org.apache.spark.sql.delta.DeltaParquetFileFormat": "OFF",
    "org.apache.spark.scheduler.FairSchedulableBuilder": "ERROR",
    "org.apache.spark.rdd.MapPartitionsRDD": "ERROR",
    "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream": "ERROR",
    "org.apache.spark.util.SparkStringUtils": "ERROR",
}


def spark_log_level(submitted: bool = False) -> str:
    """The driver's log4j level: ``$LAKECDC_SPARK_LOG_LEVEL``, else WARN when lakecdc's own INFO lines
    show (``lakecdc -v``) or under spark-submit, else ERROR."""
    chosen = os.environ.get("LAKECDC_SPARK_LOG_LEVEL")
    if chosen:
        return chosen.upper()
    return "WARN" if submitted or logging.getLogger("pipelines").isEnabledFor(logging.INFO) else "ERROR"


def log4j2_properties(level: str) -> str:
    """The driver's log4j2 configuration: Spark's default console layout on stderr, the root logger at
    ``level``, :data:`QUIET_LOGGERS` at theirs. Spark treats a PySpark driver as a shell: unless the
    logger of the class that starts it (``PythonGatewayServer``) has the root's level, Spark prints "Setting
    default log level to WARN" and filters the console at WARN."""
    lines = [
        f"rootLogger.level = {level.lower()}",
        "rootLogger.appenderRef.console.ref = console",
        "appender.console.type = Console",
        "appender.console.name = console",
        "appender.console.target = SYSTEM_ERR",
        "appender.console.layout.type = PatternLayout",
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex",
        "logger.shell.name = org.apache.spark.api.python.PythonGatewayServer",
        f"logger.shell.level = {level.lower()}",
    ]
    for number, (name, quiet) in enumerate(QUIET_LOGGERS.items()):
        lines += [f"logger.quiet{number}.name = {name}", f"logger.quiet{number}.level = {quiet.lower()}"]
    return "\n".join(lines) + "\n"


def log4j2_file(folder: Path, level: str) -> Path:
    """:func:`log4j2_properties` as a file in ``folder``, one per level (concurrent starts write the same
    bytes, each through a temporary file of its own)."""
    path = folder / f"log4j2-{level.lower()}.properties"
    text = log4j2_properties(level)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    return path


def is_connect(obj: object) -> bool:
    """``obj`` (a session, a DataFrame, a DeltaTable) is Spark Connect's: no py4j gateway behind it. Read off
    its class, so the check needs no Connect client installed (its module imports grpc)."""
    return type(obj).__module__.startswith(("pyspark.sql.connect", "delta.connect"))


def quiet_loggers(spark: SparkSession) -> None:
    """Set the levels of :data:`QUIET_LOGGERS` in the driver's JVM (local executors share it): the log4j2
    file sets them at launch; a JVM someone else started (spark-submit) gets them here. Over Spark Connect
    there is no JVM here: the server's operator configures its logs."""
    if is_connect(spark):
        return
    try:
        jvm = spark.sparkContext._jvm
        for name, level in QUIET_LOGGERS.items():
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                name, jvm.org.apache.logging.log4j.Level.getLevel(level)
            )
    except Exception:  # noqa: BLE001 - a runtime with another logging backend keeps its lines
        log.debug("could not quiet %s", ", ".join(QUIET_LOGGERS))


#: The loggers PySpark's exceptions log their query context to (``pyspark.errors.exceptions.base``).
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def query_context_loggers() -> None:
    """Make PySpark's query-context loggers now, in one thread. ``PySparkLogger.getLogger`` swaps the process's
    logger class around ``logging.getLogger``, so two threads raising at once (gold's parallel writes) can
    create the logger as a plain ``logging.Logger``; from then on every exception with a query context fails
    in its own logging, ``Logger._log() got an unexpected keyword argument 'errorClass'`` (seen in CI). Made
    here, the name already holds a ``PySparkLogger`` and no race can replace it."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a PySpark without it has no such logging
        return
    for name in QUERY_CONTEXT_LOGGERS:
        made = logging.Logger.manager.loggerDict.get(name)
        if isinstance(made, logging.Logger) and not isinstance(made, PySparkLogger):  # lost the race already
            del logging.Logger.manager.loggerDict[name]
        PySparkLogger.getLogger(name)
