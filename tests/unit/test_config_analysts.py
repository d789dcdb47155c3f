"""The analysts' keys of the configuration: tables kept (``include`` / ``exclude``), columns kept
(``columns_include`` / ``columns_exclude``), SQL expectations, the history of chosen columns,
``ignore_null_updates``, ``cluster_by`` and ``gold.naming``: each parsed into the model, and each
mistake refused with the file and the field named."""

from __future__ import annotations

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.warehouse import MirrorNaming

SOURCE = {"name": "s", "format": "oms_canal", "path": "./landing"}
COLUMNS = {"id": "bigint", "amount": "decimal(12,2)", "ssn": "varchar(11)", "note": "text"}


def config(tables=None, sources=None, **top):
    return parse_config({"sources": sources or [SOURCE], "tables": tables or {}, **top}, origin="f.yaml")


def refused(**kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        config(**kwargs)
    return str(info.value)


def test_every_key_parses_into_the_model():
    cfg = config(
        include=["shop.*", "demo_tenant.shop.*"],
        exclude=["shop.tmp_*"],
        gold={"naming": {"template": "{db}__{table}", "prefix": "ods_", "suffix": "_v1"}},
        sources=[{**SOURCE, "include": "shop.*", "exclude": ["shop.audit"], "ignore_null_updates": True}],
        tables={
            "shop.orders": {
                "key": ["id"],
                "columns": COLUMNS,
                "columns_exclude": ["ssn"],
                "history": {"columns": ["amount"]},
                "cluster_by": ["id", "amount"],
                "ignore_null_updates": False,
                "expectations": [{"name": "amount_ok", "sql": "amount IS NULL OR amount >= 0", "action": "drop"}],
            },
            "shop.customers": {"columns_include": ["id", "Name"], "history": {"except_columns": ["Name"]}},
        },
    )
    assert (cfg.include, cfg.exclude) == (("shop.*", "demo_tenant.shop.*"), ("shop.tmp_*",))
    assert cfg.gold_naming == MirrorNaming("{db}__{table}", "ods_", "_v1")
    [source] = cfg.sources
    assert (source.include, source.exclude, source.ignore_null_updates) == (("shop.*",), ("shop.audit",), True)
    orders = cfg.tables["shop.orders"]
    assert dict(orders.columns) == {c: t for c, t in COLUMNS.items() if c != "ssn"}  # the mirror's columns
    assert dict(orders.decode_columns) == COLUMNS  # decoders still read every configured type
    assert cfg.decode_context("oms_canal").column_types("shop", "orders") == COLUMNS
    assert orders.columns_exclude == ("ssn",) and orders.columns_include is None
    assert (orders.history, orders.history_columns, orders.history_except_columns) == (True, ("amount",), ())
    assert orders.cluster_by == ("id", "amount")
    assert cfg.ignores_null_updates("s", "shop.orders") is False  # the table's own setting wins
    assert cfg.ignores_null_updates("s", "shop.customers") is True  # else the source's
    assert cfg.ignores_null_updates("other", "shop.customers") is False  # else false
    [rule] = orders.expectations
    assert (rule.expectation, rule.sql, rule.action, rule.scope) == (
        "sql",
        "amount IS NULL OR amount >= 0",
        "drop",
        "batch",
    )
    customers = cfg.tables["shop.customers"]
    assert customers.columns_include == ("id", "Name") and customers.history_except_columns == ("Name",)


def test_the_defaults_change_nothing():
    cfg = config(tables={"shop.orders": {"key": ["id"], "columns": COLUMNS, "history": True}})
    orders = cfg.tables["shop.orders"]
    assert cfg.gold_naming == MirrorNaming() and cfg.gold_naming.is_default
    assert (cfg.include, cfg.exclude, orders.columns_include, orders.columns_exclude, orders.cluster_by) == (
        (),
        (),
        None,
        (),
        (),
    )
    assert orders.history is True and orders.history_columns is None and orders.history_except_columns == ()
    assert dict(orders.columns) == dict(orders.decode_columns) == COLUMNS


@pytest.mark.parametrize(
    "kwargs, field, words",
    [
        ({"include": []}, "include", "keeps no table"),
        ({"exclude": ["shop.a", 3]}, "exclude[1]", "table name or glob pattern"),
        ({"sources": [{**SOURCE, "exclude": ["a.b", "a.b"]}]}, "sources[0].exclude[1]", "listed twice"),
        ({"sources": [{**SOURCE, "ignore_null_updates": "yes"}]}, "sources[0].ignore_null_updates", "true or false"),
        ({"gold": {"naming": {"template": "{table}"}}}, "gold.naming.template", "{db} and {table}"),
        ({"gold": {"naming": {"template": "{db}-{table}"}}}, "gold.naming.template", "joined by __"),
        ({"gold": {"naming": {"prefix": "_x"}}}, "gold.naming.prefix", "lowercase"),
        ({"gold": {"naming": {"suffix": "X"}}}, "gold.naming.suffix", "lowercase"),
        ({"gold": {"naming": {"sufix": "x"}}}, "gold.naming.sufix", "unknown field"),
        (
            {"tables": {"shop.o": {"columns_include": ["id"], "columns_exclude": ["ssn"]}}},
            "tables.shop.o",
            "not both",
        ),
        (
            {"tables": {"shop.o": {"key": ["id"], "columns": COLUMNS, "columns_exclude": ["id"]}}},
            "tables.shop.o.columns_exclude",
            "key column 'id' cannot be left out",
        ),
        (
            {"tables": {"shop.o": {"key": ["id"], "columns": COLUMNS, "columns_include": ["amount"]}}},
            "tables.shop.o.columns_include",
            "key column 'id' cannot be left out",
        ),
        (
            {"tables": {"shop.o": {"columns": COLUMNS, "columns_exclude": ["sn"]}}},
            "tables.shop.o.columns_exclude[0]",
            "not among the table's columns",
        ),
        ({"tables": {"shop.o": {"columns_include": []}}}, "tables.shop.o.columns_include", "keeps no column"),
        (
            {
                "tables": {
                    "shop.o": {
                        "columns_exclude": ["ssn"],
                        "expectations": [{"name": "ssn_shape", "expect": "regex", "column": "ssn", "pattern": "x"}],
                    }
                }
            },
            "tables.shop.o.expectations[0] (ssn_shape).column",
            "left out by columns_exclude",
        ),
        ({"tables": {"shop.o": {"history": "yes"}}}, "tables.shop.o.history", "{columns: [...]}"),
        (
            {"tables": {"shop.o": {"history": {"columns": ["a"], "except_columns": ["b"]}}}},
            "tables.shop.o.history",
            "exactly one",
        ),
        ({"tables": {"shop.o": {"history": {"colums": ["a"]}}}}, "tables.shop.o.history.colums", "unknown field"),
        (
            {"tables": {"shop.o": {"columns": COLUMNS, "history": {"columns": ["amout"]}}}},
            "tables.shop.o.history.columns[0]",
            "not among",
        ),
        (
            {"tables": {"shop.o": {"key": ["id"], "history": {"except_columns": ["id"]}}}},
            "tables.shop.o.history.except_columns[0]",
            "always recorded",
        ),
        (
            {"tables": {"shop.o": {"columns_exclude": ["ssn"], "history": {"columns": ["ssn"]}}}},
            "tables.shop.o.history.columns[0]",
            "left out",
        ),
        ({"tables": {"shop.o": {"cluster_by": list("abcde")}}}, "tables.shop.o.cluster_by", "at most 4"),
        (
            {"tables": {"shop.o": {"columns": COLUMNS, "cluster_by": ["amout"]}}},
            "tables.shop.o.cluster_by[0]",
            "not among",
        ),
        (
            {"tables": {"shop.o": {"columns_exclude": ["ssn"], "cluster_by": ["ssn"]}}},
            "tables.shop.o.cluster_by[0]",
            "left out",
        ),
        ({"tables": {"shop.o": {"ignore_null_updates": 1}}}, "tables.shop.o.ignore_null_updates", "true or false"),
        ({"exclude": ["shop.*"], "tables": {"shop.o": {}}}, "tables.shop.o", "no source keeps it"),
        (
            {"sources": [{**SOURCE, "include": ["crm.*"]}], "tables": {"shop.o": {}}},
            "tables.shop.o",
            "not matched by sources[0].include",
        ),
        (
            {"tables": {"shop.o": {"expectations": [{"name": "x", "sql": "(amount > 0"}]}}},
            "tables.shop.o.expectations[0] (x).sql",
            "unclosed (",
        ),
        (
            {"tables": {"shop.o": {"expectations": [{"name": "x", "sql": "a > 0; DROP TABLE t"}]}}},
            "tables.shop.o.expectations[0] (x).sql",
            "one expression",
        ),
        (
            {"tables": {"shop.o": {"expectations": [{"name": "x", "sql": "a > 0", "expect": "not_null"}]}}},
            "tables.shop.o.expectations[0] (x).sql",
            "not both",
        ),
        (
            {"tables": {"shop.o": {"expectations": [{"name": "x", "sql": " "}]}}},
            "tables.shop.o.expectations[0] (x).sql",
            "required",
        ),
        (
            {"tables": {"shop.o": {"expectations": [{"name": "x", "sql": "a > 0", "column": "a"}]}}},
            "tables.shop.o.expectations[0] (x).column",
            "unknown field for a sql rule",
        ),
    ],
)
def test_each_mistake_is_refused_naming_the_file_and_the_field(kwargs, field, words):
    message = refused(**kwargs)
    assert f"f.yaml: {field}: " in message and words in message, message


def test_every_mistake_of_a_file_is_reported_at_once():
    message = refused(
        include=[],
        gold={"naming": {"template": "{table}"}},
        tables={"shop.o": {"key": ["id"], "columns_exclude": ["id"], "cluster_by": list("abcde")}},
    )
    assert "4 configuration errors" in message


def test_a_source_list_keeps_a_configured_table_another_source_sends():
    """A table only one source's lists skip may come from another source: not a mistake."""
    cfg = config(
        sources=[{**SOURCE, "exclude": ["shop.*"]}, {**SOURCE, "name": "t"}],
        tables={"shop.o": {"key": ["id"]}},
    )
    assert "shop.o" in cfg.tables


def test_the_example_file_parses_and_shows_every_one_of_these_keys():
    from pathlib import Path

    from pipelines.config import load_config

    example = Path(__file__).resolve().parents[2] / "conf" / "pipeline.example.yaml"
    cfg = load_config(example)
    assert cfg.gold_naming.template == "{db}__{table}" and cfg.include and cfg.exclude
    text = example.read_text()
    for key in (
        "include:",
        "exclude:",
        "columns_include",
        "columns_exclude:",
        "history: {columns:",
        "except_columns",
        "cluster_by:",
        "ignore_null_updates:",
        "naming:",
        "template:",
        "prefix:",
        "suffix:",
        "sql:",
    ):
        assert key in text, key
    doc = (example.parents[1] / "docs" / "analysts-options.md").read_text()
    assert "migration story" in doc and "Bronze keeps the raw message" in doc
