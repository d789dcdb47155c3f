"""The reference model: what a mirror must hold after a stream of canonical changes.

Independent of Spark and Delta on purpose, so gold can be checked against it. The
rule is the plain one: per table, apply row changes in the order of
``(seq, arrival)``; an UPDATE with a full image replaces the row, one with a
partial image (``changed`` set) overlays the columns it carries, a key change
moves the row, DELETE removes it, TRUNCATE empties the table.

Tables with no key keep multiset semantics: DELETE removes one row equal to the
before-image, UPDATE removes one such row and adds the after-image. A keyed change
is idempotent by itself; a keyless one is not, so a redelivered duplicate is applied
once: a keyless change equal to one already applied to its table (same seq, op,
before- and after-image: what a redelivered copy of a message decodes to) is skipped.
Two genuine changes are never equal that way as long as each has its own seq.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from pipelines.formats.base import Change
from pipelines.warehouse import SourceTable

Row = dict[str, "str | None"]


def table_name(change: Change) -> str:
    """The source table's name as gold's mirror records it (``db[.schema].table``)."""
    return SourceTable.of(change.db, change.schema, str(change.table)).name


#: The marks of a row of a ``deletes: soft`` mirror (pipelines.gold.soft), as model rows carry them.
DELETED, DELETED_AT = "_deleted", "_deleted_at"


class MirrorModel:
    """``soft``: the tables whose mirrors keep deleted rows (``deletes: soft``): a DELETE marks the row
    (``_deleted`` ``"true"``, ``_deleted_at`` its event time) and keeps its values, a TRUNCATE marks every
    row, any other change leaves its row ``_deleted`` ``"false"``; a DELETE of a key never held writes
    nothing."""

    def __init__(self, soft: Iterable[str] = ()) -> None:
        self._pending: dict[str, list[tuple[tuple[int, ...], int, Change]]] = defaultdict(list)
        self._arrivals = 0
        self.soft = frozenset(soft)

    def add(self, change: Change) -> None:
        """Record one change (any op; DDL and HEARTBEAT do not touch rows)."""
        self._arrivals += 1
        if change.op in ("INSERT", "UPDATE", "DELETE", "SNAPSHOT", "TRUNCATE"):
            self._pending[table_name(change)].append((change.seq, self._arrivals, change))

    def add_all(self, changes: Iterable[Change]) -> MirrorModel:
        for change in changes:
            self.add(change)
        return self

    def tables(self) -> list[str]:
        return sorted(self._pending)

    def rows(self, table: str, where: Callable[[Row], bool] | None = None) -> list[Row]:
        """The mirror of ``table``: rows sorted by key (or by value for keyless tables). ``where``: the
        table's row filter (``tables.<name>.where``): the mirror holds the rows of the source table that
        match it, whatever path brought them there."""
        if where is not None:
            return [r for r in self.rows(table) if where(r)]
        keyed: dict[tuple, Row] = {}
        keyless: list[Row] = []
        keyless_applied: set[tuple] = set()  # identities of the keyless changes applied
        key_cols: tuple[str, ...] = ()
        soft = table in self.soft
        for _seq, _arrival, ch in sorted(self._pending.get(table, []), key=lambda t: (t[0], t[1])):
            key_cols = ch.key_columns or key_cols
            if ch.op == "TRUNCATE" and soft:
                for k, row in keyed.items():
                    if row.get(DELETED) != "true":
                        keyed[k] = {**row, DELETED: "true", DELETED_AT: ch.event_time}
            elif ch.op == "TRUNCATE":
                keyed.clear()
                keyless.clear()
            elif not key_cols:
                identity = _identity(ch)
                if identity not in keyless_applied:
                    keyless_applied.add(identity)
                    _apply_keyless(keyless, ch)
            elif soft:
                _apply_soft(keyed, key_cols, ch)
            else:
                _apply_keyed(keyed, key_cols, ch)
        if key_cols:
            return [keyed[k] for k in sorted(keyed, key=_sort_key)]
        return sorted(keyless, key=lambda r: _sort_key(tuple(sorted(r.items()))))


def _key_of(image: Row | None, key_cols: tuple[str, ...]) -> tuple | None:
    if not image or any(c not in image for c in key_cols):
        return None
    return tuple(image[c] for c in key_cols)


def _apply_keyed(rows: dict[tuple, Row], key_cols: tuple[str, ...], ch: Change) -> None:
    old_key = _key_of(ch.before, key_cols)
    if ch.op == "DELETE":
        rows.pop(old_key if old_key is not None else _key_of(ch.after, key_cols), None)
        return
    if ch.op in ("INSERT", "SNAPSHOT"):
        rows[_key_of(ch.after, key_cols)] = dict(ch.after or {})
        return
    # UPDATE: the new key is the before-image overlaid with the after-image (a partial image may
    # carry only the key column that changed). A full image (changed is None) replaces the row;
    # a partial one overlays its columns on the current row, or on the before-image when the
    # mirror does not hold the row. A key change moves the row.
    new_key = _key_of({**(ch.before or {}), **(ch.after or {})}, key_cols)
    current = rows.pop(old_key, None) if old_key is not None and old_key != new_key else rows.get(new_key)
    if ch.changed is None:
        rows[new_key] = dict(ch.after or {})
    else:
        base = current if current is not None else dict(ch.before or {})
        rows[new_key] = {**base, **(ch.after or {})}


def _apply_soft(rows: dict[tuple, Row], key_cols: tuple[str, ...], ch: Change) -> None:
    """A change of a ``deletes: soft`` table: a DELETE (and the old key of an UPDATE that moves its row)
    marks the row it finds; anything else applies as :func:`_apply_keyed` and leaves its row live."""
    old_key = _key_of(ch.before, key_cols)
    if ch.op == "DELETE":
        k = old_key if old_key is not None else _key_of(ch.after, key_cols)
        if k in rows:
            rows[k] = {**rows[k], DELETED: "true", DELETED_AT: ch.event_time}
        return
    if ch.op == "UPDATE":
        new_key = _key_of({**(ch.before or {}), **(ch.after or {})}, key_cols)
    else:
        new_key = _key_of(ch.after, key_cols)
    moved = old_key if ch.op == "UPDATE" and old_key is not None and old_key != new_key else None
    left = dict(rows[moved]) if moved in rows else None
    _apply_keyed(rows, key_cols, ch)
    if left is not None:
        rows[moved] = {**left, DELETED: "true", DELETED_AT: ch.event_time}
    rows[new_key] = {**rows[new_key], DELETED: "false", DELETED_AT: None}


def _identity(ch: Change) -> tuple:
    """What makes a keyless change the same change (a redelivered copy) as another of its table."""

    def image(img: Row | None) -> tuple | None:
        return None if img is None else tuple(sorted(img.items()))

    return ch.op, tuple(ch.seq), image(ch.before), image(ch.after)


def _apply_keyless(rows: list[Row], ch: Change) -> None:
    if ch.op in ("DELETE", "UPDATE") and ch.before:
        for i, row in enumerate(rows):
            if all(row.get(c) == v for c, v in ch.before.items()):
                del rows[i]
                break
    if ch.op != "DELETE" and ch.after is not None:
        rows.append(dict(ch.after))


def _sort_key(key: tuple) -> tuple:
    """Sort keys numerically where values are integers, else as text; NULL first."""
    out = []
    for v in key:
        if isinstance(v, tuple):
            v = v[1]
        if v is None:
            out.append((0, 0, ""))
        else:
            try:
                out.append((1, int(v), ""))
            except ValueError:
                out.append((2, 0, str(v)))
    return tuple(out)


def history_versions(
    changes: Iterable[Change], key_cols: tuple[str, ...], tracked: Iterable[str] | None = None
) -> list[tuple[tuple, Row, tuple, tuple | None]]:
    """The SCD type 2 history of one keyed table's ``changes`` (one table, in source order): per key, its
    versions as (key, row, valid from sequence, valid to sequence or None while current).

    Changes of a key that share a sequence give one version, the row after the last of them. With
    ``tracked`` columns a new version opens only when one of them changes or the key comes back after a
    DELETE; a change of the other columns updates the current version in place (AUTO CDC's
    ``track_history_column_list``)."""
    rows: dict[tuple, Row] = {}
    open_: dict[tuple, list] = {}  # key → [row, from, to] of its current version
    versions: list[list] = []
    ordered = sorted(enumerate(changes), key=lambda t: (t[1].seq, t[0]))
    i = 0
    while i < len(ordered):
        seq = ordered[i][1].seq
        group = []
        while i < len(ordered) and ordered[i][1].seq == seq:
            group.append(ordered[i][1])
            i += 1
        touched: dict[tuple, None] = {}
        for ch in group:
            before = dict(rows)
            _apply_keyed(rows, key_cols, ch)
            for k in set(before) | set(rows):
                if before.get(k) != rows.get(k) or k == _key_of(ch.after, key_cols):
                    touched[k] = None
        for k in touched:
            row, current = rows.get(k), open_.get(k)
            if row is None:
                if current is not None:
                    current[2] = seq
                    del open_[k]
                continue
            if current is not None and tracked is not None and all(row.get(c) == current[0].get(c) for c in tracked):
                current[0] = dict(row)
                continue
            if current is not None:
                current[2] = seq
            version = [dict(row), seq, None, k]
            versions.append(version)
            open_[k] = version
    return [(v[3], v[0], v[1], v[2]) for v in versions]
