"""AWS DMS JSON (aws_dms): real Paimon messages, seed-style fixtures, ordering, rejects, simulator round trip."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from _real_fixtures import PAIMON_SCHEMA_EVOLUTION_ROWS, json_lines, product_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.formats.aws_dms import DECODER, stream_position_seq
from pipelines.formats.base import Change, DecodeContext, Reject, TableSpec
from pipelines.testing.simulator import compare, decode_delivery, deliver, generate_history, model_rows, truth_diffs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PAIMON = FIXTURES / "real" / "aws_dms" / "paimon"
SEED_LINES = (FIXTURES / "seeds" / "aws_dms.jsonl").read_bytes().splitlines()
ORDERS = {
    "id": "bigint unsigned",
    "amount": "decimal(38,24)",
    "name": "varchar(64)",
    "payload": "blob",
    "placed_at": "datetime(6)",
    "paid_at": "timestamp(6)",
}
SEED_CTX = DecodeContext(
    tables={"shop.orders": TableSpec(key=("id",), columns=ORDERS), "public.foo": TableSpec(key=("id",))}
)


class KeyedBy(dict):
    """Configuration as Paimon's tests give it: every table keyed by one column (``id``, or ``_id``)."""

    def __init__(self, column: str = "id") -> None:
        super().__init__()
        self.column = column

    def get(self, name, default=None):
        return TableSpec(key=(self.column,))


PAIMON_CTX = DecodeContext(tables=KeyedBy())


def decode_all(lines: list[bytes], ctx: DecodeContext = PAIMON_CTX) -> list[Change]:
    return [c for line in lines for c in DECODER.decode(line, ctx)]


def assert_mirror(changes: list[Change], table: str, expected: list[dict]) -> None:
    got = model_rows(changes)
    diffs = compare({table: expected}, {table: got.get(table, [])}, keys={table: ("id",)})
    assert diffs == [], "\n".join(diffs)


# ---------------------------------------------------------------- real messages

REAL_FILES = sorted(PAIMON.rglob("*.txt"))


def test_the_real_resources_are_all_here():
    assert len(REAL_FILES) == 18 and sum(len(json_lines(p)) for p in REAL_FILES) == 38


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: str(p.relative_to(PAIMON)))
@pytest.mark.parametrize("configured", [True, False], ids=["key", "no-config"])
def test_every_real_message_decodes(path, configured):
    for line in json_lines(path):
        key = "_id" if path.parent.name in ("computedcolumn", "metadatacolumn") else "id"
        [change] = DECODER.decode(line, DecodeContext(tables=KeyedBy(key)) if configured else DecodeContext())
        assert change.op in ("INSERT", "UPDATE", "DELETE")
        assert change.seq == () and change.txn == "670014899490"  # no transaction details: queue order
        assert change.key_columns == ((key,) if configured else ())


def test_paimon_table_schema_evolution_file_by_file():
    """KafkaSyncTableActionITCase.runSingleTableSchemaEvolution, in queue order (no stream position)."""
    folder, seen = PAIMON / "table" / "schemaevolution", []
    for i, rows in enumerate(PAIMON_SCHEMA_EVOLUTION_ROWS, start=1):
        seen += json_lines(folder / f"aws-dms-data-{i}.txt")
        assert_mirror(decode_all(seen), "test.product", rows)


def test_paimon_bi_columns_are_the_before_image():
    update = decode_all(json_lines(PAIMON / "table" / "schemaevolution" / "aws-dms-data-3.txt"))[2]
    assert update.op == "UPDATE"
    assert update.before == {
        "id": "105",
        "name": "hammer",
        "description": "14oz carpenter's hammer",
        "weight": "0.875",
        "address": "Shanghai",
    }
    assert update.after["address"] == "Beijing" and not any(c.startswith("BI_") for c in update.after)
    ctx = DecodeContext(tables=KeyedBy(), options={"before_image_prefix": ""})  # the rule turned off
    raw = json_lines(PAIMON / "table" / "schemaevolution" / "aws-dms-data-3.txt")[2]
    assert "BI_address" in DECODER.decode(raw, ctx)[0].after


def test_paimon_null_value_is_kept():
    """testTableFiledValNull (data-4): weight null."""
    first = decode_all(json_lines(PAIMON / "table" / "schemaevolution" / "aws-dms-data-4.txt"))[0]
    assert first.after["weight"] is None and "weight" in first.after


def test_paimon_database_schema_evolution():
    """KafkaSyncDatabaseActionITCase.testSchemaEvolutionImpl (not debezium): t1 gains age, t2 address."""
    folder = PAIMON / "database" / "schemaevolution"
    changes = decode_all(
        [m for i in (1, 2) for t in (0, 1) for m in json_lines(folder / f"topic{t}/aws-dms-data-{i}.txt")]
    )
    assert_mirror(
        changes,
        "paimon_sync_database.t1",
        product_rows(
            (101, "scooter", "Small 2-wheel scooter", "3.14", None),
            (102, "car battery", "12V car battery", "8.1", None),
            (103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", "0.8", "19"),
            (104, "hammer", "12oz carpenter's hammer", "0.75", "25"),
        ),
    )
    t2 = model_rows(changes)["paimon_sync_database.t2"]
    assert [(r["id"], r.get("address")) for r in t2] == [("103", "Beijing"), ("104", "Shanghai")]


def test_paimon_database_include_names_four_tables():
    changes = decode_all(json_lines(PAIMON / "database" / "include" / "topic0" / "aws-dms-data-1.txt"))
    assert sorted(model_rows(changes)) == [
        f"paimon_sync_database_affix.{t}" for t in ("flink", "ignore", "paimon_1", "paimon_2")
    ]


# ---------------------------------------------------------------- ordering


def test_stream_position_shapes():
    assert stream_position_seq(
        "mysql-bin-changelog.000024:373:-1:374:9324410911751:mysql-bin-changelog.000024:210", 3
    ) == (
        24,
        373,
        3,
    )
    assert stream_position_seq("00000002/7C007178.3.00000002/7C007178", 1) == ((2 << 32) | 0x7C007178, 1)
    assert stream_position_seq("00000002/7C007178", 0) == ((2 << 32) | 0x7C007178, 0)
    assert stream_position_seq("0000123A:000001F8:0003", 1) == ()  # SQL Server: not known, queue order
    assert stream_position_seq("", 1) == ()


@pytest.mark.parametrize("seed", range(6))
def test_delivery_order_differs_from_source_order_and_the_mirror_does_not(seed):
    """Transaction details with MySQL stream positions order the changes whatever the queue does."""
    history = generate_history("aws_dms", seed, 60, n_tables=2)
    expected = model_rows(history.decoded)
    rng = random.Random(seed)
    delivered = list(history.messages) + rng.sample(history.messages, 6)
    rng.shuffle(delivered)
    assert delivered != history.messages
    assert model_rows(decode_all(delivered, history.ctx)) == expected


def test_an_older_change_delivered_later_loses():
    insert, update, _, delete = (DECODER.decode(line, SEED_CTX)[0] for line in SEED_LINES[3:7] if line)
    assert insert.seq < update.seq < delete.seq
    assert model_rows([delete, update, insert]) == model_rows([insert, update, delete]) == {"shop.orders": []}


# ---------------------------------------------------------------- seed-style fixtures and exact values


def test_seed_fixture_ops():
    changes = decode_all(SEED_LINES, SEED_CTX)
    assert [c.op for c in changes] == [
        "HEARTBEAT",
        "DDL",
        "SNAPSHOT",
        "INSERT",
        "UPDATE",
        "UPDATE",
        "DELETE",
        "INSERT",
        "DDL",
    ]
    assert changes[0].detail == "control create-table awsdms_apply_exceptions"
    assert json.loads(changes[1].ddl)["table-def"]["primary-key"] == ["id"] and changes[1].detail == "create-table"
    assert changes[2].seq == () and changes[2].event_time is None  # full load: no transaction details
    assert changes[8].detail == "add-column" and changes[8].ddl is None


def test_exact_values():
    load, insert, move, same_key, delete = decode_all(SEED_LINES[2:7], SEED_CTX)
    assert load.after == {
        "id": "1",
        "amount": "12345678901234.123456789012345678901234",
        "name": "first",
        "payload": "3q2+7w==",
        "placed_at": "2024-02-29T23:59:59.123456",
        "paid_at": None,  # left out of data: NULL
    }
    assert insert.after["id"] == "18446744073709551615" and insert.after["amount"] == "0.000000000000000000000001"
    assert insert.after["paid_at"] == "2024-03-01T08:00:00.654321Z" and insert.after["payload"] == "3q2+7w=="
    assert insert.event_time == "2024-07-29T00:58:17.97434Z" and insert.txn == "9324410911751"
    assert insert.seq == (24, 373, 1)
    assert move.before == {"id": "18446744073709551615"} and move.after["id"] == "9223372036854775808"
    assert move.after["amount"] == "-1.50" and move.after["payload"] == ""
    assert same_key.before is None and same_key.after["payload"] is None  # empty before-image
    rows = model_rows([load, insert, move, same_key])["shop.orders"]
    assert [r["id"] for r in rows] == ["1", "9223372036854775808"]
    assert rows[1]["amount"] == "2" and rows[1]["name"] == "moved"
    assert model_rows([load, insert, move, same_key, delete])["shop.orders"] == [load.after]


def test_postgresql_lsn_orders():
    [c] = DECODER.decode(SEED_LINES[7], SEED_CTX)
    assert c.seq == ((2 << 32) | 0x7C007178, 1) and (c.db, c.table) == ("public", "foo")


def test_a_custom_before_image_field():
    raw = b'{"bi":{"id":1},"data":{"id":2},"metadata":{"record-type":"data","operation":"update","schema-name":"s","table-name":"t"}}'
    ctx = DecodeContext(tables={"s.t": TableSpec(key=("id",))}, options={"before_image_field": "bi"})
    assert DECODER.decode(raw, ctx)[0].before == {"id": "1"}


# ---------------------------------------------------------------- bad input


def _msg(data: object = None, **meta: object) -> bytes:
    base = {"record-type": "data", "operation": "insert", "schema-name": "s", "table-name": "t"}
    doc = {"metadata": {**base, **meta}}
    if data is not None:
        doc["data"] = data
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b'{"data":{"id":1}}', "missing field 'metadata'"),
        (_msg({"id": 1}, **{"record-type": None}), "missing field 'record-type'"),
        (_msg({"id": 1}, **{"record-type": "other"}), "unknown record-type 'other'"),
        (_msg({"id": 1}, operation="upsert"), "unknown data operation 'upsert'"),
        (_msg({"id": 1}, **{"table-name": ""}), "missing field 'metadata.table-name'"),
        (_msg(None), "missing field 'data'"),
        (_msg([1]), "field 'data' should be an object"),
        (_msg({}, operation="delete", **{"table-name": "u"}), "delete carries an empty 'data' row"),
        (_msg({"name": "x"}, **{"table-name": "k"}), "primary key column 'id' .from configuration."),
        (_msg({"id": 1}, **{"commit-timestamp": "soon"}), "field 'commit-timestamp'"),
        (_msg({"id": 1}, **{"stream-position": "binlog.1:2:", "transaction-record-id": "x"}), "transaction-record-id"),
        (_msg({"id": 1, "b": "zz"}), r"column 'b' \(blob\): not valid hexadecimal"),
        (_msg({"id": 1}, operation="update"), "UPDATE of a table without a key carries no before-image"),
        (
            _msg(None, **{"record-type": "control", "operation": "truncate-table"}),
            "control record 'truncate-table'",
        ),
    ],
)
def test_bad_input_is_rejected_with_a_reason(raw, reason):
    ctx = DecodeContext(tables={"s.k": TableSpec(key=("id",)), "s.t": TableSpec(columns={"b": "blob"})})
    with pytest.raises(Reject, match=reason):
        DECODER.decode(raw, ctx)


# ---------------------------------------------------------------- simulator round trip

SIM = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SIM
@given(seed=st.integers(0, 10**6), partitions=st.integers(1, 4), n=st.integers(1, 60), keyless=st.booleans())
def test_simulated_histories_deliver_to_the_source_order_mirror_and_the_source_tables(seed, partitions, n, keyless):
    history = generate_history("aws_dms", seed, n, keyless_tables=keyless)
    delivery = deliver(history, seed, partitions=partitions)
    got = model_rows(decode_delivery(history, delivery))
    diffs = compare(delivery.expected, {t: got.get(t, []) for t in delivery.expected}, col_types=history.column_types())
    assert diffs == []
    assert truth_diffs(history) == []


def test_simulated_histories_use_load_control_records_and_key_changes():
    decoded = [c for seed in range(6) for c in generate_history("aws_dms", seed, 80).decoded]
    assert {"SNAPSHOT", "INSERT", "UPDATE", "DELETE", "DDL"} <= {c.op for c in decoded}
    assert all(c.seq == () for c in decoded if c.op in ("SNAPSHOT", "DDL"))
    assert all(len(c.seq) == 3 for c in decoded if c.op in ("INSERT", "UPDATE", "DELETE"))
    assert any(c.op == "UPDATE" and c.before and c.before["id"] != c.after["id"] for c in decoded)
