"""OMS DataWorks 2.0 JSON (seeds 000, 001): ``schema`` (source / column / pk) + ``payload``.

Decisions (see tests/unit/test_fmt_oms_dataworks.py):
* ``payload.op`` is case-sensitive (seed 000). INSERT / UPDATE / DELETE are row changes (full
  images in ``payload.before.data`` / ``payload.after.data``); TRUNCATE → TRUNCATE (needs a table);
  CREATE / ALTER / ERASE / QUERY / RENAME / CINDEX / DINDEX → DDL with ``payload.ddl.text``;
  HEARTBEAT / TRANSACTION_BEGIN / TRANSACTION_END / GTID / XACOMMIT / XAROLLBACK → HEARTBEAT
  (progress/control only). The vendor op is always the detail. Any other op → Reject.
* ``schema.column`` name/type → col_types (lower case) where no type is configured (a configured
  type decides); ``schema.pk`` → key, else configured key. db = ``schema.source.dbName``, schema =
  ``schema.source.schema``.
* ``payload.scn`` → seq = (scn,); the text "null" (the seed examples) or absence → (): the seed
  writes scn only with sequenceEnabled and never in full sync, and its own INSERT/UPDATE/DELETE
  examples carry "null", so such a stream has no ordering field at all and is ordered by queue
  position only (a per-message reject would quarantine the seed's examples).
* ``payload.timestamp.eventTime`` (13-digit epoch ms) → event_time.
* Values follow the OMS type table (:mod:`._oms_values`): binary Base64, TIMESTAMP ``sec.fraction``
  or the 13.9-digit ``ms.nanos`` form, DATETIME text or epoch ms (wall clock).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pipelines.formats._oms_values import convert_image, epoch_field, to_vendor
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    optional,
    require,
    seq_int,
)
from pipelines.values import checked_type, configured_over, epoch_seconds_text

_ROW_OPS = ("INSERT", "UPDATE", "DELETE")
_DDL_OPS = ("CREATE", "ALTER", "ERASE", "QUERY", "RENAME", "CINDEX", "DINDEX")
_PROGRESS_OPS = ("HEARTBEAT", "TRANSACTION_BEGIN", "TRANSACTION_END", "GTID", "XACOMMIT", "XAROLLBACK")


def _text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else dumps_exact(value)


class OmsDataWorksDecoder(JsonDecoder):
    format_id = "oms_dataworks"
    seeds = "000, 001"
    ordering = "payload.scn as (scn,); queue order when 'null' or absent (sequenceEnabled off, full sync)"
    table_and_key = "schema.source dbName / schema / table; key schema.pk, else configured key"
    type_mapping = (
        "schema.column types (lower case) + OMS type table: binary Base64, TIMESTAMP "
        "sec.fraction or 13-digit ms with 9-digit nanos → UTC, DATETIME wall clock"
    )
    quirks = (
        "long op list: DDL-ish ops → DDL, TRUNCATE → TRUNCATE, progress ops → HEARTBEAT; op case-sensitive (seed 000)",
        'scn written as the text "null" when there is none (seed 000, 001)',
        "time values as 13-digit ms + 9-digit nanos fraction (seed 000, 001)",
        "heartbeat messages have no schema (seed 000, 001)",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        return [self._decode(obj, ctx)]

    def _decode(self, obj: dict[str, Any], ctx: DecodeContext) -> Change:
        version = _text(obj.get("version"))
        if version is not None and version != "2.0":
            raise Reject(f"unsupported DataWorks protocol version {version[:20]!r} (only 2.0)")
        payload = require(obj, "payload", dict)
        op = require(payload, "op")
        schema = optional(obj, "schema", dict) or {}
        source = optional(schema, "source", dict) or {}
        db, table = _text(source.get("dbName")) or None, _text(source.get("table")) or None
        stamp = optional(payload, "timestamp", dict) or {}
        scn = _text(payload.get("scn"))
        common: dict[str, Any] = dict(
            db=db,
            table=table,
            schema=_text(source.get("schema")) or None,
            detail=op,
            seq=(seq_int(scn, "payload.scn"),) if scn and scn.strip().lower() != "null" else (),
            event_time=epoch_field(stamp.get("eventTime"), "ms", "payload.timestamp.eventTime"),
        )
        if op in _PROGRESS_OPS:
            return Change("HEARTBEAT", **common)
        if op in _DDL_OPS:
            ddl = require(payload, "ddl", dict)
            return Change("DDL", ddl=require(ddl, "text"), **common)
        if op not in _ROW_OPS and op != "TRUNCATE":
            raise Reject(f"unknown op '{op[:40]}'")
        if not table:
            raise Reject("missing table name (schema.source.table)")
        pk = optional(schema, "pk", list) or []
        if not all(isinstance(k, str) for k in pk):
            raise Reject("schema.pk should be a list of column names")
        key = tuple(pk) or ctx.key_columns(db, table)
        if op == "TRUNCATE":
            return Change("TRUNCATE", key_columns=key, **common)
        col_types = configured_over(self._column_types(schema), ctx.column_types(db, table))
        oracle = "oracle" in (_text(source.get("dbType")) or "").lower()
        images: dict[str, dict[str, str | None] | None] = {}
        for name, needed in (("before", op == "DELETE"), ("after", op != "DELETE")):
            holder = require(payload, name, dict) if needed else optional(payload, name, dict)
            data = (
                None
                if holder is None
                else (require(holder, "data", dict) if needed else optional(holder, "data", dict))
            )
            images[name] = (
                None if data is None else convert_image(data, col_types, f"payload.{name}.data", oracle=oracle)
            )
        if op == "INSERT":
            images["before"] = None
        return Change(
            op, key_columns=key, before=images["before"], after=images["after"], col_types=col_types or None, **common
        )

    @staticmethod
    def _column_types(schema: dict[str, Any]) -> dict[str, str]:
        columns = optional(schema, "column", list) or []
        types: dict[str, str] = {}
        for col in columns:
            if not isinstance(col, dict) or not isinstance(col.get("name"), str):
                raise Reject("schema.column entries should be objects with a name")
            if isinstance(col.get("type"), str):
                types[col["name"]] = checked_type(col["type"], col["name"]).lower()
        return types

    # ---------------------------------------------------------------- encode

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        types = change.col_types or {}
        op = change.detail if change.detail else change.op
        event_time = None
        if change.event_time:
            millis = Decimal(epoch_seconds_text(change.event_time)) * 1000
            event_time = Num(format(millis.normalize(), "f") if millis % 1 else str(int(millis)))
        payload: dict[str, Any] = {
            "before": None,
            "after": None,
            "op": op,
            "timestamp": {"eventTime": event_time},
            "ddl": None,
            "scn": str(change.seq[0]) if change.seq else "null",
        }
        msg: dict[str, Any] = {"version": "2.0"}
        if change.table is not None or change.db is not None:
            msg["schema"] = {
                "source": {
                    "dbType": "ob_mysql",
                    "dbVersion": None,
                    "dbName": change.db,
                    "schema": change.schema,
                    "table": change.table,
                },
                "column": [{"name": c, "type": t} for c, t in types.items()] or None,
                "pk": list(change.key_columns) or None,
            }
        msg["payload"] = payload
        if change.op == "DDL":
            payload["ddl"] = {"text": change.ddl}
        for name, image in (("before", change.before), ("after", change.after)):
            if image is not None:
                payload[name] = {"data": {c: to_vendor(types.get(c), v) for c, v in image.items()}}
        msg["extend"] = {}
        return dumps_exact(msg).encode("utf-8")


DECODER = OmsDataWorksDecoder()
