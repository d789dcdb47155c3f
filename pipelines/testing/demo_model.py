"""The reference model of the demo's mirrors (a dev tool for tests): the stock shards routed into one mirror,
whose deleted rows stay marked (:data:`pipelines.testing.demo.ROW_OPTIONS`)."""

from __future__ import annotations

from dataclasses import replace

from pipelines.formats import Change
from pipelines.testing.demo import STOCK, TABLE_TYPES
from pipelines.testing.model import MirrorModel

#: The stock mirror's columns beyond its configured ones: each row's shard (``from``) and its soft-delete marks.
STOCK_EXTRA_TYPES = {"_source_table": "varchar(128)", "_deleted": "boolean", "_deleted_at": "timestamp(6)"}


def as_mirrored(change: Change) -> Change:
    """A demo change as its mirror's reference model reads it: a stock shard's change is one of
    ``inventory.stock``, the shard's name in ``_source_table`` (:data:`~pipelines.testing.demo.ROW_OPTIONS`)."""
    if change.db != "inventory" or not str(change.table).startswith("stock_"):
        return change
    tag = {"_source_table": f"{change.db}.{change.table}"}
    return replace(
        change,
        table="stock",
        before=None if change.before is None else {**change.before, **tag},
        after=None if change.after is None else {**change.after, **tag},
    )


def mirror_model() -> MirrorModel:
    """The reference model of the demo's mirrors (the stock mirror keeps deleted rows); feed it
    :func:`as_mirrored` changes."""
    return MirrorModel(soft={STOCK})


def mirror_types(table: str) -> dict[str, str]:
    """Every column of a demo mirror as export prints it, with its source type."""
    return {**TABLE_TYPES[table], **(STOCK_EXTRA_TYPES if table == STOCK else {})}
