"""Huawei DRS JSON-C (seed 003 "JSON-C格式"): DRS JSON with two differences.

Quirks:
* A DELETE carries the deleted row in ``data`` (DRS JSON puts it in ``old``).
* TIMESTAMP values are ``yyyy-mm-dd hh:mm:ss`` text; the seed names no zone, so they are read
  in ``options['source_time_zone']`` (default UTC). Epoch text is still accepted.
The seed has no JSON-C example: the fixtures are the JSON examples with these differences applied.
"""

from __future__ import annotations

from pipelines.formats._canal_family import wall_text_in_zone
from pipelines.formats.base import DecodeContext
from pipelines.formats.drs_json import DrsJsonDecoder


class DrsJsonCDecoder(DrsJsonDecoder):
    format_id = "drs_json_c"
    quirks = (
        "INIT rows → SNAPSHOT, INIT_DDL → DDL (seed 003)",
        "DELETE row in `data` (seed 003)",
        'binary as byte lists "[106, 103]" → Base64 (seed 003)',
        "TIMESTAMP as `yyyy-mm-dd hh:mm:ss` in the configured source zone, default UTC (seed 003)",
    )
    delete_row_in = "data"
    delete_hint = " while 'old' has the row: is the topic plain JSON? use format drs_json"

    def encode_timestamp(self, instant: str, ctx: DecodeContext) -> str:
        return wall_text_in_zone(instant, self.source_zone(ctx))


DECODER = DrsJsonCDecoder()
