"""What a stage's ``foreachBatch`` counted, carried back to the client over Spark Connect.

Over Connect, ``foreachBatch`` runs in a Python process beside the server (pyspark's
``foreach_batch_worker``), attached to the client's session: what the function captured is a copy there, so
the counts it adds up (the run summary's, the checks' list of mirrors written) never reach the client. The
worker and the client share the session's configuration, so the worker publishes its running totals there
after each batch (:func:`send`: one call, no Spark job) and the client takes them when the query has stopped
(:func:`receive`). The value is pickled: both ends run this package, and the session is the user's own.
A classic session needs none of this: its ``foreachBatch`` runs in the client's process.
"""

from __future__ import annotations

import base64
import hashlib
import pickle
import zlib
from typing import TYPE_CHECKING, Any

from pipelines.spark_logs import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_PREFIX = "lakecdc.relay."


def relay_key(checkpoint: str) -> str:
    """The session setting that carries the totals of the query checkpointed at ``checkpoint``."""
    return _PREFIX + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]


def open_relay(spark: SparkSession, checkpoint: str) -> str | None:
    """Over Spark Connect, the key the query checkpointed at ``checkpoint`` publishes its totals under, with
    what an earlier query left there cleared; None on a classic session, which needs no relay."""
    if not is_connect(spark):
        return None
    key = relay_key(checkpoint)
    receive(spark, key)
    return key


def send(spark: SparkSession, key: str, totals: Any) -> None:
    """Publish ``totals`` (the worker's running totals, replacing what it published before)."""
    spark.conf.set(key, base64.b64encode(zlib.compress(pickle.dumps(totals))).decode("ascii"))


def receive(spark: SparkSession, key: str) -> Any | None:
    """Take what the worker published last (None if nothing), and clear it so a later run starts empty."""
    value = spark.conf.get(key, None)
    if not value:
        return None
    spark.conf.unset(key)
    return pickle.loads(zlib.decompress(base64.b64decode(value)))  # noqa: S301 - our own worker wrote it
