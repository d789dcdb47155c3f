"""Alibaba DTS Avro (seed 004): the ``com.alibaba.dts.formats.avro.Record`` of Record.avsc.

Seed 004 names the format but not the schema; it is the SDK's Record.avsc, in two generations
(newer writers append ``bornTimestamp`` long default 0). Each message is read with the newer schema
and accepted only if fully consumed, else with the older one (see
:mod:`pipelines.formats._dts_record`). DDL statements are strings (seed 004). With
``format_options.dts_avro.schema_registry`` set, messages are Confluent-framed and read with the
registry's writer schema (:mod:`pipelines.formats.confluent`).
"""

from __future__ import annotations

from pipelines.formats._dts_record import DtsRecordDecoder
from pipelines.formats.confluent import RegistryFramed


class DtsAvroDecoder(RegistryFramed, DtsRecordDecoder):
    format_id = "dts_avro"
    seeds = "004"
    quirks = (
        "two Record generations (with/without trailing bornTimestamp) resolved per message (seed 004, SDK)",
        "DDL statement is a String in afterImages (seed 004)",
        "BEGIN/COMMIT/HEARTBEAT/... records → HEARTBEAT with the operation as detail (Record.avsc)",
        "Timestamp/DateTime 'millis' hold microseconds (DTS SDK)",
        "with format_options.dts_avro.schema_registry: Confluent-framed, the registry's writer schema (Confluent)",
    )
    avro_record_names = True


DECODER = DtsAvroDecoder()
