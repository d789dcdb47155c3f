"""Canonical values: the exact text each column value takes in silver, whatever the vendor wrote.

Decoders turn vendor encodings into this canon; gold casts the canon into the
mirror's Delta type; ``lakecdc export`` prints it back. One table, used by all:

==============  ==============================  =================================
family          canonical text                  mirror (Delta) type
==============  ==============================  =================================
int             ``-123``                        BIGINT (INT for <= 32-bit types)
uint64          ``10223372036854775806``        DECIMAL(20,0)
decimal         ``9.999999999999999093266253``  DECIMAL(p,s); STRING if p > 38 or
                (plain, trailing zeros kept)    no (p,s) was stated
float           the number's text               DOUBLE
bool            ``true`` / ``false``            BOOLEAN
bytes           standard Base64                 BINARY
date            ``YYYY-MM-DD``                  DATE
datetime        ``YYYY-MM-DDTHH:MM:SS[.f]``     TIMESTAMP_NTZ (STRING above 6
                (zone-less wall clock)          fraction digits)
timestamp       ``YYYY-MM-DDTHH:MM:SS[.f]Z``    TIMESTAMP (UTC instant)
time            ``HH:MM:SS[.f]``                STRING
json            the document's JSON text        VARIANT (``doc:address.city``)
array           ``["1.5",null]``: the JSON      ARRAY of the element's type
                array of elements' canonical    (``array<decimal(5,1)>``)
string          the text                        STRING
==============  ==============================  =================================

Fractions keep up to 9 digits with trailing zeros removed. Nothing here ever goes
through a float.

Bounds (docs/exact-values-bounds.md states them for users): numbers are ASCII digits with an optional
sign, point and exponent, at most 4,000 characters and an exponent of at most 400; an int is within
BIGINT (a BIGINT UNSIGNED up to 2^64 - 1); a DOUBLE's text is finite as a double, NaN and Infinity
only as words, written ``NaN`` / ``Infinity`` / ``-Infinity``; a width a message states is 1 to 64
bits (MySQL BIT, Debezium Bits); years are 0001 to 9999, always four digits; a time keeps its sign
and at most 999 hours; a type name is at most 1,024 characters.

Cost model: every decoder is linear in the size of its message. What makes it so, layer by layer:

1. Reading the message: JSON is held to the limits before it is parsed (``limits``: message bytes,
   depth, width, elements; ``formats.base.check_shape`` is one linear scan), then parsed by the C
   scanner; Avro is read by fastavro in one pass, its field list held to the same width; MongoDB's
   shell-style JSON is held to the JSON limits before its parser runs.
2. Reading the types: a decoder checks its whole type map (``checked_type``: text of at most 1,024
   characters) before it decodes any value, and each name is parsed once per message
   (``type_cache``: by value up to 128 characters, else by identity, a message's type map being one
   string per column that all its rows share); ENUM / SET members are read once per type.
3. Each value: time linear in its text and its type's name, never more: numeric text is matched by
   an ASCII pattern before any conversion and its magnitude read from the exponent's digits (Python's
   own readers accept any script's digits and would expand ``1E`` + a million zeros); widths are
   capped at 64 bits; times and dates are fixed-size arithmetic. A value is at most its text plus
   400 characters (a decimal's exponent), or a label of its (capped) type, or 8 bytes of BIT.
4. The whole message: every change a decoder makes is charged, as it is made, to the message's
   budget (``formats.base.message_budget``: 64 × its bytes + 1 MiB characters of text as silver
   stores it, col_types once per change; no value longer than ``limits.max_message_bytes``); the
   change that crosses it stops the decoder, and the message is quarantined naming the budget.
   Silver's memory for a batch is therefore linear in the batch's bytes.

The contract decoders, gold and export share, one module per concern: :mod:`~pipelines.values.types`
(type names → families → mirror types), :mod:`~pipelines.values.numbers` (int, uint64, decimal,
float, bool), :mod:`~pipelines.values.binary` (bytes) and :mod:`~pipelines.values.times` (date,
datetime, timestamp, time); :func:`canonical` here dispatches a plain value to its family's
canonicaliser. Import every name from ``pipelines.values``.
"""

from __future__ import annotations

from datetime import datetime

from pipelines.values.binary import (
    MAX_BITS,
    base64_from_bit_number,
    base64_from_byte_list,
    base64_from_bytes,
    base64_from_hex,
    bit_width,
    canon_base64,
)
from pipelines.values.numbers import (
    EPOCH_RE,
    INT64_MAX,
    INT64_MIN,
    JSON_NUMBER_RE,
    MAX_EXPONENT,
    MAX_NUMBER_CHARS,
    NUMBER_RE,
    canon_bool,
    canon_decimal,
    canon_float,
    canon_int,
    canon_int64,
    canon_int_of_type,
    canon_uint64,
)
from pipelines.values.times import (
    EPOCH_DATE,
    canon_date,
    canon_instant,
    canon_local_datetime,
    canon_time,
    date_from_epoch_days,
    date_from_epoch_millis,
    epoch_ms_text,
    epoch_nanos,
    epoch_seconds_text,
    instant_from_epoch,
    local_datetime_from_epoch,
    parse_datetime_text,
    time_from_micros,
    time_from_nanos,
    time_nanos,
    time_zone,
    wall_text,
)
from pipelines.values.types import (
    MAX_TYPE_CHARS,
    TEXT_TYPES,
    array_element,
    checked_type,
    configured_over,
    family,
    is_known_type,
    parse_type,
    spark_type,
    type_cache,
)

__all__ = [
    "array_element",
    "EPOCH_DATE",
    "EPOCH_RE",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_BITS",
    "JSON_NUMBER_RE",
    "MAX_EXPONENT",
    "MAX_NUMBER_CHARS",
    "MAX_TYPE_CHARS",
    "NUMBER_RE",
    "TEXT_TYPES",
    "base64_from_bit_number",
    "base64_from_byte_list",
    "base64_from_bytes",
    "base64_from_hex",
    "bit_width",
    "canon_base64",
    "configured_over",
    "canon_bool",
    "canon_date",
    "canon_decimal",
    "canon_float",
    "canon_instant",
    "canon_int",
    "canon_int64",
    "canon_int_of_type",
    "canon_local_datetime",
    "canon_time",
    "canon_uint64",
    "canonical",
    "checked_type",
    "date_from_epoch_days",
    "date_from_epoch_millis",
    "epoch_ms_text",
    "epoch_nanos",
    "epoch_seconds_text",
    "datetime",  # the formats write V.datetime(1970, 1, 1)
    "family",
    "instant_from_epoch",
    "is_known_type",
    "local_datetime_from_epoch",
    "parse_datetime_text",
    "parse_type",
    "spark_type",
    "time_from_micros",
    "time_from_nanos",
    "time_nanos",
    "time_zone",
    "type_cache",
    "wall_text",
]


def canonical(fam: str, value: object) -> str | None:
    """Canonicalise a value that the vendor already wrote in the plain text of its family.

    Formats with special encodings (epoch numbers, hex, byte lists) convert first with the
    helpers above and call this only for the plain cases.
    """
    if value is None:
        return None
    if fam == "int":
        return canon_int64(value)
    if fam == "uint64":
        return canon_uint64(value)
    if fam == "decimal":
        return canon_decimal(value)
    if fam == "float":
        return canon_float(value)
    if fam == "bool":
        return canon_bool(value)
    if fam == "bytes":
        return canon_base64(str(value))
    if fam == "date":
        return canon_date(str(value))
    if fam == "datetime":
        return canon_local_datetime(str(value))
    if fam == "timestamp":
        return canon_instant(str(value))
    if fam == "time":
        return canon_time(str(value))
    return value if isinstance(value, str) else str(value)
