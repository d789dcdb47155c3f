"""Format ``debezium``: Debezium as the Debezium project writes it (tests/unit/test_fmt_debezium.py is OMS's).

Real messages (tests/fixtures/real/debezium, copied from Apache Paimon and Apache Flink, see the
ATTRIBUTION there) decode with none quarantined, and the mirror folded by the reference model equals
what those projects' own tests expect. Then: every connector's ordering with delivery order unlike
source order, the record key, tombstones through silver, the unwrap SMT form, every logical type with
exact values, and hostile column names.
"""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path

import pytest

from pipelines.formats import DecodeContext, Reject, get_decoder
from pipelines.formats.base import Change, TableSpec
from pipelines.formats.debezium import ordering
from pipelines.silver import decode_message, make_decode_batches
from pipelines.spark_schema import arrow_schema_of
from pipelines.testing.model import MirrorModel
from pipelines.testing.simulator import compare

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real" / "debezium"
SEED = ROOT / "tests" / "fixtures" / "seeds" / "debezium.jsonl"
DEC = get_decoder("debezium")
CTX = DecodeContext()


def real_lines(rel: str) -> list[bytes]:
    """A copied resource's messages: licence header and blank lines stripped (as Paimon's reader does)."""
    text = re.sub(r"/\*.*?\*/", "", (REAL / rel).read_text(), flags=re.S)
    return [line.encode() for line in text.splitlines() if line.strip()]


def decode_all(lines: list[bytes], ctx: DecodeContext = CTX) -> list[Change]:
    return [ch for raw in lines for ch in decode_message(DEC, raw, ctx)]


def mirror(changes: list[Change], key: tuple[str, ...] = ("id",)) -> dict[str, list[dict]]:
    for ch in changes:
        ch.key_columns = ch.key_columns or key
    model = MirrorModel().add_all(changes)
    return {t: model.rows(t) for t in model.tables()}


def rows_of(*rows: str, columns: tuple[str, ...]) -> list[dict]:
    """Paimon's expected ``+I[...]`` rows (NULL → None) as mirror rows."""
    out = []
    for row in rows:
        values = [v.strip() for v in row.split("|")]
        out.append({c: (None if v == "NULL" else v) for c, v in zip(columns, values, strict=True)})
    return out


# ---------------------------------------------------------------- real messages


def test_every_real_message_decodes_and_none_is_quarantined():
    files = sorted(p.relative_to(REAL).as_posix() for p in REAL.rglob("*.txt"))
    assert len(files) >= 20
    count = 0
    for rel in files:
        for raw in real_lines(rel):
            changes = decode_message(DEC, raw, CTX)
            assert changes and all(ch.op in ("INSERT", "UPDATE", "DELETE", "SNAPSHOT") for ch in changes), rel
            count += 1
    assert count >= 60


def test_oms_debezium_still_rejects_what_debezium_reads():
    """The issue's point: Paimon's 1.9.7 messages have "file": "" and OMS's reader needs a position."""
    raw = real_lines("paimon/table/nullvalue/debezium-data-1.txt")[0]
    with pytest.raises(Reject, match="source.file"):
        decode_message(get_decoder("oms_debezium"), raw, CTX)
    assert decode_message(DEC, raw, CTX)[0].seq == ()  # no position: queue order decides


PAIMON_COLS = ("id", "name", "description", "weight", "age", "address")


def test_paimon_schema_evolution_without_schema_mirrors_like_paimon():
    """KafkaSyncTableActionITCase.runSingleTableSchemaEvolution, files 1..3 (columns age, then address added)."""
    lines = [raw for i in (1, 2, 3) for raw in real_lines(f"paimon/table/schemaevolution/debezium-data-{i}.txt")]
    got = mirror(decode_all(lines))
    expected = rows_of(
        "102 | car battery | 12V car battery | 8.1 | NULL | NULL",
        "103 | 12-pack drill bits | 12-pack of drill bits with sizes ranging from #40 to #3 | 0.8 | 18 | NULL",
        "104 | hammer | 12oz carpenter's hammer | 0.75 | 24 | NULL",
        "105 | hammer | 14oz carpenter's hammer | 0.875 | NULL | Beijing",
        "107 | rocks | box of assorted rocks | 5.3 | NULL | NULL",
        columns=PAIMON_COLS,
    )
    assert compare({"test.product": expected}, got) == []


def test_paimon_schema_evolution_with_schema_mirrors_like_paimon_and_types_follow_the_schema():
    """runSingleTableSchemaEvolutionWithSchemaIncludeRecord, files 1..4: age added as int32, promoted to int64,
    then int32 again (Paimon keeps BIGINT); file 5 (age as string) fails in Paimon and is read as text here."""
    changes = decode_all(
        [raw for i in (1, 2, 3, 4) for raw in real_lines(f"paimon/table/schema/schemaevolution/debezium-data-{i}.txt")]
    )
    expected = rows_of(
        "101 | scooter | Small 2-wheel scooter | 3.14 | NULL",
        "103 | 12-pack drill bits | 12-pack of drill bits with sizes ranging from #40 to #3 | 0.8 | 18",
        "104 | hammer | 12oz carpenter's hammer | 0.75 | 24",
        "105 | hammer | 14oz carpenter's hammer | 0.875 | 24",
        columns=PAIMON_COLS[:5],
    )
    assert compare({"test.product": expected}, mirror(changes)) == []
    ages = [ch.col_types.get("age") for ch in changes]
    assert ages[0] is None and "int" in ages and "bigint" in ages
    assert changes[0].col_types == {"id": "int", "name": "string", "description": "string", "weight": "double"}
    fifth = decode_all(real_lines("paimon/table/schema/schemaevolution/debezium-data-5.txt"))
    assert fifth[0].col_types["age"] == "string" and fifth[0].after["age"] == "24"


def test_paimon_schema_include_keeps_the_float_digits():
    (ch,) = decode_all(real_lines("paimon/table/schema/include/debezium-data-1.txt"))
    assert ch.after == {
        "id": "101",
        "name": "scooter",
        "description": "Small 2-wheel scooter",
        "weight": "3.140000104904175",
    }
    assert ch.col_types["weight"] == "double" and ch.seq == (3, 154, 0)


def test_paimon_delete_with_null_schema():
    (ch,) = decode_all(real_lines("paimon/table/schema/schemaevolution/debezium-data-with-delete.txt"))
    assert ch.op == "DELETE" and ch.before["id"] == "101" and ch.after is None


def test_paimon_null_value_record_is_a_counted_tombstone_and_the_rows_survive():
    """testMessageWithNullValue: data-1, a record with a null value, data-2 → +I[1, A], +I[2, B]."""
    records = [(None, raw) for raw in real_lines("paimon/table/nullvalue/debezium-data-1.txt")]
    records.append((None, None))
    records += [(None, raw) for raw in real_lines("paimon/table/nullvalue/debezium-data-2.txt")]
    changes = [ch for key, value in records for ch in decode_message(DEC, value, CTX, key=key)]
    assert [ch.op for ch in changes] == ["INSERT", "HEARTBEAT", "INSERT"]
    assert changes[1].detail == "tombstone"
    assert mirror(changes) == {"test.test": [{"id": "1", "value": "A"}, {"id": "2", "value": "B"}]}


def test_paimon_all_types_exact_values():
    """testAllTypesWithSchemaImpl: every MySQL type through Debezium 1.9.7 with schema (decimals as JSON numbers)."""
    (ch,) = decode_all(real_lines("paimon/table/schema/alltype/debezium-data-1.txt"))
    a, t = ch.after, ch.col_types
    assert ch.op == "SNAPSHOT" and ch.seq == ()
    assert (a["pt"], t["pt"]) == ("1.1", "decimal(2,1)")
    # BIT(64) b'11111000111': BitSet little-endian bytes reversed → 00 00 00 00 00 00 07 C7 (Paimon's expectation)
    assert base64.b64decode(a["_bit"]) == bytes([0, 0, 0, 0, 0, 0, 0x07, 0xC7]) and t["_bit"] == "bytes"
    assert a["_bit1"] == "true"
    assert (a["_bigint_unsigned"], a["_serial"]) == ("20000000000", "40000000000")
    assert a["_fixed"] == "123456789876543212345678987654321.110"  # DECIMAL(40,3): every digit, scale kept
    assert t["_fixed"] == "decimal(40,3)"
    assert a["_big_decimal"] == "2222222222222222300000001111.1234567890" and t["_big_decimal"] == "decimal(38,10)"
    assert a["_numeric"] == "12345.110"
    assert (a["_date"], a["_datetime"], a["_datetime3"], a["_datetime6"]) == (
        "2023-03-23",
        "2023-03-23T14:30:05",
        "2023-03-23T14:30:05.123",
        "2023-03-23T14:30:05.123456",
    )
    assert (a["_datetime_p"], a["_datetime_p2"]) == ("2023-03-24T14:30:00", "2023-03-24T14:30:05.12")
    assert (a["_timestamp"], a["_timestamp0"]) == ("2023-03-23T22:00:10.123456Z", "2023-03-23T07:10:00Z")
    assert (t["_timestamp"], t["_datetime6"]) == ("timestamp", "datetime")
    assert (a["_time"], t["_time"]) == ("10:13:23", "time")  # Paimon: 36803000 ms
    assert (a["_year"], a["_enum"], a["_set"], a["_json"]) == ("2023", "value1", "a,b", '{"a": "b"}')
    assert base64.b64decode(a["_bin"]) == b"bytes\0\0\0\0\0" and base64.b64decode(a["_varbin"]) == b"more bytes"
    point = base64.b64decode(a["_point"])  # WKB: little-endian, type 1 (Point), x=1.0, y=1.0
    assert point == bytes.fromhex("0101000000000000000000f03f000000000000f03f") and t["_point"] == "bytes"
    assert a["_float"] == "1.5" and a["_double_precision_unsigned_zerofill"] == "3.000333"


def test_flink_postgres_and_mysql_files_fold_to_flinks_final_rows():
    expected = {
        "101": ("scooter", "Small 2-wheel scooter"),
        "106": ("hammer", "18oz carpenter hammer"),
        "110": ("jacket", "new water resistent white wind breaker"),
    }
    pg = mirror(decode_all(real_lines("flink/debezium-postgres-data-schema-exclude.txt")))
    my = mirror(decode_all(real_lines("flink/debezium-data-schema-exclude.txt")))
    for got, table in ((pg, "postgres.inventory.products"), (my, "inventory.products")):
        rows = {r["id"]: r for r in got[table]}
        assert sorted(rows) == [str(i) for i in range(101, 111)]  # 111 inserted, updated, deleted
        for key, (name, description) in expected.items():
            assert (rows[key]["name"], rows[key]["description"]) == (name, description)
        assert float(rows["107"]["weight"]) == pytest.approx(5.1) and float(rows["110"]["weight"]) == pytest.approx(0.5)
    assert mirror(decode_all(real_lines("flink/product_changelog.txt")), ("product_id",)) == {"inventory.products": []}


def test_hostile_column_names_of_the_resources_and_beyond():
    nested = decode_all(real_lines("paimon/table/nestedtype/debezium-data-1.txt"))[0]
    assert nested.after == {"id": "101", "name": "hammer", "row": '{"row_key":"value"}'}  # a column named row
    computed = decode_all(real_lines("paimon/table/computedcolumn/debezium-data-1.txt"))[0]
    assert computed.after == {"_id": "101", "_date": "2023-03-23"}
    odd = {"op": "x", "before": "b", "source": "s", "__private": "p", "a.b`; DROP": "1", "列": "v", "": "e"}
    (ch,) = decode_message(DEC, json.dumps({**odd, "__op": "c", "__table": "t", "__db": "d"}).encode(), CTX)
    assert (ch.op, ch.db, ch.table, ch.after) == ("INSERT", "d", "t", odd)


# ---------------------------------------------------------------- ordering, per connector


def _shuffled_fold(messages: list[bytes], ctx: DecodeContext, seed: int = 3) -> tuple[dict, dict]:
    """(model over source order, model over a delivery order unlike it) of the decoded messages."""
    source_order = decode_all(messages, ctx)
    delivered = list(messages)
    while delivered == messages:
        random.Random(seed).shuffle(delivered)
        seed += 1
    return mirror(source_order), mirror(decode_all(delivered[::-1], ctx))


def _history(seqs: list[tuple[int, ...]]) -> list[Change]:
    """An insert, updates and a key change, a delete and a re-insert of rows of shop.t, in source order."""
    ops = [
        ("INSERT", None, {"id": "1", "v": "a"}),
        ("INSERT", None, {"id": "2", "v": "b"}),
        ("UPDATE", {"id": "1", "v": "a"}, {"id": "1", "v": "a2"}),
        ("UPDATE", {"id": "2", "v": "b"}, {"id": "3", "v": "b"}),
        ("DELETE", {"id": "1", "v": "a2"}, None),
        ("INSERT", None, {"id": "1", "v": "again"}),
        ("UPDATE", {"id": "3", "v": "b"}, {"id": "3", "v": "b2"}),
    ]
    types = {"id": "bigint", "v": "varchar(8)"}
    return [
        Change(op, db="shop", table="t", key_columns=("id",), before=b, after=a, col_types=types, seq=s)
        for (op, b, a), s in zip(ops, seqs, strict=True)
    ]


EXPECTED = {"shop.t": [{"id": "1", "v": "again"}, {"id": "3", "v": "b2"}]}


@pytest.mark.parametrize(
    "connector, seqs",
    [
        # MySQL: (file, pos, row) across a binlog rotation; two rows of one event share the pos
        ("mysql", [(3, 154, 0), (3, 154, 1), (3, 900, 0), (3, 1200, 0), (4, 4, 0), (4, 120, 0), (4, 120, 1)]),
        # PostgreSQL: (last commit LSN, LSN); the LSNs alone would order the 4th change before the 3rd
        ("postgresql", [(100, 110), (100, 120), (130, 500), (600, 140), (700, 710), (720, 730), (740, 150)]),
        # SQL Server: commit LSN, change LSN (3 ints each), event_serial_no
        (
            "sqlserver",
            [
                (45, 1568, 3, 45, 1568, 2, 1),
                (45, 1568, 3, 45, 1568, 2, 2),
                (45, 1600, 5, 45, 1590, 1, 1),
                (46, 16, 1, 45, 1700, 9, 1),
                (46, 16, 1, 46, 8, 2, 1),
                (46, 40, 1, 46, 30, 2, 1),
                (47, 0, 1, 46, 50, 4, 1),
            ],
        ),
        # Oracle: (commit_scn, scn); scn alone would put the 4th change first
        ("oracle", [(2000, 1990), (2000, 1995), (2100, 2050), (2300, 1500), (2400, 2390), (2500, 2450), (2600, 2550)]),
    ],
)
def test_each_connectors_order_survives_any_delivery_order(connector, seqs):
    ctx = DecodeContext(
        tables={"shop.t": TableSpec(key=("id",), columns={"id": "bigint", "v": "varchar(8)"})},
        options={"connector": connector},
    )
    messages = [DEC.encode(ch, ctx) for ch in _history(seqs)]
    assert [json.loads(m)["payload"]["source"]["connector"] for m in messages] == [connector] * 7
    assert [ch.seq for ch in decode_all(messages, ctx)] == seqs
    source_order, delivered = _shuffled_fold(messages, ctx)
    assert source_order == EXPECTED and delivered == EXPECTED


def test_postgres_commit_order_beats_lsn_order():
    """T1 writes first (LSN 100) but commits after T2 (LSN 200): T1's change carries T2's commit as last commit."""
    base = {"connector": "postgresql", "db": "shop", "schema": "public", "table": "t"}
    t2 = {
        "before": None,
        "after": {"id": 1, "v": "T2"},
        "op": "c",
        "source": {**base, "lsn": 200, "sequence": '["150","200"]'},
    }
    t1 = {
        "before": {"id": 1},
        "after": {"id": 1, "v": "T1"},
        "op": "u",
        "source": {**base, "lsn": 100, "sequence": '["250","100"]'},
    }
    for order in ([t2, t1], [t1, t2]):
        changes = decode_all([json.dumps(m).encode() for m in order])
        assert mirror(changes) == {"shop.public.t": [{"id": "1", "v": "T1"}]}


def test_sqlserver_lsn_is_three_exact_integers():
    assert ordering({"connector": "sqlserver", "commit_lsn": "ffffffff:ffffffff:ffff", "change_lsn": None}) == (
        2**32 - 1,
        2**32 - 1,
        2**16 - 1,
        0,
        0,
        0,
        0,
    )
    with pytest.raises(Reject, match="not an LSN"):
        ordering({"connector": "sqlserver", "commit_lsn": "0000002d-00000620"})


def test_mongodb_order_and_documents():
    """MongoDB: (sec or ts_ms/1000, ord); after as extended JSON text; updates as descriptions keyed by _id."""
    oid = '{"$oid": "64650cf6a1b2c3d4e5f60718"}'
    src = {"connector": "mongodb", "db": "inv", "collection": "c"}
    msgs = [
        {
            "op": "c",
            "after": '{"_id": ' + oid + ', "n": {"$numberLong": "9223372036854775807"}, "s": "a"}',
            "source": {**src, "ts_ms": 1700000000000, "ord": 1},
        },
        {
            "op": "u",
            "patch": '{"$set": {"s": "b"}}',
            "filter": '{"_id": ' + oid + "}",
            "source": {**src, "sec": 1700000000, "ord": 2},
        },
        {
            "op": "u",
            "after": None,
            "updateDescription": {"updatedFields": '{"s": "c"}', "removedFields": ["n"]},
            "source": {**src, "ts_ms": 1700000001000, "ord": 1},
        },
    ]
    key = json.dumps(
        {"schema": {"type": "struct", "fields": [{"field": "id", "type": "string"}]}, "payload": {"id": oid}}
    ).encode()
    raws = [json.dumps(m).encode() for m in msgs]
    in_order = [ch for r in raws for ch in DEC.decode_record(key, r, CTX)]
    reversed_ = [ch for r in raws[::-1] for ch in DEC.decode_record(key, r, CTX)]
    assert [ch.seq for ch in in_order] == [(1700000000, 1), (1700000000, 2), (1700000001, 1)]
    expected = {"inv.c": [{"_id": "64650cf6a1b2c3d4e5f60718", "n": None, "s": "c"}]}
    assert mirror(in_order, ("_id",)) == expected == mirror(reversed_, ("_id",))
    assert in_order[2].changed == ("_id", "s", "n")
    delete = {"op": "d", "before": None, "after": None, "source": {**src, "ts_ms": 1700000002000, "ord": 1}}
    (gone,) = DEC.decode_record(key, json.dumps(delete).encode(), CTX)
    assert gone.op == "DELETE" and gone.before == {"_id": "64650cf6a1b2c3d4e5f60718"}
    with pytest.raises(Reject, match="without the removed _id"):
        decode_message(DEC, json.dumps(delete).encode(), CTX)


def test_no_position_means_queue_order_and_mysql_fallbacks():
    assert ordering({"connector": "mysql", "file": "", "pos": 0, "row": 0, "ts_ms": 1596684883000}) == ()
    assert ordering({"connector": "mysql", "gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:23", "ts_ms": 5}) == (23,)
    assert ordering({"connector": "mariadb", "gtid": "0-1-42"}) == (42,)
    assert ordering({"connector": "mysql", "ts_ms": 1700000000000}) == (1700000000000,)
    assert ordering({"connector": "db2", "commit_lsn": "x"}) == ()
    assert ordering({"file": "mysql-bin.000007", "pos": 5}) == (7, 5, 0)  # unwrap SMT: connector inferred


# ---------------------------------------------------------------- record key, tombstones, silver


KEY_SCHEMA = {
    "type": "struct",
    "name": "pg.public.t.Key",
    "fields": [{"field": "id", "type": "int64", "optional": False}],
}


def test_key_from_the_record_key_when_the_value_has_none():
    value = {
        "before": None,
        "after": None,
        "op": "d",
        "source": {
            "connector": "postgresql",
            "db": "shop",
            "schema": "public",
            "table": "t",
            "lsn": 9,
            "sequence": '["8","9"]',
        },
    }
    key = json.dumps({"schema": KEY_SCHEMA, "payload": {"id": 5}}).encode()
    (ch,) = DEC.decode_record(key, json.dumps(value).encode(), CTX)
    assert (ch.op, ch.before, ch.key_columns, ch.col_types) == ("DELETE", {"id": "5"}, ("id",), {"id": "bigint"})
    with pytest.raises(Reject, match="without a 'before' image"):
        DEC.decode_record(None, json.dumps(value).encode(), CTX)
    insert = {**value, "op": "c", "after": {"id": 6, "v": "x"}}
    (ins,) = DEC.decode_record(b'{"id": 6}', json.dumps(insert).encode(), CTX)  # schemas.enable=false key
    assert ins.key_columns == ("id",)
    configured = DecodeContext(tables={"shop.t": TableSpec(key=("v",))})
    assert DEC.decode_record(b'{"id": 6}', json.dumps(insert).encode(), configured)[0].key_columns == ("v",)
    assert DEC.decode_record(b"not json", json.dumps(insert).encode(), CTX)[0].key_columns == ()


BRONZE_DDL = (
    "source STRING, format STRING, key BINARY, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
)


def test_silver_counts_tombstones_as_heartbeats_and_reconciles():
    import pyarrow as pa

    insert = real_lines("paimon/table/nullvalue/debezium-data-1.txt")[0]
    records = [("debezium", b'{"id": 1}', insert), ("debezium", b'{"id": 1}', None), ("oms_debezium", None, None)]
    rows = [
        {
            "source": "s",
            "format": f,
            "key": k,
            "value": v,
            "position": f"p#{i}",
            "queue_pos": f"{i:012d}",
            "ingest_time": None,
        }
        for i, (f, k, v) in enumerate(records)
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=arrow_schema_of(BRONZE_DDL))
    out = [r for b in make_decode_batches({}, CTX)([batch]) for r in b.to_pylist()]
    assert [(r["bronze_position"], r["kind"], r["detail"]) for r in out] == [
        ("p#0", "change", "c"),
        ("p#1", "heartbeat", "tombstone"),
        ("p#2", "quarantine", None),
    ]
    assert out[0]["key_columns"] == ["id"]  # from bronze's key column
    assert "tombstone" in out[2]["reason"]  # other formats still reject a null value


def test_decode_message_keeps_its_old_signature():
    raw = real_lines("paimon/table/nullvalue/debezium-data-1.txt")[0]
    assert decode_message(DEC, raw, CTX)[0].op == "INSERT"
    assert decode_message(DEC, None, CTX)[0].detail == "tombstone"
    with pytest.raises(Reject, match="null"):
        decode_message(get_decoder("maxwell"), None, CTX)


def test_decode_connect_entry_point_takes_parsed_objects():
    obj = json.loads(real_lines("paimon/table/schema/include/debezium-data-1.txt")[0])
    (ch,) = DEC.decode_connect(obj, {"id": 101}, CTX)
    assert ch.after["weight"] == "3.140000104904175" and ch.key_columns == ("id",)
    assert DEC.decode_connect(None, None, CTX)[0].detail == "tombstone"
    assert DEC.decode_connect({"schema": None, "payload": None}, None, CTX)[0].detail == "tombstone"
    with pytest.raises(Reject):
        DEC.decode_connect([1], None, CTX)


# ---------------------------------------------------------------- shapes


def test_unwrap_smt_rows():
    ctx = DecodeContext(default_table="shop.t", tables={"shop.t": TableSpec(key=("id",))})
    upsert, deleted = (
        decode_message(DEC, json.dumps(m).encode(), ctx)[0]
        for m in ({"id": 1, "v": "x"}, {"id": 1, "v": "x", "__deleted": "true"})
    )
    assert (upsert.op, upsert.after, upsert.detail, upsert.table) == ("UPDATE", {"id": "1", "v": "x"}, "upsert", "t")
    assert (deleted.op, deleted.before, deleted.detail) == ("DELETE", {"id": "1", "v": "x"}, "__deleted=true")
    assert mirror([upsert, deleted]) == {"shop.t": []}
    with pytest.raises(Reject, match="names no table"):
        decode_message(DEC, b'{"id": 1}', CTX)
    rewrite = {
        "id": 2,
        "__op": "d",
        "__deleted": "true",
        "__table": "t",
        "__source_db": "shop",
        "__source_file": "b.000002",
        "__source_pos": 7,
    }
    (ch,) = decode_message(DEC, json.dumps(rewrite).encode(), CTX)
    assert (ch.op, ch.before, ch.db, ch.seq) == ("DELETE", {"id": "2"}, "shop", (2, 7, 0))


def test_seed_file_decodes_every_message():
    lines = [line for line in SEED.read_bytes().splitlines() if line.strip()]
    kinds = [ch.op for raw in lines for ch in decode_message(DEC, raw, CTX)]
    assert {"INSERT", "UPDATE", "DELETE", "SNAPSHOT", "TRUNCATE", "HEARTBEAT", "DDL"} <= set(kinds)


# ---------------------------------------------------------------- logical types, exact


def _seed(n: int) -> Change:
    return decode_message(DEC, SEED.read_bytes().splitlines()[n - 1], CTX)[0]


def test_mysql_logical_types_exact():
    ch = _seed(1)
    a, t = ch.after, ch.col_types
    assert (a["price"], t["price"]) == ("9.999999999999990932662530", "decimal(38,24)")  # Base64 unscaled
    assert a["u64"] == "18446744073709551615"  # BIGINT UNSIGNED max, precise mode
    assert (a["created"], a["updated"], a["day"], a["t"]) == (
        "2023-11-14T22:13:20.123456",
        "2023-11-14T22:13:20.123456Z",
        "2023-11-14",
        "12:34:56.789012",
    )
    assert base64.b64decode(a["flags"]) == bytes([0x0C, 0x07])  # Bits(12) little-endian 07 0C
    assert (a["yr"], a["size"], a["tags"], a["doc"]) == ("2023", "M", "a,c", '{"a": [1, 2.50]}')
    assert base64.b64decode(a["pic"]) == b"\x00\xffbin" and a["note"] == 'héllo "wörld"'


def test_postgres_logical_types_exact():
    a, t = _seed(5).after, _seed(5).col_types
    assert (a["amount"], t["amount"]) == ("-1234.567", "decimal")  # VariableScaleDecimal
    assert (a["wait"], a["span"], t["wait"]) == ("PT93784.000001S", "P1Y2M3DT4H5M6.78S", "interval")
    assert (a["at"], a["tt"], a["tz"]) == ("2023-11-14T22:13:20.123456789", "12:34:56.123456789", "10:15:30Z")
    assert (a["uid"], t["uid"], a["x"]) == ("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "uuid", "<a>1</a>")
    assert base64.b64decode(a["shape"])[:5] == bytes.fromhex("0101000000")


def test_three_decimal_handling_modes_and_the_lossy_one_is_marked():
    ctx = DecodeContext(tables={"shop.t": TableSpec(columns={"d": "decimal(38,20)", "u": "bigint unsigned"})})
    src = {"connector": "mysql", "db": "shop", "table": "t", "file": "b.000001", "pos": 4}

    def one(after, fields=None):
        env = {"op": "c", "before": None, "after": after, "source": src}
        msg = (
            {
                "schema": {"type": "struct", "fields": [{"field": "after", "type": "struct", "fields": fields}]},
                "payload": env,
            }
            if fields
            else env
        )
        return decode_message(DEC, json.dumps(msg).encode() if not isinstance(msg, bytes) else msg, ctx)[0]

    digits = "123456789012345678.12345678901234567890"
    precise = one(
        {"d": base64.b64encode(int(digits.replace(".", "")).to_bytes(16, "big", signed=True)).decode()},
        [
            {
                "field": "d",
                "type": "bytes",
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "20"},
            }
        ],
    )
    as_string = one({"d": digits}, [{"field": "d", "type": "string"}])
    raw_number = decode_message(
        DEC, ('{"op":"c","after":{"d":' + digits + '},"source":' + json.dumps(src) + "}").encode(), ctx
    )[0]
    assert precise.after["d"] == as_string.after["d"] == raw_number.after["d"] == digits
    assert as_string.col_types["d"] == raw_number.col_types["d"] == "decimal(38,20)"
    lossy = decode_message(
        DEC,
        (
            '{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[{"field":"d","type":"double"}]}]},"payload":{"op":"c","after":{"d":1.2345678901234567E17},"source":'
            + json.dumps(src)
            + "}}"
        ).encode(),
        ctx,
    )[0]
    assert lossy.col_types["d"] == "double" and lossy.after["d"] == "1.2345678901234567E17"
    wrapped = one({"u": -1}, [{"field": "u", "type": "int64"}])
    assert wrapped.after["u"] == "18446744073709551615"  # bigint.unsigned.handling.mode=long wrapped


def test_binary_handling_modes_and_adaptive_datetime_without_schema():
    ctx = DecodeContext(
        tables={"shop.t": TableSpec(columns={"b": "blob", "d3": "datetime(3)", "d6": "datetime(6)"})},
        options={"binary.handling.mode": "hex"},
    )
    env = {
        "op": "c",
        "after": {"b": "00ff", "d3": 1700000000123, "d6": 1700000000123456},
        "source": {"connector": "mysql", "db": "shop", "table": "t", "file": "b.1", "pos": 4},
    }
    a = decode_message(DEC, json.dumps(env).encode(), ctx)[0].after
    assert (a["b"], a["d3"], a["d6"]) == ("AP8=", "2023-11-14T22:13:20.123", "2023-11-14T22:13:20.123456")
    default = DecodeContext(tables=ctx.tables)
    with pytest.raises(Reject, match="Base64"):
        decode_message(DEC, json.dumps({**env, "after": {"b": "0*ff"}}).encode(), default)
    assert decode_message(DEC, json.dumps({**env, "after": {"b": "AP8="}}).encode(), default)[0].after["b"] == "AP8="


def test_encoder_round_trips_exact_values():
    ch = Change(
        "UPDATE",
        db="shop",
        table="t",
        key_columns=("id",),
        before={"id": "1", "n": "-0.000000000000000000000001", "ts": "1969-12-31T23:59:59.999999", "tm": "-838:59:59"},
        after={
            "id": "1",
            "n": "99999999999999.999999999999999999999999",
            "ts": "2262-04-11T23:47:16.854775807",
            "tm": "12:00:00.5",
        },
        col_types={"id": "bigint", "n": "decimal(38,24)", "ts": "datetime", "tm": "time"},
        seq=(3, 154, 1),
    )
    (back,) = DEC.decode(DEC.encode(ch, CTX), CTX)
    assert back.after == ch.after and back.seq == (3, 154, 1)
    assert {k: v.rstrip("0") for k, v in back.before.items()} == {k: v.rstrip("0") for k, v in ch.before.items()}
