"""OMS "Avro" serialization (seed 000): the DTS Avro ``Record`` written by OMS for OceanBase MySQL tenants.

Seed 000 shows it as JSON, but the wire form is Avro binary of Record.avsc (see
:mod:`pipelines.formats._dts_record` for the decoding decisions). OMS specifics: ``id`` is
``{ms timestamp}{5-digit increment}`` (0 in full migration, whose records are INIT → SNAPSHOT);
``tags.pk_uk_info`` carries only the primary key; TIMESTAMP's illegal value -9223372022400 is rejected.
With ``format_options.oms_avro.schema_registry`` set, messages are Confluent-framed and read with the
registry's writer schema (:mod:`pipelines.formats.confluent`).
"""

from __future__ import annotations

from pipelines.formats._dts_record import DtsRecordDecoder
from pipelines.formats.confluent import RegistryFramed


class OmsAvroDecoder(RegistryFramed, DtsRecordDecoder):
    format_id = "oms_avro"
    seeds = "000"
    quirks = (
        "full migration: operation INIT, id 0, empty sourcePosition → SNAPSHOT (seed 000)",
        "id is {ms timestamp}{5-digit increment}: one integer orders like the pair (seed 000)",
        'key from tags.pk_uk_info {"PRIMARY": [...]} (seed 000)',
        "illegal TIMESTAMP -9223372022400 rejected, never a silent NULL (seed 000)",
        "DDL statement is the afterImages string (seed 000)",
        "with format_options.oms_avro.schema_registry: Confluent-framed, the registry's writer schema (Confluent)",
    )
    avro_record_names = True


DECODER = OmsAvroDecoder()
