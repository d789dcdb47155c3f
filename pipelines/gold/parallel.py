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
* **Garbage collected every few tables** (:func:`release_tables`): a JVM object a DataFrame stands for
  lives as long as its py4j proxy, and proxies sit in reference cycles (a proxy caches its methods,
  which point back to it) that only Python's collector frees; Great Expectations' tracebacks add the
  frames of the table's apply. Left to Python's oldest generation, 40 tables over two batches left 2.0
  GiB of the driver's heap live (0.45 GiB after one ``gc.collect()``), and 200 tables in one batch filled
  a 3 GiB driver. A full collection costs about 0.1 s, so it runs every :data:`GC_EVERY` tables and once
  at the end of the batch, not after each table.
* **Threads and sessions kept** (:class:`Workers`): a stream keeps its pool and each thread's session from
  batch to batch (a new session copies every setting, per thread and batch); each task sets the batch's
  own settings (``settings``) on its thread's session.

The outcome equals the sequential apply: each table's steps run in order in one thread, and the
results are returned in table order.
"""

from __future__ import annotations

import gc
import itertools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from pipelines.spark_logs import is_connect

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


#: Collect Python's garbage (and with it the JVM objects of finished tables) every this many tables.
GC_EVERY = 16


def release_tables() -> None:
    """Free what finished tables' applies left in Python's reference cycles, and with it the JVM
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


class Workers:
    """A stream's gold threads, kept from batch to batch: a pool of ``parallelism`` threads and one session
    per thread (:func:`thread_session`), each thread's jobs in its own FAIR pool."""

    def __init__(self, parallelism: int) -> None:
        self.parallelism = parallelism
        self.pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix=POOL_PREFIX)
        self._local = threading.local()
        self._slots = itertools.count()
        self._slot_lock = threading.Lock()

    def session(
        self, spark: SparkSession, inherited: Mapping[str, str | None], settings: Mapping[str, str]
    ) -> SparkSession:
        """This thread's session (made on its first task), with the caller's job group and ``settings``."""
        sc = spark.sparkContext
        for key, value in inherited.items():
            sc.setLocalProperty(key, value)
        if getattr(self._local, "session", None) is None:
            with self._slot_lock:
                slot = next(self._slots)
            sc.setLocalProperty("spark.scheduler.pool", f"{POOL_PREFIX}{slot % self.parallelism}")
            self._local.session = thread_session(spark)
            sc._jvm.org.apache.spark.sql.SparkSession.setActiveSession(self._local.session._jsparkSession)
        for key, value in settings.items():
            self._local.session.conf.set(key, value)
        return self._local.session

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def apply_all(
    spark: SparkSession,
    names: Sequence[str],
    work: Callable[[SparkSession, str], T],
    parallelism: int,
    describe: Callable[[str], str] = str,
    workers: Workers | None = None,
    settings: Mapping[str, str] | None = None,
) -> list[T]:
    """``work(session, name)`` for every name, ``parallelism`` at a time (on ``workers``, a stream's kept
    threads, else threads of this call); the results in ``names`` order. ``settings``: session settings of
    this call, set on each thread's session. The first failure (in ``names`` order) is raised with a note
    ``describe(name)``."""
    settings = dict(settings or {})
    if parallelism <= 1 or len(names) <= 1 or is_connect(spark):  # Connect: no thread sessions
        out = []
        try:
            for done, name in enumerate(names, 1):
                try:
                    out.append(work(spark, name))
                except BaseException as exc:
                    _note(exc, describe(name), [])
                    raise
                if done % GC_EVERY == 0:
                    release_tables()
        finally:
            release_tables()
        return out
    sc = spark.sparkContext
    inherited = {k: sc.getLocalProperty(k) for k in _INHERITED_PROPERTIES}
    stop = threading.Event()
    done = itertools.count(1)
    own = workers is None
    pool = Workers(min(parallelism, len(names))) if own else workers

    def run(name: str) -> T | _Skipped:
        if stop.is_set():
            return _Skipped()
        try:
            return work(pool.session(spark, inherited, settings), name)
        except BaseException:
            stop.set()
            raise
        finally:
            if next(done) % GC_EVERY == 0:
                release_tables()

    try:
        futures = [pool.pool.submit(run, name) for name in names]
        for f in futures:
            f.exception()  # wait for every table
    finally:
        if own:
            pool.close()
        release_tables()
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
