"""Apply, for a table with no key and no vendor row id: the mirror keeps the source's multiset.

Each mirror row carries ``_row_id``, the id of the change that inserted it; the ids of the changes
applied are kept in ``gold/_applied/<mirror>``, so a redelivered copy of a message applies once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.order import BY_ORD, ORD, delete_first
from pipelines.gold.schema import MirrorShape
from pipelines.layout import LINEAGE_COLUMNS, LINEAGE_DDL, LINEAGE_SOURCES, ROW_ID_COLUMN
from pipelines.sql import EMPTY_MAP, ROW_AFTER_SQL, q, typed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Joins the parts of a change id (the hashes stored in ``_row_id`` and ``_applied`` depend on it).
CHANGE_ID_SEPARATOR = "\u0001"


def apply_multiset(ctx: BatchContext, changes: DataFrame, shape: MirrorShape) -> None:
    """INSERT/SNAPSHOT add a row, DELETE removes ONE row equal to its before-image (every column; one
    the image lacks is NULL), UPDATE does both. Events apply in ``ord`` order per distinct row value,
    so a delete only takes a copy that exists at that point.

    A change's id is a hash of its table, sequence, op, place in its message and images, so a
    redelivered copy of a message is applied once, while two equal rows of one message (a Canal
    ``data`` array) stay two. Two equal changes with the same sequence in different messages are
    one change: a format whose full-load rows carry no sequence delivers two identical keyless rows
    of its full load as one.
    """
    from pyspark.sql import functions as F

    spark, ident, stats = ctx.spark, ctx.ident, ctx.stats
    mirror = ident.ref.read(spark)
    mirror_types = {f.name: f.dataType.simpleString() for f in mirror.schema.fields}
    columns = [c for c in shape.columns if c in mirror_types]

    def typed_row(image_sql: str) -> list[Column]:
        return [F.expr(f"CAST({typed(image_sql, c, shape.columns[c])} AS {mirror_types[c]})").alias(c) for c in columns]

    def row_hash(cols: list[Column]) -> Column:
        return F.sha2(F.to_json(F.struct(*cols)), 256)

    applied = ctx.wh.applied_changes(ident.name_parts or ident.mirror_name)
    if not applied.exists(spark):
        spark.sql(f"CREATE TABLE IF NOT EXISTS {applied.sql} (change_id STRING, _seq STRING) USING DELTA")
    image_text = "to_json(array_sort(map_entries(coalesce({0}, " + EMPTY_MAP + "))))"
    # the source's name as it was before identities (db.table): change ids stay those already applied
    change_id = F.sha2(
        F.concat_ws(
            CHANGE_ID_SEPARATOR,
            F.concat_ws(".", "db", "table"),
            "seq",
            "op",
            F.col("change_index").cast("string"),
            F.expr(image_text.format("before")),
            F.expr(image_text.format("after")),
        ),
        256,
    )
    with_ids = changes.withColumn("change_id", change_id)
    fresh = (
        with_ids.where("NOT stale")
        .dropDuplicates(["change_id"])
        .join(applied.read(spark).select("change_id"), "change_id", "left_anti")
        .persist()
    )
    try:
        stats.applied = fresh.count()
        stats.stale += with_ids.count() - stats.applied  # redelivered copies, and changes before a truncate
        lineage = [F.col(source).alias(name) for name, source in LINEAGE_SOURCES]
        # every change as events on distinct row values (``h``): a row added, a row removed
        added = (
            fresh.where("op IN ('INSERT', 'SNAPSHOT', 'UPDATE') AND after IS NOT NULL")
            .select(
                F.col("change_id").alias(ROW_ID_COLUMN),
                F.col(ORD),
                F.struct(*typed_row(ROW_AFTER_SQL)).alias("row"),
                *lineage,
            )
            .withColumn("h", row_hash([F.col(f"row.{q(c)}") for c in columns]))
        )
        removed = fresh.where("op IN ('DELETE', 'UPDATE') AND before IS NOT NULL").select(
            delete_first().alias(ORD), row_hash(typed_row("before")).alias("h")
        )
        events = added.select("h", ORD, F.lit(True).alias("plus"), ROW_ID_COLUMN).unionByName(
            removed.select("h", ORD, F.lit(False).alias("plus"), F.lit(None).cast("string").alias(ROW_ID_COLUMN))
        )
        # per row value: the ids the mirror holds, then the events in order
        held = (
            mirror.select(row_hash([F.col(q(c)) for c in columns]).alias("h"), ROW_ID_COLUMN)
            .join(events.select("h").distinct(), "h", "left_semi")
            .groupBy("h")
            .agg(F.array_sort(F.collect_list(ROW_ID_COLUMN)).alias("held"))
        )
        outcome = (
            events.groupBy("h")
            .agg(F.collect_list(F.struct(ORD, "plus", ROW_ID_COLUMN)).alias("evs"))
            .join(held, "h", "left")
            .selectExpr(
                "coalesce(held, cast(array() AS array<string>)) AS held",
                f"""aggregate(
                       array_sort(evs, {BY_ORD}),
                       coalesce(held, cast(array() AS array<string>)),
                       (ids, e) -> CASE WHEN e.plus THEN concat(ids, array(e.{ROW_ID_COLUMN}))
                                        WHEN size(ids) > 0 THEN slice(ids, 2, size(ids) - 1)
                                        ELSE ids END) AS kept""",
            )
        )
        gone_ids = outcome.select(F.explode(F.array_except("held", "kept")).alias(ROW_ID_COLUMN))
        kept_ids = outcome.select(F.explode("kept").alias(ROW_ID_COLUMN))
        inserts = added.join(kept_ids, ROW_ID_COLUMN, "left_semi").select(
            ROW_ID_COLUMN,
            *[F.col(f"row.{q(c)}").alias(c) for c in columns],
            *LINEAGE_COLUMNS,
            F.lit("insert").alias("_action"),
        )
        deletes = gone_ids.select(
            ROW_ID_COLUMN,
            *[F.lit(None).cast(mirror_types[c]).alias(c) for c in columns],
            *[F.lit(None).cast(t).alias(n) for n, t in LINEAGE_DDL],
            F.lit("delete").alias("_action"),
        )
        values = {q(c): f"s.{q(c)}" for c in (*columns, *LINEAGE_COLUMNS, ROW_ID_COLUMN)}
        with ctx.txn(Step.MIRROR):
            (
                ident.ref.delta(spark)
                .alias("t")
                .merge(inserts.unionByName(deletes).alias("s"), f"t.{ROW_ID_COLUMN} = s.{ROW_ID_COLUMN}")
                .whenMatchedDelete(condition="s._action = 'delete'")
                .whenNotMatchedInsert(condition="s._action = 'insert'", values=values)
                .execute()
            )
        ctx.append(fresh.select("change_id", F.col("seq").alias("_seq")), applied, Step.APPLIED)
    finally:
        fresh.unpersist()
