"""Huawei DRS JSON (seed 003 "JSON格式"): Canal-like, every value as text.

Quirks:
* ``type`` INIT (full sync rows) → SNAPSHOT; INIT_DDL (full sync table structure) → DDL.
* A DELETE carries the deleted row in ``old`` (JSON-C puts it in ``data``: use drs_json_c).
* Binary columns as byte lists ``"[106, 103, ...]"`` (text or JSON array) → Base64.
* TIMESTAMP as epoch seconds with a ms fraction, ``1624614713.201``.
* UPDATE ``old`` is the whole before-image in the seed example; the Canal overlay rule
  (before = data overlaid with old) gives the same result for whole or partial ``old``.
* ``id`` increases monotonically: seq = (id,).
"""

from __future__ import annotations

from typing import Any

from pipelines.formats._canal_family import CanalFamilyDecoder
from pipelines.formats.base import Reject
from pipelines.values import base64_from_byte_list


class DrsJsonDecoder(CanalFamilyDecoder):
    format_id = "drs_json"
    seeds = "003"
    ordering = "`id` (DRS event serial number, monotonic)"
    table_and_key = "`database` / `table`; key from `pkNames`, else configuration"
    type_mapping = "`mysqlType` (else `sqlType`, else config) → family; values as text"
    quirks = (
        "INIT rows → SNAPSHOT, INIT_DDL → DDL (seed 003)",
        "DELETE row in `old` (seed 003)",
        'binary as byte lists "[106, 103]" → Base64 (seed 003)',
        "TIMESTAMP as epoch seconds `1624614713.201` (seed 003)",
    )
    snapshot_types = frozenset({"INIT"})
    extra_ddl_types = frozenset({"INIT_DDL"})
    delete_row_in = "old"
    delete_hint = " while 'data' has the row: is the topic JSON-C? use format drs_json_c"
    snapshot_name = "INIT"

    def decode_bytes(self, value: Any) -> str:
        if isinstance(value, str):
            text = value.strip()
            if not (text.startswith("[") and text.endswith("]")):
                raise Reject(f"expected a DRS byte list like [106, 103], got {text[:40]!r}")
            inner = text[1:-1].strip()
            value = [v.strip() for v in inner.split(",")] if inner else []
        return base64_from_byte_list(value)

    def encode_bytes(self, b64: str) -> Any:
        import base64

        data = base64.b64decode(b64)
        return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in data) + "]"  # Java byte[] text


DECODER = DrsJsonDecoder()
