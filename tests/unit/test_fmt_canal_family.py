"""Canal family: oms_canal, dts_canal, drs_json, drs_json_c, maxwell (seeds 000, 001, 003, 004; Flink corpus)."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.testing.model import MirrorModel
from pipelines.values import instant_from_epoch

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "fixtures" / "seeds"
CONFORMANCE = Path("/work/shared/conformance/flink")
FORMATS = ("oms_canal", "dts_canal", "drs_json", "drs_json_c", "maxwell")
CTX = DecodeContext()
SHANGHAI = DecodeContext(options={"source_time_zone": "Asia/Shanghai"})


def lines(format_id: str) -> list[bytes]:
    return [ln for ln in (SEEDS / f"{format_id}.jsonl").read_bytes().splitlines() if ln.strip()]


def decode_all(format_id: str, raw_lines, ctx=CTX) -> list[Change]:
    dec = get_decoder(format_id)
    return [c for ln in raw_lines for c in dec.decode(ln, ctx)]


# ---------------------------------------------------------------- oms_canal (seeds 000, 001)

OMS_TYPES = {
    "col1": "datetime",
    "col2": "varchar",
    "col3": "float",
    "col4": "double",
    "col5": "smallint",
    "col6": "time",
    "col7": "int",
    "col8": "int64",
    "col9": "blob",
    "col10": "tinyint",
    "col11": "date",
    "col12": "decimal",
    "col13": "bigint unsigned",
    "col14": "timestamp",
}


def oms_row(col2: str, col4: str, col12: str) -> dict:
    return {
        "col1": "2020-11-25T00:01:02",
        "col2": col2,
        "col3": "1.2222",
        "col4": col4,
        "col5": "129",
        "col6": "00:01:02",
        "col7": "2147483646",
        "col8": "9223372036854775806",
        "col9": "aGVsbG8gd29ybGQ=",
        "col10": "3",
        "col11": "2020-11-25",
        "col12": col12,
        "col13": "10223372036854775806",
        "col14": "2020-11-24T16:01:02.012345Z",
    }


def test_oms_canal_seed_000_examples():
    ins, upd, dele, ddl = decode_all("oms_canal", lines("oms_canal")[:4])
    common = dict(
        db="database",
        table="table",
        key_columns=("col1", "col2"),
        col_types=OMS_TYPES,
        seq=(1609344671000,),
        event_time="2020-12-30T16:11:11Z",
    )
    assert ins == Change(
        "INSERT",
        after=oms_row("hello world", "9.999999999999999093266253", "9.9999999999999990"),
        detail="INSERT",
        **common,
    )
    after = oms_row("hello world 2020", "9.999999999999999093266253372484", "9.9999999999999990932662")
    assert upd == Change("UPDATE", before={**after, "col2": "hello world"}, after=after, detail="UPDATE", **common)
    assert dele == Change(
        "DELETE",
        before=oms_row("hello world", "9.99999999999999909326625", "9.99999999999999909326625"),
        detail="DELETE",
        **common,
    )
    assert ddl == Change(
        "DDL",
        db="connector_test",
        table="all_mysql_type_test",
        seq=(1671177209000,),
        event_time="2022-12-16T07:53:29Z",
        detail="ALTER",
        ddl="ALTER TABLE connector_test.all_mysql_type_test ADD COLUMN c90 VARCHAR(30) DEFAULT \"test\" COMMENT 'test'",
    )
    assert base64.b64decode(ins.after["col9"]) == b"hello world"
    # the UPDATE's key (col1, col2) changes: the mirror moves the row, then the DELETE removes it
    model = MirrorModel().add_all([ins, upd])
    assert model.rows("database.table") == [after]
    assert MirrorModel().add_all([ins, upd, dele]).rows("database.table") == [after]  # DELETE names old key


def test_oms_canal_seed_001_long_numbers_keep_every_digit():
    raw = [json.loads(ln, parse_float=str, parse_int=str) for ln in lines("oms_canal")[4:]]
    changes = decode_all("oms_canal", lines("oms_canal")[4:])
    assert [c.op for c in changes] == ["INSERT", "UPDATE", "DELETE"]
    for msg, ch in zip(raw, changes):
        image = ch.after or ch.before
        lit4, lit12 = msg["data"][0]["col4"], msg["data"][0]["col12"]
        assert len(lit12) > 700 and lit12.endswith("E-308")
        assert image["col4"] == lit4  # DOUBLE: the exact text, exponent kept
        digits = lit12.split("E")[0].replace(".", "")
        assert image["col12"] == "0." + "0" * 307 + digits  # DECIMAL: plain, every digit
        assert Decimal(image["col12"]) == Decimal(lit12)
        assert image["col13"] == "10223372036854775806" and ch.col_types["col13"] == "bigint unsigned"
        assert image["col8"] == "9223372036854775806" and ch.col_types["col8"] == "int64"
    assert changes[1].before["col2"] == "hello world" and changes[1].after["col2"] == "hello world 2020"


def raw_seed_oms(kind: str) -> bytes:
    """The seed 000 example exactly as printed (before the fixture corrections)."""
    msg = json.loads(lines("oms_canal")[1 if kind == "UPDATE" else 2])
    if kind == "UPDATE":
        msg["old"] = [{"string": "hello world"}]
    else:
        msg["pkNames"] = ["int8", "int16"]
    return json.dumps(msg).encode()


def test_oms_canal_seed_contradictions_are_rejected():
    dec = get_decoder("oms_canal")
    with pytest.raises(Reject, match="'old' names column 'string' which is not in the new row"):
        dec.decode(raw_seed_oms("UPDATE"), CTX)
    with pytest.raises(Reject, match=r"primary key column 'int8' \(from pkNames\) is not in the row"):
        dec.decode(raw_seed_oms("DELETE"), CTX)


def test_oms_canal_values_and_types():
    dec = get_decoder("oms_canal")

    def one(value, mysql_type, **extra):
        msg = {
            "database": "d",
            "table": "t",
            "type": "INSERT",
            "es": 1,
            "data": [{"c": value}],
            "mysqlType": {"c": mysql_type},
            **extra,
        }
        return dec.decode(json.dumps(msg).encode(), CTX)[0].after["c"]

    assert one("2020-11-25 00:01:02.120 Asia/Shanghai", "datetime") == "2020-11-25T00:01:02.12"  # zone dropped
    assert one("2020-11-25T00:01", "datetime") == "2020-11-25T00:01:00"  # OMS CE < 3.3.0 form
    assert one("1606233662", "timestamp") == "2020-11-24T16:01:02Z"
    assert one("1", "bool") == "true"
    assert one(None, "int") is None
    # zero dates and dates that do not exist are the source's own invalid values (seeds 000, 001):
    # the row decodes with the column NULL and the raw text kept for gold's invalid_values policy
    for invalid, typ in [
        ("0000-00-00", "date"),
        ("0000-00-00 00:00:00", "timestamp"),
        ("0000-00-00 00:00:00", "datetime"),
        ("2021-02-30", "date"),
    ]:
        msg = {
            "database": "d",
            "table": "t",
            "type": "INSERT",
            "es": 1,
            "data": [{"c": invalid, "k": "1"}],
            "mysqlType": {"c": typ, "k": "int"},
        }
        change = dec.decode(json.dumps(msg).encode(), CTX)[0]
        assert change.after == {"c": None, "k": "1"} and change.invalid == {"c": invalid}
    for bad, typ, reason in [
        ("25/12/2021", "datetime", "column 'c' \\(datetime\\): not a date-time"),
        ("abc", "int", "not an integer"),
        ("300", "tinyint", "out of range for TINYINT"),
        ("18446744073709551616", "bigint", "out of range for BIGINT"),
        ("-9223372036854775809", "bigint", "out of range"),
        ("%%%", "blob", "not valid Base64"),
    ]:
        with pytest.raises(Reject, match=reason):
            one(bad, typ)
    # sqlType only (no mysqlType): java.sql.Types mapped; untyped values keep their exact text
    raw = (
        b'{"database":"d","table":"t","type":"INSERT","es":5,"id":7,'
        b'"data":[{"a":"12","b":{"x":[1,2.50]},"c":1e400}],"sqlType":{"a":-5}}'
    )
    ch = dec.decode(raw, CTX)[0]
    assert ch.after == {"a": "12", "b": '{"x":[1,2.50]}', "c": "1e400"} and ch.col_types == {"a": "bigint"}
    assert ch.seq == (5, 7)  # OMS Canal orders by es; a producer's id breaks ties (never a second scale)


def test_oms_canal_key_and_types_from_configuration():
    ctx = DecodeContext(tables={"d.t": TableSpec(key=("k",), columns={"k": "bigint", "v": "decimal(10,2)"})})
    ch = get_decoder("oms_canal").decode(
        b'{"database":"d","table":"t","type":"INSERT","es":1,"data":[{"k":"1","v":"1E+1"}]}', ctx
    )[0]
    assert ch.key_columns == ("k",) and ch.after == {"k": "1", "v": "10"}
    assert ch.col_types == {"k": "bigint", "v": "decimal(10,2)"}


def test_oms_canal_control_and_truncate():
    dec = get_decoder("oms_canal")
    hb = dec.decode(b'{"type":"MHEARTBEAT","es":1000,"isDdl":false}', CTX)[0]
    assert (hb.op, hb.detail, hb.table, hb.event_time) == ("HEARTBEAT", "MHEARTBEAT", None, "1970-01-01T00:00:01Z")
    tr = dec.decode(b'{"type":"TRUNCATE","isDdl":true,"database":"d","table":"t","sql":"truncate t","es":2}', CTX)[0]
    assert (tr.op, tr.ddl) == ("TRUNCATE", "truncate t")
    other = dec.decode(b'{"type":"CREATE_VIEW","isDdl":true,"database":"d","sql":"create view v as select 1"}', CTX)[0]
    assert (other.op, other.detail, other.table) == ("DDL", "CREATE_VIEW", None)
    with pytest.raises(Reject, match="unknown op 'CREATE_VIEW'"):
        dec.decode(b'{"type":"CREATE_VIEW","isDdl":false,"table":"t"}', CTX)


def flink_ctx() -> DecodeContext:
    return DecodeContext(tables={"inventory.products2": TableSpec(key=("id",)), "test.product": TableSpec(key=("id",))})


EXPECTED_8 = {
    "101": ("scooter", "Small 2-wheel scooter", "5.17"),
    "104": ("hammer", "12oz carpenter's hammer", "0.75"),
    "105": ("hammer", "14oz carpenter's hammer", "0.875"),
    "106": ("hammer", "18oz carpenter hammer", "1.0"),
    "107": ("rocks", "box of assorted rocks", "5.1"),
    "108": ("jacket", "water resistent black wind breaker", "0.1"),
    "109": ("spare tire", "24 inch spare tire", "22.2"),
    "110": ("jacket", "new water resistent white wind breaker", "0.5"),
}


def assert_eight_rows(rows):
    assert [r["id"] for r in rows] == list(EXPECTED_8)
    for r in rows:
        assert (r["name"], r["description"]) == EXPECTED_8[r["id"]][:2]
        assert Decimal(r["weight"]) == Decimal(EXPECTED_8[r["id"]][2])


def test_conformance_flink_canal_data():
    raw = [ln for ln in (CONFORMANCE / "canal-data.txt").read_bytes().splitlines() if ln.strip()]
    assert len(raw) == 11  # the corpus README says 10 messages; the file holds 11 lines (2 DELETEs)
    changes = decode_all("oms_canal", raw, flink_ctx())
    assert sum(c.op == "DDL" for c in changes) == 1
    assert all(
        c.seq == (int(json.loads(ln)["es"]), int(json.loads(ln)["id"]))  # (es, id): one scale, es
        for ln in raw
        for c in decode_all("oms_canal", [ln], flink_ctx())
    )
    rows = MirrorModel().add_all(changes).rows("inventory.products2")
    assert_eight_rows(rows)
    assert rows[0]["weight"] == "5.17" and rows[3]["weight"] == "1.0"  # FLOAT text kept exactly
    # pkNames absent → configured key id
    stripped = [ln.replace(b'"pkNames":["id"],', b"") for ln in raw]
    assert_eight_rows(MirrorModel().add_all(decode_all("oms_canal", stripped, flink_ctx())).rows("inventory.products2"))


def test_conformance_flink_maxwell_data():
    raw = [ln for ln in (CONFORMANCE / "maxwell-data.txt").read_bytes().splitlines() if ln.strip()]
    assert len(raw) == 20
    changes = decode_all("maxwell", raw, flink_ctx())
    assert len(changes) == 20 and all(c.key_columns == ("id",) for c in changes)
    assert_eight_rows(MirrorModel().add_all(changes).rows("test.product"))
    upd = changes[9]
    assert upd.before == {"id": "106", "name": "hammer", "description": "16oz carpenter's hammer", "weight": "1.0"}
    assert (upd.txn, upd.event_time, upd.detail, upd.seq) == ("7152", "2020-08-06T03:34:53Z", "update", ())


def test_maxwell_ops_types_and_key():
    dec = get_decoder("maxwell")
    ctx = DecodeContext(
        tables={
            "d.t": TableSpec(
                key=("id",), columns={"id": "bigint unsigned", "b": "blob", "ts": "timestamp", "j": "json"}
            )
        }
    )
    ch = dec.decode(
        b'{"database":"d","table":"t","type":"bootstrap-insert","ts":1,"position":"mysql-bin.000004:1234",'
        b'"data":{"id":18446744073709551615,"b":"aGk=","ts":"2020-01-01 00:00:00","j":{"a":1.50}}}',
        ctx,
    )[0]
    assert ch.op == "SNAPSHOT" and ch.seq == (4, 1234)
    assert ch.after == {"id": "18446744073709551615", "b": "aGk=", "ts": "2020-01-01T00:00:00Z", "j": '{"a":1.50}'}
    ddl = dec.decode(b'{"type":"table-alter","database":"d","table":"t","sql":"alter table t add c int","ts":2}', ctx)[
        0
    ]
    assert (ddl.op, ddl.ddl, ddl.detail) == ("DDL", "alter table t add c int", "table-alter")
    assert dec.decode(b'{"type":"bootstrap-complete","database":"d","table":"t","ts":3}', ctx)[0].op == "HEARTBEAT"
    with pytest.raises(Reject, match=r"primary key column 'id' \(from configuration\)"):
        dec.decode(b'{"database":"d","table":"t","type":"delete","ts":1,"data":{"x":1}}', ctx)
    pk = dec.decode(
        b'{"database":"x","table":"y","type":"insert","ts":1,"primary_key_columns":["k"],"data":{"k":1}}', ctx
    )[0]
    assert pk.key_columns == ("k",)


# ---------------------------------------------------------------- dts_canal (seed 004)


def test_dts_canal_seed_examples():
    old_form, new_form, ddl, init, upd = (decode_all("dts_canal", [ln]) for ln in lines("dts_canal"))
    types = {"id": "bigint", "shipping_type": "varchar"}
    common = dict(db="dbname", table="tablename", key_columns=("id",), col_types=types)
    assert old_form == [
        Change(
            "DELETE",
            before={"id": "500000287", "shipping_type": "aaa"},
            seq=(58,),
            event_time="2020-09-15T09:24:54Z",
            detail="DELETE",
            **common,
        )
    ]
    assert new_form == [
        Change(
            "DELETE",
            before={"id": "500000287", "shipping_type": None},
            seq=(58,),
            event_time="2020-09-15T09:24:54Z",
            detail="DELETE",
            **common,
        )
    ]
    assert ddl == [
        Change(
            "DDL",
            db="dbname",
            table="tablename",
            ddl="eg:createxxx",
            seq=(58,),
            event_time="2020-09-15T09:24:54Z",
            detail="DDL",
        )
    ]
    assert [(c.op, c.after["id"], c.seq, c.detail) for c in init] == [
        ("SNAPSHOT", "500000286", (57,), "INIT"),
        ("SNAPSHOT", "500000287", (57,), "INIT"),
    ]
    assert upd == [
        Change(
            "UPDATE",
            before={"id": "500000286", "shipping_type": "express"},
            after={"id": "500000286", "shipping_type": "bbb"},
            seq=(59,),
            event_time="2020-09-15T09:24:55Z",
            txn="3b8c5d0e-1a2b-11eb-8e4f-00163e0c0a1b:1234",
            detail="UPDATE",
            **common,
        )
    ]
    for delete in (old_form, new_form):  # both DELETE forms remove the row
        rows = MirrorModel().add_all(init + delete + upd).rows("dbname.tablename")
        assert rows == [{"id": "500000286", "shipping_type": "bbb"}]


def test_dts_canal_raw_seed_old_form_delete_lacks_key():
    raw = (
        b'{"old":[{"shipping_type":"aaa"}],"database":"dbname","es":1600161894000,"id":58,"isDdl":false,'
        b'"mysqlType":{"id":"bigint","shipping_type":"varchar"},"pkNames":["id"],"sql":"",'
        b'"sqlType":{"id":-5,"shipping_type":12},"table":"tablename","ts":1600161894771,"type":"DELETE"}'
    )
    with pytest.raises(Reject, match=r"primary key column 'id' \(from pkNames\) is not in the row"):
        get_decoder("dts_canal").decode(raw, CTX)
    with pytest.raises(Reject, match="DELETE carries no row"):
        get_decoder("dts_canal").decode(b'{"type":"DELETE","table":"t","id":1,"data":null,"old":[]}', CTX)


# ---------------------------------------------------------------- drs_json / drs_json_c (seed 003)

C12 = bytes(
    [
        106,
        103,
        111,
        106,
        103,
        111,
        105,
        100,
        115,
        106,
        103,
        111,
        106,
        111,
        115,
        111,
        103,
        57,
        51,
        52,
        48,
        57,
        52,
        51,
        48,
        57,
        116,
        106,
        104,
        114,
        103,
        106,
        101,
        119,
        57,
        116,
        117,
        48,
        57,
        51,
        52,
        48,
        116,
        101,
        114,
        111,
        101,
        106,
        103,
        57,
        56,
        51,
        48,
        52,
        105,
        101,
        117,
        114,
        103,
        57,
        101,
        119,
        117,
        114,
        103,
        48,
        119,
        101,
        117,
        116,
        57,
        114,
        48,
        52,
        117,
        48,
        57,
        53,
        116,
        117,
        51,
        48,
        57,
        50,
        117,
        116,
        48,
        57,
        51,
        117,
        116,
        48,
        119,
        57,
        101,
    ]
)
DRS_TYPES = {
    "c11": "binary",
    "c10": "varchar",
    "c13": "text",
    "c12": "varbinary",
    "c14": "blob",
    "c1": "varchar",
    "c2": "varbinary",
    "c3": "int",
    "c4": "datetime",
    "c5": "timestamp",
    "c6": "char",
    "c7": "float",
    "c8": "double",
    "c9": "decimal",
    "id": "int",
}


def drs_row(id_: str, c13: str, c5: str) -> dict:
    return {
        "c11": "",
        "c10": "华为云huaweicloud",
        "c13": c13,
        "c12": base64.b64encode(C12).decode(),
        "c14": base64.b64encode(
            b"jgojgoidsjgojosog934094309tjhrgjew9tu09340teroejg98304i798465466614"
            b'65!@#$%^*()_)+_+|}"?>::eurg9ewurg0weut9r04u095tu3092ut093ut0w9e'
        ).decode(),
        "c1": "cf3f70a7-7565-44b0-ae3c-83bec549ea8e:104",
        "c2": "",
        "c3": "103",
        "c4": "2021-06-25T17:51:53",
        "c5": c5,
        "c6": "!@#$%90weurtg103",
        "c7": "10357.0",
        "c8": "1.2510357E7",
        "c9": "9874510357",
        "id": id_,
    }


LONG_C13 = "asfiajhfiaf939-0239uoituqorjoqirfoidjfqrniowejoiwqjroqwjrowqjojoiqgoiegnkjgoi23roiugouofdug9u90weurtg103"


@pytest.mark.parametrize(
    "format_id, ctx, c5",
    [("drs_json", CTX, "2021-06-25T09:51:53.201Z"), ("drs_json_c", SHANGHAI, "2021-06-25T09:51:53Z")],
)
def test_drs_seed_examples(format_id, ctx, c5):
    upd, init, init_ddl, ins, dele = (decode_all(format_id, [ln], ctx) for ln in lines(format_id))
    common = dict(
        db="test01", table="test", key_columns=("id",), col_types=DRS_TYPES, event_time="2021-06-25T09:51:53Z"
    )
    assert upd == [
        Change(
            "UPDATE",
            before=drs_row("103", "asfiajhfiaf939-0239", c5),
            after=drs_row("104", LONG_C13, c5),
            seq=(27677,),
            detail="UPDATE",
            **common,
        )
    ]
    assert init == [Change("SNAPSHOT", after=drs_row("104", LONG_C13, c5), seq=(27677,), detail="INIT", **common)]
    assert init_ddl[0].op == "DDL" and init_ddl[0].detail == "INIT_DDL" and init_ddl[0].seq == (0,)
    assert init_ddl[0].ddl.startswith("CREATE TABLE `test` ( `id` int(11) NOT NULL AUTO_INCREMENT")
    assert ins == [Change("INSERT", after=drs_row("105", LONG_C13, c5), seq=(27678,), detail="INSERT", **common)]
    assert dele == [Change("DELETE", before=drs_row("104", LONG_C13, c5), seq=(27679,), detail="DELETE", **common)]
    rows = MirrorModel().add_all(init + upd + init_ddl + ins).rows("test01.test")
    assert [r["id"] for r in rows] == ["104", "105"]
    assert MirrorModel().add_all(init + ins + dele).rows("test01.test") == [drs_row("105", LONG_C13, c5)]


def test_drs_delete_placement_is_strict():
    json_lines, c_lines = lines("drs_json"), lines("drs_json_c")
    with pytest.raises(Reject, match="use format drs_json_c"):
        get_decoder("drs_json").decode(c_lines[4], CTX)
    with pytest.raises(Reject, match="use format drs_json"):
        get_decoder("drs_json_c").decode(json_lines[4], CTX)


def test_drs_byte_lists():
    dec = get_decoder("drs_json")
    for value, expected in [("[106, 103]", "amc="), ([106, -1], "av8="), ("[]", "")]:
        msg = {"type": "INSERT", "id": 1, "table": "t", "mysqlType": {"b": "blob"}, "data": [{"b": value}]}
        assert dec.decode(json.dumps(msg).encode(), CTX)[0].after["b"] == expected
    with pytest.raises(Reject, match="expected a DRS byte list"):
        dec.decode(b'{"type":"INSERT","id":1,"table":"t","mysqlType":{"b":"blob"},"data":[{"b":"aGk="}]}', CTX)
    with pytest.raises(Reject, match="missing field 'id'"):
        dec.decode(b'{"type":"INSERT","table":"t","data":[{"b":"1"}]}', CTX)


# ---------------------------------------------------------------- bad input, every format

BAD = [
    b'{"type":"INSERT","table":"t","data":[{"a":"1"}',
    b"not json",
    b"[1,2]",
    b"42",
    b'"x"',
    b"null",
    b'{"type":"INSERT","id":1,"es":1,"data":[{"a":"1"}]}',
    b'{"type":"XYZ","id":1,"table":"t"}',
    b'{"type":"xyz","id":1,"table":"t"}',
    b"[" * 10000 + b"]" * 10000,
    b'{"a":"\xff\xfe"}',
    b'{"type":"INSERT","id":1,"table":"t","data":"x"}',
    b'{"type":"INSERT","id":1,"table":"t","data":[1]}',
    b'{"type":"INSERT","id":1,"table":"t","data":{"a":1}}',
    b'{"type":"INSERT","id":"x","table":"t","data":[{}]}',
    b'{"type":"INSERT","id":1,"es":"soon","table":"t","data":[{"a":1}]}',
    b'{"type":"UPDATE","id":1,"table":"t","data":[{"a":1}],"old":[{},{}]}',
    b'{"type":"INSERT","id":1,"table":"t","pkNames":[1],"data":[{"a":1}]}',
    b'{"type":"INSERT","id":1,"table":"t","mysqlType":[],"data":[{"a":1}]}',
    b'{"type":"INSERT","id":1,"table":"t","mysqlType":{"a":5},"data":[{"a":1}]}',
    b'{"type":"INSERT","id":1,"table":"t","mysqlType":{"a":"int"},"data":[{"a":{"x":1}}]}',
    b'{"type":"insert","table":"t","ts":"x","data":{"a":1}}',
    b'{"type":"insert","table":"t","data":[1]}',
    b'{"type":"update","table":"t","data":{"a":1},"old":[1]}',
    b'{"type":5}',
    b"{}",
    b"",
    b'{"type":"insert","table":"t","position":"bad","data":{"a":1}}',
]


@pytest.mark.parametrize("format_id", FORMATS)
@pytest.mark.parametrize("raw", BAD, ids=range(len(BAD)))
def test_bad_input_is_rejected_with_reason(format_id, raw):
    with pytest.raises(Reject) as info:
        get_decoder(format_id).decode(raw, CTX)
    assert str(info.value)


@pytest.mark.parametrize("format_id", FORMATS)
def test_oversize_is_rejected(format_id):
    with pytest.raises(Reject, match="over the limit"):
        get_decoder(format_id).decode(b" " * 2000, DecodeContext(max_message_bytes=1000))


# ---------------------------------------------------------------- round trip: decode(encode(c)) == c

TYPES = {
    "id": "bigint",
    "d": "decimal(65,30)",
    "u": "bigint unsigned",
    "s": "varchar(64)",
    "b": "blob",
    "ts": "timestamp",
    "dt": "datetime(6)",
    "f": "double",
    "t": "time",
    "dd": "date",
}
KEYED = DecodeContext(tables={"db1.tb1": TableSpec(key=("id",), columns=TYPES)})

texts = st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "null", "NULL", "0", "\u0000x", "é中文🙂", '"{}"']))
decimals = st.builds(
    lambda i, f: f"{i}.{f}" if f else str(i),
    st.integers(-(10**35), 10**35),
    st.sampled_from(["", "0", "5", "000100", "9" * 30]),
)
fraction = st.sampled_from(["", ".1", ".123", ".000001", ".123456"])
instants = st.builds(
    lambda y, mo, d, h, mi, s, fr: f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{fr}",
    st.integers(1901, 2099),
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    fraction,
)
values = {
    "d": decimals,
    "u": st.integers(0, 2**64 - 1).map(str),
    "s": texts,
    "b": st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()),
    "ts": instants.map(lambda t: t + "Z"),
    "dt": instants,
    "f": st.sampled_from(["1.2510357E7", "10357.0", "-0.5", "3", "1e-300"]),
    "t": st.sampled_from(["00:01:02", "23:59:59.5", "838:59:59"]),
    "dd": instants.map(lambda t: t[:10]),
}


@st.composite
def rows(draw):
    row = {"id": str(draw(st.integers(-(2**63), 2**63 - 1)))}
    for col, strat in values.items():
        if draw(st.booleans()):
            row[col] = draw(st.one_of(st.none(), strat))
    return row


SNAPSHOT_NAME = {"dts_canal": "INIT", "drs_json": "INIT", "drs_json_c": "INIT", "maxwell": "bootstrap-insert"}


@st.composite
def changes(draw, format_id):
    ops = ["INSERT", "UPDATE", "DELETE"] + (["SNAPSHOT"] if format_id in SNAPSHOT_NAME else [])
    op = draw(st.sampled_from(ops))
    row = draw(rows())
    other = {c: draw(st.one_of(st.none(), values[c])) if c in values else str(draw(st.integers(0, 9))) for c in row}
    maxwell = format_id == "maxwell"
    detail = {"SNAPSHOT": SNAPSHOT_NAME.get(format_id)}.get(op, op.lower() if maxwell else op)
    before = after = None
    if op == "DELETE":
        before = row
    elif op == "UPDATE":
        before, after = other, row
    else:
        after = row
    ms = draw(st.integers(0, 4102444800000))
    event_time = instant_from_epoch(ms, "ms")
    if maxwell:
        seq = draw(st.sampled_from([(), (4, 1234)]))
        txn = draw(st.one_of(st.none(), st.integers(0, 10**9).map(str)))
    elif format_id == "oms_canal":  # ordered by es, a producer's id (when written) breaks ties
        seq = draw(st.sampled_from([(ms,), (ms, draw(st.integers(0, 2**63 - 1)))]))
        txn = None
    else:
        seq = (draw(st.integers(0, 2**63 - 1)),)
        txn = draw(st.one_of(st.none(), st.just("uuid:1-5"))) if format_id == "dts_canal" else None
    return Change(
        op,
        db="db1",
        table="tb1",
        key_columns=("id",),
        before=before,
        after=after,
        col_types=dict(TYPES),
        seq=seq,
        event_time=event_time,
        txn=txn,
        detail=detail,
    )


def _round_trip(format_id, data):
    ctx = KEYED if format_id == "maxwell" else CTX
    dec = get_decoder(format_id)
    change = data.draw(changes(format_id))
    raw = dec.encode(change, ctx)
    json.loads(raw)  # valid JSON
    assert dec.decode(raw, ctx) == [change]


@pytest.mark.parametrize("format_id", FORMATS)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_round_trip(format_id, data):
    _round_trip(format_id, data)


@pytest.mark.parametrize("format_id", FORMATS)
def test_round_trip_ddl(format_id):
    dec = get_decoder(format_id)
    detail = {"maxwell": "table-alter", "dts_canal": "DDL", "drs_json": "INIT_DDL"}.get(format_id, "ALTER")
    seq = {"maxwell": (), "oms_canal": (1609459200123, 5)}.get(format_id, (5,))  # oms_canal: (es, id)
    change = Change(
        "DDL",
        db="db1",
        table="tb1",
        ddl="ALTER TABLE tb1 ADD c int",
        detail=detail,
        seq=seq,
        event_time="2021-01-01T00:00:00.123Z",
    )
    assert dec.decode(dec.encode(change, CTX), CTX) == [change]


def test_drs_json_c_timestamps_in_source_zone_round_trip():
    dec = get_decoder("drs_json_c")
    change = Change(
        "INSERT",
        db="d",
        table="t",
        key_columns=("id",),
        after={"id": "1", "ts": "2021-06-25T09:51:53Z"},
        col_types={"id": "int", "ts": "timestamp"},
        seq=(1,),
        detail="INSERT",
    )
    raw = dec.encode(change, SHANGHAI)
    assert json.loads(raw)["data"][0]["ts"] == "2021-06-25 17:51:53"
    assert dec.decode(raw, SHANGHAI) == [change]


# ---------------------------------------------------------------- fuzz: only Reject may escape

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.text(max_size=5),
    st.sampled_from(
        [
            "INSERT",
            "UPDATE",
            "DELETE",
            "INIT",
            "INIT_DDL",
            "DDL",
            "insert",
            "update",
            "delete",
            "TRUNCATE",
            "MHEARTBEAT",
            "table-alter",
            "bootstrap-insert",
            "[1, 2]",
            "0000-00-00",
            "1.5",
            "d",
            "t",
            "id",
            "b",
            "ts",
        ]
    ),
)
_json = st.recursive(
    _scalars,
    lambda ch: st.one_of(
        st.lists(ch, max_size=3), st.dictionaries(st.sampled_from(["id", "b", "ts", "x", "a"]), ch, max_size=4)
    ),
    max_leaves=10,
)
_fields = [
    "type",
    "database",
    "table",
    "data",
    "old",
    "pkNames",
    "mysqlType",
    "sqlType",
    "id",
    "es",
    "ts",
    "isDdl",
    "sql",
    "gtid",
    "xid",
    "position",
    "primary_key_columns",
]
FUZZ_CTX = DecodeContext(
    tables={"d.t": TableSpec(key=("id",), columns={"id": "bigint", "b": "blob", "ts": "timestamp", "x": "date"})}
)


@settings(max_examples=50, deadline=None)
@given(msg=st.dictionaries(st.sampled_from(_fields), _json, max_size=10))
def test_fuzz_only_reject_escapes(msg):
    raw = json.dumps(msg).encode()
    for format_id in FORMATS:
        try:
            get_decoder(format_id).decode(raw, FUZZ_CTX)
        except Reject:
            pass
