"""Huawei DRS Avro (seed 003): decoded with a user-supplied Avro schema and field mapping.

Seed 003 says DRS writes Avro "per the schema in record.rar" but does not publish that schema, so
the schema and the meaning of its fields are configuration (``ctx.options``; YAML
``sources.<name>.options``)::

    options:
      schema: conf/schemas/drs_record.avsc   # path to an .avsc, or the schema itself as a dict (required)
      fields:                                # role → field name; defaults are the DRS JSON names
        op: type            # INSERT / UPDATE / DELETE / DDL / INIT (→ SNAPSHOT) / INIT_DDL (→ DDL)
        db: database
        table: table
        seq: id             # DRS "monotonically increasing sequence number" → seq = (id,)
        event_time: es      # source time, epoch milliseconds (event_time_unit: ms | s)
        key: pkNames        # list of key column names (else configuration)
        types: mysqlType    # map column → source type (else configuration)
        after: data         # array of rows (map column → value)
        before: old         # array of rows: UPDATE before-image (overlaid on data), DELETE row
        ddl: sql
      ops: {}               # extra vendor op → canonical op
      event_time_unit: ms

The message is the Avro binary of one record (no container header, no registry prefix) and must be
consumed exactly. With ``schema_registry`` set instead (see :mod:`pipelines.formats.confluent`), each
message is Confluent-framed and its writer schema comes from the registry (``schema`` is not needed).
Rows follow the DRS JSON semantics (seed 003): one change per element of ``data``;
DELETE takes its row from ``old`` (JSON) or ``data`` (JSON-C); values as DRS writes them: binary as
a byte list ``[106, 103]`` → Base64, TIMESTAMP as epoch seconds ``1624614713.201`` → UTC instant,
DATETIME ``2021-06-25 17:51:53`` → wall clock; Avro ``bytes`` values → Base64.
The reference schema conf/schemas/drs_record.avsc follows the DRS JSON field list of seed 003.
"""

from __future__ import annotations

import base64
import io
import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastavro

from pipelines import values as V
from pipelines.formats.base import Change, DecodeContext, Decoder, Reject, loads_exact, seq_int
from pipelines.formats.confluent import RegistryFramed, registry_for

DEFAULT_FIELDS = {
    "op": "type",
    "db": "database",
    "table": "table",
    "seq": "id",
    "event_time": "es",
    "key": "pkNames",
    "types": "mysqlType",
    "after": "data",
    "before": "old",
    "ddl": "sql",
}
DEFAULT_OPS = {
    "INSERT": "INSERT",
    "UPDATE": "UPDATE",
    "DELETE": "DELETE",
    "DDL": "DDL",
    "INIT": "SNAPSHOT",
    "INIT_DDL": "DDL",
    "TRUNCATE": "TRUNCATE",
    "HEARTBEAT": "HEARTBEAT",
}


@lru_cache(maxsize=16)
def _parsed(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


def load_schema(spec: Any) -> Any:
    """The parsed Avro schema from a path or a dict (``options.schema``), or Reject."""
    if spec is None:
        raise Reject(
            "drs_avro needs the record's Avro schema: set options.schema to an .avsc path "
            "(e.g. conf/schemas/drs_record.avsc) — the DRS document does not publish it"
        )
    try:
        text = Path(spec).read_text(encoding="utf-8") if isinstance(spec, (str, Path)) else json.dumps(spec)
        return _parsed(json.dumps(json.loads(text), sort_keys=True))
    except (OSError, ValueError, TypeError, fastavro.schema.SchemaParseException) as exc:
        raise Reject(f"drs_avro options.schema is not a usable Avro schema: {exc}"[:200]) from None


def _value(value: Any, col_type: str | None) -> str | None:
    """A DRS value → canonical text."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return V.base64_from_bytes(bytes(value))
    if isinstance(value, bool):
        return V.canon_bool(value)
    if isinstance(value, float):
        value = repr(value)
    text = str(value)
    fam = V.family(col_type)
    if fam == "bytes":
        try:  # bounded in depth and width: a value is message text, as hostile as the message
            items = loads_exact(text)
        except Reject:
            raise Reject(f"binary value is not a DRS byte list: {text[:40]!r}") from None
        return V.base64_from_byte_list(items)
    if fam == "timestamp":
        return V.instant_from_epoch(text, "s") if _is_number(text) else V.canon_instant(text)
    return V.canonical(fam, text)


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
        return True
    except ArithmeticError:
        return False


class DrsAvroDecoder(RegistryFramed, Decoder):
    format_id = "drs_avro"
    seeds = "003"
    binary = True
    ordering = "the mapped sequence field (default id): seq = (id,), required on row changes"
    table_and_key = "mapped fields (default database / table / pkNames), key else configuration"
    type_mapping = (
        "mapped type map (default mysqlType), else configuration; DRS texts: byte lists → Base64, "
        "TIMESTAMP epoch seconds → instant"
    )
    quirks = (
        "Avro schema not published: user-supplied schema and field mapping in options (seed 003)",
        "INIT → SNAPSHOT, INIT_DDL → DDL (seed 003)",
        "binary values as byte lists '[106, 103]' (seed 003)",
        "DELETE row in 'old' (JSON) or 'data' (JSON-C) (seed 003)",
        "with options.schema_registry: Confluent-framed, the registry's schema replaces options.schema (Confluent)",
    )

    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        if registry_for(ctx.options) is not None:
            return super().decode(raw, ctx)  # RegistryFramed: Confluent-framed, the registry's schema
        self.check_size(raw, ctx)
        options = ctx.options or {}
        parsed = load_schema(options.get("schema"))
        buf = io.BytesIO(bytes(raw))
        try:
            rec = fastavro.schemaless_reader(buf, parsed)
        except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError ...
            raise Reject(f"not a record of the configured DRS Avro schema: {type(exc).__name__}: {exc}"[:200]) from None
        if buf.tell() != len(raw):
            raise Reject(f"{len(raw) - buf.tell()} bytes left over after the configured DRS Avro record")
        if not isinstance(rec, dict):
            raise Reject("the configured DRS Avro schema does not describe a record")
        try:
            return self.decode_avro_record(rec, ctx)
        except Reject:
            raise
        except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            raise Reject(f"malformed DRS record: {type(exc).__name__}: {exc}"[:200]) from None

    def decode_avro_record(self, rec: Any, ctx: DecodeContext) -> list[Change]:
        """One record read with the configured (or the registry's) schema → changes."""
        if not isinstance(rec, dict):
            raise Reject("the DRS Avro schema does not describe a record")
        options = ctx.options or {}
        f = {**DEFAULT_FIELDS, **(options.get("fields") or {})}
        ops = {**DEFAULT_OPS, **(options.get("ops") or {})}
        op_text = rec.get(f["op"])
        if not isinstance(op_text, str):
            raise Reject(f"missing field '{f['op']}' (op)")
        op = ops.get(op_text)
        if op is None:
            raise Reject(f"unknown op '{op_text}'")
        db, table = rec.get(f["db"]) or None, rec.get(f["table"]) or None
        seq = (seq_int(rec[f["seq"]], f["seq"]),) if rec.get(f["seq"]) is not None else ()
        es = rec.get(f["event_time"])
        event_time = V.instant_from_epoch(es, options.get("event_time_unit", "ms")) if es else None
        common = dict(db=db, table=table, seq=seq, event_time=event_time, detail=op_text)
        if op == "HEARTBEAT":
            return [Change(op="HEARTBEAT", **common)]
        if op == "DDL":
            return [Change(op="DDL", ddl=rec.get(f["ddl"]) or "", **common)]
        if not table:
            raise Reject(f"{op_text} record without a table ('{f['table']}')")
        if not seq and op != "SNAPSHOT":
            raise Reject(f"{op_text} record without its sequence ('{f['seq']}'): a row change needs it to be ordered")
        if op == "TRUNCATE":
            return [Change(op="TRUNCATE", **common)]
        stated = {col: V.checked_type(name, col) for col, name in (rec.get(f["types"]) or {}).items()}
        types = V.configured_over(stated, ctx.column_types(db, table))
        key = tuple(rec.get(f["key"]) or ()) or ctx.key_columns(db, table)
        data, old = rec.get(f["after"]) or [], rec.get(f["before"]) or []
        rows = data if op != "DELETE" or not old else old
        if not rows:
            raise Reject(f"{op_text} record without rows in '{f['after']}'")
        out = []
        for i, row in enumerate(rows):
            image = self._image(row, types)
            before = after = None
            if op == "UPDATE":
                after = image
                before = {**image, **self._image(old[i], types)} if i < len(old) and old[i] else None
            elif op == "DELETE":
                before = image
            else:
                after = image
            used = {c: types[c].lower() for c in (after or before or {}) if c in types}
            out.append(Change(op=op, key_columns=key, before=before, after=after, col_types=used or None, **common))
        return out

    @staticmethod
    def _image(row: Any, types: dict[str, str]) -> dict[str, str | None]:
        if not isinstance(row, dict):
            raise Reject("a row should be a map of column → value")
        out = {}
        for col, value in row.items():
            try:
                out[col] = _value(value, types.get(col))
            except Reject as exc:
                raise Reject(f"column '{col}' ({types.get(col) or 'untyped'}): {exc}") from None
            except (ValueError, ArithmeticError, MemoryError) as exc:  # e.g. "1E999999999" for an int
                raise Reject(f"column '{col}': unusable value ({type(exc).__name__})") from None
        return out

    # ------------------------------------------------------------ encode

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        """Write a Change as a record of the configured schema (which must use the default field names)."""
        parsed = load_schema((ctx.options or {}).get("schema"))
        types = change.col_types or {}
        op = (
            change.detail
            if change.detail in DEFAULT_OPS and DEFAULT_OPS[change.detail] == change.op
            else {"SNAPSHOT": "INIT"}.get(change.op, change.op)
        )
        es = V.epoch_nanos(change.event_time) // 10**6 if change.event_time else 0
        rec: dict[str, Any] = {
            "mysqlType": dict(types) if types else None,
            "id": change.seq[0] if change.seq else 0,
            "es": es,
            "ts": es,
            "database": change.db,
            "table": change.table,
            "type": op,
            "isDdl": change.op == "DDL",
            "sql": change.ddl or "",
            "sqlType": None,
            "data": None,
            "old": None,
            "pkNames": list(change.key_columns) or None,
        }
        if change.op == "DELETE":
            rec["data"] = [_encode_row(change.before, types)]
        elif change.after is not None:
            rec["data"] = [_encode_row(change.after, types)]
            if change.op == "UPDATE" and change.before is not None:
                rec["old"] = [_encode_row(change.before, types)]
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        return buf.getvalue()


def _encode_row(image: dict[str, str | None] | None, types: dict[str, str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for col, value in (image or {}).items():
        fam = V.family(types.get(col))
        if value is None:
            out[col] = None
        elif fam == "bytes":
            out[col] = "[" + ", ".join(str(b) for b in base64.b64decode(value)) + "]"
        elif fam == "timestamp":
            out[col] = V.epoch_seconds_text(value)
        elif fam == "datetime":
            out[col] = value.replace("T", " ")
        else:
            out[col] = value
    return out


DECODER = DrsAvroDecoder()
