"""The row options of issue 34 in the configuration: ``deletes``, ``where`` and ``from`` parsed into the model,
each mistake refused with the file and the field named; and routing of source table names to entries."""

from __future__ import annotations

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.routing import matching, route_problem

SOURCE = {"name": "s", "format": "oms_canal", "path": "./landing"}


def config(tables):
    return parse_config({"sources": [SOURCE], "tables": tables}, origin="f.yaml")


def refused(tables) -> str:
    with pytest.raises(ConfigError) as info:
        config(tables)
    return str(info.value)


def test_the_row_options_parse_into_the_model():
    cfg = config({"shop.orders": {"from": [r"shop_[0-9]+\.orders_[0-9]+"], "key": ["_source_table", "id"],
                                  "deletes": "soft", "where": " tenant_id = 7 "}})  # fmt: skip
    tc = cfg.tables["shop.orders"]
    assert (tc.from_tables, tc.key, tc.deletes, tc.where) == (
        (r"shop_[0-9]+\.orders_[0-9]+",),
        ("_source_table", "id"),
        "soft",
        "tenant_id = 7",
    )
    assert config({"shop.t": {}}).tables["shop.t"].deletes == "hard"
    sharded = config({"shop.o": {"from": ["shop_1\\.o"], "key": ["_source_table", "id"], "columns": {"id": "int"}}})
    assert sharded.tables["shop.o"].key == ("_source_table", "id"), "the shard column may key a sharded mirror"
    assert "key column '_source_table' is not among the columns" in refused(
        {"shop.o": {"key": ["_source_table", "id"], "columns": {"id": "int"}}}
    )


@pytest.mark.parametrize(
    ("table", "field", "says"),
    [
        ({"deletes": "gone"}, "tables.shop.t.deletes", "must be one of hard, soft"),
        ({"where": " "}, "tables.shop.t.where", "Spark SQL boolean"),
        ({"from": []}, "tables.shop.t.from", "routes no table"),
        ({"from": ["shop_(["]}, "tables.shop.t.from[0]", "is not a regular expression"),
        ({"from": [r"shop\..*"]}, "tables.shop.t.from[0]", "matches the entry 'shop.other'"),
    ],
)
def test_a_mistaken_row_option_is_refused_naming_the_file_and_field(table, field, says):
    message = refused({"shop.t": table, "shop.other": {}})
    assert f"f.yaml: {field}" in message and says in message, message


def test_a_source_table_is_routed_to_the_one_entry_whose_pattern_matches_its_whole_name():
    cfg = config({"shop.orders": {"from": [r"shop_[0-9]+\.orders_[0-9]+"]}, "shop.late": {"from": [r"shop_3\..*"]}})
    assert matching(cfg, "shop_1.orders_12") == [("shop.orders", r"shop_[0-9]+\.orders_[0-9]+")]
    assert matching(cfg, "shop_1.orders_12_bak") == [], "the whole name must match"
    assert route_problem(cfg, "shop.customers") is None and route_problem(cfg, "shop.orders") is None
    clash = route_problem(cfg, "shop_3.orders_3")
    assert "tables.shop.orders.from" in clash and "tables.shop.late.from" in clash, clash


def test_computed_columns_and_partitions_parse_and_their_mistakes_are_refused():
    cfg = config({"shop.t": {"computed": {"day": "to_date(ts)"}, "partition_by": ["day"]}})
    assert (cfg.tables["shop.t"].computed, cfg.tables["shop.t"].partition_by) == ({"day": "to_date(ts)"}, ("day",))
    both = refused({"shop.t": {"cluster_by": ["a"], "partition_by": ["a"]}})
    assert "f.yaml: tables.shop.t" in both and "not both" in both, both
    unknown = refused({"shop.t": {"columns": {"a": "int"}, "partition_by": ["b"]}})
    assert "tables.shop.t.partition_by[0]" in unknown, unknown
    clash = refused({"shop.t": {"columns": {"a": "int"}, "computed": {"a": "1"}}})
    assert "tables.shop.t.computed.a" in clash and "needs its own name" in clash, clash


def test_type_mapping_is_the_tables_else_its_sources_else_the_top_levels():
    from pipelines.gold.type_mapping import map_type, mappings_for

    cfg = parse_config(
        {
            "type_mapping": ["to-string"],
            "sources": [{**SOURCE, "type_mapping": ["bigint-unsigned-to-bigint"]}, {**SOURCE, "name": "t"}],
            "tables": {"shop.own": {"type_mapping": []}},
        }
    )
    assert mappings_for(cfg, "s", "shop.own") == ()
    assert mappings_for(cfg, "s", "shop.other") == ("bigint-unsigned-to-bigint",)
    assert mappings_for(cfg, "t", "shop.other") == ("to-string",)
    assert map_type("bigint(20) unsigned", ["bigint-unsigned-to-bigint"]) == "bigint"
    assert map_type("int unsigned", ["bigint-unsigned-to-bigint"]) == "int unsigned"
    assert map_type("decimal(12,2)", ["to-string"]) == "text"
    with pytest.raises(ConfigError, match=r"type_mapping\[0\]: unknown type mapping 'to-text'"):
        config({"shop.t": {"type_mapping": ["to-text"]}})


def test_from_patterns_are_python_regexes_checked_and_matched_by_one_engine():
    """One dialect (Python's ``re``, whole name): a Java-only class is refused at load naming the dialect; a
    Python-only construct (a named backreference) loads, and the same engine routes with it (gold never
    hands a pattern to Spark's RLIKE, so no pattern can fail a batch)."""
    from pipelines.routing import routed_names

    java_only = refused({"shop.t": {"from": [r"shop_\p{Digit}+\.t"]}})
    assert "f.yaml: tables.shop.t.from[0]" in java_only and "Python's re syntax" in java_only, java_only
    cfg = config({"shop.t": {"from": [r"shop_(?P<n>[0-9]+)\.t_(?P=n)"]}, "shop.u": {"from": [r"other\..*"]}})
    names = ["shop_1.t_1", "shop_1.t_2", "shop.t", "other.x", "plain.y", None]
    assert routed_names(cfg, names) == {"shop_1.t_1": "shop.t", "other.x": "shop.u"}


def test_a_replay_reads_its_file_with_the_options_of_the_configured_source():
    """``lakecdc replay --conf``: the replayed source keeps the file's ``type_mapping``, ``ignore_null_updates``
    and ``include``/``exclude`` (named ``replay_<format>``, reading the landing directory); several sources of
    the format need ``--source``, and a wrong one is refused naming the file's sources."""
    from pipelines.config import replay_source

    own = {**SOURCE, "type_mapping": ["to-string"], "ignore_null_updates": True, "exclude": ["shop.tmp"]}
    cfg = parse_config({"sources": [own, {**SOURCE, "name": "k", "format": "maxwell"}]})
    replayed = replay_source(cfg, "oms_canal", "/wh/_landing/replay_oms_canal")
    assert (replayed.name, replayed.format, replayed.path, replayed.kafka) == (
        "replay_oms_canal", "oms_canal", "/wh/_landing/replay_oms_canal", None,
    )  # fmt: skip
    assert (replayed.type_mapping, replayed.ignore_null_updates, replayed.exclude) == (("to-string",), True,
                                                                                     ("shop.tmp",))  # fmt: skip
    assert replay_source(cfg, "debezium", "/l").type_mapping is None, "no source of the format: the defaults"
    two = parse_config({"sources": [own, {**SOURCE, "name": "s2"}]})
    with pytest.raises(ConfigError, match=r"2 sources of format oms_canal \(s, s2\).*--source"):
        replay_source(two, "oms_canal", "/l")
    assert replay_source(two, "oms_canal", "/l", "s").ignore_null_updates is True
    with pytest.raises(ConfigError, match=r"--source 'nope'.*its sources: s, s2"):
        replay_source(two, "oms_canal", "/l", "nope")
    with pytest.raises(ConfigError, match="reads format maxwell"):
        replay_source(cfg, "oms_canal", "/l", "k")
