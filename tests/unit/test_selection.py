"""Silver keeps the chosen tables and columns (pipelines.selection): a change of a skipped table is a
``skipped`` row that names the list that skipped it and carries no value; a kept table's changes lose
the columns its table keeps out, from every image, list and map; a key column is never dropped
silently. Run here on silver's own ``mapInArrow`` function, as Spark runs it."""

from __future__ import annotations

import json

from pipelines.config import parse_config
from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, Image
from pipelines.layout import SKIPPED_COLUMNS
from pipelines.silver import decoded_rows, make_decode_batches
from pipelines.spark_schema import arrow_schema_of

BRONZE_DDL = (
    "source STRING, format STRING, key BINARY, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
)
FMT = "oms_canal"


def cfg(**doc):
    base = {"sources": [{"name": "s", "format": FMT, "path": "x"}, {"name": "t", "format": FMT, "path": "y"}]}
    return parse_config({**base, **doc}, origin="f.yaml")


def bronze(source="s", position="p#0") -> dict:
    return {"source": source, "format": FMT, "position": position, "queue_pos": "1", "ingest_time": None, "value": b""}


def change(table="orders", db="shop", op="INSERT", **images) -> Change:
    return Change(op, db=db, table=table, key_columns=("id",), seq=(1,), event_time="2024-01-01T00:00:00Z", **images)


def test_no_lists_no_selection():
    assert cfg().selection() is None


def test_tables_are_skipped_by_name_or_pattern_top_level_then_per_source():
    sel = cfg(
        include=["shop.*", "demo_tenant.shop.*"],
        exclude=["shop.tmp_*"],
        sources=[
            {"name": "s", "format": FMT, "path": "x", "exclude": ["shop.audit"]},
            {"name": "t", "format": FMT, "path": "y"},
        ],
    ).selection()
    assert sel.skip_reason("s", "shop.orders") is None
    assert sel.skip_reason("s", "demo_tenant.shop.customers") is None
    assert sel.skip_reason("s", "crm.users") == "not matched by include ['shop.*', 'demo_tenant.shop.*']"
    assert sel.skip_reason("s", "shop.tmp_1") == "excluded by exclude pattern 'shop.tmp_*'"
    assert sel.skip_reason("s", "shop.audit") == "excluded by sources[0].exclude pattern 'shop.audit'"
    assert sel.skip_reason("t", "shop.audit") is None  # another source's lists do not apply
    assert sel.skip_reason("s", "Shop.orders") is not None  # names match case-sensitively


def test_a_skipped_change_is_a_skipped_row_with_its_pointer_and_no_values():
    sel = cfg(exclude=["shop.audit"]).selection()
    changes = [
        change(after={"id": "1", "secret": "x"}),
        change("audit", after={"id": "2", "secret": "y"}),
        Change("DDL", db="shop", table="audit", ddl="ALTER TABLE audit ADD c INT", seq=(2,)),
        Change("HEARTBEAT", seq=(3,)),
    ]
    rows = list(decoded_rows(bronze(), changes, None, sel))
    assert [(r["kind"], r["change_index"]) for r in rows] == [
        ("change", 0),
        ("skipped", 1),
        ("skipped", 2),
        ("heartbeat", 3),
    ]
    skipped = rows[1]
    assert skipped["reason"] == "excluded by exclude pattern 'shop.audit'"
    assert (skipped["db"], skipped["table"], skipped["op"], skipped["bronze_position"]) == (
        "shop",
        "audit",
        "INSERT",
        "p#0",
    )
    assert "after" not in skipped and "before" not in skipped  # a skipped row keeps no value
    assert set(SKIPPED_COLUMNS) <= set(skipped) | {"ingest_time"}


def test_excluded_columns_leave_every_image_list_and_map_in_any_case():
    sel = cfg(tables={"shop.orders": {"key": ["id"], "columns_exclude": ["SSN", "note"]}}).selection()
    before = Image({"id": "1", "ssn": "111", "Note": "a", "amount": "1.00"})
    after = Image({"id": "1", "ssn": None, "Note": "b", "amount": "2.00"})
    after.invalid["ssn"] = "0000"
    ch = change(
        op="UPDATE",
        before=before,
        after=after,
        changed=("ssn", "amount", "Note"),
        col_types={"id": "bigint", "ssn": "varchar(11)", "Note": "text", "amount": "decimal(12,2)"},
    )
    assert ch.invalid == {"ssn": "0000"}
    [(kept, reason)] = sel.decide("s", [ch])
    assert reason is None
    assert kept.before == {"id": "1", "amount": "1.00"} and kept.after == {"id": "1", "amount": "2.00"}
    assert kept.changed == ("amount",) and kept.col_types == {"id": "bigint", "amount": "decimal(12,2)"}
    assert kept.invalid is None
    row = next(decoded_rows(bronze(), [ch], None, sel))
    assert "ssn" not in json.dumps(row, default=str).lower() and "note" not in json.dumps(row, default=str).lower()


def test_columns_include_keeps_only_its_columns_and_a_table_matches_as_gold_finds_it():
    sel = cfg(tables={"Shop.Orders": {"key": ["id"], "columns_include": ["id", "amount"]}}).selection()
    [(kept, _)] = sel.decide("s", [change(after={"id": "1", "amount": "2", "ssn": "x"})])  # case-insensitive entry
    assert kept.after == {"id": "1", "amount": "2"}
    [(other, _)] = sel.decide("s", [change("lines", after={"id": "1", "ssn": "x"})])
    assert other.after == {"id": "1", "ssn": "x"}  # another table keeps its columns


def _silver(config, messages: list[bytes]) -> list[dict]:
    import pyarrow as pa

    rows = [
        {**bronze(position=f"p#{i}"), "key": None, "value": raw, "queue_pos": f"{i:06d}"}
        for i, raw in enumerate(messages)
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=arrow_schema_of(BRONZE_DDL))
    ctx = config.decode_context(FMT)
    decode = make_decode_batches({FMT: ctx}, ctx, config.selection())
    return [r for out in decode([batch]) for r in out.to_pylist()]


def test_a_message_whose_key_a_table_keeps_out_is_quarantined_naming_the_field():
    """A key the configuration does not know (the message names it) cannot be kept out either: that
    message is quarantined, naming the table and the field, not applied without its key."""
    config = cfg(tables={"shop.orders": {"columns_exclude": ["id"]}})
    raw = get_decoder(FMT).encode(change(after={"id": "1", "amount": "2"}, col_types={"id": "bigint"}), DecodeContext())
    [row] = _silver(config, [raw])
    assert row["kind"] == "quarantine"
    assert (
        "'id' is in the key of table shop.orders" in row["reason"]
        and "tables.shop.orders.columns_exclude" in row["reason"]
    )


def test_through_silver_s_arrow_function_every_message_is_accounted_for():
    config = cfg(exclude=["shop.audit"], tables={"shop.orders": {"key": ["id"], "columns_exclude": ["ssn"]}})
    encode = get_decoder(FMT).encode
    types = {"id": "bigint", "ssn": "varchar(11)"}
    messages = [
        encode(change(after={"id": "1", "ssn": "111"}, col_types=types), DecodeContext()),
        encode(change("audit", after={"id": "2", "ssn": "222"}, col_types=types), DecodeContext()),
        b"not json",
    ]
    rows = _silver(config, messages)
    assert [(r["kind"], r["bronze_position"]) for r in rows] == [
        ("change", "p#0"),
        ("skipped", "p#1"),
        ("quarantine", "p#2"),
    ]
    assert dict(rows[0]["after"]) == {"id": "1"} and "ssn" not in dict(rows[0]["col_types"])
    assert rows[1]["after"] is None and rows[1]["reason"] == "excluded by exclude pattern 'shop.audit'"
