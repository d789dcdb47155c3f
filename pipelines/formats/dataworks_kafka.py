"""Alibaba DataWorks full-database real-time sync to Kafka (seed 002).

Shape: ``schema.dataColumn`` ([{name, type}]), ``schema.primaryKey``, ``schema.source``
(dbType, dbName, schemaName, tableName); ``payload.before/after.dataColumn`` ({column: value});
``payload.sequenceId``, ``payload.scn`` (Oracle), ``payload.op``, ``payload.timestamp.eventTime``
(13-digit ms), ``payload.ddl.text``.

Decisions (each pinned by a test in tests/unit/test_fmt_dataworks_kafka.py):

* Split updates. Without the "one Kafka record per update" option an update arrives as
  ``UPDATE_BEFOR`` then ``UPDATE_AFTER`` with the SAME sequenceId (seed 002). ``UPDATE_BEFOR``
  is emitted as op DELETE of its before-image (detail ``UPDATE_BEFOR``); ``UPDATE_AFTER`` as op
  UPDATE whose after-image is the full new row. Applied in order this is exact, also when the
  key changes (the old key is deleted, the new row written) and for keyless tables (one equal
  row removed, the new one added), and gold needs no join of the two halves.
  The one-message form (``UPDATE_AFTER`` carrying both images) is a plain UPDATE with before.
* Ordering: seq = (sequenceId, phase), phase 0 for ``UPDATE_BEFOR`` and 1 for everything
  else, so the two halves that share a sequenceId are ordered by the message itself, not
  by arrival. sequenceId ("1620457642589000001", a Java long: start millis * 10^6 + counter)
  is compared as one integer. A row change without sequenceId is rejected.
* ``payload.scn`` (Oracle only; the commit SCN, shared by the rows of one transaction) is
  kept as ``txn``, not used for ordering (sequenceId already orders every record).
* Types: the six DataWorks types. DATE is a 13-digit epoch-millisecond number: it is an
  instant, so the value becomes ``YYYY-MM-DDTHH:MM:SS[.fff]Z`` and col_types says
  ``timestamp`` (not ``date``, which would make gold drop the time of day). BYTES is Base64.
  LONG outside signed 64-bit is rejected. Other type names (not in the seed) map by family.
* Keyless tables: when primaryKey is null/empty (and configuration names no key), the
  RDS hidden row id column ``#alibaba_rds_row_id#`` is the key. It stays a column of the
  images, so the mirror carries it (it is the only way to tell duplicate rows apart).
* Ops: INSERT; UPDATE_BEFOR/UPDATE_AFTER as above; DELETE; TRUNCATE (op TRUNCATE, ddl text
  kept); CREATE, ALTER, ERASE, QUERY, RENAME, CINDEX, DINDEX → DDL; MHEARTBEAT,
  TRANSACTION_BEGIN/END, GTID, XACOMMIT, XAROLLBACK → HEARTBEAT. The seed's op list is
  case-sensitive, so ``insert`` is an unknown op.
"""

from __future__ import annotations

from typing import Any

from pipelines import values
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    optional,
    seq_int,
)

ROW_ID = "#alibaba_rds_row_id#"
_ROW_OPS = {
    "INSERT": "INSERT",
    "UPDATE_BEFOR": "DELETE",
    "UPDATE_AFTER": "UPDATE",
    "DELETE": "DELETE",
    "TRUNCATE": "TRUNCATE",
}
_DDL_OPS = {"CREATE", "ALTER", "ERASE", "QUERY", "RENAME", "CINDEX", "DINDEX"}
_CONTROL_OPS = {"MHEARTBEAT", "TRANSACTION_BEGIN", "TRANSACTION_END", "GTID", "XACOMMIT", "XAROLLBACK"}
#: DataWorks type → col_types text (lower case; DATE is an epoch-ms instant).
_TYPE_NAMES = {
    "LONG": "long",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "DATE": "timestamp",
    "BYTES": "bytes",
    "STRING": "string",
}
_VENDOR_TYPES = {v: k for k, v in _TYPE_NAMES.items()}
#: Families DataWorks writes as DATE: it has no other type for a date or a time.
_TIME_FAMILIES = ("date", "datetime", "timestamp")


def _col_type(vendor: str) -> str:
    return _TYPE_NAMES.get(vendor.upper(), vendor.lower()) if vendor.isascii() else vendor  # 'BYTEſ' is no BYTES


def _convert(column: str, value: Any, col_type: str | None) -> str | None:
    """One dataColumn value → canonical text, by its (col_types) type."""
    if value is None:
        return None
    try:
        if isinstance(value, (dict, list)):
            if col_type not in (None, "string", "json"):
                raise Reject(f"a JSON {type(value).__name__} does not fit type {col_type}")
            return dumps_exact(value)
        if col_type == "timestamp":  # DataWorks DATE: 13-digit epoch milliseconds
            if isinstance(value, bool) or not str(value).lstrip("-").isdigit():
                raise Reject(f"DATE must be epoch milliseconds, got {str(value)[:40]!r}")
            return values.instant_from_epoch(value, "ms")
        if col_type == "long":
            if isinstance(value, bool):
                raise Reject("LONG expected, got a boolean")
            return values.canon_int64(value)
        if col_type == "boolean":
            return values.canon_bool(value)
        if col_type is None or col_type == "string":
            if isinstance(value, bool):
                return "true" if value else "false"
            return str(value)
        return values.canonical(values.family(col_type), value)
    except Reject as exc:
        raise Reject(f"column '{column}': {exc}") from None


def _image(payload: dict, name: str, types: dict[str, str], ctx_types: dict[str, str]) -> dict | None:
    part = optional(payload, name, dict)
    if part is None:
        return None
    data = part.get("dataColumn")
    if not isinstance(data, dict):
        raise Reject(f"payload.{name}.dataColumn should be an object")
    return {col: _convert(col, v, types.get(col) or ctx_types.get(col)) for col, v in data.items()}


class DataWorksKafkaDecoder(JsonDecoder):
    format_id = "dataworks_kafka"
    seeds = "002"
    ordering = (
        "payload.sequenceId as one integer, then 0 for UPDATE_BEFOR / 1 otherwise "
        "(the two halves of an update share a sequenceId)"
    )
    table_and_key = (
        "schema.source.dbName / schemaName / tableName; key schema.primaryKey, else "
        "configured key, else the hidden #alibaba_rds_row_id# column"
    )
    type_mapping = (
        "six types: LONG → int, DOUBLE → float text, BOOLEAN, STRING, BYTES (Base64), "
        "DATE (13-digit epoch ms) → UTC instant, col_types 'timestamp'"
    )
    quirks = (
        "UPDATE_BEFOR (sic) + UPDATE_AFTER share one sequenceId: emitted as DELETE(before) + "
        "UPDATE(full after), ordered by a phase component (seed 002)",
        "one-message updates (UPDATE_AFTER with before and after) → UPDATE with both images (seed 002)",
        "DATE is epoch milliseconds → instant (seed 002)",
        "keyless tables keyed by #alibaba_rds_row_id# (seed 002)",
        "MHEARTBEAT and TRANSACTION_BEGIN/END, GTID, XACOMMIT, XAROLLBACK → HEARTBEAT (seed 002)",
        "Oracle payload.scn kept as txn (seed 002)",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        schema = optional(obj, "schema", dict) or {}
        payload = optional(obj, "payload", dict)
        if payload is None:
            raise Reject("missing field 'payload'")
        vendor_op = optional(payload, "op", str)
        if vendor_op is None:
            raise Reject("missing field 'payload.op'")
        source = optional(schema, "source", dict) or {}
        db = optional(source, "dbName", str)
        schema_name = optional(source, "schemaName", str)
        table = optional(source, "tableName", str)
        timestamp = optional(payload, "timestamp", dict) or {}
        event_ms = timestamp.get("eventTime")
        event_time = values.instant_from_epoch(event_ms, "ms") if event_ms is not None else None
        scn = payload.get("scn")
        txn = str(scn) if scn is not None and str(scn) not in ("", "null") else None
        common = dict(db=db, schema=schema_name, table=table, event_time=event_time, txn=txn, detail=vendor_op)

        seq_id = payload.get("sequenceId")
        if vendor_op in _CONTROL_OPS or vendor_op in _DDL_OPS:
            seq = (seq_int(seq_id, "payload.sequenceId"), 1) if seq_id is not None else ()
            if vendor_op in _CONTROL_OPS:
                return [Change(op="HEARTBEAT", seq=seq, **common)]
            return [Change(op="DDL", seq=seq, ddl=_ddl_text(payload), **common)]
        if vendor_op not in _ROW_OPS:
            raise Reject(f"unknown op '{vendor_op}'")
        if not table:
            raise Reject("missing table name (schema.source.tableName)")
        if seq_id is None:
            raise Reject("missing field 'payload.sequenceId' (needed to order the change)")
        seq = (seq_int(seq_id, "payload.sequenceId"), 0 if vendor_op == "UPDATE_BEFOR" else 1)

        types, col_types = self._types(schema, ctx, db, table)
        ctx_types = ctx.column_types(db, table)
        if vendor_op == "TRUNCATE":
            return [Change(op="TRUNCATE", seq=seq, ddl=_ddl_text(payload), col_types=col_types, **common)]
        before = _image(payload, "before", types, ctx_types)
        after = _image(payload, "after", types, ctx_types)
        op = _ROW_OPS[vendor_op]
        if op == "INSERT":
            if after is None:
                raise Reject("INSERT without payload.after")
            before = None
        elif op == "DELETE":
            if before is None:
                raise Reject(f"{vendor_op} without payload.before")
            after = None
        elif after is None:
            raise Reject("UPDATE_AFTER without payload.after")
        key = self._key(schema, ctx, db, table, types, before or after or {})
        return [Change(op=op, key_columns=key, before=before, after=after, col_types=col_types, seq=seq, **common)]

    @staticmethod
    def _types(schema: dict, ctx: DecodeContext, db: str | None, table: str) -> tuple[dict, dict | None]:
        columns = optional(schema, "dataColumn", list)
        if columns is None:
            configured = ctx.column_types(db, table)
            return {c: t.lower() for c, t in configured.items()}, (dict(configured) or None)
        types: dict[str, str] = {}
        for col in columns:
            if not isinstance(col, dict) or not _is_text(col.get("name")) or not _is_text(col.get("type")):
                raise Reject("schema.dataColumn entries must be objects with string 'name' and 'type'")
            types[col["name"]] = _col_type(values.checked_type(col["type"], col["name"]))
        return types, dict(types)

    @staticmethod
    def _key(schema: dict, ctx: DecodeContext, db: str | None, table: str, types: dict, image: dict) -> tuple:
        pk = optional(schema, "primaryKey", list)
        if pk:
            if not all(_is_text(c) for c in pk):
                raise Reject("schema.primaryKey must list column names")
            return tuple(pk)
        configured = ctx.key_columns(db, table)
        if configured:
            return configured
        return (ROW_ID,) if ROW_ID in types or ROW_ID in image else ()

    # ------------------------------------------------------------ encoder

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        types = change.col_types or {}
        key = list(change.key_columns) if change.key_columns and change.key_columns != (ROW_ID,) else None
        source = None
        if change.db is not None or change.table is not None or change.schema is not None:
            source = {"dbType": "MySQL", "dbName": change.db, "tableName": change.table}
            if change.schema is not None:
                source["schemaName"] = change.schema
        schema = {
            "dataColumn": [{"name": c, "type": _vendor_type(t)} for c, t in types.items()]
            if change.col_types is not None
            else None,
            "primaryKey": key,
            "source": source,
        }
        op = change.detail or _default_vendor_op(change)

        def image(img: dict | None) -> dict | None:
            if img is None:
                return None
            return {"dataColumn": {c: _encode_value(v, types.get(c)) for c, v in img.items()}}

        payload: dict[str, Any] = {
            "before": image(change.before),
            "after": image(change.after),
            "sequenceId": str(change.seq[0]) if change.seq else None,
            "op": op,
            "timestamp": {"eventTime": Num(values.epoch_ms_text(change.event_time))} if change.event_time else None,
            "ddl": {"text": change.ddl} if change.ddl is not None else None,
        }
        if change.txn is not None:
            payload["scn"] = change.txn
        return dumps_exact({"schema": schema, "payload": payload, "version": "0.0.1"}).encode("utf-8")


def _is_text(value: Any) -> bool:
    """A JSON string (Num is a str subclass holding a JSON number)."""
    return isinstance(value, str) and not isinstance(value, Num)


def _ddl_text(payload: dict) -> str | None:
    ddl = optional(payload, "ddl", dict)
    return optional(ddl, "text", str) if ddl else None


def _default_vendor_op(change: Change) -> str:
    return {
        "INSERT": "INSERT",
        "SNAPSHOT": "INSERT",
        "UPDATE": "UPDATE_AFTER",
        "DELETE": "DELETE",
        "TRUNCATE": "TRUNCATE",
        "DDL": "QUERY",
        "HEARTBEAT": "MHEARTBEAT",
    }[change.op]


def _date_millis(value: str) -> str:
    """A date / time column's canonical text → the epoch milliseconds a DataWorks DATE holds (seed 002:
    "13-digit Unix timestamp with millisecond precision"). A column value is written exactly or refused
    (a finer value would read back as another value); the commit time is truncated instead
    (:func:`pipelines.values.times.epoch_ms_text`)."""
    if values.epoch_nanos(value) % 10**6:
        raise ValueError(f"DataWorks DATE holds milliseconds only: {value}")
    return values.epoch_ms_text(value)


def _vendor_type(col_type: str) -> str:
    """The DataWorks type a column is written with: DATE (epoch ms) for every date and time of day."""
    if values.family(col_type) in _TIME_FAMILIES:
        return "DATE"
    return _VENDOR_TYPES.get(col_type, col_type.upper())


def _encode_value(value: str | None, col_type: str | None) -> Any:
    if value is None:
        return None
    if col_type == "long":
        return Num(value)
    if col_type == "double":
        # NaN / Infinity cannot be JSON numbers: written as strings, read back the same
        return Num(value) if values.JSON_NUMBER_RE.fullmatch(value) else value
    if col_type == "boolean":
        return value == "true"
    if values.family(col_type) in _TIME_FAMILIES:  # DATE: 13-digit ms, read back as the UTC instant
        return Num(_date_millis(value))
    return value


DECODER = DataWorksKafkaDecoder()
