"""Apply, for a table with no key and no vendor row id: the mirror keeps the source's multiset.

Each mirror row carries ``_row_id``, the id of the change that inserted it; the ids of the changes
applied are kept in ``gold/_applied/<mirror>``, so a redelivered copy of a message applies once.

The steps of :func:`apply_multiset`, each a function here:

1. :func:`applied_table` – the ids of the changes already applied (the table made if missing);
2. :func:`with_change_ids` – each change's id, a hash of its table, sequence, op, place and images;
3. :func:`fresh_changes` – the changes not stale and not applied before, one per id;
4. :func:`count_changes` – applied and stale, into the batch's stats;
5. :func:`added_rows`, :func:`removed_rows`, :func:`row_events` – every change as events on
   distinct row values: a row added (its id the change's), a row removed (its before-image);
6. :func:`surviving_row_ids` – per row value, the ids the mirror holds and those it keeps once the
   events apply in ``ord`` order;
7. :func:`row_writes` and :func:`merge_rows` – the rows to insert and the ids to delete, computed
   once into a checkpoint and MERGEd into the mirror;
8. :func:`record_applied` – the ids of the changes applied, appended to the applied table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.delta_dml import DeltaMerge
from pipelines.delta_writes import checkpointed, checkpointed_merge_settings
from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.order import BY_ORD, ORD, delete_first
from pipelines.gold.schema import MirrorShape
from pipelines.layout import LINEAGE_COLUMNS, LINEAGE_DDL, LINEAGE_SOURCES, ROW_ID_COLUMN
from pipelines.sql import EMPTY_MAP, ROW_AFTER_SQL, q, typed

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from pipelines.warehouse import TableRef

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
    mirror = ctx.ident.ref.read(ctx.spark)
    types = mirror_types(mirror, shape)
    applied = applied_table(ctx)
    with_ids = with_change_ids(changes)
    fresh = fresh_changes(ctx, with_ids, applied).persist()
    try:
        if not count_changes(ctx, with_ids, fresh):
            return  # nothing new: no MERGE, no commit
        added = added_rows(fresh, types, shape)
        events = row_events(added, removed_rows(fresh, types, shape))
        merge_rows(ctx, row_writes(added, surviving_row_ids(mirror, events, types), types), types)
        record_applied(ctx, fresh, applied)
    finally:
        fresh.unpersist()


def mirror_types(mirror: DataFrame, shape: MirrorShape) -> dict[str, str]:
    """The shape's columns the mirror has, in the shape's order, each with the mirror's Spark type."""
    held = {f.name: f.dataType.simpleString() for f in mirror.schema.fields}
    return {c: held[c] for c in shape.columns if c in held}


def typed_row(image_sql: str, types: dict[str, str], shape: MirrorShape) -> list[Column]:
    """An image's values as the mirror's columns, each cast to the mirror's type."""
    from pyspark.sql import functions as F

    return [F.expr(f"CAST({typed(image_sql, c, shape.columns[c])} AS {t})").alias(c) for c, t in types.items()]


def row_hash(cols: list[Column]) -> Column:
    """The hash that names a distinct row value (``h``)."""
    from pyspark.sql import functions as F

    return F.sha2(F.to_json(F.struct(*cols)), 256)


def applied_table(ctx: BatchContext) -> TableRef:
    """``gold/_applied/<mirror>``: the ids of the changes applied to this mirror (created if missing)."""
    ident = ctx.ident
    applied = ctx.wh.applied_changes(ident.name_parts or ident.mirror_name, target=ident.target)
    if not applied.exists(ctx.spark):
        ctx.spark.sql(f"CREATE TABLE IF NOT EXISTS {applied.sql} (change_id STRING, _seq STRING) USING DELTA")
    return applied


def with_change_ids(changes: DataFrame) -> DataFrame:
    """Each change with ``change_id``: a hash of its table, sequence, op, place and images."""
    from pyspark.sql import functions as F

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
    return changes.withColumn("change_id", change_id)


def fresh_changes(ctx: BatchContext, with_ids: DataFrame, applied: TableRef) -> DataFrame:
    """The changes to apply: not stale, one per id, and not applied in an earlier batch."""
    return (
        with_ids.where("NOT stale")
        .dropDuplicates(["change_id"])
        .join(applied.read(ctx.spark).select("change_id"), "change_id", "left_anti")
    )


def count_changes(ctx: BatchContext, with_ids: DataFrame, fresh: DataFrame) -> int:
    """Changes applied, and stale (redelivered copies, changes older than a truncate): the applied returned."""
    applied = fresh.count()
    ctx.stats.applied += applied
    ctx.stats.stale += with_ids.count() - applied
    return applied


def added_rows(fresh: DataFrame, types: dict[str, str], shape: MirrorShape) -> DataFrame:
    """The rows INSERT, SNAPSHOT and UPDATE add: ``_row_id`` (the change's id), ``ord``, ``row``,
    the lineage, and ``h``."""
    from pyspark.sql import functions as F

    lineage = [F.col(source).alias(name) for name, source in LINEAGE_SOURCES]
    return (
        fresh.where("op IN ('INSERT', 'SNAPSHOT', 'UPDATE') AND after IS NOT NULL")
        .select(
            F.col("change_id").alias(ROW_ID_COLUMN),
            F.col(ORD),
            F.struct(*typed_row(ROW_AFTER_SQL, types, shape)).alias("row"),
            *lineage,
        )
        .withColumn("h", row_hash([F.col(f"row.{q(c)}") for c in types]))
    )


def removed_rows(fresh: DataFrame, types: dict[str, str], shape: MirrorShape) -> DataFrame:
    """The rows DELETE and UPDATE remove, by value (``h`` of the before-image), just before the change."""
    return fresh.where("op IN ('DELETE', 'UPDATE') AND before IS NOT NULL").select(
        delete_first().alias(ORD), row_hash(typed_row("before", types, shape)).alias("h")
    )


def row_events(added: DataFrame, removed: DataFrame) -> DataFrame:
    """Every change as events on distinct row values (``h``): ``plus`` a row added, else one removed."""
    from pyspark.sql import functions as F

    return added.select("h", ORD, F.lit(True).alias("plus"), ROW_ID_COLUMN).unionByName(
        removed.select("h", ORD, F.lit(False).alias("plus"), F.lit(None).cast("string").alias(ROW_ID_COLUMN))
    )


def surviving_row_ids(mirror: DataFrame, events: DataFrame, types: dict[str, str]) -> DataFrame:
    """Per row value: ``held``, the ids the mirror holds, and ``kept``, those left once the events apply
    in order (an added row appends its id, a removed one drops the first id, if any)."""
    from pyspark.sql import functions as F

    held = (
        mirror.select(row_hash([F.col(q(c)) for c in types]).alias("h"), ROW_ID_COLUMN)
        .join(events.select("h").distinct(), "h", "left_semi")
        .groupBy("h")
        .agg(F.array_sort(F.collect_list(ROW_ID_COLUMN)).alias("held"))
    )
    return (
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


def row_writes(added: DataFrame, outcome: DataFrame, types: dict[str, str]) -> DataFrame:
    """The added rows kept (``_action`` insert) and the ids held but not kept (``_action`` delete)."""
    from pyspark.sql import functions as F

    gone_ids = outcome.select(F.explode(F.array_except("held", "kept")).alias(ROW_ID_COLUMN))
    kept_ids = outcome.select(F.explode("kept").alias(ROW_ID_COLUMN))
    inserts = added.join(kept_ids, ROW_ID_COLUMN, "left_semi").select(
        ROW_ID_COLUMN,
        *[F.col(f"row.{q(c)}").alias(c) for c in types],
        *LINEAGE_COLUMNS,
        F.lit("insert").alias("_action"),
    )
    deletes = gone_ids.select(
        ROW_ID_COLUMN,
        *[F.lit(None).cast(t).alias(c) for c, t in types.items()],
        *[F.lit(None).cast(t).alias(n) for n, t in LINEAGE_DDL],
        F.lit("delete").alias("_action"),
    )
    return inserts.unionByName(deletes)


def merge_rows(ctx: BatchContext, writes: DataFrame, types: dict[str, str]) -> None:
    """One MERGE into the mirror by ``_row_id``: delete the ids gone, insert the rows kept. The writes
    (which read the mirror) are computed once, into a checkpoint the MERGE reads twice
    (:func:`~pipelines.delta_writes.checkpointed_merge_settings`)."""
    values = {q(c): f"s.{q(c)}" for c in (*types, *LINEAGE_COLUMNS, ROW_ID_COLUMN)}
    with checkpointed(writes) as source, ctx.txn(Step.MIRROR, checkpointed_merge_settings(ctx.spark, ctx.ident.ref)):
        merge = DeltaMerge(ctx.ident.ref, source, f"t.{ROW_ID_COLUMN} = s.{ROW_ID_COLUMN}")
        merge.when_matched_delete("s._action = 'delete'").when_not_matched_insert("s._action = 'insert'", values)
        merge.execute(ctx.spark)


def record_applied(ctx: BatchContext, fresh: DataFrame, applied: TableRef) -> None:
    """The ids of the changes applied (with their sequence), so a redelivered copy is skipped."""
    from pyspark.sql import functions as F

    ctx.append(fresh.select("change_id", F.col("seq").alias("_seq")), applied, Step.APPLIED)
