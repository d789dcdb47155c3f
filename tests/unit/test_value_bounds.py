"""Issue 26: no message can stall a batch, bloat memory or change a value.

One test (or a few) per class of defect the fuzzing campaign found, each through silver's two paths:
``decode_message`` and the ``mapInArrow`` batch function (``_carriers.decoded`` / ``_carriers.silver``).
Each of them failed on the code before the fix (the commit that fixes the class says how it was checked).
"""

from __future__ import annotations

import time

import pytest

from pipelines.formats import DecodeContext, Reject
from tests.unit._carriers import CANAL_FORMATS, after_of, carry, decoded, silver

#: A hang detector, not a benchmark: every message here decodes in milliseconds once fixed, and the
#: quadratic or unbounded paths these tests guard against take minutes (a loaded CI machine is not one).
WATCHDOG_SECONDS = 30.0


def quarantined(fmt: str, raw: bytes, ctx: DecodeContext, match: str) -> str:
    """Assert both silver paths quarantine the message quickly with a reason containing ``match``."""
    start = time.perf_counter()
    result = decoded(fmt, raw, ctx)
    took = time.perf_counter() - start
    assert isinstance(result, Reject), f"{fmt}: accepted {[(c.op, c.after) for c in result]!r:.300}"
    assert match in str(result), f"{fmt}: {result}"
    assert took < WATCHDOG_SECONDS, f"{fmt}: {took:.2f}s"
    [row] = silver([(fmt, raw)], ctx)
    assert row["kind"] == "quarantine" and match in row["reason"], row["reason"]
    return str(result)


def accepted(fmt: str, raw: bytes, ctx: DecodeContext, column: str = "v") -> str | None:
    """The value of ``column`` in the after-image, the same through both silver paths."""
    result = decoded(fmt, raw, ctx)
    assert not isinstance(result, Reject), f"{fmt}: {result}"
    [row] = silver([(fmt, raw)], ctx)
    assert row["kind"] == "change", row.get("reason")
    assert after_of(row)[column] == result[0].after[column]
    return result[0].after[column]


# ---------------------------------------------------------------- 1, 8. numbers: ASCII digits, magnitude first

NUMBER_FORMATS = (*CANAL_FORMATS, "drs_gaussdb", "debezium", "oms_debezium", "dts_avro", "oms_avro", "drs_mongo")
FULLWIDTH = "".maketrans("0123456789", "０１２３４５６７８９")
NOT_ASCII_NUMBERS = [
    "1E" + "10000".translate(FULLWIDTH),  # the campaign's exponent, shortened (10^10000)
    "١٢",  # Arabic-Indic digits
    "𝟏𝟐",  # mathematical bold digits
    "1_0",  # Python's digit grouping
    "1e1_0",
    "12".translate(FULLWIDTH),
]


@pytest.mark.parametrize("text", NOT_ASCII_NUMBERS, ids=ascii)
@pytest.mark.parametrize("column_type", ["bigint", "decimal(65,30)"])
@pytest.mark.parametrize("fmt", NUMBER_FORMATS)
def test_numeric_text_is_ascii_digits_only(fmt, column_type, text):
    kind = "Decimal" if column_type.startswith("decimal") else "Integer"
    raw, ctx = carry(fmt, column_type, text, avro_kind=kind)
    quarantined(fmt, raw, ctx, "ASCII")


@pytest.mark.parametrize("column_type", ["bigint", "decimal(65,30)", "double"])
def test_a_huge_exponent_in_other_digits_costs_nothing(column_type):
    """The campaign's message: 27 s then a Reject for a BIGINT, a 100 MB value for a DECIMAL."""
    text = "1E" + "1000000".translate(FULLWIDTH)
    raw, ctx = carry("dts_canal", column_type, text)
    quarantined("dts_canal", raw, ctx, "ASCII")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1e400", None),
        ("-1e400", None),
        ("1e-400", None),
        ("1e308", "1e308"),
        ("-0.5", "-0.5"),
        ("4.9e-324", "4.9e-324"),
    ],
)
@pytest.mark.parametrize("fmt", ["dts_canal", "drs_gaussdb", "oms_debezium", "oms_default"])
def test_double_text_is_finite(fmt, text, expected):
    raw, ctx = carry(fmt, "double", text)
    if expected is None:
        quarantined(fmt, raw, ctx, "DOUBLE")
    else:
        assert accepted(fmt, raw, ctx) == expected


@pytest.mark.parametrize(
    "text, expected", [("NaN", "NaN"), ("nan", "NaN"), ("Infinity", "Infinity"), ("-inf", "-Infinity")]
)
def test_nan_and_infinity_are_spelled_one_way(text, expected):
    raw, ctx = carry("dts_canal", "double", text)
    assert accepted("dts_canal", raw, ctx) == expected


@pytest.mark.parametrize("fmt", ["drs_gaussdb", "debezium", "oms_debezium", "oms_default", "oms_dataworks", "dts_avro"])
@pytest.mark.parametrize("text", ["9" * 60, "-9223372036854775809", "1E30"])
def test_bigint_range_is_checked_by_every_decoder(fmt, text):
    raw, ctx = carry(fmt, "bigint", text)
    quarantined(fmt, raw, ctx, "out of range")


def test_bigint_range_in_smt_and_json_numbers():
    import json

    from tests.unit._carriers import context

    raw = json.dumps({"id": 1, "v": 10**59, "__deleted": "false"}).encode()
    quarantined("oms_debezium_smt", raw, context({"id": "bigint", "v": "bigint"}), "out of range")
    debezium = b'{"op":"c","after":{"id":1,"v":%d},"source":{"connector":"mysql","db":"d","table":"t"}}' % 10**59
    quarantined("debezium", debezium, context({"id": "bigint", "v": "bigint"}), "out of range")


@pytest.mark.parametrize("fmt", ["dts_avro", "dts_canal"])
def test_bigint_unsigned_promotion_still_holds(fmt):
    """OMS drops UNSIGNED from a BIGINT's type: a value that proves it is kept (seed 000/001 col13)."""
    raw, ctx = carry(fmt, "bigint", "10223372036854775806")
    assert accepted(fmt, raw, ctx) == "10223372036854775806"
    assert decoded(fmt, raw, ctx)[0].col_types["v"] == "bigint unsigned"
    raw, ctx = carry(fmt, "bigint", str(2**64))
    quarantined(fmt, raw, ctx, "out of range")


# ---------------------------------------------------------------- 4. times keep their sign

NANO_TIME = {"type": "int64", "name": "io.debezium.time.NanoTime"}
MICRO_TIME = {"type": "int64", "name": "io.debezium.time.MicroTime"}


@pytest.mark.parametrize(
    "field, number, expected",
    [
        (NANO_TIME, -1000, "-00:00:00.000001"),
        (NANO_TIME, -1, "-00:00:00.000000001"),
        (NANO_TIME, -3_600_000_000_001, "-01:00:00.000000001"),
        (NANO_TIME, 3_600_000_000_001, "01:00:00.000000001"),
        (MICRO_TIME, -1, "-00:00:00.000001"),
        (MICRO_TIME, -3_020_399_000_000, "-838:59:59"),
    ],
)
@pytest.mark.parametrize("fmt", ["debezium", "oms_debezium"])
def test_negative_debezium_times_keep_their_sign(fmt, field, number, expected):
    from tests.unit._carriers import context, debezium

    raw = debezium({"id": {"type": "int64"}, "v": field}, {"id": 1, "v": number}, oms=fmt == "oms_debezium")
    assert accepted(fmt, raw, context()) == expected


# ---------------------------------------------------------------- 5. years are four digits, 1 to 9999


@pytest.mark.parametrize("fmt", [*CANAL_FORMATS, "drs_gaussdb", "oms_default", "oms_shareplex", "debezium"])
@pytest.mark.parametrize(
    "column_type, text, expected",
    [
        ("timestamp", "0999-12-31 23:59:59", "0999-12-31T23:59:59Z"),
        ("datetime", "0999-12-31 23:59:59", "0999-12-31T23:59:59"),
        ("datetime", "0001-01-01 00:00:00.5", "0001-01-01T00:00:00.5"),
        ("date", "0099-01-31", "0099-01-31"),
        ("timestamp", "9999-12-31 23:59:59.999999", "9999-12-31T23:59:59.999999Z"),
    ],
)
def test_years_before_1000_keep_four_digits(fmt, column_type, text, expected):
    if fmt == "oms_shareplex":
        from tests.unit._carriers import context

        raw = b'{"data":{"id":"1","v":"%s"},"meta":{"op":"ins","table":"d.t","scn":"7","seq":1}}' % text.encode()
        ctx = context({"id": "bigint", "v": column_type})
    else:
        raw, ctx = carry(fmt, column_type, text)
    if fmt == "debezium" and column_type == "timestamp":
        text = text.replace(" ", "T") + "Z"  # ZonedTimestamp text
    assert accepted(fmt, raw, ctx) == expected


def _epoch(text: str) -> int:
    from datetime import datetime

    delta = datetime.fromisoformat(text) - datetime(1970, 1, 1)
    return delta.days * 86400 + delta.seconds


@pytest.mark.parametrize(
    "fmt, build, expected",
    [
        ("oms_default", "oms_epoch", "0999-12-31T23:59:59Z"),
        ("dts_avro", "avro_datetime", "0999-12-31T23:59:59.5"),
        ("oms_avro", "avro_timestamp", "0999-12-31T23:59:59Z"),
        ("debezium", "micro_timestamp", "0999-12-31T23:59:59.000001"),
        ("drs_mongo", "iso_date", "0999-12-31T23:59:59.001Z"),
        ("dataworks_kafka", "dataworks_date", "0999-12-31T23:59:59Z"),
    ],
)
def test_years_before_1000_from_epoch_numbers_and_parts(fmt, build, expected):
    import json

    from pipelines.formats._dts_record import NS
    from tests.unit._carriers import avro, context, debezium, integer, mongo, vendor_text

    secs = _epoch("0999-12-31T23:59:59")
    ctx = context({"id": "bigint", "v": "timestamp"})
    if build == "oms_epoch":
        raw = vendor_text(fmt, {"id": 1, "v": str(secs)})
    elif build == "avro_datetime":
        parts = dict(year=999, month=12, day=31, hour=23, minute=59, second=59, millis=500_000)
        raw, ctx = avro([("id", integer("1")), ("v", (NS + "DateTime", parts))]), context()
    elif build == "avro_timestamp":
        raw, ctx = avro([("id", integer("1")), ("v", (NS + "Timestamp", {"timestamp": secs, "millis": 0}))]), context()
    elif build == "micro_timestamp":
        field = {"type": "int64", "name": "io.debezium.time.MicroTimestamp"}
        raw = debezium({"id": {"type": "int64"}, "v": field}, {"id": 1, "v": secs * 10**6 + 1})
    elif build == "iso_date":
        raw, ctx = mongo(f'{{"_id": 1, "v": ISODate({secs * 1000 + 1})}}'), context()
    else:
        schema = {"dataColumn": [{"name": "id", "type": "LONG"}, {"name": "v", "type": "DATE"}], "primaryKey": ["id"]}
        schema["source"] = {"dbType": "MySQL", "dbName": "d", "tableName": "t"}
        payload = {"op": "INSERT", "sequenceId": "7", "after": {"dataColumn": {"id": 1, "v": secs * 1000}}}
        raw = json.dumps({"schema": schema, "payload": payload}).encode()
    assert accepted(fmt, raw, ctx) == expected


# ---------------------------------------------------------------- 3. type names: checked first, parsed once


def _enum(n_members: int) -> str:
    return "enum(" + ",".join(f"'m{i}'" for i in range(n_members)) + ")"


def _type_heavy(fmt: str, type_name: str, size: int) -> bytes:
    """A message of about ``size`` bytes: one column of ``type_name`` in as many rows as fit."""
    import json

    from tests.unit._carriers import canal, gaussdb

    value = "7" if fmt == "canal" else "m7"  # Alibaba Canal writes an ENUM as its index
    rows = [{"id": str(i % 10), "c": value} for i in range(max(1, (size - len(type_name)) // 20))]
    build = gaussdb if fmt == "drs_gaussdb" else canal
    raw = build({"id": "int", "c": type_name}, rows[0])
    return raw.replace(json.dumps([rows[0]]).encode(), json.dumps(rows).encode())


TYPED_FORMATS = (*CANAL_FORMATS, "drs_gaussdb", "auto")


@pytest.mark.parametrize("fmt", TYPED_FORMATS)
def test_an_overlong_type_name_is_refused_before_any_value(fmt):
    """The campaign's class: the 1,024-character limit was checked after every value was decoded, each
    parsing its uncached type again (a 128 KiB Canal message took 52 s)."""
    from tests.unit._carriers import context

    raw = _type_heavy(fmt, _enum(10_000), 128 * 1024)
    reason = quarantined(fmt, raw, context(), "longer than 1024 characters")
    assert "'c'" in reason


@pytest.mark.parametrize("fmt", TYPED_FORMATS)
def test_long_type_names_are_parsed_once_per_message(fmt):
    """Names within the limit but over the 128 characters the value cache holds: cost linear in the message."""
    from tests.unit._carriers import context

    raw = _type_heavy(fmt, _enum(150), 256 * 1024)  # ~900-character ENUM, ~13,000 values
    result = decoded(fmt, raw, context())
    assert not isinstance(result, Reject), result
    assert result[0].after["c"] == ("m6" if fmt == "canal" else "m7") and len(result) > 10_000  # Canal: 1-based


def test_a_long_type_name_is_parsed_once_however_many_values_share_it():
    """The cost the test above relies on, counted rather than timed: a name over the value cache's
    128 characters, shared by every row of a message (one string object), is parsed once."""
    from pipelines.values.types import type_cache

    calls = []
    parse = type_cache(lambda name: calls.append(name) or len(name))
    name = "".join(["enum(", _enum(150)[5:]])  # built at run time: one object, as a message's type map holds it
    assert len(name) > 128
    assert all(parse(name) == len(name) for _ in range(13_000))
    assert len(calls) == 1
    assert parse(str(name[:-1] + name[-1])) == len(name) and len(calls) == 2  # an equal name of another message


def test_the_type_map_is_read_whole_before_any_value():
    """A bad value in one column and an overlong type in another: the type map is refused first."""
    import json

    from tests.unit._carriers import context

    msg = json.loads(_type_heavy("dts_canal", "int", 100))
    msg["mysqlType"]["z"] = "x" * 2000
    msg["data"][0]["c"] = "not a number"
    quarantined("dts_canal", json.dumps(msg).encode(), context(), "type of column 'z' is longer than 1024")


# ---------------------------------------------------------------- 2. widths and lengths from a message

BITS = "io.debezium.data.Bits"


@pytest.mark.parametrize("length", ["800000000", "65", "６４", "-8", "1e2"])
def test_debezium_bits_length_is_capped_at_64(length):
    """A few hundred bytes became a 133 MB change: ``parameters.length`` padded the value."""
    from tests.unit._carriers import context, debezium

    field = {"type": "bytes", "name": BITS, "parameters": {"length": length}}
    raw = debezium({"id": {"type": "int64"}, "v": field}, {"id": 1, "v": "AQ=="})
    quarantined("debezium", raw, context(), "Bits length")


def test_debezium_bits_within_64_still_pad():
    from tests.unit._carriers import context, debezium

    field = {"type": "bytes", "name": BITS, "parameters": {"length": "64"}}
    raw = debezium({"id": {"type": "int64"}, "v": field}, {"id": 1, "v": "AQ=="})
    assert accepted("debezium", raw, context()) == "AAAAAAAAAAE="


@pytest.mark.parametrize("params", [{"scale": "99999999"}, {"scale": "2", "connect.decimal.precision": "9" * 2000}])
def test_debezium_decimal_parameters_are_bounded(params):
    from tests.unit._carriers import context, debezium

    field = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": params}
    raw = debezium({"id": {"type": "int64"}, "v": field}, {"id": 1, "v": "AQ=="})
    quarantined("debezium", raw, context(), "parameter")


@pytest.mark.parametrize("width", ["800000000", "65", "99999999999999999999999"])
def test_canal_bit_width_is_capped_at_64(width):
    raw, ctx = carry("canal", f"bit({width})", "1")
    quarantined("canal", raw, ctx, "BIT")


def test_canal_bit_within_64():
    raw, ctx = carry("canal", "bit(64)", "1")
    assert accepted("canal", raw, ctx) == "AAAAAAAAAAE="
    raw, ctx = carry("canal", "bit(3)", "5")
    assert accepted("canal", raw, ctx) == "BQ=="


@pytest.mark.parametrize("fmt", ["dts_avro", "oms_avro"])
def test_avro_integer_of_a_bit_column_is_its_bytes(fmt):
    """OMS's Avro table writes BIT as an Integer record (seed 000): its col type says bytes, so the value is
    the bytes (big-endian), never the number's text labelled bytes."""
    from pipelines.formats._dts_record import PARSED_BORN, read_record
    from tests.unit._carriers import avro, context, integer

    raw = avro([("id", integer("1")), ("v", integer("1985"))])
    record, _ = read_record(raw)
    record["fields"][1]["dataTypeNumber"] = 16  # MySQL BIT
    import io

    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED_BORN, record)
    assert accepted(fmt, buf.getvalue(), context()) == "B8E="  # 0x07C1
    record["afterImages"][1] = integer(str(2**64))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED_BORN, record)
    quarantined(fmt, buf.getvalue(), context(), "BIT")


# ---------------------------------------------------------------- 6. duplicate Avro field names


@pytest.mark.parametrize("fmt", ["dts_avro", "oms_avro"])
def test_avro_records_with_duplicate_field_names_are_refused(fmt):
    """``fields`` [id, id] with values 1 and 2 decoded to {"id": "2"}: the JSON formats refuse duplicate keys."""
    from tests.unit._carriers import avro, context, integer

    raw = avro([("id", integer("1")), ("id", integer("2"))])
    quarantined(fmt, raw, context(), "duplicate field name 'id'")
    before = [integer("1"), integer("1")]
    raw = avro([("id", integer("1")), ("id", integer("2"))], before=before, operation="UPDATE")
    quarantined(fmt, raw, context(), "duplicate field name 'id'")


# ---------------------------------------------------------------- 7. Debezium schema and payload reconciled

BYTES_FIELD = {"id": {"type": "int64"}, "b": {"type": "bytes"}}


def _half_described(fmt: str, images: tuple[str, ...]) -> bytes:
    from tests.unit._carriers import debezium

    return debezium(BYTES_FIELD, {"id": 1, "b": "6566"}, before={"id": 1, "b": "6566"}, op="u", oms=True, images=images)


@pytest.mark.parametrize("images", [("before",), ("after",)])
def test_a_column_the_schema_does_not_type_is_never_mislabelled(images):
    """A schema describing only ``before``: ``before.b`` was decoded from Base16 while ``after.b`` kept its raw
    text ``6566`` under the col type bytes, which gold then read as Base64."""
    from tests.unit._carriers import context

    quarantined("oms_debezium", _half_described("oms_debezium", images), context(), "no type in the message's schema")


def test_a_configured_type_fills_what_the_schema_leaves_out():
    from tests.unit._carriers import context

    ctx = context({"id": "bigint", "b": "blob"})
    [change] = decoded("oms_debezium", _half_described("oms_debezium", ("before",)), ctx)
    assert change.before["b"] == change.after["b"] == "ZWY=" and change.col_types["b"] in ("bytes", "blob")
    [row] = silver([("oms_debezium", _half_described("oms_debezium", ("before",)))], ctx)
    assert after_of(row)["b"] == "ZWY="


def test_images_typed_differently_by_the_schema_are_refused():
    import json

    from tests.unit._carriers import context, debezium_schema

    schema = json.loads(json.dumps(debezium_schema(BYTES_FIELD)))  # a copy per image
    schema["fields"][1]["fields"][1]["type"] = "string"  # after.b: string, before.b: bytes
    payload = {
        "op": "u",
        "before": {"id": 1, "b": "6566"},
        "after": {"id": 1, "b": "6566"},
        "source": {"db": "d", "table": "t", "pos": "1@1600000000"},
    }
    raw = json.dumps({"schema": schema, "payload": payload}).encode()
    quarantined("oms_debezium", raw, context(), "typed differently")


def test_a_schema_that_describes_no_image_leaves_the_payload_untyped():
    """Seed 000's first example: a schema of ``ts_ms`` alone says nothing of the columns."""
    import json

    from tests.unit._carriers import context

    payload = {"op": "c", "after": {"column": "value"}, "source": {"db": "d", "table": "t", "pos": "1@1600000000"}}
    schema = {"type": "struct", "fields": [{"type": "int64", "field": "ts_ms"}]}
    raw = json.dumps({"schema": schema, "payload": payload}).encode()
    assert accepted("oms_debezium", raw, context(), column="column") == "value"


# ---------------------------------------------------------------- 8. op names are ASCII


@pytest.mark.parametrize("op", ["ıNSERT", "INſERT", "ınsert", "İNSERT"])
@pytest.mark.parametrize("fmt", CANAL_FORMATS)
def test_canal_op_names_are_ascii(fmt, op):
    from tests.unit._carriers import canal, context

    quarantined(fmt, canal({"id": "int"}, {"id": "1"}, type=op), context(), "op")


@pytest.mark.parametrize("op", ["ı", "ınsert"])
def test_ogg_op_types_are_ascii(op):
    import json

    from tests.unit._carriers import context

    msg = {"table": "d.t", "op_type": op, "op_ts": "2020-01-01 00:00:00", "pos": "1", "after": {"id": 1}}
    quarantined("ogg_json", json.dumps(msg).encode(), context(), "op")


# ---------------------------------------------------------------- a budget per message


def test_a_message_whose_changes_outgrow_its_budget_is_quarantined_early():
    """1,000 column types and 10,000 empty rows (55 KB) made 10 million col_types entries (283 MB peak)."""
    import json
    import resource

    from tests.unit._carriers import canal

    msg = json.loads(canal({f"c{i}": "int" for i in range(1000)}, {}, pkNames=[]))
    msg["data"] = [{} for _ in range(10_000)]
    raw = json.dumps(msg).encode()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reason = quarantined("dts_canal", raw, DecodeContext(), "budget")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "characters" in reason and grown_mb < 100, grown_mb


def test_enum_labels_cannot_multiply_a_message():
    """Alibaba Canal writes an ENUM as its index: each "1" became the 1,000-character label."""
    from tests.unit._carriers import canal, context

    label = "x" * 1000
    rows = [{"id": "1", "e": "1"} for _ in range(4000)]
    raw = canal({"id": "int", "e": f"enum('{label}')"}, rows[0])
    raw = raw.replace(b'"data": [{"id": "1", "e": "1"}]', b'"data": ' + json_rows(rows))
    assert len(raw) < 100_000
    quarantined("canal", raw, context(), "budget")
    few = canal({"id": "int", "e": f"enum('{label}')"}, {"id": "1", "e": "1"})
    assert accepted("canal", few, context(), column="e") == label  # within the budget: decoded


def json_rows(rows: list) -> bytes:
    import json

    return json.dumps(rows).encode()


def test_no_value_is_longer_than_the_message_limit():
    raw, ctx = carry("dts_canal", "decimal(65,30)", "1E400")
    small = DecodeContext(tables=ctx.tables, max_message_bytes=len(raw) + 50)
    quarantined("dts_canal", raw, small, "longer than")
    assert len(accepted("dts_canal", raw, ctx)) == 401


@pytest.mark.parametrize("fmt", ["dts_avro", "oms_avro"])
def test_avro_field_lists_keep_the_width_limit(fmt):
    from tests.unit._carriers import avro, integer

    raw = avro([(f"c{i}", integer("1")) for i in range(11)])
    quarantined(fmt, raw, DecodeContext(max_width=10), "max_width")


@pytest.mark.parametrize(
    "ctor, text", [("NumberLong", "1e+400"), ("NumberLong", "9223372036854775808"), ("NumberInt", "2147483648")]
)
def test_mongo_numbers_keep_their_bson_range(ctor, text):
    """Found by test_fuzz_values: an unconfigured NumberLong("1e+400") was kept as 401 digits."""
    from tests.unit._carriers import context, mongo

    quarantined("drs_mongo", mongo(f'{{"_id": 1, "v": {ctor}("{text}")}}'), context(), "range")
    assert accepted("drs_mongo", mongo('{"_id": 1, "v": NumberLong("-9223372036854775808")}'), context()) == str(
        -(2**63)
    )


# ---------------------------------------------------------------- 7. more mislabels the fuzzers found


@pytest.mark.parametrize("fmt", ["dts_avro", "oms_avro"])
def test_an_avro_value_of_another_kind_is_read_by_its_columns_type(fmt):
    """dataTypeNumber types the column before the value's kind: a Character '' under BIGINT was kept
    as '' labelled bigint; a DateTime under TIMESTAMP kept its wall clock without the Z; an Integer under a
    time type kept its digits."""
    from pipelines.formats._dts_record import NS, PARSED_BORN, read_record
    from tests.unit._carriers import avro, context, integer

    def retyped(value, number: int) -> bytes:
        import io

        import fastavro

        record, _ = read_record(avro([("id", integer("1")), ("v", value)]))
        record["fields"][1]["dataTypeNumber"] = number
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, PARSED_BORN, record)
        return buf.getvalue()

    quarantined(fmt, retyped((NS + "Character", {"charset": "utf8", "value": b""}), 8), context(), "not an integer")
    parts = dict(year=2020, month=1, day=2, hour=3, minute=4, second=5, millis=0)
    assert accepted(fmt, retyped((NS + "DateTime", parts), 7), context()) == "2020-01-02T03:04:05Z"
    # an Integer under TIMESTAMP (7) or DATE (10) was kept as its digits, labelled a time (make fuzz found it)
    quarantined(fmt, retyped(integer("9" * 80), 7), context(), "not a date-time")
    quarantined(fmt, retyped(integer("20200102"), 10), context(), "date")


def test_a_schema_field_without_a_type_is_no_type():
    """A field present in one image's schema without a type left the raw text under the other image's type."""
    from tests.unit._carriers import context, debezium

    raw = debezium(
        {"id": {"type": "int64"}, "b": {"type": "bytes"}},
        {"id": 1, "b": "6566"},
        oms=True,
        op="u",
        before={"id": 1, "b": "61"},
        images=("after",),
    )
    import json

    obj = json.loads(raw)
    obj["schema"]["fields"].append(
        {"field": "before", "type": "struct", "fields": [{"field": "id", "type": "int64"}, {"field": "b"}]}
    )
    quarantined("oms_debezium", json.dumps(obj).encode(), context(), "no type in the message's schema")
