"""The silver row is declared once (pipelines.layout) and agrees with the decoders' Change."""

from __future__ import annotations

import dataclasses

from pipelines.formats.base import Change, Image
from pipelines.layout import CHANGE_FIELDS, CHANGES_COLUMNS, DECODED_DDL, DECODED_FIELDS, QUARANTINE_COLUMNS
from pipelines.silver import decoded_rows, make_decode_batches
from pipelines.spark_schema import arrow_schema_of


def test_the_fields_a_decoder_fills_are_the_change_dataclass():
    assert [f.name for f in dataclasses.fields(Change)] == list(CHANGE_FIELDS)
    declared = {name for name, _ in DECODED_FIELDS}
    assert set(CHANGE_FIELDS) <= declared and set(CHANGES_COLUMNS) <= declared
    assert {"stage", "rule", "bad_value"} <= set(QUARANTINE_COLUMNS)


def test_a_decoded_row_fits_the_arrow_schema_with_invalid_values():
    import pyarrow as pa

    after = Image({"id": "1", "d": None})
    after.invalid["d"] = "0000-00-00"
    change = Change("INSERT", db="shop", table="t", key_columns=("id",), after=after, seq=(7,))
    assert change.invalid == {"d": "0000-00-00"}
    bronze = {
        "source": "s",
        "format": "oms_canal",
        "position": "f:1",
        "queue_pos": "1",
        "ingest_time": None,
        "value": b"{}",
    }
    rows = list(decoded_rows(bronze, [change], None))
    batch = pa.RecordBatch.from_pylist(rows, schema=arrow_schema_of(DECODED_DDL))
    row = batch.to_pylist()[0]
    assert row["invalid"] == [("d", "0000-00-00")] and row["seq"] == "0" * 19 + "7"
    assert dict(row["after"]) == {"id": "1", "d": None}
    assert callable(make_decode_batches({}, None))
