"""Oracle GoldenGate JSON (ogg_json): real Flink / Paimon messages, seed-style fixtures, ordering, rejects,
and the simulator round trip."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from _real_fixtures import PAIMON_SCHEMA_EVOLUTION_ROWS, json_lines, product_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.formats.ogg_json import DECODER, pos_seq, split_qualified
from pipelines.testing.simulator import compare, decode_delivery, deliver, generate_history, model_rows, truth_diffs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL = FIXTURES / "real" / "ogg_json"
PAIMON = REAL / "paimon"
SEED_LINES = (FIXTURES / "seeds" / "ogg_json.jsonl").read_bytes().splitlines()
PRODUCT = {"id": "int", "name": "varchar(255)", "description": "varchar(512)", "weight": "float"}
SEED_CTX = DecodeContext(
    tables={
        "qasource.tcustord": TableSpec(
            key=("ORDER_ID",),
            columns={
                "CUST_CODE": "varchar2(4)",
                "ORDER_DATE": "datetime",
                "PRODUCT_CODE": "varchar2(10)",
                "ORDER_ID": "number(10)",
                "PRODUCT_PRICE": "number(8,2)",
                "PRODUCT_AMOUNT": "number(3)",
                "TRANSACTION_ID": "number(10)",
            },
        ),
        "orclpdb1.shop.orders": TableSpec(
            columns={
                "ORDER_ID": "bigint unsigned",
                "AMOUNT": "decimal(38,24)",
                "PLACED_AT": "datetime(9)",
                "PAID_AT": "timestamp(6)",
                "NOTE": "varchar2(64)",
                "PAYLOAD": "blob",
                "DISCOUNT": "decimal(10,2)",
            }
        ),
    }
)


def decode_all(lines: list[bytes], ctx: DecodeContext = DecodeContext()) -> list[Change]:
    return [c for line in lines for c in DECODER.decode(line, ctx)]


def mirror(changes: list[Change]) -> dict[str, list[dict]]:
    return model_rows(changes)


def assert_mirror(got: dict, table: str, expected: list[dict], key: tuple[str, ...] = ("id",)) -> None:
    diffs = compare({table: expected}, {table: got.get(table, [])}, keys={table: key})
    assert diffs == [], "\n".join(diffs)


# ---------------------------------------------------------------- real messages


REAL_FILES = sorted(REAL.rglob("*.txt"))


def test_the_real_resources_are_all_here():
    assert len(REAL_FILES) == 22 and sum(len(json_lines(p)) for p in REAL_FILES) == 59


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: str(p.relative_to(REAL)))
def test_every_real_message_decodes(path):
    lines = json_lines(path)
    assert lines
    for line in lines:
        [change] = DECODER.decode(line, DecodeContext())
        assert change.op in ("INSERT", "UPDATE", "DELETE") and change.seq and change.event_time


def test_flink_ogg_data_mirrors_the_flink_changelog():
    """OggJsonSerDeSchemaTest: nine inserts, updates of 106/107/110/111, 110 and 111 inserted, 111 deleted."""
    ctx = DecodeContext(tables={"ogg.tbl_test": TableSpec(columns=PRODUCT)})
    rows = mirror(decode_all(json_lines(REAL / "flink" / "ogg-data.txt"), ctx))["OGG.TBL_TEST"]
    expected = {
        101: ("scooter", "Small 2-wheel scooter", 3.14),
        102: ("car battery", "12V car battery", 8.1),
        103: ("12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
        104: ("hammer", "12oz carpenter's hammer", 0.75),
        105: ("hammer", "14oz carpenter's hammer", 0.875),
        106: ("hammer", "18oz carpenter hammer", 1.0),
        107: ("rocks", "box of assorted rocks", 5.1),
        108: ("jacket", "water resistent black wind breaker", 0.1),
        109: ("spare tire", "24 inch spare tire", 22.2),
        110: ("jacket", "new water resistent white wind breaker", 0.5),
    }
    assert [int(r["id"]) for r in rows] == sorted(expected)
    for r in rows:
        name, description, weight = expected[int(r["id"])]
        assert (r["name"], r["description"]) == (name, description)
        assert float(r["weight"]) == pytest.approx(weight, rel=1e-6)  # FLOAT in the source
    # the exact text of the message is kept, not a float rendering of it
    assert next(r for r in rows if r["id"] == "107")["weight"] == "5.099999904632568"


def test_paimon_table_schema_evolution_file_by_file():
    """KafkaSyncTableActionITCase.runSingleTableSchemaEvolution: columns age, then address appear."""
    folder, seen = PAIMON / "table" / "schemaevolution", []
    for i, rows in enumerate(PAIMON_SCHEMA_EVOLUTION_ROWS, start=1):
        seen += json_lines(folder / f"ogg-data-{i}.txt")
        assert_mirror(mirror(decode_all(seen)), "OGG.TBL_TEST", rows)


def test_paimon_data_3_arrives_out_of_trail_order_and_pos_restores_it():
    changes = decode_all(json_lines(PAIMON / "table" / "schemaevolution" / "ogg-data-3.txt"))
    assert [c.seq for c in changes] == [(0, 147), (0, 158), (0, 152), (0, 149)]
    assert [c.op for c in changes] == ["INSERT", "DELETE", "UPDATE", "INSERT"]


def test_paimon_cdc_operations():
    """testCDCOperations: insert 101-103, update 103's weight, delete 103."""
    folder, seen = PAIMON / "table" / "event", []
    steps = {
        "event-insert.txt": [(101, "3.14"), (102, "8.1"), (103, "5.1")],
        "event-update.txt": [(101, "3.14"), (102, "8.1"), (103, "8.1")],
        "event-delete.txt": [(101, "3.14"), (102, "8.1")],
    }
    for name, weights in steps.items():
        seen += json_lines(folder / name)
        got = {r["id"]: r["weight"] for r in mirror(decode_all(seen))["OGG.EVENT"]}
        assert got == {str(i): w for i, w in weights}


@pytest.mark.parametrize("layout", ["schemaevolution", "prefixsuffix"])
def test_paimon_database_topics(layout):
    """KafkaSyncDatabaseActionITCase: t1 gains `age` (schema evolution) or `address` (prefix/suffix)."""
    folder = PAIMON / "database" / layout
    got = mirror(decode_all([m for f in sorted(folder.rglob("*.txt")) for m in json_lines(f)]))
    if layout == "schemaevolution":
        assert_mirror(
            got,
            "PAIMON_SYNC_DATABASE.t1",
            product_rows(
                (101, "scooter", "Small 2-wheel scooter", "3.14", None),
                (102, "car battery", "12V car battery", "8.1", None),
                (103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", "0.8", "19"),
                (104, "hammer", "12oz carpenter's hammer", "0.75", "25"),
            ),
        )
        t2 = got["PAIMON_SYNC_DATABASE.t2"]
        assert [(r["id"], r.get("address")) for r in t2] == [("103", "Beijing"), ("104", "Shanghai")]
    else:  # the same file names its tables with and without the _AFFIX database: two source tables each
        assert [(r["id"], r.get("address")) for r in got["PAIMON_SYNC_DATABASE_AFFIX.t1"]] == [
            ("101", "Beijing"),
            ("102", "Shanghai"),
        ]
        assert [(r["id"], r.get("age")) for r in got["PAIMON_SYNC_DATABASE.t2"]] == [("103", "19"), ("104", "25")]
        assert [r["id"] for r in got["PAIMON_SYNC_DATABASE_AFFIX.t2"]] == ["103", "104"]


def test_paimon_case_insensitive_names_are_kept_and_the_key_is_found():
    changes = decode_all(json_lines(PAIMON / "database" / "case-insensitive" / "ogg-data-1.txt"))
    assert [c.key_columns for c in changes] == [("ID",), ("ID",)]  # the second message writes ["id"]
    rows = mirror(changes)["PAIMON_SYNC_DATABASE.T1"]
    assert [(r["ID"], r.get("NAME"), r.get("name"), r.get("weight"), r.get("WEIGHT")) for r in rows] == [
        ("101", "scooter", None, "3.14", None),
        ("102", None, "car battery", None, "8.1"),
    ]


# ---------------------------------------------------------------- ordering


@pytest.mark.parametrize("seed", range(8))
def test_any_delivery_order_with_duplicates_gives_the_trail_order_mirror(seed):
    lines = json_lines(REAL / "flink" / "ogg-data.txt") + json_lines(PAIMON / "table" / "event" / "event-insert.txt")
    expected = mirror(decode_all(lines))
    rng = random.Random(seed)
    delivered = lines + rng.sample(lines, 5)
    rng.shuffle(delivered)
    assert delivered != lines
    assert mirror(decode_all(delivered)) == expected


@given(a=st.integers(0, 10**30 - 2), gap=st.integers(1, 10**12), pad_a=st.integers(0, 5), pad_b=st.integers(0, 5))
def test_pos_orders_as_the_integer_it_is(a, gap, pad_a, pad_b):
    b = a + gap
    if len(str(b)) > 30:
        return
    assert pos_seq("0" * pad_a + str(a)) < pos_seq("0" * pad_b + str(b))


def test_pos_is_trail_sequence_number_and_rba():
    assert pos_seq("00000000120000004242") == (12, 4242)
    assert pos_seq("00000000000000000000143") == (0, 143)
    assert pos_seq("7") == (0, 7)


# ---------------------------------------------------------------- seed-style fixtures and exact values


def test_seed_fixture_ops_and_partial_update():
    changes = decode_all(SEED_LINES, SEED_CTX)
    assert [c.op for c in changes] == ["INSERT", "UPDATE", "DELETE", "TRUNCATE", "INSERT", "UPDATE", "DELETE", "DDL"]
    insert, update = changes[0], changes[1]
    assert insert.after["ORDER_DATE"] == "1994-09-30T15:33:00"  # GoldenGate's own date-time text
    assert insert.after["PRODUCT_PRICE"] == "17520.00" and insert.event_time == "2015-11-05T18:45:36Z"
    assert update.changed == ("CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID", "PRODUCT_PRICE")
    row = mirror(changes[:2])["QASOURCE.TCUSTORD"]
    assert row == [{**insert.after, "PRODUCT_PRICE": "14000.00"}]  # uncaptured columns keep their values
    assert changes[3].seq == (0, 5480) and changes[3].key_columns == ("ORDER_ID",)
    assert mirror(changes[:4])["QASOURCE.TCUSTORD"] == []
    assert changes[7].detail == "json schema" and (changes[7].db, changes[7].table) == ("QASOURCE", "TCUSTORD")


def test_exact_values():
    insert, update, delete = decode_all(SEED_LINES[4:7], SEED_CTX)
    assert (insert.db, insert.schema, insert.table, insert.txn) == ("ORCLPDB1", "SHOP", "ORDERS", "0.7.31.1234")
    assert insert.after == {
        "ORDER_ID": "18446744073709551615",
        "AMOUNT": "12345678901234.123456789012345678901234",
        "PLACED_AT": "2024-02-29T23:59:59.123456789",
        "PAID_AT": "2024-02-29T23:59:59.123456Z",
        "NOTE": 'naïve "quoted" 日本',
        "PAYLOAD": "3q2+7w==",
        "DISCOUNT": None,
    }
    assert update.changed is None  # every configured column is in the after-image: proven full
    assert update.after["ORDER_ID"] == "9223372036854775808" and update.before["ORDER_ID"] == "18446744073709551615"
    assert update.after["AMOUNT"] == "0.000000000000000000000001" and update.after["DISCOUNT"] == "-1.50"
    assert update.after["PLACED_AT"] == "2024-03-01T00:00:00.000000001"
    assert update.after["PAID_AT"] == "2024-03-01T00:00:00Z" and update.event_time == "2024-02-29T23:59:59.223456Z"
    assert delete.before == {"ORDER_ID": "9223372036854775808"} and delete.seq == (13, 17)
    assert mirror([insert, update, delete]) == {"ORCLPDB1.SHOP.ORDERS": []}
    assert mirror([insert, update])["ORCLPDB1.SHOP.ORDERS"][0]["ORDER_ID"] == "9223372036854775808"


def test_untyped_values_keep_their_json_text():
    raw = b'{"table":"S.T","op_type":"I","pos":"1","primary_keys":["k"],"after":{"k":10223372036854775806,"d":9.999999999999999093266253,"s":"x"}}'
    [c] = DECODER.decode(raw, DecodeContext())
    assert c.after == {"k": "10223372036854775806", "d": "9.999999999999999093266253", "s": "x"}


def test_op_ts_in_a_configured_zone():
    raw = b'{"table":"S.T","op_type":"T","pos":"1","op_ts":"2024-01-01 08:00:00.5"}'
    [c] = DECODER.decode(raw, DecodeContext(options={"source_time_zone": "Asia/Shanghai"}))
    assert c.event_time == "2024-01-01T00:00:00.5Z"


def test_a_keyless_table_update_is_full_and_a_keyed_one_partial_without_configured_columns():
    raw = b'{"table":"S.T","op_type":"U","pos":"5","before":{"a":1,"b":2},"after":{"a":1,"b":3}}'
    assert DECODER.decode(raw, DecodeContext())[0].changed is None
    keyed = DecodeContext(tables={"s.t": TableSpec(key=("a",))})
    assert DECODER.decode(raw, keyed)[0].changed == ("a", "b")


def test_split_qualified():
    assert split_qualified("S.T") == ("S", None, "T")
    assert split_qualified("C.S.T") == ("C", "S", "T")
    assert split_qualified("C.S.T.X") == ("C", "S", "T.X")
    assert split_qualified("T") == (None, None, "T")


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b'{"table":"S.T","pos":"1","after":{"a":1}}', "missing field 'op_type'"),
        (b'{"table":"S.T","op_type":"X","pos":"1","after":{"a":1}}', "unknown op_type 'X'"),
        (b'{"op_type":"I","pos":"1","after":{"a":1}}', "missing field 'table'"),
        (b'{"table":"S.T","op_type":"I","pos":"12a","after":{"a":1}}', "field 'pos' should be the trail position"),
        (b'{"table":"S.T","op_type":"I","pos":1.5,"after":{"a":1}}', "field 'pos' should be the trail position"),
        (b'{"table":"S.T","op_type":"I","pos":"' + b"9" * 31 + b'","after":{"a":1}}', "more than 20 digits"),
        (b'{"table":"S.T","op_type":"I","pos":"1"}', "carries no 'after' image"),
        (b'{"table":"S.T","op_type":"D","pos":"1","before":{}}', "carries no 'before' image"),
        (b'{"table":"S.T","op_type":"D","pos":"1","after":{"a":1}}', "carries no 'before' image"),
        (b'{"table":"S.T","op_type":"I","pos":"1","op_ts":"yesterday","after":{"a":1}}', "field 'op_ts'"),
        (b'{"table":"S.T","op_type":"I","pos":"1","primary_keys":["z"],"after":{"a":1}}', "primary key column 'z'"),
        (b'{"table":"S.T","op_type":"I","pos":"1","primary_keys":[1],"after":{"a":1}}', "array of column names"),
        (b'{"table":"S.T","op_type":"I","pos":"1","after":[1]}', "field 'after' should be an object"),
        (b'{"table":"S.T","op_type":"I","pos":"1","after":{"d":"abc"}}', "column 'd' (decimal(10,2))"),
        (b'["I"]', "expected a JSON object"),
    ],
)
def test_bad_input_is_rejected_with_a_reason(raw, reason):
    ctx = DecodeContext(tables={"s.t": TableSpec(columns={"d": "decimal(10,2)"})})
    with pytest.raises(Reject, match=reason.replace("(", r"\(").replace(")", r"\)")):
        DECODER.decode(raw, ctx)


# ---------------------------------------------------------------- simulator round trip


SIM = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SIM
@given(seed=st.integers(0, 10**6), partitions=st.integers(1, 4), n=st.integers(1, 60), keyless=st.booleans())
def test_simulated_histories_deliver_to_the_source_order_mirror_and_the_source_tables(seed, partitions, n, keyless):
    history = generate_history("ogg_json", seed, n, keyless_tables=keyless)
    delivery = deliver(history, seed, partitions=partitions)
    got = model_rows(decode_delivery(history, delivery))
    assert (
        compare(delivery.expected, {t: got.get(t, []) for t in delivery.expected}, col_types=history.column_types())
        == []
    )
    assert truth_diffs(history) == []


def test_simulated_histories_use_partial_updates_truncates_and_key_changes():
    decoded = [c for seed in range(6) for c in generate_history("ogg_json", seed, 80).decoded]
    assert {"INSERT", "UPDATE", "DELETE", "TRUNCATE"} <= {c.op for c in decoded}
    assert any(c.op == "UPDATE" and c.changed is not None for c in decoded)
    assert any(c.op == "UPDATE" and c.changed is None for c in decoded)
    assert any(
        c.op == "UPDATE" and any(c.before[k] != {**c.before, **c.after}[k] for k in c.key_columns) for c in decoded
    )
    assert all(len(c.seq) == 2 for c in decoded)
    json.dumps([c.to_json_dict() for c in decoded], ensure_ascii=False)
