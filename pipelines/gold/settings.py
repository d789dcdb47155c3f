"""The session settings gold runs a batch with: the ones every batch needs, and a small batch's own.

A small batch's work is mostly Spark's fixed costs, so it runs without them where it can
(:func:`small_batch_conf`); a large one keeps the session's own settings. A small batch's large writes generate
code again (:func:`write_conf`). The settings last for the batch: :func:`batch_settings` gives each session back as it
found it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from pipelines.delta_writes import session_conf
from pipelines.spark_logs import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Settings of the sessions gold applies a batch with.
GOLD_SESSION_CONF = {
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",  # map_concat: later image wins
}
#: A batch of at most this many changes is planned and run as a small one (:func:`small_batch_conf`).
SMALL_BATCH = 100_000
#: The settings :func:`small_batch_conf` switches generated code off with.
CODEGEN_SWITCHES = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")
#: Whether a small batch's large writes run with generated code (:func:`write_conf`); False only to measure them
#: without.
WRITES_GENERATE_CODE = True
#: A write of at least this many keys runs with generated code (:func:`compiled_write`).
COMPILED_WRITE_KEYS = 25_000


def small_batch_conf(spark: SparkSession) -> dict[str, str]:
    """Settings of a small batch, where Spark's fixed costs are most of the work:

    * no generated code: gold's expressions (every table's types as lookups, the checks, the fold) are large,
      and compiling them cost most of a small batch (the counts query of 400 changes: 19.6 s on first run,
      4.0 s run again with its code cached; interpreted, 3.8 s and 1.0 s; docs/benchmark.md). A literal that
      changes from batch to batch (the batch id) defeats the cache, so each batch would compile again;
    * no adaptive query execution: it runs each shuffle stage as a job of its own and plans the rest again
      after it, which doubles a small batch's jobs (a MERGE: 11 jobs with it, 5 without); gold marks its small
      joins for broadcast itself;
    * at most as many shuffle partitions as the cluster has cores.

    Empty over Spark Connect (its server's settings stand)."""
    if is_connect(spark):
        return {}
    cores = max(1, spark.sparkContext.defaultParallelism)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions", "200"))
    return {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": str(min(partitions, cores)),
        CODEGEN_SWITCHES[0]: "false",
        CODEGEN_SWITCHES[1]: "NO_CODEGEN",
    }


def write_conf(batch_conf: Mapping[str, str], session_conf: Mapping[str, str | None]) -> dict[str, str]:
    """The settings a large write runs with over the batch's (:func:`compiled_write`): the session's own
    generated code where the batch switched it off; empty where the batch generates code already (a large batch,
    Spark Connect). What a write evaluates is its mirror's shape (the MERGE's clauses over the typed columns, the
    key state's rows, Delta's statistics of every file it writes), the same text batch after batch, so Spark
    compiles it on the stream's first batch and finds it in its code cache after that; interpreted, Delta's
    statistics alone were 13 % of a 100,000-change batch's CPU (``python -m bench.gold_profile --functions``).
    The fold before the writes stays interpreted: it is made of higher-order functions, never compiled."""
    if not WRITES_GENERATE_CODE:
        return {}
    own = {key: session_conf.get(key) for key in CODEGEN_SWITCHES if key in batch_conf}
    return {key: value for key, value in own.items() if value is not None and value != batch_conf[key]}


def compiled_write(keys: int) -> bool:
    """Whether a write of ``keys`` keys runs with generated code (:func:`write_conf`): compiling a mirror's write
    costs about a second on the first batch of its shape a JVM sees (a scheduled ``run --once`` starts a new
    one every time), which a write of :data:`COMPILED_WRITE_KEYS` keys earns back (about 40 us a change saved,
    ``python -m bench.codegen_cases --writes on,off``); a smaller write stays interpreted."""
    return keys >= COMPILED_WRITE_KEYS


@contextmanager
def batch_settings(sessions: Iterable[SparkSession], settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` on each of ``sessions`` for the block; each one's earlier values are restored after it."""
    with ExitStack() as stack:
        for session in sessions:
            stack.enter_context(session_conf(session, settings))
        yield
