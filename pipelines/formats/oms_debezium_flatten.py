"""OMS "DebeziumFlatten" serialization (seed 000): the Debezium envelope at the top level.

``{"op", "source": {..., "db", "table", "pos"}, "before", "after", "ts_ms"}`` with no ``schema``
and no ``payload`` wrapper, so column types come from configuration (``ctx.column_types``).
A message that still has a ``payload`` wrapper is rejected (it is the oms_debezium format).
"""

from __future__ import annotations

from typing import Any

from pipelines.formats._debezium_family import DebeziumEnvelopeDecoder
from pipelines.formats.base import Change, DecodeContext, Reject, dumps_exact


class OmsDebeziumFlattenDecoder(DebeziumEnvelopeDecoder):
    format_id = "oms_debezium_flatten"
    seeds = "000"
    quirks = (
        "envelope without schema/payload: types from configuration (seed 000)",
        "source.pos 'A@B': B is epoch seconds, ordered before A, though the text says file@offset (seed 000)",
        "BYTES are Base16, not Base64 (seed 000)",
        "no key in the message: key from configuration (seed 000)",
    )

    def envelope(self, obj: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        if "op" not in obj:
            if "payload" in obj:
                raise Reject("message has a 'payload' wrapper: use format oms_debezium, not oms_debezium_flatten")
            raise Reject("missing field 'op'")
        return obj, None

    def encode(self, change: Change, ctx: DecodeContext) -> bytes:
        return dumps_exact(self.build_envelope(change)).encode("utf-8")


DECODER = OmsDebeziumFlattenDecoder()
