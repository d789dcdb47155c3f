"""Maxwell JSON (not in the seeds; real messages: Apache Paimon ``kafka/maxwell/**`` and Apache Flink
``maxwell-data.txt``, in tests/fixtures/real/maxwell, all decoded and mirrored as their tests state).

One message per row: ``type`` insert/update/delete (bootstrap-insert → SNAPSHOT,
bootstrap-start/-complete → HEARTBEAT, database-*/table-* → DDL with ``sql``), ``database``,
``table``, ``data`` (full row as typed JSON), ``old`` (changed columns' old values: before =
data overlaid with old), ``ts`` (epoch seconds), ``xid`` → txn, ``commit``.

A DDL event's ``ts`` is epoch **milliseconds**, a row event's seconds: Maxwell's ``RowMap`` divides
the binlog event's milliseconds by 1000 for ``ts``, while ``DDLMap.toJSON`` writes the milliseconds
it was given as they are (zendesk/maxwell ``schema/ddl/DDLMap.java``).

Quirks:
* The primary key is not in the message: ``primary_key_columns`` if Maxwell was told to
  write it, else the configured key (``ctx.key_columns``).
* No types in the message: configured column types decide; untyped values keep their JSON text.
* Ordering: ``position`` ("binlog.000004:1234" → (4, 1234)) when written; Maxwell writes it only
  with ``output_binlog_position``, so without it the format has no ordering at all and the queue
  position orders (seq ()): so in every Paimon and Flink resource. ``xoffset`` (the row's place in
  its transaction) and ``ts`` (seconds) do not order across transactions and are not used.
* Binary columns are Base64 (Maxwell's JSON), as the family default.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pipelines.formats._canal_family import RowCodec, check_key, overlay_before
from pipelines.formats.base import Change, DecodeContext, JsonDecoder, Num, Reject, dumps_exact, optional
from pipelines.values import epoch_seconds_text, instant_from_epoch

_ROW_OPS = {"insert": "INSERT", "update": "UPDATE", "delete": "DELETE", "bootstrap-insert": "SNAPSHOT"}
_CONTROL = {"bootstrap-start", "bootstrap-complete", "heartbeat"}
_DDL = {"database-create", "database-drop", "database-alter", "table-create", "table-drop", "table-alter"}


class MaxwellDecoder(RowCodec, JsonDecoder):
    format_id = "maxwell"
    seeds = "none (Maxwell's own docs; Paimon and Flink test resources, tests/fixtures/real/maxwell)"
    ordering = "`position` (binlog file number, offset) when present, else queue order"
    table_and_key = "`database` / `table`; key from `primary_key_columns`, else configuration"
    type_mapping = "no types in the message: configured column types, else exact JSON text"
    quirks = (
        "key not in the message: configured key (`primary_key_columns` when present)",
        "UPDATE before = `data` overlaid with `old` (changed columns only)",
        "bootstrap-insert → SNAPSHOT; database-*/table-* → DDL",
        "a DDL event's `ts` is milliseconds, a row event's seconds (Maxwell's DDLMap)",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        vendor_op = optional(obj, "type", str)
        if not vendor_op:
            raise Reject("missing field 'type'")
        db = optional(obj, "database", str) or None
        table = optional(obj, "table", str) or None
        ts = obj.get("ts")
        common = dict(
            db=db,
            table=table,
            seq=self._seq(obj),
            event_time=instant_from_epoch(ts, "ms" if vendor_op in _DDL else "s") if ts is not None else None,
            txn=str(obj["xid"]) if obj.get("xid") is not None else None,
            detail=vendor_op,
        )
        if vendor_op in _CONTROL:
            return [Change("HEARTBEAT", **common)]
        if vendor_op in _DDL:
            return [Change("DDL", ddl=optional(obj, "sql", str) or None, **common)]
        if vendor_op not in _ROW_OPS:
            raise Reject(f"unknown op '{vendor_op}'")
        if not table:
            raise Reject("missing field 'table'")
        op = _ROW_OPS[vendor_op]
        names = optional(obj, "primary_key_columns", list)
        key = tuple(str(n) for n in names) if names else ctx.key_columns(db, table)
        types = {k: v.lower() for k, v in ctx.column_types(db, table).items()}
        overrides: dict[str, str] = {}
        row = self.canon_row(optional(obj, "data", dict), types, ctx, "data", overrides)
        if op == "DELETE":
            before, after = row, None
        else:
            after = row
            old = optional(obj, "old", dict)
            before = (
                overlay_before(after, self.canon_row(old, types, ctx, "old", overrides), "old")
                if op == "UPDATE"
                else None
            )
        check_key(key, before if op == "DELETE" else after, "primary_key_columns" if names else "configuration")
        return [
            Change(op, key_columns=key, before=before, after=after, col_types={**types, **overrides} or None, **common)
        ]

    def canon_row(
        self, row: Any, types: Mapping[str, str], ctx: DecodeContext, what: str, overrides: dict[str, str]
    ) -> dict[str, str | None]:
        if row is None:
            raise Reject(f"missing field '{what}'")
        return super().canon_row(row, types, ctx, what, overrides)

    @staticmethod
    def _seq(obj: dict[str, Any]) -> tuple[int, ...]:
        position = optional(obj, "position", str)
        if not position:
            return ()
        file_name, _, offset = position.rpartition(":")
        suffix = file_name.rpartition(".")[2]
        if not (suffix.isdigit() and offset.isdigit()):
            raise Reject(f"field 'position' should look like 'binlog.000004:1234', got {position[:60]!r}")
        return (int(suffix), int(offset))

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        types = dict(change.col_types or {})
        vendor = {"INSERT": "insert", "UPDATE": "update", "DELETE": "delete", "SNAPSHOT": "bootstrap-insert"}
        msg: dict[str, Any] = {"database": change.db or "", "table": change.table or ""}
        if change.op in vendor:
            msg["type"] = vendor[change.op]
        else:
            msg["type"] = change.detail or ("table-alter" if change.op == "DDL" else "bootstrap-complete")
        if change.event_time:
            seconds = epoch_seconds_text(change.event_time)
            msg["ts"] = Num(_milliseconds(seconds) if msg["type"] in _DDL else seconds)
        if change.txn is not None:
            msg["xid"] = Num(change.txn) if change.txn.isdigit() else change.txn
        msg["commit"] = True
        if len(change.seq) == 2:
            msg["position"] = f"mysql-bin.{change.seq[0]:06d}:{change.seq[1]}"
        if change.op == "DDL":
            msg["sql"] = change.ddl or ""
        if change.op in ("INSERT", "UPDATE", "SNAPSHOT"):
            msg["data"] = self.encode_row(change.after or {}, types, ctx, numbers=True)
        if change.op == "DELETE":
            msg["data"] = self.encode_row(change.before or {}, types, ctx, numbers=True)
        if change.op == "UPDATE":
            after, before = change.after or {}, change.before or {}
            changed = {c: v for c, v in before.items() if c not in after or after[c] != v}
            msg["old"] = self.encode_row(changed, types, ctx, numbers=True)
        if change.key_columns and change.key_columns != ctx.key_columns(change.db, change.table):
            msg["primary_key_columns"] = list(change.key_columns)
        return dumps_exact(msg).encode("utf-8")


DECODER = MaxwellDecoder()


def _milliseconds(seconds: str) -> str:
    """Exact epoch seconds text → the same instant in milliseconds (a DDL event's ``ts``)."""
    return format((Decimal(seconds) * 1000).normalize(), "f")
