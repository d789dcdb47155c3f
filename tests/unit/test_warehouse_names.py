"""Table names come from messages: they can neither leave the warehouse nor inject SQL."""
from __future__ import annotations

import os
import re

import pytest

from pipelines.warehouse import TableRef, Warehouse, quote_ident, safe_name

HOSTILE = [
    "shop.orders", "../../etc.passwd", "a/b.c", "x`; DROP TABLE y; --.t", "db.'quoted\"", "..", ".",
    "tenant.db.table", "Ünïcode.名前", "a" * 2000, "db.t\u0000nul", "db. spaced name ", "_hidden.t", "a.b_c", "a_b.c",
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
    assert ref.path is None and ref.name.startswith("main.cdc.gold_t_")
    assert re.fullmatch(r"`main`\.`cdc`\.`gold_[a-z0-9_]+`", ref.sql)
    assert quote_ident("a`b") == "`a``b`"
    assert TableRef(path="/w/gold/x`y").sql == "delta.`/w/gold/x``y`"
