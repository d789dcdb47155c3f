"""The silver row is declared once (pipelines.layout) and agrees with the decoders' Change."""

from __future__ import annotations

import dataclasses

from pipelines.formats.base import Change, Image
from pipelines.layout import (
    CHANGE_FIELDS,
    CHANGES_COLUMNS,
    DDL_COLUMNS,
    DECODED_DDL,
    DECODED_FIELDS,
    HEARTBEAT_COLUMNS,
    QUARANTINE_COLUMNS,
)
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


def test_the_stored_orders_do_not_move():
    """Warehouses already hold these tables and ``lakecdc decode`` output is read by people's scripts:
    deriving the lists from one declaration must not reorder them."""
    tail = ["detail", "seq", "queue_pos", "event_time", "txn", "bronze_position", "ingest_time"]
    assert list(HEARTBEAT_COLUMNS) == ["source", "format", "db", "schema", "table", "op", *tail]
    assert list(DDL_COLUMNS) == ["source", "format", "db", "schema", "table", "ddl", *tail]
    assert list(CHANGES_COLUMNS) == [
        *["source", "format", "db", "schema", "table", "op", "key_columns", "before", "after", "changed"],
        *["col_types", "seq", "queue_pos", "change_index", "event_time", "txn", "detail", "invalid"],
        *["bronze_position", "ingest_time"],
    ]


def test_the_json_view_keeps_its_key_order():
    where, when = ["op", "db", "schema", "table"], ["seq", "event_time", "txn", "detail"]
    row = Change("UPDATE", db="d", table="t", key_columns=("id",), before={"id": "1"}, after={"id": "2"}, seq=(1, 2))
    assert list(row.to_json_dict()) == [*where, "key", "before", "after", "changed", "col_types", *when]
    assert row.to_json_dict()["key"] == ["id"] and row.to_json_dict()["seq"] == [1, 2]
    assert list(Change("DDL", ddl="ALTER TABLE t ADD c INT").to_json_dict()) == [*where, "ddl", *when]
    assert list(Change("HEARTBEAT", invalid={"c": "0000-00-00"}).to_json_dict()) == [*where, "invalid", *when]
    assert list(Change("HEARTBEAT").to_json_dict()) == [*where, *when]
