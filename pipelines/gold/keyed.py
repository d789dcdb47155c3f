"""Apply, for a mirror with a key: one write, with every decision already made by the batch pass.

The batch pass (:mod:`pipelines.gold.decide`) has decided staleness, quarantine and the checks, and folded
the mirror's changes per key (:func:`~pipelines.gold.fold.fold_per_key`: its pending changes and this
batch's, in order). What stays per mirror is its write:

* :func:`merge_source` – each folded key as the mirror's typed columns: the key, ``vals`` (each data
  column's value) and ``written`` (whether the changes write that column: a partial image writes only its
  own), and the lineage of the last change;
* :func:`apply_keyed` – an **append** when no key of the changes is in the mirror (key state says so: a new
  mirror, a full load, inserts of new keys), else one **MERGE** (live keys updated or inserted, deleted keys
  removed), stamped with Delta ``txnAppId``/``txnVersion`` so that a retried batch merges once. An append
  is idempotent another way: a batch that may be a retry (the first of a stream) looks for the append's
  commit marker first (:func:`pipelines.delta_writes.append_once`).

Its result (:class:`KeyWrites`) is the bookkeeping of the built-in key checks: the rows Delta reports
inserted, updated and deleted against what key state expected. A mirror holding a key twice, or a row
written behind gold's back, shows as a difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.delta_dml import DeltaMerge
from pipelines.delta_writes import append_once, checkpointed_merge_settings
from pipelines.gold.batch import BatchContext, Step
from pipelines.gold.fold import VALUES, WRITTEN, data_columns, lineage_sql, named_struct, state_structs, struct_field
from pipelines.gold.schema import MirrorShape
from pipelines.gold.soft import soft_clauses
from pipelines.layout import LINEAGE_COLUMNS
from pipelines.sql import q, typed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row


@dataclass
class KeyWrites:
    """What one mirror's write did to its keys, against what key state expected."""

    expected_inserted: int = 0
    expected_updated: int = 0
    expected_deleted: int = 0
    null_keys: int = 0
    inserted: int | None = None  # as Delta reports (None: the write was a retry Delta skipped)
    updated: int | None = None
    deleted: int | None = None
    appended: bool = False
    soft: bool = False  # a ``deletes: soft`` mirror: its DELETEs update rows (see :attr:`differences`)

    @property
    def keys(self) -> int:
        return self.expected_inserted + self.expected_updated + self.expected_deleted

    @property
    def differences(self) -> int | None:
        if self.inserted is None:
            return None
        if self.soft:  # a matched DELETE updates, a key inserted and deleted in one batch inserts: only
            return self.deleted  # a row Delta removed is a difference (a soft mirror never removes one)
        return (
            abs(self.inserted - self.expected_inserted)
            + abs(self.updated - self.expected_updated)
            + abs(self.deleted - self.expected_deleted)
        )


def typed_key(key: tuple[str, ...], shape: MirrorShape, image: str = "kimg") -> str:
    """SQL of the key struct ``k`` of a key's text image, typed as the mirror types it."""
    return named_struct((k, typed(image, k, shape.columns.get(k))) for k in key)


def merge_source(folded: DataFrame, key: tuple[str, ...], shape: MirrorShape) -> DataFrame:
    """The folded keys of one mirror as the MERGE reads them: ``k`` (typed key), ``live``,
    :data:`~pipelines.gold.fold.VALUES`, :data:`~pipelines.gold.fold.WRITTEN`, the lineage columns."""
    values, written = state_structs("st", key, shape)
    return folded.selectExpr(
        f"{typed_key(key, shape)} AS k", "st.live AS live", f"{values} AS {VALUES}", f"{written} AS {WRITTEN}",
        *lineage_sql(), "size(st.img) > 0 AS held_row", "buried",
    )  # fmt: skip


def apply_keyed(
    ctx: BatchContext,
    folded: DataFrame,
    key: tuple[str, ...],
    shape: MirrorShape,
    writes: KeyWrites,
    careful: bool,
    may_append: bool = True,
    soft: bool = False,
) -> KeyWrites:
    """Write one mirror's folded keys: an append where key state says no key is in the mirror, else one
    MERGE. ``writes`` carries what key state expects; Delta's counts are added to it. ``may_append`` False:
    a MERGE whatever key state says (changes that waited may have been applied once by an attempt that
    crashed before it recorded its progress, and a MERGE sets rows to states: applied twice, as once).
    ``soft`` (``deletes: soft``): always a MERGE, whose DELETEs mark rows (:mod:`pipelines.gold.soft`)."""
    writes.soft = soft
    if not writes.keys and not soft:
        return writes
    source = merge_source(folded, key, shape)
    if may_append and not soft and not writes.expected_updated and not writes.expected_deleted:
        appended = append_once(
            _as_mirror_rows(ctx, source, key, shape), ctx.ident.ref, ctx.marker(Step.MIRROR), careful
        )
        if appended:
            writes.inserted, writes.updated, writes.deleted = writes.expected_inserted, 0, 0
        writes.appended = True
        return writes
    touched = writes.expected_updated + writes.expected_deleted
    merged = merge_keyed(ctx, source, key, shape, soft, touched_rows=touched)
    if merged is not None:
        writes.inserted = int(merged["num_inserted_rows"])
        writes.updated = int(merged["num_updated_rows"])
        writes.deleted = int(merged["num_deleted_rows"])
    return writes


def _as_mirror_rows(ctx: BatchContext, source: DataFrame, key: tuple[str, ...], shape: MirrorShape) -> DataFrame:
    """The live keys of a merge source as the mirror's rows: its columns, each cast to the mirror's type
    (an append never widens a column)."""
    from pyspark.sql import functions as F

    values = [f"k.{q(k)} AS {q(k)}" for k in key] + [
        f"{struct_field(VALUES, c)} AS {q(c)}" for c in data_columns(shape, key)
    ]
    rows = source.where("live").selectExpr(*values, *LINEAGE_COLUMNS)
    mirror = ctx.ident.ref.read(ctx.spark).schema
    return rows.select(
        *[F.col(q(f.name)).cast(f.dataType).alias(f.name) for f in mirror.fields if f.name in rows.columns]
    )


def merge_keyed(
    ctx: BatchContext,
    source: DataFrame,
    key: tuple[str, ...],
    shape: MirrorShape,
    soft: bool = False,
    touched_rows: int = 0,
) -> Row | None:
    """One MERGE into the mirror: live keys updated (the columns they write) or inserted, deleted keys
    removed. Returns Delta's metrics row, None where Delta skipped it as already committed. The source is
    a batch-level checkpoint, read twice without Delta copying it again; ``touched_rows`` (the rows key
    state expects it to update or delete) picks rewriting or deletion vectors
    (:func:`~pipelines.delta_writes.checkpointed_merge_settings`)."""
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
    with ctx.txn(Step.MIRROR, checkpointed_merge_settings(spark, ident.ref, touched_rows)):
        merge = DeltaMerge(ident.ref, source, on)
        if soft:
            for kind, condition, assigned in soft_clauses(update_set, insert_values):
                if kind == "matched":
                    merge.when_matched_update(condition, assigned)
                else:
                    merge.when_not_matched_insert(condition, assigned)
        else:
            merge.when_matched_delete("NOT s.live").when_matched_update("s.live", update_set)
            merge.when_not_matched_insert("s.live", insert_values)
        rows = merge.execute(spark)
    return rows[0] if rows else None
