"""``schema_changes``: validated top-level and per table, with errors that name the field."""

from __future__ import annotations

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.gold.schema import fits, widens

BASE = {"sources": [{"name": "s", "format": "oms_canal", "path": "/x"}]}


def test_default_is_fail_and_a_table_may_override_it():
    cfg = parse_config({**BASE, "tables": {"shop.a": {"schema_changes": "evolve"}, "shop.b": {}}})
    assert cfg.schema_changes == "fail"
    assert (cfg.tables["shop.a"].schema_changes, cfg.tables["shop.b"].schema_changes) == ("evolve", None)
    assert parse_config({**BASE, "schema_changes": "quarantine"}).schema_changes == "quarantine"


@pytest.mark.parametrize(
    "doc, where",
    [
        ({"schema_changes": "drop"}, "top level: schema_changes"),
        ({"tables": {"shop.a": {"schema_changes": True}}}, "tables.shop.a.schema_changes"),
    ],
)
def test_unknown_policy_is_named(doc, where):
    with pytest.raises(ConfigError, match=rf"{where.split(': ')[-1]}: must be one of fail, quarantine, evolve, ignore"):
        parse_config({**BASE, **doc})


@pytest.mark.parametrize(
    "old, new, widening",
    [
        ("int", "bigint", True),
        ("int", "double", True),
        ("int", "decimal(12,2)", True),
        ("int", "decimal(11,2)", False),
        ("bigint", "decimal(20,0)", True),
        ("decimal(10,2)", "decimal(20,4)", True),
        ("decimal(10,2)", "decimal(10,4)", False),
        ("date", "timestamp_ntz", True),
        ("date", "timestamp", False),
        ("bigint", "int", False),
        ("string", "int", False),
        ("timestamp_ntz", "timestamp", False),
    ],
)
def test_widening_is_what_delta_allows(old, new, widening):
    assert widens(old, new) is widening
    if widening:
        assert fits(old, new) and not widens(new, old)


def test_everything_fits_text_and_narrowing_fits_the_wider_type():
    assert fits("int", "string") and fits("timestamp", "string")
    assert fits("int", "bigint") and not fits("bigint", "int") and not fits("int", "timestamp_ntz")
