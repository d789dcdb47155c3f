"""Canonical values: the exact text each column value takes in silver, whatever the vendor wrote.

Decoders turn vendor encodings into this canon; gold casts the canon into the
mirror's Delta type; ``lakecdc export`` prints it back. One table, used by all:

==============  ==============================  =================================
family          canonical text                  mirror (Delta) type
==============  ==============================  =================================
int             ``-123``                        BIGINT (INT for <= 32-bit types)
uint64          ``10223372036854775806``        DECIMAL(20,0)
decimal         ``9.999999999999999093266253``  DECIMAL(p,s); STRING if p > 38 or
                (plain, trailing zeros kept)    no (p,s) was stated
float           the number's text               DOUBLE
bool            ``true`` / ``false``            BOOLEAN
bytes           standard Base64                 BINARY
date            ``YYYY-MM-DD``                  DATE
datetime        ``YYYY-MM-DDTHH:MM:SS[.f]``     TIMESTAMP_NTZ (STRING above 6
                (zone-less wall clock)          fraction digits)
timestamp       ``YYYY-MM-DDTHH:MM:SS[.f]Z``    TIMESTAMP (UTC instant)
time            ``HH:MM:SS[.f]``                STRING
string / json   the text                        STRING
==============  ==============================  =================================

Fractions keep up to 9 digits with trailing zeros removed. Nothing here ever goes
through a float.

The module is longer than 400 lines on purpose: it is the one contract that decoders, gold and
export share (type names → families → mirror types, and the canonicalisers of each family);
split, it would be two halves of one table.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pipelines.errors import InvalidValue, Reject

#: Longest type name accepted (a longer one is Reject): far above any real ``enum(...)``.
MAX_TYPE_CHARS = 1024

EPOCH_DATE = date(1970, 1, 1)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

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
_DECIMAL_TYPES = {"decimal", "numeric", "number", "dec", "bigdecimal", "money"}
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
}  # OMS writes BIT as Base64 (seeds 000, 001)
_DATETIME_TYPES = {"datetime", "timestamp without time zone", "smalldatetime", "datetime2"}
_TIMESTAMP_TYPES = {"timestamp", "timestamptz", "timestamp with time zone", "timestamp with local time zone", "instant"}
_JSON_TYPES = {"json", "jsonb"}
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
    }
)

#: Names this long or shorter are memoised; a longer one is parsed again (no cache holds hostile text).
_CACHED_TYPE_CHARS = 128
_TYPE_MODIFIERS = frozenset({"unsigned", "signed", "zerofill"})
_BASE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz_ ")


def _short_cache(func):
    """lru_cache for short type names only, so a stream of huge hostile names cannot fill memory."""
    cached = lru_cache(maxsize=8192)(func)

    def wrapper(source_type):
        if source_type is not None and len(source_type) > _CACHED_TYPE_CHARS:
            return func(source_type)
        return cached(source_type)

    wrapper.__doc__, wrapper.__name__, wrapper.__wrapped__ = func.__doc__, func.__name__, func
    wrapper.cache_clear = cached.cache_clear
    return wrapper


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
    if not base or not set(base) <= _BASE_CHARS or any(m not in _TYPE_MODIFIERS for m in modifiers):
        return None
    if zone:
        base = f"{base} {zone}"
    return base, args, "unsigned" in modifiers


@_short_cache
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
    return family(text) != "string" or parse_type(text)[0] in TEXT_TYPES


@_short_cache
def family(source_type: str | None) -> str:
    """The canonical family of a vendor type name (see the module table)."""
    if not source_type:
        return "string"
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


@_short_cache
def spark_type(source_type: str | None) -> str:
    """The Delta column type (Spark SQL DDL) for a vendor type; see the module table."""
    fam = family(source_type)
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
    return "STRING"


# ---------------------------------------------------------------- canonicalisers


#: Longest number text accepted; ``1e999999999`` must not expand into a billion digits.
MAX_NUMBER_CHARS = 4000
_EXPONENT_RE = re.compile(r"[eE]([+-]?\d+)$", re.ASCII)


def _decimal(text: str, what: str) -> Decimal:
    """Parse a number exactly, refusing texts and exponents that would blow up memory."""
    if len(text) > MAX_NUMBER_CHARS:
        raise Reject(f"{what} has more than {MAX_NUMBER_CHARS} characters: {text[:60]!r}...")
    m = _EXPONENT_RE.search(text)
    if m and abs(int(m.group(1))) > 400:
        raise Reject(f"{what} exponent out of range: {text[:60]!r}")
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise Reject(f"not {what}: {text[:60]!r}") from None
    if not d.is_finite():
        raise Reject(f"not a finite {what}: {text[:60]!r}")
    return d


def canon_int(value: object) -> str:
    text = str(value).strip()
    if re.fullmatch(rf"[+-]?\d{{1,{MAX_NUMBER_CHARS}}}", text, re.ASCII):
        return str(int(text))
    d = _decimal(text, "an integer")
    if d != d.to_integral_value():
        raise Reject(f"not an integer: {text[:60]!r}")
    return str(int(d))


def canon_decimal(value: object) -> str:
    """Exact plain decimal text: ``1E+2`` → ``100``; ``1.10`` stays ``1.10``."""
    return format(_decimal(str(value).strip(), "a decimal number"), "f")


def canon_float(value: object) -> str:
    text = str(value).strip()
    if text.lower() not in ("nan", "infinity", "-infinity", "inf", "-inf"):
        _decimal(text, "a floating-point number")
    return text


def canon_bool(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    if text in ("true", "1", "t", "y", "yes"):
        return "true"
    if text in ("false", "0", "f", "n", "no"):
        return "false"
    raise Reject(f"not a boolean: {text[:60]!r}")


def canon_base64(text: str) -> str:
    """Validate Base64 and return it in the standard padded alphabet."""
    try:
        return base64.b64encode(base64.b64decode(text, validate=True)).decode("ascii")
    except (binascii.Error, ValueError):
        raise Reject(f"not valid Base64: {text[:60]!r}") from None


def base64_from_hex(text: str) -> str:
    """Base16 (Debezium BYTES, PostgreSQL ``\\x...`` bytea) → Base64."""
    hex_text = text[2:] if text[:2] in ("\\x", "0x", "0X") else text
    try:
        return base64.b64encode(bytes.fromhex(hex_text)).decode("ascii")
    except ValueError:
        raise Reject(f"not valid hexadecimal bytes: {text[:60]!r}") from None


def base64_from_byte_list(values: object) -> str:
    """DRS writes binary as a list of byte values, e.g. ``[106, 103]`` (signed or unsigned)."""
    if not isinstance(values, list):
        raise Reject(f"expected a list of byte values, got {values!r:.60}")
    out = bytearray()
    for v in values:
        try:
            n = int(str(v))
        except ValueError:
            raise Reject(f"not a byte value: {v!r:.20}") from None
        if not -128 <= n <= 255:
            raise Reject(f"byte value out of range: {n}")
        out.append(n & 0xFF)
    return base64.b64encode(bytes(out)).decode("ascii")


def base64_from_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _fraction(frac: str) -> str:
    frac = frac.rstrip("0")
    if len(frac) > 9:
        raise Reject(f"fraction of a second has more than 9 digits: {frac!r}")
    return f".{frac}" if frac else ""


def instant_from_epoch(value: object, unit: str = "s") -> str:
    """Epoch seconds or milliseconds, with an optional fraction of up to 9 digits → UTC ISO ``...Z``.

    OMS Default writes TIMESTAMP as ``1606233662.012345`` (seconds); DRS writes
    ``1624614713.201``; Canal ``es`` and DataWorks ``eventTime`` are milliseconds.
    """
    d = _decimal(str(value).strip(), "an epoch number")
    scaled = d * (10**9 if unit == "s" else 10**6 if unit == "ms" else 10**3)
    nanos = int(scaled)
    if scaled != nanos:
        raise Reject(f"epoch value finer than nanoseconds: {value!s:.60}")
    return _iso_from_epoch_nanos(nanos) + "Z"


def _iso_from_epoch_nanos(nanos: int) -> str:
    secs, frac = divmod(nanos, 10**9)
    try:
        dt = datetime(1970, 1, 1) + timedelta(seconds=secs)
    except OverflowError:
        raise Reject(f"epoch value out of range: {nanos}") from None
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(f"{frac:09d}")


def local_datetime_from_epoch(value: object, unit: str = "ms") -> str:
    """Debezium DATETIME: milliseconds since epoch of a zone-less wall clock."""
    return instant_from_epoch(value, unit)[:-1]


def date_from_epoch_days(value: object) -> str:
    return (EPOCH_DATE + timedelta(days=int(canon_int(value)))).isoformat()


def date_from_epoch_millis(value: object) -> str:
    return instant_from_epoch(value, "ms")[:10]


def time_from_micros(value: object) -> str:
    """Microseconds since midnight → ``[-]HH:MM:SS[.f]`` (a negative MySQL TIME keeps its sign)."""
    micros = int(canon_int(value))
    sign = "-" if micros < 0 else ""
    secs, frac = divmod(abs(micros), 10**6)
    hours, rest = divmod(secs, 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}" + _fraction(f"{frac:06d}")


_DT_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2}|[A-Za-z_]+(?:/[A-Za-z_+-]+)*)?$",
    re.ASCII,
)


def parse_datetime_text(text: str) -> tuple[datetime, str, str | None]:
    """``YYYY-MM-DD[ HH:MM[:SS[.f]]][ zone]`` → (naive wall clock, fraction digits, zone or None)."""
    m = _DT_RE.match(text.strip())
    if not m:
        raise Reject(f"not a date-time: {text[:60]!r}")
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        dt = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        # the shape of a date-time with a day that does not exist (0000-00-00, 2021-02-30): what
        # MySQL stores as a zero date and OMS passes on as the original text
        raise InvalidValue(text, f"invalid date-time: {text[:60]!r}") from None
    return dt, frac or "", zone


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) | {"UTC"}


@lru_cache(maxsize=512)
def time_zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, or Reject. Checked against the zone list first: ``ZoneInfo`` itself
    raises OSError / IsADirectoryError (whose text holds the interpreter's paths) for names such
    as ``America`` or ``../x``."""
    if name not in _zone_names():
        raise Reject(f"unknown time zone: {name[:60]!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise Reject(f"unknown time zone: {name[:60]!r}") from None


def _zone_offset(zone: str, wall: datetime) -> timedelta:
    if zone == "Z":
        return timedelta(0)
    if zone[0] in "+-":
        digits = zone[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            raise Reject(f"invalid zone offset: {zone!r}")
        delta = timedelta(hours=hours, minutes=minutes)
        return delta if zone[0] == "+" else -delta
    tz = time_zone(zone)
    try:
        return wall.replace(tzinfo=tz).utcoffset() or timedelta(0)
    except (OverflowError, ValueError):
        raise Reject(f"date-time out of range in time zone {zone!r}") from None


def canon_local_datetime(text: str) -> str:
    """A zone-less wall clock → ``YYYY-MM-DDTHH:MM:SS[.f]``. A value with a zone is rejected here."""
    dt, frac, zone = parse_datetime_text(text)
    if zone:
        raise Reject(f"zone-less date-time expected, got a zone: {text[:60]!r}")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(frac)


def canon_instant(text: str, default_zone: str = "UTC") -> str:
    """A date-time with a zone (or in ``default_zone``) → UTC ``YYYY-MM-DDTHH:MM:SS[.f]Z``."""
    dt, frac, zone = parse_datetime_text(text)
    try:
        utc = dt - _zone_offset(zone or default_zone, dt)
    except OverflowError:
        raise Reject(f"date-time out of range once moved to UTC: {text[:60]!r}") from None
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(frac) + "Z"


def canon_date(text: str) -> str:
    dt, frac, zone = parse_datetime_text(text)
    if len(text.strip()) != 10:
        raise Reject(f"not a date: {text[:60]!r}")
    return dt.date().isoformat()


_TIME_RE = re.compile(r"^(-?)(\d{1,3}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$", re.ASCII)


def canon_time(text: str) -> str:
    """``[-]H[HH]:MM[:SS[.f]]`` (MySQL TIME reaches 838 hours, and may be negative) → ``[-]HH:MM:SS[.f]``."""
    m = _TIME_RE.match(str(text).strip())
    if not m:
        raise Reject(f"not a time: {str(text)[:60]!r}")
    sign, h, mi, s, frac = m.groups()
    if int(mi) > 59 or int(s or 0) > 59:
        raise Reject(f"invalid time: {str(text)[:60]!r}")
    return f"{sign}{int(h):02d}:{mi}:{s or '00'}" + _fraction(frac or "")


def canonical(fam: str, value: object) -> str | None:
    """Canonicalise a value that the vendor already wrote in the plain text of its family.

    Formats with special encodings (epoch numbers, hex, byte lists) convert first with the
    helpers above and call this only for the plain cases.
    """
    if value is None:
        return None
    if fam == "int":
        return canon_int(value)
    if fam == "uint64":
        text = canon_int(value)
        if not 0 <= int(text) < 2**64:
            raise Reject(f"out of range for BIGINT UNSIGNED: {text}")
        return text
    if fam == "decimal":
        return canon_decimal(value)
    if fam == "float":
        return canon_float(value)
    if fam == "bool":
        return canon_bool(value)
    if fam == "bytes":
        return canon_base64(str(value))
    if fam == "date":
        return canon_date(str(value))
    if fam == "datetime":
        return canon_local_datetime(str(value))
    if fam == "timestamp":
        return canon_instant(str(value))
    if fam == "time":
        return canon_time(str(value))
    return value if isinstance(value, str) else str(value)
