"""OMS Default JSON family (seeds 000, 001): ``prevStruct`` / ``postStruct`` / ``allMetaData`` / ``recordType``.

Shared by ``oms_default`` and ``oms_default_extend`` (which adds ``__light_type`` column types).

Decisions (see tests/unit/test_fmt_oms_default.py):
* ``storeDataSequence`` is "{timestamp}{increment of at most five digits}" (seed 000/001 field
  text). OMS timestamps in this format are epoch seconds (``allMetaData.timestamp``, ``checkpoint``),
  so the first 10 digits are the timestamp and the rest (1-5 digits) the increment:
  seq = (timestamp, increment). A value of 16-18 digits is read as a 13-digit millisecond timestamp
  plus increment. Anything else is rejected. Absent/null on full load ``ROW``, DDL and HEARTBEAT
  → seq = () (seed 000/001: "not applicable for full data synchronization"). An INSERT, UPDATE or
  DELETE without it is rejected: it has no usable ordering, and () would sort it before every
  real sequence (a DELETE would lose to the row it deletes as "stale").
  The encoder zero-pads the increment to 5 digits, so the number also sorts as a LONG.
* ``recordType`` ROW (full load) → SNAPSHOT; DDL statement from ``postStruct.ddl`` with
  ``allMetaData.ddlType`` as detail; HEARTBEAT may carry no table.
* Key: ``record_primary_key`` split on ``\\u0001`` (``record_primary_value`` is not needed: the
  images carry the key values); else the configured key.
* ``db`` is kept whole as ``tenant.database`` (seed 000).
* Default messages carry no types: ``ctx.column_types(db, table)`` drives the OMS value rules
  (:mod:`pipelines.formats._oms_values`); untyped values keep their exact text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pipelines.formats._oms_values import convert_image, epoch_field, text_field, to_vendor
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    optional,
    require,
)
from pipelines.values import configured_over, epoch_seconds_text

_ROW_KINDS = {"INSERT": "INSERT", "UPDATE": "UPDATE", "DELETE": "DELETE", "ROW": "SNAPSHOT"}
_SEP = "\u0001"


def split_store_sequence(value: Any) -> tuple[int, ...]:
    """``storeDataSequence`` → (timestamp, increment); () when absent (see module doc)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null")):
        return ()
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()):
        raise Reject(f"ordering field 'storeDataSequence' is not a non-negative integer: {text[:40]!r}")
    cut = 10 if 11 <= len(text) <= 15 else 13 if 16 <= len(text) <= 18 else 0
    if not cut:
        raise Reject(f"storeDataSequence {text!r} is not a 10- or 13-digit timestamp followed by a 1-5 digit increment")
    return int(text[:cut]), int(text[cut:])


def join_store_sequence(seq: tuple[int, ...]) -> Num | None:
    if not seq:
        return None
    timestamp, increment = seq
    return Num(f"{timestamp}{increment:05d}")


class OmsDefaultFamily(JsonDecoder):
    """Base decoder; subclasses override :meth:`message_types` / :meth:`write_types`."""

    ordering = (
        "allMetaData.storeDataSequence split as (timestamp, increment), required on INSERT/UPDATE/DELETE; "
        "none for full load (ROW)"
    )
    table_and_key = (
        "allMetaData.db (tenant.database) + table_name; key record_primary_key split on \\u0001, else configured key"
    )

    #: Image entries that are metadata, not columns.
    meta_columns: ClassVar[tuple[str, ...]] = ()

    # ---------------------------------------------------------------- hooks

    def message_types(self, obj: dict[str, Any]) -> dict[str, str]:
        """Column types the message itself states (none in Default)."""
        return {}

    def write_types(self, image: dict[str, Any], change: Change) -> None:
        """Add the format's own type annotations to an encoded image (none in Default)."""

    # ---------------------------------------------------------------- decode

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        return [self._decode(obj, ctx)]

    def _decode(self, obj: dict[str, Any], ctx: DecodeContext) -> Change:
        kind = require(obj, "recordType")
        meta = require(obj, "allMetaData", dict)
        db = text_field(meta, "db") or None
        table = text_field(meta, "table_name") or None
        common: dict[str, Any] = dict(
            db=db,
            table=table,
            seq=split_store_sequence(meta.get("storeDataSequence")),
            event_time=epoch_field(meta.get("timestamp"), "s", "allMetaData.timestamp"),
            txn=text_field(meta, "transId"),
            detail=kind,
        )
        if kind == "HEARTBEAT":
            return Change("HEARTBEAT", **common)
        if kind == "DDL":
            post = require(obj, "postStruct", dict)
            common["detail"] = text_field(meta, "ddlType") or "DDL"
            return Change("DDL", ddl=require(post, "ddl"), **common)
        op = _ROW_KINDS.get(kind)
        if op is None:
            raise Reject(f"unknown op '{kind[:40]}'")
        if not table:
            raise Reject("missing table name (allMetaData.table_name)")
        col_types = configured_over(self.message_types(obj), ctx.column_types(db, table))
        oracle = "ORACLE" in (text_field(meta, "dbType") or "").upper()
        images = {}
        for name, needed in (("prevStruct", op == "DELETE"), ("postStruct", op != "DELETE")):
            raw = require(obj, name, dict) if needed else optional(obj, name, dict)
            images[name] = (
                None if raw is None else convert_image(raw, col_types, name, oracle=oracle, skip=self.meta_columns)
            )
        if op != "UPDATE":  # INSERT/ROW carry only postStruct, DELETE only prevStruct (seed 000)
            images["prevStruct" if op != "DELETE" else "postStruct"] = None
        if op != "SNAPSHOT" and not common["seq"]:
            raise Reject(
                f"{kind} without allMetaData.storeDataSequence: an incremental change needs it to be "
                "ordered (OMS writes it unless disabled in the source's source.json)"
            )
        key_text = text_field(meta, "record_primary_key")
        key = tuple(k for k in key_text.split(_SEP) if k) if key_text else ()
        return Change(
            op,
            key_columns=key or ctx.key_columns(db, table),
            before=images["prevStruct"],
            after=images["postStruct"],
            col_types=col_types or None,
            **common,
        )

    # ---------------------------------------------------------------- encode

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        types = change.col_types or {}
        meta: dict[str, Any] = {
            "checkpoint": None,
            "record_primary_key": None,
            "record_primary_value": None,
            "source_identity": None,
            "dbType": "OB_MYSQL",
            "storeDataSequence": join_store_sequence(change.seq),
            "table_name": change.table,
            "db": change.db,
            "timestamp": epoch_seconds_text(change.event_time) if change.event_time else None,
            "uniqueId": None,
            "transId": change.txn,
        }
        msg: dict[str, Any] = {"allMetaData": meta, "prevStruct": None, "postStruct": None}
        if change.op == "DDL":
            meta["ddlType"] = change.detail if change.detail not in (None, "DDL") else None
            msg["postStruct"] = {"ddl": change.ddl}
            msg["recordType"] = "DDL"
            return dumps_exact(msg).encode("utf-8")
        msg["recordType"] = {"SNAPSHOT": "ROW"}.get(change.op, change.op)
        for name, image in (("prevStruct", change.before), ("postStruct", change.after)):
            if image is not None and change.op != "HEARTBEAT":
                out = {col: to_vendor(types.get(col), val) for col, val in image.items()}
                self.write_types(out, change)
                msg[name] = out
        if change.key_columns and change.op != "HEARTBEAT":
            row = change.after if change.after is not None else change.before or {}
            meta["record_primary_key"] = _SEP.join(change.key_columns)
            meta["record_primary_value"] = _SEP.join(
                "" if row.get(k) is None else str(to_vendor(types.get(k), row.get(k))) for k in change.key_columns
            )
        return dumps_exact(msg).encode("utf-8")
