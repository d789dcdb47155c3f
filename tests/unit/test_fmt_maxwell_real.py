"""Format maxwell against the messages Apache Paimon and Apache Flink test with (tests/fixtures/real/maxwell).

Each expected mirror is the one the named Paimon ITCase / Flink test states, folded by the reference
model (pipelines/testing/model.py). Maxwell writes no column types: values keep their exact JSON text.
"""

from __future__ import annotations

import json

import pytest
from _real_fixtures import REAL as REAL_ROOT
from _real_fixtures import full_rows, mirror, records

from pipelines.formats import get_decoder
from pipelines.formats.base import Change, DecodeContext, TableSpec

REAL = REAL_ROOT / "maxwell"
PAIMON = REAL / "paimon"
FIXTURES = REAL_ROOT.parent / "connectors"
DEC = get_decoder("maxwell")
CTX = DecodeContext()
COLS = ("id", "name", "description", "weight")


def decode(paths, ctx: DecodeContext = CTX) -> list[Change]:
    return [ch for path in paths for raw in records(path) for ch in DEC.decode(raw, ctx)]


def full(rows: list[dict]) -> list[dict]:
    return full_rows(rows, "id")


def expect(columns: tuple[str, ...], *values) -> list[dict]:
    return full([dict(zip(columns, v)) for v in values])


P101 = ("101", "scooter", "Small 2-wheel scooter", "3.14")
P102 = ("102", "car battery", "12V car battery", "8.1")
P103 = ("103", "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", "0.8")
P104 = ("104", "hammer", "12oz carpenter's hammer", "0.75")


@pytest.mark.parametrize("path", sorted(REAL.rglob("*.txt")), ids=lambda p: str(p.relative_to(REAL)))
def test_every_real_message_decodes(path):
    raws = records(path)
    assert raws
    for raw in raws:
        obj = json.loads(raw)
        [change] = DEC.decode(raw, CTX)
        assert change.op == {"insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}[obj["type"]]
        assert change.key_columns == tuple(obj["primary_key_columns"])
        assert change.seq == ()  # no `position` in these messages: queue order decides
        assert change.txn == str(obj["xid"]) and change.event_time.endswith("Z")


def test_paimon_table_schema_evolution_after_each_file():
    """KafkaSyncTableActionITCase.runSingleTableSchemaEvolution (maxwell): rows after files 1, 2, 3."""
    folder = PAIMON / "table" / "schemaevolution"
    expected = [
        expect(COLS, P101, P102),
        expect(COLS + ("age",), (*P101, None), (*P102, None), (*P103, "18"), (*P104, "24")),
        expect(
            COLS + ("age", "address"),
            (*P102, None, None),
            (*P103, "18", None),
            (*P104, "24", None),
            ("105", "hammer", "14oz carpenter's hammer", "0.875", None, "Beijing"),
            ("107", "rocks", "box of assorted rocks", "5.3", None, None),
        ),
    ]
    for n, want in enumerate(expected, start=1):
        [rows] = mirror(decode([folder / f"maxwell-data-{i}.txt" for i in range(1, n + 1)])).values()
        assert full(rows) == want, f"after maxwell-data-{n}.txt"


def test_update_before_image_is_data_overlaid_with_old():
    [_, _, update, _] = decode([PAIMON / "table" / "schemaevolution" / "maxwell-data-3.txt"])
    assert update.op == "UPDATE" and update.after["address"] == "Beijing"
    assert update.before == {**update.after, "address": "Shanghai"}


def test_null_value_is_a_null_column():
    """KafkaSyncTableActionITCase.testTableFiledValNull: "weight": null."""
    [rows] = mirror(decode([PAIMON / "table" / "schemaevolution" / "maxwell-data-4.txt"])).values()
    assert full(rows) == expect(COLS, (*P103[:3], None), P104)


def test_paimon_database_schema_evolution():
    """KafkaSyncDatabaseActionITCase.testSchemaEvolutionImpl (maxwell), topics 0 and 1."""
    folder = PAIMON / "database" / "schemaevolution"
    got = mirror(decode([folder / f"topic{t}" / f"maxwell-data-{i}.txt" for t in (0, 1) for i in (1, 2)]))
    assert full(got["paimon_sync_database.t1"]) == expect(
        COLS + ("age",), (*P101, None), (*P102, None), (*P103, "19"), (*P104, "25")
    )
    assert full(got["paimon_sync_database.t2"]) == expect(COLS + ("address",), (*P103, "Beijing"), (*P104, "Shanghai"))


def test_numbers_keep_their_json_text_and_configured_types_apply():
    [change] = decode([PAIMON / "table" / "schemaevolution" / "maxwell-data-3.txt"])[:1]
    assert change.after["weight"] == "0.875" and change.after["id"] == "105"
    typed = DecodeContext(
        tables={"test.product": TableSpec(key=("id",), columns={"id": "bigint", "weight": "decimal(10,3)"})}
    )
    [change] = DEC.decode(records(PAIMON / "table" / "schemaevolution" / "maxwell-data-3.txt")[0], typed)
    assert change.col_types == {"id": "bigint", "weight": "decimal(10,3)"} and change.after["weight"] == "0.875"


def test_flink_changelog_folds_to_its_final_state():
    """Flink MaxwellJsonSerDerTest (maxwell-data.txt): the final rows of its expected changelog."""
    [rows] = mirror(decode([REAL / "flink" / "maxwell-data.txt"])).values()
    assert full(rows) == expect(
        COLS,
        ("101", "scooter", "Small 2-wheel scooter", "5.17"),
        P104,
        ("105", "hammer", "14oz carpenter's hammer", "0.875"),
        ("106", "hammer", "18oz carpenter hammer", "1.0"),
        ("107", "rocks", "box of assorted rocks", "5.1"),
        ("108", "jacket", "water resistent black wind breaker", "0.1"),
        ("109", "spare tire", "24 inch spare tire", "22.2"),
        ("110", "jacket", "new water resistent white wind breaker", "0.5"),
    )


def test_ddl_ts_is_milliseconds_row_ts_seconds():
    """Maxwell's docs (docs/dataformat.md): a DDL event's `ts` is 1477053126000, a row event's 1477053217
    (DDLMap writes the binlog event's milliseconds, RowMap divides them by 1000)."""
    ddl, insert = (ch for line in FIXTURES.joinpath("maxwell_ddl.jsonl").read_bytes().splitlines()
                   for ch in DEC.decode(line, CTX))  # fmt: skip
    assert ddl.op == "DDL" and ddl.ddl.startswith("create table test.e")
    assert ddl.event_time == "2016-10-21T12:32:06Z" and ddl.seq == (6, 800050)
    assert insert.op == "INSERT" and insert.event_time == "2016-10-21T12:33:37Z"
    assert ddl.event_time < insert.event_time
