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
from pipelines.sql import EMPTY_MAP, PARTIAL_SQL, ROW_AFTER_SQL, lit, q, typed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The state of a key before its first change.
FOLD_START = f"named_struct('live', false, 'full', false, 'img', {EMPTY_MAP})"
#: The structs of the folded state, by column name.
VALUES, WRITTEN = "vals", "written"


def fold_step(prev: str) -> str:
    """SQL of the state after change ``c`` (a partial UPDATE overlays; anything else replaces)."""
    return f"""named_struct(
        'live', c.op != 'DELETE',
        'full', NOT c.partial OR {prev}.full,
        'img', CASE WHEN c.op = 'DELETE' THEN {EMPTY_MAP}
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


def changes_per_key(rows: DataFrame) -> DataFrame:
    """Per key ``k``, its changes in ``ord`` order (``chs``: the fields the fold and the lineage need)."""
    from pyspark.sql import functions as F

    per_key = rows.groupBy("k").agg(
        F.collect_list(
            F.struct(
                ORD,
                "op",
                F.expr(ROW_AFTER_SQL).alias("after"),
                F.expr(PARTIAL_SQL).alias("partial"),
                "seq",
                "queue_pos",
                "event_time",
                "source",
                "format",
                "bronze_position",
                "ingest_time",
            )
        ).alias("chs")
    )
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


def fold_per_key(rows: DataFrame, key: tuple[str, ...], shape: MirrorShape) -> DataFrame:
    """One row per key ``k``: its last state (``live``, ``full``, :data:`VALUES`, :data:`WRITTEN`)
    and the lineage columns of its last change."""
    folded = changes_per_key(rows).selectExpr(
        "k", f"aggregate(chs, {FOLD_START}, (acc, c) -> {fold_step('acc')}) AS st", "element_at(chs, -1) AS last"
    )
    values, written = state_structs("st", key, shape)
    lineage = [
        ("CASE WHEN st.live THEN last.op ELSE 'DELETE' END" if name == "_op" else f"last.{source}") + f" AS {name}"
        for name, source in LINEAGE_SOURCES
    ]
    return folded.selectExpr(
        "k", "st.live AS live", "st.full AS full", f"{values} AS {VALUES}", f"{written} AS {WRITTEN}", *lineage
    )
