"""Data quality that users can act on: configured expectations and built-in CDC checks,
validated by Great Expectations on Spark DataFrames, recorded in ``dq_results``.

Three layers, all run through one in-process **ephemeral** Great Expectations context
(no files touched in the hot path, the same on Databricks and locally):

* **Configured rules** (``tables.<db.table>.expectations`` in the YAML, parsed by
  :func:`parse_expectations`). Row rules (``not_null``, ``in_set``, ``between``, ``regex``)
  run per micro-batch on the typed changes (:func:`check_batch`) and act:

  ``warn``  record the result, apply everything;
  ``drop``  the offending changes go to quarantine with the rule name and the bad value,
            the rest is applied (:meth:`BatchQuality.split`);
  ``fail``  raise :class:`QualityFailure` naming the table, the rule and up to 5 example rows.

  Table rules (``unique``, ``row_count_between``) describe the mirror after the merge
  (:func:`check_mirror`); they can warn or fail, there is no single change to drop.
  Row rules skip DELETE/TRUNCATE changes (they carry no new value) and, for partial
  updates, the columns the change does not carry.

* **Built-in CDC checks** every mirror gets without configuration (:func:`cdc_checks`):
  key columns never NULL, key unique, sequences never go backwards, UPDATE/DELETE find the
  row their before-image describes (else *source drift*), freshness (event time or
  heartbeat lag under a per-source threshold, default 1 hour) and, after a full load,
  reconciliation of row count and an order-independent checksum against the SNAPSHOT rows.

* **Reports**: :func:`write_results` appends to ``<warehouse>/dq/dq_results`` (Delta),
  :func:`build_data_docs` renders Great Expectations Data Docs (static HTML) under
  ``<warehouse>/dq/data_docs/``, :func:`report` prints a per-table summary and
  :func:`chart` plots pass rate and quarantine volume over time (matplotlib).

Data Docs need stored validation results, which an ephemeral context does not keep; so
:func:`build_data_docs` uses a separate *file-backed* context under ``<warehouse>/dq/gx``
only for the docs: it adds this process's validation results to that context's
validation-results store (so history accumulates across runs) and builds a filesystem site
whose ``base_directory`` is ``<warehouse>/dq/data_docs``.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import threading
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pipelines.config import ConfigError

log = logging.getLogger(__name__)

ACTIONS = ("warn", "drop", "fail")
ROW_EXPECTATIONS = ("not_null", "in_set", "between", "regex")
TABLE_EXPECTATIONS = ("unique", "row_count_between")
EXPECTATIONS = ROW_EXPECTATIONS + TABLE_EXPECTATIONS

#: Identifies one change in the typed batch frame (silver: one bronze message → changes 0..n).
CHANGE_ID = ("bronze_position", "change_index")

DQ_RESULTS_DDL = (
    "run_id STRING, batch_id BIGINT, `table` STRING, expectation STRING, expectation_type STRING, "
    "action STRING, success BOOLEAN, element_count BIGINT, unexpected_count BIGINT, details STRING, "
    "checked_at TIMESTAMP"
)
DQ_RESULT_COLUMNS = ("run_id", "batch_id", "table", "expectation", "expectation_type", "action", "success",
                     "element_count", "unexpected_count", "details", "checked_at")
DROPPED_DDL = "bronze_position STRING, change_index INT, rule STRING, bad_value STRING, reason STRING"

CDC_CHECKS = ("key_not_null", "key_unique", "seq_not_backwards", "source_drift", "freshness", "reconcile")
DEFAULT_FRESHNESS = _dt.timedelta(hours=1)
MAX_EXAMPLES = 5

_RULE_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_LINEAGE = ("_seq", "_queue_pos", "_op", "_event_time", "_source", "_format", "_position", "_ingest_time")


class QualityFailure(RuntimeError):
    """A ``fail`` rule (or a built-in check listed in ``fail_on``) did not hold.

    ``results`` carries the dq_results rows of the whole check, so the caller can record
    them before the stream stops.
    """

    def __init__(self, message: str, results: list[dict] | None = None) -> None:
        super().__init__(message)
        self.results = list(results or [])


# ---------------------------------------------------------------- rules from YAML


@dataclass(frozen=True)
class Rule:
    """One configured expectation."""

    name: str
    expectation: str  # one of EXPECTATIONS
    columns: tuple[str, ...] = ()
    args: Mapping[str, Any] = field(default_factory=dict)
    action: str = "warn"

    @property
    def column(self) -> str | None:
        return self.columns[0] if self.columns else None

    @property
    def scope(self) -> str:
        """``batch`` (checked on each micro-batch of changes) or ``mirror`` (after the merge)."""
        return "batch" if self.expectation in ROW_EXPECTATIONS else "mirror"


_FIELDS = {
    "not_null": {"column"},
    "in_set": {"column", "values"},
    "between": {"column", "min", "max", "strict_min", "strict_max"},
    "regex": {"column", "pattern"},
    "unique": {"column", "columns"},
    "row_count_between": {"min", "max"},
}
_COMMON = {"name", "expect", "action", "description"}


def parse_expectations(raw: list[dict] | None, where: str) -> list[Rule]:
    """Validate ``tables.<db.table>.expectations``; errors name ``where``, the rule and the field.

    >>> parse_expectations([{"name": "id_present", "expect": "not_null", "column": "id", "action": "fail"}], "t")
    [Rule(name='id_present', expectation='not_null', columns=('id',), args={}, action='fail')]
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: expected a list of expectations, got {type(raw).__name__}")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"

        def fail(fld: str | None, message: str) -> None:
            raise ConfigError(f"{at}{'.' + fld if fld else ''}: {message}")

        if not isinstance(item, dict):
            fail(None, f"expected a mapping (name, expect, column, action, ...), got {type(item).__name__}")
        name = item.get("name")
        if not isinstance(name, str) or not _RULE_NAME_RE.match(name):
            fail("name", f"required: letters, digits, _ . - (got {name!r})")
        at = f"{where}[{i}] ({name})"
        if name in seen:
            fail("name", "rule names must be unique within a table")
        seen.add(name)
        kind = item.get("expect")
        if kind not in EXPECTATIONS:
            fail("expect", f"must be one of {', '.join(EXPECTATIONS)}, got {kind!r}")
        allowed = _COMMON | _FIELDS[kind]
        unknown = sorted(set(map(str, item)) - allowed)
        if unknown:
            fail(unknown[0], f"unknown field for expect: {kind}; allowed: {', '.join(sorted(allowed))}")
        action = item.get("action", "warn")
        if action not in ACTIONS:
            fail("action", f"must be one of {', '.join(ACTIONS)}, got {action!r}")
        if kind in TABLE_EXPECTATIONS and action == "drop":
            fail("action", f"{kind} is checked on the mirror after the merge, where there is no single change "
                           f"to drop; use warn or fail")

        columns: tuple[str, ...] = ()
        if "column" in _FIELDS[kind]:
            col, cols = item.get("column"), item.get("columns")
            if kind == "unique" and cols is not None:
                if col is not None:
                    fail("columns", "give column or columns, not both")
                if not isinstance(cols, list) or not cols or not all(isinstance(c, str) and c for c in cols):
                    fail("columns", f"must be a non-empty list of column names, got {cols!r}")
                columns = tuple(cols)
            else:
                if not isinstance(col, str) or not col:
                    fail("column", f"required: the column name (got {col!r})")
                columns = (col,)

        args: dict[str, Any] = {}
        if kind == "in_set":
            values = item.get("values")
            if not isinstance(values, list) or not values:
                fail("values", f"must be a non-empty list, got {values!r}")
            if not all(isinstance(v, (str, int, float, bool)) for v in values):
                fail("values", "values must be strings, numbers or booleans")
            args["values"] = list(values)
        elif kind in ("between", "row_count_between"):
            lo, hi = item.get("min"), item.get("max")
            if lo is None and hi is None:
                fail("min", "give min, max or both")
            for fld, v in (("min", lo), ("max", hi)):
                if v is None:
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    fail(fld, f"must be a number, got {v!r}")
                if kind == "row_count_between" and (not isinstance(v, int) or v < 0):
                    fail(fld, f"must be a non-negative integer, got {v!r}")
            if lo is not None and hi is not None and lo > hi:
                fail("min", f"min {lo!r} is greater than max {hi!r}")
            args["min"], args["max"] = lo, hi
            for fld in ("strict_min", "strict_max"):
                if fld in item:
                    if not isinstance(item[fld], bool):
                        fail(fld, f"must be true or false, got {item[fld]!r}")
                    args[fld] = item[fld]
        elif kind == "regex":
            pattern = item.get("pattern")
            if not isinstance(pattern, str) or not pattern:
                fail("pattern", f"required: a regular expression (got {pattern!r})")
            try:
                re.compile(pattern)
            except re.error as exc:
                fail("pattern", f"not a valid regular expression: {exc}")
            args["pattern"] = pattern
        rules.append(Rule(name=name, expectation=kind, columns=columns, args=args, action=action))
    return rules


def parse_duration(value: Any, where: str) -> _dt.timedelta:
    """``3600`` (seconds), ``"90 minutes"``, ``"1 hour"``, ``"2h"`` → timedelta (freshness thresholds)."""
    if isinstance(value, _dt.timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return _dt.timedelta(seconds=value)
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?|d|days?)\s*",
                     str(value), re.IGNORECASE)
    if not m:
        raise ConfigError(f"{where}: expected a duration like '1 hour', '30 minutes' or seconds, got {value!r}")
    unit = m.group(2).lower()[0]
    seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    if seconds <= 0:
        raise ConfigError(f"{where}: must be positive, got {value!r}")
    return _dt.timedelta(seconds=seconds)


# ---------------------------------------------------------------- the Great Expectations session


class _GX:
    """One ephemeral GE context per process: a Spark data source, one dataframe asset per table."""

    _instance: "_GX | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        self.gx = gx
        self.ctx = gx.get_context(mode="ephemeral")
        self.ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.source = self.ctx.data_sources.add_spark(name="lakecdc")
        self.batch_definitions: dict[str, Any] = {}
        #: (table, run name, validation result) of this process, newest last, for Data Docs.
        self.recent: deque = deque(maxlen=500)

    @classmethod
    def get(cls) -> "_GX":
        with cls._lock:
            if cls._instance is None:
                cls._instance = _GX()
            return cls._instance

    def validate(self, asset: str, suite_name: str, expectations: list, df, *, result_format: str,
                 index_columns: Sequence[str] = (), run_name: str = "", table: str = ""):
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
        result = batch.validate(suite, result_format=fmt)
        from great_expectations.core.run_identifier import RunIdentifier

        result.meta["lakecdc_run"] = run_name
        result.meta["lakecdc_table"] = table
        result.meta["run_id"] = RunIdentifier(run_name=run_name or "lakecdc", run_time=_now())
        result.meta["batch_spec"] = {**(result.meta.get("batch_spec") or {}), "data_asset_name": table}
        self.recent.append((table, run_name, result))
        return result


@contextmanager
def _cached(df):
    """Persist ``df`` for the validation unless the caller already did (then leave it cached)."""
    if df.is_cached:
        yield df
        return
    df = df.persist()
    try:
        yield df
    finally:
        df.unpersist()


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _row(run_id: str, batch_id: int, table: str, name: str, etype: str, action: str, success: bool | None,
         element_count: int | None, unexpected_count: int | None, details: str | None,
         checked_at: _dt.datetime) -> dict:
    return {"run_id": run_id, "batch_id": int(batch_id), "table": table, "expectation": name,
            "expectation_type": etype, "action": action, "success": success,
            "element_count": None if element_count is None else int(element_count),
            "unexpected_count": None if unexpected_count is None else int(unexpected_count),
            "details": details, "checked_at": checked_at}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def _sql_lit(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _expectation_for(rule: Rule, row_condition: str | None):
    """The GE 1.x Expectation object for one rule."""
    import great_expectations as gx

    E = gx.expectations
    meta = {"rule": rule.name, "action": rule.action}
    cond = {"row_condition": row_condition, "condition_parser": "spark"} if row_condition else {}
    a = rule.args
    if rule.expectation == "not_null":
        return E.ExpectColumnValuesToNotBeNull(column=rule.column, meta=meta, **cond)
    if rule.expectation == "in_set":
        return E.ExpectColumnValuesToBeInSet(column=rule.column, value_set=list(a["values"]), meta=meta, **cond)
    if rule.expectation == "between":
        return E.ExpectColumnValuesToBeBetween(column=rule.column, min_value=a.get("min"), max_value=a.get("max"),
                                               strict_min=a.get("strict_min", False),
                                               strict_max=a.get("strict_max", False), meta=meta, **cond)
    if rule.expectation == "regex":
        return E.ExpectColumnValuesToMatchRegex(column=rule.column, regex=a["pattern"], meta=meta, **cond)
    if rule.expectation == "unique":
        if len(rule.columns) == 1:
            return E.ExpectColumnValuesToBeUnique(column=rule.column, meta=meta)
        return E.ExpectCompoundColumnsToBeUnique(column_list=list(rule.columns), meta=meta)
    if rule.expectation == "row_count_between":
        return E.ExpectTableRowCountToBeBetween(min_value=a.get("min"), max_value=a.get("max"), meta=meta)
    raise ValueError(rule.expectation)


def _counts(res) -> tuple[int | None, int | None]:
    r = res.result or {}
    if "observed_value" in r and "element_count" not in r:  # table-level (row count)
        return (int(r["observed_value"]) if r["observed_value"] is not None else None), None
    return r.get("element_count"), r.get("unexpected_count")


def _details(res, index_columns: Sequence[str] = ()) -> str | None:
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


def _examples(res) -> list:
    r = res.result or {}
    ex = r.get("partial_unexpected_index_list") or r.get("unexpected_index_list") or r.get("partial_unexpected_list")
    return list(ex or [])[:MAX_EXAMPLES]


def _failure_message(table: str, name: str, etype: str, res) -> str:
    el, un = _counts(res)
    r = res.result or {}
    lines = [f"data quality check {name!r} ({etype}) failed on table {table}"]
    if un is not None:
        lines[0] += f": {un} of {el} rows unexpected"
    elif "observed_value" in r:
        lines[0] += f": observed {r['observed_value']}"
    if res.exception_info and res.exception_info.get("raised_exception"):
        lines.append(f"  error: {res.exception_info.get('exception_message')}")
    for ex in _examples(res):
        lines.append(f"  e.g. {json.dumps(ex, default=str, ensure_ascii=False)}")
    return "\n".join(lines)


# ---------------------------------------------------------------- per micro-batch


@dataclass
class BatchQuality:
    """What :func:`check_batch` found in one micro-batch of one table."""

    table: str
    results: list[dict] = field(default_factory=list)  # dq_results rows
    dropped: Any = None  # DataFrame[DROPPED_DDL]: one row per change to quarantine, or None
    dropped_count: int = 0
    warnings: list[str] = field(default_factory=list)
    validation: Any = None  # the GE ExpectationSuiteValidationResult

    def split(self, changes):
        """``changes`` (anything with bronze_position, change_index) → (to apply, to quarantine).

        The quarantine frame carries ``rule``, ``bad_value`` and ``reason``; shape it with
        :func:`pipelines.silver.quarantine_frame` after adding ``stage``.
        """
        if self.dropped is None or not self.dropped_count:
            return changes, None
        keep = changes.join(self.dropped.select(*CHANGE_ID), list(CHANGE_ID), "left_anti")
        base = changes.drop(*[c for c in ("rule", "bad_value", "reason") if c in changes.columns])
        bad = base.join(self.dropped, list(CHANGE_ID), "inner")
        return keep, bad


def typed_changes(changes, columns: Mapping[str, str | None]):
    """Gold's canonical changes (``before``/``after`` maps of text) → the typed frame
    :func:`check_batch` validates: one row per change with each mirror column converted by
    :func:`pipelines.gold.convert_expr` from the after-image (before-image for DELETE), plus
    ``op``, ``bronze_position``, ``change_index``, ``_seq`` and ``_carried`` (the columns a
    partial UPDATE carries; NULL for a full image)."""
    from pyspark.sql import functions as F

    from pipelines.gold import convert_expr

    image = "CASE WHEN op = 'DELETE' THEN coalesce(before, after) ELSE coalesce(after, before) END"
    sel = [F.expr(convert_expr(f"({image})[{_sql_lit(c)}]", t)).alias(c) for c, t in columns.items()]
    sel += [F.col("op"), F.col("bronze_position"), F.col("change_index").cast("int").alias("change_index"),
            F.col("seq").alias("_seq"),
            F.expr("CASE WHEN op = 'UPDATE' AND changed IS NOT NULL THEN changed END").alias("_carried")]
    return changes.select(*sel)


def check_batch(spark, table: str, typed, rules: Sequence[Rule], run_id: str, batch_id: int) -> BatchQuality:
    """Validate one micro-batch of typed changes against the row rules of ``table``.

    ``typed``: one row per change with the mirror's typed columns plus ``bronze_position``,
    ``change_index`` and ``op`` (optional ``_carried``: see :func:`typed_changes`).
    Returns the dq_results rows and, for ``drop`` rules, the offending changes; raises
    :class:`QualityFailure` when a ``fail`` rule does not hold (``.results`` has the rows).
    """
    out = BatchQuality(table=table)
    rules = [r for r in rules if r.scope == "batch"]
    if not rules:
        return out
    checked_at = _now()
    cols = set(typed.columns)
    missing = [r for r in rules if r.column not in cols]
    runnable = [r for r in rules if r.column in cols]
    failures: list[str] = []
    for r in missing:
        msg = f"column {r.column!r} is not a column of {table}"
        out.results.append(_row(run_id, batch_id, table, r.name, _etype(r), r.action, False, None, None,
                                json.dumps({"error": msg}), checked_at))
        out.warnings.append(f"{table}: rule {r.name}: {msg}")
        if r.action == "fail":
            failures.append(f"data quality check {r.name!r} failed on table {table}: {msg}")
    conds = []
    if "op" in cols:
        conds.append("op NOT IN ('DELETE', 'TRUNCATE')")
    index_cols = [c for c in CHANGE_ID if c in cols]
    if runnable:
        exps = []
        for r in runnable:
            cond = list(conds)
            if "_carried" in cols:
                cond.append(f"(_carried IS NULL OR array_contains(_carried, {_sql_lit(r.column)}))")
            exps.append(_expectation_for(r, " AND ".join(cond) or None))
        has_drop = any(r.action == "drop" for r in runnable)
        with _cached(typed) as frame:  # GE computes several metrics over the same frame
            res = _GX.get().validate(table, f"{_asset(table)}.batch", exps, frame,
                                     result_format="COMPLETE" if has_drop else "SUMMARY",
                                     index_columns=index_cols, run_name=f"{run_id}-b{batch_id}", table=table)
        out.validation = res
        by_name = {r.name: r for r in runnable}
        dropped: dict[tuple, dict] = {}
        for er in res.results:
            rule = by_name[er.expectation_config.meta["rule"]]
            el, un = _counts(er)
            ok = bool(er.success)
            out.results.append(_row(run_id, batch_id, table, rule.name, er.expectation_config.type, rule.action, ok,
                                    el, un, _details(er), checked_at))
            if ok:
                continue
            msg = _failure_message(table, rule.name, er.expectation_config.type, er)
            if rule.action == "fail":
                failures.append(msg)
            elif rule.action == "warn":
                out.warnings.append(msg)
                log.warning("%s", msg)
            else:
                if er.exception_info and er.exception_info.get("raised_exception"):
                    failures.append(msg + "\n  (a drop rule could not be evaluated; nothing was dropped)")
                    continue
                for item in (er.result or {}).get("unexpected_index_list") or []:
                    ident = tuple(item.get(c) for c in CHANGE_ID)
                    if ident in dropped:
                        continue  # first rule in configured order names the change
                    bad = _text(item.get(rule.column))
                    dropped[ident] = {
                        "bronze_position": ident[0], "change_index": ident[1], "rule": rule.name, "bad_value": bad,
                        "reason": f"expectation {rule.name} ({rule.expectation}) failed: column {rule.column} = "
                                  f"{'NULL' if bad is None else bad[:200]}"}
        if dropped:
            out.dropped = spark.createDataFrame(list(dropped.values()), DROPPED_DDL)
            out.dropped_count = len(dropped)
            log.warning("quality: %s batch %d: %d changes dropped to quarantine", table, batch_id, len(dropped))
    if failures:
        raise QualityFailure("\n".join(failures), out.results)
    return out


def _etype(rule: Rule) -> str:
    return {"not_null": "expect_column_values_to_not_be_null", "in_set": "expect_column_values_to_be_in_set",
            "between": "expect_column_values_to_be_between", "regex": "expect_column_values_to_match_regex",
            "unique": ("expect_column_values_to_be_unique" if len(rule.columns) == 1
                       else "expect_compound_columns_to_be_unique"),
            "row_count_between": "expect_table_row_count_to_be_between"}[rule.expectation]


def _asset(table: str) -> str:
    from pipelines.warehouse import safe_name

    return safe_name(table)


# ---------------------------------------------------------------- the mirror after the merge


def _run_checks(table: str, suite: str, df, checks: list[tuple[str, str, Any]], *, run_id: str, batch_id: int,
                index_columns: Sequence[str] = (), fail_on: Iterable[str] = ()) -> list[dict]:
    """Validate ``df`` with [(name, action, expectation)]; return rows, raise for failing ``fail`` ones."""
    if not checks:
        return []
    checked_at = _now()
    fail_on = set(fail_on)
    exps = []
    for name, action, exp in checks:
        exp.meta = {**(exp.meta or {}), "rule": name, "action": action}
        exps.append(exp)
    res = _GX.get().validate(table, f"{_asset(table)}.{suite}", exps, df, result_format="SUMMARY",
                             index_columns=[c for c in index_columns if c in df.columns],
                             run_name=f"{run_id}-b{batch_id}", table=table)
    rows, failures = [], []
    for er in res.results:
        name, action = er.expectation_config.meta["rule"], er.expectation_config.meta["action"]
        el, un = _counts(er)
        ok = bool(er.success)
        rows.append(_row(run_id, batch_id, table, name, er.expectation_config.type, action, ok, el, un,
                         _details(er), checked_at))
        if not ok:
            msg = _failure_message(table, name, er.expectation_config.type, er)
            if action == "fail" or name in fail_on:
                failures.append(msg)
            else:
                log.warning("%s", msg)
    if failures:
        raise QualityFailure("\n".join(failures), rows)
    return rows


def check_mirror(spark, table: str, mirror_df, rules: Sequence[Rule], run_id: str, batch_id: int,
                 key_cols: Sequence[str] = ()) -> list[dict]:
    """Table rules (``unique``, ``row_count_between``) on the mirror after the merge.

    Returns dq_results rows; raises :class:`QualityFailure` for a failing ``fail`` rule."""
    rules = [r for r in rules if r.scope == "mirror"]
    checks = []
    rows = []
    for r in rules:
        absent = [c for c in r.columns if c not in mirror_df.columns]
        if absent:
            msg = f"column {absent[0]!r} is not a column of {table}"
            rows.append(_row(run_id, batch_id, table, r.name, _etype(r), r.action, False, None, None,
                             json.dumps({"error": msg}), _now()))
            if r.action == "fail":
                raise QualityFailure(f"data quality check {r.name!r} failed on table {table}: {msg}", rows)
            continue
        checks.append((r.name, r.action, _expectation_for(r, None)))
    try:
        rows += _run_checks(table, "mirror", mirror_df, checks, run_id=run_id, batch_id=batch_id,
                            index_columns=key_cols)
    except QualityFailure as exc:
        raise QualityFailure(str(exc), rows + exc.results) from None
    return rows


# ---------------------------------------------------------------- built-in CDC checks


def source_types(df) -> dict[str, str | None]:
    """Mirror column → source type, from the column comments gold writes (lineage excluded)."""
    from pipelines.gold import SOURCE_TYPE_PREFIX

    out = {}
    for f in df.schema.fields:
        if f.name in _LINEAGE:
            continue
        comment = f.metadata.get("comment", "") if f.metadata else ""
        out[f.name] = comment[len(SOURCE_TYPE_PREFIX):] if comment.startswith(SOURCE_TYPE_PREFIX) else None
    return out


def read_version(spark, ref, version: int):
    """The mirror as of a Delta version (time travel), e.g. the version before this batch's merge."""
    reader = spark.read.format("delta").option("versionAsOf", int(version))
    return reader.load(ref.path) if ref.path is not None else reader.table(ref.name)


def current_version(spark, ref) -> int | None:
    """The mirror's latest Delta version (None when it does not exist yet)."""
    if not ref.exists(spark):
        return None
    return ref.delta(spark).history(1).select("version").first()[0]


def _threshold_seconds(threshold, source: str | None) -> float:
    if isinstance(threshold, Mapping):
        value = threshold.get(source) if source in threshold else threshold.get("*", DEFAULT_FRESHNESS)
    else:
        value = threshold
    return parse_duration(value if value is not None else DEFAULT_FRESHNESS, "freshness threshold").total_seconds()


def cdc_checks(spark, table: str, mirror_df, key_cols: Sequence[str], batch_changes_df=None, *,
               run_id: str = "", batch_id: int = 0, mirror_before_df=None,
               columns: Mapping[str, str | None] | None = None, heartbeats_df=None,
               freshness_threshold: Any = DEFAULT_FRESHNESS, now: _dt.datetime | None = None,
               snapshot_df=None, checks: Iterable[str] = CDC_CHECKS, fail_on: Iterable[str] = ()) -> list[dict]:
    """The checks every mirror gets without configuration; returns dq_results rows.

    mirror_df          the mirror after this batch's merge (gold columns + lineage ``_seq``, ``_source``,
                       ``_event_time``); key not NULL, key unique, freshness, reconciliation run on it.
    key_cols           the mirror's key columns.
    batch_changes_df   gold's canonical changes of this batch (``op``, ``before``/``after`` maps of text,
                       ``seq``, ``queue_pos``, ``change_index``, ``bronze_position``): sequence and drift.
    mirror_before_df   the mirror before the merge (:func:`read_version` of :func:`current_version`
                       taken before it); without it the sequence and drift checks are skipped.
    columns            column → source type (gold's ``columns``); default: from mirror_df's comments.
    heartbeats_df      silver heartbeats (``source``, ``event_time``) – a heartbeat counts as progress.
    freshness_threshold  timedelta / seconds / "1 hour", or {source: ..., "*": default}; default 1 hour.
    snapshot_df        the SNAPSHOT changes of a full load (canonical, like batch_changes_df):
                       reconciles row count and checksum; skipped when None.
    fail_on            check names (``cdc_key_unique``, ...) that raise :class:`QualityFailure`
                       instead of warning.

    Result names: cdc_key_not_null, cdc_key_unique, cdc_seq_not_backwards, cdc_source_drift,
    cdc_freshness, cdc_reconcile_count, cdc_reconcile_checksum.
    """
    import great_expectations as gx

    E = gx.expectations
    checks = set(checks)
    key_cols = list(key_cols)
    columns = dict(columns) if columns is not None else source_types(mirror_df)
    kw = {"run_id": run_id, "batch_id": batch_id, "fail_on": fail_on}
    rows: list[dict] = []

    def run(suite, df, items, index_columns=()):
        try:
            rows.extend(_run_checks(table, suite, df, items, index_columns=index_columns, **kw))
        except QualityFailure as exc:
            raise QualityFailure(str(exc), rows + exc.results) from None

    # 1. key columns never NULL, key unique (mirror after merge)
    items = []
    if "key_not_null" in checks:
        for k in key_cols:
            items.append(("cdc_key_not_null" if len(key_cols) == 1 else f"cdc_key_not_null.{k}", "warn",
                          E.ExpectColumnValuesToNotBeNull(column=k)))
    if "key_unique" in checks and key_cols:
        items.append(("cdc_key_unique", "warn",
                      E.ExpectColumnValuesToBeUnique(column=key_cols[0]) if len(key_cols) == 1
                      else E.ExpectCompoundColumnsToBeUnique(column_list=key_cols)))
    if items:
        with _cached(mirror_df) as frame:
            run("cdc_mirror", frame, items, index_columns=key_cols + ["_seq"])

    # 2. sequence never backwards / 3. UPDATE-DELETE find the row they expect (against the mirror before)
    want_seq, want_drift = "seq_not_backwards" in checks, "source_drift" in checks
    if (want_seq or want_drift) and batch_changes_df is not None and mirror_before_df is not None and key_cols:
        probe = _change_probe(batch_changes_df, mirror_before_df, key_cols, columns)
        items = []
        if want_seq:
            items.append(("cdc_seq_not_backwards", "warn", E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="seq", column_B="prev_seq", or_equal=True, ignore_row_if="either_value_is_missing")))
        if want_drift:
            items.append(("cdc_source_drift", "warn", E.ExpectColumnValuesToBeInSet(
                column="row_matches", value_set=[True], row_condition="check_drift", condition_parser="spark")))
        with _cached(probe) as frame:
            run("cdc_changes", frame, items, index_columns=["bronze_position", "change_index", "op", "drift"])

    # 4. freshness: newest event time or heartbeat per source vs now
    if "freshness" in checks:
        fresh = _freshness_frame(spark, mirror_df, heartbeats_df, freshness_threshold, now or _now())
        if fresh is not None:
            run("cdc_freshness", fresh, [("cdc_freshness", "warn", E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="threshold_seconds", column_B="lag_seconds", or_equal=True))],
                index_columns=["source", "last_seen"])

    # 5. reconciliation after a full load
    if "reconcile" in checks and snapshot_df is not None and key_cols:
        rec = _reconcile_frame(spark, mirror_df, snapshot_df, key_cols, columns)
        run("cdc_reconcile", rec, [
            ("cdc_reconcile_count", "warn", E.ExpectColumnPairValuesToBeEqual(column_A="mirror_rows",
                                                                            column_B="snapshot_rows")),
            ("cdc_reconcile_checksum", "warn", E.ExpectColumnPairValuesToBeEqual(column_A="mirror_checksum",
                                                                               column_B="snapshot_checksum")),
        ])
    return rows


def _key_text(k: str) -> str:
    lit = _sql_lit(k)
    return (f"(CASE WHEN op IN ('UPDATE', 'DELETE') THEN coalesce(before[{lit}], after[{lit}]) "
            f"ELSE coalesce(after[{lit}], before[{lit}]) END)")


def _change_probe(changes, before_df, key_cols, columns):
    """One row per batch change: its sequence, the mirror's previous sequence for its key,
    and whether the row an UPDATE/DELETE describes is the mirror's current row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from pipelines.gold import convert_expr

    ch = changes.where("op IN ('INSERT', 'UPDATE', 'DELETE', 'SNAPSHOT')")
    # the row an UPDATE/DELETE expects lives at the before-image's key (a key change moves it)
    ks = [f"{convert_expr(_key_text(k), columns.get(k))} AS `k_{i}`" for i, k in enumerate(key_cols)]
    compare = [c for c in before_df.columns if c in columns and c not in key_cols and c not in _LINEAGE]
    ch = ch.selectExpr("*", *ks)
    ch = ch.withColumn("ord", F.concat_ws("|", "seq", "queue_pos",
                                          F.lpad(F.col("change_index").cast("string"), 6, "0")))
    kcols = [f"k_{i}" for i in range(len(key_cols))]
    ch = ch.withColumn("first_for_key", F.row_number().over(Window.partitionBy(*kcols).orderBy("ord")) == 1)
    mb = before_df.select(*[F.col(k).alias(f"k_{i}") for i, k in enumerate(key_cols)],
                          F.col("_seq").alias("prev_seq"), F.lit(True).alias("present"),
                          *[F.col(c).alias(f"m_{j}") for j, c in enumerate(compare)])
    cond = None
    for kc in kcols:
        c = ch[kc].eqNullSafe(mb[kc])
        cond = c if cond is None else cond & c
    j = ch.join(mb, cond, "left")
    diffs = []
    for idx, c in enumerate(compare):
        typed = convert_expr(f"before[{_sql_lit(c)}]", columns.get(c))
        diffs.append(f"CASE WHEN map_contains_key(coalesce(before, map()), {_sql_lit(c)}) "
                     f"AND NOT (({typed}) <=> m_{idx}) THEN {_sql_lit(c)} END")
    diff_sql = f"concat_ws(',', {', '.join(diffs)})" if diffs else "''"
    j = j.withColumn("diff_cols", F.expr(diff_sql))
    j = j.withColumn("row_matches", F.expr("coalesce(present, false) AND diff_cols = ''"))
    j = j.withColumn("drift", F.expr("CASE WHEN present IS NULL THEN 'row missing' "
                                     "WHEN diff_cols != '' THEN concat('differs: ', diff_cols) END"))
    # only changes not applied yet: a retried batch (seq <= mirror's) must not look like drift
    j = j.withColumn("check_drift", F.expr(
        "op IN ('UPDATE', 'DELETE') AND first_for_key AND (prev_seq IS NULL OR seq > prev_seq)"))
    return j.select("bronze_position", F.col("change_index").cast("int").alias("change_index"), "op", "seq",
                    "prev_seq", "row_matches", "drift", "check_drift")


def _freshness_frame(spark, mirror_df, heartbeats_df, threshold, now: _dt.datetime):
    from pyspark.sql import functions as F

    parts = []
    if "_event_time" in mirror_df.columns:
        src = F.col("_source") if "_source" in mirror_df.columns else F.lit(None).cast("string")
        parts.append(mirror_df.select(src.alias("source"), F.col("_event_time").cast("timestamp").alias("t")))
    if heartbeats_df is not None:
        parts.append(heartbeats_df.select(F.col("source"), F.col("event_time").cast("timestamp").alias("t")))
    if not parts:
        return None
    allp = parts[0]
    for p in parts[1:]:
        allp = allp.unionByName(p)
    last = allp.where("t IS NOT NULL").groupBy("source").agg(F.max("t").alias("last_seen")).collect()
    if not last:
        log.info("quality: no event time or heartbeat to measure freshness")
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=_dt.timezone.utc)
    data = []
    for r in last:
        seen = r["last_seen"]
        seen_utc = seen.astimezone(_dt.timezone.utc) if seen.tzinfo else seen.astimezone().astimezone(_dt.timezone.utc)
        data.append((r["source"], seen_utc.isoformat(), float((now - seen_utc).total_seconds()),
                     float(_threshold_seconds(threshold, r["source"]))))
    return spark.createDataFrame(data, "source STRING, last_seen STRING, lag_seconds DOUBLE, "
                                       "threshold_seconds DOUBLE")


def _row_hash_sql(cols: Sequence[str]) -> str:
    fields = ", ".join(f"{_sql_lit(c)}, `{c}`" for c in sorted(cols))
    return f"CAST(xxhash64(to_json(named_struct({fields}))) AS DECIMAL(38, 0))"


def _reconcile_frame(spark, mirror_df, snapshot_df, key_cols, columns):
    """One row: mirror vs full-load row count and sum of xxhash64 over the canonical typed row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from pipelines.gold import convert_expr

    cols = [c for c in mirror_df.columns if c not in _LINEAGE]
    snap = snapshot_df.where("op = 'SNAPSHOT'").selectExpr(
        *[f"{convert_expr(f'after[{_sql_lit(c)}]', columns.get(c))} AS `{c}`" for c in cols],
        "concat_ws('|', seq, queue_pos, lpad(CAST(change_index AS STRING), 6, '0')) AS _ord")
    w = Window.partitionBy(*[F.col(k) for k in key_cols]).orderBy(F.col("_ord").desc())
    snap = snap.withColumn("_rn", F.row_number().over(w)).where("_rn = 1")  # latest per key
    # cast the snapshot to the mirror's types so both sides hash the same canonical value
    types = {f.name: f.dataType.simpleString() for f in mirror_df.schema.fields}
    snap = snap.select(*[F.col(c).cast(types[c]).alias(c) for c in cols])
    hs = _row_hash_sql(cols)
    m = mirror_df.select(*cols).agg(F.count(F.lit(1)).alias("n"), F.expr(f"sum({hs})").alias("h")).first()
    s = snap.agg(F.count(F.lit(1)).alias("n"), F.expr(f"sum({hs})").alias("h")).first()
    return spark.createDataFrame(
        [(int(m["n"]), int(s["n"]), str(m["h"] or 0), str(s["h"] or 0))],
        "mirror_rows BIGINT, snapshot_rows BIGINT, mirror_checksum STRING, snapshot_checksum STRING")


# ---------------------------------------------------------------- reports


def dq_results_ref(warehouse):
    """``<warehouse>/dq/dq_results`` (or ``<catalog>.<schema>.dq_results``)."""
    from pipelines.warehouse import TableRef, Warehouse

    wh = warehouse if isinstance(warehouse, Warehouse) else Warehouse(str(warehouse))
    if wh.catalog:
        return TableRef(name=f"{wh.catalog}.{wh.schema}.dq_results")
    return TableRef(path=f"{wh.root}/dq/dq_results")


def dq_dir(warehouse) -> Path:
    from pipelines.warehouse import Warehouse

    wh = warehouse if isinstance(warehouse, Warehouse) else Warehouse(str(warehouse))
    return Path(wh.root) / "dq"


def results_frame(spark, rows: Sequence[dict]):
    return spark.createDataFrame([tuple(r.get(c) for c in DQ_RESULT_COLUMNS) for r in rows], DQ_RESULTS_DDL)


def write_results(spark, warehouse, rows: Sequence[dict], app_id: str | None = None,
                  version: int | None = None) -> int:
    """Append dq_results rows (Delta). With ``app_id``/``version`` a retried batch is written once."""
    rows = list(rows)
    if not rows:
        return 0
    writer = results_frame(spark, rows).write.format("delta").mode("append").option("mergeSchema", "true")
    if app_id is not None and version is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", int(version))
    dq_results_ref(warehouse).save(writer)
    return len(rows)


def recent_validations() -> list:
    """This process's Great Expectations validation results (newest last)."""
    return [r for _t, _n, r in _GX.get().recent] if _GX._instance is not None else []


def build_data_docs(results: Iterable | None = None, out_dir: str | os.PathLike | None = None, *,
                    warehouse=None, project_dir: str | os.PathLike | None = None) -> str:
    """Render Great Expectations Data Docs; returns the path of ``index.html``.

    results      validation results (GE ``ExpectationSuiteValidationResult`` or :class:`BatchQuality`);
                 default: every validation this process ran.
    out_dir      the site's directory; default ``<warehouse>/dq/data_docs``.
    project_dir  the file-backed GE project that keeps results between runs; default
                 ``<out_dir>/../gx`` (``<warehouse>/dq/gx``).
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    if out_dir is None:
        if warehouse is None:
            raise ValueError("give out_dir or warehouse")
        out_dir = dq_dir(warehouse) / "data_docs"
    out = Path(out_dir).resolve()
    project = Path(project_dir).resolve() if project_dir else out.parent / "gx"
    project.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    if results is None:
        items = list(_GX.get().recent) if _GX._instance is not None else []
    else:
        items = []
        for r in results:
            if isinstance(r, BatchQuality):
                if r.validation is not None:
                    items.append((r.table, r.validation.meta.get("lakecdc_run", ""), r.validation))
            elif r is not None:
                items.append((r.meta.get("lakecdc_table", ""), r.meta.get("lakecdc_run", ""), r))
    fctx = gx.get_context(mode="file", project_root_dir=str(project))
    site = {"class_name": "SiteBuilder", "show_how_to_buttons": False,
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(out)}}
    sites = fctx.get_config().data_docs_sites or {}
    if "lakecdc" not in sites:
        fctx.add_data_docs_site(site_name="lakecdc", site_config=site)
    elif sites["lakecdc"].get("store_backend", {}).get("base_directory") != str(out):
        fctx.update_data_docs_site(site_name="lakecdc", site_config=site)
    for table, run_name, res in items:
        rid = res.meta.get("run_id")
        if not isinstance(rid, RunIdentifier):
            rid = RunIdentifier(run_name=run_name or "lakecdc", run_time=_now())
            res.meta["run_id"] = rid
        key = ValidationResultIdentifier(
            expectation_suite_identifier=ExpectationSuiteIdentifier(name=res.suite_name),
            run_id=rid,
            batch_identifier=_asset(table or "table"))
        fctx.validation_results_store.set(key, res)
    urls = fctx.build_data_docs(site_names=["lakecdc"])
    index = out / "index.html"
    from pipelines.dq_assets import vendor_assets

    vendored = vendor_assets(out)  # render offline too (GE links its CSS/JS from CDNs)
    log.info("quality: Data Docs at %s (%d assets served locally)", urls.get("lakecdc", index), vendored)
    return str(index)


def _summary(spark, warehouse):
    from pyspark.sql import functions as F

    ref = dq_results_ref(warehouse)
    if not ref.exists(spark):
        return None
    df = ref.read(spark)
    return df, (df.groupBy("table").agg(
        F.count(F.lit(1)).alias("checks"),
        F.sum(F.when(F.col("success"), 1).otherwise(0)).alias("passed"),
        F.sum(F.when(~F.col("success") | F.col("success").isNull(), 1).otherwise(0)).alias("failures"),
        F.sum(F.when((F.col("action") == "drop"), F.coalesce("unexpected_count", F.lit(0))).otherwise(0))
        .alias("quarantined"),
        F.max("checked_at").alias("last_checked"),
    ).orderBy("table").collect())


def report(spark, warehouse) -> str:
    """Per table: checks run, pass rate, failures, quarantined changes, and the failing checks."""
    from pyspark.sql import functions as F

    got = _summary(spark, warehouse)
    if got is None:
        return f"no data-quality results yet ({dq_results_ref(warehouse).path or dq_results_ref(warehouse).name})"
    df, rows = got
    head = ("table", "checks", "pass rate", "failures", "quarantined", "last checked")
    body = [(r["table"], str(r["checks"]), f"{100.0 * r['passed'] / r['checks']:.1f}%" if r["checks"] else "-",
             str(r["failures"]), str(r["quarantined"]),
             r["last_checked"].strftime("%Y-%m-%d %H:%M:%S") if r["last_checked"] else "-") for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body]
    failing = (df.where("NOT success OR success IS NULL").groupBy("table", "expectation", "action")
               .agg(F.count(F.lit(1)).alias("times"), F.sum(F.coalesce("unexpected_count", F.lit(0))).alias("rows"))
               .orderBy("table", "expectation").collect())
    if failing:
        lines += ["", "failing checks:"]
        lines += [f"  {r['table']}: {r['expectation']} ({r['action']}) failed {r['times']}x, {r['rows']} rows"
                  for r in failing]
    return "\n".join(lines)


def chart(spark, warehouse, png_path: str | os.PathLike) -> str:
    """PNG: pass rate (%) and quarantined changes per table over time, one point per batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from pyspark.sql import functions as F

    ref = dq_results_ref(warehouse)
    png = Path(png_path)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if ref.exists(spark):
        pts = (ref.read(spark).groupBy("table", "run_id", "batch_id").agg(
            F.min("checked_at").alias("t"),
            (100.0 * F.avg(F.when(F.col("success"), 1.0).otherwise(0.0))).alias("pass_rate"),
            F.sum(F.when(F.col("action") == "drop", F.coalesce("unexpected_count", F.lit(0))).otherwise(0))
            .alias("quarantined")).orderBy("t").collect())
        tables = sorted({p["table"] for p in pts})
        for tbl in tables:
            mine = [p for p in pts if p["table"] == tbl]
            ts = [p["t"] for p in mine]
            ax1.plot(ts, [p["pass_rate"] for p in mine], marker="o", label=tbl)
            ax2.plot(ts, [p["quarantined"] for p in mine], marker="s", label=tbl)
        if tables:
            ax1.legend(loc="lower left", fontsize=8)
    ax1.set_ylabel("pass rate (%)")
    ax1.set_ylim(-5, 105)
    ax1.set_title("Data quality per table")
    ax2.set_ylabel("quarantined changes")
    ax2.set_xlabel("checked at")
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return str(png)
