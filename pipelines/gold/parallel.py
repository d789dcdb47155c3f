"""Apply the tables of a micro-batch concurrently: a bounded pool of threads, one Spark session each.

A batch touching many tables spends most of its time waiting: on the driver (Delta's commit
protocol, log listing, planning) and on small jobs that leave cores idle. Tables are independent
(each writes its own mirror, tombstones, history; shared tables only get blind appends), so
``gold.parallelism`` threads apply them side by side.

* **Own session per thread** (``spark.newSession()``, the runtime settings of the batch's session
  copied): Delta's idempotent DML reads ``spark.databricks.delta.write.txnAppId`` / ``txnVersion``
  from the session's configuration, so two threads' MERGEs never carry each other's stamp.
* **FAIR pools**: each thread's jobs run in the scheduler pool ``lakecdc-gold-<n>``
  (``spark.scheduler.mode=FAIR``, set where the SparkContext is made: :mod:`pipelines.spark`), so a
  large table does not hold back the small ones.
* **Failure stops the batch**: once a table fails, no table that has not started starts; the ones
  running finish their current table; the error of the first failing table (in table order) is
  raised, with a note naming its source table and mirror. Nothing of the batch is committed to the
  stream's checkpoint, so the batch is retried from it, and the idempotent steps
  (:mod:`pipelines.gold.batch`) make the retry apply each table once.
* **Each table's garbage collected** (:func:`release_table`): a JVM object a DataFrame stands for
  lives as long as its py4j proxy, and proxies sit in reference cycles (a proxy caches its methods,
  which point back to it) that only Python's collector frees; Great Expectations' tracebacks add the
  frames of the table's apply. A table's objects live for seconds, long enough to reach the oldest
  generation, which Python collects rarely in a process that holds GE's 250,000 objects; meanwhile
  the driver's heap keeps their plans, Delta snapshots and cached relations: 40 tables over two
  batches left 2.0 GiB of it live, 0.45 GiB after one ``gc.collect()``, and 200 tables in one batch
  filled a 3 GiB driver. A full collection costs about 0.1 s.

The outcome equals the sequential apply: each table's steps run in order in one thread, and the
results are returned in table order.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Session settings a thread never copies: each thread's idempotent DML sets its own.
TXN_CONFS = ("spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion")
#: Local properties a thread takes over from the caller: the stream's job group, so that stopping
#: the query cancels the jobs of every thread.
_INHERITED_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
POOL_PREFIX = "lakecdc-gold-"


def release_table() -> None:
    """Free what a finished table's apply left in Python's reference cycles, and with it the JVM
    objects (plans, snapshots, cached relations) their py4j proxies keep alive."""
    gc.collect()


class _Skipped:
    """A table not started because an earlier one failed."""


def thread_session(spark: SparkSession) -> SparkSession:
    """A new session on the same SparkContext with the runtime settings of ``spark`` (not its txn stamp)."""
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if key not in TXN_CONFS and spark.conf.isModifiable(key):
            session.conf.set(key, value)
    return session


def apply_all(
    spark: SparkSession,
    names: Sequence[str],
    work: Callable[[SparkSession, str], T],
    parallelism: int,
    describe: Callable[[str], str] = str,
) -> list[T]:
    """``work(session, name)`` for every name, ``parallelism`` at a time; the results in ``names``
    order. The first failure (in ``names`` order) is raised with a note ``describe(name)``."""
    if parallelism <= 1 or len(names) <= 1:
        out = []
        for name in names:
            try:
                out.append(work(spark, name))
            except BaseException as exc:
                _note(exc, describe(name), [])
                raise
            finally:
                release_table()
        return out
    sc = spark.sparkContext
    inherited = {k: sc.getLocalProperty(k) for k in _INHERITED_PROPERTIES}
    stop = threading.Event()
    local = threading.local()
    slots = iter(range(parallelism))
    slot_lock = threading.Lock()

    def session() -> SparkSession:
        if getattr(local, "session", None) is None:
            with slot_lock:
                slot = next(slots)
            for key, value in inherited.items():
                sc.setLocalProperty(key, value)
            sc.setLocalProperty("spark.scheduler.pool", f"{POOL_PREFIX}{slot}")
            local.session = thread_session(spark)
            sc._jvm.org.apache.spark.sql.SparkSession.setActiveSession(local.session._jsparkSession)
        return local.session

    def run(name: str) -> T | _Skipped:
        if stop.is_set():
            return _Skipped()
        try:
            return work(session(), name)
        except BaseException:
            stop.set()
            raise
        finally:
            release_table()

    with ThreadPoolExecutor(max_workers=min(parallelism, len(names)), thread_name_prefix=POOL_PREFIX) as pool:
        futures = [pool.submit(run, name) for name in names]
    failed = [(name, f.exception()) for name, f in zip(names, futures) if f.exception() is not None]
    if failed:
        for name, exc in failed:
            log.error("gold: %s failed: %s", describe(name), str(exc).splitlines()[0] if str(exc) else exc)
        name, exc = failed[0]
        skipped = sum(1 for f in futures if f.exception() is None and isinstance(f.result(), _Skipped))
        _note(exc, describe(name), [describe(n) for n, _ in failed[1:]], skipped)
        raise exc
    return [f.result() for f in futures]


def _note(exc: BaseException, table: str, others: list[str], skipped: int = 0) -> None:
    """Name the failing table on the error (a note: the error keeps its type and message)."""
    text = f"gold: applying {table} failed; the micro-batch was not committed and is retried from the checkpoint"
    if others:
        text += f"; also failed: {'; '.join(others)}"
    if skipped:
        text += f"; {skipped} later tables were not started"
    exc.add_note(text)
