"""Expectation rules from YAML: what parses, and errors that name where and which field."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from pipelines.config import ConfigError
from pipelines.quality.rules import Rule, parse_duration, parse_expectations

WHERE = "conf/pipeline.yaml: tables.shop.orders.expectations"

EXAMPLE = """
- {name: amount_positive, expect: between, column: amount, min: 0, max: 1000000, action: drop}
- {name: status_known, expect: in_set, column: status, values: [NEW, PAID, SHIPPED], action: warn}
- {name: email_shape, expect: regex, column: email, pattern: '^[^@]+@[^@]+$', action: warn}
- {name: id_present, expect: not_null, column: id, action: fail}
- {name: one_per_email, expect: unique, columns: [email, tenant]}
- {name: sane_size, expect: row_count_between, min: 1, max: 5000000, action: fail}
"""


def test_example_yaml_parses():
    rules = parse_expectations(yaml.safe_load(EXAMPLE), WHERE)
    assert [r.name for r in rules] == [
        "amount_positive",
        "status_known",
        "email_shape",
        "id_present",
        "one_per_email",
        "sane_size",
    ]
    assert rules[0] == Rule("amount_positive", "between", ("amount",), {"min": 0, "max": 1000000}, "drop")
    assert rules[1].args == {"values": ["NEW", "PAID", "SHIPPED"]} and rules[1].action == "warn"
    assert rules[2].args == {"pattern": "^[^@]+@[^@]+$"}
    assert rules[3].column == "id" and rules[3].action == "fail"
    assert rules[4].columns == ("email", "tenant") and rules[4].action == "warn"  # warn is the default
    assert rules[5].columns == () and rules[5].args == {"min": 1, "max": 5000000}
    assert [r.scope for r in rules] == ["batch"] * 4 + ["mirror"] * 2


def test_empty_is_no_rules():
    assert parse_expectations(None, WHERE) == []
    assert parse_expectations([], WHERE) == []


@pytest.mark.parametrize(
    "item, field, words",
    [
        ({"expect": "not_null", "column": "id"}, "name", "required"),
        ({"name": "a b", "expect": "not_null", "column": "id"}, "name", "letters"),
        ({"name": "r", "expect": "positive", "column": "id"}, "expect", "not_null, in_set"),
        ({"name": "r", "column": "id"}, "expect", "must be one of"),
        ({"name": "r", "expect": "not_null"}, "column", "required"),
        ({"name": "r", "expect": "not_null", "column": "id", "action": "explode"}, "action", "warn, drop, fail"),
        ({"name": "r", "expect": "not_null", "column": "id", "values": [1]}, "values", "unknown field"),
        ({"name": "r", "expect": "in_set", "column": "s", "values": []}, "values", "non-empty"),
        ({"name": "r", "expect": "in_set", "column": "s", "values": "NEW"}, "values", "non-empty list"),
        ({"name": "r", "expect": "in_set", "column": "s", "values": [{"a": 1}]}, "values", "strings, numbers"),
        ({"name": "r", "expect": "between", "column": "a"}, "min", "min, max or both"),
        ({"name": "r", "expect": "between", "column": "a", "min": "zero"}, "min", "must be a number"),
        ({"name": "r", "expect": "between", "column": "a", "min": 5, "max": 1}, "min", "greater than max"),
        (
            {"name": "r", "expect": "between", "column": "a", "min": 0, "strict_min": "yes"},
            "strict_min",
            "true or false",
        ),
        ({"name": "r", "expect": "regex", "column": "e"}, "pattern", "required"),
        ({"name": "r", "expect": "regex", "column": "e", "pattern": "(unclosed"}, "pattern", "not a valid regular"),
        ({"name": "r", "expect": "unique", "column": "a", "action": "drop"}, "action", "use warn or fail"),
        ({"name": "r", "expect": "unique", "column": "a", "columns": ["b"]}, "columns", "not both"),
        ({"name": "r", "expect": "unique", "columns": []}, "columns", "non-empty list"),
        ({"name": "r", "expect": "row_count_between", "min": -1}, "min", "non-negative integer"),
        ({"name": "r", "expect": "row_count_between", "max": 10, "column": "a"}, "column", "unknown field"),
        ({"name": "r", "expect": "row_count_between", "max": 10, "action": "drop"}, "action", "no single change"),
    ],
)
def test_errors_name_where_rule_and_field(item, field, words):
    with pytest.raises(ConfigError) as info:
        parse_expectations([{"name": "ok", "expect": "not_null", "column": "id"}, item], WHERE)
    msg = str(info.value)
    assert msg.startswith(WHERE + "[1]"), msg
    assert f".{field}:" in msg, msg
    assert words in msg, msg
    if isinstance(item.get("name"), str) and item["name"] == "r":
        assert "(r)" in msg  # the rule is named too


def test_not_a_list_or_not_a_mapping():
    with pytest.raises(ConfigError, match=r"tables\.shop\.orders\.expectations: expected a list"):
        parse_expectations({"name": "x"}, WHERE)
    with pytest.raises(ConfigError, match=r"expectations\[0\]: expected a mapping"):
        parse_expectations(["not_null id"], WHERE)


def test_duplicate_rule_names():
    with pytest.raises(ConfigError, match=r"\[1\] \(a\)\.name: rule names must be unique"):
        parse_expectations(
            [{"name": "a", "expect": "not_null", "column": "x"}, {"name": "a", "expect": "not_null", "column": "y"}],
            WHERE,
        )


@pytest.mark.parametrize(
    "value, seconds",
    [
        (3600, 3600),
        ("1 hour", 3600),
        ("90 minutes", 5400),
        ("2h", 7200),
        ("30s", 30),
        ("1 day", 86400),
        (dt.timedelta(minutes=5), 300),
    ],
)
def test_parse_duration(value, seconds):
    assert parse_duration(value, "sources[0].freshness").total_seconds() == seconds


@pytest.mark.parametrize("value", ["soon", -5, 0, "0 minutes", True])
def test_parse_duration_rejects(value):
    with pytest.raises(ConfigError, match=r"sources\[0\]\.freshness"):
        parse_duration(value, "sources[0].freshness")
