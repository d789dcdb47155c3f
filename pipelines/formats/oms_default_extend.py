"""OMS DefaultExtendColumnType JSON (seeds 000, 001): Default plus ``__light_type`` in the images.

Seed 000/001 put ``__light_type`` inside ``postStruct`` / ``prevStruct`` (``{"col": {"schemaType":
"TINYINT"}}``); it is metadata, never a column: it is stripped from the images and becomes
``col_types`` (lower case) where no type is configured (a configured type decides). A DDL's
``__light_type`` (``ddl: VAR_STRING``) is ignored.
"""

from __future__ import annotations

from typing import Any

from pipelines.formats._oms_default_family import OmsDefaultFamily
from pipelines.formats.base import Change, Reject
from pipelines.values import checked_type

LIGHT_TYPE = "__light_type"


class OmsDefaultExtendDecoder(OmsDefaultFamily):
    format_id = "oms_default_extend"
    seeds = "000, 001"
    type_mapping = (
        "__light_type schemaType per column (lower case) + OMS type table; configured "
        "types fill columns it does not name"
    )
    quirks = (
        "__light_type sits inside prevStruct/postStruct and is stripped from the images (seed 000, 001)",
        "storeDataSequence split into (timestamp, increment) (seed 000)",
        "recordType ROW (full load) → SNAPSHOT (seed 000)",
    )
    meta_columns = (LIGHT_TYPE,)

    def message_types(self, obj: dict[str, Any]) -> dict[str, str]:
        types: dict[str, str] = {}
        for name in ("prevStruct", "postStruct"):
            image = obj.get(name)
            light = image.get(LIGHT_TYPE) if isinstance(image, dict) else None
            if light is None:
                continue
            if not isinstance(light, dict):
                raise Reject(f"{name}.{LIGHT_TYPE} should be an object")
            for col, spec in light.items():
                schema_type = spec.get("schemaType") if isinstance(spec, dict) else None
                if not isinstance(schema_type, str):
                    raise Reject(f"{name}.{LIGHT_TYPE}.{col} has no schemaType text")
                types[col] = checked_type(schema_type, col).lower()
        return types

    def write_types(self, image: dict[str, Any], change: Change) -> None:
        if change.col_types:
            image[LIGHT_TYPE] = {col: {"schemaType": t.upper()} for col, t in change.col_types.items()}


DECODER = OmsDefaultExtendDecoder()
