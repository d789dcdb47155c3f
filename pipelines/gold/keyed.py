"""Apply, for a table with a key (or a vendor row id): one MERGE per mirror, one per tombstones.

The steps of :func:`apply_keyed`, each a function here:

1. :func:`key_per_change` – the key ``k`` each change writes (typed as the mirror types it), and
   ``old_k``, the key an UPDATE's before-image names;
2. :func:`with_moved_keys` – an UPDATE that changes the key also deletes the old key, just before
   it (:func:`~pipelines.gold.order.delete_first`);
3. :func:`mark_stale` – a change older than what the mirror or its tombstones hold for its key is
   stale (an equal sequence re-applies: that is what makes a retried batch idempotent);
4. :func:`count_changes` – applied and stale, into the batch's stats, and what the MERGEs will
   touch, from one aggregation;
5. the SCD type 2 history, where configured (:func:`~pipelines.gold.history.merge_history`);
6. :func:`merge_keyed` – the fold per key (:func:`~pipelines.gold.fold.fold_per_key`), computed once
   into a checkpoint that both MERGEs read, MERGEd into the mirror (live keys) and the tombstones
   (deleted keys). A MERGE that would change nothing is
   not run (no Spark jobs, no commit): none into the tombstones when no fresh change deletes a key
   (a DELETE, or the old key of a key change) or finds one tombstoned, none at all when every
   change is stale. When fresh changes delete keys but none finds a tombstone, every tombstone
   the batch writes is new: they are appended, which costs one job, not a MERGE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.delta_writes import checkpointed, checkpointed_merge_settings
from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.fold import VALUES, WRITTEN, data_columns, fold_per_key, named_struct, stored_key, struct_field
from pipelines.gold.history import merge_history
from pipelines.gold.order import ORD, delete_first
from pipelines.gold.schema import MirrorShape
from pipelines.layout import LINEAGE_COLUMNS
from pipelines.sql import ROW_IMAGE_SQL, lit, q, typed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pipelines.warehouse import TableRef


def apply_keyed(
    ctx: BatchContext, changes: DataFrame, shape: MirrorShape, key: tuple[str, ...], history: TableRef | None = None
) -> None:
    """Key, drop stale changes, fold per key, MERGE the mirror and its tombstones (and the SCD type 2
    history, where configured)."""
    from pyspark.sql import functions as F

    rows = mark_stale(ctx, with_moved_keys(key_per_change(changes, key, shape)), key).persist()
    try:
        touched = count_changes(ctx, rows)
        if not touched.fresh:
            return  # every change is stale: no MERGE would change anything
        fresh = rows.where(~F.col("stale"))
        if history is not None:
            merge_history(ctx, fresh, key, shape, history)
        merge_keyed(ctx, fold_per_key(fresh, key, shape), key, shape, touched)
    finally:
        rows.unpersist()


@dataclass(frozen=True)
class Touched:
    """What the fresh changes of a batch will touch (from :func:`count_changes`)."""

    fresh: int  # fresh rows (the deletes of moved keys included)
    tombstones: bool  # the tombstones change: a fresh DELETE, or a fresh change of a tombstoned key
    tombstoned: bool = True  # a fresh change finds its key tombstoned (else every tombstone written is new)


def key_per_change(changes: DataFrame, key: tuple[str, ...], shape: MirrorShape) -> DataFrame:
    """Each change with ``k``, the key it writes (an UPDATE: its images overlaid, the after-image
    winning), and ``old_k``, the key its before-image names (an UPDATE that carries one)."""
    from pyspark.sql import functions as F

    def key_struct(image_sql: str) -> str:
        return named_struct((k, typed(image_sql, k, shape.columns.get(k))) for k in key)

    rows = changes.withColumn(
        "k",
        F.expr(
            key_struct(
                f"CASE WHEN op = 'UPDATE' THEN map_concat(coalesce(before, map()), coalesce(after, map())) "
                f"ELSE {ROW_IMAGE_SQL} END"
            )
        ),
    )
    has_old = " AND ".join(f"map_contains_key(coalesce(before, map()), {lit(k)})" for k in key)
    return rows.withColumn("old_k", F.expr(f"CASE WHEN op = 'UPDATE' AND {has_old} THEN {key_struct('before')} END"))


def with_moved_keys(rows: DataFrame) -> DataFrame:
    """Add the DELETE of the old key of every change that moves a row to a new key (``moved_from``)."""
    from pyspark.sql import functions as F

    rows = rows.withColumn("moved_from", F.lit(False))
    moved = (
        rows.where("old_k IS NOT NULL AND NOT (old_k <=> k)")
        .withColumn("k", F.col("old_k"))
        .withColumn("op", F.lit("DELETE"))
        .withColumn("moved_from", F.lit(True))
        .withColumn(ORD, delete_first())
    )
    return rows.unionByName(moved)


def mark_stale(ctx: BatchContext, rows: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """``stale`` also where the change is older than the mirror's row or the tombstone of its key;
    ``tombstoned`` where its key has a tombstone."""
    from pyspark.sql import functions as F

    key_sql = f"{stored_key(key)} AS k"
    held = (
        ctx.ident.ref.read(ctx.spark)
        .selectExpr(key_sql, "_seq AS m_seq", "false AS t")
        .unionByName(ctx.ident.tombstones.read(ctx.spark).selectExpr(key_sql, "_seq AS m_seq", "true AS t"))
        .groupBy("k")
        .agg(F.max("m_seq").alias("m_seq"), F.max("t").alias("tombstoned"))
    )
    return (
        rows.join(held, on="k", how="left")
        .withColumn("stale", F.expr("stale OR (m_seq IS NOT NULL AND seq < m_seq)"))
        .withColumn("tombstoned", F.coalesce("tombstoned", F.lit(False)))
        .drop("m_seq")
    )


def count_changes(ctx: BatchContext, rows: DataFrame) -> Touched:
    """Changes applied and stale (the deletes of moved keys are not changes of their own), and what
    the MERGEs will touch: one aggregation."""
    from pyspark.sql import functions as F

    own, fresh = ~F.col("moved_from"), ~F.col("stale")
    counts = rows.agg(
        F.count_if(own & F.col("stale")).alias("stale"),
        F.count_if(own & fresh).alias("applied"),
        F.count_if(fresh).alias("fresh"),
        F.count_if(fresh & ((F.col("op") == "DELETE") | F.col("tombstoned"))).alias("tombstones"),
        F.count_if(fresh & F.col("tombstoned")).alias("tombstoned"),
    ).first()
    ctx.stats.stale += counts["stale"] or 0
    ctx.stats.applied += counts["applied"] or 0
    return Touched(
        fresh=counts["fresh"] or 0, tombstones=bool(counts["tombstones"]), tombstoned=bool(counts["tombstoned"])
    )


def merge_keyed(
    ctx: BatchContext, folded: DataFrame, key: tuple[str, ...], shape: MirrorShape, touched: Touched | None = None
) -> None:
    """One MERGE into the mirror (live keys), one into the tombstones (deleted keys). ``touched`` (default:
    anything may happen) skips the tombstones when the batch deletes no key and finds none tombstoned, and
    appends them when it finds none tombstoned: then no key of the batch has a tombstone to update or remove.

    The fold is computed once, into a checkpoint both MERGEs read: Delta would otherwise copy the
    source of each MERGE before it reads it twice (:func:`~pipelines.delta_writes.checkpointed_merge_settings`).
    """
    spark, ident = ctx.spark, ctx.ident
    data_cols = data_columns(shape, key)
    on = " AND ".join(f"t.{q(k)} <=> s.k.{q(k)}" for k in key)
    values = {c: struct_field(f"s.{VALUES}", c) for c in data_cols}
    update_set = {
        q(c): f"CASE WHEN {struct_field(f's.{WRITTEN}', c)} THEN {values[c]} ELSE t.{q(c)} END" for c in data_cols
    }
    update_set.update({q(n): f"s.{n}" for n in LINEAGE_COLUMNS})
    insert_values = {q(k): f"s.k.{q(k)}" for k in key}
    insert_values.update({q(c): values[c] for c in data_cols})
    insert_values.update({q(n): f"s.{n}" for n in LINEAGE_COLUMNS})
    tomb_values = {q(k): f"s.k.{q(k)}" for k in key}
    tomb_values.update({"_seq": "s._seq", "_queue_pos": "s._queue_pos", "_event_time": "s._event_time"})
    with checkpointed(folded) as source:
        with ctx.txn(Step.MIRROR, checkpointed_merge_settings(spark, ident.ref)):
            (
                ident.ref.delta(spark)
                .alias("t")
                .merge(source.alias("s"), on)
                .whenMatchedDelete(condition="NOT s.live")
                .whenMatchedUpdate(condition="s.live", set=update_set)
                .whenNotMatchedInsert(condition="s.live", values=insert_values)
                .execute()
            )
        if touched is not None and not touched.tombstones:
            return
        if touched is not None and not touched.tombstoned:
            _append_tombstones(ctx, source, key)
            return
        with ctx.txn(Step.TOMBSTONES, checkpointed_merge_settings(spark, ident.tombstones)):
            (
                ident.tombstones.delta(spark)
                .alias("t")
                .merge(source.alias("s"), on)
                .whenMatchedDelete(condition="s.live")
                .whenMatchedUpdate(condition="NOT s.live", set=tomb_values)
                .whenNotMatchedInsert(condition="NOT s.live", values=tomb_values)
                .execute()
            )


def _append_tombstones(ctx: BatchContext, folded: DataFrame, key: tuple[str, ...]) -> None:
    """The tombstones of the keys the batch deletes, appended: what the tombstones MERGE does when no key
    of the batch has a tombstone yet (its only clause that fires is the insert). Each column is cast to
    the table's own type, so an append never widens it; the MERGE's stamp makes a retry skip either write."""
    from pyspark.sql import functions as F

    table = ctx.ident.tombstones
    types = {f.name: f.dataType for f in table.read(ctx.spark).schema.fields}
    sources = {k: f"k.{q(k)}" for k in key} | {c: c for c in ("_seq", "_queue_pos", "_event_time")}
    deleted = folded.where("NOT live").select(*[F.expr(sql).cast(types[c]).alias(c) for c, sql in sources.items()])
    ctx.append(deleted, table, Step.TOMBSTONES)
