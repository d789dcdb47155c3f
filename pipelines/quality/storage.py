"""The ``dq_results`` table: one row per check per micro-batch, appended to Delta.

Lives at ``<warehouse>/dq/dq_results`` (or ``<catalog>.<silver schema>.dq_results``); ``lakecdc dq report``,
the chart and the data-quality notebook read it.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.delta_writes import append_idempotent
from pipelines.quality.gx_session import GXSession
from pipelines.warehouse import TableRef, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DQ_RESULTS_DDL = (
    "run_id STRING, batch_id BIGINT, `table` STRING, expectation STRING, expectation_type STRING, "
    "action STRING, success BOOLEAN, element_count BIGINT, unexpected_count BIGINT, details STRING, "
    "checked_at TIMESTAMP"
)
DQ_RESULT_COLUMNS = (
    "run_id",
    "batch_id",
    "table",
    "expectation",
    "expectation_type",
    "action",
    "success",
    "element_count",
    "unexpected_count",
    "details",
    "checked_at",
)


def result_row(
    run_id: str,
    batch_id: int,
    table: str,
    name: str,
    etype: str,
    action: str,
    success: bool | None,
    element_count: int | None,
    unexpected_count: int | None,
    details: str | None,
    checked_at: _dt.datetime,
) -> dict:
    """One dq_results row (a dict keyed by :data:`DQ_RESULT_COLUMNS`)."""
    return {
        "run_id": run_id,
        "batch_id": int(batch_id),
        "table": table,
        "expectation": name,
        "expectation_type": etype,
        "action": action,
        "success": success,
        "element_count": None if element_count is None else int(element_count),
        "unexpected_count": None if unexpected_count is None else int(unexpected_count),
        "details": details,
        "checked_at": checked_at,
    }


def _warehouse(warehouse: Warehouse | str) -> Warehouse:
    return warehouse if isinstance(warehouse, Warehouse) else Warehouse(str(warehouse))


def dq_results_ref(warehouse: Warehouse | str) -> TableRef:
    """``<warehouse>/dq/dq_results`` (or ``<catalog>.<silver schema>.dq_results``)."""
    wh = _warehouse(warehouse)
    if wh.catalog:
        return TableRef(name=f"{wh.catalog}.{wh.schemas['silver']}.dq_results")
    return TableRef(path=f"{wh.root}/dq/dq_results")


def dq_certified_ref(warehouse: Warehouse | str) -> TableRef:
    """``<warehouse>/dq/dq_certified`` (or ``<catalog>.<silver schema>.dq_certified``): one row per
    certification, a mirror's version whose checks passed (:mod:`pipelines.quality.certify`)."""
    wh = _warehouse(warehouse)
    if wh.catalog:
        return TableRef(name=f"{wh.catalog}.{wh.schemas['silver']}.dq_certified")
    return TableRef(path=f"{wh.root}/dq/dq_certified")


def dq_dir(warehouse: Warehouse | str) -> Path:
    """``<warehouse>/dq``: Data Docs, the GE project that keeps their history, the chart. With a catalog,
    ``<checkpoints>/dq``: inside the checkpoints' volume, durable where a driver's local disk is not."""
    wh = _warehouse(warehouse)
    return Path(wh.checkpoint_root) / "dq" if wh.catalog else Path(wh.root) / "dq"


def results_frame(spark: SparkSession, rows: Sequence[dict]) -> DataFrame:
    return spark.createDataFrame([tuple(r.get(c) for c in DQ_RESULT_COLUMNS) for r in rows], DQ_RESULTS_DDL)


def write_results(
    spark: SparkSession,
    warehouse: Warehouse | str,
    rows: Sequence[dict],
    app_id: str | None = None,
    version: int | None = None,
) -> int:
    """Append dq_results rows (Delta). With ``app_id``/``version`` a retried batch is written once."""
    rows = list(rows)
    if not rows:
        return 0
    append_idempotent(results_frame(spark, rows), dq_results_ref(warehouse), app_id, version)
    return len(rows)


def recent_validations() -> list[Any]:
    """This process's Great Expectations validation results (newest last)."""
    return [result for _table, _run, result in GXSession.recent_results()]
