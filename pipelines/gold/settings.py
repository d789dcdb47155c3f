"""The session settings gold runs a batch with: the ones every batch needs, and a small batch's own.

A small batch's work is mostly Spark's fixed costs, so it runs without them where it can
(:func:`small_batch_conf`); a large one keeps the session's own settings. The settings last for the batch:
:func:`batch_settings` gives each session back as it found it.
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
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }


@contextmanager
def batch_settings(sessions: Iterable[SparkSession], settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` on each of ``sessions`` for the block; each one's earlier values are restored after it."""
    with ExitStack() as stack:
        for session in sessions:
            stack.enter_context(session_conf(session, settings))
        yield
