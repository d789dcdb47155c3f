"""One message per format that carries a typed value (issue 26): the class tests and the fuzzers build
their poisons with these, so a value reaches each decoder's typed path the way its vendor writes it.

``carry(fmt, types, row)`` gives the bytes of an INSERT of ``row`` (column → the value as the vendor
writes it) into ``d.t`` with the column types ``types`` stated where the format states types (else
configured: :func:`context`). :func:`decoded` and :func:`silver` run a message through silver's two
paths: ``decode_message`` and the ``mapInArrow`` batch function.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from pipelines.formats import DecodeContext, Reject, get_decoder
from pipelines.formats._dts_record import MYSQL_TYPES, NS, PARSED_BORN
from pipelines.formats.base import Change, TableSpec
from pipelines.silver import decode_message, make_decode_batches
from pipelines.spark_schema import arrow_schema_of

BRONZE_DDL = "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
CANAL_FORMATS = ("dts_canal", "oms_canal", "drs_json", "drs_json_c", "canal")
_TYPE_NUMBERS = {name: number for number, name in MYSQL_TYPES.items()}


def context(types: dict[str, str] | None = None, **kw: Any) -> DecodeContext:
    """A context that configures ``d.t`` (key ``id``) with ``types`` (where a message states none)."""
    spec = TableSpec(key=("id",), columns=dict(types or {}))
    return DecodeContext(tables={"d.t": spec}, default_table="d.t", **kw)


def canal(types: dict[str, str], row: dict[str, Any], **fields: Any) -> bytes:
    msg = {
        "id": 1,
        "database": "d",
        "table": "t",
        "type": "INSERT",
        "isDdl": False,
        "es": 1600000000000,
        "ts": 1600000000000,
        "pkNames": ["id"],
        "mysqlType": types,
        "data": [row],
        **fields,
    }
    return json.dumps(msg).encode()


def gaussdb(types: dict[str, str], row: dict[str, Any], **fields: Any) -> bytes:
    msg = {
        "columnType": types,
        "opType": "INSERT",
        "type": "INSERT",
        "id": 1,
        "es": 1600000000000,
        "database": "d",
        "schema": "s",
        "table": "t",
        "isDdl": False,
        "data": [row],
        "pkNames": ["id"],
        **fields,
    }
    return json.dumps(msg).encode()


def debezium_schema(fields: dict[str, dict], images: tuple[str, ...] = ("before", "after")) -> dict:
    """A Connect envelope schema typing ``fields`` (column → {type, name, parameters}) in ``images``."""
    row = [{"field": c, "optional": True, **f} for c, f in fields.items()]
    parts = [{"field": part, "type": "struct", "optional": True, "fields": row} for part in images]
    return {"type": "struct", "name": "sim.Envelope", "fields": parts}


def debezium(
    fields: dict[str, dict] | None,
    row: dict[str, Any],
    *,
    before: dict | None = None,
    op: str = "c",
    oms: bool = False,
    images: tuple[str, ...] = ("before", "after"),
) -> bytes:
    """A Debezium (``oms``: OMS Debezium) message; ``fields`` None: no schema (payload only)."""
    source = (
        {"connector": "OB_MYSQL", "db": "d", "table": "t", "ts_ms": 1600000000000, "pos": "1@1600000000"}
        if oms
        else {"connector": "mysql", "db": "d", "table": "t", "ts_ms": 1600000000000, "file": "b.000001", "pos": 4}
    )
    payload = {"op": op, "before": before, "after": row, "source": source, "ts_ms": 1600000000000}
    if fields is None:
        return json.dumps({"payload": payload} if oms else payload).encode()
    return json.dumps({"schema": debezium_schema(fields, images), "payload": payload}).encode()


def avro(items: list[tuple[str, Any]], *, before: list | None = None, operation: str = "INSERT") -> bytes:
    """A DTS Avro Record: ``items`` are (column, image value) with the column's MySQL type from its kind;
    a value is an Avro union branch ``(NS + kind, body)`` or None."""
    fields = [{"name": name, "dataTypeNumber": _number(value)} for name, value in items]
    rec = {
        "version": 1,
        "id": 5,
        "sourceTimestamp": 1600000000,
        "sourcePosition": "1",
        "safeSourcePosition": "",
        "sourceTxid": "",
        "source": {"sourceType": "MySQL", "version": "8"},
        "operation": operation,
        "objectName": "d.t",
        "processTimestamps": None,
        "tags": {"pk_uk_info": '{"PRIMARY":["id"]}'},
        "fields": fields,
        "beforeImages": before,
        "afterImages": [value for _name, value in items],
        "bornTimestamp": 0,
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED_BORN, rec)
    return buf.getvalue()


def _number(value: Any) -> int:
    kind = value[0].rpartition(".")[2] if value else "Character"
    name = {"Integer": "bigint", "Decimal": "decimal", "Float": "double", "Timestamp": "timestamp"}.get(kind, "varchar")
    if kind == "DateTime":
        name = "datetime"
    return _TYPE_NUMBERS[name] if name != "decimal" else 246


def integer(text: str) -> tuple[str, dict]:
    return (NS + "Integer", {"precision": 8, "value": text})


def decimal(text: str) -> tuple[str, dict]:
    return (NS + "Decimal", {"value": text, "precision": 0, "scale": 0})


def mongo(doc: str) -> bytes:
    msg = {
        "id": 1,
        "op": "INSERT",
        "db": "d",
        "coll": "t",
        "value": doc,
        "where": None,
        "recordType": "insert",
        "es": 1600000000000,
        "clusterTime": "1600000000:1",
    }
    return json.dumps(msg).encode()


def carry(fmt: str, column_type: str, value: Any, avro_kind: str = "Integer") -> tuple[bytes, DecodeContext]:
    """(message, context) of an INSERT whose column ``v`` of ``column_type`` holds ``value`` as text
    (a string in JSON, the Avro record ``avro_kind``, a Mongo constructor argument)."""
    types = {"id": "bigint", "v": column_type}
    if fmt in CANAL_FORMATS:
        return canal(types, {"id": "1", "v": value}), context()
    if fmt == "drs_gaussdb":
        return gaussdb(types, {"id": "1", "v": value}), context()
    if fmt in ("debezium", "oms_debezium"):
        fields = {"id": {"type": "int64"}, "v": {"type": "string"}}
        return debezium(fields, {"id": 1, "v": value}, oms=fmt == "oms_debezium"), context(types)
    if fmt in ("oms_default", "oms_default_extend", "oms_debezium_flatten", "oms_debezium_smt", "oms_dataworks"):
        return vendor_text(fmt, {"id": "1", "v": value}), context(types)
    if fmt in ("dts_avro", "oms_avro"):
        kind = {"Integer": integer, "Decimal": decimal}[avro_kind]
        return avro([("id", integer("1")), ("v", kind(value))]), context()
    if fmt == "drs_mongo":
        ctor = "NumberDecimal" if column_type.startswith("decimal") else "NumberLong"
        return mongo(f'{{"_id": 1, "v": {ctor}({json.dumps(value)})}}'), context()
    raise ValueError(fmt)


def vendor_text(fmt: str, row: dict[str, Any]) -> bytes:
    """An INSERT of ``row`` (values as the vendor writes them) in an OMS text format with no types."""
    if fmt in ("oms_default", "oms_default_extend"):
        meta = {"dbType": "OB_MYSQL", "storeDataSequence": 160000000000001, "table_name": "t", "db": "d"}
        return json.dumps({"allMetaData": meta, "recordType": "INSERT", "prevStruct": None, "postStruct": row}).encode()
    if fmt == "oms_debezium_flatten":
        source = {"db": "d", "table": "t", "ts_ms": 1600000000000, "pos": "1@1600000000"}
        return json.dumps({"op": "c", "before": None, "after": row, "source": source}).encode()
    if fmt == "oms_debezium_smt":
        return json.dumps({**row, "__deleted": "false"}).encode()
    if fmt == "oms_dataworks":
        schema = {"source": {"dbType": "ob_mysql", "dbName": "d", "table": "t"}, "pk": ["id"]}
        payload = {"op": "INSERT", "scn": "7", "before": None, "after": {"data": row}}
        return json.dumps({"version": "2.0", "schema": schema, "payload": payload}).encode()
    raise ValueError(fmt)


def decoded(fmt: str, raw: bytes, ctx: DecodeContext) -> list[Change] | Reject:
    """Silver's path for one message: its changes, or the Reject it is quarantined with."""
    try:
        return decode_message(get_decoder(fmt), raw, ctx)
    except Reject as exc:
        return exc


def silver(messages: list[tuple[str, bytes]], ctx: DecodeContext) -> list[dict]:
    """The rows silver's mapInArrow function gives for one bronze batch (``ctx`` for every format)."""
    import pyarrow as pa

    rows = [
        {
            "source": "s",
            "format": fmt,
            "value": raw,
            "position": f"p#{i}",
            "queue_pos": f"{i:012d}",
            "ingest_time": None,
        }
        for i, (fmt, raw) in enumerate(messages)
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=arrow_schema_of(BRONZE_DDL))
    fmts = {fmt for fmt, _ in messages}
    return [r for out in make_decode_batches(dict.fromkeys(fmts, ctx), ctx)([batch]) for r in out.to_pylist()]


def after_of(row: dict) -> dict[str, str | None]:
    """A silver row's ``after`` map as a dict (Arrow gives a list of pairs)."""
    return dict(row["after"] or [])
