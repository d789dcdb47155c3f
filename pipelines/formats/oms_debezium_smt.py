"""OMS "DebeziumSmt" serialization (seed 000): only the row image plus ``"__deleted"``.

``{"field1": "after_value1", "__deleted": "false"}``. The message names no table, no key, no op
and no position, so:

* table from configuration (``ctx.default_table``, "db.table"; ``--table`` on the CLI) — without
  it every message is rejected; key and types from configuration too;
* ``__deleted`` "true" (or JSON true) → DELETE of that row image; "false" or absent → UPDATE
  carrying the full row (an upsert: INSERT and UPDATE look identical, seed 000 shows the same
  message for both); the ``detail`` is ``__deleted=<value>``;
* seq = (): the queue order is the only order.
Values use the Debezium encodings of :mod:`pipelines.formats._debezium_family`.
"""

from __future__ import annotations

from typing import Any

from pipelines.formats._debezium_family import canonical_image, from_canonical
from pipelines.formats.base import Change, DecodeContext, JsonDecoder, Reject, dumps_exact, split_table

DELETED = "__deleted"


class OmsDebeziumSmtDecoder(JsonDecoder):
    format_id = "oms_debezium_smt"
    seeds = "000"
    ordering = "none: queue order (seq = ())"
    table_and_key = "table, key and types from configuration (--table db.table); the message names none"
    type_mapping = "configured source types with the Debezium encodings (BYTES Base16, DATE days, TIME µs, DATETIME ms)"
    quirks = (
        "INSERT and UPDATE are indistinguishable: both decode as an UPDATE of the full row (seed 000)",
        "__deleted 'true' marks a DELETE whose image is the deleted row (seed 000)",
        "no table in the message: configured default table required (seed 000)",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        if not ctx.default_table:
            raise Reject(
                "DebeziumSmt messages name no table: pass --table db.table (or set the source's table in the YAML)"
            )
        db, table = split_table(ctx.default_table)
        flag = obj.get(DELETED, "false")
        if isinstance(flag, bool):
            flag = "true" if flag else "false"
        if not isinstance(flag, str) or flag.lower() not in ("true", "false"):
            raise Reject(f'field \'{DELETED}\' should be "true" or "false", got {dumps_exact(flag)[:40]}')
        row = {k: v for k, v in obj.items() if k != DELETED}
        image, types = canonical_image(row, "row", {}, ctx.column_types(db, table))
        deleted = flag.lower() == "true"
        return [
            Change(
                op="DELETE" if deleted else "UPDATE",
                db=db,
                table=table,
                key_columns=ctx.key_columns(db, table),
                before=image if deleted else None,
                after=None if deleted else image,
                col_types=types or None,
                detail=f"{DELETED}={flag}",
            )
        ]

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        if change.op not in ("INSERT", "UPDATE", "SNAPSHOT", "DELETE"):
            raise ValueError(f"DebeziumSmt cannot express op {change.op}")
        image = change.before if change.op == "DELETE" else change.after
        types = change.col_types or {}
        msg: dict[str, Any] = {c: from_canonical(v, types.get(c)) for c, v in (image or {}).items()}
        msg[DELETED] = "true" if change.op == "DELETE" else "false"
        return dumps_exact(msg).encode("utf-8")


DECODER = OmsDebeziumSmtDecoder()
