"""Type names: a vendor's column type → its canonical family (``family``) and its mirror's Delta
type (``spark_type``); ``parse_type`` reads the name, ``is_known_type`` tells configuration which
names lakecdc maps on purpose. The table of families is in :mod:`pipelines.values`.

Longer than 420 lines because most of it is data: every vendor's spelling of each type, stated once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from pipelines.errors import Reject

_T = TypeVar("_T")

#: Longest type name accepted (a longer one is Reject): far above any real ``enum(...)``.
MAX_TYPE_CHARS = 1024

_INT_TYPES = {
    "tinyint",
    "smallint",
    "mediumint",
    "int",
    "integer",
    "bigint",
    "int8",
    "int16",
    "int32",
    "int64",
    "int2",
    "int4",
    "long",
    "short",
    "byte",
    "serial",
    "bigserial",
    "smallserial",
    "year",
}
_SMALL_INT_TYPES = {
    "tinyint",
    "smallint",
    "mediumint",
    "int",
    "integer",
    "int8",
    "int16",
    "int32",
    "int2",
    "int4",
    "short",
    "byte",
    "serial",
    "smallserial",
    "year",
}
_DECIMAL_TYPES = {"decimal", "numeric", "number", "dec", "bigdecimal", "money", "smallmoney", "decimal128"}
_FLOAT_TYPES = {
    "float",
    "double",
    "real",
    "double precision",
    "float4",
    "float8",
    "float32",
    "float64",
    "binary_float",
    "binary_double",
}
_BOOL_TYPES = {"bool", "boolean"}
_BYTES_TYPES = {
    "blob",
    "tinyblob",
    "mediumblob",
    "longblob",
    "binary",
    "varbinary",
    "bytea",
    "raw",
    "long raw",
    "bytes",
    "image",
    "bfile",
    "bit",
    "rowversion",  # SQL Server: binary(8)
    "bindata",  # MongoDB BSON binData
}  # OMS writes BIT as Base64 (seeds 000, 001)
_DATETIME_TYPES = {"datetime", "timestamp without time zone", "smalldatetime", "datetime2"}
_TIMESTAMP_TYPES = {"timestamp", "timestamptz", "timestamp with time zone", "timestamp with local time zone", "instant"}
#: JSON documents (MongoDB BSON object / array: their extended JSON text): a mirror holds them as VARIANT;
#: ``variant`` is the name configuration may give a column for the same.
_JSON_TYPES = {"json", "jsonb", "object", "array", "variant"}
#: Type names whose values are kept as text (family ``string``) on purpose; any other name that
#: :func:`family` reads as text is unknown to lakecdc (configuration refuses it: ``bignt``).
TEXT_TYPES = frozenset(
    {
        # MySQL / OceanBase (OMS writes VAR_STRING in __light_type; DataWorks and Debezium write string)
        "char",
        "varchar",
        "tinytext",
        "text",
        "mediumtext",
        "longtext",
        "enum",
        "set",
        "string",
        "var_string",
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
        # PostgreSQL / GaussDB
        "character",
        "character varying",
        "bpchar",
        "name",
        "citext",
        "uuid",
        "xml",
        "inet",
        "cidr",
        "macaddr",
        "macaddr8",
        "tsvector",
        "tsquery",
        "interval",
        "bit varying",
        "varbit",
        "hstore",
        "line",
        "lseg",
        "box",
        "path",
        "circle",
        "int4range",
        "int8range",
        "numrange",
        "tsrange",
        "tstzrange",
        "daterange",
        "oid",
        "time with time zone",
        "timetz",
        # Oracle
        "varchar2",
        "nvarchar2",
        "nchar",
        "clob",
        "nclob",
        "rowid",
        "urowid",
        "xmltype",
        "interval year to month",
        "interval day to second",
        "zoned_datetime",
        "interval_day_to_second",
        "interval_year_to_month",
        # SQL Server
        "nvarchar",
        "ntext",
        "uniqueidentifier",
        "sql_variant",
        "hierarchyid",
        "datetimeoffset",
        "geography",
        # MongoDB BSON (kept as the text DRS and Debezium write)
        "objectid",
        "regex",
        "javascript",
        "javascriptwithscope",
        "symbol",
        "dbpointer",
        "minkey",
        "maxkey",
    }
)

#: Names this long or shorter are memoised by value; a longer one by identity (:func:`type_cache`).
_CACHED_TYPE_CHARS = 128
#: The identity cache holds at most this many names, of this many characters in all: the type names
#: of the last messages (a message's type map is one string per column, shared by all its rows).
_IDENTITY_ENTRIES, _IDENTITY_CHARS = 256, 1 << 20
_TYPE_MODIFIERS = frozenset({"unsigned", "signed", "zerofill"})
_BASE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_ 0123456789")
_DIGITS = frozenset("0123456789")


def type_cache(func: Callable[[Any], _T]) -> Callable[[Any], _T]:
    """Cache a function of one type name, so each name costs one parse whatever the rows of a message.

    Short names (at most 128 characters) are memoised by value in an LRU. A longer name is cached by
    identity: a message's type map holds one string per column that every row of the message shares,
    so the first value parses it and the others hit. The identity cache keeps a bounded number of
    names and characters (oldest out first), and holds each name so its id cannot be reused.
    """
    by_value = lru_cache(maxsize=8192)(func)
    by_identity: dict[int, tuple[str, object]] = {}
    held = [0]

    def wrapper(source_type):
        if source_type is None or len(source_type) <= _CACHED_TYPE_CHARS:
            return by_value(source_type)
        hit = by_identity.get(id(source_type))
        if hit is not None and hit[0] is source_type:
            return hit[1]
        result = func(source_type)
        if len(source_type) <= _IDENTITY_CHARS:
            while by_identity and (
                len(by_identity) >= _IDENTITY_ENTRIES or held[0] + len(source_type) > _IDENTITY_CHARS
            ):
                held[0] -= len(by_identity.pop(next(iter(by_identity)))[0])
            by_identity[id(source_type)] = (source_type, result)
            held[0] += len(source_type)
        return result

    def cache_clear():
        by_value.cache_clear()
        by_identity.clear()
        held[0] = 0

    wrapper.__doc__, wrapper.__name__, wrapper.__wrapped__ = func.__doc__, func.__name__, func
    wrapper.cache_clear = cache_clear  # type: ignore[attr-defined]
    return wrapper


def checked_type(name: object, column: object = None) -> str:
    """A column type name as a message or configuration states it: text of at most
    :data:`MAX_TYPE_CHARS` characters, else Reject naming the column. Decoders check their whole type
    map with it before they decode any value (and a longer name is never parsed)."""
    what = "a type name" if column is None else f"the type of column {str(column)[:60]!a}"
    if not isinstance(name, str):
        raise Reject(f"{what} should be text")
    if len(name) > MAX_TYPE_CHARS:
        raise Reject(f"{what} is longer than {MAX_TYPE_CHARS} characters: {name[:60]!a}...")
    return name


def _split_zone_suffix(words: list[str]) -> tuple[list[str], str | None]:
    """``[..., 'with', 'local', 'time', 'zone']`` → (the words before, ``'with local time zone'``)."""
    for size in (4, 3):
        tail = words[-size:]
        if (
            len(words) >= size
            and tail[0] in ("with", "without")
            and tail[-2:] == ["time", "zone"]
            and (size == 3 or tail[1] == "local")
        ):
            return words[:-size], " ".join(tail)
    return words, None


def _parse_type_text(text: str) -> tuple[str, tuple[int, ...], bool] | None:
    """The grammar ``base [(args)] [unsigned|signed|zerofill ...] [with[out] [local] time zone]``, or None.

    Plain string splitting (no regular expression), so the cost is linear in the length whatever
    the text: the former pattern backtracked for seconds on a name like ``"a" + 70 spaces + "!"``.
    ``base`` is letters, ``_`` and single spaces; without parentheses its trailing modifier and
    zone words are peeled off from the right.
    """
    if text.startswith("interval") and "(" in text:
        return _parse_interval(text)
    head, paren, rest = text.partition("(")
    if paren:
        args_text, close, tail = rest.partition(")")
        if not close:
            return None
        base = head.strip()
        words, zone = _split_zone_suffix(tail.split())
        modifiers = words
        args = tuple(int(a) for a in args_text.replace(" ", "").split(",") if a.isascii() and a.isdigit())
    else:
        args = ()
        words, zone = _split_zone_suffix(text.split())
        cut = len(words)
        while cut > 1 and words[cut - 1] in _TYPE_MODIFIERS:
            cut -= 1
        modifiers = words[cut:]
        if not words:
            return None
        # the base keeps its own spacing: the text up to the end of its last word
        end = 0
        for word in words[:cut]:
            end = text.index(word, end) + len(word)
        base = text[:end].strip()
    if not base or base[0] in _DIGITS or not set(base) <= _BASE_CHARS:
        return None
    if any(m not in _TYPE_MODIFIERS for m in modifiers):
        return None
    if zone:
        base = f"{base} {zone}"
    return base, args, "unsigned" in modifiers


def _parse_interval(text: str) -> tuple[str, tuple[int, ...], bool] | None:
    """Oracle's ``interval year(2) to month`` / ``interval day(2) to second(6)``: the precisions sit
    inside the name, so they are taken out (as the args) and the rest is read as a plain name."""
    args: list[int] = []
    kept: list[str] = []
    rest = text
    while "(" in rest:
        before, _paren, after = rest.partition("(")
        inner, close, rest = after.partition(")")
        if not close or not (inner.strip().isascii() and inner.strip().isdigit()):
            return None
        args.append(int(inner))
        kept.append(before)
    parsed = _parse_type_text(" ".join(" ".join(kept + [rest]).split()))
    return (parsed[0], tuple(args), parsed[2]) if parsed else None


@type_cache
def parse_type(source_type: str) -> tuple[str, tuple[int, ...], bool]:
    """``'DECIMAL(38, 24) UNSIGNED'`` → (``'decimal'``, [38, 24], True). Unknown args are dropped.

    A name outside the grammar of :func:`_parse_type_text` (``int8``, ``set('a)')``) comes back
    whole, with no args: :func:`family` then reads it as one word (``int8`` is an int; others text).
    """
    text = source_type.strip().lower()
    return _parse_type_text(text) or (text, (), False)


def is_known_type(source_type: str) -> bool:
    """True for a type name lakecdc maps on purpose: a known family, or a known text type (arrays of one).

    Used by configuration, where a typo (``bignt``, ``decimal(12,2``) would otherwise silently
    make the column STRING.
    """
    text = source_type.strip().lower()
    if not text or len(text) > MAX_TYPE_CHARS:
        return False
    if text.endswith("[]"):
        return is_known_type(text[:-2])
    element = array_element(text)
    if element is not None:
        return is_known_type(element)
    return family(text) != "string" or parse_type(text)[0] in TEXT_TYPES


def array_element(source_type: str | None) -> str | None:
    """A typed array's element type: ``array<decimal(5,0)>`` → ``decimal(5,0)``, PostgreSQL's
    ``numeric(5)[]`` → ``numeric(5)``; else None. Only ``array<...>`` is of the family ``array`` (formats
    that report ``X[]`` send PostgreSQL's ``{1,2}`` text); configuration may spell an element either way."""
    if not source_type:
        return None
    text = source_type.strip().lower()
    if text.startswith("array<") and text.endswith(">") and len(text) > 7:
        return text[6:-1].strip()
    if text.endswith("[]") and len(text) > 2:
        return text[:-2].strip()
    return None


@type_cache
def family(source_type: str | None) -> str:
    """The canonical family of a vendor type name (see the module table)."""
    if not source_type:
        return "string"
    if source_type.lstrip()[:6].lower() == "array<" and array_element(source_type):
        return "array"
    base, _args, unsigned = parse_type(source_type)
    if base in _INT_TYPES:
        return "uint64" if unsigned and base in ("bigint", "int64", "long") else "int"
    if base in _DECIMAL_TYPES:
        return "decimal"
    if base in _FLOAT_TYPES:
        return "float"
    if base in _BOOL_TYPES:
        return "bool"
    if base in _BYTES_TYPES:
        return "bytes"
    if base == "date":
        return "date"
    if base in _DATETIME_TYPES:
        return "datetime"
    if base in _TIMESTAMP_TYPES:
        return "timestamp"
    if base in ("time", "time without time zone"):
        return "time"
    if base in _JSON_TYPES:
        return "json"
    return "string"


@type_cache
def spark_type(source_type: str | None) -> str:
    """The Delta column type (Spark SQL DDL) for a vendor type; see the module table."""
    fam = family(source_type)
    if fam == "array":
        return f"ARRAY<{spark_type(array_element(source_type))}>"
    base, args, _ = parse_type(source_type or "")
    if fam == "int":
        return "INT" if base in _SMALL_INT_TYPES and not parse_type(source_type or "")[2] else "BIGINT"
    if fam == "uint64":
        return "DECIMAL(20,0)"
    if fam == "decimal":
        if args and 0 < args[0] <= 38:
            scale = args[1] if len(args) > 1 else 0
            return f"DECIMAL({args[0]},{min(scale, args[0])})"
        return "STRING"
    if fam == "float":
        return "DOUBLE"
    if fam == "bool":
        return "BOOLEAN"
    if fam == "bytes":
        return "BINARY"
    if fam == "date":
        return "DATE"
    if fam in ("datetime", "timestamp"):
        if args and args[0] > 6:
            return "STRING"
        return "TIMESTAMP_NTZ" if fam == "datetime" else "TIMESTAMP"
    if fam == "json":
        return "VARIANT"
    return "STRING"


def configured_over(wire: dict[str, str], configured: Mapping[str, str]) -> dict[str, str]:
    """The type of each column where a message's types (``wire``) and the configuration's meet: the
    configured type decides (lower case, as decoders state types), the message's fills what the
    configuration leaves out. OMS DataWorks and DefaultExtend write an unsigned BIGINT as ``bigint``: a
    column configured ``bigint unsigned`` keeps 10223372036854775806 (issue 35)."""
    return {**wire, **{c: t.lower() for c, t in configured.items() if t}}
