"""``tables.<name>.computed``: columns gold adds to a mirror, each a Spark SQL expression over the row's
typed columns (Paimon's ``--computed_column``, Delta's generated columns), evaluated at apply.

* When a batch plans the table (:func:`computed_types`), each expression is analysed against the mirror's
  columns: its result type is the column's type (added to the mirror if it lacks it). One that does not
  parse or names an unknown column refuses the table's changes to quarantine, naming the table and the
  expression (the run's preflight checks them against configured ``columns`` before any stream starts).
* Each INSERT, SNAPSHOT and UPDATE whose row carries every column an expression reads gets the value in
  its after-image, as canonical text (:func:`with_computed`); a partial UPDATE that does not carry them
  leaves the column as it is.
* Each expression is evaluated under :func:`guarded`: a row it raises on (under ANSI mode, which gold's
  batches run with on every session they use, :data:`ROW_OPTIONS_CONF`: a cast that cannot read its value,
  an overflow, a division by zero) goes to quarantine with the column, the expression and the values read;
  a NULL the expression gives by design (``nullif``, ``try_cast``) is stored. A value that does not fit the
  mirror column (an input widened since the column was typed, and the column cannot widen with it) goes
  to quarantine too. Nothing stops: no row can fail the batch, whatever the session's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipelines.gold.identity import TABLE_FEATURES_PROPERTY
from pipelines.gold.lookups import MIRROR
from pipelines.gold.schema import widens
from pipelines.quality.sql_rules import SqlRuleError, referenced_columns
from pipelines.sql import EMPTY_MAP, ROW_AFTER_SQL, convert_expr, lit, q, typed
from pipelines.values import spark_type

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import TableRef

_SOURCE_TYPES = {"date": "date", "timestamp": "timestamp", "timestamp_ntz": "datetime", "int": "int",
                 "bigint": "bigint", "smallint": "smallint", "tinyint": "tinyint", "double": "double",
                 "float": "float", "boolean": "boolean", "string": "text"}  # fmt: skip
_CHANGE = "__lakecdc_change"


#: The session settings a gold batch runs with, on every session it uses (the stage's and the batch frame's,
#: which differ in a stream's ``foreachBatch``, over Spark Connect and in gold's threads): row options are
#: analysed and evaluated with ANSI mode on (Spark 4's default), so that a cast or arithmetic that cannot
#: compute raises (for :func:`guarded` to catch) instead of giving NULL or wrapping around silently.
ROW_OPTIONS_CONF = {"spark.sql.ansi.enabled": "true"}


def guarded(sql: str) -> str:
    """SQL of the expression ``sql`` evaluated so that no row can fail the batch: text that is NULL where
    evaluating ``sql`` raises on the row, ``'n'`` where it is NULL, else ``'v'`` and its value as text
    (:func:`guarded_value`). ``try_to_binary`` evaluates its argument inside Spark's ``TryEval``, which
    catches any error of the whole expression below it (``try_element_at`` does not: it only tolerates its
    own index). A NULL the expression gives by design is so told from a failure."""
    return f"decode(try_to_binary(coalesce(concat('v', CAST(({sql}) AS STRING)), 'n'), 'utf-8'), 'UTF-8')"


def guarded_value(guard: str) -> str:
    """The value (as text, NULL for NULL or a failure) of a :func:`guarded` expression's SQL ``guard``."""
    return f"CASE WHEN startswith({guard}, 'v') THEN substr({guard}, 2) END"


@contextmanager
def ansi_on(spark: SparkSession) -> Iterator[None]:
    """Analyse expressions with ANSI mode on (a direct call's session; a batch sets it with
    :data:`ROW_OPTIONS_CONF`)."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)


def source_type_of(spark_type_name: str) -> str | None:
    """The source type a computed column of this Spark type is recorded as (None: not supported)."""
    if spark_type_name.startswith("decimal"):
        return spark_type_name
    return _SOURCE_TYPES.get(spark_type_name)


def computed_types(
    spark: SparkSession, source_table: str, computed: Mapping[str, str], columns: Mapping[str, str | None]
) -> tuple[dict[str, tuple[str, tuple[str, ...]]], str | None]:
    """Each computed column's source type and the columns it reads, against the mirror's ``columns``
    (name → source type); or why the table is refused."""
    base = {c: spark_type(t) for c, t in columns.items() if c not in computed}
    frame = spark.range(0).selectExpr(*[f"CAST(NULL AS {t}) AS {q(c)}" for c, t in base.items()])
    out = {}
    for name, text in computed.items():
        where = f"tables.{source_table}.computed.{name} {text!r:.200}"
        try:
            with ansi_on(spark):
                result = frame.selectExpr(f"({text}) AS v").schema["v"].dataType.simpleString()
            reads = referenced_columns(frame, f"({text}) IS NULL")
        except SqlRuleError as exc:
            return {}, f"{where}: {str(exc)[:300]}"
        except Exception as exc:  # noqa: BLE001 - Spark's parse and analysis errors
            return {}, f"{where}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else exc!r}"
        source = source_type_of(result)
        if source is None:
            return {}, f"{where}: its type {result} cannot be a mirror column (a number, text, date, time, boolean)"
        out[name] = (source, reads)
    return out, None


def with_computed(spark: SparkSession, checked: DataFrame, plans: Mapping[str, object]) -> DataFrame:
    """The batch's changes with each computed column's value in the after-image of the changes of its
    mirror, and ``reason`` set where an expression fails on a row or its value does not fit the mirror
    column (see the module docstring)."""
    from pyspark.sql import functions as F

    tables = {p.mirror: p for p in plans.values() if p.shape is not None and p.computed}
    if not tables:
        return checked
    frame = checked
    row = f"coalesce({ROW_AFTER_SQL}, {EMPTY_MAP})"
    for mirror, plan in tables.items():
        for name, (source, reads) in plan.computed.items():
            text = plan.tc.computed[name]
            target = plan.shape.columns.get(name) or source  # the mirror column's type (it may be narrower)
            inner = frame.columns
            carried = " AND ".join(f"map_contains_key({row}, {lit(c)})" for c in reads) or "true"
            applies = (
                f"{MIRROR} = {lit(mirror)} AND reason IS NULL AND op IN ('INSERT', 'SNAPSHOT', 'UPDATE') AND {carried}"
            )
            bound = frame.select(
                F.struct(*[F.col(q(c)) for c in inner]).alias(_CHANGE),
                *[F.expr(typed(row, c, plan.shape.columns.get(c))).alias(c) for c in reads],
            )
            valued = bound.select(F.col(_CHANGE), F.expr(guarded(text)).alias("__lakecdc_guard")).select(
                f"{_CHANGE}.*", F.expr(guarded_value("__lakecdc_guard")).alias("__lakecdc_value"), "__lakecdc_guard"
            )
            read = f"to_json(map_filter({row}, (c, v) -> c IN ({', '.join(lit(c) for c in reads) or 'NULL'})))"
            said = f"concat('computed column ', {lit(name)}, ' = ', {lit(text[:200])}"
            misfit = f"__lakecdc_value IS NOT NULL AND ({convert_expr('__lakecdc_value', target)}) IS NULL"
            reason = (
                f"CASE WHEN __lakecdc_guard IS NULL THEN {said}, ' fails on this row (', {read}, ')') "
                f"WHEN {misfit} THEN {said}, ' gives ', substr(__lakecdc_value, 1, 100), ', which does not fit the "
                f"mirror column of type ', {lit(spark_type(target))}, ' (from ', {read}, ')') END"
            )
            good = f"{applies} AND __lakecdc_guard IS NOT NULL AND NOT ({misfit})"
            frame = valued.select(
                *[c for c in inner if c not in ("after", "col_types", "reason")],
                F.expr(
                    f"CASE WHEN {good} AND __lakecdc_value IS NOT NULL THEN map_concat(map_filter("
                    f"coalesce(after, {EMPTY_MAP}), (c, v) -> c != {lit(name)}), map({lit(name)}, __lakecdc_value)) "
                    f"WHEN {good} THEN map_filter(coalesce(after, {EMPTY_MAP}), (c, v) -> c != {lit(name)}) "
                    "ELSE after END"
                ).alias("after"),
                F.expr(
                    f"CASE WHEN {applies} THEN map_concat(map_filter(coalesce(col_types, {EMPTY_MAP}), (c, v) -> "
                    f"c != {lit(name)}), map({lit(name)}, {lit(source)})) ELSE col_types END"
                ).alias("col_types"),
                F.expr(f"CASE WHEN {applies} AND NOT ({good}) THEN {reason} ELSE reason END").alias("reason"),
            ).select(*inner)
    return frame


def ensure_computed_columns(
    spark: SparkSession, mirror: TableRef, columns: dict[str, str], types: Mapping[str, tuple[str, tuple[str, ...]]]
) -> bool:
    """Add the computed columns the mirror lacks (and to its shape's ``columns``), and widen one whose
    expression's type widened with its inputs (an INT input now BIGINT: ``a * 2`` is BIGINT), as Delta's
    type widening allows (not for a mirror created without it, ``table_features: compatible``: there a
    value that does not fit is quarantined); True when it altered the mirror."""
    missing = {c: src for c, (src, _reads) in types.items() if c not in columns}
    if missing:
        cols = ", ".join(f"{q(c)} {spark_type(src)}" for c, src in missing.items())
        spark.sql(f"ALTER TABLE {mirror.sql} ADD COLUMNS ({cols})")
        columns.update(missing)
    wider = {
        c: src
        for c, (src, _reads) in types.items()
        if c in columns and c not in missing and widens(spark_type(columns[c]).lower(), spark_type(src).lower())
    }
    if wider and _type_widening(spark, mirror):
        spark.sql(f"ALTER TABLE {mirror.sql} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        for c, src in wider.items():
            spark.sql(f"ALTER TABLE {mirror.sql} ALTER COLUMN {q(c)} TYPE {spark_type(src)}")
        columns.update(wider)
        return True
    return bool(missing)


def _type_widening(spark: SparkSession, mirror: TableRef) -> bool:
    """The mirror may widen a column in place (created with ``table_features: full``, the default)."""
    props = spark.sql(f"SHOW TBLPROPERTIES {mirror.sql}").collect()
    return {r["key"]: r["value"] for r in props}.get(TABLE_FEATURES_PROPERTY, "full") != "compatible"


class PartitionBy(tuple):
    """A new mirror's partition columns (``tables.<name>.partition_by``), passed where clustering columns go:
    the mirror is created ``PARTITIONED BY`` them (Delta cannot partition an existing table)."""


def creation_columns(
    spark: SparkSession,
    source_table: str,
    computed: Mapping[str, str],
    configured: Mapping[str, str],
    sightings: Mapping[str, object],
) -> tuple[dict[str, str], str | None]:
    """The configured columns a new mirror is created with, its computed ones added (typed against the
    columns the batch's messages carry), so that a partition column may be computed; or why not."""
    seen = {c: s.newest or min(s.types) for c, s in sightings.items() if s.types}
    types, problem = computed_types(spark, source_table, computed, {**seen, **configured})
    return {**configured, **{c: src for c, (src, _reads) in types.items()}}, problem
