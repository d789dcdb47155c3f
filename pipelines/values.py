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
"""
from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pipelines.formats.base import Reject

EPOCH_DATE = date(1970, 1, 1)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_INT_TYPES = {
    "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "int8", "int16", "int32",
    "int64", "int2", "int4", "long", "short", "byte", "serial", "bigserial", "smallserial", "year",
}
_SMALL_INT_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "int8", "int16", "int32",
                    "int2", "int4", "short", "byte", "serial", "smallserial", "year"}
_DECIMAL_TYPES = {"decimal", "numeric", "number", "dec", "bigdecimal", "money"}
_FLOAT_TYPES = {"float", "double", "real", "double precision", "float4", "float8", "float32", "float64",
                "binary_float", "binary_double"}
_BOOL_TYPES = {"bool", "boolean"}
_BYTES_TYPES = {"blob", "tinyblob", "mediumblob", "longblob", "binary", "varbinary", "bytea", "raw",
                "long raw", "bytes", "image", "bfile", "bit"}  # OMS writes BIT as Base64 (seeds 000, 001)
_DATETIME_TYPES = {"datetime", "timestamp without time zone", "smalldatetime", "datetime2"}
_TIMESTAMP_TYPES = {"timestamp", "timestamptz", "timestamp with time zone",
                    "timestamp with local time zone", "instant"}
_JSON_TYPES = {"json", "jsonb"}

_TYPE_RE = re.compile(
    r"^\s*([a-z_ ]+?)\s*(?:\(\s*([^)]*)\))?\s*((?:unsigned|signed|zerofill|\s)*)\s*"
    r"((?:with|without)(?: local)? time zone)?\s*$"
)


@lru_cache(maxsize=8192)
def parse_type(source_type: str) -> tuple[str, tuple[int, ...], bool]:
    """``'DECIMAL(38, 24) UNSIGNED'`` → (``'decimal'``, [38, 24], True). Unknown args are dropped."""
    text = source_type.strip().lower()
    m = _TYPE_RE.match(text)
    if not m:
        return text, (), False
    base = m.group(1).strip()
    if m.group(4):  # timestamp(6) without time zone → "timestamp without time zone"
        base = f"{base} {m.group(4)}"
    args = tuple(int(a) for a in (m.group(2) or "").replace(" ", "").split(",") if a.isdigit())
    return base, args, "unsigned" in (m.group(3) or "")


@lru_cache(maxsize=8192)
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


@lru_cache(maxsize=8192)
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
_EXPONENT_RE = re.compile(r"[eE]([+-]?\d+)$")


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
    if re.fullmatch(r"[+-]?\d{1,%d}" % MAX_NUMBER_CHARS, text):
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
    micros = int(canon_int(value))
    secs, frac = divmod(micros, 10**6)
    hours, rest = divmod(secs, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}" + _fraction(f"{frac:06d}")


_DT_RE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2}|[A-Za-z_]+(?:/[A-Za-z_+-]+)*)?$"
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
        raise Reject(f"invalid date-time: {text[:60]!r}") from None
    return dt, frac or "", zone


def _zone_offset(zone: str, wall: datetime) -> timedelta:
    if zone == "Z":
        return timedelta(0)
    if zone[0] in "+-":
        digits = zone[1:].replace(":", "")
        delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        return delta if zone[0] == "+" else -delta
    try:
        return wall.replace(tzinfo=ZoneInfo(zone)).utcoffset() or timedelta(0)
    except (ZoneInfoNotFoundError, ValueError):
        raise Reject(f"unknown time zone: {zone!r}") from None


def canon_local_datetime(text: str) -> str:
    """A zone-less wall clock → ``YYYY-MM-DDTHH:MM:SS[.f]``. A value with a zone is rejected here."""
    dt, frac, zone = parse_datetime_text(text)
    if zone:
        raise Reject(f"zone-less date-time expected, got a zone: {text[:60]!r}")
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(frac)


def canon_instant(text: str, default_zone: str = "UTC") -> str:
    """A date-time with a zone (or in ``default_zone``) → UTC ``YYYY-MM-DDTHH:MM:SS[.f]Z``."""
    dt, frac, zone = parse_datetime_text(text)
    utc = dt - _zone_offset(zone or default_zone, dt)
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(frac) + "Z"


def canon_date(text: str) -> str:
    dt, frac, zone = parse_datetime_text(text)
    if len(text.strip()) != 10:
        raise Reject(f"not a date: {text[:60]!r}")
    return dt.date().isoformat()


_TIME_RE = re.compile(r"^(-?\d{1,3}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")


def canon_time(text: str) -> str:
    m = _TIME_RE.match(str(text).strip())
    if not m:
        raise Reject(f"not a time: {str(text)[:60]!r}")
    h, mi, s, frac = m.groups()
    return f"{int(h):02d}:{mi}:{s or '00'}" + _fraction(frac or "")


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
