"""``gold.table_features: compatible`` (issue 33): a mirror a reader without deletion vectors, column mapping,
type widening or VARIANT opens. delta-rs (the ``deltalake`` package, no Spark) reads the same rows Spark does,
after MERGEs that update and delete, a document kept as its exact JSON text, a widened column rewritten."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pipelines.gold.identity import TABLE_FEATURES_PROPERTY
from pipelines.mirror_columns import table_properties
from tests.spark.test_gold_choices import DOC, _document, _mongo
from tests.spark.test_gold_semantics import Gold, _row, change

deltalake = pytest.importorskip("deltalake")

FULL_ONLY = {"deletionVectors", "columnMapping", "typeWidening", "typeWidening-preview", "variantType"}


def _compatible(gold: Gold) -> Gold:
    gold.cfg = dataclasses.replace(gold.cfg, gold_table_features="compatible")
    return gold


def _features(spark, ref) -> set[str]:
    return set(spark.sql(f"DESCRIBE DETAIL {ref.sql}").first()["tableFeatures"])


def _spark_rows(spark, ref, columns: list[str]) -> list[tuple]:
    return sorted(tuple(r) for r in ref.read(spark).select(*columns).collect())


def _delta_rs_rows(ref, columns: list[str]) -> list[tuple]:
    table = deltalake.DeltaTable(ref.path).to_pyarrow_table(columns=columns)
    return sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))


def test_delta_rs_reads_a_compatible_mirror_of_documents_as_spark_does(spark, tmp_path):
    gold = _compatible(Gold(spark, tmp_path, fmt="drs_mongo"))
    first = _document(1, '"name": "a", "doc": ' + DOC + ', "tags": ["x", 2.50]')
    gold.apply_messages([_mongo(1, first), _mongo(2, _document(2, '"name": "b", "doc": {"k": 1}'))])
    second = _document(1, '"name": "a2", "doc": {"z": 10223372036854775806}')
    replace = _mongo(3, second, op="UPDATE", record="replace", where=_document(1))
    gold.apply_messages([replace, _mongo(4, _document(2), op="DELETE", record="doc")])
    ref = gold.wh.mirror("shop.t")
    assert _features(spark, ref) & FULL_ONLY == set()
    assert table_properties(spark, ref)[TABLE_FEATURES_PROPERTY] == "compatible"
    types = {f.name: f.dataType.simpleString() for f in ref.read(spark).schema.fields}
    assert (types["doc"], types["tags"]) == ("string", "string"), "documents as text, not VARIANT"
    columns = [c for c in types if not c.startswith("_")] + ["_seq"]
    rows = _spark_rows(spark, ref, columns)
    assert len(rows) == 1 and _delta_rs_rows(ref, columns) == rows
    [exported] = gold.rows()
    assert json.loads(exported["doc"]) == {"z": 10223372036854775806}, "every digit of the document's number"
    assert gold.quarantine() == []


def test_a_compatible_mirror_widens_by_rewriting_and_delta_rs_reads_it(spark, tmp_path):
    gold = _compatible(Gold(spark, tmp_path))
    gold.apply([change("INSERT", n, after=_row(n, a=str(n), d="12345678.91")) for n in (1, 2)])
    wide = {"id": "bigint", "a": "bigint", "d": "decimal(20,4)"}
    gold.apply([change("INSERT", 3, after=_row(3, a="5000000000", d="1234567890123456.1234"), types=wide)])
    gold.apply([change("DELETE", 4, before=_row(1, a="1", d="12345678.91"), types=wide)])
    ref = gold.wh.mirror("shop.t")
    types = {f.name: f.dataType.simpleString() for f in ref.read(spark).schema.fields}
    assert (types["a"], types["d"]) == ("bigint", "decimal(20,4)")
    assert _features(spark, ref) & FULL_ONLY == set()
    assert gold.rows() == [
        {"id": 2, "a": 2, "d": "12345678.9100"},
        {"id": 3, "a": 5000000000, "d": "1234567890123456.1234"},
    ]
    columns = ["id", "a", "d", "_seq"]
    assert _delta_rs_rows(ref, columns) == _spark_rows(spark, ref, columns)


def test_the_default_mirror_keeps_every_feature(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    gold.apply([change("INSERT", 1, after=_row(1, a="1"))])
    ref = gold.wh.mirror("shop.t")
    assert {"deletionVectors", "columnMapping"} <= _features(spark, ref)
    assert table_properties(spark, ref)[TABLE_FEATURES_PROPERTY] == "full"
