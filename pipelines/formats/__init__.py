"""Format registry: format id → decoder. One module per vendor format.

Modules are imported on first use, so a broken or missing optional dependency of
one format (Avro) never stops the others.
"""

from __future__ import annotations

import importlib
from functools import cache

from pipelines.formats.base import Change, DecodeContext, Decoder, Reject

#: Format ids, the stable contract used by config, CLI and bronze rows.
FORMAT_IDS = (
    "oms_default",
    "oms_default_extend",
    "oms_canal",
    "oms_dataworks",
    "oms_shareplex",
    "oms_debezium",
    "oms_debezium_flatten",
    "oms_debezium_smt",
    "oms_avro",
    "dataworks_kafka",
    "drs_json",
    "drs_json_c",
    "drs_mongo",
    "drs_gaussdb",
    "drs_avro",
    "dts_avro",
    "dts_shareplex",
    "dts_canal",
)
#: Formats that are not in the seeds but every peer reads (Flink, Paimon), and the shape-sniffing one.
EXTRA_FORMAT_IDS = ("debezium", "debezium_avro", "canal", "maxwell", "ogg_json", "aws_dms", "auto")
ALL_FORMAT_IDS = FORMAT_IDS + EXTRA_FORMAT_IDS


@cache
def get_decoder(format_id: str) -> Decoder:
    """The decoder of a format id (its module's ``DECODER``)."""
    if format_id not in ALL_FORMAT_IDS:
        raise KeyError(f"unknown format {format_id!r}; known formats: {', '.join(ALL_FORMAT_IDS)}")
    module = importlib.import_module(f"pipelines.formats.{format_id}")
    return module.DECODER


__all__ = ["ALL_FORMAT_IDS", "FORMAT_IDS", "Change", "DecodeContext", "Decoder", "Reject", "get_decoder"]
