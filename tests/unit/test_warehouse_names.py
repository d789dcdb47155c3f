"""Table names come from messages: they can neither leave the warehouse nor inject SQL."""

from __future__ import annotations

import itertools
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.warehouse import HASH_MARK, SourceTable, TableRef, Warehouse, quote_ident, safe_name

HOSTILE = [
    "shop.orders",
    "../../etc.passwd",
    "a/b.c",
    "x`; DROP TABLE y; --.t",
    "db.'quoted\"",
    "..",
    ".",
    "tenant.db.table",
    "Ünïcode.名前",
    "a" * 2000,
    "db.t\u0000nul",
    "db. spaced name ",
    "_hidden.t",
    "a.b_c",
    "a_b.c",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_mirror_paths_stay_inside_the_warehouse(tmp_path, name):
    wh = Warehouse(str(tmp_path / "wh"))
    for ref in (wh.mirror(name), wh.tombstones(name)):
        real = os.path.realpath(ref.path)
        assert real.startswith(os.path.realpath(tmp_path / "wh" / "gold") + os.sep)
        assert re.fullmatch(r"[a-z0-9_]+", os.path.basename(real))
        assert len(os.path.basename(real)) <= 96


def test_names_are_stable_and_distinct():
    names = [safe_name(n) for n in HOSTILE]
    assert len(set(names)) == len(HOSTILE), "two different source tables must never share a mirror"
    assert safe_name("shop.orders") == "shop__orders" == safe_name("shop.orders")
    assert safe_name("a.b_c") != safe_name("a_b.c")


def test_catalog_names_are_quoted_for_sql():
    ref = Warehouse(None, catalog="main", schema="cdc").mirror("x`; DROP TABLE y; --.t")
    assert ref.path is None and ref.name.startswith("main.cdc.gold_x_drop_table_y_t___")
    assert re.fullmatch(r"`main`\.`cdc`\.`gold_[a-z0-9_]+`", ref.sql)
    assert quote_ident("a`b") == "`a``b`"
    assert TableRef(path="/w/gold/x`y").sql == "delta.`/w/gold/x``y`"


def test_every_name_over_a_small_alphabet_has_its_own_mirror():
    """The issue's census: names over {a, b, _, .} up to length 7 gave 751 colliding pairs before."""
    names = ["".join(t) for n in range(1, 8) for t in itertools.product("ab_.", repeat=n)]
    mapped = {}
    for name in names:
        assert mapped.setdefault(safe_name(name), name) == name, f"{name!r} and {mapped[safe_name(name)]!r} collide"


@pytest.mark.parametrize(
    "first, second",
    [
        (("shop", "orders"), ("Shop", "Orders")),
        (("a__b", "c"), ("a", "b__c")),
        (("a.b", "c"), ("a", "b.c")),
        (("a", "b", "c"), ("a.b", "c")),
        (("pgdb", "public", "accounts"), ("pgdb", "audit", "accounts")),
        (("pgdb", "public", "accounts"), ("pgdb", "accounts")),
    ],
)
def test_named_collisions_of_the_issue_are_distinct(first, second):
    assert safe_name(first) != safe_name(second)


def test_a_crafted_plain_name_cannot_equal_a_hashed_one():
    hashed = safe_name(("Shop", "Orders"))
    assert HASH_MARK in hashed
    crafted = tuple(hashed.split("__"))  # a table named to spell the hashed form
    assert safe_name(crafted) != hashed


@given(
    st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=3),
    st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=3),
)
def test_safe_name_is_injective(a, b):
    if tuple(a) != tuple(b):
        assert safe_name(tuple(a)) != safe_name(tuple(b))
    assert safe_name(tuple(a)) == safe_name(tuple(a))


def test_source_table_identity_keeps_schema_and_case():
    assert SourceTable.of("pgdb", "public", "accounts") != SourceTable.of("pgdb", "audit", "accounts")
    assert SourceTable.of("pgdb", "public", "accounts").name == "pgdb.public.accounts"
    assert SourceTable.of("shop", "shop", "orders") == SourceTable.of("shop", None, "orders")  # MySQL's schema = db
    assert SourceTable.of("Shop", None, "Orders").name == "Shop.Orders"
    t = SourceTable.of("a.b", None, "c")
    assert SourceTable.from_key(t.key) == t and t.key != SourceTable.of("a", "b", "c").key
    assert SourceTable.of("db", None, "t\ud800").key  # a lone surrogate does not raise
    assert safe_name(("db", "t\ud800"))


# ---- Unity Catalog: a schema per layer, or one shared schema with the layer as a prefix


def _catalog(**schemas) -> Warehouse:
    return Warehouse(None, catalog="main", schema="cdc", checkpoints="/Volumes/main/cdc/ck", schemas=schemas)


def test_layers_sharing_a_schema_prefix_their_tables():
    wh = _catalog()
    assert wh.bronze.name == "main.cdc.bronze_raw_messages"
    assert wh.silver("changes").name == "main.cdc.silver_changes"
    assert wh.mirror("shop.orders").name == "main.cdc.gold_shop__orders"
    assert wh.tombstones("shop.orders").name == "main.cdc.gold__tombstones_shop__orders"


def test_a_schema_per_layer_names_tables_plainly():
    wh = _catalog(bronze="raw", silver="changes_log", gold="mirrors")
    assert wh.bronze.name == "main.raw.raw_messages"
    assert [wh.silver(n).name for n in ("changes", "quarantine")] == [
        "main.changes_log.changes",
        "main.changes_log.quarantine",
    ]
    assert wh.mirror("shop.orders").name == "main.mirrors.shop__orders"
    assert wh.tombstones("shop.orders").name == "main.mirrors._tombstones_shop__orders"
    assert wh.history("shop.orders").name == "main.mirrors._history_shop__orders"
    assert wh.applied_changes("shop.orders").name == "main.mirrors._applied_shop__orders"


def test_only_the_layers_that_share_a_schema_are_prefixed():
    wh = _catalog(gold="mirrors")  # bronze and silver share cdc
    assert (wh.bronze.name, wh.silver("changes").name) == ("main.cdc.bronze_raw_messages", "main.cdc.silver_changes")
    assert wh.mirror("shop.orders").name == "main.mirrors.shop__orders"


def test_a_target_schema_table_chooses_the_mirrors_schema_and_name():
    for wh in (_catalog(), _catalog(gold="mirrors")):
        assert wh.mirror("sales.orders", target=True).name == "main.sales.orders"
        assert wh.tombstones("sales.orders", target=True).name == "main.sales._tombstones_orders"
        assert wh.mirror("orders", target=True).name == wh.mirror("orders").name  # one part: the gold schema
    local = Warehouse("/w")
    assert local.mirror("sales.orders", target=True).path == "/w/gold/sales__orders"  # paths keep one gold folder


@given(st.lists(st.text("ab_.T", min_size=1, max_size=8), min_size=1, max_size=3), st.booleans(), st.booleans())
def test_side_tables_never_share_a_name_with_a_mirror(parts, shared, target):
    """A side table's name starts with ``_`` after the layer prefix; a mirror's never does."""
    wh = _catalog() if shared else _catalog(gold="mirrors")
    if target and len(parts) == 2:
        parts[0] = "sales"  # a target's schema is one plain name (configuration checks it)
    mirror = wh.mirror(parts, target=target)
    sides = [wh.tombstones(parts, target=target), wh.applied_changes(parts, target=target)]
    sides.append(wh.history(parts, target=target))
    assert all(s.name.rsplit(".", 1)[1].removeprefix(wh.prefix("gold")).startswith("_") for s in sides)
    assert not mirror.name.rsplit(".", 1)[1].removeprefix(wh.prefix("gold")).startswith("_")
    assert [wh.side_of(mirror, k) for k in ("tombstones", "applied", "history")] == sides


def test_mirror_schemas_are_gold_and_the_targets():
    from pipelines.config import parse_config

    cfg = parse_config(
        {
            "catalog": "main",
            "schema": "cdc",
            "schemas": {"gold": "mirrors"},
            "checkpoints": "/Volumes/main/cdc/ck",
            "sources": [{"name": "s", "format": "oms_default", "path": "/landing"}],
            "tables": {"shop.orders": {"target": "sales.orders"}, "shop.items": {"target": "items"}},
        }
    )
    assert Warehouse.from_config(cfg).mirror_schemas == ("mirrors", "sales")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"schema": None}, "every layer needs a schema"),
        ({"schema": None, "schemas": {"bronze": "b", "silver": "s"}}, "schemas.gold"),
        ({"schemas": {"platinum": "p"}}, "schemas.platinum: unknown field"),
        ({"schemas": {"gold": "a.b"}}, "schemas.gold: 'a.b' is not one name"),
        ({"catalog": None}, "set catalog too"),
        ({"tables": {"shop.t": {"target": "a.b.c"}}}, "a target is <table> or <schema>.<table>"),
        ({"tables": {"shop.t": {"target": "sales._x"}}}, "a target is <table> or <schema>.<table>"),
    ],
)
def test_catalog_locations_are_validated(change, message):
    from pipelines.config import parse_config
    from pipelines.errors import ConfigError

    doc = {
        "catalog": "main",
        "schema": "cdc",
        "checkpoints": "/Volumes/main/cdc/ck",
        "sources": [{"name": "s", "format": "oms_default", "path": "/landing"}],
        **change,
    }
    doc = {k: v for k, v in doc.items() if v is not None}
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config(doc)


def test_a_schema_per_layer_with_no_shared_schema_is_complete():
    from pipelines.config import parse_config

    cfg = parse_config(
        {
            "catalog": "main",
            "schemas": {"bronze": "b", "silver": "s", "gold": "g"},
            "checkpoints": "/Volumes/main/cdc/ck",
            "sources": [{"name": "s", "format": "oms_default", "path": "/landing"}],
        }
    )
    wh = Warehouse.from_config(cfg)
    assert (wh.bronze.name, wh.silver("ddl_log").name, wh.mirror("a.b").name) == (
        "main.b.raw_messages",
        "main.s.ddl_log",
        "main.g.a__b",
    )
