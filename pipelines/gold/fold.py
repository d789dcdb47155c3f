"""The fold: per key, its changes of one batch in order, reduced to the state they leave.

The state of a key while its changes fold is ``live`` (or deleted), ``full`` (a full image has
been seen, so every column is known) and ``img`` (the row so far, canonical text). A partial
UPDATE overlays the columns it carries; any other change replaces the image; DELETE empties it.

What the mirror receives is named by column: ``vals`` (each data column's typed value) and
``written`` (whether the batch writes that column) are structs whose fields are the mirror's
column names, read as ``s.vals.`<column>``` (:func:`struct_field`). Column names come from messages:
every one passes through :func:`~pipelines.sql.q` or :func:`~pipelines.sql.lit`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pipelines.gold.order import BY_ORD, ORD
from pipelines.gold.schema import MirrorShape
from pipelines.layout import LINEAGE_SOURCES
from pipelines.sql import EMPTY_MAP, lit, q, typed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The state of a key before its first change.
FOLD_START = f"named_struct('live', false, 'full', false, 'img', {EMPTY_MAP})"
#: The tombstone a late change of a ``deletes: soft`` key lies under (:func:`pipelines.gold.decide.with_key_state`).
TOMB_DDL = "STRUCT<seq: STRING, event_time: TIMESTAMP, queue_pos: STRING>"
TOMB_FIELDS = ("seq", "event_time", "queue_pos")
#: The structs of the folded state, by column name.
VALUES, WRITTEN = "vals", "written"


def fold_step(prev: str, soft: str = "false") -> str:
    """SQL of the state after change ``c`` (a partial UPDATE overlays; anything else replaces). Where ``soft``
    (SQL: the key's mirror has ``deletes: soft``) a DELETE keeps the image it ends, to mark it deleted."""
    return f"""named_struct(
        'live', c.op != 'DELETE',
        'full', CASE WHEN c.op = 'DELETE' AND {soft} THEN {prev}.full ELSE NOT c.partial OR {prev}.full END,
        'img', CASE WHEN c.op = 'DELETE' AND {soft} THEN {prev}.img
                    WHEN c.op = 'DELETE' THEN {EMPTY_MAP}
                    WHEN c.partial THEN map_concat({prev}.img, c.after)
                    ELSE c.after END)"""


def named_struct(fields: Iterable[tuple[str, str]]) -> str:
    """SQL of a struct whose fields are named by (hostile) column names: (name, SQL value) pairs."""
    return "named_struct(" + ", ".join(f"{lit(name)}, {value}" for name, value in fields) + ")"


def struct_field(struct: str, name: str) -> str:
    """SQL of one field of a struct built by :func:`named_struct`."""
    return f"{struct}.{q(name)}"


def stored_key(key: tuple[str, ...]) -> str:
    """SQL of a stored row's key (mirror, tombstones, history) as the struct ``k`` changes carry."""
    return named_struct((k, q(k)) for k in key)


def data_columns(shape: MirrorShape, key: tuple[str, ...]) -> list[str]:
    """The mirror's columns a change writes: all but the key."""
    return [c for c in shape.columns if c not in key]


#: A change's fields the fold and the lineage read, in the order ``chs`` holds them.
CHANGE_STRUCT = (ORD, "op", "after", "partial", "seq", "queue_pos", "event_time", "source", "format",
                 "bronze_position", "ingest_time")  # fmt: skip


def changes_per_key(rows: DataFrame, by: tuple[str, ...] = ("k",)) -> DataFrame:
    """Per key (the columns ``by``), its changes in ``ord`` order (``chs``). ``rows`` are fold inputs: each
    change's row image ``after`` (:data:`~pipelines.sql.ROW_AFTER_SQL`) and ``partial`` already made
    (:func:`pipelines.gold.decide.fold_inputs`)."""
    from pyspark.sql import functions as F

    per_key = rows.groupBy(*by).agg(F.collect_list(F.struct(*CHANGE_STRUCT)).alias("chs"))
    return per_key.withColumn("chs", F.expr(f"array_sort(chs, {BY_ORD})"))


def state_structs(state: str, key: tuple[str, ...], shape: MirrorShape) -> tuple[str, str]:
    """SQL of the :data:`VALUES` and :data:`WRITTEN` structs of the fold state ``state``."""
    values, written = [], []
    for c in data_columns(shape, key):
        # a dropped column the ignore policy keeps is written only where an image still carries it
        carried = f"map_contains_key({state}.img, {lit(c)})"
        values.append((c, typed(f"{state}.img", c, shape.columns.get(c))))
        written.append((c, carried if c in shape.unwritten else f"({state}.full OR {carried})"))
    return named_struct(values), named_struct(written)


def fold_per_key(
    rows: DataFrame, by: tuple[str, ...] = ("mirror", "k"), soft: Iterable[str] = (), whole: bool = False
) -> DataFrame:
    """One row per key: the state its changes leave (``st``: ``live``, ``full``, ``img``), the key columns
    ``kimg``, whether the mirror held the key before the first of them (``first_prev_live``), the lineage
    columns of the last change (``last``), and where the rows have it, ``held``: the value hashes key state
    held for a live key (:func:`pipelines.gold.decide.key_state_rows`). ``soft``: the mirrors (state keys)
    with ``deletes: soft``, whose DELETEs keep the row's image. ``img_seq``: the sequence of the last image
    (not a DELETE) among the changes; ``buried``: the key's changes all came before its soft tombstone
    (``tomb``), so it stays deleted with their image (:func:`pipelines.gold.decide.with_key_state`).

    ``whole``: no change of ``rows`` is a partial image, and no mirror is ``soft``. Then a key's state is its last
    change's (a whole image replaces the row, a DELETE empties it) and the fold is one ``max_by`` per key, as AUTO
    CDC's ``Scd1BatchProcessor`` takes the latest change, instead of collecting, sorting and folding its changes."""
    from pyspark.sql import functions as F

    soft = sorted(soft)
    whole = whole and not soft
    held = [F.first("held", ignorenulls=True).alias("held")] if "held" in rows.columns else []
    if "tomb" not in rows.columns:  # changes that are not the batch pass's fold inputs: none lies under one
        rows = rows.withColumn("tomb", F.lit(None).cast(TOMB_DDL)).withColumn("prior_img", F.lit(None).cast("string"))
    change = F.struct(*CHANGE_STRUCT)
    per_key = rows.groupBy(*by).agg(
        F.max_by(change, ORD).alias("last") if whole else F.collect_list(change).alias("chs"),
        F.max_by("kimg", ORD).alias("kimg"),
        F.min_by("prev_live", ORD).alias("first_prev_live"),
        *held,
        F.max("tomb").alias("tomb"),
        F.first("prior_img", ignorenulls=True).alias("prior_img"),
        F.max(F.when(F.col("op") != "DELETE", F.col(ORD))).alias("img_ord"),  # the last image's (ord leads with seq)
    )
    if whole:  # what fold_step leaves after the last change: a whole image replaces, a DELETE empties
        state = (
            "named_struct('live', last.op != 'DELETE', 'full', true, "
            f"'img', CASE WHEN last.op = 'DELETE' THEN {EMPTY_MAP} ELSE last.after END)"
        )
        folding = [f"{state} AS st", "last"]
    else:
        ordered = f"array_sort(chs, {BY_ORD})"
        soft_sql = f"mirror IN ({', '.join(lit(m) for m in soft)})" if soft and "mirror" in by else "false"
        folding = [
            f"aggregate({ordered}, {FOLD_START}, (acc, c) -> {fold_step('acc', soft_sql)}) AS st",
            f"element_at({ordered}, -1) AS last",
        ]
    folded = per_key.selectExpr(
        *by, "kimg", "first_prev_live", *(["held"] if held else []), "tomb", "prior_img", *folding,
        "img_ord.seq AS img_seq", "coalesce(last.seq < tomb.seq, false) AS buried",
    )  # fmt: skip
    kept_deleted = "named_struct('live', false, 'full', st.full, 'img', st.img)"
    return folded.withColumn("st", F.expr(f"CASE WHEN buried THEN {kept_deleted} ELSE st END"))


def lineage_sql() -> list[str]:
    """SQL of a folded key's lineage columns (its last change's; ``_op`` DELETE where the key ends deleted; a
    buried key's sequence, queue position and event time its tombstone's, as the DELETE that marks it)."""

    def column(source: str) -> str:
        if source == "op":
            return "CASE WHEN st.live THEN last.op ELSE 'DELETE' END"
        if source in TOMB_FIELDS:
            return f"CASE WHEN buried THEN tomb.{source} ELSE last.{source} END"
        return f"last.{source}"

    return [f"{column(source)} AS {name}" for name, source in LINEAGE_SOURCES]
