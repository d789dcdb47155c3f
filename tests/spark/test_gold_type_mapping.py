"""``type_mapping`` through the real gold stage: ``to-string`` keeps each value's canonical text (against
the reference model), ``bigint-unsigned-to-bigint`` types a BIGINT and quarantines what no longer fits, a
table's own list wins over the top level's."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pipelines.testing.model import MirrorModel
from tests.spark.test_gold_semantics import Gold, change

WIDE = {"id": "bigint", "d": "decimal(30,20)", "u": "bigint unsigned", "t": "datetime(6)", "b": "varchar(16)"}
ROW1 = {
    "id": "1",
    "d": "9.99999999999999909326",
    "u": "18446744073709551615",
    "t": "2024-02-29T23:59:59.123456",
    "b": "x",
}
ROW1_NEW = {**ROW1, "d": "1.10000000000000000000", "b": None}
ROW2 = {"id": "2", "d": "-0.00000000000000000001", "u": "0", "t": "1970-01-01T00:00:00", "b": "é"}

CHANGES = [
    change("INSERT", 1, after=ROW1, types=WIDE),
    change("INSERT", 2, after=ROW2, types=WIDE),
    change("UPDATE", 3, before=ROW1, after=ROW1_NEW, types=WIDE),
    change("DELETE", 4, before=ROW2, types=WIDE),
    change("INSERT", 5, after={**ROW2, "id": "3"}, types=WIDE),
]


def _mapped(gold: Gold, **top) -> Gold:
    gold.cfg = dataclasses.replace(gold.cfg, **top)
    return gold


def test_to_string_keeps_every_value_as_its_canonical_text(spark, tmp_path):
    gold = _mapped(Gold(spark, tmp_path), type_mapping=("to-string",))
    gold.apply(CHANGES[:2])
    gold.apply(CHANGES[2:])
    types = {f.name: f.dataType.simpleString() for f in gold.mirror().schema.fields if not f.name.startswith("_")}
    assert types == {c: "string" for c in WIDE}
    got = sorted(({c: r[c] for c in WIDE} for r in gold.mirror().collect()), key=lambda r: r["id"])
    assert got == MirrorModel().add_all(CHANGES).rows("shop.t")  # the text each change states, digit for digit
    assert got[0]["d"] == "1.10000000000000000000" and got[0]["u"] == "18446744073709551615"


def test_bigint_unsigned_to_bigint_quarantines_what_no_longer_fits(spark, tmp_path):
    gold = _mapped(Gold(spark, tmp_path), type_mapping=("bigint-unsigned-to-bigint",))
    stats = gold.apply(CHANGES[:2])
    types = {f.name: f.dataType.simpleString() for f in gold.mirror().schema.fields}
    assert (types["u"], types["d"], types["t"]) == ("bigint", "decimal(30,20)", "timestamp_ntz")
    assert stats.quarantined == 1 and stats.applied == 1
    [q] = gold.quarantine()
    assert "18446744073709551615" in q["reason"] and "BIGINT" in q["reason"].upper()
    assert [(r["id"], r["u"]) for r in gold.mirror().collect()] == [(2, 0)]


def test_a_tables_own_list_wins_over_the_top_level(spark, tmp_path):
    gold = _mapped(Gold(spark, tmp_path, type_mapping=[]), type_mapping=("to-string",))
    gold.apply(CHANGES[:2])
    types = {f.name: f.dataType.simpleString() for f in gold.mirror().schema.fields}
    assert (types["u"], types["d"]) == ("decimal(20,0)", "decimal(30,20)")
    assert {r["id"]: str(r["u"]) for r in gold.mirror().collect()} == {1: "18446744073709551615", 2: "0"}


def test_debezium_postgres_arrays_and_unavailable_values_through_gold(spark, tmp_path):
    """Issue 40, tests/fixtures/connectors: a PostgreSQL array is an ARRAY column of its element's type,
    every element exact, and an UPDATE whose TOASTed columns are the placeholder keeps what they held."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "connectors"

    def messages(name: str) -> list[bytes]:
        text = fixtures.joinpath(name).read_bytes().replace(b'"schema":"public",', b"")
        return [re.sub(rb'"table":"\w+"', b'"table":"t"', line) for line in text.splitlines() if line.strip()]

    arrays = Gold(spark, tmp_path / "arrays", fmt="debezium", key=["id"])
    assert arrays.apply_messages(messages("debezium_pg_arrays.json")).quarantined == 0
    types = {f.name: f.dataType.simpleString() for f in arrays.mirror().schema.fields if not f.name.startswith("_")}
    assert (types["n5"], types["n72"], types["d"], types["r"], types["j"]) == (
        "array<decimal(5,0)>",
        "array<decimal(7,2)>",
        "array<date>",
        "array<double>",
        "array<variant>",
    )
    [row] = arrays.rows()
    assert row["n72"] == '["1.50","-0.01"]' and row["r"] == '["1.45E-10","3.5"]'
    [message] = messages("debezium_pg_arrays.json")
    too_wide = message.replace(b'"id":1,"n5":["AQ==",', b'"id":2,"n5":["AeJA",')  # 123456 in numeric(5)[]
    assert too_wide != message and arrays.apply_messages([too_wide]).quarantined == 1
    assert "123456" in arrays.quarantine()[0]["reason"] and len(arrays.rows()) == 1
    assert row["d"] == '["1970-01-01","2022-01-08",null]' and row["t"] == '["2023-11-14T22:13:20.123456"]'

    toast = Gold(spark, tmp_path / "toast", fmt="debezium", key=["id"])
    insert, update = messages("debezium_pg_toast.jsonl")
    toast.apply_messages([insert])
    toast.apply_messages([update])
    [row] = toast.rows()
    assert row["name"] == "Anne" and row["biography"].startswith("AAAA") and row["tags"] == '["poet","essayist"]'
    assert row["scores"] == '["7","9"]' and row["photo"] == "iVBORw0K"
