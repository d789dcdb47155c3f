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
2     ``metadata`` is an object with ``record-type``              aws_dms
3     ``meta`` is an object                                       dts_shareplex if meta
                                                                  has ``userid`` (DTS
                                                                  examples, seed 004),
                                                                  else oms_shareplex
4     ``op_type`` is text and has ``table`` (or a JSON schema     ogg_json
      message: ``$schema`` and ``title``, ``schemaTopicName``)
5     has ``coll`` and ``op``                                     drs_mongo
6     ``payload`` is an object:
      6a ``payload.source`` is a Debezium project source (below)  debezium
         with ``op``, or payload has ``__op`` / ``__source_*``
      6b ``schema`` has ``dataColumn`` / ``primaryKey``, or        dataworks_kafka
         payload has ``sequenceId``, or op is ``MHEARTBEAT``, or
         an image has ``dataColumn``
      6c ``schema`` has ``column`` / ``pk``, or ``version`` is     oms_dataworks
         "2.0", or an image has ``data``, or op is HEARTBEAT
         without ``source`` / ``ts_ms``
      6d payload has ``op``                                       oms_debezium
7     top-level ``op`` and (``source``, ``before`` or ``after``)  debezium if ``source``
      (also Debezium "schema-exclude" messages)                   is a Debezium project
                                                                  source, else
                                                                  oms_debezium_flatten
8     has ``__op``, a ``__source_*`` field, ``__table``, ``__db``  debezium (unwrap SMT)
      or ``__lsn`` (``ExtractNewRecordState`` add.fields); or a   or control message
      Debezium heartbeat (``ts_ms`` alone), transaction record
      (``status`` BEGIN/END + ``event_count``) or schema change
      (``ddl`` + ``databaseName`` / ``tableChanges``); also as
      the ``payload`` of rule 6a
9     ``type`` is text and has ``database`` or ``table``:         (Canal-like family)
      9a ``columnType``/``opType`` or a text ``schema``           drs_gaussdb
      9b lower-case ``type`` and no ``isDdl`` (or ``data`` is an  maxwell
         object)
      9c ``jobId``/``shardId``/``identifier``/``eventId`` or      drs_json
         type INIT_DDL
      9d no ``id`` (OMS Canal examples carry none, seed 000)      oms_canal
      9e a ``timestamp`` column (mysqlType) whose value is epoch  drs_json
         seconds text ``1624614713.201`` (DRS, seed 003)
      9f otherwise (``id`` present: Canal's FlatMessage)          canal
10    has ``__deleted`` (and none of rule 8's fields)             oms_debezium_smt
====  ==========================================================  =====================

A Debezium project source (rules 6a, 7) has a field OMS never writes (OMS writes exactly
``version``, ``connector``, ``name``, ``ts_ms``, ``db``, ``table``, ``pos``; seeds 000/001): Debezium
writes ``snapshot`` for every connector, and ``file`` / ``lsn`` / ``scn`` / ``change_lsn`` / ``ord``
... per connector. A source of only OMS's fields counts as Debezium's when ``pos`` is a JSON number
(OMS writes ``"553132@1668496109"``). A null, empty or ``null`` value (a tombstone: only Debezium
writes them, after each delete) goes to debezium, which counts it as a heartbeat; a Debezium value is
decoded with its Kafka record key.

Canal, told apart from its look-alikes (9d-9f): open-source Canal's ``FlatMessage`` always carries
``id`` (a batch id); OMS Canal never does (seed 000/001), so ``id`` decides. A per-message test (a
``sqlType`` BLOB value that is not valid Base64, say) was rejected: it changes from message to
message of one stream (``"abcd"`` is both valid Base64 and ISO-8859-1 text), so one topic would be
split over two decoders with different byte encodings. DTS Canal JSON (seed 004) has open-source
Canal's shape exactly and cannot be told apart per message: ``auto`` reads it as ``canal`` (whose
``es`` ordering and DELETE-in-``data`` rule fit DTS's current writer; an old-form DELETE, row in
``old``, is quarantined naming dts_canal). Name ``dts_canal`` for a DTS topic.

Named only: drs_json_c (deleted rows in ``data``) and dts_canal have no shape of their own;
drs_avro needs its schema in the options; debezium_avro is Confluent-framed Avro.
Bytes that are not UTF-8 JSON (and do not start with ``{`` / ``[``) are tried as Avro:
oms_avro first (the more specific writer), then dts_avro; the first that decodes wins.
Anything else is rejected with a reason that lists the candidates considered and why each failed.
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
    Num,
    Reject,
    is_kind,
    json_kind,
    loads_exact,
)

_DRS_MARKERS = ("jobId", "shardId", "identifier", "eventId")
_EPOCH_SECONDS = re.compile(r"\d{9,11}(\.\d{1,9})?", re.ASCII)
AVRO_ORDER = ("oms_avro", "dts_avro")
#: Exactly the ``source`` fields OMS writes in its Debezium formats (seed 000/001).
OMS_SOURCE_FIELDS = frozenset({"version", "connector", "name", "ts_ms", "db", "table", "pos"})
#: Fields the Debezium ``ExtractNewRecordState`` SMT adds (``add.fields``), besides ``__deleted``.
_UNWRAP_FIELDS = frozenset({"__op", "__table", "__db", "__lsn", "__ts_ms", "__schema", "__name", "__snapshot"})
#: Every candidate the sniffer considers, in rule order, with the shape that selects it.
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("oms_default", "'allMetaData'"),
    ("aws_dms", "'metadata' object with 'record-type'"),
    ("oms_shareplex/dts_shareplex", "'meta' object"),
    ("ogg_json", "text 'op_type' and 'table', or '$schema' and 'title'"),
    ("drs_mongo", "'coll' and 'op'"),
    ("debezium/oms_debezium/dataworks_kafka/oms_dataworks", "'payload' object"),
    ("debezium/oms_debezium_flatten", "text 'op' with 'source', 'before' or 'after'"),
    ("debezium unwrapped/control", "'__op', '__source_*', '__table', '__db', '__lsn'; 'ts_ms' alone; 'ddl'"),
    ("canal/oms_canal/maxwell/drs_json/drs_gaussdb", "text 'type' with 'database' or 'table'"),
    ("oms_debezium_smt", "'__deleted'"),
)


def is_debezium_source(source: Any) -> bool:
    """True for a ``source`` block written by Debezium itself rather than OMS (see the module docstring)."""
    if not isinstance(source, dict):
        return False
    return bool(set(source) - OMS_SOURCE_FIELDS) or isinstance(source.get("pos"), Num)


def _is_unwrapped_debezium(keys: set[str] | Any) -> bool:
    return any(k in _UNWRAP_FIELDS or k.startswith("__source_") for k in keys)


def _is_debezium_control(obj: dict[str, Any]) -> bool:
    """A Debezium heartbeat (``{"ts_ms"}`` alone), transaction metadata (``status`` BEGIN / END with
    ``event_count`` / ``data_collections``) or schema change event (``ddl`` with ``databaseName`` /
    ``tableChanges``)."""
    keys = set(obj)
    return (
        keys == {"ts_ms"}
        or (obj.get("status") in ("BEGIN", "END") and "id" in keys and bool(keys & {"event_count", "data_collections"}))
        or (is_kind(obj.get("ddl"), str) and bool(keys & {"databaseName", "tableChanges"}))
    )


def sniff(obj: dict[str, Any]) -> str:
    """The format id of a parsed JSON message object, or Reject listing the candidates considered."""
    keys = set(obj)
    if "allMetaData" in keys:
        images = [obj.get("prevStruct"), obj.get("postStruct")]
        if any(isinstance(i, dict) and "__light_type" in i for i in images):
            return "oms_default_extend"
        return "oms_default"
    if isinstance(obj.get("metadata"), dict) and "record-type" in obj["metadata"]:
        return "aws_dms"
    if isinstance(obj.get("meta"), dict):
        return "dts_shareplex" if "userid" in obj["meta"] else "oms_shareplex"
    if (is_kind(obj.get("op_type"), str) and "table" in keys) or ("$schema" in keys and "title" in keys):
        return "ogg_json"
    if "coll" in keys and "op" in keys:
        return "drs_mongo"
    payload = obj.get("payload")
    if isinstance(payload, dict):
        return _sniff_payload(obj, payload)
    if is_kind(obj.get("op"), str) and keys & {"source", "before", "after"}:
        return "debezium" if is_debezium_source(obj.get("source")) else "oms_debezium_flatten"
    if _is_unwrapped_debezium(keys) or _is_debezium_control(obj):
        return "debezium"
    if is_kind(obj.get("type"), str) and keys & {"database", "table"}:
        return _sniff_canal_like(obj)
    if "__deleted" in keys:
        return "oms_debezium_smt"
    raise Reject(
        f"cannot tell the message format (auto): top-level keys {sorted(keys)[:20]}; "
        f"candidates considered: {_why_not(obj)}; name the format in the configuration"
    )


def _why_not(obj: dict[str, Any]) -> str:
    """Each candidate, the shape it needs and what this message has instead (the first mismatch)."""

    def have(name: str) -> str:
        return f"'{name}' is absent" if name not in obj else f"'{name}' is {json_kind(obj[name])}"

    meta = obj.get("metadata")
    here = {
        "oms_default": have("allMetaData"),
        "aws_dms": "no 'record-type' in 'metadata'" if isinstance(meta, dict) else have("metadata"),
        "oms_shareplex/dts_shareplex": have("meta"),
        "ogg_json": have("op_type") if not is_kind(obj.get("op_type"), str) else have("table"),
        "drs_mongo": have("coll") if "coll" not in obj else have("op"),
        "debezium/oms_debezium/dataworks_kafka/oms_dataworks": have("payload"),
        "debezium/oms_debezium_flatten": have("op") if not is_kind(obj.get("op"), str) else "none of them",
        "debezium unwrapped/control": "none of them",
        "canal/oms_canal/maxwell/drs_json/drs_gaussdb": have("type")
        if not is_kind(obj.get("type"), str)
        else "neither",
        "oms_debezium_smt": have("__deleted"),
    }
    return "; ".join(f"{fid} (needs {shape}: {here[fid]})" for fid, shape in CANDIDATES)


def _sniff_payload(obj: dict, payload: dict) -> str:
    schema = obj.get("schema") if isinstance(obj.get("schema"), dict) else {}
    images = [payload.get("before"), payload.get("after")]
    op = payload.get("op")
    if (
        (is_kind(op, str) and is_debezium_source(payload.get("source")))
        or _is_unwrapped_debezium(payload)
        or _is_debezium_control(payload)
    ):
        return "debezium"
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
        f"{sorted(payload)[:20]} and no 'op'; candidates considered: debezium (needs payload 'op' with a "
        "Debezium 'source', or '__op' / '__source_*'), dataworks_kafka / oms_dataworks / oms_debezium (need "
        "payload 'op'); name the format in the configuration"
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
    return "drs_json" if _epoch_timestamps(obj) else "canal"


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
    seeds = "000, 001, 002, 003, 004 (and the real messages of tests/fixtures/real)"
    ordering = "that of the recognised format"
    table_and_key = "that of the recognised format"
    type_mapping = "that of the recognised format"
    quirks = (
        "recognises each message by its top-level shape (sniffing table in pipelines/formats/auto.py)",
        "ambiguous Canal-like shapes resolve to drs_gaussdb > maxwell > drs_json (markers) > oms_canal (no id) "
        "> drs_json (epoch TIMESTAMP) > canal; dts_canal and drs_json_c must be named",
        "Debezium project vs OMS Debezium: a `source` with a field OMS never writes (`snapshot`, `file`, `lsn`...)",
        "unclassifiable messages are quarantined listing every candidate and why it did not match",
        "non-JSON bytes tried as Avro: oms_avro, then dts_avro",
    )

    def decode(self, raw: bytes, ctx: DecodeContext) -> list[Change]:
        return self.decode_record(None, raw, ctx)

    def decode_record(self, key: bytes | None, value: bytes | None, ctx: DecodeContext) -> list[Change]:
        """Sniff the value; a Debezium value is decoded with its record key (the key names the key
        columns); a null or empty value is Debezium's tombstone (only Debezium writes them), which
        its decoder counts as a heartbeat."""
        if value is None or bytes(value).strip() in (b"", b"null"):
            return _run("debezium", lambda: _delegate("debezium").decode_record(key, None, ctx))
        raw = value
        self.check_size(raw, ctx)
        try:
            obj = loads_exact(raw, ctx.max_depth, ctx.max_width, ctx.max_elements)
        except Reject as json_error:
            if bytes(raw[:64]).lstrip()[:1] in (b"{", b"["):
                raise
            return self._avro(raw, ctx, str(json_error))
        if not isinstance(obj, dict):
            raise Reject(f"expected a JSON object, got {json_kind(obj)}")
        format_id = sniff(obj)
        decoder = _delegate(format_id)
        if key is not None and format_id == "debezium":
            return _run(format_id, lambda: decoder.decode_record(key, raw, ctx))
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
