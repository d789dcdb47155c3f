"""MongoDB documents as row images: the shell-style extended JSON that Huawei Cloud DRS writes (seed
003, MongoDB section: ``{"_id": ObjectId("..."), "n": NumberLong(5)}``), canonical / relaxed extended
JSON v2 (``{"$oid": ...}``, which Debezium's MongoDB connector writes), and update documents (``$set`` /
``$unset``, MongoDB 5+ ``{"$v": 2, "diff": ...}``).

Shared by ``drs_mongo`` and ``debezium`` (its MongoDB connector): one reading of a document for both. The
value rules (ObjectId → lower-case hex, NumberLong → int64 text, ISODate → UTC instant, nested values →
exact relaxed extended JSON text, a value BSON cannot hold refused) are in :mod:`pipelines.formats.drs_mongo`'s
docstring, with their tests in tests/unit/test_fmt_drs_mongo.py. Longer than 400 lines because MongoDB's
shell-style extended JSON needs its own parser next to the value rules it feeds.
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
    Num,
    Reject,
    check_shape,
    dumps_exact,
)

_NUMBER = values.JSON_NUMBER_RE
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_WS = re.compile(r"\s*")
HEX24 = re.compile(r"[0-9a-fA-F]{24}")
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


class ShellJsonParser:
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
        doc = ShellJsonParser(raw, max_depth).parse()
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
            if not HEX24.fullmatch(hex_id):
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


def image(doc: dict, types: dict[str, str]) -> dict[str, str | None]:
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


def document_col_types(types: dict[str, str], documents: tuple[dict | None, ...]) -> dict[str, str] | None:
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


def update_fields(value: dict) -> tuple[dict, list[str]] | None:
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
