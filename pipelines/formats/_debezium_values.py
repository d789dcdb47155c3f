"""Debezium's value encodings, shared by every Debezium format (``debezium``, ``debezium_avro``, OMS's
three variants): a schema field → its reported type and wire unit, a wire value → canonical text, and back.

Value encodings (seed 000/001 "Debezium" type tables), applied per column by its type:

=================  ==========================================  ==============================
column type        Debezium writes                             canonical
=================  ==========================================  ==============================
BOOL               ``true`` / ``false``                         ``true`` / ``false``
integer types      JSON number (BIGINT UNSIGNED: string)        integer text
FLOAT / DOUBLE     JSON number                                  the number's exact text
DECIMAL            string (may use scientific notation)         plain decimal, every digit
BIT / BLOB ...     **Base16** string (OMS, not Base64)          Base64
TIMESTAMP          ``YYYY-MM-DDTHH:MM:SS[.f]Z``                 UTC instant
DATE               days since 1970-01-01                        ``YYYY-MM-DD``
TIME               microseconds since midnight                  ``HH:MM:SS[.f]``
DATETIME           milliseconds since epoch, zone-less          ``YYYY-MM-DDTHH:MM:SS[.f]``
=================  ==========================================  ==============================

Where a column's type comes from: a Debezium logical ``name`` in ``schema`` (io.debezium.time.Date,
MicroTime, Timestamp, ZonedTimestamp, ...) first; else the configured source type
(``ctx.column_types``), because the seed's schemas carry only primitive types (seed 000 declares
the DATE column ``c22`` as plain ``int32`` and the DATETIME column ``c24`` as ``string`` while
sending a number); else the schema's primitive type; else (payload-only, nothing configured)
the exact JSON text. A date/time column may also arrive as text (``2022-11-15``): it is then
read as text (lenient; the encoder uses this for values finer than the wire unit).

Arrays (``"type": "array"`` with ``items``: Debezium PostgreSQL's ``int4[]``, ``numeric(5)[]``,
``date[]``, ...): a typed array, decoded element by element by the ``items`` schema exactly as a column
of that type would be; its reported type is ``array<element type>`` and its canonical text the JSON
array of the elements' canonical texts (``["1.45E-10",null]``), which gold reads into an ARRAY column
(:mod:`pipelines.values`). An array whose ``items`` say nothing we read stays a JSON document.

Unavailable values: Debezium writes ``unavailable.value.placeholder`` (default
``__debezium_unavailable_value``) for a value the database log does not carry (PostgreSQL's unchanged
TOASTed column, Oracle's LOB): :func:`unavailable_forms` lists how each column type carries it
(PostgreSQL ``UnchangedToastedPlaceholder``), and :func:`canonical_image` leaves such a column out of
the image, so the change does not carry it (a partial image): the mirror keeps the stored value.

Longer than 400 lines because one table of encodings, its inverse for the encoders and the schema
reading they share describe one thing; split, a type's rule would live in two places.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from pipelines import values as V
from pipelines.formats.base import Num, Reject, dumps_exact

#: Debezium's default ``unavailable.value.placeholder``.
UNAVAILABLE_PLACEHOLDER = "__debezium_unavailable_value"

#: Debezium / Kafka Connect primitive schema type → the source-type name we report (one values.family
#: knows). The Connect JSON converter writes ``float`` / ``double``; OMS writes ``float32`` / ``float64``.
PRIMITIVE_TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float32": "float",
    "float64": "double",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
    "struct": "json",
    "array": "json",
    "map": "json",
}
#: Debezium / Kafka Connect logical ``name`` → (reported type, wire unit). Units: ``days``; ``ms`` /
#: ``us`` / ``ns`` since midnight or the epoch; ``text`` (the value is already the text of its type);
#: ``number``; ``b64`` (Decimal, scale in ``parameters``); ``vsd`` (VariableScaleDecimal struct
#: {scale, value}); ``bits`` (Bits, ``parameters.length``); ``wkb`` (geometry struct {wkb, srid});
#: ``duration_us`` (MicroDuration).
LOGICAL_TYPES = {
    "io.debezium.time.date": ("date", "days"),
    "org.apache.kafka.connect.data.date": ("date", "days"),
    "io.debezium.time.time": ("time", "ms"),
    "org.apache.kafka.connect.data.time": ("time", "ms"),
    "io.debezium.time.microtime": ("time", "us"),
    "io.debezium.time.nanotime": ("time", "ns"),
    "io.debezium.time.timestamp": ("datetime", "ms"),
    "org.apache.kafka.connect.data.timestamp": ("datetime", "ms"),
    "io.debezium.time.microtimestamp": ("datetime", "us"),
    "io.debezium.time.nanotimestamp": ("datetime", "ns"),
    "io.debezium.time.zonedtimestamp": ("timestamp", "text"),
    "io.debezium.time.zonedtime": ("time with time zone", "text"),
    "io.debezium.time.isodate": ("date", "text"),
    "io.debezium.time.isotime": ("time", "text"),
    "io.debezium.time.isotimestamp": ("datetime", "text"),
    "io.debezium.time.year": ("year", "number"),
    "io.debezium.time.microduration": ("interval", "duration_us"),
    "io.debezium.time.interval": ("interval", "text"),
    "io.debezium.data.json": ("json", "text"),
    "io.debezium.data.xml": ("xml", "text"),
    "io.debezium.data.uuid": ("uuid", "text"),
    "io.debezium.data.enum": ("enum", "text"),
    "io.debezium.data.enumset": ("set", "text"),
    "io.debezium.data.ltree": ("string", "text"),
    "io.debezium.data.bits": ("bytes", "bits"),
    "org.apache.kafka.connect.data.decimal": ("decimal", "b64"),
    "io.debezium.data.variablescaledecimal": ("decimal", "vsd"),
    "io.debezium.data.geometry.geometry": ("bytes", "wkb"),
    "io.debezium.data.geometry.geography": ("bytes", "wkb"),
    "io.debezium.data.geometry.point": ("bytes", "wkb"),
}


@dataclass(frozen=True)
class Dialect:
    """How one member of the family writes what its schema does not say (the family's hooks).

    * ``binary`` – BYTES text: ``base16`` (OMS, seed 000/001; Debezium ``binary.handling.mode=hex``),
      ``base64`` (Debezium's default through the JSON converter) or ``base64-url-safe``.
    * ``adaptive_datetime`` – a zone-less DATETIME(p) number with no logical name: False → always
      milliseconds (OMS); True → Debezium's ``time.precision.mode=adaptive``: ms for p ≤ 3, µs for
      4..6, ns above.
    * ``lossy_double`` – a column configured DECIMAL whose schema says ``double``
      (``decimal.handling.mode=double``): report ``double`` so the mirror is DOUBLE, not a DECIMAL
      that pretends to be exact.
    * ``unsigned_wrap`` – a BIGINT UNSIGNED written as int64 (``bigint.unsigned.handling.mode=long``)
      wraps above 2^63 - 1: a negative value is read as value + 2^64.
    * ``unavailable`` – the wire forms of ``unavailable.value.placeholder`` (:func:`unavailable_forms`),
      or None where the writer has no such value (OMS).
    """

    binary: str = "base16"
    adaptive_datetime: bool = False
    lossy_double: bool = False
    unsigned_wrap: bool = False
    unavailable: Unavailable | None = None


#: OMS's Debezium variants (seed 000/001).
OMS_DIALECT = Dialect()


# ---------------------------------------------------------------- unavailable values


class Unavailable(NamedTuple):
    """The forms ``unavailable.value.placeholder`` takes on the wire, by what carries it."""

    text: str  #: a text-like column, and BYTES in hex / base64 modes (PostgresValueConverter)
    base64: str  #: a BYTES column in bytes mode, through the JSON converter (or Avro → Base64 text)
    lists: tuple[tuple[Any, ...], ...]  #: arrays: text[] / bytea[] / int4[] / date[] / int8[] / uuid[]
    hstore: str  #: hstore.handling.mode=json (as a map it is the object {text: text})


@lru_cache(maxsize=64)
def unavailable_forms(setting: str | None = None) -> Unavailable:
    """The forms of the placeholder ``setting`` (default ``__debezium_unavailable_value``; ``hex:...`` is
    hexadecimal octets, as the connector reads it), per Debezium PostgreSQL's ``UnchangedToastedPlaceholder``:
    the text, its bytes, ``[text]``, ``[bytes]``, the bytes as a list of integers (``int4[]``, ``int8[]``,
    ``date[]``), ``[UUID.nameUUIDFromBytes(bytes)]`` and ``{text: text}``."""
    setting = UNAVAILABLE_PLACEHOLDER if setting is None else str(setting)
    if setting.startswith("hex:"):
        try:
            raw = bytes.fromhex(setting[4:])
        except ValueError:
            raise Reject(f"unavailable.value.placeholder {setting[:40]!r} is not hex: octets") from None
    else:
        raw = setting.encode("utf-8")
    text = raw.decode("utf-8", "replace")
    b64 = base64.b64encode(raw).decode("ascii")
    digest = bytearray(hashlib.md5(raw).digest())  # Java's UUID.nameUUIDFromBytes: MD5, version 3
    digest[6], digest[8] = (digest[6] & 0x0F) | 0x30, (digest[8] & 0x3F) | 0x80
    uuid = digest.hex()
    uuid = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}"
    signed = tuple(b - 256 if b > 127 else b for b in raw)  # Java bytes are signed
    return Unavailable(text, b64, ((text,), (b64,), signed, (uuid,)), dumps_exact({text: text}))


def is_unavailable(value: Any, forms: Unavailable | None, declared: tuple | None) -> bool:
    """Whether a wire value is the placeholder (``declared``: the column's schema type, if any)."""
    if forms is None or value is None or isinstance(value, (bool, Num)):
        return False
    if isinstance(value, str):
        primitive = declared[0] if declared else None
        return value == forms.text or value == forms.hstore or (value == forms.base64 and primitive in (None, "bytes"))
    if isinstance(value, list):
        if len(value) == 1:
            return isinstance(value[0], str) and value[0] in (forms.text, forms.base64, forms.lists[3][0])
        return len(value) == len(forms.lists[2]) and [str(v) for v in value] == [str(b) for b in forms.lists[2]]
    return isinstance(value, dict) and len(value) == 1 and value.get(forms.text) == forms.text


# ---------------------------------------------------------------- types


class Declared(NamedTuple):
    """A column's type as a Debezium schema field states it."""

    type: str  #: the Connect primitive (``int32``, ``bytes``, ``struct``, ``array`` ...)
    name: str | None  #: the logical name, lower case (``io.debezium.time.date``), if any
    params: dict  #: ``parameters``
    items: Declared | None = None  #: an array's element type


def declared_of(field: Any) -> Declared | None:
    """The :class:`Declared` type of one schema field (an array's ``items`` too), None where it is no field."""
    if not isinstance(field, dict):
        return None
    params = field.get("parameters") if isinstance(field.get("parameters"), dict) else {}
    primitive = str(field.get("type") or "").lower()
    items = declared_of(field.get("items")) if primitive == "array" else None
    return Declared(primitive, str(field.get("name") or "").lower() or None, params, items)


#: Arrays nested deeper than this (PostgreSQL's own arrays are one level) stay JSON documents.
MAX_ARRAY_DEPTH = 4


def _depth(declared: Declared) -> int:
    """How many array levels ``declared`` nests (0 for a non-array; 1 + MAX for one that nests too deep)."""
    depth = 0
    while declared is not None and declared.type == "array" and depth <= MAX_ARRAY_DEPTH:
        declared, depth = declared.items, depth + 1
    return depth if declared is not None else MAX_ARRAY_DEPTH + 1


def schema_types(schema: Any, image: str | None) -> dict[str, Declared] | None:
    """Column → :class:`Declared` (primitive type, logical name, parameters, items) from a Debezium
    ``schema``: the struct field ``image`` (before / after) of an envelope schema, or (``image`` None) the
    row struct itself (the unwrap SMT's and a record key's schema). None when the schema does not
    describe that image."""
    if not isinstance(schema, dict):
        return None
    fields = schema.get("fields") if image is None else None
    for part in schema.get("fields") or [] if image is not None else []:
        if isinstance(part, dict) and part.get("field") == image and isinstance(part.get("fields"), list):
            fields = part["fields"]
            break
    if not isinstance(fields, list):
        return None
    out = {}
    for f in fields:
        if isinstance(f, dict) and isinstance(f.get("field"), str):
            out[f["field"]] = declared_of(f)
    return out


def resolve_type(
    column: str,
    declared: Declared | tuple[str, str | None, dict] | None,
    configured: dict[str, str],
    dialect: Dialect = OMS_DIALECT,
) -> tuple[str | None, str]:
    """(reported type, wire unit) of one column; see the module docstring for the precedence."""
    if declared and declared[0] == "array" and _depth(declared) <= MAX_ARRAY_DEPTH:
        element = V.array_element(configured.get(column)) or ""
        reported, unit = resolve_type(column, declared.items, {column: element} if element else {}, dialect)
        if reported is not None and unit != "raw":
            return f"array<{reported}>", f"array:{unit}"
    if declared and declared[1] in LOGICAL_TYPES:
        reported, unit = LOGICAL_TYPES[declared[1]]
        if unit == "b64":
            scale = _parameter(declared[2], "scale", V.MAX_EXPONENT) or "0"
            precision = _parameter(declared[2], "connect.decimal.precision", 1000)
            reported = f"decimal({precision},{scale})" if precision else "decimal"
            if not precision and scale == "0" and V.family(configured.get(column)) == "uint64":
                reported = configured[column].lower()  # bigint.unsigned.handling.mode=precise
            return reported, f"b64:{scale}"
        if unit == "bits":
            return reported, f"bits:{declared[2].get('length', '')}"
        return reported, unit
    if column in configured:
        reported = configured[column].lower()
        fam = V.family(reported)
        if fam == "array":  # configured array<T>: each level's elements read as T's text
            unit, element = "array:source", V.array_element(reported)
            while V.family(element) == "array":
                unit, element = "array:" + unit, V.array_element(element)
            return reported, unit
        if dialect.lossy_double and fam == "decimal" and declared and declared[0] in ("double", "float64", "float"):
            return "double", "source"  # decimal.handling.mode=double: the digits are already lost
        if dialect.adaptive_datetime and fam == "datetime":
            args = V.parse_type(reported)[1]
            precision = args[0] if args else 0
            return reported, "ms" if precision <= 3 else "us" if precision <= 6 else "ns"
        return reported, "source"
    if declared and declared[0] in PRIMITIVE_TYPES:
        return PRIMITIVE_TYPES[declared[0]], "source"
    return None, "raw"


def to_canonical(value: Any, reported: str | None, unit: str, dialect: Dialect = OMS_DIALECT) -> str | None:
    """One Debezium-encoded value → canonical text (or None for NULL)."""
    if value is None:
        return None
    if unit == "raw" or reported is None:
        return value if isinstance(value, str) else dumps_exact(value)
    if unit.startswith("array:"):
        if not isinstance(value, list):
            raise Reject(f"expected a JSON array for a {reported[:60]} column")
        element = V.array_element(reported)
        return dumps_exact([to_canonical(v, element, unit[6:], dialect) for v in value])
    if unit in ("vsd", "wkb"):
        return _struct_value(value, unit)
    fam = V.family(reported)
    if isinstance(value, (dict, list)):
        if fam in ("json", "string"):
            return dumps_exact(value)
        raise Reject(f"a nested JSON value for a {reported} column")
    is_number = isinstance(value, Num)
    if unit.startswith("b64:"):
        if is_number:  # the JSON converter's decimal.format=NUMERIC: the exact digits
            return V.canon_decimal(value)
        return _unscaled(str(value), unit[4:])
    if unit.startswith("bits:") and dialect.binary != "base16":
        return _bits(str(value), unit[5:], dialect)
    if unit == "duration_us" and is_number:
        return _iso_duration(int(V.canon_int(value)))
    if fam == "bytes":
        return _binary(str(value), dialect)
    if fam == "bool" and isinstance(value, bool):
        return V.canon_bool(value)
    if fam == "uint64" and dialect.unsigned_wrap and is_number and str(value).startswith("-"):
        return V.canonical(fam, str(int(V.canon_int(value)) + 2**64))
    if fam == "date" and is_number:
        return V.date_from_epoch_days(value)
    if fam == "time" and is_number:
        if unit == "ns":
            return V.time_from_nanos(value)
        return V.time_from_micros(int(V.canon_int(value)) * (1000 if unit == "ms" else 1))
    if fam == "datetime" and is_number:
        if unit == "ns":
            return V.instant_from_epoch(f"{V.canon_int(value)}E-9", "s")[:-1]
        return V.local_datetime_from_epoch(value, "us" if unit == "us" else "ms")
    if fam in ("timestamp", "datetime") and not is_number and str(value).endswith("Z"):
        instant = V.canon_instant(str(value))
        return instant if fam == "timestamp" else instant[:-1]
    if isinstance(value, bool):
        return V.canonical(fam, "true" if value else "false")
    return V.canonical(fam, str(value))


def _binary(text: str, dialect: Dialect) -> str:
    if dialect.binary == "base16":
        # BIT values lose leading zeros in incremental sync (seed 000 type table): restore the nibble.
        return V.base64_from_hex("0" + text if len(text) % 2 else text)
    if dialect.binary == "base64-url-safe":
        text = text.replace("-", "+").replace("_", "/")
        text += "=" * (-len(text) % 4)
    return V.canon_base64(text)


def _unscaled(text: str, scale: str) -> str:
    """Decimal (``decimal.handling.mode=precise``): Base64 of the big-endian two's-complement unscaled value."""
    raw = base64.b64decode(V.canon_base64(text))
    unscaled = int.from_bytes(raw, "big", signed=True)
    return V.canon_decimal(f"{unscaled}E{-int(V.canon_int(scale or '0'))}")  # text: no context rounding


def _parameter(params: dict, name: str, limit: int) -> str | None:
    """A numeric schema parameter (Decimal ``scale``, ``connect.decimal.precision``) as ASCII integer text
    of at most ``limit`` in absolute value, or None when absent; else Reject (it becomes a type name and
    an exponent)."""
    value = params.get(name)
    if value is None:
        return None
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else "?"
    if not (text.lstrip("-").isascii() and text.lstrip("-").isdigit() and len(text) <= 6 and abs(int(text)) <= limit):
        raise Reject(f"schema parameter {name} {text[:40]!a} is not an integer of at most {limit}")
    return str(int(text))


def _bits(text: str, length: str, dialect: Dialect) -> str:
    """io.debezium.data.Bits: Java ``BitSet.toByteArray()`` (little-endian, trailing zero bytes dropped)
    → the column's big-endian bytes, ``ceil(length / 8)`` of them (MySQL BIT(64) b'11111000111' → 00..07C7).
    ``length`` is held to MySQL BIT's 64 (:func:`values.bit_width`); without one, the bytes as sent."""
    data = base64.b64decode(_binary(text, dialect))[::-1]
    width = (V.bit_width(length, "Bits length") + 7) // 8 if length != "" else len(data)
    if len(data) > width:
        raise Reject(f"Bits value of {len(data)} bytes is longer than its length {length}")
    return V.base64_from_bytes(data.rjust(width, b"\0"))


def _struct_value(value: Any, unit: str) -> str:
    """VariableScaleDecimal {scale, value} → decimal text; geometry {wkb, srid} → the WKB bytes (Base64)."""
    if not isinstance(value, dict):
        raise Reject(f"expected a struct for a {'VariableScaleDecimal' if unit == 'vsd' else 'geometry'} value")
    if unit == "vsd":
        if not isinstance(value.get("value"), str) or value.get("scale") is None:
            raise Reject("VariableScaleDecimal needs 'scale' and 'value'")
        return _unscaled(value["value"], str(value["scale"]))
    if not isinstance(value.get("wkb"), str):
        raise Reject("geometry value without 'wkb'")
    return V.canon_base64(value["wkb"])


def _iso_duration(micros: int) -> str:
    """MicroDuration (µs; Debezium counts a month as 30 days) → ISO-8601 ``[-]PT<seconds>[.f]S``."""
    sign = "-" if micros < 0 else ""
    secs, frac = divmod(abs(micros), 10**6)
    return f"{sign}PT{secs}" + (f".{frac:06d}".rstrip("0") if frac else "") + "S"


def canonical_image(
    image: Any,
    name: str,
    declared: dict | None,
    configured: dict[str, str],
    dialect: Dialect = OMS_DIALECT,
    described: bool = False,
    unavailable: set[str] | None = None,
) -> tuple[dict | None, dict[str, str]]:
    """A Debezium image object → (canonical image, column types used).

    ``described``: the message's schema types the envelope's images, so a column it does not type in
    this image (``declared``) takes its configured type, or the message is refused: its raw text next
    to a type from the other image, or from nowhere, would be a mislabel (a Base16 value read as Base64).

    ``unavailable``: where given, a column whose value is the dialect's placeholder (:func:`is_unavailable`)
    is left out of the image and its name added to this set: the message does not carry it.
    """
    if image is None:
        return None, {}
    if not isinstance(image, dict):
        raise Reject(f"'{name}' should be an object")
    declared = declared or {}
    out: dict[str, str | None] = {}
    types: dict[str, str] = {}
    for col, value in image.items():
        if unavailable is not None and is_unavailable(value, dialect.unavailable, declared.get(col)):
            unavailable.add(col)
            continue
        reported, unit = resolve_type(col, declared.get(col), configured, dialect)
        if described and reported is None:  # not in the image's schema, or there without a type we read
            raise Reject(f"column {col[:60]!a} in '{name}' has no type in the message's schema, and none is configured")
        try:
            out[col] = to_canonical(value, reported, unit, dialect)
        except Reject as exc:
            raise Reject(f"column '{col}' ({reported or 'untyped'}) in '{name}': {exc}") from None
        except (ValueError, ArithmeticError, MemoryError) as exc:  # e.g. an int "1E999999999" (values.canon_int)
            raise Reject(
                f"column '{col}' ({reported or 'untyped'}) in '{name}': unusable value ({type(exc).__name__})"
            ) from None
        if reported:
            types[col] = reported
    return out, types


def from_canonical(value: str | None, col_type: str | None) -> Any:
    """Canonical text → the value Debezium writes for that type (inverse of :func:`to_canonical`)."""
    if value is None or col_type is None:
        return value
    fam = V.family(col_type)
    if fam == "int":
        return Num(value)
    if fam == "float":
        return Num(value) if value.lower() not in ("nan", "inf", "-inf", "infinity", "-infinity") else value
    if fam == "bool":
        return value == "true"
    if fam == "bytes":
        return base64.b64decode(value).hex().upper()
    if fam == "date":
        return Num(str((V.parse_datetime_text(value)[0].date() - V.EPOCH_DATE).days))
    if fam == "time":
        nanos = V.time_nanos(value)  # signed: a negative MySQL TIME is a negative count
        if nanos % 1000 or abs(nanos) >= 24 * 3600 * 10**9:
            return value  # finer than µs, or beyond a day: the text, which the decoder reads as well
        return Num(str(nanos // 1000))
    if fam == "datetime":
        dt, frac, _ = V.parse_datetime_text(value)
        if len(frac) > 3:
            return value
        delta = dt - V.datetime(1970, 1, 1)
        return Num(str((delta.days * 86400 + delta.seconds) * 1000 + int((frac or "0").ljust(3, "0"))))
    return value  # decimal, uint64, timestamp, string, json: text


def epoch_ms(instant: str) -> str:
    """A canonical instant → whole epoch milliseconds (Debezium's ts_ms unit)."""
    return str(V.epoch_nanos(instant) // 10**6)


def primitive_of(col_type: str) -> str:
    """The Debezium primitive schema type that carries a column of this source type (as OMS writes)."""
    fam = V.family(col_type)
    if fam == "int":
        base = V.parse_type(col_type)[0]
        return {"tinyint": "int8", "smallint": "int16", "int": "int32", "integer": "int32"}.get(base, "int64")
    if fam == "float":
        return "float32" if V.parse_type(col_type)[0] == "float" else "float64"
    return {"bool": "boolean", "bytes": "bytes", "date": "int32", "time": "int64", "datetime": "int64"}.get(
        fam, "string"
    )
