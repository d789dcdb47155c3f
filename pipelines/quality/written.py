"""The built-in checks of what gold wrote, scaled to it, not to how many mirrors exist.

* The change checks (``cdc_seq_not_backwards``, ``cdc_source_drift``): gold counts them for every table of a
  batch in its one pass (:func:`pipelines.gold.decide.probe_columns`, against key state), and
  :func:`change_check_rows` turns the counts into results; Great Expectations runs only for a table where
  one finds a row (its report carries the examples).
* The key checks (``cdc_key_not_null``, ``cdc_key_unique``) come from each write's own bookkeeping
  (:func:`key_check_rows`): the rows Delta reports inserted, updated and deleted against what key state
  expected, and the NULL key parts written.
* After a run, ``cdc_freshness`` of each mirror the run wrote, from one read of silver's changes and
  heartbeats for all sources (:func:`freshness_rows`); reconciliation runs only where the run gave a mirror
  nothing but full-load rows (:mod:`pipelines.runner`).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pipelines.quality.batch import run_checks
from pipelines.quality.checks import CHANGE_COUNTS, freshness, seq_not_backwards, source_drift, threshold_seconds
from pipelines.quality.gx_session import utc_now
from pipelines.quality.storage import result_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

#: The expectation types of the change checks, as their dq_results rows name them (GE's own names, so a
#: batch that passes records them without importing Great Expectations).
CHANGE_CHECK_TYPES = {
    "cdc_seq_not_backwards": "expect_column_pair_values_a_to_be_greater_than_b",
    "cdc_source_drift": "expect_column_values_to_be_in_set",
}
#: The probe's columns the change checks' Great Expectations suite reads.
PROBE_COLUMNS = ("bronze_position", "change_index", "op", "seq", "prev_seq", "row_matches", "drift", "check_drift")


def change_check_rows(
    table: str, counts: Mapping[str, Any], probe: DataFrame, *, run_id: str, batch_id: int
) -> list[dict]:
    """The change checks' dq_results rows of one table and batch from gold's counts (``seq_n``/``seq_u``,
    ``drift_n``/``drift_u``): a check that finds nothing is recorded from its counts; where one finds a
    row, Great Expectations validates the table's ``probe`` (rows of :func:`pipelines.gold.decide.probe_columns`)
    and its report carries the examples."""
    names = {"cdc_seq_not_backwards": ("seq_n", "seq_u"), "cdc_source_drift": ("drift_n", "drift_u")}
    if not any(counts[unexpected] for _n, unexpected in names.values()):
        at = utc_now()
        return [
            result_row(run_id, batch_id, table, name, CHANGE_CHECK_TYPES[name], "warn", True, counts[n], 0, None, at)
            for name, (n, _u) in names.items()
        ]
    frame = probe.select(*PROBE_COLUMNS)
    index = ["bronze_position", "change_index", "op", "drift"]
    return run_checks(
        table, "cdc_changes", frame, seq_not_backwards() + source_drift(), run_id=run_id, batch_id=batch_id,
        index_columns=index, counted=CHANGE_COUNTS,
    )  # fmt: skip


def key_check_rows(table: str, key: Sequence[str], writes: Any, run_id: str, batch_id: int) -> list[dict]:
    """The key checks of one mirror's write, from its bookkeeping (``writes``: a
    :class:`pipelines.gold.keyed.KeyWrites`): ``cdc_key_not_null`` (key parts written NULL) and
    ``cdc_key_unique`` (the rows Delta reports inserted, updated and deleted against what key state
    expected: a key the mirror holds twice, or a row written behind gold's back, makes them differ). A
    write Delta skipped as an earlier attempt's has no counts, and no unique result."""
    at, keys = utc_now(), writes.keys
    rows = [
        result_row(
            run_id,
            batch_id,
            table,
            "cdc_key_not_null" if len(key) == 1 else f"cdc_key_not_null.{k}",
            "expect_column_values_to_not_be_null",
            "warn",
            writes.null_keys == 0,
            keys,
            writes.null_keys,
            None,
            at,
        )  # fmt: skip
        for k in key
    ]
    differences = writes.differences
    if differences is not None:
        details = {
            "write": "append" if writes.appended else "merge",
            "expected": {"inserted": writes.expected_inserted, "updated": writes.expected_updated,
                         "deleted": writes.expected_deleted},
            "delta": {"inserted": writes.inserted, "updated": writes.updated, "deleted": writes.deleted},
        }  # fmt: skip
        etype = "expect_column_values_to_be_unique" if len(key) == 1 else "expect_compound_columns_to_be_unique"
        rows.append(
            result_row(
                run_id,
                batch_id,
                table,
                "cdc_key_unique",
                etype,
                "warn",
                differences == 0,
                keys,
                differences,
                json.dumps(details),
                at,
            )  # fmt: skip
        )
        if differences:
            log.warning("quality: %s: the write's key counts differ from key state's: %s", table, details)
    return rows


def freshness_rows(
    table: str,
    sources: Iterable[str],
    seen: Mapping[str, tuple[float | None, float | None, float | None]],
    threshold: Any,
    *,
    run_id: str,
    now: _dt.datetime | None = None,
) -> list[dict]:
    """``cdc_freshness`` of one mirror after a run: each of its ``sources`` was last seen (newest change or
    heartbeat, source commit time: ``seen``, :func:`pipelines.silver.last_seen`) within its threshold. Counted
    from the figures one read gave for all sources; Great Expectations validates where a source is stale."""
    now = now or utc_now()
    data = []
    for source in sorted(sources):
        change, heartbeat, _ingest = seen.get(source, (None, None, None))
        newest = max((t for t in (change, heartbeat) if t is not None), default=None)
        if newest is not None:
            last = _dt.datetime.fromtimestamp(newest, _dt.timezone.utc)
            data.append((source, last.isoformat(), (now - last).total_seconds(), threshold_seconds(threshold, source)))
    if not data:
        return []
    stale = [d for d in data if not d[3] >= d[2]]
    if not stale:
        etype = "expect_column_pair_values_a_to_be_greater_than_b"
        return [result_row(run_id, 0, table, "cdc_freshness", etype, "warn", True, len(data), 0, None, now)]
    from pyspark.sql import SparkSession

    frame = SparkSession.getActiveSession().createDataFrame(
        data, "source STRING, last_seen STRING, lag_seconds DOUBLE, threshold_seconds DOUBLE"
    )
    return run_checks(table, "cdc_freshness", frame, freshness(), run_id=run_id, batch_id=0,
                      index_columns=["source", "last_seen"])  # fmt: skip
