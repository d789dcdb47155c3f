"""OMS Default JSON (seeds 000, 001). Everything lives in :mod:`._oms_default_family`."""

from __future__ import annotations

from pipelines.formats._oms_default_family import OmsDefaultFamily


class OmsDefaultDecoder(OmsDefaultFamily):
    """OMS Default: no column types in the message; configured types drive the OMS value rules."""

    format_id = "oms_default"
    seeds = "000, 001"
    type_mapping = (
        "no types in the message: configured column types + OMS type table (DECIMAL exact, "
        "bytes Base64, TIMESTAMP epoch sec.fraction → UTC, DATETIME wall clock, zone id "
        "dropped); untyped values keep their exact text"
    )
    quirks = (
        "storeDataSequence '{timestamp}{increment ≤ 5 digits}' split into (timestamp, increment) (seed 000, 001)",
        "recordType ROW (full load) → SNAPSHOT, no sequence (seed 000)",
        "db is 'tenant.database' (seed 000)",
        "key names split on \\u0001 (seed 000, 001)",
        "invalid dates passed as their original text → Reject naming the column (seed 000)",
    )


DECODER = OmsDefaultDecoder()
