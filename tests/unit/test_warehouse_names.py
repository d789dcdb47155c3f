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
