"""SharePlex JSON family: ``data`` / ``meta`` / ``key`` / ``sql`` (OMS seeds 000, 001; DTS seed 004).

Shared by ``oms_shareplex`` and ``dts_shareplex``; they differ in the op names they accept.

Decisions (see tests/unit/test_fmt_shareplex.py):
* UPDATE: ``data`` holds only the changed columns → after = those (partial), ``changed`` = their
  names; ``key`` holds the before-image (seed 000/001 "values of the data before the change";
  seed 004's ``key`` also carries the old value of the changed column) → before.
* seq = (meta.scn, meta.seq) as integers; () when scn is absent or the text "null" (DDL), which
  a row change or TRUNCATE may not be: without an ordering it is rejected, never sorted before
  every real one. ``meta.seq`` (the place in the transaction, from 1) is required where the
  format always writes it (DTS, seed 004: scn is the transaction's SCN, shared by its rows); OMS
  writes it only with transactionEnabled (seed 000/001) while its scn ("timestamp + increment")
  already orders each message, so there a missing seq gives (scn,). event_time = ``meta.time``
  read as UTC (seed 004 states UTC; seed 000/001 give no zone).
* Key: configured key. SharePlex names no key columns; when none is configured and the message
  has a usable ``meta.rowid`` (DTS: the Oracle ROWID; OMS: ``{db.table}-{key values}``), the
  synthetic column ``__rowid`` (the rowid text) is added to the images and used as the key, so
  partial UPDATEs of keyless tables still land on their row. A rowid that ends in ``-`` (OMS DDL,
  no key values) is not usable.
* No types in the messages: ``ctx.column_types`` drives the OMS value rules; untyped → exact text.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pipelines.formats._oms_values import convert_image, text_field, to_vendor
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    op_name,
    optional,
    require,
    seq_int,
    split_table,
)
from pipelines.values import canon_instant

ROWID_COLUMN = "__rowid"


class SharePlexFamily(JsonDecoder):
    ordering = "(meta.scn, meta.seq) as integers, scn required on row changes; none when scn is 'null' (DDL)"
    table_and_key = "meta.table ({db}.{table}); configured key, else meta.rowid as synthetic key column __rowid"
    type_mapping = (
        "no types in the message: configured column types + OMS type table; untyped values keep their exact text"
    )

    #: vendor op → canonical op (HEARTBEAT for ops that change no row by themselves).
    op_map: ClassVar[dict[str, str]] = {"ins": "INSERT", "upd": "UPDATE", "del": "DELETE", "ddl": "DDL"}
    #: Oracle sources: a DATE value carries a time of day.
    oracle: ClassVar[bool] = False
    #: True where every row change carries ``meta.seq`` (DTS); False: (scn,) without it (OMS).
    seq_required: ClassVar[bool] = False

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        return [self._decode(obj, ctx)]

    def _decode(self, obj: dict[str, Any], ctx: DecodeContext) -> Change:
        meta = require(obj, "meta", dict)
        op_text = require(meta, "op")
        op = self.op_map.get(op_name(op_text).lower())
        if op is None:
            raise Reject(f"unknown op '{op_text[:40]}'")
        qualified = optional(meta, "table")
        db, table = split_table(qualified) if qualified else (None, None)
        scn = text_field(meta, "scn")
        seq: tuple[int, ...] = ()
        if scn and scn.strip().lower() != "null":
            seq = (seq_int(scn, "meta.scn"),)
            if meta.get("seq") is not None:
                seq += (seq_int(meta["seq"], "meta.seq"),)
            elif self.seq_required and op not in ("HEARTBEAT", "DDL"):
                raise Reject(f"{op_text[:40]} without meta.seq: its place in transaction scn {seq[0]} is unknown")
        when = text_field(meta, "time")
        common: dict[str, Any] = dict(
            db=db,
            table=table,
            seq=seq,
            txn=text_field(meta, "trans"),
            detail=op_text,
            event_time=canon_instant(when) if when else None,
        )
        if op == "HEARTBEAT":
            return Change("HEARTBEAT", **common)
        if op == "DDL":
            sql = optional(obj, "sql", dict) or {}
            return Change("DDL", ddl=optional(sql, "ddl"), **common)
        if not table:
            raise Reject("missing table name (meta.table)")
        if not seq:
            raise Reject(f"{op_text[:40]} without meta.scn: a row change needs it to be ordered")
        if op == "TRUNCATE":
            return Change("TRUNCATE", key_columns=ctx.key_columns(db, table), **common)
        col_types = ctx.column_types(db, table)
        data = convert_image(require(obj, "data", dict), col_types, "data", oracle=self.oracle)
        before = after = changed = None
        if op == "INSERT":
            after = data
        elif op == "DELETE":
            before = data
        else:
            after, changed = data, tuple(data)
            key = optional(obj, "key", dict)
            before = convert_image(key, col_types, "key", oracle=self.oracle) if key is not None else None
        key_columns = ctx.key_columns(db, table)
        rowid = text_field(meta, "rowid")
        if not key_columns and rowid and not rowid.endswith("-"):
            key_columns = (ROWID_COLUMN,)
            for image in (before, after):
                if image is not None:
                    image[ROWID_COLUMN] = rowid
            if changed is not None:
                changed = changed + (ROWID_COLUMN,)
        return Change(
            op,
            key_columns=key_columns,
            before=before,
            after=after,
            changed=changed,
            col_types=col_types or None,
            **common,
        )

    # ---------------------------------------------------------------- encode

    _default_codes: ClassVar[dict[str, str]] = {"INSERT": "ins", "UPDATE": "upd", "DELETE": "del", "DDL": "ddl"}

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        if change.detail and self.op_map.get(change.detail.lower()) == change.op:
            op_text = change.detail
        elif change.op in self._default_codes:
            op_text = self._default_codes[change.op]
        else:
            raise ValueError(f"{self.format_id} cannot express op {change.op}")
        types = change.col_types or {}
        qualified = f"{change.db}.{change.table}" if change.db else change.table
        meta: dict[str, Any] = {
            "time": change.event_time[:-1] if change.event_time else None,
            "op": op_text,
            "scn": str(change.seq[0]) if change.seq else "null",
            "seq": Num(str(change.seq[1])) if len(change.seq) > 1 else Num("0"),
            "table": qualified,
            "rowid": None,
            "trans": change.txn,
        }
        if len(change.seq) == 1:  # (scn,): OMS without transactionEnabled writes no seq
            del meta["seq"]
        msg: dict[str, Any] = {"data": {}, "meta": meta}

        def image(img: dict[str, str | None]) -> dict[str, Any]:
            if ROWID_COLUMN in change.key_columns and ROWID_COLUMN in img:
                meta["rowid"] = img[ROWID_COLUMN]
            return {c: to_vendor(types.get(c), v) for c, v in img.items() if c != ROWID_COLUMN}

        if change.op == "DDL":
            msg["sql"] = {"ddl": change.ddl}
        elif change.op in ("INSERT", "UPDATE") and change.after is not None:
            msg["data"] = image(change.after)
        elif change.op == "DELETE" and change.before is not None:
            msg["data"] = image(change.before)
        if change.op == "UPDATE" and change.before is not None:
            msg["key"] = image(change.before)
        return dumps_exact(msg).encode("utf-8")
