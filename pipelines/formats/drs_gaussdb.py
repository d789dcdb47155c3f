"""Huawei Cloud DRS, GaussDB / PostgreSQL to Kafka, JSON (seed 003, GaussDB section).

Shape (Canal-like): ``columnType`` ({column: PostgreSQL type}), ``dbType``, ``database``,
``schema``, ``table``, ``opType`` and ``type`` (INSERT/UPDATE/DELETE/DDL), ``id`` (DRS sequence,
monotonic), ``es`` (commit ms), ``isDdl``, ``sql``, ``data`` / ``old`` (arrays of rows, all
values as text), ``pkNames``.

Decisions (each pinned by a test in tests/unit/test_fmt_drs_gaussdb.py):

* Ordering: seq = (id,). event_time = es; for PostgreSQL sources the seed says es is the
  commit time of the *previous* transaction, so it is only approximate there.
* The op is ``opType``; ``type`` must agree when both are present. Full sync uses INIT
  (→ SNAPSHOT) and INIT_DDL (→ DDL) as in the DRS JSON section of the same seed.
* UPDATE: ``data[i]`` is the new row, ``old[i]`` the old one (the seed's example carries every
  column in old); before = data[i] overlaid with old[i], so a Canal-style partial ``old``
  also gives the full before-image. DELETE: the field table puts the deleted row in
  ``old``; ``data`` is read when ``old`` is empty (JSON-C style).
* ``sqlType`` holds DRS-internal type numbers, not JDBC ones: ignored. col_types =
  ``columnType`` lower-cased (the seed calls a jsonb column's type ``json``).
* Values are PostgreSQL text: bytea is hex (``62797465...``, with or without ``\\x``) → Base64;
  a ``[106, 103]`` byte list (the DRS MySQL form) is also read; timestamp with time zone
  ``2010-01-01 14:30:00+08`` (hour-only offset) → UTC instant; timestamp without time zone
  → wall clock; boolean true/false/t/f; ranges, bit strings, json, arrays ``{1,2}``,
  intervals, money → kept as their exact text.
* pkNames null → configured key → () (keyless).
"""

from __future__ import annotations

import base64
import re
from typing import Any

from pipelines import values
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    is_kind,
    optional,
    seq_int,
)

_OPS = {"INSERT": "INSERT", "UPDATE": "UPDATE", "DELETE": "DELETE", "INIT": "SNAPSHOT", "DDL": "DDL", "INIT_DDL": "DDL"}
_SHORT_OFFSET = re.compile(r"([+-]\d{2})(?::?(\d{2}))?(?::?\d{2})?$", re.ASCII)
#: PostgreSQL types that values.family would misread: kept as text.
_TEXT_TYPES = {"money", "bit", "bit varying", "varbit", "interval"}


@values.type_cache
def _family(col_type: str | None) -> str:
    if not col_type:
        return "string"
    # "timestamp(6) without time zone": values.parse_type reads args only at the end
    col_type = re.sub(r"^(\w+)\s*\((\d+)\)\s+(with(?:out)? time zone)$", r"\1 \3(\2)", col_type.strip(), flags=re.ASCII)
    base = values.parse_type(col_type)[0]
    if base in _TEXT_TYPES or "[]" in col_type or col_type.startswith("_"):
        return "string"
    return values.family(col_type)


def _reported_type(col_type: str) -> str:
    """PostgreSQL ``bit(n)`` is a bit string ('0101'), not MySQL's Base64 BIT: report it as
    ``bit(n) as text`` so the mirror keeps it as STRING (values.family reads that as text)."""
    return f"{col_type} as text" if values.parse_type(col_type)[0] == "bit" else col_type


def _pg_instant(text: str) -> str:
    """PostgreSQL timestamptz text: offset may be ``+08`` or ``+05:30``."""
    m = _SHORT_OFFSET.search(text)
    if m and (" " in text[: m.start()] or "T" in text[: m.start()]):
        text = f"{text[: m.start()]}{m.group(1)}:{m.group(2) or '00'}"
    return values.canon_instant(text)


def convert(column: str, value: Any, col_type: str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        value = dumps_exact(value)
    fam = _family(col_type)
    try:
        if fam == "bytes":
            text = str(value)
            if text.startswith("["):
                return values.base64_from_byte_list(_byte_list(text))
            return values.base64_from_hex(text)
        if fam == "timestamp":
            return _pg_instant(str(value))
        if fam == "bool" and isinstance(value, bool):
            return "true" if value else "false"
        return values.canonical(fam, value if isinstance(value, str) else str(value))
    except Reject as exc:
        raise Reject(f"column '{column}' ({col_type}): {exc}") from None


def _byte_list(text: str) -> list:
    inner = text.strip()[1:-1].strip() if text.strip().endswith("]") else None
    if inner is None:
        raise Reject(f"not a byte list: {text[:40]!r}")
    return [p.strip() for p in inner.split(",")] if inner else []


class DrsGaussdbDecoder(JsonDecoder):
    format_id = "drs_gaussdb"
    seeds = "003"
    ordering = "id (DRS event sequence, monotonic): (id,)"
    table_and_key = "database, schema, table; key pkNames, else configured key"
    type_mapping = (
        "columnType (PostgreSQL types): bytea hex → Base64, timestamptz → UTC instant, "
        "timestamp → wall clock, numeric exact, ranges/json/bit/arrays kept as text"
    )
    quirks = (
        "opType and type both carry the op (seed 003)",
        "bytea as bare hex → Base64 (seed 003)",
        "timestamptz range/offset '+08' (hour-only) → normalised (seed 003)",
        "old holds the full before-image; DELETE row in old (seed 003)",
        "sqlType numbers are DRS-internal, ignored (seed 003)",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        op_type = optional(obj, "opType", str)
        kind = optional(obj, "type", str)
        if op_type and kind and op_type != kind:
            raise Reject(f"opType '{op_type}' and type '{kind}' disagree")
        vendor_op = op_type or kind
        if vendor_op is None:
            raise Reject("missing field 'opType'")
        db = optional(obj, "database", str) or None
        schema = optional(obj, "schema", str) or None
        table = optional(obj, "table", str) or None
        es = obj.get("es")
        seq_id = obj.get("id")
        common = dict(
            db=db,
            schema=schema,
            table=table,
            detail=vendor_op,
            seq=(seq_int(seq_id, "id"),) if seq_id is not None else (),
            event_time=values.instant_from_epoch(es, "ms") if es is not None else None,
        )
        op = _OPS.get(vendor_op)
        if op is None:
            raise Reject(f"unknown op '{vendor_op}'")
        if op == "DDL" or obj.get("isDdl") is True:
            return [Change(op="DDL", ddl=optional(obj, "sql", str), **common)]
        if not table:
            raise Reject("missing table name (field 'table')")
        if seq_id is None:
            raise Reject("missing ordering field 'id'")
        column_type = optional(obj, "columnType", dict)
        if column_type is not None:
            if not all(is_kind(t, str) for t in column_type.values()):
                raise Reject("columnType values should be type names")
            checked = {c: values.checked_type(t, c).lower() for c, t in column_type.items()}
            col_types: dict[str, str] | None = {c: _reported_type(t) for c, t in checked.items()}
        else:
            col_types = {c: t.lower() for c, t in ctx.column_types(db, table).items()} or None
        types = col_types or {}
        pk = optional(obj, "pkNames", list)
        if pk and not all(is_kind(c, str) for c in pk):
            raise Reject("pkNames must list column names")
        key = tuple(pk) if pk else ctx.key_columns(db, table)
        data = _rows(obj, "data", types)
        old = _rows(obj, "old", types)
        row = dict(key_columns=key, col_types=col_types, **common)
        if op in ("INSERT", "SNAPSHOT"):
            if not data:
                raise Reject(f"{vendor_op} without rows in 'data'")
            return [Change(op=op, after=r, **row) for r in data]
        if op == "DELETE":
            rows = old or data
            if not rows:
                raise Reject("DELETE without rows in 'old' or 'data'")
            return [Change(op=op, before=r, **row) for r in rows]
        if not data:
            raise Reject("UPDATE without rows in 'data'")
        if old and len(old) != len(data):
            raise Reject(f"UPDATE has {len(data)} rows in 'data' but {len(old)} in 'old'")
        return [
            Change(op=op, before={**after, **old[i]} if old else None, after=after, **row)
            for i, after in enumerate(data)
        ]

    # ------------------------------------------------------------ encoder

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        vendor_op = change.detail or {
            "INSERT": "INSERT",
            "UPDATE": "UPDATE",
            "DELETE": "DELETE",
            "SNAPSHOT": "INIT",
            "DDL": "DDL",
        }.get(change.op)
        if vendor_op is None:
            raise ValueError(f"drs_gaussdb cannot express op {change.op}")
        types = change.col_types or {}

        def rows(img: dict | None) -> list | None:
            return None if img is None else [{c: _encode_value(v, types.get(c)) for c, v in img.items()}]

        data, old = rows(change.after), None
        if change.op == "DELETE":
            data, old = None, rows(change.before)
        elif change.op == "UPDATE" and change.before is not None:
            old = rows(change.before)
        out = {
            "columnType": {c: t.removesuffix(" as text") for c, t in change.col_types.items()}
            if change.col_types
            else change.col_types,
            "dbType": "GaussDB Primary/Standby",
            "schema": change.schema,
            "opType": vendor_op,
            "id": Num(str(change.seq[0])) if change.seq else None,
            "es": Num(values.epoch_ms_text(change.event_time)) if change.event_time else None,
            "ts": None,
            "database": change.db,
            "table": change.table,
            "type": vendor_op,
            "isDdl": change.op == "DDL",
            "sql": change.ddl if change.op == "DDL" else "",
            "sqlType": None,
            "data": data,
            "old": old,
            "pkNames": list(change.key_columns) or None,
        }
        return dumps_exact(out).encode("utf-8")


def _rows(obj: dict, name: str, types: dict[str, str]) -> list[dict]:
    rows = optional(obj, name, list) or []
    out = []
    for r in rows:
        if not isinstance(r, dict):
            raise Reject(f"'{name}' should be an array of row objects")
        out.append({c: convert(c, v, types.get(c)) for c, v in r.items()})
    return out


def _encode_value(text: str | None, col_type: str | None) -> str | None:
    """Canonical text → the PostgreSQL text DRS writes (bytea as bare hex)."""
    if text is None:
        return None
    if _family(col_type) == "bytes":
        return base64.b64decode(text).hex()
    return text


DECODER = DrsGaussdbDecoder()
