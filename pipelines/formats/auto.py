"""Format "auto": recognise each message's format by its shape, then delegate to that decoder.

For a topic that carries one known format, name that format instead: several formats share a
shape (the rules below pick one deterministically) and naming the format skips the sniffing.

Sniffing table (JSON object; first matching rule wins; "has k" = top-level key present):

====  ==========================================================  =====================
rule  shape                                                       format
====  ==========================================================  =====================
1     has ``allMetaData``, and ``prevStruct`` or ``postStruct``   oms_default_extend if
      carries ``__light_type``                                    an image has it,
                                                                  else oms_default
2     ``meta`` is an object                                       dts_shareplex if meta
                                                                  has ``userid`` (DTS
                                                                  examples, seed 004),
                                                                  else oms_shareplex
3     has ``coll`` and ``op``                                     drs_mongo
4     ``payload`` is an object and ``schema`` has ``dataColumn`` /  dataworks_kafka
      ``primaryKey``, or payload has ``sequenceId``, or op is
      ``MHEARTBEAT``, or an image has ``dataColumn``
5     ``payload`` is an object and ``schema`` has ``column``/``pk``,  oms_dataworks
      or ``version`` is "2.0", or an image has ``data``, or op
      is HEARTBEAT without ``source`` / ``ts_ms``
6     ``payload`` is an object with ``op``                        oms_debezium
7     top-level ``op`` and (``source``, ``before`` or ``after``)  oms_debezium_flatten
      (also Debezium "schema-exclude" messages)
8     ``type`` is text and has ``database`` or ``table``:         (Canal-like family)
      8a ``columnType``/``opType`` or a text ``schema``           drs_gaussdb
      8b lower-case ``type`` and no ``isDdl`` (or ``data`` is an  maxwell
         object)
      8c ``jobId``/``shardId``/``identifier``/``eventId`` or      drs_json
         type INIT_DDL
      8d no ``id`` (OMS Canal examples carry none, seed 000)      oms_canal
      8e a ``timestamp`` column (mysqlType) whose value is epoch  drs_json
         seconds text ``1624614713.201`` (DRS, seed 003)
      8f otherwise (open-source Canal shape, with ``id``)         dts_canal
9     has ``__deleted``                                           oms_debezium_smt
====  ==========================================================  =====================

drs_json_c (deleted rows in ``data``) has no shape of its own: name it explicitly.
drs_avro needs its schema in the options: name it explicitly.
Bytes that are not UTF-8 JSON (and do not start with ``{`` / ``[``) are tried as Avro:
oms_avro first (the more specific writer), then dts_avro; the first that decodes wins.
Anything else is rejected with a reason that lists what was seen.
"""

from __future__ import annotations

import re
from typing import Any

from pipelines.formats import get_decoder  # the package is initialised before any of its format modules
from pipelines.formats.base import (
    Change,
    DecodeContext,
    Decoder,
    JsonDecoder,
    Reject,
    _json_kind,
    loads_exact,
)

_DRS_MARKERS = ("jobId", "shardId", "identifier", "eventId")
_EPOCH_SECONDS = re.compile(r"\d{9,11}(\.\d{1,9})?")
AVRO_ORDER = ("oms_avro", "dts_avro")


def sniff(obj: dict[str, Any]) -> str:
    """The format id of a parsed JSON message object, or Reject saying what was seen."""
    keys = set(obj)
    if "allMetaData" in keys:
        images = [obj.get("prevStruct"), obj.get("postStruct")]
        if any(isinstance(i, dict) and "__light_type" in i for i in images):
            return "oms_default_extend"
        return "oms_default"
    if isinstance(obj.get("meta"), dict):
        return "dts_shareplex" if "userid" in obj["meta"] else "oms_shareplex"
    if "coll" in keys and "op" in keys:
        return "drs_mongo"
    payload = obj.get("payload")
    if isinstance(payload, dict):
        return _sniff_payload(obj, payload)
    if isinstance(obj.get("op"), str) and keys & {"source", "before", "after"}:
        return "oms_debezium_flatten"
    if isinstance(obj.get("type"), str) and keys & {"database", "table"}:
        return _sniff_canal_like(obj)
    if "__deleted" in keys:
        return "oms_debezium_smt"
    raise Reject(
        "cannot tell the message format (auto): top-level keys "
        f"{sorted(keys)[:20]}; name the format in the configuration"
    )


def _sniff_payload(obj: dict, payload: dict) -> str:
    schema = obj.get("schema") if isinstance(obj.get("schema"), dict) else {}
    images = [payload.get("before"), payload.get("after")]
    op = payload.get("op")
    if (
        {"dataColumn", "primaryKey"} & set(schema)
        or "sequenceId" in payload
        or op == "MHEARTBEAT"
        or any(isinstance(i, dict) and "dataColumn" in i for i in images)
    ):
        return "dataworks_kafka"
    if (
        {"column", "pk"} & set(schema)
        or obj.get("version") == "2.0"
        or any(isinstance(i, dict) and "data" in i for i in images)
        or (op == "HEARTBEAT" and not {"source", "ts_ms"} & set(payload))
    ):
        return "oms_dataworks"
    if "op" in payload:
        return "oms_debezium"
    raise Reject(
        "cannot tell the message format (auto): a 'payload' object with keys "
        f"{sorted(payload)[:20]} and no 'op'; name the format in the configuration"
    )


def _sniff_canal_like(obj: dict) -> str:
    kind = obj["type"]
    if "columnType" in obj or "opType" in obj or isinstance(obj.get("schema"), str):
        return "drs_gaussdb"
    if isinstance(obj.get("data"), dict) or (kind == kind.lower() and "isDdl" not in obj):
        return "maxwell"
    if any(k in obj for k in _DRS_MARKERS) or kind == "INIT_DDL":
        return "drs_json"
    if "id" not in obj:
        return "oms_canal"
    return "drs_json" if _epoch_timestamps(obj) else "dts_canal"


def _epoch_timestamps(obj: dict) -> bool:
    """DRS JSON writes MySQL TIMESTAMP as epoch seconds text (seed 003); Canal writers do not."""
    types = obj.get("mysqlType")
    if not isinstance(types, dict):
        return False
    ts_cols = [c for c, t in types.items() if isinstance(t, str) and t.lower().startswith("timestamp")]
    for rows in (obj.get("data"), obj.get("old")):
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and any(
                isinstance(row.get(c), str) and _EPOCH_SECONDS.fullmatch(row[c]) for c in ts_cols
            ):
                return True
    return False


def _delegate(format_id: str) -> Decoder:
    try:
        return get_decoder(format_id)
    except Exception as exc:  # missing module or optional dependency
        raise Reject(f"message looks like {format_id} but that decoder is unavailable: {exc}") from None


def _run(format_id: str, call) -> list[Change]:
    try:
        return call()
    except Reject as exc:
        raise Reject(f"as {format_id}: {exc}") from None
    except Exception as exc:  # a delegate must only raise Reject; never let anything else out
        raise Reject(f"as {format_id}: decoder failed with {type(exc).__name__}: {exc}") from None


class AutoDecoder(Decoder):
    format_id = "auto"
    seeds = "000, 001, 002, 003, 004"
    ordering = "that of the recognised format"
    table_and_key = "that of the recognised format"
    type_mapping = "that of the recognised format"
    quirks = (
        "recognises each message by its top-level shape (sniffing table in pipelines/formats/auto.py)",
        "ambiguous Canal-like shapes resolve to drs_gaussdb > maxwell > drs_json (markers) > oms_canal (no id) "
        "> drs_json (epoch TIMESTAMP) > dts_canal",
        "non-JSON bytes tried as Avro: oms_avro, then dts_avro",
    )

    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        self.check_size(raw, ctx)
        try:
            obj = loads_exact(raw, ctx.max_depth, ctx.max_width, ctx.max_elements)
        except Reject as json_error:
            if bytes(raw[:64]).lstrip()[:1] in (b"{", b"["):
                raise
            return self._avro(raw, ctx, str(json_error))
        if not isinstance(obj, dict):
            raise Reject(f"expected a JSON object, got {_json_kind(obj)}")
        format_id = sniff(obj)
        decoder = _delegate(format_id)
        if isinstance(decoder, JsonDecoder):
            return _run(format_id, lambda: decoder.decode_object(obj, ctx))
        return _run(format_id, lambda: decoder.decode(raw, ctx))

    @staticmethod
    def _avro(raw: bytes, ctx: DecodeContext, json_error: str) -> list[Change]:
        reasons = [f"not JSON ({json_error})"]
        for format_id in AVRO_ORDER:
            try:
                return _run(format_id, lambda fid=format_id: _delegate(fid).decode(raw, ctx))
            except Reject as exc:
                reasons.append(str(exc))
        raise Reject("cannot tell the message format (auto): " + "; ".join(reasons))


DECODER = AutoDecoder()
