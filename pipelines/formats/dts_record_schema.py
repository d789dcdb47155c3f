"""Alibaba DTS's Avro ``com.alibaba.dts.formats.avro.Record``: its writer schema in both generations, the
type tables and character sets its values are read by, and the reader that tells the generations apart.

``Record.avsc`` of aliyun-dts-subscribe-sdk-java (seed 004 names it; checked against the shared copy by
tests/unit/test_fmt_avro.py). Newer DTS writers append ``bornTimestamp`` (long, default 0): a message
is read with the newer schema first and accepted only if that consumes every byte; otherwise with the
older one, which must also consume every byte. OMS Avro (seed 000) writes the same record. The decoder
both formats share is :mod:`pipelines.formats._dts_record`.
"""

from __future__ import annotations

import codecs
import io
import json
from typing import Any

import fastavro

from pipelines.formats.base import Reject

NS = "com.alibaba.dts.formats.avro."
_STR = {"type": "string", "avro.java.string": "String"}


def _rec(name: str, *fields: tuple[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


def _nullable_int(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "int"], "default": None}


VALUE_TYPES = [
    _rec("Integer", ("precision", "int"), ("value", _STR)),
    _rec("Character", ("charset", _STR), ("value", "bytes")),
    _rec("Decimal", ("value", _STR), ("precision", "int"), ("scale", "int")),
    _rec("Float", ("value", "double"), ("precision", "int"), ("scale", "int")),
    _rec("Timestamp", ("timestamp", "long"), ("millis", "int")),
    {
        "type": "record",
        "name": "DateTime",
        "fields": [_nullable_int(n) for n in ("year", "month", "day", "hour", "minute", "second", "millis")],
    },
    _rec("TimestampWithTimeZone", ("value", "DateTime"), ("timezone", _STR)),
    _rec("BinaryGeometry", ("type", _STR), ("value", "bytes")),
    _rec("TextGeometry", ("type", _STR), ("value", _STR)),
    _rec("BinaryObject", ("type", _STR), ("value", "bytes")),
    _rec("TextObject", ("type", _STR), ("value", _STR)),
    {"type": "enum", "name": "EmptyObject", "symbols": ["NULL", "NONE"]},
]
OPERATIONS = [
    "INSERT",
    "UPDATE",
    "DELETE",
    "DDL",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "ABORT",
    "HEARTBEAT",
    "CHECKPOINT",
    "COMMAND",
    "FILL",
    "FINISH",
    "CONTROL",
    "RDB",
    "NOOP",
    "INIT",
]
SOURCE_TYPES = [
    "MySQL",
    "Oracle",
    "SQLServer",
    "PostgreSQL",
    "MongoDB",
    "Redis",
    "DB2",
    "PPAS",
    "DRDS",
    "HBASE",
    "HDFS",
    "FILE",
    "OTHER",
]

#: Record.avsc, older generation (no bornTimestamp).
RECORD_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Record",
    "namespace": "com.alibaba.dts.formats.avro",
    "fields": [
        {"name": "version", "type": "int"},
        {"name": "id", "type": "long"},
        {"name": "sourceTimestamp", "type": "long"},
        {"name": "sourcePosition", "type": _STR},
        {"name": "safeSourcePosition", "type": _STR, "default": ""},
        {"name": "sourceTxid", "type": _STR, "default": ""},
        {
            "name": "source",
            "type": _rec(
                "Source",
                ("sourceType", {"type": "enum", "name": "SourceType", "symbols": SOURCE_TYPES}),
                ("version", _STR),
            ),
        },
        {"name": "operation", "type": {"type": "enum", "name": "Operation", "symbols": OPERATIONS}},
        {"name": "objectName", "type": ["null", _STR], "default": None},
        {"name": "processTimestamps", "type": ["null", {"type": "array", "items": "long"}], "default": None},
        {"name": "tags", "type": {"type": "map", "values": _STR}, "default": {}},
        {
            "name": "fields",
            "type": [
                "null",
                _STR,
                {"type": "array", "items": _rec("Field", ("name", _STR), ("dataTypeNumber", "int"))},
            ],
            "default": None,
        },
        {
            "name": "beforeImages",
            "type": ["null", _STR, {"type": "array", "items": ["null", *VALUE_TYPES]}],
            "default": None,
        },
        {
            "name": "afterImages",
            "type": ["null", _STR, {"type": "array", "items": ["null", *[t["name"] for t in VALUE_TYPES]]}],
            "default": None,
        },
    ],
}
#: Newer generation: one trailing field.
RECORD_SCHEMA_BORN: dict[str, Any] = {
    **RECORD_SCHEMA,
    "fields": [*RECORD_SCHEMA["fields"], {"name": "bornTimestamp", "type": "long", "default": 0}],
}

PARSED = fastavro.parse_schema(json.loads(json.dumps(RECORD_SCHEMA)))
PARSED_BORN = fastavro.parse_schema(json.loads(json.dumps(RECORD_SCHEMA_BORN)))

#: MySQL protocol type numbers (``dataTypeNumber``) → type names.
MYSQL_TYPES = {
    0: "decimal",
    1: "tinyint",
    2: "smallint",
    3: "int",
    4: "float",
    5: "double",
    6: "null",
    7: "timestamp",
    8: "bigint",
    9: "mediumint",
    10: "date",
    11: "time",
    12: "datetime",
    13: "year",
    14: "date",
    15: "varchar",
    16: "bit",
    17: "timestamp",
    18: "datetime",
    19: "time",
    245: "json",
    246: "decimal",
    247: "enum",
    248: "set",
    249: "tinyblob",
    250: "mediumblob",
    251: "longblob",
    252: "blob",
    253: "varchar",
    254: "char",
    255: "geometry",
}
TYPE_NUMBERS = {
    "decimal": 246,
    "tinyint": 1,
    "smallint": 2,
    "int": 3,
    "float": 4,
    "double": 5,
    "timestamp": 7,
    "bigint": 8,
    "mediumint": 9,
    "date": 10,
    "time": 11,
    "datetime": 12,
    "year": 13,
    "varchar": 15,
    "bit": 16,
    "json": 245,
    "enum": 247,
    "set": 248,
    "tinyblob": 249,
    "mediumblob": 250,
    "longblob": 251,
    "blob": 252,
    "char": 254,
    "geometry": 255,
}
KIND_TYPES = {
    "Integer": "bigint",
    "Decimal": "decimal",
    "Float": "double",
    "Character": "varchar",
    "Timestamp": "timestamp",
    "TimestampWithTimeZone": "timestamp with time zone",
    "BinaryObject": "blob",
    "BinaryGeometry": "geometry",
    "TextGeometry": "geometry",
}
#: Character set names DTS writes (MySQL's, and Oracle's for Oracle sources) → Python text codecs.
CHARSETS = {
    "utf8mb4": "utf-8",
    "utf8": "utf-8",
    "utf8mb3": "utf-8",
    "latin1": "cp1252",
    "ascii": "ascii",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "big5",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "ujis": "euc-jp",
    "sjis": "shift_jis",
    "cp932": "cp932",
    "euckr": "euc-kr",
    "latin2": "iso8859-2",
    "greek": "iso8859-7",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "latin5": "iso8859-9",
    "latin7": "iso8859-13",
    "hebrew": "iso8859-8",
    "tis620": "tis-620",
    "macroman": "mac-roman",
    "macce": "mac-latin2",
    "eucjpms": "euc-jp",
    "al32utf8": "utf-8",
    "al16utf16": "utf-16-be",
    "zhs16gbk": "gbk",
    "zhs32gb18030": "gb18030",
    "zht16big5": "big5",
    "ja16sjis": "shift_jis",
    "ja16euc": "euc-jp",
    "ko16mswin949": "cp949",
    "we8iso8859p1": "latin-1",
    "we8mswin1252": "cp1252",
    "ee8iso8859p2": "iso8859-2",
    "us7ascii": "ascii",
}
#: The text codecs a charset may name (also by a Python alias such as ``UTF-8``); anything else, such
#: as ``rot13``, ``hex`` or ``zlib`` (bytes-to-bytes or text-to-text codecs), is an unknown charset.
TEXT_CODECS = frozenset(codecs.lookup(name).name for name in CHARSETS.values())
#: Every operation of the Record schema that is neither a row change nor DDL: a progress event (HEARTBEAT).
CONTROL_OPS = frozenset(OPERATIONS) - {"INSERT", "UPDATE", "DELETE", "DDL", "INIT"}


def read_record(raw: bytes) -> tuple[dict[str, Any], bool]:
    """(record, is_newer_generation) of one message, or Reject."""
    errors = []
    for parsed, newer in ((PARSED_BORN, True), (PARSED, False)):
        buf = io.BytesIO(raw)
        try:
            record = fastavro.schemaless_reader(buf, parsed, return_record_name=True)
        except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError, IndexError ...
            errors.append(f"{type(exc).__name__}: {exc}"[:120])
            continue
        if buf.tell() == len(raw):
            return record, newer
        errors.append(f"{len(raw) - buf.tell()} bytes left over")
    raise Reject("not a DTS Avro Record (either schema generation): " + "; ".join(errors))


def decode_charset(data: bytes, charset: str) -> str | bytes:
    """Character bytes → text by their charset (``binary``: the bytes); an unknown charset → Reject."""
    name = charset.lower()
    if name == "binary":
        return data
    codec = CHARSETS.get(name, name)
    try:
        known = codecs.lookup(codec).name in TEXT_CODECS
    except (LookupError, ValueError, TypeError):
        known = False
    if not known:
        raise Reject(f"unknown character set {charset[:40]!r}")
    try:
        return data.decode(codec)
    except UnicodeDecodeError:
        raise Reject(f"bytes are not valid {charset}") from None
