"""Shared code of the OMS Debezium family (seed 000 and 001): Debezium, DebeziumFlatten, DebeziumSmt.

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

Longer than 400 lines because the three OMS Debezium variants share one table of value
encodings and one envelope reader; splitting them would spread one seed's rules over files.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, ClassVar

from pipelines import values as V
from pipelines.formats.base import (
    Change,
    DecodeContext,
    JsonDecoder,
    Num,
    Reject,
    dumps_exact,
    op_name,
    optional,
    seq_int,
)

#: Debezium ``op`` → canonical op (seed 000: c, u, d, HEARTBEAT; r and t are standard Debezium).
OPS = {"c": "INSERT", "u": "UPDATE", "d": "DELETE", "r": "SNAPSHOT", "t": "TRUNCATE", "heartbeat": "HEARTBEAT"}

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
    """

    binary: str = "base16"
    adaptive_datetime: bool = False
    lossy_double: bool = False
    unsigned_wrap: bool = False


#: OMS's Debezium variants (seed 000/001).
OMS_DIALECT = Dialect()


# ---------------------------------------------------------------- types


def schema_types(schema: Any, image: str | None) -> dict[str, tuple[str, str | None, dict]] | None:
    """Column → (primitive type, logical name, parameters) from a Debezium ``schema``: the struct
    field ``image`` (before / after) of an envelope schema, or (``image`` None) the row struct itself
    (the unwrap SMT's and a record key's schema). None when the schema does not describe that image."""
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
            params = f.get("parameters") if isinstance(f.get("parameters"), dict) else {}
            out[f["field"]] = (str(f.get("type") or "").lower(), str(f.get("name") or "").lower() or None, params)
    return out


def resolve_type(
    column: str,
    declared: tuple[str, str | None, dict] | None,
    configured: dict[str, str],
    dialect: Dialect = OMS_DIALECT,
) -> tuple[str | None, str]:
    """(reported type, wire unit) of one column; see the module docstring for the precedence."""
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
) -> tuple[dict | None, dict[str, str]]:
    """A Debezium image object → (canonical image, column types used).

    ``described``: the message's schema types the envelope's images, so a column it does not type in
    this image (``declared``) takes its configured type, or the message is refused: its raw text next
    to a type from the other image, or from nowhere, would be a mislabel (a Base16 value read as Base64).
    """
    if image is None:
        return None, {}
    if not isinstance(image, dict):
        raise Reject(f"'{name}' should be an object")
    declared = declared or {}
    out: dict[str, str | None] = {}
    types: dict[str, str] = {}
    for col, value in image.items():
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


# ---------------------------------------------------------------- envelope


class DebeziumEnvelopeDecoder(JsonDecoder):
    """Decodes one Debezium envelope {op, before, after, source, ts_ms}; subclasses find it in the message.

    Hooks where the family's members differ (OMS's defaults here; :mod:`pipelines.formats.debezium`
    overrides them for Debezium as the Debezium project writes it):

    * :attr:`ops` – op codes (Debezium adds ``m``, a logical-decoding message);
    * :meth:`dialect` – value encodings the schema does not state (:class:`Dialect`);
    * :meth:`ordering_of` – ``source`` → seq (OMS: ``pos`` "A@B"; Debezium: per connector);
    * :attr:`position_required` – whether an incremental change without a position is rejected
      (OMS: yes; Debezium: no, queue order decides);
    * :meth:`key_columns` – where the key comes from (OMS: configuration only).
    """

    ordering = (
        "source.pos 'A@B' → (B, A): B is the checkpoint's epoch seconds; or standard "
        "Debezium source.file/pos/row → (binlog file number, pos, row); required on c/u/d/t, "
        "none on snapshot rows (r) and heartbeats"
    )
    table_and_key = "source.db / source.table; key from configuration (the message carries none)"
    type_mapping = (
        "Debezium logical schema names, else configured source types, else the schema's "
        "primitive types; BYTES Base16, DATE days, TIME µs, DATETIME ms, TIMESTAMP ...Z, DECIMAL text"
    )
    ops: ClassVar[dict[str, str]] = OPS
    position_required: ClassVar[bool] = True

    def envelope(self, obj: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        """(envelope, schema or None) of a message."""
        raise NotImplementedError

    def dialect(self, ctx: DecodeContext) -> Dialect:
        return OMS_DIALECT

    def ordering_of(self, source: dict[str, Any]) -> tuple[int, ...]:
        return _ordering(source)

    def key_columns(self, ctx: DecodeContext, db: str | None, table: str | None, key: dict | None) -> tuple[str, ...]:
        """The table's key: configuration (``key`` is the record key's image, unused by OMS)."""
        return ctx.key_columns(db, table)

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        env, schema = self.envelope(obj)
        return self.envelope_changes(env, schema, ctx)

    def envelope_changes(
        self, env: dict[str, Any], schema: Any, ctx: DecodeContext, key: tuple[dict, dict] | None = None
    ) -> list[Change]:
        """The change of one envelope; ``key`` is the record key as (canonical image, types), if any."""
        op_text = env.get("op")
        if not isinstance(op_text, str):
            raise Reject("missing field 'op'")
        op = self.ops.get(op_text if op_text in self.ops else op_name(op_text).lower())
        if op is None:
            raise Reject(f"unknown op '{op_text}'")
        source = optional(env, "source", dict) or {}
        db = optional(source, "db")
        table = optional(source, "table")
        pg_schema = optional(source, "schema")
        seq = self.ordering_of(source)
        event_time = _event_time(source, env)
        txn_obj = optional(env, "transaction", dict)
        txn = str(txn_obj["id"]) if txn_obj and txn_obj.get("id") is not None else None
        if op == "HEARTBEAT":
            return [
                Change(
                    op="HEARTBEAT",
                    db=db,
                    table=table,
                    schema=pg_schema,
                    seq=seq,
                    event_time=event_time,
                    txn=txn,
                    detail=op_text,
                )
            ]
        if not table:
            raise Reject(f"row change ({op_text}) without source.table")
        if not seq and op != "SNAPSHOT" and self.position_required:
            # full-sync 'r' rows carry no position (seed 000); an incremental change must, or it would
            # sort before every ordered one
            raise Reject(f"row change ({op_text}) without source.pos: an incremental change needs it to be ordered")
        configured = {k: v for k, v in ctx.column_types(db, table).items()}
        dialect = self.dialect(ctx)
        declared = {part: schema_types(schema, part) for part in ("before", "after")}
        described = any(d is not None for d in declared.values())  # else payload-only (or a schema of neither)
        before, tb = canonical_image(env.get("before"), "before", declared["before"], configured, dialect, described)
        after, ta = canonical_image(env.get("after"), "after", declared["after"], configured, dialect, described)
        for col in tb.keys() & ta.keys():
            if V.family(tb[col]) != V.family(ta[col]):
                raise Reject(
                    f"column {col[:60]!a} is typed differently in 'before' ({tb[col]}) and 'after' ({ta[col]})"
                )
        if key is not None and op == "DELETE" and before is None:
            before, tb = dict(key[0]), dict(key[1])  # no before-image (MongoDB, REPLICA IDENTITY NOTHING): the key
        if op in ("INSERT", "SNAPSHOT", "UPDATE") and after is None:
            raise Reject(f"op '{op_text}' without an 'after' image")
        if op == "DELETE" and before is None:
            raise Reject(f"op '{op_text}' without a 'before' image")
        if op == "INSERT" or op == "SNAPSHOT":
            before = None
        if op == "DELETE":
            after = None
        types = {**tb, **ta}
        return [
            Change(
                op=op,
                db=db,
                table=table,
                schema=pg_schema,
                key_columns=self.key_columns(ctx, db, table, key[0] if key else None),
                before=before,
                after=after,
                col_types=types or None,
                seq=seq,
                event_time=event_time,
                txn=txn,
                detail=op_text,
            )
        ]

    # ------------------------------------------------------------ encode

    def build_envelope(self, change: Change) -> dict[str, Any]:
        op_text = (
            change.detail
            if change.detail and OPS.get(change.detail.lower()) == change.op
            else {v: k for k, v in OPS.items()}.get(change.op)
        )
        if op_text is None:
            raise ValueError(f"Debezium cannot express op {change.op}")
        if op_text == "heartbeat":
            op_text = "HEARTBEAT"
        types = change.col_types or {}
        source: dict[str, Any] = {"version": "", "connector": "OB_MYSQL", "name": "OMS"}
        source["ts_ms"] = Num(_epoch_ms(change.event_time)) if change.event_time else Num("0")
        if change.db is not None:
            source["db"] = change.db
        if change.schema is not None:
            source["schema"] = change.schema
        if change.table is not None:
            source["table"] = change.table
        if len(change.seq) == 2:
            source["pos"] = f"{change.seq[1]}@{change.seq[0]}"
        elif len(change.seq) == 3:
            source.update(
                file=f"mysql-bin.{change.seq[0]:06d}", pos=Num(str(change.seq[1])), row=Num(str(change.seq[2]))
            )
        elif len(change.seq) == 1:
            source["pos"] = Num(str(change.seq[0]))
        env: dict[str, Any] = {"op": op_text, "source": source}
        if change.op != "HEARTBEAT":
            env["before"] = _encode_image(change.before, types)
            env["after"] = _encode_image(change.after, types)
        if change.txn is not None:
            env["transaction"] = {"id": change.txn}
        env["ts_ms"] = source["ts_ms"]
        return env


def _encode_image(image: dict | None, types: dict[str, str]) -> dict | None:
    if image is None:
        return None
    return {c: from_canonical(v, types.get(c)) for c, v in image.items()}


def schema_for(change: Change) -> dict[str, Any]:
    """A Debezium ``schema`` describing the images of a change (primitive types, as OMS writes)."""
    types = change.col_types or {}
    cols = list(dict.fromkeys([*(change.before or {}), *(change.after or {})]))
    fields = [{"field": c, "optional": True, "type": primitive_of(types[c])} for c in cols if c in types]
    image = [{"field": part, "optional": True, "type": "struct", "fields": fields} for part in ("before", "after")]
    source = {
        "field": "source",
        "optional": False,
        "type": "struct",
        "fields": [
            {"field": f, "optional": False, "type": t}
            for f, t in (
                ("version", "string"),
                ("connector", "string"),
                ("name", "string"),
                ("ts_ms", "int64"),
                ("db", "string"),
                ("table", "string"),
                ("pos", "string"),
            )
        ],
    }
    return {
        "optional": False,
        "type": "struct",
        "fields": [
            *image,
            source,
            {"field": "op", "optional": False, "type": "string"},
            {"field": "ts_ms", "optional": False, "type": "int64"},
        ],
    }


def _epoch_ms(instant: str) -> str:
    """A canonical instant → whole epoch milliseconds (Debezium's ts_ms unit)."""
    return str(V.epoch_nanos(instant) // 10**6)


def _ordering(source: dict[str, Any]) -> tuple[int, ...]:
    """OMS ``pos`` "A@B" → (B, A); standard Debezium file/pos/row → (file number, pos, row).

    Seed 000 calls pos "[binlog file name]@[binlog file offset]", but its own values contradict
    that: B equals source.ts_ms in seconds (553132@1668496109 with ts_ms 1668496109000; a MySQL
    binlog offset cannot exceed 1 GiB) and A is not monotonic (insert 703223, later update 436999).
    So B (checkpoint seconds) orders first and A breaks ties within the second.
    """
    pos = source.get("pos")
    file_name = source.get("file")
    if isinstance(file_name, str) and pos is not None:
        digits = file_name.rpartition(".")[2]
        return (
            seq_int(digits, "source.file"),
            seq_int(pos, "source.pos"),
            seq_int(source.get("row") if source.get("row") is not None else 0, "source.row"),
        )
    if pos is None or pos == "":
        return ()
    if isinstance(pos, str) and "@" in pos:
        first, _, second = pos.partition("@")
        return (seq_int(second, "source.pos"), seq_int(first, "source.pos"))
    return (seq_int(pos, "source.pos"),)


def _event_time(source: dict[str, Any], env: dict[str, Any]) -> str | None:
    """source.ts_ms (milliseconds, despite seed 000 saying seconds; 0 in full sync), else envelope ts_ms."""
    for value in (source.get("ts_ms"), env.get("ts_ms")):
        if value is not None and str(value) not in ("0", ""):
            return V.instant_from_epoch(seq_int(value, "ts_ms"), "ms")
    return None
