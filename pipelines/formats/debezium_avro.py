"""Debezium with Confluent's AvroConverter: Confluent-framed Avro values (and keys) + a schema registry.

What Flink reads as ``debezium-avro-confluent`` and Paimon as ``debezium-avro``. Each message is
Confluent-framed (:mod:`pipelines.formats.confluent`); its writer schema comes from the registry
configured in ``format_options.debezium_avro.schema_registry`` (required). The Avro datum is turned
into exactly what Kafka Connect's JsonConverter (``schemas.enable=true``) would have written for the
same Connect record, ``{"schema": <Connect schema>, "payload": <envelope>}``, and handed to the
``debezium`` decoder (``decode_connect``), so both encodings share one definition of Debezium.

The inverse of Confluent's ``AvroData`` (``fromConnectSchema``), as checked against Apache Paimon's
test resources (the same Debezium MySQL all-types record as JSON and as Avro, tests/fixtures/real/
debezium_avro/):

* Avro ``int`` → ``int32`` (``connect.type`` int8 / int16 restores those), ``long`` → ``int64``,
  ``float`` → ``float``, ``double`` → ``double`` (JsonConverter's names for FLOAT32 / FLOAT64),
  ``boolean``, ``string``, ``enum`` → ``string`` (name and symbols as ``io.confluent.connect.avro.Enum``
  parameters), ``bytes`` / ``fixed`` → ``bytes``, ``record`` →
  ``struct`` (``field`` per field), ``array`` → ``array`` (``items``), ``map`` → ``map`` (``keys``
  string, ``values``). A union ``[null, T]`` (either order) is T with ``optional: true``; other unions
  are rejected (Debezium never writes them).
* ``connect.name`` → ``name`` (else a record's full Avro name, except Confluent's placeholder
  ``io.confluent.connect.avro.ConnectDefault``), ``connect.version`` → ``version``,
  ``connect.parameters`` → ``parameters``, ``connect.doc`` → ``doc``, ``connect.default`` → ``default``.
* Avro logical types without ``connect.name`` (writers other than Connect, e.g. Flink's
  ``debezium-avro-confluent`` serializer): decimal → ``org.apache.kafka.connect.data.Decimal`` with
  parameters ``scale`` and ``connect.decimal.precision``; date → ``...connect.data.Date``; time-millis →
  ``...connect.data.Time``; timestamp-millis → ``...connect.data.Timestamp``; time-micros →
  ``io.debezium.time.MicroTime``; timestamp-micros / local-timestamp-micros →
  ``io.debezium.time.MicroTimestamp``; local-timestamp-millis → ``io.debezium.time.Timestamp``;
  timestamp-nanos / local-timestamp-nanos → ``io.debezium.time.NanoTimestamp``; uuid →
  ``io.debezium.data.Uuid``.
* Values are read without applying logical types, so they stay as written: a decimal is its
  big-endian unscaled bytes → Base64 text (JsonConverter's ``decimal.format=BASE64``), dates are days,
  times and timestamps integers of their unit; every number becomes exact JSON number text (a float
  keeps the shortest text that reads back as the same 32-bit float, as Jackson writes it); bytes →
  Base64; NaN / Infinity become the strings ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``.

The Kafka record key, when it is Confluent-framed Avro too, is converted the same way; a key in any
other form (StringConverter, none) is left to configuration. An empty or null value is a tombstone.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Callable
from typing import Any

from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, Decoder, Num, Reject
from pipelines.formats.confluent import RegistrySchema, is_framed, read_framed, registry_for, unframe

#: Avro primitive → JsonConverter's schema type name.
PRIMITIVES = {
    "int": "int32",
    "long": "int64",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
#: Avro logical type (when the schema has no ``connect.name``) → Connect / Debezium logical name.
LOGICAL_NAMES = {
    "date": "org.apache.kafka.connect.data.Date",
    "time-millis": "org.apache.kafka.connect.data.Time",
    "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "time-micros": "io.debezium.time.MicroTime",
    "timestamp-micros": "io.debezium.time.MicroTimestamp",
    "local-timestamp-millis": "io.debezium.time.Timestamp",
    "local-timestamp-micros": "io.debezium.time.MicroTimestamp",
    "timestamp-nanos": "io.debezium.time.NanoTimestamp",
    "local-timestamp-nanos": "io.debezium.time.NanoTimestamp",
    "uuid": "io.debezium.data.Uuid",
}
DECIMAL_NAME = "org.apache.kafka.connect.data.Decimal"
#: Confluent's name for a record that had no Connect name.
CONNECT_DEFAULT = "io.confluent.connect.avro.ConnectDefault"
#: Deepest Avro type nesting converted (a recursive schema would never end).
MAX_SCHEMA_DEPTH = 64

Converter = Callable[[Any], Any]


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Reject(f"expected an integer, got {type(value).__name__}")
    return Num(str(value))


def _float_text(value: float, single: bool) -> Any:
    """A float as exact JSON number text; a 32-bit one as the shortest text that reads back the same."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if single:
        packed = struct.pack("<f", value)
        for digits in range(1, 10):
            text = f"{value:.{digits}g}"
            if struct.pack("<f", float(text)) == packed:
                return Num(repr(float(text)))
    return Num(repr(float(value)))


def _json_number(value: Any) -> Any:
    """A number of a schema property as the JSON number text JsonConverter writes (other values as they are)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return Num(str(value)) if isinstance(value, int) else _float_text(value, False)


def _bytes(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode("ascii")


def _connect_props(avro: dict[str, Any]) -> dict[str, Any]:
    """The Connect schema attributes an Avro type carries in ``connect.*`` properties (or logical types)."""
    out: dict[str, Any] = {}
    name = avro.get("connect.name")
    logical = avro.get("logicalType")
    params = avro.get("connect.parameters")
    if name is None and logical == "decimal":
        name = DECIMAL_NAME
        params = {"scale": str(avro.get("scale", 0)), **(params or {})}
        if avro.get("precision") is not None:
            params["connect.decimal.precision"] = str(avro["precision"])
        out["version"] = Num("1")
    elif name is None and logical in LOGICAL_NAMES:
        name = LOGICAL_NAMES[logical]
        out["version"] = Num("1")
    if name is not None:
        out["name"] = str(name)
    if avro.get("connect.version") is not None:
        out["version"] = _json_number(avro["connect.version"])
    if avro.get("connect.doc") is not None:
        out["doc"] = avro["connect.doc"]
    if params:
        out["parameters"] = {str(k): str(v) for k, v in params.items()}
    if "connect.default" in avro:
        out["default"] = _json_number(avro["connect.default"])
    return out


def connect_converter(avro: Any, named: dict[str, Any], depth: int = 0) -> tuple[dict[str, Any], Converter]:
    """(Connect schema as JsonConverter writes it, value converter) of a parsed Avro schema, or Reject."""
    if depth > MAX_SCHEMA_DEPTH:
        raise Reject(f"Avro schema nested deeper than {MAX_SCHEMA_DEPTH} levels (recursive?)")
    if isinstance(avro, str):
        if avro in named:
            return connect_converter(named[avro], named, depth + 1)
        avro = {"type": avro}
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1 or len(avro) != 2:
            raise Reject(f"an Avro union of {len(branches)} non-null types has no Debezium meaning: {avro!r:.120}")
        schema, inner = connect_converter(branches[0], named, depth + 1)
        return {**schema, "optional": True}, (lambda v: None if v is None else inner(v))
    if not isinstance(avro, dict):
        raise Reject(f"not an Avro schema: {avro!r:.80}")
    kind = avro.get("type")
    if not isinstance(kind, str):  # {"type": {"type": "int", ...}}
        return connect_converter(kind, named, depth + 1)
    props = _connect_props(avro)
    if kind == "record":
        return _record(avro, named, depth, props)
    if kind == "array":
        items, inner = connect_converter(avro.get("items"), named, depth + 1)
        return {"type": "array", "items": items, "optional": False, **props}, (lambda v: [inner(x) for x in v])
    if kind == "map":
        values, inner = connect_converter(avro.get("values"), named, depth + 1)
        schema = {"type": "map", "keys": {"type": "string", "optional": False}, "values": values, "optional": False}
        return {**schema, **props}, (lambda v: {str(k): inner(x) for k, x in v.items()})
    if kind == "enum":  # AvroData: a string with the enum's name and symbols as parameters
        enum = {"io.confluent.connect.avro.Enum": str(avro.get("name"))}
        enum.update({f"io.confluent.connect.avro.Enum.{s}": str(s) for s in avro.get("symbols") or ()})
        props["parameters"] = {**enum, **props.get("parameters", {})}
        return {"type": "string", "optional": False, **props}, str
    if kind == "fixed":
        return {"type": "bytes", "optional": False, **props}, _bytes
    if kind not in PRIMITIVES:
        raise Reject(f"Avro type {kind!r:.40} has no Connect equivalent")
    connect_type = PRIMITIVES[kind]
    if kind == "int" and avro.get("connect.type") in ("int8", "int16"):
        connect_type = avro["connect.type"]
    convert: Converter = {
        "int": _number,
        "long": _number,
        "float": lambda v: _float_text(v, True),
        "double": lambda v: _float_text(v, False),
        "boolean": bool,
        "string": str,
        "bytes": _bytes,
    }[kind]
    return {"type": connect_type, "optional": False, **props}, convert


def _record(
    avro: dict[str, Any], named: dict[str, Any], depth: int, props: dict[str, Any]
) -> tuple[dict[str, Any], Converter]:
    fields = []
    converters: list[tuple[str, Converter]] = []
    for f in avro.get("fields") or []:
        schema, inner = connect_converter(f["type"], named, depth + 1)
        fields.append({**schema, "field": f["name"]})
        converters.append((f["name"], inner))
    schema: dict[str, Any] = {"type": "struct", "fields": fields, "optional": False}
    name = props.get("name") or avro.get("name")
    props = {k: v for k, v in props.items() if k != "name"}
    if name and name != CONNECT_DEFAULT:
        props["name"] = name
    return {**schema, **props}, (lambda v: {n: c(v.get(n)) for n, c in converters})


def _converter_of(schema: RegistrySchema) -> tuple[dict[str, Any], Converter]:
    """The converter of one registry schema, built once per schema (schemas are cached per process)."""
    found = schema.derived.get("connect")
    if found is None:
        found = schema.derived["connect"] = connect_converter(*schema.logical)
    return found


def to_connect(datum: Any, schema: RegistrySchema) -> dict[str, Any]:
    """A datum read (without logical types) with ``schema`` → ``{"schema": ..., "payload": ...}``."""
    connect_schema, convert = _converter_of(schema)
    try:
        payload = convert(datum)
    except Reject:
        raise
    except (LookupError, TypeError, ValueError, AttributeError) as exc:
        raise Reject(
            f"the Avro datum of schema id {schema.schema_id} does not fit its Connect form: "
            f"{type(exc).__name__}: {exc}"[:300]
        ) from None
    return {"schema": connect_schema, "payload": payload}


class DebeziumAvroDecoder(Decoder):
    format_id = "debezium_avro"
    seeds = "none (Confluent wire format and AvroData; Paimon and Flink test resources)"
    binary = True
    ordering = "as debezium (per connector, from source); the Avro record is read as Connect JSON first"
    table_and_key = "as debezium: source db/schema/table; key from the Kafka record key (Confluent Avro) or config"
    type_mapping = (
        "writer schema from the schema registry; Avro → Connect schema (connect.name / connect.parameters, "
        "logical types → Connect/Debezium names), then the debezium type mapping"
    )
    quirks = (
        "Confluent wire format: magic byte 0 + 4-byte schema id + Avro body (Confluent docs)",
        "writer schema fetched by id from a Confluent-compatible registry, cached per process (Confluent API)",
        "Avro read without logical types: decimals stay unscaled bytes → Base64 as JsonConverter writes (Paimon)",
        "connect.type int8/int16, connect.name/version/parameters/doc/default restored (Confluent AvroData)",
        "null or empty value = tombstone (Flink debezium-avro-confluent)",
    )

    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        return self.decode_record(None, raw, ctx)

    def decode_record(self, key: bytes | None, value: bytes | None, ctx: DecodeContext) -> list[Change]:
        """Decode a Kafka record's value (and key, when it is Confluent Avro) through the debezium decoder."""
        if value:
            self.check_size(value, ctx)
            unframe(value)  # an unframed message is refused before any registry is asked
        registry = registry_for(ctx.options)
        if registry is None:
            raise Reject(
                "debezium_avro needs format_options.debezium_avro.schema_registry.url "
                "(the Confluent-compatible registry the writer schemas come from)"
            )
        value_obj = None
        if value:
            datum, schema = read_framed(value, registry, plain=True)
            value_obj = to_connect(datum, schema)
        key_obj = None
        if is_framed(key):
            datum, schema = read_framed(key, registry, plain=True)  # type: ignore[arg-type]
            key_obj = to_connect(datum, schema)
        return get_decoder("debezium").decode_connect(value_obj, key_obj, ctx)  # type: ignore[attr-defined]


DECODER = DebeziumAvroDecoder()
