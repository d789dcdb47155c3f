"""Which source tables and columns reach silver's ``changes``: the ``include`` / ``exclude`` lists of the
configuration (top level and per source) and each table's ``columns_include`` / ``columns_exclude``.

Silver decides, per change, right after decoding (:meth:`Selection.decide`):

* a change (or DDL) of a table the lists skip becomes a ``skipped`` row naming the list that skipped
  it: it never reaches ``changes``, gold, a mirror or quarantine, and reconciliation counts it;
* a change of a chosen table loses the columns its table does not keep, from every image, its
  ``changed`` list, its types and its invalid values, so nothing after silver ever sees them;
* a column a change's own key names cannot be dropped: that message is quarantined, naming the table
  and the field to fix (a configured key in ``columns_exclude`` is refused when the file loads).

Table names are matched as :class:`~pipelines.warehouse.SourceTable` names them (``db.table``,
``db.schema.table``; OMS Default: ``tenant.database.table``), case-sensitively, by
:func:`fnmatch.fnmatchcase` (``*`` matches dots too). Column names are matched case-insensitively: a
column kept out is kept out whatever case a message writes it in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

from pipelines.errors import Reject
from pipelines.formats.base import ROW_OPS, Change
from pipelines.names import SourceTable


@dataclass(frozen=True)
class TableFilter:
    """One ``include`` / ``exclude`` pair; ``where`` is its place in the file (``""``, ``sources[0].``)."""

    where: str = ""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def skip_reason(self, name: str) -> str | None:
        """Why ``name`` is skipped (None: it is not)."""
        if self.include and not any(fnmatchcase(name, p) for p in self.include):
            return f"not matched by {self.where}include {list(self.include)}"
        for pattern in self.exclude:
            if fnmatchcase(name, pattern):
                return f"excluded by {self.where}exclude pattern {pattern!r}"
        return None


@dataclass(frozen=True)
class ColumnFilter:
    """One table's ``columns_include`` (None: every column) or ``columns_exclude``, lower case."""

    table: str  # the table's entry under ``tables``
    include: frozenset[str] | None = None
    exclude: frozenset[str] = frozenset()

    def keeps(self, column: str) -> bool:
        low = column.lower()
        return (self.include is None or low in self.include) and low not in self.exclude

    @property
    def field(self) -> str:
        return f"tables.{self.table}.{'columns_include' if self.include is not None else 'columns_exclude'}"


def _images_without(image: dict | None, keep) -> dict | None:
    return None if image is None else {c: v for c, v in image.items() if keep(c)}


def select_columns(change: Change, columns: ColumnFilter) -> Change:
    """``change`` without the columns ``columns`` does not keep: images, ``changed``, types, invalid
    values. Reject when one of them is in the change's key."""
    dropped_keys = [k for k in change.key_columns if not columns.keeps(k)]
    if dropped_keys:
        raise Reject(
            f"column {dropped_keys[0]!r} is in the key of table {columns.table} (as its messages give it) but "
            f"{columns.field} keeps it out: a key column cannot be left out of the mirror"
        )
    keep = columns.keeps
    invalid = {c: v for c, v in (change.invalid or {}).items() if keep(c)}
    return replace(
        change,
        before=_images_without(change.before, keep),
        after=_images_without(change.after, keep),
        changed=None if change.changed is None else tuple(c for c in change.changed if keep(c)),
        col_types=_images_without(change.col_types, keep),
        invalid=invalid or None,
    )


class Selection:
    """The tables and columns silver keeps, for every source (see the module's text). Sent to the
    executors with silver's decode function: plain data, and a cache of decisions per table name."""

    def __init__(
        self,
        top: TableFilter,
        sources: Mapping[str, TableFilter],
        columns: Mapping[str, ColumnFilter],
    ) -> None:
        self.top = top
        self.sources = dict(sources)
        self.columns = dict(columns)
        lower: dict[str, list[ColumnFilter]] = {}
        for name, f in self.columns.items():
            lower.setdefault(name.lower(), []).append(f)
        self._lower = lower
        self._skips: dict[tuple[str, str], str | None] = {}

    def skip_reason(self, source: str, name: str) -> str | None:
        """Why the table ``name`` of source ``source`` is skipped (None: kept). Top-level lists first."""
        cache_key = (source, name)
        if cache_key not in self._skips:
            reason = self.top.skip_reason(name)
            if reason is None and source in self.sources:
                reason = self.sources[source].skip_reason(name)
            self._skips[cache_key] = reason
        return self._skips[cache_key]

    def column_filter(self, name: str) -> ColumnFilter | None:
        """The columns kept of table ``name``: the entry of exactly its name, else the one entry whose
        name differs only in case (as gold finds a table's configuration)."""
        if name in self.columns:
            return self.columns[name]
        alike = self._lower.get(name.lower(), [])
        return alike[0] if len(alike) == 1 else None

    def decide(self, source: str, changes: Sequence[Change]) -> list[tuple[Change, str | None]]:
        """Each change of one message, in order, with the reason it is skipped (None: kept, its
        columns chosen). Heartbeats and changes that name no table are kept as they are."""
        out: list[tuple[Change, str | None]] = []
        for ch in changes:
            if ch.table is None or (ch.op not in ROW_OPS and ch.op != "DDL"):
                out.append((ch, None))
                continue
            name = SourceTable.of(ch.db, ch.schema, ch.table).name
            reason = self.skip_reason(source, name)
            if reason is None and ch.op in ROW_OPS and (columns := self.column_filter(name)) is not None:
                ch = select_columns(ch, columns)
            out.append((ch, reason))
        return out


def skipped_everywhere(name: str, top: TableFilter, sources: Iterable[TableFilter]) -> str | None:
    """Why a configured table ``name`` would be skipped whatever source sends it (None: some source
    keeps it), for the configuration's own check."""
    reason = top.skip_reason(name)
    if reason is not None:
        return reason
    sources = list(sources)
    reasons = [f.skip_reason(name) for f in sources]
    if sources and all(reasons):
        return "; ".join(r for r in reasons if r)
    return None
