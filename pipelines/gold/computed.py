"""``tables.<name>.computed``: columns gold adds to a mirror, each a Spark SQL expression over the row's
typed columns (Paimon's ``--computed_column``, Delta's generated columns), evaluated at apply.

* When a batch plans the table (:func:`computed_types`), each expression is analysed against the mirror's
  columns: its result type is the column's type (added to the mirror if it lacks it). One that does not
  parse or names an unknown column refuses the table's changes to quarantine, naming the table and the
  expression (the run's preflight checks them against configured ``columns`` before any stream starts).
* Each INSERT, SNAPSHOT and UPDATE whose row carries every column an expression reads gets the value in
  its after-image, as canonical text (:func:`with_computed`); a partial UPDATE that does not carry them
  leaves the column as it is.
* The expressions are analysed with ANSI mode off, so a value they cannot compute is NULL instead of an
  error; a NULL result where every column the expression reads is non-NULL is taken as a failure: the
  change goes to quarantine with the column, the expression and the values read. Nothing stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipelines.gold.lookups import MIRROR
from pipelines.quality.sql_rules import SqlRuleError, referenced_columns
from pipelines.sql import EMPTY_MAP, ROW_AFTER_SQL, lit, q, typed
from pipelines.values import spark_type

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

    from pipelines.warehouse import TableRef

_SOURCE_TYPES = {"date": "date", "timestamp": "timestamp", "timestamp_ntz": "datetime", "int": "int",
                 "bigint": "bigint", "smallint": "smallint", "tinyint": "tinyint", "double": "double",
                 "float": "float", "boolean": "boolean", "string": "text"}  # fmt: skip
_CHANGE = "__lakecdc_change"


@contextmanager
def ansi_off(spark: SparkSession) -> Iterator[None]:
    """Analyse expressions with ANSI mode off (their casts and arithmetic keep that mode: NULL, no error)."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
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
            with ansi_off(spark):
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
    mirror, and ``reason`` set where an expression fails on a row (see the module docstring)."""
    from pyspark.sql import functions as F

    tables = {p.mirror: p for p in plans.values() if p.shape is not None and p.computed}
    if not tables:
        return checked
    frame = checked
    row = f"coalesce({ROW_AFTER_SQL}, {EMPTY_MAP})"
    for mirror, plan in tables.items():
        for name, (source, reads) in plan.computed.items():
            text = plan.tc.computed[name]
            inner = frame.columns
            carried = " AND ".join(f"map_contains_key({row}, {lit(c)})" for c in reads) or "true"
            nulls = " OR ".join(f"({row})[{lit(c)}] IS NULL" for c in reads) or "false"
            applies = (
                f"{MIRROR} = {lit(mirror)} AND reason IS NULL AND op IN ('INSERT', 'SNAPSHOT', 'UPDATE') AND {carried}"
            )
            with ansi_off(spark):
                bound = frame.select(
                    F.struct(*[F.col(q(c)) for c in inner]).alias(_CHANGE),
                    *[F.expr(typed(row, c, plan.shape.columns.get(c))).alias(c) for c in reads],
                )
                valued = bound.select(
                    F.col(_CHANGE), F.expr(f"CAST(({text}) AS STRING)").alias("__lakecdc_value")
                ).select(f"{_CHANGE}.*", "__lakecdc_value")
            failed = f"{applies} AND __lakecdc_value IS NULL AND NOT ({nulls})"
            reason = (
                f"concat('computed column ', {lit(name)}, ' = ', {lit(text[:200])}, ' fails on this row (', "
                f"to_json(map_filter({row}, (c, v) -> c IN ({', '.join(lit(c) for c in reads)}))), ')')"
            )
            frame = valued.select(
                *[c for c in inner if c not in ("after", "col_types", "reason")],
                F.expr(
                    f"CASE WHEN {applies} AND __lakecdc_value IS NOT NULL THEN map_concat(map_filter("
                    f"coalesce(after, {EMPTY_MAP}), (c, v) -> c != {lit(name)}), map({lit(name)}, __lakecdc_value)) "
                    "ELSE after END"
                ).alias("after"),
                F.expr(
                    f"CASE WHEN {applies} THEN map_concat(map_filter(coalesce(col_types, {EMPTY_MAP}), (c, v) -> "
                    f"c != {lit(name)}), map({lit(name)}, {lit(source)})) ELSE col_types END"
                ).alias("col_types"),
                F.expr(f"CASE WHEN {failed} THEN {reason} ELSE reason END").alias("reason"),
            ).select(*inner)
    return frame


def ensure_computed_columns(
    spark: SparkSession, mirror: TableRef, columns: dict[str, str], types: Mapping[str, tuple[str, tuple[str, ...]]]
) -> bool:
    """Add the computed columns the mirror lacks (and to its shape's ``columns``); True when it altered it."""
    missing = {c: src for c, (src, _reads) in types.items() if c not in columns}
    if missing:
        cols = ", ".join(f"{q(c)} {spark_type(src)}" for c, src in missing.items())
        spark.sql(f"ALTER TABLE {mirror.sql} ADD COLUMNS ({cols})")
        columns.update(missing)
    return bool(missing)


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
