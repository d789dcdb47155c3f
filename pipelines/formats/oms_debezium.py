"""OMS "Debezium" serialization (seed 000, 001): ``{"schema": ..., "payload": {envelope}}``.

Accepted shapes: schema + payload, payload only (seed 000 "only the payload part"), and the bare
envelope at the top level (Kafka Connect ``schemas.enable=false``; the Flink conformance files).
Types come from ``schema`` when present, else from configuration (``ctx.column_types``); see
:mod:`pipelines.formats._debezium_family` for the value encodings and the ordering decision.
"""

from __future__ import annotations

from typing import Any

from pipelines.formats._debezium_family import DebeziumEnvelopeDecoder, schema_for
from pipelines.formats.base import Change, DecodeContext, Reject, dumps_exact


class OmsDebeziumDecoder(DebeziumEnvelopeDecoder):
    format_id = "oms_debezium"
    seeds = "000, 001"
    quirks = (
        "payload-only messages (no schema): types from configuration (seed 000)",
        "source.pos 'A@B': B is epoch seconds, ordered before A, though the text says file@offset (seed 000)",
        "source.ts_ms is milliseconds, though the text says seconds; 0 in full sync (seed 000, 001)",
        "BYTES are Base16, not Base64 (seed 000, 001)",
        "no key in the message: key from configuration (seed 000)",
    )

    def envelope(self, obj: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        if "payload" in obj:
            payload = obj["payload"]
            if not isinstance(payload, dict):
                raise Reject("field 'payload' should be an object")
            schema = obj.get("schema")
            if isinstance(schema, dict) and isinstance(schema.get("fields"), list):
                # Kafka Connect puts the envelope's schema at the top; accept it nested too.
                return payload, schema
            return payload, None
        if "op" in obj:
            return obj, None
        raise Reject("neither 'payload' nor a Debezium envelope ('op') in the message")

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        msg: dict[str, Any] = {}
        if change.col_types:
            msg["schema"] = schema_for(change)
        msg["payload"] = self.build_envelope(change)
        return dumps_exact(msg).encode("utf-8")


DECODER = OmsDebeziumDecoder()
