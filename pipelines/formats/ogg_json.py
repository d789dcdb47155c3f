"""Oracle GoldenGate for Big Data, JSON formatter (not in the seeds; Oracle's "Using the JSON Formatter";
real messages: Apache Flink ``ogg-data.txt`` and Apache Paimon ``kafka/ogg/**``, in tests/fixtures/real/ogg_json).

One message per operation: ``table`` (``SCHEMA.TABLE`` or ``CATALOG.SCHEMA.TABLE``), ``op_type``
(``I``/``U``/``D``/``T``; the ``INSERT``/``UPDATE``/``DELETE``/``TRUNCATE`` spelling and ``PK UPDATE`` /
``SQL COMPUPDATE`` too), ``op_ts`` (commit time), ``current_ts`` (processing time, unused), ``pos``,
``primary_keys``, ``before`` / ``after``, ``tokens``, optional ``xid`` / ``csn`` / ``txind``.

Quirks:
* Ordering: ``pos`` is the trail file sequence number and the RBA (relative byte address), each
  10 digits: seq = (trail sequence number, RBA), i.e. ``pos`` as one integer split at its last 10
  digits, so every length orders as the integer it is (Flink and Paimon write 23 digits). ``op_ts``
  does not order (Flink's file has pos 157 committed before pos 156); ``csn`` is not used: it is
  optional and shared by every operation of a transaction, and mixing messages with and without it
  would break the order. A message without ``pos`` (``includePosition`` off) has seq (): queue order.
* UPDATE images: GoldenGate leaves a column it did not capture out of the image (a compressed
  update carries the key and the changed columns); it never means NULL, which it writes as
  ``null``. So an UPDATE is partial (``changed`` = its after-image columns) unless it is proven full:
  the table has no key (GoldenGate then logs every column as the pseudo-key), or the configured
  columns are all in the after-image.
* Key: ``primary_keys`` (not written by default: ``includePrimaryKeys``), else configuration. A key
  name that matches no column exactly but one column case-insensitively names that column (Oracle
  folds unquoted names; Paimon's case-insensitive resource writes ``["id"]`` for column ``ID``).
* No types in the message: configured types decide, else the exact JSON text is kept. Date-time
  text in GoldenGate's own form ``1994-09-30:15:33:00`` (Oracle's sample messages) is accepted.
  ``op_ts`` is UTC unless ``source_time_zone`` says otherwise (GG for Big Data's default).
* A JSON schema message (``$schema``, published with ``schemaTopicName``) is DDL for its ``title``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pipelines.errors import InvalidValue
from pipelines.formats._canal_family import RowCodec, check_key, wall_text_in_zone
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    op_name,
    optional,
    seq_int,
)
from pipelines.values import canon_instant, family

_OPS = {
    "I": "INSERT",
    "INSERT": "INSERT",
    "U": "UPDATE",
    "UPDATE": "UPDATE",
    "PK UPDATE": "UPDATE",
    "SQL COMPUPDATE": "UPDATE",
    "D": "DELETE",
    "DELETE": "DELETE",
    "T": "TRUNCATE",
    "TRUNCATE": "TRUNCATE",
}
#: RBA digits of ``pos``; the digits before them are the trail file sequence number.
RBA_DIGITS = 10
#: GoldenGate's own date-time form: a colon between date and time (``1994-09-30:15:33:00``).
_GG_DATETIME = re.compile(r"^(\d{4}-\d{2}-\d{2}):(\d{2}:\d{2})", re.ASCII)
_TIME_FAMILIES = ("date", "datetime", "timestamp")


def split_qualified(name: str) -> tuple[str | None, str | None, str]:
    """``SCHEMA.TABLE`` → (SCHEMA, None, TABLE); ``CATALOG.SCHEMA.TABLE`` → (CATALOG, SCHEMA, TABLE).

    A name of more parts keeps the rest in the table name (GoldenGate does not quote dots).
    """
    parts = name.split(".", 2)
    if len(parts) == 1:
        return None, None, name
    if len(parts) == 2:
        return parts[0] or None, None, parts[1]
    return parts[0] or None, parts[1] or None, parts[2]


def spec_db(db: str | None, schema: str | None) -> str | None:
    """The ``db`` argument for :class:`DecodeContext` look-ups: ``db.schema`` when there is a schema."""
    return f"{db}.{schema}" if db and schema else db


def resolve_key(names: list[Any], image: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Key column names as the row spells them: exact, else the one case-insensitive match."""
    if not all(isinstance(n, str) and not isinstance(n, Num) for n in names):
        raise Reject("field 'primary_keys' should be an array of column names")
    out = []
    for name in names:
        if image is not None and name not in image:
            folded = [c for c in image if c.lower() == name.lower()]
            if len(folded) == 1:
                name = folded[0]
        out.append(name)
    return tuple(out)


def pos_seq(pos: Any) -> tuple[int, ...]:
    """``pos`` → (trail sequence number, RBA): the integer split at its last :data:`RBA_DIGITS` digits."""
    text = str(pos).strip() if isinstance(pos, str) else ""
    if not (text.isascii() and text.isdigit()):
        raise Reject(f"field 'pos' should be the trail position (digits), got {str(pos)[:40]!r}")
    head, rba = text[:-RBA_DIGITS] or "0", text[-RBA_DIGITS:]
    return (seq_int(head, "pos (trail sequence number)"), int(rba))


class OggJsonDecoder(RowCodec, JsonDecoder):
    format_id = "ogg_json"
    seeds = "none (Oracle GG for Big Data JSON formatter; real: flink ogg-data.txt, paimon kafka/ogg)"
    ordering = "`pos` (trail sequence number, RBA); without `pos` queue order"
    table_and_key = "`table` SCHEMA.TABLE or CATALOG.SCHEMA.TABLE; key `primary_keys`, else configuration"
    type_mapping = "no types in the message: configured column types, else exact JSON text"
    quirks = (
        "UPDATE partial (`changed`) unless proven full: GG leaves uncaptured columns out",
        "`op_ts` does not follow `pos`: `pos` orders",
        "GG date-time text `1994-09-30:15:33:00` accepted",
        "op_type T → TRUNCATE; I/U/D or INSERT/UPDATE/DELETE",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        if "$schema" in obj:
            title = optional(obj, "title", str)
            db, schema, table = split_qualified(title) if title else (None, None, None)
            return [Change("DDL", db=db, schema=schema, table=table, detail="json schema")]
        vendor_op = optional(obj, "op_type", str)
        if not vendor_op:
            raise Reject("missing field 'op_type'")
        op = _OPS.get(op_name(vendor_op).strip().upper())
        if op is None:
            raise Reject(f"unknown op_type {vendor_op[:40]!r}")
        qualified = optional(obj, "table", str)
        if not qualified:
            raise Reject("missing field 'table'")
        db, schema, table = split_qualified(qualified)
        lookup_db = spec_db(db, schema)
        common: dict[str, Any] = dict(
            db=db,
            schema=schema,
            table=table,
            seq=pos_seq(obj["pos"]) if obj.get("pos") is not None else (),
            event_time=self._op_ts(obj, ctx),
            txn=self._txn(obj),
            detail=vendor_op,
        )
        if op == "TRUNCATE":
            return [Change("TRUNCATE", key_columns=ctx.key_columns(lookup_db, table), **common)]
        types = {k: v.lower() for k, v in ctx.column_types(lookup_db, table).items()}
        overrides: dict[str, str] = {}
        before = self._image(obj, "before", types, ctx, overrides)
        after = self._image(obj, "after", types, ctx, overrides)
        row = before if op == "DELETE" else after
        if not row:
            raise Reject(f"{vendor_op[:40]} carries no '{'before' if op == 'DELETE' else 'after'}' image")
        if op == "UPDATE" and before:
            row = {**before, **row}  # a compressed after-image may leave an unchanged key to the before-image
        names = optional(obj, "primary_keys", list)
        key = resolve_key(names, row) if names else ctx.key_columns(lookup_db, table)
        check_key(key, row, "primary_keys" if names else "configuration")
        changed = None
        if op == "UPDATE":
            if before is not None and not before:
                before = None
            full = not key or bool(types and set(types) <= set(after))
            changed = None if full else tuple(after)
        elif op == "INSERT":
            before = None
        else:
            after = None
        return [
            Change(
                op,
                key_columns=key,
                before=before,
                after=after,
                changed=changed,
                col_types={**types, **overrides} or None,
                **common,
            )
        ]

    def _image(
        self, obj: dict[str, Any], what: str, types: Mapping[str, str], ctx: DecodeContext, overrides: dict[str, str]
    ) -> dict[str, str | None] | None:
        raw = optional(obj, what, dict)
        return None if raw is None else self.canon_row(raw, types, ctx, what, overrides)

    def _op_ts(self, obj: dict[str, Any], ctx: DecodeContext) -> str | None:
        op_ts = optional(obj, "op_ts", str)
        if not op_ts:
            return None
        try:
            return canon_instant(_gg_datetime(op_ts), self.source_zone(ctx))
        except (Reject, InvalidValue) as exc:
            raise Reject(f"field 'op_ts': {exc}") from None

    @staticmethod
    def _txn(obj: dict[str, Any]) -> str | None:
        for name in ("xid", "csn"):
            value = obj.get(name)
            if value is not None and not isinstance(value, (dict, list, bool)) and str(value):
                return str(value)
        return None

    def _canon(
        self, col: str, source_type: str | None, value: Any, ctx: DecodeContext, overrides: dict[str, str]
    ) -> str | None:
        if source_type and isinstance(value, str) and family(source_type) in _TIME_FAMILIES:
            value = _gg_datetime(value)
        return super()._canon(col, source_type, value, ctx, overrides)

    # ---------------------------------------------------------------- encode (simulator)
    def encode_timestamp(self, instant: str, ctx: DecodeContext) -> str:
        """GoldenGate writes a TIMESTAMP as date-time text (in the source zone, UTC by default)."""
        return wall_text_in_zone(instant, self.source_zone(ctx))

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        names = {"INSERT": "I", "SNAPSHOT": "I", "UPDATE": "U", "DELETE": "D", "TRUNCATE": "T"}
        if change.op not in names:
            raise ValueError(f"ogg_json has no message for {change.op}")
        parts = [p for p in (change.db, change.schema, change.table) if p]
        msg: dict[str, Any] = {"table": ".".join(parts), "op_type": names[change.op]}
        if change.event_time:
            wall = wall_text_in_zone(change.event_time, self.source_zone(ctx))
            msg["op_ts"] = msg["current_ts"] = wall
        if change.seq:
            msg["pos"] = _pos_text(change.seq)
        if change.txn is not None:
            msg["xid"] = change.txn
        types = dict(change.col_types or {})
        if change.key_columns and change.op != "TRUNCATE":
            msg["primary_keys"] = list(change.key_columns)
        if change.op in ("UPDATE", "DELETE"):
            msg["before"] = self.encode_row(change.before or {}, types, ctx, numbers=True)
        if change.op in ("INSERT", "SNAPSHOT", "UPDATE"):
            msg["after"] = self.encode_row(change.after or {}, types, ctx, numbers=True)
        return dumps_exact(msg).encode("utf-8")


def _gg_datetime(text: str) -> str:
    """GoldenGate's ``YYYY-MM-DD:HH:MI:SS[.f]`` → ``YYYY-MM-DD HH:MI:SS[.f]``; other text unchanged."""
    return _GG_DATETIME.sub(r"\1 \2", text, count=1)


def _pos_text(seq: tuple[int, ...]) -> str:
    """(trail sequence number, RBA) → the 20-digit ``pos`` (one component: the whole integer)."""
    if len(seq) == 1:
        return f"{seq[0]:020d}"
    trail, rba = seq[0], seq[1]
    if len(seq) != 2 or rba >= 10**RBA_DIGITS:
        raise ValueError(f"no trail position for seq {seq}")
    return f"{trail:010d}{rba:010d}"


DECODER = OggJsonDecoder()
