"""Issue 35: no message can stop gold or lose a valid value (the classes silver and the small helpers
settle; gold's side is in tests/spark/test_gold_poison.py).

Each test failed on main 322abe2, before the fix it pins.
"""

from __future__ import annotations

import json

import pytest

from pipelines.export import _sort_value
from pipelines.formats import Reject
from pipelines.mirror_key import key_of, key_property
from tests.unit._carriers import CANAL_FORMATS, canal, context, decoded, mongo, silver

# ---------------------------------------------------------------- names Delta cannot hold apart


@pytest.mark.parametrize("fmt", CANAL_FORMATS)
def test_two_spellings_of_one_column_in_a_message_are_refused_naming_both(fmt):
    raw = canal({"id": "int", "Name": "varchar(9)", "name": "varchar(9)"}, {"id": "1", "Name": "a", "name": "b"})
    result = decoded(fmt, raw, context())
    assert isinstance(result, Reject), result
    assert "'Name'" in str(result) and "'name'" in str(result) and "case" in str(result)
    [row] = silver([(fmt, raw)], context())
    assert row["kind"] == "quarantine" and "'Name'" in row["reason"]


@pytest.mark.parametrize("pk", [["id", "id"], ["id", "Id"]])
def test_a_key_naming_one_column_twice_is_refused(pk):
    raw = canal({"id": "int", "v": "int"}, {"id": "1", "v": "2"}, pkNames=pk)
    result = decoded("canal", raw, context())
    assert isinstance(result, Reject) and "the key names one column twice" in str(result), result


def test_one_spelling_per_column_still_decodes():
    raw = canal({"ID": "int", "Name": "varchar(9)"}, {"ID": "1", "Name": "a"}, pkNames=["ID"])
    [change] = decoded("canal", raw, context())
    assert change.after == {"ID": "1", "Name": "a"} and change.key_columns == ("ID",)


# ---------------------------------------------------------------- a configured type decides


UNSIGNED = "10223372036854775806"


def _oms(fmt: str, wire_type: str, value: str) -> bytes:
    if fmt == "oms_dataworks":
        schema = {
            "source": {"dbType": "ob_mysql", "dbName": "d", "table": "t"},
            "pk": ["id"],
            "column": [{"name": "id", "type": "BIGINT"}, {"name": "v", "type": wire_type}],
        }
        payload = {"op": "INSERT", "scn": "7", "before": None, "after": {"data": {"id": "1", "v": value}}}
        return json.dumps({"version": "2.0", "schema": schema, "payload": payload}).encode()
    meta = {"dbType": "OB_MYSQL", "storeDataSequence": 160000000000001, "table_name": "t", "db": "d"}
    post = {"id": "1", "v": value, "__light_type": {"id": {"schemaType": "BIGINT"}, "v": {"schemaType": wire_type}}}
    return json.dumps({"allMetaData": meta, "recordType": "INSERT", "prevStruct": None, "postStruct": post}).encode()


@pytest.mark.parametrize("fmt", ["oms_dataworks", "oms_default_extend"])
def test_a_configured_bigint_unsigned_keeps_a_value_the_wire_calls_bigint(fmt):
    """OMS writes an unsigned BIGINT as BIGINT: the configured type decides, the range check too (ee9f0fd)."""
    ctx = context({"id": "bigint", "v": "bigint unsigned"})
    [change] = decoded(fmt, _oms(fmt, "BIGINT", UNSIGNED), ctx)
    assert change.after["v"] == UNSIGNED and change.col_types["v"] == "bigint unsigned"
    [row] = silver([(fmt, _oms(fmt, "BIGINT", UNSIGNED))], ctx)
    assert row["kind"] == "change"


@pytest.mark.parametrize("fmt", ["oms_dataworks", "oms_default_extend"])
def test_without_configuration_the_wire_bigint_keeps_its_range(fmt):
    result = decoded(fmt, _oms(fmt, "BIGINT", UNSIGNED), context())
    assert isinstance(result, Reject) and "out of range" in str(result), result


def test_a_configured_type_decides_over_canal_mysql_type():
    raw = canal({"id": "int", "v": "bigint"}, {"id": "1", "v": UNSIGNED})
    [change] = decoded("canal", raw, context({"v": "bigint unsigned"}))
    assert change.after["v"] == UNSIGNED and change.col_types["v"] == "bigint unsigned"


# ---------------------------------------------------------------- the key property


@pytest.mark.parametrize("key", [("a,b",), ("id", "a,b", ""), ('"x"', "[y]"), ()])
def test_the_key_property_keeps_any_column_name(key):
    stored = key_property(k for k in key if k)
    assert key_of({"lakecdc.key": stored}) == tuple(k for k in key if k)


def test_the_comma_joined_key_of_older_mirrors_is_still_read():
    assert key_of({"lakecdc.key": "id,region"}) == ("id", "region")
    assert key_of({"lakecdc.key": ""}) == () and key_of(None) == () and key_of({}) == ()
    assert key_of({"lakecdc.key": "[x"}) == ("[x",)  # an old key whose one column's name starts with '['


# ---------------------------------------------------------------- export's order of keys


def test_export_orders_infinite_and_nan_double_keys():
    keys = [float("nan"), float("inf"), 1.5, None, float("-inf"), "b", 0.0, "NaN"]
    ordered = sorted(keys, key=_sort_value)
    assert ordered[:5] == [None, float("-inf"), 0.0, 1.5, float("inf")]
    assert ordered[5] != ordered[5] and ordered[6] == "NaN" and ordered[7] == "b"


# ---------------------------------------------------------------- MongoDB extended JSON


def _debezium_mongo(doc: str) -> bytes:
    source = {"connector": "mongodb", "db": "d", "collection": "t", "ord": 1, "ts_ms": 1600000000000}
    return json.dumps({"op": "c", "after": doc, "source": source, "ts_ms": 1600000000000}).encode()


MONGO_CARRIERS = {"drs_mongo": mongo, "debezium": _debezium_mongo}


@pytest.mark.parametrize("fmt", sorted(MONGO_CARRIERS))
@pytest.mark.parametrize(
    "value, match",
    [
        ('{"$numberDouble": "abc"}', "$numberDouble is not a number"),
        ('{"$numberDouble": "1e400"}', "cannot hold"),
        ("NumberLong(1, 2)", "takes 1 argument"),
        ("ObjectId()", "takes 1 argument"),
        ('BinData(256, "AAAA")', "outside 0 .. 255"),
        ('{"x": BinData(-1, "AAAA")}', "outside 0 .. 255"),
        ('UUID("zz")', "32 hexadecimal digits"),
        ("Timestamp(-1, 0)", "outside 0 .. 4294967295"),
        ("Timestamp(4294967296, 0)", "outside 0 .. 4294967295"),
        ('{"x": [Timestamp(1, 4294967296)]}', "outside 0 .. 4294967295"),
    ],
)
def test_mongo_values_bson_cannot_hold_are_refused(fmt, value, match):
    raw = MONGO_CARRIERS[fmt](f'{{"_id": 1, "v": {value}}}')
    result = decoded(fmt, raw, context())
    assert isinstance(result, Reject) and match in str(result), result


@pytest.mark.parametrize("fmt", sorted(MONGO_CARRIERS))
@pytest.mark.parametrize("word", ["Infinity", "-Infinity", "NaN"])
def test_a_non_finite_double_in_a_sub_document_stays_a_double(fmt, word):
    raw = MONGO_CARRIERS[fmt](
        f'{{"_id": 1, "v": {{"d": {{"$numberDouble": "{word}"}}}}, "top": {{"$numberDouble": "{word}"}}}}'
    )
    [change] = decoded(fmt, raw, context())
    assert json.loads(change.after["v"]) == {"d": {"$numberDouble": word}}
    assert change.after["top"] == word


@pytest.mark.parametrize(
    "value, expected",
    [
        ('UUID("0123456789ABCDEF0123456789abcdef")', "0123456789abcdef0123456789abcdef"),
        ('UUID("01234567-89ab-cdef-0123-456789abcdef")', "01234567-89ab-cdef-0123-456789abcdef"),
        ('BinData(255, "AAAA")', "AAAA"),
        ('{"$numberDouble": "1.5"}', "1.5"),
    ],
)
def test_mongo_values_in_range_still_decode(value, expected):
    [change] = decoded("drs_mongo", mongo(f'{{"_id": 1, "v": {value}}}'), context())
    assert change.after["v"] == expected


# ---------------------------------------------------------------- gold: names across messages


def test_gold_refuses_a_second_spelling_and_lineage_names_before_any_ddl():
    from pipelines.gold.schema import ColumnSighting, ImageShape, refuse_name_clashes

    sightings = {
        "NAME": ColumnSighting({"text"}, "0002", "0002"),
        "Name": ColumnSighting({"text"}, "0001", "0001"),
        "v": ColumnSighting({"int"}, "0001", "0003"),
        "_OP": ColumnSighting({"text"}, "0001", "0001"),
        "old": ColumnSighting({"int"}, "0001", "0001"),
    }
    shapes = [ImageShape(frozenset({"v", "NAME"}), "0002", "0002"), ImageShape(frozenset({"v"}), "0003", "0003")]
    kept, kept_shapes, rejects = refuse_name_clashes(["name", "OLD"], ["id"], sightings, shapes, renamed={"old"})
    assert set(kept) == {"v", "old"} and kept_shapes == shapes[1:]
    why = {r.split("'")[1]: r for _, r in rejects}
    assert set(why) == {"NAME", "Name", "_OP"}
    assert "'name'" in why["NAME"] and "'_op'" in why["_OP"] and "lineage column" in why["_OP"]
    # a new mirror: the spelling of the lowest sequence keeps the column
    kept, _, rejects = refuse_name_clashes([], [], {k: sightings[k] for k in ("NAME", "Name")}, [])
    assert set(kept) == {"Name"} and "'NAME'" in rejects[0][1]


def test_a_new_column_takes_the_newest_changes_type():
    from pipelines.gold.schema import ColumnSighting, _wanted_type

    flaps = ColumnSighting({"int", "varchar(9)", "decimal(10,2)", "date"}, "1", "5", newest="int")
    assert _wanted_type("c", {}, {"c": flaps}) == "int"
    assert _wanted_type("c", {"c": "text"}, {"c": flaps}) == "text"
