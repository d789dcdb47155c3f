"""Huawei Cloud DRS, MongoDB (DDS) to Kafka, JSON (seed 003, MongoDB section).

Shape: ``id`` (DRS sequence), ``op`` (INSERT/UPDATE/DELETE/DDL), ``db``, ``coll``,
``value`` / ``where`` (documents as MongoDB shell-style extended JSON *text*, e.g.
``{"_id": ObjectId("64650cf6..."), "n": NumberLong(5)}``), ``recordType``
(insert/update/replace/doc), ``es`` (commit ms), ``clusterTime`` ("seconds:increment").

Decisions (each pinned by a test in tests/unit/test_fmt_drs_mongo.py):

* The mirror is keyed by ``_id``; each top-level field is a column. ``_id`` and every other
  top-level value take canonical text: ObjectId → its 24-digit lower-case hex, NumberLong /
  NumberInt → integer, NumberDecimal → decimal text, ISODate / Date → UTC instant ``...Z``,
  BinData → Base64, numbers → exact text, booleans → true/false. Nested documents and arrays
  → exact JSON text, with special values written as relaxed extended JSON v2
  (``{"$oid": ...}``, ``{"$date": ...}``, ``{"$numberLong": ...}`` ...). Canonical extended JSON
  input (``{"$oid": "..."}``) is read the same way. A value BSON cannot hold is refused, not read as
  something else (issue 35): a constructor with the wrong number of arguments (``NumberLong(1, 2)``), a
  ``$numberDouble`` that is neither a finite number nor ``Infinity`` / ``-Infinity`` / ``NaN``, a
  BinData subtype outside 0..255, a UUID not of 32 hex digits, a Timestamp part outside 0..2^32-1.
  ``{"$numberDouble": "NaN"}`` in a sub-document stays that object in the document's text (relaxed
  extended JSON v2 writes a non-finite double so; JSON has no such number), never the string ``"NaN"``.
  col_types comes from configuration (a collection
  has no schema; configured types are applied to top-level scalar values), and types a sub-document
  ``object`` and an array ``array`` where configuration types the field not: a mirror holds them as VARIANT.
* INSERT: after = the document. UPDATE recordType ``replace``: after = the whole new document
  (changed None); columns configured for the collection but absent from it become NULL
  (a replace removes them). UPDATE recordType ``update``: ``$set`` fields carry their values,
  ``$unset`` fields become NULL, after = {_id, those}, changed = their names (partial image);
  the MongoDB 5+ ``{"$v": 2, "diff": {"u"/"i": set, "d": unset}}`` form is read the same way.
  A dotted path (``a.b``), a nested diff or any other operator cannot be applied to a
  top-level-column mirror: Reject. before = the ``where`` document (its ``_id``).
* DELETE: the seed's remove example carries the deleted ``_id`` in ``value`` (where null):
  before = value, else where. recordType ``doc`` on DELETE means a document (not a view)
  was removed (seed 003). recordType ``doc`` on INSERT, and op INIT, are full-sync rows →
  SNAPSHOT (the seed does not show full sync; this reading is ours).
* Ordering: seq = (clusterTime seconds, clusterTime increment, id): the oplog time first, the
  DRS sequence breaks ties. Both are required on row changes. ``es`` (13-digit ms, "commit
  time") is event_time; in the seed it differs from clusterTime by hours (a zone shift on
  one of them), which is why it is not used for ordering.

The module is longer than 400 lines because MongoDB's shell-style extended JSON needs its own
parser and writer next to the decoder.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pipelines import values
from pipelines.formats.base import (
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_MAX_WIDTH,
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    check_shape,
    dumps_exact,
    optional,
    seq_int,
)
from pipelines.formats.dataworks_kafka import _epoch_ms

KEY = ("_id",)
_NUMBER = values.JSON_NUMBER_RE
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_WS = re.compile(r"\s*")
_HEX24 = re.compile(r"[0-9a-fA-F]{24}")
_CONSTRUCTORS = {
    "ObjectId",
    "NumberLong",
    "NumberInt",
    "NumberDecimal",
    "ISODate",
    "Date",
    "Timestamp",
    "BinData",
    "UUID",
    "MinKey",
    "MaxKey",
}


#: How many arguments each constructor takes (least, most): ``NumberLong(1, 2)`` is refused, not read as 1.
_ARITY = {
    "ObjectId": (1, 1),
    "NumberLong": (1, 1),
    "NumberInt": (1, 1),
    "NumberDecimal": (1, 1),
    "ISODate": (0, 1),
    "Timestamp": (2, 2),
    "BinData": (2, 2),
    "UUID": (1, 1),
    "MinKey": (0, 0),
    "MaxKey": (0, 0),
}
_UUID = re.compile(r"[0-9a-fA-F]{8}(-?)[0-9a-fA-F]{4}\1[0-9a-fA-F]{4}\1[0-9a-fA-F]{4}\1[0-9a-fA-F]{12}", re.ASCII)
#: ``$numberDouble`` values a BSON double has that JSON cannot write as a number.
_DOUBLE_WORDS = ("Infinity", "-Infinity", "NaN")


@dataclass(frozen=True)
class Special:
    """A MongoDB value with no JSON equivalent: ``ObjectId("...")``, ``NumberLong(5)`` ..."""

    kind: str
    args: tuple


# ---------------------------------------------------------------- shell-style extended JSON parser


class _Parser:
    def __init__(self, text: str, max_depth: int) -> None:
        self.text, self.pos, self.max_depth = text, 0, max_depth

    def fail(self, what: str) -> Reject:
        return Reject(f"bad MongoDB extended JSON at character {self.pos}: {what}")

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos : self.pos + 1]

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            raise self.fail(f"expected {ch!r}")
        self.pos += 1

    def parse(self) -> Any:
        value = self.value(0)
        if self.peek():
            raise self.fail("text after the document")
        return value

    def value(self, depth: int) -> Any:
        if depth > self.max_depth:
            raise Reject(f"document nested deeper than {self.max_depth} levels")
        ch = self.peek()
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            self.pos += 1
            items: list = []
            if self.peek() == "]":
                self.pos += 1
                return items
            while True:
                items.append(self.value(depth + 1))
                if self.peek() == ",":
                    self.pos += 1
                    continue
                self.expect("]")
                return items
        if ch == '"':
            return self.string()
        m = _NUMBER.match(self.text, self.pos)
        if m and m.end() > self.pos:
            self.pos = m.end()
            return Num(m.group())
        m = _IDENT.match(self.text, self.pos)
        if not m:
            raise self.fail("unexpected character")
        word = m.group()
        self.pos = m.end()
        if word in ("true", "false"):
            return word == "true"
        if word == "null":
            return None
        if word == "new":
            self.ws()
            m = _IDENT.match(self.text, self.pos)
            if not m:
                raise self.fail("expected a constructor after 'new'")
            word = m.group()
            self.pos = m.end()
        if word not in _CONSTRUCTORS:
            raise self.fail(f"unknown value {word!r}")
        args: list = []
        if self.peek() == "(":
            self.pos += 1
            if self.peek() != ")":
                while True:
                    args.append(self.value(depth + 1))
                    if self.peek() != ",":
                        break
                    self.pos += 1
            self.expect(")")
        kind = "ISODate" if word == "Date" else word
        least, most = _ARITY[kind]
        if not least <= len(args) <= most:
            raise self.fail(
                f"{word}() takes {least if least == most else f'{least} to {most}'} argument(s), got {len(args)}"
            )
        return Special(kind, tuple(args))

    def obj(self, depth: int) -> dict:
        self.expect("{")
        out: dict = {}
        if self.peek() == "}":
            self.pos += 1
            return out
        while True:
            if self.peek() == '"':
                key = self.string()
            else:
                m = _IDENT.match(self.text, self.pos)
                if not m:
                    raise self.fail("expected a field name")
                key, self.pos = m.group(), m.end()
            self.expect(":")
            if key in out:
                raise self.fail(f"duplicate field {key[:60]!r}: which value counts is ambiguous")
            out[key] = self.value(depth + 1)
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return _from_canonical_ejson(out)

    def string(self) -> str:
        try:
            text, self.pos = json.decoder.scanstring(self.text, self.pos + 1)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg) from None
        return text


def _from_canonical_ejson(doc: dict) -> Any:
    """``{"$oid": "..."}`` and friends (canonical / relaxed extended JSON) → Special."""
    if len(doc) != 1:
        return doc
    ((key, val),) = doc.items()
    simple = {
        "$oid": "ObjectId",
        "$numberLong": "NumberLong",
        "$numberInt": "NumberInt",
        "$numberDecimal": "NumberDecimal",
        "$uuid": "UUID",
    }
    if key in simple and isinstance(val, str):
        return Special(simple[key], (val,))
    if key == "$numberDouble" and isinstance(val, str):  # a BSON double: a finite number, or one of three words
        if val in _DOUBLE_WORDS:
            return Special("Double", (val,))
        if not _NUMBER.fullmatch(val):
            raise Reject(f"$numberDouble is not a number: {val[:40]!a}")
        values.canon_float(val)  # refuses what a double cannot hold (1e400)
        return Num(val)
    if key == "$date":
        if isinstance(val, Special) and val.kind == "NumberLong":  # {"$date": {"$numberLong": ms}}
            return Special("ISODate", (Num(values.canon_int(_arg(val))),))
        if isinstance(val, (str, Num)):
            return Special("ISODate", (val,))
    if key == "$binary" and isinstance(val, dict) and isinstance(val.get("base64"), str):
        sub_type = str(val.get("subType", "0"))
        if not re.fullmatch(r"[0-9a-fA-F]{1,2}", sub_type):
            raise Reject(f"$binary subType is not hexadecimal: {sub_type[:20]!r}")
        return Special("BinData", (Num(str(int(sub_type, 16))), val["base64"]))
    if key == "$timestamp" and isinstance(val, dict) and "t" in val and "i" in val:
        return Special("Timestamp", (val["t"], val["i"]))
    if key in ("$minKey", "$maxKey"):
        return Special("MinKey" if key == "$minKey" else "MaxKey", ())
    return doc


def parse_document(
    raw: Any, field: str, max_depth: int, max_width: int = DEFAULT_MAX_WIDTH, max_elements: int = DEFAULT_MAX_ELEMENTS
) -> dict | None:
    """A ``value`` / ``where`` field (extended JSON text, or already an object) → dict.

    Text is held to the JSON limits first (depth, elements per array / object and in all:
    ``check_shape``), so a width bomb in a 2 MB document is refused before this pure-Python
    parser spends seconds on it.
    """
    if raw is None:
        return None
    if isinstance(raw, dict):
        doc = _from_canonical_ejson({k: _normalise(v) for k, v in raw.items()})
    elif isinstance(raw, str):
        check_shape(raw, max_depth, max_width, max_elements)
        doc = _Parser(raw, max_depth).parse()
    else:
        raise Reject(f"field '{field}' should be a document (text), got {type(raw).__name__}")
    if not isinstance(doc, dict):
        raise Reject(f"field '{field}' is not a document")
    return doc


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return _from_canonical_ejson({k: _normalise(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


# ---------------------------------------------------------------- values


def _arg(sp: Special, i: int = 0) -> Any:
    if len(sp.args) <= i:
        raise Reject(f"{sp.kind}() needs an argument")
    return sp.args[i]


def column_value(value: Any) -> str | None:
    """A top-level field value → canonical text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # str or Num
        return str(value)
    if isinstance(value, Special):
        kind = value.kind
        if kind == "ObjectId":
            hex_id = str(_arg(value))
            if not _HEX24.fullmatch(hex_id):
                raise Reject(f"ObjectId is not 24 hexadecimal digits: {hex_id[:40]!r}")
            return hex_id.lower()
        if kind == "NumberLong":  # BSON int64
            return values.canon_int64(_arg(value))
        if kind == "NumberInt":  # BSON int32
            text = values.canon_int(_arg(value))
            if not -(2**31) <= int(text) < 2**31:
                raise Reject(f"NumberInt out of the 32-bit range: {text[:40]}")
            return text
        if kind == "NumberDecimal":
            text = str(_arg(value))
            return text if text.lower().lstrip("-+") in ("nan", "inf", "infinity") else values.canon_decimal(text)
        if kind == "ISODate":
            arg = _arg(value) if value.args else None
            if arg is None:
                raise Reject("ISODate() without a date")
            if isinstance(arg, Num) or (isinstance(arg, str) and arg.lstrip("-").isdigit()):
                return values.instant_from_epoch(arg, "ms")
            return values.canon_instant(str(arg))
        if kind == "BinData":
            _uint(value, 0, 8, "subtype")
            return values.canon_base64(str(_arg(value, 1)))
        if kind == "UUID":
            text = str(_arg(value))
            if not _UUID.fullmatch(text):
                raise Reject(f"UUID is not 32 hexadecimal digits: {text[:40]!a}")
            return text.lower()
        if kind == "Double":  # NaN / ±Infinity: the canonical text of a DOUBLE
            return str(_arg(value))
    return dumps_exact(_to_ejson(value))


def _uint(value: Special, i: int, bits: int, what: str) -> int:
    """Argument ``i`` of ``value``: an integer in 0 .. 2^bits - 1 (BSON's sizes), else Reject."""
    n = int(values.canon_int(_arg(value, i)))
    if not 0 <= n < 2**bits:
        raise Reject(f"{value.kind}() {what} {n} is outside 0 .. {2**bits - 1}")
    return n


def _to_ejson(value: Any) -> Any:
    """Nested value → relaxed extended JSON v2 (plain JSON) for exact text."""
    if isinstance(value, dict):
        return {k: _to_ejson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_ejson(v) for v in value]
    if not isinstance(value, Special):
        return value
    kind = value.kind
    if kind == "ObjectId":
        return {"$oid": column_value(value)}
    if kind == "NumberLong":
        return {"$numberLong": column_value(value)}
    if kind == "NumberInt":
        return Num(column_value(value))
    if kind == "NumberDecimal":
        return {"$numberDecimal": column_value(value)}
    if kind == "ISODate":
        return {"$date": column_value(value)}
    if kind == "BinData":
        return {"$binary": {"base64": column_value(value), "subType": f"{_uint(value, 0, 8, 'subtype'):02x}"}}
    if kind == "UUID":
        return {"$uuid": column_value(value)}
    if kind == "Timestamp":  # two unsigned 32-bit integers: seconds, and the increment within the second
        return {
            "$timestamp": {
                "t": Num(str(_uint(value, 0, 32, "seconds"))),
                "i": Num(str(_uint(value, 1, 32, "increment"))),
            }
        }
    if kind == "Double":  # relaxed extended JSON keeps a non-finite double as this object (not as text)
        return {"$numberDouble": column_value(value)}
    return {"$minKey" if kind == "MinKey" else "$maxKey": Num("1")}


def _image(doc: dict, types: dict[str, str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for col, raw in doc.items():
        text = column_value(raw)
        col_type = types.get(col)
        if col_type and text is not None and not isinstance(raw, (dict, list)):
            try:
                text = values.canonical(values.family(col_type), text)
            except Reject as exc:
                raise Reject(f"field '{col}': {exc}") from None
        out[col] = text
    return out


def _col_types(types: dict[str, str], documents: tuple[dict | None, ...]) -> dict[str, str] | None:
    """The configured types, and where configuration types a field not: ``object`` for a sub-document and
    ``array`` for an array (a mirror holds them as VARIANT, ``doc:address.city``). A collection has no
    schema (seed 003): the message's own values are the only other word on a field's type."""
    out: dict[str, str] = {}
    for doc in documents:
        for col, raw in (doc or {}).items():
            if isinstance(raw, (dict, list)):
                out.setdefault(col, "object" if isinstance(raw, dict) else "array")
    out.update(types)
    return out or None


def _check_top_level(name: str) -> None:
    if "." in name or name.startswith("$"):
        raise Reject(f"update of nested path {name!r} cannot be applied to a top-level-column mirror")


def _update_fields(value: dict) -> tuple[dict, list[str]] | None:
    """An update document → ($set fields, $unset names); None when it is a whole document."""
    if "diff" in value and "$v" in value:  # MongoDB 5+ oplog v2
        diff = value["diff"]
        if not isinstance(diff, dict):
            raise Reject("update 'diff' should be a document")
        sets: dict = {}
        unsets: list[str] = []
        for part, body in diff.items():
            if part in ("u", "i") and isinstance(body, dict):
                sets.update(body)
            elif part == "d" and isinstance(body, dict):
                unsets.extend(body)
            else:
                raise Reject(
                    f"update diff part {part!r} (a nested-field change) cannot be applied to a top-level-column mirror"
                )
        for name in [*sets, *unsets]:
            _check_top_level(name)
        return sets, unsets
    if not any(k.startswith("$") for k in value):
        return None
    sets, unsets = {}, []
    for op, body in value.items():
        if op == "$v":
            continue
        if op not in ("$set", "$unset"):
            raise Reject(f"unsupported update operator {op!r} (expected $set / $unset)")
        if not isinstance(body, dict):
            raise Reject(f"{op} should be a document")
        for name in body:
            _check_top_level(name)
        if op == "$set":
            sets.update(body)
        else:
            unsets.extend(body)
    return sets, unsets


# ---------------------------------------------------------------- decoder


class DrsMongoDecoder(JsonDecoder):
    format_id = "drs_mongo"
    schemaless = True  # a document may lack any field (seed 003): gold never reads that as DROP COLUMN
    seeds = "003"
    ordering = "clusterTime 'seconds:increment' then the DRS id: (seconds, increment, id)"
    table_and_key = "db, coll; the key is always _id"
    type_mapping = (
        "top-level fields are columns: ObjectId → hex, NumberLong/Int → int, NumberDecimal → "
        "decimal, ISODate → UTC instant, BinData → Base64; nested values → exact relaxed "
        "extended JSON text, typed object / array (VARIANT in a mirror); configured types applied when given"
    )
    quirks = (
        'value/where are MongoDB shell extended JSON text (ObjectId("..."), NumberLong ...) (seed 003)',
        "recordType update: $set → values, $unset → NULL, partial image; replace: whole document (seed 003)",
        "DELETE carries the removed _id in value, where null (seed 003)",
        "clusterTime 'sec:inc' orders; es is the commit time in ms (seed 003)",
    )

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        vendor_op = optional(obj, "op", str)
        if vendor_op is None:
            raise Reject("missing field 'op'")
        record_type = optional(obj, "recordType", str)
        db = optional(obj, "db", str)
        coll = optional(obj, "coll", str)
        es = obj.get("es")
        common = dict(
            db=db,
            table=coll,
            event_time=values.instant_from_epoch(es, "ms") if es is not None else None,
            detail=f"{vendor_op}/{record_type}" if record_type else vendor_op,
        )
        seq = self._seq(obj, required=vendor_op != "DDL")
        if vendor_op == "DDL":
            value = obj.get("value")
            ddl = value if isinstance(value, str) or value is None else dumps_exact(value)
            return [Change(op="DDL", seq=seq, ddl=ddl, **common)]
        if vendor_op not in ("INSERT", "INIT", "UPDATE", "DELETE"):
            raise Reject(f"unknown op '{vendor_op}'")
        if not coll:
            raise Reject("missing collection name (field 'coll')")
        types = ctx.column_types(db, coll)
        limits = (ctx.max_depth, ctx.max_width, ctx.max_elements)
        value = parse_document(obj.get("value"), "value", *limits)
        where = parse_document(obj.get("where"), "where", *limits)
        fields = None if vendor_op != "UPDATE" or value is None or record_type == "replace" else _update_fields(value)
        documents = (where, *fields[:1]) if fields is not None else (value, where)
        row = dict(key_columns=KEY, col_types=_col_types(types, documents), seq=seq, **common)

        if vendor_op in ("INSERT", "INIT"):
            if value is None:
                raise Reject(f"{vendor_op} without a document in 'value'")
            after = _image(value, types)
            _need_id(after, "value")
            snapshot = vendor_op == "INIT" or record_type == "doc"
            return [Change(op="SNAPSHOT" if snapshot else "INSERT", after=after, **row)]
        if vendor_op == "DELETE":
            doc = value if value is not None else where
            if doc is None:
                raise Reject("DELETE without the removed document in 'value' or 'where'")
            before = _image(doc, types)
            _need_id(before, "value")
            return [Change(op="DELETE", before=before, **row)]
        # UPDATE
        if where is None or value is None:
            raise Reject("UPDATE needs both 'where' and 'value'")
        before = _image(where, types)
        _need_id(before, "where")
        if fields is None:  # replace: the whole new document
            after = {c: None for c in types}
            after.update(_image(value, types))
            after.setdefault("_id", before["_id"])
            return [Change(op="UPDATE", before=before, after=after, **row)]
        sets, unsets = fields
        after = {"_id": before["_id"]}
        after.update(_image(sets, types))
        after.update({name: None for name in unsets})
        return [Change(op="UPDATE", before=before, after=after, changed=tuple(after), **row)]

    @staticmethod
    def _seq(obj: dict, required: bool) -> tuple[int, ...]:
        cluster_time = obj.get("clusterTime")
        seq_id = obj.get("id")
        if cluster_time is None or seq_id is None:
            if required:
                raise Reject("missing ordering field 'clusterTime' or 'id'")
            return ()
        secs, colon, inc = str(cluster_time).partition(":")
        if not colon:
            raise Reject(f"clusterTime should be 'seconds:increment', got {str(cluster_time)[:40]!r}")
        return (seq_int(secs, "clusterTime"), seq_int(inc, "clusterTime"), seq_int(seq_id, "id"))

    # ------------------------------------------------------------ encoder

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        vendor_op, _, record_type = (change.detail or "").partition("/")
        out: dict[str, Any] = {"id": Num(str(change.seq[2])) if len(change.seq) == 3 else None}
        if change.op == "INSERT":
            vendor_op, record_type, value, where = "INSERT", "insert", change.after, None
        elif change.op == "SNAPSHOT":
            vendor_op = "INIT" if vendor_op == "INIT" else "INSERT"
            record_type, value, where = "doc", change.after, None
        elif change.op == "DELETE":
            vendor_op, record_type, value, where = "DELETE", "doc", change.before, None
        elif change.op == "UPDATE":
            after = change.after or {}
            where = change.before or {"_id": after.get("_id")}
            vendor_op = "UPDATE"
            if change.changed is None:
                record_type, value = "replace", after
            else:
                record_type = "update"
                sets = {c: v for c, v in after.items() if c != "_id" and v is not None}
                unsets = [c for c, v in after.items() if c != "_id" and v is None]
                value = _UpdateDoc(sets, unsets)
        elif change.op == "DDL":
            out.update(op="DDL", dbType="MongoDB", db=change.db, coll=change.table, value=change.ddl, where=None)
            self._meta(out, change, record_type or None)
            return dumps_exact(out).encode("utf-8")
        else:
            raise ValueError(f"drs_mongo cannot express op {change.op}")
        out.update(
            op=vendor_op,
            dbType="MongoDB",
            db=change.db,
            coll=change.table,
            value=_write(value, change.col_types),
            where=_write(where, change.col_types) if where is not None else None,
        )
        self._meta(out, change, record_type)
        return dumps_exact(out).encode("utf-8")

    @staticmethod
    def _meta(out: dict, change: Change, record_type: str | None) -> None:
        out.update(recordType=record_type, extra=record_type)
        if change.event_time:
            out["es"] = Num(_epoch_ms(change.event_time))
        if len(change.seq) == 3:
            out["clusterTime"] = f"{change.seq[0]}:{change.seq[1]}"


def _need_id(image: dict, field: str) -> None:
    if "_id" not in image or image["_id"] is None:
        raise Reject(f"document in '{field}' has no _id")


@dataclass
class _UpdateDoc:
    sets: dict
    unsets: list


def _write(doc: Any, types: dict[str, str] | None = None) -> str:
    """A canonical image (or an update) → shell-style extended JSON text as DRS writes it; a field typed
    ``object`` / ``array`` is written as the document its text is, any other as a value."""
    types = types or {}
    if isinstance(doc, _UpdateDoc):
        parts = []
        if doc.sets or not doc.unsets:
            parts.append('"$set": ' + _write(doc.sets, types))
        if doc.unsets:
            parts.append(
                '"$unset": {' + ", ".join(f"{json.dumps(c, ensure_ascii=False)}: true" for c in doc.unsets) + "}"
            )
        return "{" + ", ".join(parts) + "}"
    items = []
    for col, text in doc.items():
        items.append(f"{json.dumps(col, ensure_ascii=False)}: {_write_value(col, text, types.get(col))}")
    return "{" + ", ".join(items) + "}"


def _write_value(col: str, text: str | None, col_type: str | None = None) -> str:
    if text is None:
        return "null"
    if col == "_id" and _HEX24.fullmatch(text) and text == text.lower():
        return f'ObjectId("{text}")'
    # Write the text as a native value when reading it back gives the same canonical text (a document or
    # an array only where typed so: read back, it is typed so).
    try:
        native = _Parser(text, 64).parse()
        nested = isinstance(native, (dict, list))
        if nested == (col_type in ("object", "array")) and (not isinstance(native, str) or isinstance(native, Num)):
            if column_value(native) == text:
                return text
    except Reject:
        pass
    return json.dumps(text, ensure_ascii=False)


DECODER = DrsMongoDecoder()
