"""Shared code of the Avro ``com.alibaba.dts.formats.avro.Record`` formats: OMS Avro (seed 000), DTS Avro (seed 004).

The writer schema is ``Record.avsc`` of aliyun-dts-subscribe-sdk-java (built below, checked
against the shared copy by a test). Newer DTS writers append ``bornTimestamp`` (long, default 0):
a message is read with the newer schema first and accepted only if that consumes every byte;
otherwise it is read with the older schema, which must also consume every byte (an older message
read as newer runs out of bytes; a newer one read as older leaves bytes over).

Decisions:

* op: INIT → SNAPSHOT; INSERT/UPDATE/DELETE; DDL (statement = ``afterImages`` string);
  BEGIN, COMMIT, ROLLBACK, ABORT, HEARTBEAT, CHECKPOINT, COMMAND, FILL, FINISH, CONTROL, RDB,
  NOOP → HEARTBEAT with the operation in ``detail``.
* seq = (id,); a row record with a negative id has no usable ordering → Reject. OMS ids are
  ``{ms timestamp}{5-digit increment}`` (170236975822100001), so one integer orders exactly like
  the pair; ``sourcePosition`` is a coarser checkpoint (seconds for OMS, "" in full migration)
  and is not used. event_time = sourceTimestamp (epoch seconds).
* key: ``tags.pk_uk_info`` (JSON ``{"PRIMARY": ["id"]}``; the PRIMARY entry, else the first
  unique key), else configuration.
* images (``fields[i]`` names column i): Integer → integer text; Decimal → its text, every digit;
  Float → the double's shortest text; Character → bytes decoded by their MySQL charset (charset
  ``binary`` → Base64); Timestamp (epoch seconds + ``millis``, which holds MICROseconds as in the
  DTS SDK's UnixTimestamp) → UTC instant; DateTime → date / time / wall clock by the parts
  present (``millis`` again microseconds of the second, 0..999,999; a part out of range → Reject;
  every part null → NULL); TimestampWithTimeZone → UTC instant; BinaryObject /
  BinaryGeometry → Base64; TextObject / TextGeometry → text; EmptyObject NULL → NULL,
  EmptyObject NONE → column not carried (partial image).
* col_types: configured type if any, else the MySQL type of ``dataTypeNumber`` (MySQL sources),
  else the image kind; DECIMAL gets (precision,scale); a bigint value above 2^63-1 reports
  ``bigint unsigned``.

Record.avsc (both generations), its type tables, character sets and reader are
:mod:`pipelines.formats.dts_record_schema`; this module is the decoder and encoder two formats share.
Longer than 400 lines because that decoder and its encoder are one definition, for both formats.
"""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import fastavro

from pipelines import values as V
from pipelines.formats.base import Change, DecodeContext, Decoder, Reject, loads_exact, split_table
from pipelines.formats.dts_record_schema import (  # noqa: F401 - the schema's names, served from here as before
    CONTROL_OPS,
    KIND_TYPES,
    MYSQL_TYPES,
    NS,
    OPERATIONS,
    PARSED,
    PARSED_BORN,
    RECORD_SCHEMA,
    RECORD_SCHEMA_BORN,
    TYPE_NUMBERS,
    decode_charset,
    read_record,
)

_ROW_OPS = {"INSERT": "INSERT", "UPDATE": "UPDATE", "DELETE": "DELETE", "INIT": "SNAPSHOT"}
ABSENT = object()


def _frac(micros: int) -> str:
    return f".{micros:06d}".rstrip("0").rstrip(".") if micros else ""


#: MySQL TIME reaches 838:59:59 (and may be negative).
_MAX_TIME_HOURS = 838
_DATETIME_PARTS = ("year", "month", "day", "hour", "minute", "second", "millis")
_DATE = frozenset({"year", "month", "day"})
_TIME = frozenset({"hour", "minute", "second"})


def _datetime_parts(d: dict[str, Any]) -> tuple[str, str] | None:
    """DateTime record → (family, canonical text); None when every part is null (SQL NULL).

    The parts present say the type: year alone → YEAR; year, month, day → DATE; with hour, minute,
    second too → DATETIME; those three alone → TIME (negative when a part is). ``millis`` holds
    MICROseconds of the second (the DTS SDK reads it as ``setNaons(millis * 1000)``), so it is
    0..999,999: 1,500,000 is not a second and a half but an invalid value. A part out of its range
    (month 13, minute 60, ...) or any other set of parts is rejected, never read as another time.
    """
    parts = {k: d.get(k) for k in _DATETIME_PARTS}
    shape = frozenset(k for k, v in parts.items() if v is not None)
    if not shape:
        return None
    y, mo, da, h, mi, s, us = (parts[k] for k in _DATETIME_PARTS)
    us = us or 0
    described = ", ".join(f"{k}={v}" for k, v in parts.items() if v is not None)
    if shape == _TIME or shape == _TIME | {"millis"}:
        negative = min(h, mi, s, us) < 0  # as the SDK: any negative part makes the TIME negative
        if abs(h) > _MAX_TIME_HOURS or abs(us) > 999_999:
            raise Reject(f"TIME out of range: {described}")
        text = f"{'-' if negative else ''}{abs(h):02d}:{abs(mi):02d}:{abs(s):02d}{_frac(abs(us))}"
        return "time", V.canon_time(text)
    if not 0 <= us <= 999_999:
        raise Reject(f"DateTime millis (microseconds of the second) out of range 0..999999: {described}")
    if shape == {"year"}:
        if not 0 <= y <= 9999:
            raise Reject(f"YEAR out of range: {described}")
        return "int", str(y)
    # a negative or overlong part breaks the fixed-width text, which the canonicalisers then reject
    if shape == _DATE:
        return "date", V.canon_date(f"{y:04d}-{mo:02d}-{da:02d}")
    if shape == _DATE | _TIME or shape == _DATE | _TIME | {"millis"}:
        return "datetime", V.canon_local_datetime(f"{y:04d}-{mo:02d}-{da:02d} {h:02d}:{mi:02d}:{s:02d}{_frac(us)}")
    raise Reject(f"DateTime with an unusable set of parts: {described}")


def image_value(item: Any) -> tuple[Any, str | None]:
    """One image item → (canonical text / None / ABSENT, kind-derived type)."""
    if item is None:
        return None, None
    name, body = item
    kind = name.rpartition(".")[2]
    if kind == "EmptyObject":
        return (ABSENT if body == "NONE" else None), None
    if kind == "Integer":
        return V.canon_int(body["value"]), "bigint"
    if kind == "Decimal":
        return V.canon_decimal(body["value"]), _decimal_type(body)
    if kind == "Float":
        return V.canon_float(repr(float(body["value"])).replace("inf", "Infinity")), "double"
    if kind == "Character":
        text = decode_charset(body["value"], body["charset"])
        if isinstance(text, bytes):
            return V.base64_from_bytes(text), "binary"
        return text, "varchar"
    if kind == "Timestamp":
        secs, micros = body["timestamp"], body["millis"]
        if secs <= -9223372022400:
            raise Reject(f"illegal TIMESTAMP (OMS marker {secs})")
        if not 0 <= micros <= 999_999:  # the SDK's UnixTimestamp.setMicro: microseconds of the second
            raise Reject(f"Timestamp millis (microseconds of the second) out of range 0..999999: {micros}")
        return V.instant_from_epoch(Decimal(secs) + Decimal(micros).scaleb(-6), "s"), "timestamp"
    if kind == "DateTime":
        parsed = _datetime_parts(body)
        if parsed is None:
            return None, None
        fam, text = parsed
        return text, {"int": "year"}.get(fam, fam)
    if kind == "TimestampWithTimeZone":
        parsed = _datetime_parts(body["value"])
        if parsed is None:
            return None, None
        fam, text = parsed
        if fam != "datetime":
            raise Reject(f"TimestampWithTimeZone needs a date and a time, got a {fam} value")
        return V.canon_instant(text.replace("T", " ") + " " + body["timezone"]), "timestamp with time zone"
    if kind in ("BinaryObject", "BinaryGeometry"):
        return V.base64_from_bytes(body["value"]), KIND_TYPES[kind] if kind != "BinaryObject" else (
            V.checked_type(body["type"] or "blob").lower()
        )
    if kind in ("TextObject", "TextGeometry"):
        return body["value"], V.checked_type(body["type"] or "text").lower() if kind == "TextObject" else "geometry"
    raise Reject(f"unknown image value kind {kind}")


def _integer(col: str, value: str, col_type: str, configured: dict[str, str], part: str) -> tuple[str, str]:
    """(value, type) of an Integer record by its column's type: the value in the type's range (a BIGINT
    value above 2^63 - 1 proves an unconfigured column BIGINT UNSIGNED: OMS drops UNSIGNED); a BIT
    column's number as its bytes (seed 000's Avro table writes BIT as INTEGER); under a time type, never
    mislabelled: the canonical time its text is, or a Reject (the value fuzzer's find)."""
    fam = V.family(col_type)
    try:
        if fam == "int":
            _text, proved = V.canon_int_of_type(value, col_type)
            if proved and configured.get(col):
                raise Reject(f"out of range for the configured {col_type.upper()[:60]}: {value}")
            return value, proved or col_type
        if fam == "uint64":
            V.canon_uint64(value)
        if fam == "bytes":
            args = V.parse_type(col_type)[1]
            return V.base64_from_bit_number(int(value), V.bit_width(args[0], "BIT width") if args else None), col_type
        if fam in ("date", "datetime", "timestamp", "time"):  # a number is no time: its text in time's shape, or Reject
            return V.canonical(fam, value), col_type
    except Reject as exc:
        raise Reject(f"column '{col}' in {part}: {exc}") from None
    return value, col_type


def _label_differs(col_type: str | None, kind_type: str | None) -> bool:
    """True where a column's type names a family other than its value's kind, and not a text one (text
    holds any value): a Character under a BIGINT type must be an integer, never a mislabelled text."""
    fam = V.family(col_type)
    return fam not in ("string", "json") and fam != V.family(kind_type)


def _decimal_type(body: dict[str, Any]) -> str:
    p, s = body.get("precision"), body.get("scale")
    return f"decimal({p},{s})" if p and p > 0 and s is not None and s >= 0 else "decimal"


class DtsRecordDecoder(Decoder):
    """Decoder of the DTS Avro ``Record`` (both generations); subclasses set the README attributes."""

    binary = True
    ordering = "id (seq = (id,)); sourcePosition is a coarser checkpoint, not used"
    table_and_key = "objectName 'db.table' (or db.schema.table); key from tags.pk_uk_info, else configuration"
    type_mapping = (
        "Avro image records: Integer, Decimal (every digit), Float, Character (by charset), "
        "Timestamp/DateTime, BinaryObject → Base64, TextObject; types from dataTypeNumber"
    )

    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        self.check_size(raw, ctx)
        record, _newer = read_record(bytes(raw))
        try:
            return self.decode_avro_record(record, ctx)
        except Reject:
            raise
        except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            raise Reject(f"malformed DTS Avro Record: {type(exc).__name__}: {exc}"[:200]) from None

    def decode_avro_record(self, rec: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        """One Record (as fastavro reads it, union branches named) → changes (not ``Decoder.decode_record``)."""
        operation = rec["operation"][1] if isinstance(rec["operation"], tuple) else rec["operation"]
        db, schema, table = _split_object(rec.get("objectName"))
        if rec["id"] < 0 and operation in _ROW_OPS:
            raise Reject(f"{operation} record with a negative id ({rec['id']}): no usable ordering")
        seq = (rec["id"],) if rec["id"] >= 0 else ()
        ts = rec["sourceTimestamp"]
        event_time = V.instant_from_epoch(ts, "s") if ts and ts > 0 else None
        txn = rec.get("sourceTxid") or None
        common = dict(db=db, schema=schema, table=table, seq=seq, event_time=event_time, txn=txn, detail=operation)
        if operation in CONTROL_OPS:
            return [Change(op="HEARTBEAT", **common)]
        if operation == "DDL":
            ddl = rec.get("afterImages")
            if not isinstance(ddl, str):
                raise Reject("DDL record without the statement in afterImages")
            return [Change(op="DDL", ddl=ddl, **common)]
        op = _ROW_OPS.get(operation)
        if op is None:
            raise Reject(f"unknown op '{operation}'")
        if not table:
            raise Reject(f"{operation} record without a table in objectName")
        fields = rec.get("fields")
        if not isinstance(fields, list):
            raise Reject(f"{operation} record without a 'fields' list")
        if len(fields) > ctx.max_width:  # the JSON formats' limit on one array holds for Avro's too
            raise Reject(f"'fields' has {len(fields)} entries, over limits.max_width ({ctx.max_width})")
        names = [f["name"] for f in fields]
        if len(set(names)) != len(names):
            twice = next(n for i, n in enumerate(names) if n in names[:i])
            raise Reject(f"duplicate field name {twice[:60]!a} in 'fields': which value counts is ambiguous")
        mysql = _source_type(rec) == "MySQL"
        configured = ctx.column_types(db, table)
        types: dict[str, str] = {}
        before = self._image(rec.get("beforeImages"), fields, "beforeImages", mysql, configured, types)
        after = self._image(rec.get("afterImages"), fields, "afterImages", mysql, configured, types)
        if op in ("INSERT", "SNAPSHOT", "UPDATE") and after is None:
            raise Reject(f"{operation} record without afterImages")
        if op == "DELETE" and before is None:
            raise Reject("DELETE record without beforeImages")
        if op in ("INSERT", "SNAPSHOT"):
            before = None
        if op == "DELETE":
            after = None
        image = after if after is not None else before
        changed = tuple(image) if image is not None and len(image) < len(names) else None
        key = _pk_uk(rec.get("tags") or {}) or ctx.key_columns(db, table)
        return [
            Change(
                op=op, key_columns=key, before=before, after=after, changed=changed, col_types=types or None, **common
            )
        ]

    @staticmethod
    def _image(
        items: Any, fields: list, part: str, mysql: bool, configured: dict[str, str], types: dict[str, str]
    ) -> dict[str, str | None] | None:
        if items is None:
            return None
        if not isinstance(items, list):
            raise Reject(f"{part} should be an array of column values")
        if len(items) != len(fields):
            raise Reject(f"{part} has {len(items)} values for {len(fields)} fields")
        out: dict[str, str | None] = {}
        for field, item in zip(fields, items):
            col = field["name"]
            try:
                value, kind_type = image_value(item)
            except Reject as exc:
                raise Reject(f"column '{col}' in {part}: {exc}") from None
            except (ValueError, ArithmeticError, MemoryError) as exc:  # e.g. Integer "1E999999999"
                raise Reject(f"column '{col}' in {part}: unusable value ({type(exc).__name__})") from None
            if value is ABSENT:
                continue
            out[col] = value
            col_type = (
                configured.get(col)
                or (MYSQL_TYPES.get(field["dataTypeNumber"]) if mysql else None)
                or types.get(col)
                or kind_type
            )
            if col_type in ("decimal",) and kind_type and kind_type.startswith("decimal("):
                col_type = kind_type
            if kind_type == "bigint" and value is not None:  # an Integer record: read by its column's type
                out[col], col_type = _integer(col, value, col_type, configured, part)
            elif value is not None and _label_differs(col_type, kind_type):
                try:  # a value of one kind under another family's type: canonical for that family, or Reject
                    out[col] = V.canonical(V.family(col_type), value)
                except Reject as exc:
                    raise Reject(f"column '{col}' ({col_type}) in {part}: {exc}") from None
            if col_type:
                types[col] = col_type
        return out

    # ------------------------------------------------------------ encode

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        """Write a Change as a Record (newer generation unless ctx.options['generation'] == 'old')."""
        record = to_record(change)
        older = (ctx.options or {}).get("generation") == "old"
        buf = io.BytesIO()
        if older:
            fastavro.schemaless_writer(buf, PARSED, record)
        else:
            fastavro.schemaless_writer(buf, PARSED_BORN, {**record, "bornTimestamp": 0})
        return buf.getvalue()


def _source_type(rec: dict[str, Any]) -> str:
    st = rec["source"]["sourceType"]
    return st[1] if isinstance(st, tuple) else st


def _split_object(name: str | None) -> tuple[str | None, str | None, str | None]:
    if not name:
        return None, None, None
    parts = name.split(".")
    if len(parts) >= 3:
        return parts[0], ".".join(parts[1:-1]), parts[-1]
    db, table = split_table(name)
    return db, None, table


def _pk_uk(tags: dict[str, str]) -> tuple[str, ...]:
    text = tags.get("pk_uk_info")
    if not text:
        return ()
    try:  # bounded, and a duplicated key (two PRIMARY lists) is ambiguous: quarantined, never last-wins
        info = loads_exact(text)
    except Reject as exc:
        raise Reject(f"tags.pk_uk_info: {exc}") from None
    if not isinstance(info, dict) or not info:
        return ()
    cols = info.get("PRIMARY") or next(iter(info.values()))
    if not isinstance(cols, list) or not all(isinstance(c, str) for c in cols):
        raise Reject(f"tags.pk_uk_info has no column list: {text[:60]!r}")
    return tuple(cols)


# ---------------------------------------------------------------- encoder helpers


def _avro_value(value: str | None, col_type: str | None) -> Any:
    if value is None:
        return None
    fam = V.family(col_type)
    base, args, _ = V.parse_type(col_type or "")
    if fam in ("int", "uint64"):
        return (NS + "Integer", {"precision": 8, "value": value})
    if fam == "decimal":
        p, s = (list(args) + [0, 0])[:2] if args else (0, 0)
        return (NS + "Decimal", {"value": value, "precision": p, "scale": s})
    if fam == "float":
        return (NS + "Float", {"value": float(value), "precision": 0, "scale": 0})
    if fam == "bytes":
        import base64

        if base == "binary":
            return (NS + "Character", {"charset": "binary", "value": base64.b64decode(value)})
        return (NS + "BinaryObject", {"type": base.upper(), "value": base64.b64decode(value)})
    if fam == "time":
        nanos = V.time_nanos(value)
        if nanos % 1000:
            raise ValueError(f"DTS Avro carries microseconds at most: TIME {value}")
        secs, micros = divmod(abs(nanos) // 1000, 10**6)
        sign = -1 if nanos < 0 else 1  # any negative part makes the TIME negative (the SDK's reading)
        parts = {"hour": secs // 3600, "minute": secs // 60 % 60, "second": secs % 60, "millis": micros}
        parts = {k: sign * v for k, v in parts.items()}
        return (NS + "DateTime", {"year": None, "month": None, "day": None, **parts})
    if fam in ("date", "datetime"):
        dt, frac, _ = V.parse_datetime_text(value)
        parts = {"year": dt.year, "month": dt.month, "day": dt.day}
        if fam == "datetime":
            parts.update(hour=dt.hour, minute=dt.minute, second=dt.second, millis=_micros(frac, value))
        return (NS + "DateTime", {"hour": None, "minute": None, "second": None, "millis": None, **parts})
    if fam == "timestamp":
        nanos = V.epoch_nanos(value)
        secs, micros = divmod(nanos // 1000, 10**6)
        _micros(f"{nanos % 10**9:09d}", value)
        return (NS + "Timestamp", {"timestamp": secs, "millis": micros})
    if fam == "json":
        return (NS + "TextObject", {"type": "JSON", "value": value})
    return (NS + "Character", {"charset": "utf8mb4", "value": value.encode("utf-8")})


def _micros(frac: str, value: str) -> int:
    """A fraction of a second as the microseconds DTS carries, or ValueError: an encoder never truncates."""
    if frac[6:].strip("0"):
        raise ValueError(f"DTS Avro carries microseconds at most: {value}")
    return int((frac or "0").ljust(6, "0")[:6])


def to_record(change: Change) -> dict[str, Any]:
    """A Change → a Record dict (for fastavro)."""
    operation = (
        change.detail
        if change.detail in OPERATIONS
        else {
            "SNAPSHOT": "INIT",
            "INSERT": "INSERT",
            "UPDATE": "UPDATE",
            "DELETE": "DELETE",
            "DDL": "DDL",
            "HEARTBEAT": "HEARTBEAT",
        }.get(change.op)
    )
    if operation is None:
        raise ValueError(f"DTS Avro cannot express op {change.op}")
    object_name = ".".join(p for p in (change.db, change.schema, change.table) if p) or None
    secs = 0
    if change.event_time:
        dt, _, _ = V.parse_datetime_text(change.event_time)
        secs = int((dt - V.datetime(1970, 1, 1)).total_seconds())
    rec: dict[str, Any] = {
        "version": 1,
        "id": change.seq[0] if change.seq else 0,
        "sourceTimestamp": secs,
        "sourcePosition": str(secs) if secs else "",
        "safeSourcePosition": "",
        "sourceTxid": change.txn or "",
        "source": {"sourceType": "MySQL", "version": "OBMySQL"},
        "operation": operation,
        "objectName": object_name,
        "processTimestamps": None,
        "tags": {},
        "fields": None,
        "beforeImages": None,
        "afterImages": None,
    }
    if change.op == "DDL":
        rec["afterImages"] = change.ddl or ""
        return rec
    if change.op == "HEARTBEAT":
        return rec
    if change.key_columns:
        rec["tags"] = {"pk_uk_info": json.dumps({"PRIMARY": list(change.key_columns)})}
    types = change.col_types or {}
    cols = list(dict.fromkeys([*(change.before or {}), *(change.after or {})]))
    rec["fields"] = [
        {"name": c, "dataTypeNumber": TYPE_NUMBERS.get(V.parse_type(types.get(c, "varchar"))[0], 15)} for c in cols
    ]
    for part, image in (("beforeImages", change.before), ("afterImages", change.after)):
        if image is not None:
            rec[part] = [
                (_avro_value(image[c], types.get(c)) if c in image else (NS + "EmptyObject", "NONE")) for c in cols
            ]
    return rec
