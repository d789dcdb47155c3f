"""Debezium as the Debezium project writes it (JSON converter), every connector; not OMS's variant.

Public entry points:

* ``DECODER.decode(raw, ctx)`` – one message value (landing files, ``lakecdc decode``);
* ``DECODER.decode_record(key, value, ctx)`` – one Kafka record, as silver calls it: the record key
  names the key columns (and is the before-image of a delete that has none), and a null value is a
  *tombstone* (Debezium writes one after each delete, for log compaction): it decodes to one
  ``HEARTBEAT`` with detail ``tombstone`` (counted in silver's heartbeats table, never quarantined);
* ``DECODER.decode_connect(value_obj, key_obj, ctx)`` – the same, from already-parsed JSON-converter
  objects (``{"schema", "payload"}`` or bare; ``None`` for a null value). Other formats that carry
  Debezium records in another serialization (``debezium_avro``: Confluent Avro) convert them into
  this shape – bytes as Base64 text, Connect logical types as ``name`` / ``parameters`` – and call it.

Message shapes (value):

* the envelope ``{op, before, after, source, ts_ms, transaction}``, with or without the Connect
  ``{"schema", "payload"}`` wrapper (``schemas.enable`` true / false); ``op`` c → INSERT, u → UPDATE,
  d → DELETE, r → SNAPSHOT, t → TRUNCATE, m (a logical-decoding message) → HEARTBEAT;
* the ``ExtractNewRecordState`` (unwrap SMT) row: the columns plus metadata fields ``__op``,
  ``__deleted``, ``__table``, ``__db``, ``__schema``, ``__lsn``, ``__source_<field>`` ... (the SMT's
  ``add.fields``; any other ``__`` name is a column). Without ``__op`` a row is an upsert (UPDATE of
  the full row) and ``__deleted: true`` a DELETE; without ``__table`` the table comes from
  configuration (``ctx.default_table``);
* schema-change events (``ddl`` + ``databaseName``) → DDL; transaction metadata (``status``
  BEGIN / END) and heartbeats (``{"ts_ms"}`` only) → HEARTBEAT.

Ordering (``source``, by ``source.connector``, or by the fields present when the unwrap SMT dropped it):
:mod:`pipelines.formats._debezium_position` (MySQL binlog file/pos/row, PostgreSQL (last commit LSN,
LSN) from ``sequence`` with a null read as unknown, never 0, SQL Server, Oracle, MongoDB; none: queue order).

Values: :mod:`pipelines.formats._debezium_values` with the Debezium :class:`Dialect`: BYTES Base64
(``format_options: {debezium: {binary.handling.mode: hex}}`` for Base16), every Debezium logical type
(Decimal as Base64 unscaled bytes or, with the converter's ``decimal.format=NUMERIC``, a JSON number;
VariableScaleDecimal; Date / Time / MicroTime / NanoTime / Timestamp / MicroTimestamp / NanoTimestamp /
ZonedTimestamp / ZonedTime; Year; Bits (little-endian → the column's big-endian bytes); Json, Xml,
Uuid, Enum, EnumSet as text; Geometry / Geography / Point → the WKB bytes (SRID not kept);
MicroDuration → ISO-8601 ``PT<s>S``; Interval text). Without ``schema`` the types come from
configuration (``ctx.column_types``), a DATETIME(p) number read by Debezium's adaptive precision
(ms for p ≤ 3, µs to 6, ns above). ``decimal.handling.mode=string`` arrives as text (exact);
``=double`` as a float64 column configured DECIMAL: reported ``double`` (the mirror column is DOUBLE),
because the digits were lost before the message was written. Arrays (``items``) are typed arrays,
each element decoded by its logical type. ``unavailable.value.placeholder`` (an unchanged TOASTed
PostgreSQL column, an Oracle LOB; ``format_options: {debezium: {unavailable.value.placeholder: ...}}``
when the connector sets another) is no value: an UPDATE that carries it is a partial image without it.

MongoDB: ``after`` / ``before`` are extended-JSON text; an update is the full document (``after``) or
an update description (1.x ``patch`` + ``filter``; 2.x ``updateDescription``) read as a partial image
keyed by ``_id``, as :mod:`pipelines.formats.drs_mongo` reads documents.

Longer than 420 lines because the envelope, the unwrap form, the record key, five connectors'
ordering, MongoDB's documents and the encoder the simulator needs describe one format together.
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from pipelines import values as V
from pipelines.formats._debezium_family import OPS, DebeziumEnvelopeDecoder
from pipelines.formats._debezium_position import connector_of, encode_position, ordering
from pipelines.formats._debezium_values import Dialect, canonical_image, epoch_ms, schema_types, unavailable_forms
from pipelines.formats.base import (
    Change,
    DecodeContext,
    Num,
    Reject,
    dumps_exact,
    loads_exact,
    optional,
    seq_int,
    split_table,
)
from pipelines.formats.drs_mongo import column_value as mongo_value
from pipelines.formats.drs_mongo import parse_document
from pipelines.formats.mongo_images import image as mongo_image
from pipelines.formats.mongo_images import update_fields as mongo_update_fields

#: ``source`` fields the unwrap SMT may add as ``__<field>`` (``add.fields=op,table,lsn,...``).
SOURCE_FIELDS = frozenset(
    "version connector name ts_ms ts_us ts_ns snapshot db sequence schema table txId lsn xmin file pos row "
    "thread query server_id gtid change_lsn commit_lsn event_serial_no scn commit_scn ord sec rs_id ssn "
    "redo_thread user_name collection h tord stxnid".split()
)
_BINARY_MODES = {"bytes": "base64", "base64": "base64", "base64-url-safe": "base64-url-safe", "hex": "base16"}


class DebeziumDecoder(DebeziumEnvelopeDecoder):
    format_id = "debezium"
    seeds = "none: Debezium documentation; Apache Flink and Apache Paimon test resources"
    ordering = (
        "per source.connector: MySQL (binlog file no, pos, row), GTID / ts_ms only without a file; "
        "PostgreSQL (last commit LSN, LSN) from sequence; SQL Server (commit_lsn, change_lsn as 3 ints each, "
        "event_serial_no); Oracle (commit_scn, scn); MongoDB (sec, ord); no position ('file': '') → queue order"
    )
    table_and_key = (
        "source.db / source.schema / source.table (unwrap: __db / __table, else configured); key from "
        "configuration, else the Kafka record key's fields"
    )
    type_mapping = (
        "Debezium logical schema names (all of them), else configured source types, else the schema's "
        "primitive types; BYTES Base64, Decimal Base64 / number / string, geometry → WKB bytes"
    )
    quirks = (
        "tombstones (null value after a delete) → a HEARTBEAT 'tombstone', not quarantined (Debezium docs)",
        "'file': '', 'pos': 0 (Flink CDC / Debezium 1.9.7 snapshot records) is no position: queue order",
        "SQL Server LSNs 'xxxxxxxx:xxxxxxxx:xxxx' are split into three integers (80 bits do not fit 20 digits)",
        "Bits are BitSet.toByteArray() (little-endian): reversed into the column's bytes (Paimon all-types test)",
        "decimal.handling.mode=double is lossy: a DECIMAL column sent as double is reported 'double' (DOUBLE)",
        "bigint.unsigned.handling.mode=long wraps above 2^63-1: a negative value of a BIGINT UNSIGNED column + 2^64",
        "geometry values are kept as their WKB bytes; the SRID is dropped",
        "unwrap SMT rows without __op are upserts (INSERT and UPDATE look the same)",
        "__debezium_unavailable_value (unchanged TOASTed column) is no value: the UPDATE is a partial image",
        "PostgreSQL source.sequence: a null last commit LSN is unknown, the event's own LSN stands in (not 0)",
        "arrays are typed by their items: each element decoded by its logical type (numeric[], date[], ...)",
    )
    ops: ClassVar[dict[str, str]] = {**OPS, "m": "HEARTBEAT"}
    position_required = False

    # ------------------------------------------------------------ hooks of the family

    def dialect(self, ctx: DecodeContext) -> Dialect:
        mode = str(ctx.options.get("binary.handling.mode", "bytes")).lower()
        if mode not in _BINARY_MODES:
            raise Reject(f"unknown binary.handling.mode {mode[:40]!r} (bytes, base64, base64-url-safe, hex)")
        placeholder = ctx.options.get("unavailable.value.placeholder")
        return Dialect(
            binary=_BINARY_MODES[mode],
            adaptive_datetime=True,
            lossy_double=True,
            unsigned_wrap=True,
            unavailable=unavailable_forms(None if placeholder is None else str(placeholder)),
        )

    def ordering_of(self, source: dict[str, Any]) -> tuple[int, ...]:
        return ordering(source)

    def key_columns(self, ctx: DecodeContext, db: str | None, table: str | None, key: dict | None) -> tuple[str, ...]:
        return ctx.key_columns(db, table) or tuple(key or ())

    # ------------------------------------------------------------ entry points

    def decode_object(self, obj: dict[str, Any], ctx: DecodeContext) -> list[Change]:
        return self._connect(obj, None, ctx)

    def decode_record(self, key: bytes | None, value: bytes | None, ctx: DecodeContext) -> list[Change]:
        if value is None:
            return [tombstone()]
        self.check_size(value, ctx)
        value_obj = loads_exact(value, ctx.max_depth, ctx.max_width, ctx.max_elements)
        key_obj = None
        if key is not None:
            self.check_size(key, ctx)
            try:
                key_obj = loads_exact(key, ctx.max_depth, ctx.max_width, ctx.max_elements)
            except Reject:
                key_obj = None  # a key that is not JSON (StringConverter): the value alone must do
        return self.decode_connect(value_obj, key_obj, ctx)

    def decode_connect(self, value_obj: Any, key_obj: Any, ctx: DecodeContext) -> list[Change]:
        """Decode one record from parsed JSON-converter objects (see the module docstring)."""
        if value_obj is None:
            return [tombstone()]
        if not isinstance(value_obj, dict):
            raise Reject("expected a JSON object as the message value")
        try:
            return self._connect(value_obj, key_obj if isinstance(key_obj, dict) else None, ctx)
        except Reject:
            raise
        except (LookupError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            raise Reject(f"malformed debezium message: {type(exc).__name__}: {exc}") from None

    # ------------------------------------------------------------ shapes

    def _connect(self, obj: dict[str, Any], key_obj: dict | None, ctx: DecodeContext) -> list[Change]:
        schema, payload = unwrap_connect(obj)
        if payload is None:
            return [tombstone()]
        if not isinstance(payload, dict):
            raise Reject("field 'payload' should be an object")
        if _is_envelope(payload):
            source = optional(payload, "source", dict) or {}
            if connector_of(source) == "mongodb":
                return self._mongo(payload, key_obj, ctx)
            key = self._key(key_obj, ctx, source)
            return self.envelope_changes(payload, schema, ctx, key)
        if isinstance(payload.get("ddl"), str) and ("databaseName" in payload or "tableChanges" in payload):
            return [self._ddl(payload)]
        if payload.get("status") in ("BEGIN", "END") and "id" in payload and "event_count" in payload:
            return [Change(op="HEARTBEAT", txn=str(payload["id"]), detail=f"transaction {payload['status']}")]
        if set(payload) == {"ts_ms"}:
            return [Change(op="HEARTBEAT", event_time=_instant(payload["ts_ms"]), detail="heartbeat")]
        return self._unwrapped(payload, schema, key_obj, ctx)

    def _key(self, key_obj: dict | None, ctx: DecodeContext, source: dict) -> tuple[dict, dict] | None:
        """The record key as (canonical image, types), or None when there is none."""
        if key_obj is None:
            return None
        key_schema, key_payload = unwrap_connect(key_obj)
        if not isinstance(key_payload, dict) or not key_payload:
            return None
        db, table = optional(source, "db"), optional(source, "table")
        image, types = canonical_image(
            key_payload, "key", schema_types(key_schema, None), ctx.column_types(db, table), self.dialect(ctx)
        )
        return image or {}, types

    def _ddl(self, payload: dict[str, Any]) -> Change:
        source = optional(payload, "source", dict) or {}
        return Change(
            op="DDL",
            db=optional(payload, "databaseName") or optional(source, "db"),
            schema=optional(payload, "schemaName"),
            table=optional(source, "table"),
            ddl=payload["ddl"],
            seq=self.ordering_of(source),
            event_time=_event_instant(source, payload),
            detail="schema change",
        )

    def _unwrapped(self, row: dict[str, Any], schema: Any, key_obj: dict | None, ctx: DecodeContext) -> list[Change]:
        """An ``ExtractNewRecordState`` row → an envelope the family decodes."""
        source: dict[str, Any] = {}
        columns: dict[str, Any] = {}
        op_text = deleted = None
        for name, value in row.items():
            if name == "__op":
                op_text = value
            elif name == "__deleted":
                deleted = value
            elif name == "__ts_ms":
                source.setdefault("ts_ms", value)
            elif name.startswith("__source_") and name[9:] in SOURCE_FIELDS:
                source[name[9:]] = value
            elif name.startswith("__") and name[2:] in SOURCE_FIELDS:
                source[name[2:]] = value
            else:
                columns[name] = value
        if not source.get("table"):
            if not ctx.default_table:
                raise Reject(
                    "an unwrapped Debezium row names no table (no __table): set the source's table "
                    "(--table db.table), or add.fields=table,db to the ExtractNewRecordState SMT"
                )
            source["db"], source["table"] = split_table(ctx.default_table)
        flag = "true" if deleted is True else "false" if deleted is False else deleted
        if flag is not None and (not isinstance(flag, str) or flag.lower() not in ("true", "false")):
            raise Reject(f'field \'__deleted\' should be "true" or "false", got {dumps_exact(flag)[:40]}')
        is_deleted = flag is not None and flag.lower() == "true"
        if op_text is None:
            op_text = "d" if is_deleted else "u"
            detail = f"__deleted={flag}" if flag is not None else "upsert"
        elif not isinstance(op_text, str):
            raise Reject("field '__op' should be a string")
        else:
            detail = op_text
        image_name = "before" if op_text == "d" or is_deleted else "after"
        env = {"op": op_text, "source": source, image_name: columns}
        row_schema = {"fields": [{"field": image_name, "fields": schema.get("fields") or []}]} if schema else None
        changes = self.envelope_changes(env, row_schema, ctx, self._key(key_obj, ctx, source))
        for ch in changes:
            ch.detail = detail
        return changes

    # ------------------------------------------------------------ MongoDB

    def _mongo(self, env: dict[str, Any], key_obj: dict | None, ctx: DecodeContext) -> list[Change]:
        op_text = env.get("op")
        op = self.ops.get(op_text) if isinstance(op_text, str) else None
        if op is None:
            raise Reject(f"unknown op {str(op_text)[:20]!r}")
        source = optional(env, "source", dict) or {}
        db = optional(source, "db")
        coll = optional(source, "collection") or optional(source, "table")
        common = dict(
            db=db,
            table=coll,
            seq=self.ordering_of(source),
            event_time=_event_instant(source, env),
            txn=_txn(env),
            detail=op_text,
        )
        if op == "HEARTBEAT":
            return [Change(op="HEARTBEAT", **common)]
        if not coll:
            raise Reject(f"row change ({op_text}) without source.collection")
        types = ctx.column_types(db, coll)
        limits = (ctx.max_depth, ctx.max_width, ctx.max_elements)
        row = dict(key_columns=("_id",), col_types=dict(types) or None, **common)
        if op == "TRUNCATE":
            return [Change(op="TRUNCATE", **row)]
        after_doc = parse_document(env.get("after"), "after", *limits)
        before_doc = parse_document(env.get("before"), "before", *limits)
        key = self._mongo_key(env, key_obj, limits)
        if op in ("INSERT", "SNAPSHOT"):
            if after_doc is None:
                raise Reject(f"op '{op_text}' without an 'after' document")
            return [Change(op=op, after=mongo_image(after_doc, types), **row)]
        if op == "DELETE":
            before = mongo_image(before_doc, types) if before_doc is not None else key
            if not before or "_id" not in before:
                raise Reject("MongoDB delete without the removed _id (no before, filter or record key)")
            return [Change(op="DELETE", before=before, **row)]
        before = mongo_image(before_doc, types) if before_doc is not None else key
        if after_doc is not None:  # the full document (capture.mode *_with_pre_image / lookup)
            return [Change(op="UPDATE", before=before, after=mongo_image(after_doc, types), **row)]
        sets, unsets = self._mongo_update(env, limits)
        if not key or "_id" not in key:
            raise Reject("MongoDB update description without the document's _id (no filter or record key)")
        after = {"_id": key["_id"], **mongo_image(sets, types), **{name: None for name in unsets}}
        return [Change(op="UPDATE", before=before, after=after, changed=tuple(after), **row)]

    @staticmethod
    def _mongo_key(env: dict[str, Any], key_obj: dict | None, limits: tuple) -> dict | None:
        """{"_id": ...} from ``filter`` (1.x), else the record key ``{"id": "<extended JSON>"}``."""
        doc = parse_document(env.get("filter"), "filter", *limits)
        if doc is not None and "_id" in doc:
            return {"_id": mongo_value(doc["_id"])}
        if key_obj is not None:
            _schema, payload = unwrap_connect(key_obj)
            raw = payload.get("id") if isinstance(payload, dict) else None
            if isinstance(raw, str):
                # the id is extended JSON of the _id value: a document, a string or a number
                parsed = parse_document(f'{{"_id": {raw}}}', "key", *limits) if raw[:1] in '{["-0123456789' else None
                return {"_id": mongo_value(parsed["_id"]) if parsed else raw}
        return None

    @staticmethod
    def _mongo_update(env: dict[str, Any], limits: tuple) -> tuple[dict, list[str]]:
        description = optional(env, "updateDescription", dict)
        if description is not None:  # 2.x change streams
            updated = description.get("updatedFields")
            sets = parse_document(updated, "updatedFields", *limits) or {}
            removed = description.get("removedFields") or []
            if not isinstance(removed, list) or not all(isinstance(n, str) for n in removed):
                raise Reject("updateDescription.removedFields should be a list of names")
            fields = mongo_update_fields({"$set": sets, "$unset": dict.fromkeys(removed, "")})
            return fields or ({}, [])
        patch = parse_document(env.get("patch"), "patch", *limits)
        if patch is None:
            raise Reject("MongoDB update without 'after', 'patch' or 'updateDescription'")
        fields = mongo_update_fields(patch)
        if fields is None:  # a replacement document
            return {k: v for k, v in patch.items() if k != "_id"}, []
        return fields

    # ------------------------------------------------------------ encoder

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        """A Debezium JSON-converter message with ``schema`` (logical types, so values round-trip
        exactly); ``ctx.options['connector']`` (default mysql) decides how ``seq`` is written."""
        op_text = {v: k for k, v in self.ops.items() if k in "cudrt"}.get(change.op)
        if op_text is None:
            raise ValueError(f"Debezium cannot express op {change.op}")
        connector = str(ctx.options.get("connector", "mysql"))
        types = change.col_types or {}
        cols = list(dict.fromkeys([*(change.before or {}), *(change.after or {})]))
        fields, encoders = [], {}
        for col in cols:
            field, encoders[col] = _field_for(
                col, types.get(col), [(change.before or {}).get(col), (change.after or {}).get(col)]
            )
            fields.append(field)
        source: dict[str, Any] = {"version": "2.7.0.Final", "connector": connector, "name": "sim"}
        source["ts_ms"] = Num(epoch_ms(change.event_time)) if change.event_time else Num("0")
        source["snapshot"] = "true" if change.op == "SNAPSHOT" else "false"
        source.update(db=change.db, schema=change.schema, table=change.table)
        source.update(encode_position(connector, change.seq))
        payload: dict[str, Any] = {
            "before": _encode_row(change.before, encoders) if change.op in ("UPDATE", "DELETE") else None,
            "after": _encode_row(change.after, encoders) if change.op in ("INSERT", "SNAPSHOT", "UPDATE") else None,
            "source": source,
            "op": op_text,
            "ts_ms": source["ts_ms"],
            "transaction": {"id": change.txn, "total_order": Num("1"), "data_collection_order": Num("1")}
            if change.txn
            else None,
        }
        row = {"type": "struct", "optional": True, "fields": fields}
        schema = {
            "type": "struct",
            "name": "sim.Envelope",
            "fields": [{**row, "field": "before"}, {**row, "field": "after"}],
        }
        return dumps_exact({"schema": schema, "payload": payload}).encode("utf-8")


DECODER = DebeziumDecoder()


# ---------------------------------------------------------------- shapes and small readers


def tombstone() -> Change:
    """A Kafka tombstone (null value): counted as a heartbeat, nothing to apply."""
    return Change(op="HEARTBEAT", detail="tombstone")


def unwrap_connect(obj: dict[str, Any]) -> tuple[Any, Any]:
    """(schema, payload) of a JSON-converter object: ``{"schema", "payload"}`` with schemas.enable, else
    (None, the object)."""
    if set(obj) == {"schema", "payload"}:
        schema = obj["schema"]
        return (schema if isinstance(schema, dict) else None), obj["payload"]
    return None, obj


def _is_envelope(payload: dict[str, Any]) -> bool:
    """An envelope has a string ``op`` and a ``source`` object or a ``before`` / ``after`` image; an unwrapped
    row with the SMT's ``__op`` / ``__deleted`` is never one, whatever its columns are called."""
    if "__op" in payload or "__deleted" in payload or not isinstance(payload.get("op"), str):
        return False
    return isinstance(payload.get("source"), dict) or any(
        isinstance(payload.get(part), (dict, str)) or (part in payload and payload[part] is None)
        for part in ("before", "after")
    )


def _instant(ms: Any) -> str | None:
    return V.instant_from_epoch(seq_int(ms, "ts_ms"), "ms") if ms is not None and str(ms) not in ("0", "") else None


def _event_instant(source: dict[str, Any], env: dict[str, Any]) -> str | None:
    return _instant(source.get("ts_ms")) or _instant(env.get("ts_ms"))


def _txn(env: dict[str, Any]) -> str | None:
    txn = optional(env, "transaction", dict)
    return str(txn["id"]) if txn and txn.get("id") is not None else None


# ---------------------------------------------------------------- encoding helpers


def _field_for(col: str, col_type: str | None, samples: list[str | None]) -> tuple[dict, Any]:
    """(schema field, value writer) for one column of a canonical type, the way Debezium writes it."""
    fam = V.family(col_type)
    field: dict[str, Any] = {"field": col, "optional": True}
    if fam == "int":
        return {**field, "type": "int64"}, Num
    if fam == "float":
        return {**field, "type": "double"}, Num
    if fam == "bool":
        return {**field, "type": "boolean"}, lambda v: v == "true"
    if fam == "bytes":
        return {**field, "type": "bytes"}, str
    if fam in ("decimal", "uint64"):
        args = V.parse_type(col_type or "")[1]
        scale = args[1] if fam == "decimal" and len(args) > 1 else 0
        if fam == "decimal" and not args:  # no declared scale: each value its own
            return {**field, "type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}, _vsd
        params = {"scale": str(scale), "connect.decimal.precision": str(args[0] if args else 20)}
        logical = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": params}
        return {**field, **logical}, lambda v: _unscaled_b64(v, scale)
    if fam == "date":
        return {**field, "type": "int32", "name": "io.debezium.time.Date"}, lambda v: Num(
            str((V.parse_datetime_text(v)[0].date() - V.EPOCH_DATE).days)
        )
    if fam in ("time", "datetime"):
        digits = max((len(s.partition(".")[2]) for s in samples if s), default=0)
        unit = "Nano" if digits > 6 else "Micro"
        name = f"io.debezium.time.{unit}{'Time' if fam == 'time' else 'Timestamp'}"
        return {**field, "type": "int64", "name": name}, lambda v: Num(
            str(_nanos(v, fam) // (1 if unit == "Nano" else 1000))
        )
    if fam == "timestamp":
        return {**field, "type": "string", "name": "io.debezium.time.ZonedTimestamp"}, str
    if fam == "json":
        return {**field, "type": "string", "name": "io.debezium.data.Json"}, str
    return {**field, "type": "string"}, str


def _encode_row(image: dict | None, encoders: dict[str, Any]) -> dict | None:
    if image is None:
        return None
    return {c: None if v is None else encoders[c](v) for c, v in image.items()}


def _unscaled_b64(text: str, scale: int) -> str:
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("+-").partition(".")
    if len(frac) > scale:
        raise ValueError(f"{text} has more than {scale} decimal places")
    n = int(whole + frac.ljust(scale, "0")) * (-1 if negative else 1)
    return base64.b64encode(n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True)).decode("ascii")


def _vsd(text: str) -> dict[str, Any]:
    scale = len(text.partition(".")[2])
    return {"scale": Num(str(scale)), "value": _unscaled_b64(text, scale)}


def _nanos(text: str, fam: str) -> int:
    """Canonical time / datetime → nanoseconds since midnight / the epoch (signed)."""
    return V.time_nanos(text) if fam == "time" else V.epoch_nanos(text)
