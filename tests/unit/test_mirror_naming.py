"""``gold.naming``: readable mirror names that stay injective. The default naming is the name every
mirror had before namings; a template without ``{schema}`` reads OMS's ``tenant.database`` as two
parts; whatever a template cannot map unambiguously is hashed, so two source tables never share a
name, and no name leaves the warehouse."""

from __future__ import annotations

import itertools
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.warehouse import HASH_MARK, MirrorNaming, SourceTable, Warehouse, mirror_parts, naming_errors, safe_name

NAMINGS = [
    MirrorNaming(),
    MirrorNaming("{db}__{table}"),
    MirrorNaming("{table}__{db}"),
    MirrorNaming("{db}__{schema}__{table}", "ods_"),
    MirrorNaming("{schema}__{db}__{table}", "", "_v2"),
    MirrorNaming("{db}__{table}", "raw", "_x"),
]
#: Source tables over a small alphabet (dots, underscores, case, empty schema), and hostile ones.
PIECES = ["a", "b", "a.b", "a_b", "a__b", "A", ".", "a..b", "_a", '["a", "b"]', "."]
SOURCES = sorted(
    {
        SourceTable.of(db, schema, table)
        for db in [None, *PIECES]
        for schema in [None, "a", "b", "a.b"]
        for table in PIECES
    },
    key=repr,
)


def name(source: SourceTable, naming: MirrorNaming) -> str:
    return safe_name(mirror_parts(source, naming))


def test_the_default_naming_is_every_mirror_s_old_name():
    for source in SOURCES:
        assert mirror_parts(source, MirrorNaming()) == source.parts
        assert mirror_parts(source) == source.parts


def test_oms_tenant_database_is_two_name_parts_under_a_template_without_schema():
    customers = SourceTable.of("demo_tenant.shop", None, "customers")
    assert name(customers, MirrorNaming()).startswith("demo_tenant_shop_customers" + HASH_MARK)  # before: hashed
    assert name(customers, MirrorNaming("{db}__{table}")) == "demo_tenant__shop__customers"
    assert name(customers, MirrorNaming("{db}__{table}", "ods_", "_v1")) == "ods_demo_tenant__shop__customers_v1"
    assert name(SourceTable.of("inventory", "inventory", "stock"), MirrorNaming("{db}__{table}")) == "inventory__stock"
    # PostgreSQL-like sources keep readable names under the default template, prefixed when asked
    pg = SourceTable.of("pgdb", "public", "accounts")
    assert name(pg, MirrorNaming("{db}__{schema}__{table}", "ods_")) == "ods_pgdb__public__accounts"


@pytest.mark.parametrize("naming", NAMINGS, ids=lambda n: f"{n.prefix}{n.template}{n.suffix}")
def test_two_source_tables_never_share_a_name(naming):
    """Every pair of a few thousand source tables, hostile pieces included: distinct names under each
    naming (the default keeps its one old ambiguity: no database + schema s vs database s, which the
    mirror's identity guard refuses)."""
    seen: dict[str, SourceTable] = {}
    for source in SOURCES:
        if naming == MirrorNaming() and source.db is None and source.schema is not None:
            continue
        other = seen.setdefault(name(source, naming), source)
        assert other == source, f"{other} and {source} share {name(source, naming)}"


@pytest.mark.parametrize("naming", NAMINGS[1:], ids=lambda n: f"{n.prefix}{n.template}{n.suffix}")
def test_what_a_template_cannot_map_unambiguously_is_hashed(naming):
    hashed = [
        SourceTable.of("a", "b", "c") if "schema" not in naming.fields else SourceTable.of("a.b", None, "c"),
        SourceTable.of(None, "s", "t"),
        SourceTable.of("Shop", None, "Orders"),
        SourceTable.of("x`; DROP TABLE y; --", None, "t"),
    ]
    for source in hashed:
        assert HASH_MARK in name(source, naming), source
    assert HASH_MARK not in name(SourceTable.of("shop", None, "orders"), naming)


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.text("ab._A", max_size=5)),
            st.one_of(st.none(), st.text("ab._", max_size=4)),
            st.text("ab._", min_size=1, max_size=5),
        ),
        min_size=2,
        max_size=6,
        unique=True,
    ),
    st.sampled_from(NAMINGS[1:]),
)
@settings(max_examples=300, deadline=None)
def test_configured_namings_are_injective(tables, naming):
    sources = {SourceTable.of(*t) for t in tables}
    names = {name(s, naming) for s in sources}
    assert len(names) == len(sources)


@pytest.mark.parametrize("naming", NAMINGS, ids=lambda n: f"{n.prefix}{n.template}{n.suffix}")
def test_names_stay_inside_the_warehouse_and_never_start_with_an_underscore(tmp_path, naming):
    wh = Warehouse(str(tmp_path / "wh"))
    for source in SOURCES:
        real = os.path.realpath(wh.mirror(mirror_parts(source, naming)).path)
        base = os.path.basename(real)
        assert real.startswith(os.path.realpath(tmp_path / "wh" / "gold") + os.sep)
        assert re.fullmatch(r"[a-z0-9][a-z0-9_]*", base) and len(base) <= 96, base


@pytest.mark.parametrize(
    "template, prefix, suffix, fields",
    [
        ("{table}", "", "", ["template"]),
        ("{db}", "", "", ["template"]),
        ("{db}_{table}", "", "", ["template"]),
        ("x_{db}__{table}", "", "", ["template"]),
        ("{db}__{db}__{table}", "", "", ["template"]),
        ("{db}__{tabel}", "", "", ["template"]),
        ("{db}__{table}", "_ods", "", ["prefix"]),
        ("{db}__{table}", "ods__", "", ["prefix"]),
        ("{db}__{table}", "Ods_", "v2_", ["prefix", "suffix"]),
        ("{db}__{schema}__{table}", "ods_", "_v2", []),
        ("{table}__{db}", "ods", "v2", []),
    ],
)
def test_a_naming_that_could_not_stay_injective_is_refused(template, prefix, suffix, fields):
    assert [f for f, _ in naming_errors(MirrorNaming(template, prefix, suffix))] == fields


def test_the_small_alphabet_census_under_every_naming():
    """Names over {a, _, .} as database and table: no two share a mirror, whatever the naming."""
    texts = ["".join(t) for n in range(1, 5) for t in itertools.product("a_.", repeat=n)]
    for naming in NAMINGS:
        mapped: dict[str, SourceTable] = {}
        for db, table in itertools.product(texts, texts):
            source = SourceTable.of(db, None, table)
            assert mapped.setdefault(name(source, naming), source) == source
