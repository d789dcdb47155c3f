"""Configured rules at work, per micro-batch: what gold calls for each batch of each table.

Row rules run on the batch's typed changes (:func:`check_batch`) and act:

``warn``  record the result, apply everything;
``drop``  the offending changes go to quarantine with the rule name and the bad value, the rest is
          applied (:meth:`BatchQuality.split`);
``fail``  raise :class:`QualityFailure` naming the table, the rule and up to 5 example rows.

Row rules skip DELETE/TRUNCATE changes (they carry no new value) and, for partial updates, the
columns the change does not carry. SQL rules (:mod:`pipelines.quality.sql_rules`) are row rules in the
same suite, as GE's ``UnexpectedRowsExpectation``; a partial update is checked by one only when it
carries every column the expression names. Table rules (``unique``, ``row_count_between``) describe the
mirror after the merge (:func:`check_mirror`); they can warn or fail, there is no single change to drop.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.quality.gx_session import (
    GXSession,
    asset_name,
    cached,
    check_text,
    counts,
    describe,
    details,
    expectation_for,
    expectation_type,
    failure_message,
    sql_expectation,
    utc_now,
)
from pipelines.quality.rules import Rule
from pipelines.quality.sql_rules import SqlCheck, SqlOutcome, SqlRuleError, sql_check, sql_outcomes
from pipelines.quality.storage import result_row
from pipelines.sql import ROW_IMAGE_SQL, lit
from pipelines.sql import typed as typed_column

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: Identifies one change in the typed batch frame (silver: one bronze message → changes 0..n).
CHANGE_ID = ("bronze_position", "change_index")
#: The changes a ``drop`` rule sends to quarantine, and why.
DROPPED_DDL = "bronze_position STRING, change_index INT, rule STRING, bad_value STRING, reason STRING"


class QualityFailure(RuntimeError):
    """A ``fail`` rule (or a built-in check listed in ``fail_on``) did not hold.

    ``results`` carries the dq_results rows of the whole check, so the caller can record
    them before the stream stops.
    """

    def __init__(self, message: str, results: list[dict] | None = None) -> None:
        super().__init__(message)
        self.results = list(results or [])


@dataclass
class BatchQuality:
    """What :func:`check_batch` found in one micro-batch of one table."""

    table: str
    results: list[dict] = field(default_factory=list)  # dq_results rows
    dropped: Any = None  # DataFrame[DROPPED_DDL]: one row per change to quarantine, or None
    dropped_count: int = 0
    warnings: list[str] = field(default_factory=list)
    validation: Any = None  # the GE ExpectationSuiteValidationResult

    def split(self, changes: DataFrame) -> tuple[DataFrame, DataFrame | None]:
        """``changes`` (anything with bronze_position, change_index) → (to apply, to quarantine).

        The quarantine frame carries ``rule``, ``bad_value`` and ``reason``; shape it with
        :func:`pipelines.delta_writes.quarantine_frame` after adding ``stage``.
        """
        if self.dropped is None or not self.dropped_count:
            return changes, None
        keep = changes.join(self.dropped.select(*CHANGE_ID), list(CHANGE_ID), "left_anti")
        base = changes.drop(*[c for c in ("rule", "bad_value", "reason") if c in changes.columns])
        bad = base.join(self.dropped, list(CHANGE_ID), "inner")
        return keep, bad


def typed_changes(changes: DataFrame, columns: Mapping[str, str | None]) -> DataFrame:
    """Gold's canonical changes (``before``/``after`` maps of text) → the typed frame
    :func:`check_batch` validates: one row per change with each mirror column converted to its
    mirror type from the image that carries the row (:data:`pipelines.sql.ROW_IMAGE_SQL`), plus
    ``op``, ``bronze_position``, ``change_index``, ``_seq`` and ``_carried`` (the columns a
    partial UPDATE carries; NULL for a full image)."""
    from pyspark.sql import functions as F

    sel = [F.expr(typed_column(ROW_IMAGE_SQL, c, t)).alias(c) for c, t in columns.items()]
    sel += [
        F.col("op"),
        F.col("bronze_position"),
        F.col("change_index").cast("int").alias("change_index"),
        F.col("seq").alias("_seq"),
        F.expr("CASE WHEN op = 'UPDATE' AND changed IS NOT NULL THEN changed END").alias("_carried"),
    ]
    return changes.select(*sel)


def _text(value: Any) -> str | None:
    """A failing value as quarantine's ``bad_value`` text."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def check_batch(
    spark: SparkSession,
    table: str,
    typed: DataFrame,
    rules: Sequence[Rule],
    run_id: str,
    batch_id: int,
    *,
    suite: str = "changes",
    on: str = "each change",
) -> BatchQuality:
    """Validate one micro-batch of typed changes against the row rules of ``table`` (fixed rules and
    SQL rules, one Great Expectations suite).

    ``typed``: one row per change with the mirror's typed columns plus ``bronze_position``,
    ``change_index`` and ``op`` (optional ``_carried``: see :func:`typed_changes`).
    Returns the dq_results rows and, for ``drop`` rules, the offending changes; raises
    :class:`QualityFailure` when a ``fail`` rule does not hold (``.results`` has the rows).
    """
    out = BatchQuality(table=table)
    rules = [r for r in rules if r.scope == "batch"]
    if not rules:
        return out
    checked_at = utc_now()
    cols = set(typed.columns)
    failures: list[str] = []
    runnable: list[Rule] = []
    sql_checks: dict[str, SqlCheck] = {}
    for r in rules:
        msg = None
        if r.is_sql:
            try:
                sql_checks[r.name] = sql_check(typed, r)
            except SqlRuleError as exc:
                msg = f"sql {r.sql!r}: {exc}"
        elif r.column in cols:
            runnable.append(r)
        else:
            msg = f"column {r.column!r} is not a column of {table}"
        if msg is not None:  # a rule that cannot run on this batch: a failed result naming why
            out.results.append(_unrunnable_row(run_id, batch_id, table, r, msg, checked_at))
            out.warnings.append(f"{table}: rule {r.name}: {msg}")
            if r.action == "fail":
                failures.append(f"data quality check {r.name!r} failed on table {table}: {msg}")
    conds = []
    if "op" in cols:
        conds.append("op NOT IN ('DELETE', 'TRUNCATE')")
    index_cols = [c for c in CHANGE_ID if c in cols]
    if runnable or sql_checks:
        exps = []
        for r in rules:  # the configured order: the first dropping rule names a change
            if r.name in sql_checks:
                exps.append(sql_expectation(r, sql_checks[r.name].query, on))
            elif r in runnable:
                cond = list(conds)
                if "_carried" in cols:
                    cond.append(f"(_carried IS NULL OR array_contains(_carried, {lit(r.column)}))")
                exps.append(expectation_for(r, " AND ".join(cond) or None, on))
        has_drop = any(r.action == "drop" for r in runnable)
        with cached(typed) as frame:
            res = GXSession.get().validate(
                table,
                f"{asset_name(table)}.{suite}",
                exps,
                frame,
                result_format="COMPLETE" if has_drop else "SUMMARY",
                index_columns=index_cols,
                run_name=f"{run_id}-b{batch_id}",
                table=table,
            )
            found = sql_outcomes(frame, list(sql_checks.values()), res)
        out.validation = res
        by_name = {r.name: r for r in rules}
        dropped: dict[tuple, dict] = {}
        for er in res.results:
            rule = by_name[er.expectation_config.meta["rule"]]
            ok = bool(er.success)
            if rule.is_sql:
                outcome = found[rule.name]
                el, un, info, msg = outcome.checked, outcome.unexpected, outcome.details(er), outcome.message(table, er)
            else:
                (el, un), info = counts(er), details(er)
                msg = failure_message(table, rule.name, er.expectation_config.type, er)
            out.results.append(
                result_row(
                    run_id,
                    batch_id,
                    table,
                    rule.name,
                    er.expectation_config.type,
                    rule.action,
                    ok,
                    el,
                    un,
                    info,
                    checked_at,
                )
            )
            if ok:
                continue
            if rule.action == "fail":
                failures.append(msg)
            elif rule.action == "warn":
                out.warnings.append(msg)
                log.warning("%s", msg)
            else:
                if er.exception_info and er.exception_info.get("raised_exception"):
                    failures.append(msg + "\n  (a drop rule could not be evaluated; nothing was dropped)")
                    continue
                offending = _sql_drops(found[rule.name]) if rule.is_sql else _column_drops(rule, er)
                for ident, item in offending:
                    dropped.setdefault(ident, item)  # first rule in configured order names the change
        if dropped:
            out.dropped = spark.createDataFrame(list(dropped.values()), DROPPED_DDL)
            out.dropped_count = len(dropped)
            log.warning("quality: %s batch %d: %d changes dropped to quarantine", table, batch_id, len(dropped))
    if failures:
        raise QualityFailure("\n".join(failures), out.results)
    return out


def _drop(ident: tuple, rule: Rule, bad: str | None, reason: str) -> tuple[tuple, dict]:
    """(change id, its quarantine row: :data:`DROPPED_DDL`)."""
    return ident, {
        "bronze_position": ident[0],
        "change_index": ident[1],
        "rule": rule.name,
        "bad_value": bad,
        "reason": reason,
    }


def _column_drops(rule: Rule, er: Any) -> Iterator[tuple[tuple, dict]]:
    """The changes a failing fixed ``drop`` rule sends to quarantine: (change id, quarantine row)."""
    for item in (er.result or {}).get("unexpected_index_list") or []:
        bad = _text(item.get(rule.column))
        value = "NULL" if bad is None else bad[:200]
        reason = f"expectation {rule.name} ({rule.expectation}) failed: column {rule.column} = {value}"
        yield _drop(tuple(item.get(c) for c in CHANGE_ID), rule, bad, reason)


def _sql_drops(outcome: SqlOutcome) -> Iterator[tuple[tuple, dict]]:
    """The changes a failing SQL ``drop`` rule sends to quarantine, with the values its expression names."""
    rule = outcome.check.rule
    for r in outcome.rows:
        bad = _text({c: r.get(c) for c in outcome.check.columns}) or ""
        reason = f"expectation {rule.name} (sql: {(rule.sql or '')[:200]}) failed: {bad[:200]}"
        yield _drop(tuple(r.get(c) for c in CHANGE_ID), rule, bad, reason)


def run_checks(
    table: str,
    suite: str,
    df: DataFrame,
    checks: list[tuple[str, str, Any]],
    *,
    run_id: str,
    batch_id: int,
    index_columns: Sequence[str] = (),
    fail_on: Iterable[str] = (),
    counted: Mapping[str, tuple[str, str]] | None = None,
) -> list[dict]:
    """Validate ``df`` with [(name, action, expectation)] as one GE suite; return the dq_results rows,
    raise :class:`QualityFailure` for a failing ``fail`` check or one named in ``fail_on``.

    ``counted``: for every check, (rows it counts, rows unexpected) as Spark SQL over ``df``, exactly as
    GE counts them. Then one aggregation decides, and GE validates only the checks that find a row
    unexpected (its report carries the examples): a batch that passes costs one Spark job, not GE's dozen."""
    checked_at = utc_now()
    passed: list[dict] = []
    if checks and counted is not None and all(name in counted for name, _a, _e in checks):
        passed, checks = counted_passes(table, df, checks, counted, run_id=run_id, batch_id=batch_id, at=checked_at)
    if not checks:
        return passed
    fail_on = set(fail_on)
    exps = []
    for name, action, exp in checks:
        exp.meta = {**(exp.meta or {}), "rule": name, "action": action}
        if not exp.description:
            exp.description = describe(name, action, check_text(name, exp.expectation_type))
        exps.append(exp)
    with cached(df) as frame:  # GE computes several metrics over the frame (a caller's cache is kept)
        res = GXSession.get().validate(
            table,
            f"{asset_name(table)}.{suite}",
            exps,
            frame,
            result_format="SUMMARY",
            index_columns=[c for c in index_columns if c in frame.columns],
            run_name=f"{run_id}-b{batch_id}",
            table=table,
        )
    rows, failures = passed, []
    for er in res.results:
        name, action = er.expectation_config.meta["rule"], er.expectation_config.meta["action"]
        el, un = counts(er)
        ok = bool(er.success)
        rows.append(
            result_row(
                run_id, batch_id, table, name, er.expectation_config.type, action, ok, el, un, details(er), checked_at
            )
        )
        if not ok:
            msg = failure_message(table, name, er.expectation_config.type, er)
            if action == "fail" or name in fail_on:
                failures.append(msg)
            else:
                log.warning("%s", msg)
    if failures:
        raise QualityFailure("\n".join(failures), rows)
    return rows


def counted_passes(
    table: str,
    df: DataFrame,
    checks: list[tuple[str, str, Any]],
    counted: Mapping[str, tuple[str, str]],
    *,
    run_id: str,
    batch_id: int,
    at: _dt.datetime,
) -> tuple[list[dict], list[tuple[str, str, Any]]]:
    """The dq_results rows of the ``checks`` that pass, from one aggregation of their ``counted`` SQL
    (see :func:`run_checks`), and the checks that find a row unexpected."""
    from pyspark.sql import functions as F

    aggs = []
    for i, (name, _action, _exp) in enumerate(checks):
        rows_sql, unexpected_sql = counted[name]
        aggs += [F.count_if(F.expr(rows_sql)).alias(f"n{i}"), F.count_if(F.expr(unexpected_sql)).alias(f"u{i}")]
    totals = df.agg(*aggs).first()
    passed, failing = [], []
    for i, (name, action, exp) in enumerate(checks):
        if totals[f"u{i}"]:
            failing.append((name, action, exp))
        else:
            etype = exp.expectation_type
            passed.append(result_row(run_id, batch_id, table, name, etype, action, True, totals[f"n{i}"], 0, None, at))
    return passed, failing


def check_mirror(
    spark: SparkSession,
    table: str,
    mirror_df: DataFrame,
    rules: Sequence[Rule],
    run_id: str,
    batch_id: int,
    key_cols: Sequence[str] = (),
) -> list[dict]:
    """Table rules (``unique``, ``row_count_between``) on the mirror after the merge.

    Returns dq_results rows; raises :class:`QualityFailure` for a failing ``fail`` rule."""
    rules = [r for r in rules if r.scope == "mirror"]
    checks = []
    rows = []
    for r in rules:
        absent = [c for c in r.columns if c not in mirror_df.columns]
        if absent:
            msg, row = _missing_column(run_id, batch_id, table, r, absent[0], utc_now())
            rows.append(row)
            if r.action == "fail":
                raise QualityFailure(f"data quality check {r.name!r} failed on table {table}: {msg}", rows)
            continue
        checks.append((r.name, r.action, expectation_for(r, None)))
    try:
        rows += run_checks(table, "mirror", mirror_df, checks, run_id=run_id, batch_id=batch_id, index_columns=key_cols)
    except QualityFailure as exc:
        raise QualityFailure(str(exc), rows + exc.results) from None
    return rows


def _missing_column(
    run_id: str, batch_id: int, table: str, rule: Rule, column: str, checked_at: _dt.datetime
) -> tuple[str, dict]:
    """A rule that names a column the table lacks: the error, and its failed ``dq_results`` row."""
    msg = f"column {column!r} is not a column of {table}"
    return msg, _unrunnable_row(run_id, batch_id, table, rule, msg, checked_at)


def _unrunnable_row(run_id: str, batch_id: int, table: str, rule: Rule, msg: str, checked_at: _dt.datetime) -> dict:
    """The failed ``dq_results`` row of a rule that cannot run on the table, with the reason."""
    return result_row(
        run_id,
        batch_id,
        table,
        rule.name,
        expectation_type(rule),
        rule.action,
        False,
        None,
        None,
        json.dumps({"error": msg}),
        checked_at,
    )
