"""What a mirror records about itself: source types in one table property (never in column comments,
which are the analysts'), a table comment naming its source, and in a catalog an informational
primary key where the catalog keeps one. Changes go through the real decoder and
:func:`~pipelines.gold.stage.apply_gold_batch` (the ``Gold`` helper of the gold semantics tests)."""

from __future__ import annotations

import json
import logging
import os

import pytest

from pipelines import delta_writes
from pipelines.export import export_table
from pipelines.gold.describe import mirror_comment
from pipelines.layout import LINEAGE_DDL
from pipelines.mirror_columns import (
    SOURCE_TYPES_PROPERTY,
    column_ddl,
    properties_sql,
    source_types,
    source_types_json,
    table_comment,
    table_properties,
)
from pipelines.mirror_key import key_of
from pipelines.silver import ensure_silver
from pipelines.sql import lit, q
from pipelines.warehouse import SourceTable, TableRef, Warehouse
from tests.spark.test_gold_semantics import Gold, change

TYPES = {"id": "bigint", "u": "bigint unsigned", "d": "decimal(10,2)", "a": "int"}
COMMENT = "Mirror of source table shop.t (source s, format oms_canal), key (id); maintained by lakecdc, do not write"


def _row(n: int, **values: str) -> dict:
    return {"id": str(n), **values}


def _recorded(spark, ref: TableRef) -> dict:
    return json.loads(table_properties(spark, ref)[SOURCE_TYPES_PROPERTY])


def _comments(spark, ref: TableRef) -> dict:
    return {f.name: f.metadata.get("comment") for f in ref.read(spark).schema.fields if f.metadata.get("comment")}


def test_the_property_round_trips_any_column_name_and_type(spark, tmp_path):
    """JSON in a SQL literal: quotes, backslashes, backticks, dots, spaces and unicode come back exactly."""
    names = ["id", "a b", "x.y", "we`ird", "$% ^,& *(", "ünï 名", "q'uote", 'dq"x', "back\\slash", "\\'"]
    types = {n: f"enum('{n}','\\\\')" for n in names} | {"id": "bigint", "a b": None}
    ref = TableRef(path=str(tmp_path / "t"))
    cols = ", ".join(column_ddl(n, t) for n, t in types.items())
    spark.sql(f"CREATE TABLE {ref.sql} ({cols}) USING DELTA TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    spark.sql(
        f"ALTER TABLE {ref.sql} SET TBLPROPERTIES ({properties_sql({SOURCE_TYPES_PROPERTY: source_types_json(types)})})"
    )
    props = table_properties(spark, ref)
    assert props[SOURCE_TYPES_PROPERTY] == source_types_json(types)
    assert source_types(ref.read(spark), props) == types


def test_a_recorded_type_the_column_does_not_have_yields_to_its_delta_type():
    """A schema change whose property committed but whose ALTER did not (or a column an analyst altered
    or added): values must still convert to what the column holds."""
    from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType, TimestampNTZType

    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("t", TimestampNTZType()),
            StructField("s", StringType()),
            StructField("n", DecimalType(20, 0)),
            StructField("v", StringType()),
            StructField("_seq", StringType()),
        ]
    )
    recorded = {"id": "int", "t": "date", "s": "bigint", "v": "varchar(8)", "gone": "int"}
    props = {SOURCE_TYPES_PROPERTY: source_types_json(recorded)}
    assert source_types(schema, props) == {
        "id": "bigint",
        "t": "datetime",
        "s": "text",
        "n": "decimal(20,0)",
        "v": "varchar(8)",
    }


def test_the_table_comment_names_every_source_and_format():
    assert mirror_comment("db.s.t", ["b", "a", "b"], ["maxwell"], ["k 1", "k2"]) == (
        "Mirror of source table db.s.t (sources a, b, format maxwell), key (k 1, k2); maintained by lakecdc, do not write"
    )
    assert (
        mirror_comment("db.t", [], [], [])
        == "Mirror of source table db.t, keyless; maintained by lakecdc, do not write"
    )


def test_gold_keeps_source_types_in_a_property_for_the_mirror_and_its_history(spark, tmp_path):
    gold = Gold(spark, tmp_path, history=True)
    gold.apply([change("INSERT", 1, after=_row(1, u="5", d="1.50", a="7"), types=TYPES)])
    mirror, history = gold.wh.mirror("shop.t"), gold.wh.history("shop.t")
    assert _recorded(spark, mirror) == TYPES
    assert _recorded(spark, history) == TYPES
    assert _comments(spark, mirror) == {} and _comments(spark, history) == {}, "column comments are the analysts'"
    assert table_comment(spark, mirror) == COMMENT
    assert all(f.nullable for f in mirror.read(spark).schema.fields), "a path mirror's key stays nullable"

    # a new column and a widening: the property follows, in the mirror and its history
    wide = {**TYPES, "a": "bigint", "c": "varchar(8)"}
    gold.apply([change("INSERT", 2, after=_row(2, u="6", d="2.00", a="5000000000", c="x"), types=wide)])
    assert _recorded(spark, mirror) == wide
    assert _recorded(spark, history) == wide
    assert export_table(spark, mirror) == [
        {"id": 1, "u": 5, "d": "1.50", "a": 7, "c": None},
        {"id": 2, "u": 6, "d": "2.00", "a": 5000000000, "c": "x"},
    ]


def test_an_analysts_column_comments_change_nothing(spark, tmp_path):
    """Before the property, gold read ``source type: int`` here and quarantined 12.34 as no integer."""
    gold = Gold(spark, tmp_path, schema_changes="evolve")
    types = {**TYPES, "e": "datetime"}
    gold.apply([change("INSERT", 1, after=_row(1, u="5", d="1.50", a="7", e="2023-11-14T22:13:20"), types=types)])
    mirror = gold.wh.mirror("shop.t")
    notes = {"d": "source type: int", "u": "Customer number", "e": "when it happened", "id": "source type: text"}
    for column, note in notes.items():
        spark.sql(f"ALTER TABLE {mirror.sql} ALTER COLUMN {q(column)} COMMENT {lit(note)}")
    spark.sql(f"COMMENT ON TABLE {mirror.sql} IS 'orders, as the shop sees them'")

    # e turns into text (evolve), the rest types as before
    gold.apply(
        [
            change(
                "INSERT",
                2,
                after=_row(2, u="18446744073709551615", d="12.34", a="8", e="42"),
                types=TYPES | {"e": "int"},
            )
        ]
    )
    assert gold.quarantine() == []
    assert export_table(spark, mirror) == [
        {"id": 1, "u": 5, "d": "1.50", "a": 7, "e": "2023-11-14T22:13:20"},
        {"id": 2, "u": "18446744073709551615", "d": "12.34", "a": 8, "e": "42"},
    ]
    assert _recorded(spark, mirror) == {**TYPES, "e": "text"}
    assert _comments(spark, mirror) == notes, "gold leaves column comments alone, also on a rewritten column"
    assert table_comment(spark, mirror) == "orders, as the shop sees them"


def _old_style_mirror(spark, wh: Warehouse) -> TableRef:
    """A mirror as the version before the property created it: source types in column comments only."""
    mirror, tombstones = wh.mirror("shop.t"), wh.tombstones("shop.t")

    def cols(names):
        return ", ".join(f"{column_ddl(c, TYPES[c])} COMMENT {lit('source type: ' + TYPES[c])}" for c in names)

    props = {
        "lakecdc.source_table": "shop.t",
        "lakecdc.mirror_name": "shop.t",
        "lakecdc.source_identity": SourceTable.of("shop", None, "t").key,
        "lakecdc.key": "id",
        "delta.enableChangeDataFeed": "true",
        "delta.enableTypeWidening": "true",
        "lakecdc.column_since": "{}",
        "delta.columnMapping.mode": "name",
    }
    lineage = ", ".join(f"{n} {t}" for n, t in LINEAGE_DDL)
    spark.sql(
        f"CREATE TABLE {mirror.sql} ({cols(TYPES)}, {lineage}) USING DELTA TBLPROPERTIES ({properties_sql(props)})"
    )
    spark.sql(
        f"CREATE TABLE {tombstones.sql} ({cols(['id'])}, _seq STRING, _queue_pos STRING, _event_time TIMESTAMP) "
        "USING DELTA TBLPROPERTIES ('delta.enableTypeWidening' = 'true', 'delta.columnMapping.mode' = 'name')"
    )
    return mirror


def test_a_mirror_an_earlier_version_wrote_is_read_through_its_comments_and_gets_the_property(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    mirror = _old_style_mirror(spark, gold.wh)
    assert SOURCE_TYPES_PROPERTY not in table_properties(spark, mirror) and table_comment(spark, mirror) is None
    assert source_types(mirror.read(spark), table_properties(spark, mirror)) == TYPES, "read through the comments"

    gold.apply([change("INSERT", 1, after=_row(1, u="5", d="1.50", a="7"), types=TYPES)])
    assert export_table(spark, mirror) == [{"id": 1, "u": 5, "d": "1.50", "a": 7}], "u: bigint unsigned, an integer"
    assert _recorded(spark, mirror) == TYPES
    assert table_comment(spark, mirror) == COMMENT


def test_a_catalog_mirror_declares_its_key_where_the_catalog_can(spark, tmp_path, caplog):
    """Spark's own Hive-less catalog stands in for Unity Catalog: open-source Delta keeps no key
    constraints, so the key columns are NOT NULL, the key is recorded in ``lakecdc.key``, and the
    batch goes on. The evolve rewrite of a column (a catalog table's overwrite) keeps all of it."""
    schema = f"lakecdc_meta_{os.getpid()}"
    spark.sql(f"CREATE SCHEMA spark_catalog.{schema} LOCATION '{tmp_path / 'tables'}'")
    try:
        gold = Gold(spark, tmp_path, schema_changes="evolve")
        gold.wh = Warehouse(catalog="spark_catalog", schema=schema, checkpoints=str(tmp_path / "checkpoints"))
        ensure_silver(spark, gold.wh)
        caplog.set_level(logging.INFO, logger="pipelines.gold.describe")
        types = {**TYPES, "e": "datetime"}
        gold.apply([change("INSERT", 1, after=_row(1, u="5", d="1.50", a="7", e="2023-11-14T22:13:20"), types=types)])
        mirror = gold.wh.mirror("shop.t")
        assert mirror.name is not None and mirror.name.startswith(f"spark_catalog.{schema}.")
        [info] = [r.getMessage() for r in caplog.records if r.name == "pipelines.gold.describe"]
        assert "UNSUPPORTED_FEATURE.TABLE_OPERATION" in info and "recorded in the table property lakecdc.key" in info
        fields = {f.name: f.nullable for f in mirror.read(spark).schema.fields}
        assert not fields.pop("id") and all(fields.values()), "only the key column is NOT NULL"

        # e becomes text: Delta's overwrite makes the key nullable, and open-source Spark cannot undo that
        caplog.clear()
        gold.apply([change("INSERT", 2, after=_row(2, u="6", d="2.00", a="8", e="42"), types=TYPES | {"e": "int"})])
        [info] = [r.getMessage() for r in caplog.records if r.name == "pipelines.gold.describe"]
        assert "column 'id' stays nullable after its rewrite" in info
        props = table_properties(spark, mirror)
        assert json.loads(props[SOURCE_TYPES_PROPERTY]) == {**TYPES, "e": "text"} and key_of(props) == ("id",)
        assert table_comment(spark, mirror) == COMMENT
        assert export_table(spark, mirror) == [
            {"id": 1, "u": 5, "d": "1.50", "a": 7, "e": "2023-11-14T22:13:20"},
            {"id": 2, "u": 6, "d": "2.00", "a": 8, "e": "42"},
        ]
    finally:
        spark.sql(f"DROP SCHEMA IF EXISTS spark_catalog.{schema} CASCADE")


@pytest.mark.parametrize(
    "large, most_touched",
    [(True, False), (False, False), (True, True)],
    ids=["deletion vectors", "small: rewritten", "a large share touched: rewritten"],
)
def test_an_update_marks_the_row_it_replaces_in_a_large_mirror_and_rewrites_a_small_one(
    spark, tmp_path, monkeypatch, large, most_touched
):
    """Mirrors use deletion vectors: a MERGE that changes one row of a file copies none of
    the file's other rows (without them it rewrites the whole file). A mirror under
    ``REWRITE_BELOW_BYTES``, or a MERGE that updates or deletes a row per ``REWRITE_FROM_BYTES_PER_TOUCHED_ROW``
    of the table, is rewritten instead (the cheaper write there); the rows are the same."""
    if large:  # every mirror counts as large
        monkeypatch.setattr(delta_writes, "REWRITE_BELOW_BYTES", 0)
    if most_touched:  # one row touched counts as a large share of the table
        monkeypatch.setattr(delta_writes, "REWRITE_FROM_BYTES_PER_TOUCHED_ROW", 10**9)
    gold = Gold(spark, tmp_path)
    gold.apply([change("INSERT", n, after=_row(n, u="1", d="1.00", a="1"), types=TYPES) for n in range(1, 6)])
    old, new = _row(3, u="1", d="1.00", a="1"), _row(3, u="2", d="2.00", a="2")
    gold.apply([change("UPDATE", 6, before=old, after=new, types=TYPES)])
    gold.apply([change("DELETE", 7, before=_row(4, u="1", d="1.00", a="1"), types=TYPES)])
    mirror = gold.wh.mirror("shop.t")
    assert table_properties(spark, mirror).get("delta.enableDeletionVectors") == "true"
    merges = [
        r["operationMetrics"]
        for r in spark.sql(f"DESCRIBE HISTORY {mirror.sql}").where("operation = 'MERGE'").collect()
    ]
    changed = [m for m in merges if int(m.get("numTargetRowsUpdated", 0)) + int(m.get("numTargetRowsDeleted", 0))]
    assert len(changed) == 2, changed
    if large and not most_touched:
        assert all(int(m["numTargetRowsCopied"]) == 0 for m in changed), changed
        assert all(int(m["numTargetDeletionVectorsAdded"]) >= 1 for m in changed), changed
    else:
        assert all(int(m["numTargetRowsCopied"]) >= 1 for m in changed), changed
        assert all(int(m["numTargetDeletionVectorsAdded"]) == 0 for m in changed), changed
    assert sorted(r["id"] for r in export_table(spark, mirror)) == [1, 2, 3, 5]
    assert spark.conf.get("spark.databricks.delta.merge.deletionVectors.persistent", None) != "false"
