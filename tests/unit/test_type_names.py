"""Configuration knows every column type name of the seeds' type-mapping tables and of the peers (issue 26).

tests/fixtures/types/type_tables.json lists them: OMS's MySQL and Oracle tables (seeds 000, 001),
the names DRS and DTS write (003, 004), and PostgreSQL, SQL Server and MongoDB BSON names. A user who
declares a column as the database names it (``VARCHAR2(32)``) must get the mapping the table gives,
not ``unknown column type``. Where one name means different things in different sources (MySQL's
BIT is bytes, SQL Server's a boolean) the entry says which family lakecdc uses and why.
"""

from __future__ import annotations

import json
import re

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.values import family, is_known_type, spark_type
from tests.conftest import ROOT, SHARED

TABLES = json.loads((ROOT / "tests" / "fixtures" / "types" / "type_tables.json").read_text())["sections"]
ENTRIES = [
    (section, *entry[:3], entry[3] if len(entry) > 3 else None)
    for section, body in TABLES.items()
    for entry in body["types"]
]
#: The mirror (Delta) types a family maps to (values' module table).
SPARK_TYPES = {
    "int": {"INT", "BIGINT"},
    "uint64": {"DECIMAL(20,0)"},
    "decimal": {"STRING"},  # or DECIMAL(p,s) with p <= 38
    "float": {"DOUBLE"},
    "bool": {"BOOLEAN"},
    "bytes": {"BINARY"},
    "date": {"DATE"},
    "datetime": {"TIMESTAMP_NTZ", "STRING"},
    "timestamp": {"TIMESTAMP", "STRING"},
    "time": {"STRING"},
    "string": {"STRING"},
    "json": {"VARIANT"},
}


@pytest.mark.parametrize("section, name, mapping, implied, conflict", ENTRIES, ids=lambda v: str(v)[:40])
def test_every_seed_and_peer_type_name_is_known_and_mapped_as_its_table_says(section, name, mapping, implied, conflict):
    expected = conflict["family"] if conflict else implied
    assert is_known_type(name), f"{section}: {name!r} ({mapping}) is refused by configuration"
    assert family(name) == expected, f"{section}: {name!r} ({mapping})"
    spark = spark_type(name)
    assert spark in SPARK_TYPES[expected] or (expected == "decimal" and spark.startswith(("DECIMAL(", "STRING"))), spark


def test_a_configuration_declaring_them_all_starts():
    columns = {f"c{i}": name for i, (_s, name, _m, _f, _c) in enumerate(ENTRIES)}
    cfg = parse_config(
        {"sources": [{"name": "s", "format": "oms_default", "path": "/x"}], "tables": {"o.t": {"columns": columns}}}
    )
    assert cfg.tables["o.t"].columns["c0"] == ENTRIES[0][1]


@pytest.mark.parametrize(
    "typo", ["bignt", "decimal(12,2", "varchar2(", "interval year(2) to mnth", "2int", "varchar 2"]
)
def test_typos_are_still_refused(typo):
    assert not is_known_type(typo)
    with pytest.raises(ConfigError, match="unknown column type"):
        parse_config(
            {
                "sources": [{"name": "s", "format": "oms_default", "path": "/x"}],
                "tables": {"o.t": {"columns": {"a": typo}}},
            }
        )


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).upper()


def test_the_seed_tables_name_these_types():
    """The list is made from the seeds: each name of a seed section occurs in one of its seeds."""
    seeds = SHARED / "seeds"
    if not seeds.exists():
        pytest.skip("the shared seeds are not mounted")
    texts = {p.name[:3]: _words(p.read_text(encoding="utf-8")) for p in seeds.glob("00*.txt")}
    missing = [
        (section, name)
        for section, body in TABLES.items()
        for name, *_ in body["types"]
        if body["seeds"] and not any(_words(name) in texts[s] for s in body["seeds"])
    ]
    assert missing == []
