"""Format ``debezium``, PostgreSQL connector values other projects' tests write (issue 40).

Fixtures (tests/fixtures/connectors/debezium_pg_*) are shaped as Debezium 2.7's PostgreSQL connector
writes through the JSON converter (schemas.enable): the schema of PostgresValueConverter (arrays as
``"type": "array"`` with ``items``), ``source.sequence`` as SourceInfo.sequence() writes it, and the
placeholder forms of UnchangedToastedPlaceholder.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from pipelines.formats import DecodeContext, get_decoder
from pipelines.formats._debezium_values import UNAVAILABLE_PLACEHOLDER, unavailable_forms
from pipelines.formats.base import TableSpec
from pipelines.formats.debezium import ordering
from pipelines.silver import decode_message
from pipelines.testing.model import MirrorModel
from pipelines.values import family, spark_type

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "connectors"
DEC = get_decoder("debezium")
KEYS = {f"shop.{t}": TableSpec(key=("id",)) for t in ("authors", "stock", "arrays")}
CTX = DecodeContext(tables=KEYS)


def decode(name: str, ctx: DecodeContext = CTX):
    lines = FIXTURES.joinpath(name).read_bytes().splitlines()
    return [ch for raw in lines if raw.strip() for ch in decode_message(DEC, raw, ctx)]


def mirror(changes) -> list[dict]:
    model = MirrorModel().add_all(changes)
    [table] = model.tables() or [None]
    return model.rows(table) if table else []


# ---------------------------------------------------------------- unavailable.value.placeholder


def test_unchanged_toasted_columns_keep_the_stored_value():
    """An UPDATE whose text, bytea, text[] and int4[] columns are the placeholder carries only the others:
    a partial image, so the mirror keeps what the INSERT wrote there."""
    insert, update = decode("debezium_pg_toast.jsonl")
    assert update.op == "UPDATE" and update.after == {"id": "1001", "name": "Anne"}
    assert update.changed == ("id", "name")
    assert UNAVAILABLE_PLACEHOLDER not in json.dumps(update.to_json_dict())
    [row] = mirror([insert, update])
    assert row == {**insert.after, "name": "Anne"}
    assert row["biography"].startswith("AAAA") and row["photo"] == base64.b64encode(b"\x89PNG\r\n").decode()


def test_every_placeholder_form_of_the_connector():
    """UnchangedToastedPlaceholder: the text, its Base64 bytes (bytea), [text], [bytes], the bytes as integers
    (int4[], int8[], date[]), [UUID.nameUUIDFromBytes] (uuid[]) and hstore's {text: text}."""
    forms = unavailable_forms()
    assert forms.text == UNAVAILABLE_PLACEHOLDER
    assert base64.b64decode(forms.base64) == UNAVAILABLE_PLACEHOLDER.encode()
    assert forms.lists[2][:3] == (95, 95, 100) and len(forms.lists[2]) == len(UNAVAILABLE_PLACEHOLDER)
    # Java: UUID.nameUUIDFromBytes("__debezium_unavailable_value".getBytes()), a version-3 UUID
    assert forms.lists[3] == ("b68a35a7-17ad-35b3-af2a-ae46edb4545a",)
    assert unavailable_forms("hex:00ff").base64 == base64.b64encode(b"\x00\xff").decode()


def test_a_configured_placeholder_and_an_insert_that_holds_it():
    raw = FIXTURES.joinpath("debezium_pg_toast.jsonl").read_bytes().splitlines()[1]
    other = DecodeContext(tables=KEYS, options={"unavailable.value.placeholder": "??"})
    [update] = DEC.decode(raw, other)  # another placeholder: the default text is a value
    assert update.changed is None and update.after["biography"] == UNAVAILABLE_PLACEHOLDER
    as_insert = raw.replace(b'"op":"u"', b'"op":"c"')
    [insert] = DEC.decode(as_insert, CTX)  # an INSERT carries every value: nothing is left out
    assert insert.changed is None and insert.after["biography"] == UNAVAILABLE_PLACEHOLDER


# ---------------------------------------------------------------- source.sequence with a null


def test_a_null_last_commit_lsn_is_not_zero():
    """[null, "24023500"] after ["24023119", "24023128"]: the DELETE comes after the UPDATE it follows."""
    insert, update, delete = decode("debezium_pg_sequence_null.jsonl")
    assert delete.seq == (24023500, 24023500) and update.seq < delete.seq
    assert mirror([insert, delete, update]) == []  # delivered out of order: the DELETE still wins
    assert mirror([insert, update, delete]) == []


@pytest.mark.parametrize(
    ("sequence", "lsn", "seq"),
    [
        ('[null,"300"]', 300, (300, 300)),
        ('["100",null]', 250, (100, 250)),
        ('["100",null]', None, (100,)),
        ("[null,null]", None, ()),
        ("[null,null]", 70, (70, 70)),
    ],
)
def test_sequence_nulls(sequence, lsn, seq):
    source = {"connector": "postgresql", "sequence": sequence, "lsn": lsn}
    assert ordering(source) == seq


# ---------------------------------------------------------------- typed arrays


def test_arrays_decode_element_by_element_by_their_logical_type():
    [change] = decode("debezium_pg_arrays.json")
    after, types = change.after, change.col_types
    assert json.loads(after["n5"]) == ["1", "-12345", None]  # numeric(5)[]: Decimal, Base64 unscaled bytes
    assert json.loads(after["n72"]) == ["1.50", "-0.01"]  # numeric(7,2)[]: the scale's digits kept
    assert json.loads(after["n"]) == ["123.45", "100000000000000000000"]  # numeric[]: VariableScaleDecimal
    assert json.loads(after["d"]) == ["1970-01-01", "2022-01-08", None]  # date[]: days since the epoch
    assert json.loads(after["r"]) == ["1.45E-10", "3.5"]  # real[]: the number's exact text
    assert json.loads(after["t"]) == ["2023-11-14T22:13:20.123456"]  # timestamp[]: MicroTimestamp
    assert json.loads(after["s"]) == ["a,b", "{x}", None]
    assert json.loads(after["j"]) == ['{"k":[1,2]}']  # json[]: each element a document
    assert types["n5"] == "array<decimal(5,0)>" and types["d"] == "array<date>" and types["r"] == "array<float>"
    assert {c: spark_type(types[c]) for c in ("n5", "n72", "d", "r", "t", "j")} == {
        "n5": "ARRAY<DECIMAL(5,0)>",
        "n72": "ARRAY<DECIMAL(7,2)>",
        "d": "ARRAY<DATE>",
        "r": "ARRAY<DOUBLE>",
        "t": "ARRAY<TIMESTAMP_NTZ>",
        "j": "ARRAY<VARIANT>",
    }


def test_array_type_names():
    assert family("array<decimal(5,0)>") == "array" and family("int4[]") == "string"  # X[] text stays text
    assert spark_type("array<array<int>>") == "ARRAY<ARRAY<INT>>"


def test_a_configured_array_type_without_a_schema():
    raw = json.loads(FIXTURES.joinpath("debezium_pg_arrays.json").read_text())["payload"]
    raw["after"] = {"id": 1, "d": [19000], "n72": ["1.5"]}
    spec = TableSpec(key=("id",), columns={"id": "int", "d": "array<int>", "n72": "numeric(7,2)[]"})
    [change] = DEC.decode(json.dumps(raw).encode(), DecodeContext(tables={"shop.arrays": spec}))
    assert change.after["d"] == '["19000"]' and change.col_types["d"] == "array<int>"
    assert change.after["n72"] == '["1.5"]'  # text of an X[] column, as before: its JSON text


def test_nested_arrays_cost_sql_linear_in_their_depth_and_deep_ones_stay_documents():
    from pipelines.formats._debezium_values import MAX_ARRAY_DEPTH, declared_of, resolve_type
    from pipelines.sql import convert_expr

    sizes = [len(convert_expr("{v}", "array<" * n + "int" + ">" * n)) for n in (1, 2, 3, 4, 5, 6)]
    assert all(b - a == sizes[1] - sizes[0] for a, b in zip(sizes, sizes[1:]))  # each level adds the same
    field: dict = {"type": "int32"}
    for _ in range(MAX_ARRAY_DEPTH):
        field = {"type": "array", "items": field}
    assert resolve_type("c", declared_of(field), {})[0] == "array<" * MAX_ARRAY_DEPTH + "int" + ">" * MAX_ARRAY_DEPTH
    assert resolve_type("c", declared_of({"type": "array", "items": field}), {}) == ("json", "source")


def test_placeholder_in_hex_mode_and_in_unwrapped_rows():
    raw = json.loads(FIXTURES.joinpath("debezium_pg_toast.jsonl").read_text().splitlines()[1])
    raw["payload"]["after"]["photo"] = UNAVAILABLE_PLACEHOLDER  # binary.handling.mode=hex writes the text
    hex_ctx = DecodeContext(tables=KEYS, options={"binary.handling.mode": "hex"})
    [update] = DEC.decode(json.dumps(raw).encode(), hex_ctx)
    assert update.changed == ("id", "name")
    row = {**raw["payload"]["after"], "__op": "u", "__table": "authors", "__db": "shop"}  # ExtractNewRecordState
    [update] = DEC.decode(json.dumps(row).encode(), CTX)
    assert update.op == "UPDATE" and update.after == {"id": "1001", "name": "Anne"} and update.changed == ("id", "name")
