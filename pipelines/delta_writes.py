"""Idempotent Delta writes and the quarantine shape, shared by silver, gold and the dq results.

Every write of a stage is stamped with Delta's ``txnAppId``/``txnVersion``: the app id names the
stage's run and the step, the version is the micro-batch id, so a batch retried after a crash is
applied once (:func:`append_idempotent` for appends, :func:`idempotent_dml` for MERGE and DELETE).
:func:`run_id` gives each checkpoint's life its own id, so a replay from a fresh checkpoint is never
mistaken for a retry.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.layout import QUARANTINE_FIELDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import TableRef


def append_idempotent(frame: DataFrame, ref: TableRef, app_id: str | None, version: int | None) -> None:
    """Append; a retry of the same (app_id, version) is skipped by Delta itself. Without a stamp
    (either is ``None``: a write outside a micro-batch) a plain append."""
    writer = frame.write.format("delta").mode("append")
    if app_id is not None and version is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", int(version))
    ref.save(writer.option("mergeSchema", "true"))


@contextmanager
def idempotent_dml(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Delta idempotent DML: a MERGE/DELETE/UPDATE stamped with an (appId, version) already
    committed to the table is skipped. The session confs are unset afterwards."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))
    try:
        yield
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")


def run_id(checkpoint: str) -> str:
    """A stable id for one checkpoint's life: replaying from a fresh checkpoint gets a new id,
    so Delta's idempotency never mistakes a replay for a retry."""
    marker = Path(checkpoint) / "lakecdc_run_id"
    if marker.exists():
        return marker.read_text().strip()
    marker.parent.mkdir(parents=True, exist_ok=True)
    value = uuid.uuid4().hex
    marker.write_text(value)
    return value


def quarantine_frame(df: DataFrame) -> DataFrame:
    """Shape any rows with reason/bronze_position into the quarantine table's columns."""
    from pyspark.sql import functions as F

    return df.select(*[F.col(c) if c in df.columns else F.lit(None).cast(t).alias(c) for c, t in QUARANTINE_FIELDS])
