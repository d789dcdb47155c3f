"""``tables.<name>.where``: only rows that match a Spark SQL boolean are in the mirror (Flink CDC's transform
``filter``, AUTO CDC's ``apply_as_deletes`` the other way round).

The filter is a transform of the batch's changes before keys and the fold (:func:`filtered`), decided on
typed values (each column converted to the mirror's type, as the mirror would hold it):

* INSERT / SNAPSHOT: kept when the row matches, else **skipped**;
* DELETE: skipped only when the deleted row surely did not match (the predicate is false on it); a DELETE
  whose image cannot tell (NULL) is kept, which is harmless where the mirror lacks the row;
* UPDATE: the row as it ends (a partial image over its before-image) matches: kept, and when its
  before-image surely did not match it becomes an INSERT of that row (it **moves in**); it does not match:
  a DELETE of its key (it **moves out**), unless its before-image surely did not match either (then
  skipped). An UPDATE without a before-image (PostgreSQL's default replica identity, Debezium's
  ``before: null``) cannot tell, so one that does not match moves out: the mirror never keeps values the
  source no longer has;
* TRUNCATE: kept.

A skipped change is counted as ``skipped`` (:attr:`pipelines.gold.batch.GoldStats.skipped`), so that
applied + stale + quarantined + skipped is every change of the batch; it never goes to quarantine and
never enters key state. A predicate that is NULL on a row (a NULL column) does not match, as in SQL's
WHERE. It is evaluated under :func:`pipelines.gold.computed.guarded`, with ANSI mode on (the batch's
:data:`~pipelines.gold.computed.ROW_OPTIONS_CONF`): a row whose image it raises on (``CAST('x' AS INT)``,
an overflow) is refused to quarantine with the condition and the values it read (:func:`where_refusals`),
and never fails the batch (every other table would go stale behind it); a before-image it raises on cannot
tell. The expression is checked when a batch first plans the table (:func:`where_problem`): one that does
not parse, is not a boolean or names a column the mirror lacks refuses the table's changes to quarantine
with the reason, and stops nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from pipelines.gold.computed import guarded
from pipelines.gold.lookups import MIRROR
from pipelines.gold.profile import SOURCE_TABLE
from pipelines.quality.sql_rules import SqlRuleError, referenced_columns
from pipelines.sql import EMPTY_MAP, ROW_AFTER_SQL, ROW_IMAGE_SQL, lit, q, typed
from pipelines.values import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: The columns the filter adds while it decides (dropped after).
_CHANGE, _AFTER, _BEFORE = "__lakecdc_change", "__lakecdc_in_after", "__lakecdc_in_before"


def where_problem(spark: SparkSession, source_table: str, where: str, columns: Mapping[str, str | None]) -> str | None:
    """Why ``where`` cannot filter a mirror of ``columns`` (name → source type): it does not parse, is not a
    boolean, or names an unknown column. None: it can."""
    return _checked(spark, source_table, where, _typed_columns(columns))[0]


def _typed_columns(columns: Mapping[str, str | None]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((c, spark_type(t)) for c, t in columns.items()))


@lru_cache(maxsize=256)
def _checked(
    spark: SparkSession, source_table: str, where: str, columns: tuple[tuple[str, str], ...]
) -> tuple[str | None, tuple[str, ...]]:
    """The problem of ``where`` (None: none) and the columns it reads."""
    empty = spark.range(0).selectExpr(*[f"CAST(NULL AS {t}) AS {q(c)}" for c, t in columns])
    try:
        reads = referenced_columns(empty, where)  # parses, names known columns, a deterministic condition on one row
    except SqlRuleError as exc:
        return f"tables.{source_table}.where {where!r:.200}: {str(exc)[:300]}", ()
    return None, reads


def where_refusals(spark: SparkSession, checked: DataFrame, plans: Mapping[str, object]) -> DataFrame:
    """The batch's changes with ``reason`` set on each INSERT, SNAPSHOT and UPDATE of a table with a
    ``where`` whose condition raises on the row as the change leaves it (a cast that cannot read a value,
    an overflow): the row cannot be told in or out, so it goes to quarantine with the condition and the
    values it read, and the batch goes on."""
    from pyspark.sql import functions as F

    tables = [p for p in plans.values() if p.keyed and p.tc and p.tc.where]
    if not tables:
        return checked
    frame = checked
    row = f"coalesce({ROW_AFTER_SQL}, {EMPTY_MAP})"
    for plan in tables:
        where, types = plan.tc.where, plan.shape.columns
        reads = _checked(spark, plan.ident.source_table, where, _typed_columns(types))[1]
        inner = frame.columns
        applies = f"{MIRROR} = {lit(plan.mirror)} AND reason IS NULL AND op IN ('INSERT', 'SNAPSHOT', 'UPDATE')"
        bound = frame.select(
            F.struct(*[F.col(q(c)) for c in inner]).alias(_CHANGE),
            *[F.expr(typed(row, c, t)).alias(c) for c, t in types.items()],
        )
        read = f"to_json(map_filter({row}, (c, v) -> c IN ({', '.join(lit(c) for c in reads) or 'NULL'})))"
        reason = (
            f"concat({lit(f'tables.{plan.ident.source_table}.where {where[:200]!r}')}, "
            f"' cannot be evaluated on this row (', {read}, ')')"
        )
        flagged = bound.select(
            F.col(_CHANGE), F.expr(f"{guarded(where)} IS NULL").alias("__lakecdc_where_fails")
        ).select(f"{_CHANGE}.*", "__lakecdc_where_fails")
        frame = flagged.select(
            *[c for c in inner if c != "reason"],
            F.expr(f"CASE WHEN {applies} AND __lakecdc_where_fails THEN {reason} ELSE reason END").alias("reason"),
        ).select(*inner)
    return frame


def filtered(good: DataFrame, plans: Mapping[str, object]) -> tuple[DataFrame, DataFrame | None]:
    """The changes that can apply (``reason`` NULL) with each ``where`` applied: the changes kept (some
    turned into an INSERT or a DELETE, see the module docstring), and the changes skipped (None: no table
    of the batch has a ``where``)."""
    filters = {p.mirror: (p.tc.where, p.shape.columns) for p in plans.values() if p.keyed and p.tc and p.tc.where}
    if not filters:
        return good, None
    return _filtered(good, filters)


def _filtered(good: DataFrame, filters: Mapping[str, tuple[str, Mapping[str, str]]]) -> tuple[DataFrame, DataFrame]:
    from pyspark.sql import functions as F

    columns = good.columns
    frame = good.withColumn(_AFTER, F.lit(None).cast("boolean")).withColumn(_BEFORE, F.lit(None).cast("boolean"))
    after_row = f"CASE WHEN op = 'DELETE' THEN {ROW_IMAGE_SQL} ELSE {ROW_AFTER_SQL} END"
    before_row = f"CASE WHEN op = 'DELETE' THEN {ROW_IMAGE_SQL} ELSE before END"
    for mirror, (where, types) in filters.items():
        for target, image in ((_AFTER, after_row), (_BEFORE, before_row)):
            inner = frame.columns
            bound = frame.select(
                F.struct(*[F.col(q(c)) for c in inner]).alias(_CHANGE),
                *[F.expr(typed(f"coalesce({image}, {EMPTY_MAP})", c, t)).alias(c) for c, t in types.items()],
            )
            mine = f"{_CHANGE}.{MIRROR} = {lit(mirror)}"
            # an UPDATE without a before-image cannot tell whether the row matched (NULL), nor can an image
            # the condition raises on (guarded: NULL)
            absent = f"{_CHANGE}.op = 'UPDATE' AND {_CHANGE}.before IS NULL" if target == _BEFORE else "false"
            frame = bound.select(
                *[F.col(f"{_CHANGE}.{q(c)}").alias(c) for c in inner if c != target],
                F.expr(
                    f"CASE WHEN {mine} THEN CASE WHEN {absent} THEN CAST(NULL AS boolean) "
                    f"ELSE CASE {guarded(where)} WHEN 'vtrue' THEN true WHEN 'vfalse' THEN false END END "
                    f"ELSE {_CHANGE}.{q(target)} END"
                ).alias(target),
            )
    ruled = f"{MIRROR} IN ({', '.join(lit(m) for m in filters)})"
    was_in = f"NOT coalesce(NOT {_BEFORE}, false)"  # true or cannot tell
    now_in = f"coalesce({_AFTER}, false)"
    decision = F.expr(
        f"CASE WHEN NOT ({ruled}) OR op = 'TRUNCATE' THEN 'keep' "
        f"WHEN op IN ('INSERT', 'SNAPSHOT') THEN CASE WHEN {now_in} THEN 'keep' ELSE 'skip' END "
        f"WHEN op = 'DELETE' THEN CASE WHEN {was_in} THEN 'keep' ELSE 'skip' END "
        f"WHEN {now_in} AND before IS NOT NULL AND NOT {was_in} THEN 'in' "
        f"WHEN {now_in} THEN 'keep' WHEN {was_in} THEN 'out' ELSE 'skip' END"
    )
    # a checkpoint (of the batch's good changes, where a table has a filter): the decision's expressions
    # would otherwise be inlined into every later use of op, after and changed, and the plan explode
    decided = frame.select(*columns, decision.alias("__lakecdc_where")).localCheckpoint()
    kept = (
        decided.where("__lakecdc_where != 'skip'")
        .withColumn("before", F.expr(f"CASE __lakecdc_where WHEN 'out' THEN coalesce(before, {ROW_AFTER_SQL}) "
                                     "ELSE before END"))
        .withColumn("after", F.expr(f"CASE __lakecdc_where WHEN 'in' THEN {ROW_AFTER_SQL} "
                                    "WHEN 'out' THEN CAST(NULL AS map<string,string>) ELSE after END"))
        .withColumn("changed", F.expr("CASE WHEN __lakecdc_where IN ('in', 'out') THEN NULL ELSE changed END"))
        .withColumn("op", F.expr("CASE __lakecdc_where WHEN 'in' THEN 'INSERT' WHEN 'out' THEN 'DELETE' ELSE op END"))
    )  # fmt: skip
    skipped = decided.where("__lakecdc_where = 'skip'").select(*columns)
    return kept.select(*columns), skipped


def skipped_per_table(skipped: DataFrame) -> dict[str, int]:
    """The changes a batch's filters skip, per source table, logged (one Spark job)."""
    counts = {r[SOURCE_TABLE]: r["count"] for r in skipped.groupBy(SOURCE_TABLE).count().collect()}
    for table, n in counts.items():
        log.info("gold: %s: %d changes outside its where: skipped", table, n)
    return counts
