"""``deletes: soft``: a DELETE keeps the mirror's row, marked ``_deleted = true`` with ``_deleted_at`` its
event time; a later INSERT (or SNAPSHOT, UPDATE) of the key revives it (``_deleted = false``, ``_deleted_at``
NULL).

What differs from hard deletes, and where:

* the fold keeps the image a DELETE ends (:func:`pipelines.gold.fold.fold_per_key`, ``soft``), so a key
  inserted and deleted in one batch still lands as a deleted row with its values;
* the write is always a MERGE (:func:`soft_clauses`): a matched DELETE updates the row's lineage and marks
  it, an unmatched DELETE of a key the batch held inserts it marked, a DELETE of a key never seen writes
  nothing;
* a TRUNCATE marks every row it covers (:func:`pipelines.gold.truncate.truncate_mirror`), after the batch's
  write: changes before it in the same batch are applied, not stale, and then marked, so the mirror is the
  one the same changes give split over batches (each TRUNCATE of the batch marks the rows it covers, with its
  own time: :func:`soft_truncate_set`);
* staleness, replays and late changes are decided by key state exactly as for hard deletes (a soft-deleted
  key is a deleted key there), so a late DELETE older than the key's last change is stale, and a replayed
  batch sets rows to the same states; but an image older than a key's DELETE and newer than the image its
  row holds (key state's ``img_seq``) came late across a batch boundary: it gives the deleted row its values,
  which stays marked (inserted marked, where the DELETE found no row), as one batch of the same changes
  leaves it (:func:`pipelines.gold.decide.with_key_state`, ``buried``);
* a table without a key is refused (:func:`keyless_refusal`): every change of it goes to quarantine with
  the reason, since a deleted row of a multiset cannot be told from its live twin.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pipelines.layout import LINEAGE_COLUMNS, SOFT_DELETE_COLUMNS, SOFT_DELETE_DDL
from pipelines.sql import lit, q, timestamp_lit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.config import TableConfig
    from pipelines.gold.identity import MirrorIdentity

SOFT = "soft"
DELETED, DELETED_AT = SOFT_DELETE_COLUMNS


def is_soft(tc: TableConfig | None) -> bool:
    """The table's mirror keeps deleted rows (``deletes: soft``)."""
    return tc is not None and getattr(tc, "deletes", "hard") == SOFT


def soft_mirrors(plans: Iterable) -> set[str]:
    """The state keys of the keyed mirrors with ``deletes: soft`` among ``plans`` (:class:`TablePlan`)."""
    return {p.mirror for p in plans if p.keyed and is_soft(p.tc)}


def keyless_refusal(source_table: str, option: str = "deletes: soft") -> str:
    """Why a table without a key cannot have ``deletes: soft`` (or ``where``): its changes' quarantine reason."""
    return (
        f"tables.{source_table}.{option} needs a key, and {source_table} has none (messages name no key "
        f"and tables.<name>.key is not set): give its key, or remove {option.split(':')[0]}"
    )


def ensure_soft_columns(spark: SparkSession, ident: MirrorIdentity, existing: Iterable[str] | None) -> bool:
    """Add ``_deleted`` and ``_deleted_at`` to a mirror that lacks them (new, or hard until now); True when
    it altered the mirror. Rows already there read ``_deleted`` NULL: live. ``existing``: the mirror's
    columns (None: read them)."""
    if existing is None:
        existing = ident.ref.read(spark).columns
    missing = [(n, t) for n, t in SOFT_DELETE_DDL if n not in set(existing)]
    if not missing:
        return False
    cols = ", ".join(f"{q(n)} {t}" for n, t in missing)
    spark.sql(f"ALTER TABLE {ident.ref.sql} ADD COLUMNS ({cols})")
    return True


def soft_clauses(update_set: dict[str, str], insert_values: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    """The MERGE clauses of a soft mirror, as (kind, condition, assignments): ``matched`` / ``not_matched``.
    ``update_set`` and ``insert_values`` are a hard mirror's (data columns and lineage). A buried key (late
    images older than its DELETE, :func:`pipelines.gold.fold.fold_per_key`) updates a marked row's values
    only: its marks and lineage stay the DELETE's."""
    live = {q(DELETED): "false", q(DELETED_AT): "CAST(NULL AS TIMESTAMP)"}
    gone = {q(DELETED): "true", q(DELETED_AT): "s._event_time"}
    lineage = {q(name) for name in LINEAGE_COLUMNS}
    return [
        ("matched", "s.buried", {c: v for c, v in update_set.items() if c not in lineage}),
        ("matched", "s.live", {**update_set, **live}),
        ("matched", "NOT s.live", {**update_set, **gone}),
        ("not_matched", "s.live", {**insert_values, **live}),
        ("not_matched", "NOT s.live AND s.held_row", {**insert_values, **gone}),
    ]


def soft_truncate_set(truncates: Sequence[tuple[str, str | None]]) -> dict[str, str]:
    """What the soft TRUNCATEs of a batch set on every live row they cover (``truncates``: each one's
    sequence and source commit time, ascending): ``_deleted_at`` is the time of the first that covers the row
    (its ``_seq`` at most that TRUNCATE's), as when each TRUNCATE came in a batch of its own."""
    when = " ".join(f"WHEN `_seq` <= {lit(seq)} THEN {timestamp_lit(time)}" for seq, time in truncates[:-1])
    last = timestamp_lit(truncates[-1][1])
    deleted_at = f"CASE {when} ELSE {last} END" if when else last
    return {q(DELETED): "true", q(DELETED_AT): deleted_at, "`_op`": "'TRUNCATE'"}
