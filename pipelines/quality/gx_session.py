"""The Great Expectations session of this process, and the helpers that speak GE.

One **ephemeral** context per process (no files touched in the hot path, the same on Databricks and
locally): a Spark data source with one dataframe asset per table. This module builds GE expectations
from configured rules and reads GE results back into counts, details and failure messages; what to do
with a failure (record, quarantine, raise) is decided by :mod:`pipelines.quality.batch`.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pipelines.quality.rules import Rule
from pipelines.warehouse import safe_name

if TYPE_CHECKING:
    from types import ModuleType

    from pyspark.sql import DataFrame

#: Failing rows named in a failure message or a dq_results row's details.
MAX_EXAMPLES = 5


#: A GE logger that GE itself sets to INFO when imported, to announce the temporary directory of an
#: ephemeral context's docs site; reset, it follows the level of ``great_expectations`` (see ``pipelines.cli``).
_GE_INFO_LOGGER = "great_expectations.data_context.types.base"


def great_expectations() -> ModuleType:
    """The ``great_expectations`` module, imported on first use (it is slow) with analytics off."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx

    logging.getLogger(_GE_INFO_LOGGER).setLevel(logging.NOTSET)
    return gx


class GXSession:
    """One ephemeral GE context per process: a Spark data source, one dataframe asset per table."""

    _instance: GXSession | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        gx = great_expectations()
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.ctx = gx.get_context(mode="ephemeral")
        self.ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        # persist=False: GE would persist each frame it validates, which :func:`cached` already did
        # (Spark warns "Asked to cache already cached data" at each second persist)
        self.source = self.ctx.data_sources.add_spark(name="lakecdc", persist=False)
        self._engine_lock = threading.Lock()  # one query-metric validation at a time (_queries_in)
        self.batch_definitions: dict[str, Any] = {}
        #: (table, run name, validation result) of this process, newest last, for Data Docs.
        self.recent: deque = deque(maxlen=500)

    @classmethod
    def get(cls) -> GXSession:
        """The session, created on first use."""
        with cls._lock:
            if cls._instance is None:
                cls._instance = GXSession()
            return cls._instance

    @classmethod
    def recent_results(cls) -> list[tuple[str, str, Any]]:
        """(table, run name, validation result) this process ran, newest last; none before the first."""
        return list(cls._instance.recent) if cls._instance is not None else []

    def validate(
        self,
        asset: str,
        suite_name: str,
        expectations: list,
        df: DataFrame,
        *,
        result_format: str,
        index_columns: Sequence[str] = (),
        run_name: str = "",
        table: str = "",
    ) -> Any:
        """Validate ``df`` against a suite built from ``expectations``; returns the suite result."""
        gx = self.gx
        with self._lock:
            bd = self.batch_definitions.get(asset)
            if bd is None:
                bd = self.source.add_dataframe_asset(name=asset).add_batch_definition_whole_dataframe("whole")
                self.batch_definitions[asset] = bd
        suite = gx.ExpectationSuite(name=suite_name, expectations=expectations)
        fmt: dict[str, Any] = {"result_format": result_format}
        if index_columns:
            fmt["unexpected_index_column_names"] = list(index_columns)
        batch = bd.get_batch(batch_parameters={"dataframe": df})
        try:
            if any(isinstance(e, gx.expectations.UnexpectedRowsExpectation) for e in expectations):
                with self._queries_in(batch, df):
                    result = batch.validate(suite, result_format=fmt)
            else:
                result = batch.validate(suite, result_format=fmt)
        finally:
            forget_batch(batch)
        from great_expectations.core.run_identifier import RunIdentifier

        result.meta["lakecdc_run"] = run_name
        result.meta["lakecdc_table"] = table
        result.meta["run_id"] = RunIdentifier(run_name=run_name or "lakecdc", run_time=utc_now())
        result.meta["batch_spec"] = {**(result.meta.get("batch_spec") or {}), "data_asset_name": table}
        self.recent.append((table, run_name, result))
        return result

    @contextmanager
    def _queries_in(self, batch: Any, df: DataFrame) -> Iterator[None]:
        """Run GE's query metrics in ``df``'s own Spark session. GE registers the batch as the temporary
        view ``tmp_view`` in the frame's session, then runs the query in its engine's session (the
        process's first): another session where gold applies a table in a thread of its own
        (:mod:`pipelines.gold.parallel`) and where a stream's micro-batch runs, which would not see the
        view (or would see another batch's). The view is dropped after."""
        engine = batch.data.execution_engine
        with self._engine_lock:
            previous = engine.spark
            engine.spark = df.sparkSession
            try:
                yield
            finally:
                engine.spark = previous
                df.sparkSession.catalog.dropTempView(GX_QUERY_VIEW)


#: The temporary view GE's query metrics register a batch as (SparkDF engine).
GX_QUERY_VIEW = "tmp_view"


def forget_batch(batch: Any) -> None:
    """Drop a validated batch from GE's execution engine. GE keeps the last batch of every asset (its
    Batch and its DataFrame) in the engine's batch manager for as long as the context lives; one asset
    per table, so the driver kept a checked DataFrame per table, and with it the plan and the Delta
    snapshots it read, beyond the Delta log cache's bound (``spark.databricks.delta.delta.log.cacheSize``)."""
    manager = batch.data.execution_engine.batch_manager
    manager.batch_cache.pop(batch.id, None)
    manager.batch_data_cache.pop(batch.id, None)


@contextmanager
def cached(df: DataFrame) -> Iterator[DataFrame]:
    """Persist ``df`` for a validation (GE computes several metrics over the same frame) unless the
    caller already did (then leave it cached). Every frame lakecdc validates is cached here, so GE's own
    persist is off (:class:`GXSession`)."""
    if df.is_cached:
        yield df
        return
    df = df.persist()
    try:
        yield df
    finally:
        df.unpersist()


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def asset_name(table: str) -> str:
    """The GE asset (and suite prefix) of a table: ``shop.orders`` → ``shop__orders``."""
    return safe_name(table)


#: What each action does, as Data Docs show it beside the rule's name.
ACTION_TEXT = {
    "warn": "warn: recorded, every change applied",
    "drop": "drop: the offending changes go to quarantine",
    "fail": "fail: the stream stops",
}


def rule_text(rule: Rule) -> str:
    """What a rule expects, in words: ``amount between 0 and 1000000``."""
    a, col = rule.args, ", ".join(rule.columns)
    if rule.is_sql:
        return rule.sql or ""
    if rule.expectation == "not_null":
        return f"{col} is not NULL"
    if rule.expectation == "in_set":
        return f"{col} in {', '.join(map(str, a['values']))}"
    if rule.expectation == "between":
        lo, hi = a.get("min"), a.get("max")
        if lo is not None and hi is not None:
            return f"{col} between {lo} and {hi}"
        return f"{col} {'>' if a.get('strict_min') else '>='} {lo}" if lo is not None else f"{col} <= {hi}"
    if rule.expectation == "regex":
        return f"{col} matches {a['pattern']}"
    if rule.expectation == "unique":
        return f"{col} unique in the mirror"
    if rule.expectation == "row_count_between":
        return f"the mirror holds between {a.get('min', 0) or 0} and {a.get('max') or 'any number of'} rows"
    return rule.expectation


def describe(name: str, action: str, text: str, on: str | None = None) -> str:
    """A check's line in Data Docs: its configured name, what it expects, on what, and its action
    (a GE description is a template: ``$`` is doubled)."""
    line = f"{name}: {text}" + (f", on {on}" if on else "") + f" · {ACTION_TEXT.get(action, action)}"
    return line.replace("$", "$$")


#: The built-in checks in words (:mod:`pipelines.quality.checks`), as Data Docs show them.
CHECK_TEXT = {
    "cdc_key_not_null": "every key column of the mirror is set",
    "cdc_key_unique": "no two rows of the mirror share a key",
    "cdc_seq_not_backwards": "no change older than the mirror's row for its key, on each change",
    "cdc_source_drift": "each UPDATE/DELETE finds the row its before-image describes, on each change",
    "cdc_freshness": "each source heard from (a change or a heartbeat) within its threshold",
    "cdc_reconcile_count": "the mirror holds as many rows as the full load delivered",
    "cdc_reconcile_checksum": "the mirror's rows sum to the full load's checksum",
    "cdc_invalid_value": "values the source holds as invalid, applied as NULL (invalid_values: null)",
}


def check_text(name: str, etype: str | None = None) -> str:
    """A built-in check's line (``cdc_key_not_null.k`` is the key column ``k``); else its GE type."""
    base, _, part = name.partition(".")
    base = base.split(":", 1)[0]
    text = CHECK_TEXT.get(base) or CHECK_TEXT.get(etype or "") or (etype or name)
    return f"{text} ({part})" if part else text


def expectation_for(rule: Rule, row_condition: str | None, on: str | None = None) -> Any:
    """The GE 1.x Expectation object for one configured rule, described by its name and action."""
    E = great_expectations().expectations
    meta = {"rule": rule.name, "action": rule.action}
    if on is None:
        on = "each change" if rule.scope == "batch" else "the mirror after the merge"
    meta_desc = {"description": describe(rule.name, rule.action, rule_text(rule), on)}
    cond = {"row_condition": row_condition, "condition_parser": "spark"} if row_condition else {}
    a = rule.args
    if rule.expectation == "not_null":
        return E.ExpectColumnValuesToNotBeNull(column=rule.column, meta=meta, **meta_desc, **cond)
    if rule.expectation == "in_set":
        return E.ExpectColumnValuesToBeInSet(
            column=rule.column, value_set=list(a["values"]), meta=meta, **meta_desc, **cond
        )
    if rule.expectation == "between":
        return E.ExpectColumnValuesToBeBetween(
            column=rule.column,
            min_value=a.get("min"),
            max_value=a.get("max"),
            strict_min=a.get("strict_min", False),
            strict_max=a.get("strict_max", False),
            meta=meta,
            **meta_desc,
            **cond,
        )
    if rule.expectation == "regex":
        return E.ExpectColumnValuesToMatchRegex(column=rule.column, regex=a["pattern"], meta=meta, **meta_desc, **cond)
    if rule.expectation == "unique":
        if len(rule.columns) == 1:
            return E.ExpectColumnValuesToBeUnique(column=rule.column, meta=meta, **meta_desc)
        return E.ExpectCompoundColumnsToBeUnique(column_list=list(rule.columns), meta=meta, **meta_desc)
    if rule.expectation == "row_count_between":
        return E.ExpectTableRowCountToBeBetween(min_value=a.get("min"), max_value=a.get("max"), meta=meta, **meta_desc)
    raise ValueError(rule.expectation)


def sql_expectation(rule: Rule, query: str, on: str = "each change") -> Any:
    """The GE expectation of a SQL rule: ``UnexpectedRowsExpectation`` with the rule's query
    (:attr:`pipelines.quality.sql_rules.SqlCheck.query`), described by the rule's own expression."""
    E = great_expectations().expectations
    return E.UnexpectedRowsExpectation(
        unexpected_rows_query=query,
        description=describe(rule.name, rule.action, rule.sql or "", on),
        meta={"rule": rule.name, "action": rule.action, "sql": rule.sql},
    )


def expectation_type(rule: Rule) -> str:
    """The GE expectation type a rule becomes (recorded when the rule cannot even run)."""
    return {
        "not_null": "expect_column_values_to_not_be_null",
        "in_set": "expect_column_values_to_be_in_set",
        "between": "expect_column_values_to_be_between",
        "regex": "expect_column_values_to_match_regex",
        "unique": (
            "expect_column_values_to_be_unique" if len(rule.columns) == 1 else "expect_compound_columns_to_be_unique"
        ),
        "row_count_between": "expect_table_row_count_to_be_between",
        "sql": "unexpected_rows_expectation",
    }[rule.expectation]


def counts(res: Any) -> tuple[int | None, int | None]:
    """(element count, unexpected count) of one expectation result; a row count has no unexpected."""
    r = res.result or {}
    if "observed_value" in r and "element_count" not in r:  # table-level (row count)
        return (int(r["observed_value"]) if r["observed_value"] is not None else None), None
    return r.get("element_count"), r.get("unexpected_count")


def details(res: Any) -> str | None:
    """JSON for dq_results.details: the error, the observed value and up to 5 failing rows."""
    r = res.result or {}
    parts = {}
    if res.exception_info and res.exception_info.get("raised_exception"):
        parts["error"] = str(res.exception_info.get("exception_message"))[:500]
    if "observed_value" in r:
        parts["observed_value"] = r["observed_value"]
    examples = r.get("partial_unexpected_index_list") or r.get("partial_unexpected_list")
    if examples:
        parts["examples"] = examples[:MAX_EXAMPLES]
    return json.dumps(parts, default=str, ensure_ascii=False) if parts else None


def examples(res: Any) -> list:
    """Up to 5 failing rows (their index columns when GE has them, else the values)."""
    r = res.result or {}
    ex = r.get("partial_unexpected_index_list") or r.get("unexpected_index_list") or r.get("partial_unexpected_list")
    return list(ex or [])[:MAX_EXAMPLES]


def failure_message(table: str, name: str, etype: str, res: Any) -> str:
    """What a user reads when a check fails: table, check, how many rows, and examples."""
    el, un = counts(res)
    r = res.result or {}
    lines = [f"data quality check {name!r} ({etype}) failed on table {table}"]
    if un is not None:
        lines[0] += f": {un} of {el} rows unexpected"
    elif "observed_value" in r:
        lines[0] += f": observed {r['observed_value']}"
    if res.exception_info and res.exception_info.get("raised_exception"):
        lines.append(f"  error: {res.exception_info.get('exception_message')}")
    for ex in examples(res):
        lines.append(f"  e.g. {json.dumps(ex, default=str, ensure_ascii=False)}")
    return "\n".join(lines)
