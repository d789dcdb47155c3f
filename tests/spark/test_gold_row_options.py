"""Gold's row options through the real gold stage, against the reference model: ``deletes: soft`` (with
history, ``ignore_null_updates``, a TRUNCATE, late changes and a replay; a keyless table refused) and
``where`` (changes out of the filter skipped and counted, an UPDATE moving a row out of it or into it)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from pipelines.formats.base import Change
from pipelines.testing.model import MirrorModel
from tests.spark.test_gold_semantics import TYPES, Gold, _row, change


def truncate(n: int) -> Change:
    return Change(
        op="TRUNCATE", db="shop", table="t", key_columns=("id",), seq=(1_700_000_000_000 + n,),
        event_time=f"2023-11-14T22:13:20.{n:03d}Z", ddl="TRUNCATE TABLE shop.t",
    )  # fmt: skip


def expected(changes: list[Change], soft: bool = True) -> list[dict]:
    """The model's mirror of shop.t in export form."""
    out = []
    for r in MirrorModel(soft={"shop.t"} if soft else ()).add_all(changes).rows("shop.t"):
        row = {"id": int(r["id"]), "a": None if r.get("a") is None else int(r["a"]), "b": r.get("b"),
               "d": r.get("d")}  # fmt: skip
        if soft:
            row.update(_deleted=r["_deleted"] == "true", _deleted_at=_instant(r["_deleted_at"]))
        out.append(row)
    return out


def _instant(text: str | None) -> datetime | None:
    """An event time as an instant (export prints ``.01Z`` where a message says ``.010Z``)."""
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def _exported(gold: Gold) -> list[dict]:
    rows = [{c: r.get(c) for c in ("id", "a", "b", "d", "_deleted", "_deleted_at") if c in r} for r in gold.rows()]
    return [{**r, "_deleted_at": _instant(r["_deleted_at"])} if "_deleted_at" in r else r for r in rows]


SOFT_BATCHES = [
    [
        change("INSERT", 1, after=_row(1, a="1", b="x", d="1.10")),
        change("INSERT", 2, after=_row(2, a="2", b="y", d="2.20")),
        change("INSERT", 3, after=_row(3, a="3", b="z", d="3.30")),
        change("INSERT", 4, after=_row(4, a="4", b="w", d="4.40")),
        change("DELETE", 5, before=_row(4, a="4", b="w", d="4.40")),  # inserted and deleted in one batch
    ],
    [
        change("DELETE", 6, before=_row(1, a="1", b="x", d="1.10")),
        change("UPDATE", 7, before=_row(2, a="2", b="y", d="2.20"), after=_row(2, a="20", b=None, d="2.25")),
        change("DELETE", 8, before=_row(9, a="9", b="q", d="9.90")),  # a key never held: nothing written
    ],
    [
        change("INSERT", 9, after=_row(1, a="11", b="x2", d="1.11")),  # revives key 1
        change("DELETE", 6, before=_row(2, a="2", b="y", d="2.20")),  # late: older than key 2's update
    ],
    [truncate(10), change("INSERT", 11, after=_row(3, a="33", b="z3", d="3.33"))],  # 3 revived after it
]


def test_soft_deletes_keep_rows_marked_as_the_model_says(spark, tmp_path):
    """Every step of :data:`SOFT_BATCHES` against the model: a DELETE marks the row (its values kept), an
    INSERT revives it, a late DELETE is stale, a TRUNCATE marks every row; ``ignore_null_updates`` keeps
    ``b`` of key 2; the history is the one hard deletes give; ``status`` counts the marked rows. A replay
    of the deletes changes nothing."""
    from pipelines.silver import seq_text
    from pipelines.status import collect_status

    gold = Gold(spark, tmp_path / "soft", deletes="soft", history=True, ignore_null_updates=True)
    seen: list[Change] = []
    for i, batch in enumerate(SOFT_BATCHES):
        stats = gold.apply(batch)
        seen += batch
        want = expected(seen)
        # ignore_null_updates: the model's UPDATE writes b NULL, the mirror keeps the row's b
        want = [{**r, "b": "y"} if r["id"] == 2 and r["b"] is None else r for r in want]
        assert _exported(gold) == want, f"after batch {i}"
        if i == 2:
            assert (stats.applied, stats.stale) == (1, 1), "the late DELETE is stale"
    rows = {r["id"]: r for r in _exported(gold)}
    assert rows[3] == {"id": 3, "a": 33, "b": "z3", "d": "3.33", "_deleted": False, "_deleted_at": None}
    assert rows[1]["_deleted"] and rows[1]["_deleted_at"] == _instant("2023-11-14T22:13:20.010Z"), (
        "marked by the truncate"
    )
    assert rows[4]["_deleted"] and rows[4]["_deleted_at"] == _instant("2023-11-14T22:13:20.005Z") and rows[4]["a"] == 4
    assert 9 not in rows
    [mirror] = collect_status(spark, gold.cfg).mirrors
    assert (mirror.rows, mirror.soft_deleted) == (4, 3), "keys 1, 2, 4 marked; 3 revived"

    def at(n: int | None) -> str | None:
        return None if n is None else seq_text((1_700_000_000_000 + n,))

    history = sorted(
        (r["id"], r["a"], r["_valid_from_seq"], r["_valid_to_seq"])
        for r in gold.wh.history("shop.t").read(spark).collect()
    )
    # as with hard deletes: a DELETE closes the key's version, the TRUNCATE (10) the current ones
    assert history == sorted(
        (k, a, at(since), at(until))
        for k, a, since, until in [(1, 1, 1, 6), (1, 11, 9, 10), (2, 2, 2, 7), (2, 20, 7, 10), (3, 3, 3, 10),
                                   (3, 33, 11, None), (4, 4, 4, 5)]
    )  # fmt: skip
    before = _exported(gold)
    gold.apply(SOFT_BATCHES[1])  # the deletes again
    assert _exported(gold) == before, "a replay changes nothing"


def test_soft_truncates_mark_the_same_rows_wherever_the_batch_boundary_falls(spark, tmp_path):
    """``deletes: soft`` with TRUNCATEs (issue 40): rows inserted before a TRUNCATE of the same batch are kept
    and marked, as when the TRUNCATE comes in a batch of its own; each of two TRUNCATEs of one batch marks
    what it covers with its own time; a row deleted before stays marked at its DELETE's time. One batch and
    three give the model's mirror and the same counts (every change and TRUNCATE applied)."""
    changes = [
        change("INSERT", 1, after=_row(1, a="1", b="x", d="1.10")),
        change("INSERT", 2, after=_row(2, a="2", b="y", d="2.20")),
        change("DELETE", 3, before=_row(2, a="2", b="y", d="2.20")),
        truncate(4),
        change("INSERT", 5, after=_row(3, a="3", b="z", d="3.30")),
        truncate(6),
        change("INSERT", 7, after=_row(1, a="11", b="x2", d="1.11")),  # revives key 1
    ]
    results = []
    for name, batches in (("one", [changes]), ("three", [changes[:3], changes[3:5], changes[5:]])):
        gold = Gold(spark, tmp_path / name, deletes="soft")
        counts = [(s.applied, s.stale, s.quarantined) for s in map(gold.apply, batches)]
        results.append((_exported(gold), tuple(map(sum, zip(*counts)))))
    assert results[0] == results[1], results
    assert results[0] == (expected(changes), (7, 0, 0))
    rows = {r["id"]: r for r in results[0][0]}
    assert (rows[2]["_deleted_at"], rows[3]["_deleted_at"]) == (
        _instant("2023-11-14T22:13:20.003Z"), _instant("2023-11-14T22:13:20.006Z"),
    ) and not rows[1]["_deleted"]  # fmt: skip


def test_soft_deletes_give_the_model_mirror_when_a_delete_arrives_before_older_changes(spark, tmp_path):
    """``deletes: soft`` when delivery puts a key's DELETE in an earlier batch than older changes of the key
    (bronze files read one per batch, Kafka partitions): an image older than the DELETE and newer than what
    the deleted row holds gives the row its values and leaves it marked; one inserted where the DELETE found
    no row inserts it marked; one older than the row's image is stale; a change newer than the DELETE in the
    same batch as late ones revives the row. The mirror is the model's (the changes in sequence order) and
    the one a single batch gives; every change is applied, stale or quarantined."""

    def image(key: int, a: str) -> dict:
        return _row(key, a=a, b=f"b{a}", d=f"{key}.{int(a):02d}")

    k1 = [change("INSERT", 1, after=image(1, "1")),
          change("UPDATE", 3, before=image(1, "1"), after=image(1, "3")),
          change("UPDATE", 5, before=image(1, "3"), after=image(1, "5")),
          change("DELETE", 7, before=image(1, "5"))]  # fmt: skip
    k2 = [change("INSERT", 2, after=image(2, "2")), change("DELETE", 4, before=image(2, "2")),
          change("INSERT", 10, after=image(2, "10"))]  # fmt: skip
    k3 = [change("INSERT", 6, after=image(3, "6")), change("DELETE", 8, before=image(3, "6")),
          change("UPDATE", 9, before=image(3, "6"), after=image(3, "9"))]  # fmt: skip
    batches = [
        [k1[1], k1[3], k2[1], k3[1]],  # the DELETEs first: key 2's and key 3's find no row
        [k1[2], k1[0], k2[0]],  # late: 5 and 1 under key 1's DELETE (1 older than 3), 2 under key 2's
        [k1[0], k2[2], k3[0], k3[2]],  # 1 again (stale), key 2 revived, key 3's late insert and revive
    ]
    results = []
    for name, split in (("one", [[c for b in batches for c in b]]), ("three", batches)):
        gold = Gold(spark, tmp_path / name, deletes="soft")
        stats = [gold.apply(b) for b in split]
        assert sum(s.unaccounted for s in stats) == 0
        results.append(_exported(gold))
    assert results[0] == results[1] == expected(sorted(k1 + k2 + k3, key=lambda c: c.seq)), results
    rows = {r["id"]: r for r in results[1]}
    assert (rows[1]["a"], rows[1]["_deleted"], rows[1]["_deleted_at"]) == (
        5,
        True,
        _instant("2023-11-14T22:13:20.007Z"),
    )
    assert (rows[2]["a"], rows[2]["_deleted"], rows[3]["a"], rows[3]["_deleted"]) == (10, False, 9, False)


def test_tables_whose_options_cannot_apply_are_refused_to_quarantine_with_why(spark, tmp_path):
    """Soft deletes of a table without a key, a ``where`` and a ``computed`` expression naming an unknown
    column: each table's change goes to quarantine with the reason, naming the table and the expression;
    the batch goes on."""
    from pipelines.config import parse_config

    gold = Gold(spark, tmp_path)
    gold.cfg = parse_config({
        "warehouse": gold.cfg.warehouse, "quality_checks": False,
        "sources": [{"name": "s", "format": "oms_canal", "path": str(tmp_path / "none")}],
        "tables": {"shop.k": {"deletes": "soft"}, "shop.w": {"where": "tenant_id = 7"},
                   "shop.c": {"computed": {"x": "upper(nothing_here)"}}},
    })  # fmt: skip
    types = {"a": "int", "b": "varchar(16)"}
    stats = gold.apply([
        change("INSERT", 1, after={"a": "1", "b": "x"}, types=types, key=(), table="k"),
        change("INSERT", 2, after=_row(1, a="5"), table="w"),
        change("INSERT", 3, after=_row(1, a="5"), table="c"),
    ])  # fmt: skip
    assert (stats.quarantined, stats.unaccounted) == (3, 0)
    reasons = {r["table"]: r["reason"] for r in gold.quarantine()}
    assert "tables.shop.k.deletes: soft needs a key" in reasons["k"], reasons
    assert "tables.shop.w.where 'tenant_id = 7'" in reasons["w"] and "tenant_id" in reasons["w"], reasons
    assert "tables.shop.c.computed.x 'upper(nothing_here)'" in reasons["c"], reasons


# ---------------------------------------------------------------- where


def test_where_keeps_matching_rows_moves_rows_in_and_out_and_counts_the_rest_skipped(spark, tmp_path):
    """``where: a >= 10``: changes of rows outside are skipped (counted, not quarantined); an UPDATE that
    moves a row in inserts it, one that moves it out deletes it; the mirror is the model's table filtered.
    A replay of the second batch changes nothing. The condition's ``try_cast`` cannot read any ``b``: it is
    NULL (a CAST that raises on a row quarantines it: tests/spark/test_gold_row_options_batches.py)."""
    gold = Gold(spark, tmp_path, where="a >= 10 AND try_cast(b AS INT) IS NULL")
    first = [
        change("INSERT", 1, after=_row(1, a="5", b="x")),
        change("INSERT", 2, after=_row(2, a="15", b="y")),
        change("INSERT", 3, after=_row(3, a="20", b="z")),
    ]
    second = [
        change("UPDATE", 4, before=_row(1, a="5", b="x"), after=_row(1, a="12", b="x")),  # moves in
        change("UPDATE", 5, before=_row(2, a="15", b="y"), after=_row(2, a="3", b="y")),  # moves out
        change("UPDATE", 6, before=_row(3, a="20", b="z"), after=_row(3, a="25", b="z")),
        change("INSERT", 7, after=_row(4, a="1", b="w")),
        change("DELETE", 8, before=_row(4, a="1", b="w")),
    ]
    stats = gold.apply(first)
    assert (stats.applied, stats.skipped, stats.quarantined, stats.unaccounted) == (2, 1, 0, 0)
    stats = gold.apply(second)
    assert (stats.applied, stats.skipped, stats.quarantined, stats.unaccounted) == (3, 2, 0, 0)
    model = MirrorModel().add_all(first + second).rows("shop.t", where=lambda r: int(r["a"]) >= 10)
    want = [{"id": int(r["id"]), "a": int(r["a"]), "b": r["b"]} for r in model]
    assert gold.rows() == want == [{"id": 1, "a": 12, "b": "x"}, {"id": 3, "a": 25, "b": "z"}]
    assert gold.quarantine() == []
    gold.apply(second)
    assert gold.rows() == want


# ---------------------------------------------------------------- shards (from)


def _shard(ch: Change, db: str, table: str) -> Change:
    return replace(ch, db=db, table=table)


def _as_routed(ch: Change) -> Change:
    """A shard's change as the model sees it: one of shop.orders, the shard's name in _source_table."""
    tag = {"_source_table": f"{ch.db}.{ch.table}"}
    return replace(
        ch, db="shop", table="orders", key_columns=("_source_table", "id"),
        before=None if ch.before is None else {**ch.before, **tag}, after=None if ch.after is None else {**ch.after, **tag},
    )  # fmt: skip


def test_shards_feed_one_mirror_keyed_by_source_table_and_clashes_are_refused(spark, tmp_path):
    """Two shards with the same ids land in one mirror, told apart by ``_source_table``; a column one shard
    adds widens the mirror; a table that matches no ``from`` keeps its own mirror; a table matching two
    entries, and a shard's TRUNCATE, go to quarantine with why; ``exclude`` acts on a shard's own name,
    before routing. The mirror equals the model of the routed changes. The pattern is Python's ``re`` only
    (a named backreference, which Spark's RLIKE refuses): routing is decided in Python, never in Spark.
    Then the shards differ (issue 40): a full image of the shard without ``e`` is no DROP (under ``fail``),
    another shard's narrower type is no schema change, and a retype quarantines that shard's change only."""
    from pipelines.config import parse_config

    gold = Gold(spark, tmp_path)
    gold.cfg = parse_config({
        "warehouse": gold.cfg.warehouse, "quality_checks": False,
        "sources": [{"name": "s", "format": "oms_canal", "path": str(tmp_path / "none"), "exclude": ["shop_4.*"]}],
        "tables": {
            "shop.orders": {"from": [r"shop_(?P<n>[0-9]+)\.orders_(?P=n)"], "key": ["_source_table", "id"],
                            "deletes": "soft"},
            "shop.late": {"from": [r"shop_3\..*"]},
        },
    })  # fmt: skip
    wide = {**TYPES, "e": "varchar(8)"}
    routed = [
        _shard(change("INSERT", 1, after=_row(1, a="1", b="x")), "shop_1", "orders_1"),
        _shard(change("INSERT", 2, after=_row(1, a="2", b="y")), "shop_2", "orders_2"),
        _shard(change("INSERT", 3, after=_row(2, a="3", b="z", e="new"), types=wide), "shop_2", "orders_2"),
        _shard(change("DELETE", 4, before=_row(1, a="1", b="x")), "shop_1", "orders_1"),
    ]
    own = change("INSERT", 5, after=_row(7, a="7"), table="customers")
    clash = _shard(change("INSERT", 6, after=_row(9, a="9")), "shop_3", "orders_3")
    shard_truncate = replace(truncate(7), db="shop_2", table="orders_2")
    excluded = _shard(change("INSERT", 8, after=_row(5, a="5")), "shop_4", "orders_4")  # matches from, excluded
    stats = gold.apply([*routed, own, clash, shard_truncate, excluded])
    assert (stats.changes, stats.applied, stats.quarantined, stats.unaccounted) == (7, 5, 2, 0), "excluded first"
    rows = [{k: r.get(k) for k in ("_source_table", "id", "a", "b", "e", "_deleted")} for r in gold.rows("shop.orders")]
    model = MirrorModel(soft={"shop.orders"}).add_all(_as_routed(c) for c in routed).rows("shop.orders")
    want = [{"_source_table": r["_source_table"], "id": int(r["id"]), "a": int(r["a"]), "b": r["b"], "e": r.get("e"),
             "_deleted": r["_deleted"] == "true"} for r in model]  # fmt: skip
    assert sorted(rows, key=str) == sorted(want, key=str)
    assert [(r["_source_table"], r["id"], r["_deleted"]) for r in sorted(rows, key=lambda r: (r["_source_table"], r["id"]))] == [
        ("shop_1.orders_1", 1, True), ("shop_2.orders_2", 1, False), ("shop_2.orders_2", 2, False),
    ]  # fmt: skip
    assert gold.rows("shop.customers") == [{"id": 7, "a": 7}]
    [truncated, clashed] = sorted((r["reason"] for r in gold.quarantine()), key=lambda r: "TRUNCATE" not in r)
    assert "matches the from patterns of two mirrors" in clashed and "shop_3.orders_3" in clashed, clashed
    assert r"'shop_(?P<n>[0-9]+)\\.orders_(?P=n)'" in clashed and r"'shop_3\\..*'" in clashed, clashed
    assert truncated.startswith("a TRUNCATE of shop_2.orders_2"), truncated

    wider = {**TYPES, "a": "bigint"}
    differing = [  # shop_1 never had e; its a is a bigint now, shop_2's still an int, and once text
        _shard(change("INSERT", 9, after=_row(3, a="5000000000", b="w"), types=wider), "shop_1", "orders_1"),
        _shard(change("INSERT", 10, after=_row(3, a="6", b="v", e="x2"), types=wide), "shop_2", "orders_2"),
        _shard(change("INSERT", 11, after=_row(4, a="abc"), types={**TYPES, "a": "varchar(8)"}), "shop_2", "orders_2"),
    ]
    stats = gold.apply(differing)
    assert (stats.applied, stats.quarantined, stats.unaccounted) == (2, 1, 0)
    rows = {(r["_source_table"], r["id"]): (r["a"], r.get("e")) for r in gold.rows("shop.orders")}
    assert (rows[("shop_1.orders_1", 3)], rows[("shop_2.orders_2", 3)]) == ((5000000000, None), (6, "x2"))
    assert ("shop_2.orders_2", 4) not in rows
    types = {f.name: f.dataType.simpleString() for f in gold.mirror("shop.orders").schema.fields}
    assert (types["a"], types["e"]) == ("bigint", "string")
    retyped = [r["reason"] for r in gold.quarantine() if "retyped" in r["reason"]]
    assert len(retyped) == 1 and "column 'a' retyped" in retyped[0] and "sharded" in retyped[0], retyped


# ---------------------------------------------------------------- computed


def test_computed_columns_are_evaluated_at_apply_and_a_row_they_fail_on_is_quarantined(spark, tmp_path):
    """``a2 = a * 2`` and ``day = to_date(b)`` (``b`` a varchar): the mirror is the model's rows with the
    columns computed in Python; a ``b`` that is no date is quarantined with the expression and the value,
    and an UPDATE whose NULL ``b`` means unchanged (``ignore_null_updates``) keeps ``day``."""
    gold = Gold(
        spark, tmp_path, computed={"a2": "a * 2", "day": "to_date(b)"}, partition_by=["day"], ignore_null_updates=True
    )
    changes = [
        change("INSERT", 1, after=_row(1, a="3", b="2024-01-05")),
        change("INSERT", 2, after=_row(2, a="4", b="nope")),  # to_date fails: quarantined
        change("UPDATE", 3, before=_row(1, a="3", b="2024-01-05"), after=_row(1, a="5", b="2024-02-29")),
    ]
    stats = gold.apply(changes)
    assert (stats.applied, stats.quarantined, stats.unaccounted) == (2, 1, 0)
    model = MirrorModel().add_all(c for c in changes if c.seq != (1_700_000_000_002,)).rows("shop.t")
    want = [{"id": int(r["id"]), "a": int(r["a"]), "b": r["b"], "a2": 2 * int(r["a"]), "day": r["b"]} for r in model]
    assert gold.rows() == want == [{"id": 1, "a": 5, "b": "2024-02-29", "a2": 10, "day": "2024-02-29"}]
    [refused] = gold.quarantine()
    assert "computed column day = to_date(b) fails on this row" in refused["reason"], refused["reason"]
    assert "nope" in refused["reason"], refused["reason"]
    types = {f.name: f.dataType.simpleString() for f in gold.mirror().schema.fields}
    assert (types["a2"], types["day"]) == ("int", "date")
    gold.apply([change("UPDATE", 4, before=_row(1, a="5", b="2024-02-29"), after=_row(1, a="6", b=None))])
    assert gold.rows() == [{"id": 1, "a": 6, "b": "2024-02-29", "a2": 12, "day": "2024-02-29"}]
    # partition_by a computed column, and a column the source adds later (schema evolution) beside it
    mirror = gold.wh.mirror("shop.t")
    assert list(spark.sql(f"DESCRIBE DETAIL {mirror.sql}").first()["partitionColumns"]) == ["day"]
    wide = {**TYPES, "e": "varchar(8)"}
    gold.apply([change("INSERT", 5, after=_row(3, a="1", b="2024-03-01", e="new"), types=wide)])
    assert gold.rows()[-1] == {"id": 3, "a": 1, "b": "2024-03-01", "a2": 2, "day": "2024-03-01", "e": "new"}
    assert list(spark.sql(f"DESCRIBE DETAIL {mirror.sql}").first()["partitionColumns"]) == ["day"]


def test_preflight_names_the_file_table_and_expression_of_a_bad_where_or_computed(spark):
    from pipelines.config import parse_config
    from pipelines.preflight import row_expression_errors

    cfg = parse_config(
        {
            "sources": [{"name": "s", "format": "oms_canal", "path": "/none"}],
            "tables": {
                "shop.t": {"columns": {"id": "bigint", "b": "varchar(8)"}, "where": "tenant = 7",
                           "computed": {"day": "to_date(b)", "bad": "upper(nope)"}},
                "shop.u": {"computed": {"x": "to_date("}},
            },
        },
        origin="f.yaml",
    )  # fmt: skip
    errors = row_expression_errors(spark, cfg)
    assert len(errors) == 3, errors
    assert errors[0].startswith("f.yaml: tables.shop.t.where 'tenant = 7'") and "tenant" in errors[0], errors
    assert errors[1].startswith("f.yaml: tables.shop.t.computed.bad 'upper(nope)'"), errors
    assert errors[2].startswith("f.yaml: tables.shop.u.computed.x 'to_date('"), errors


# ---------------------------------------------------------------- type_mapping


def test_type_mappings_to_string_keeps_exact_text_and_unsigned_bigint_quarantines_what_does_not_fit(spark, tmp_path):
    """``to-string``: every column STRING, each value its canonical text (``1.10`` keeps its zero, as the
    model's row holds it); ``bigint-unsigned-to-bigint``: BIGINT, and 2^64 - 1 is a misfit in quarantine."""
    texts = Gold(spark, tmp_path / "s", type_mapping=["to-string"])
    inserted = [change("INSERT", 1, after=_row(1, a="7", b="x", d="1.10"))]
    texts.apply(inserted)
    types = {f.name: f.dataType.simpleString() for f in texts.mirror().schema.fields if not f.name.startswith("_")}
    assert types == {"id": "string", "a": "string", "b": "string", "d": "string"}
    assert (
        texts.rows() == MirrorModel().add_all(inserted).rows("shop.t") == [{"id": "1", "a": "7", "b": "x", "d": "1.10"}]
    )

    wide = {"id": "bigint", "u": "bigint unsigned"}
    ints = Gold(spark, tmp_path / "u", type_mapping=["bigint-unsigned-to-bigint"])
    stats = ints.apply([change("INSERT", 1, after={"id": "1", "u": "5"}, types=wide),
                        change("INSERT", 2, after={"id": "2", "u": "18446744073709551615"}, types=wide)])  # fmt: skip
    assert (stats.applied, stats.quarantined) == (1, 1)
    assert {f.name: f.dataType.simpleString() for f in ints.mirror().schema.fields}["u"] == "bigint"
    assert ints.rows() == [{"id": 1, "u": 5}]
    [misfit] = ints.quarantine()
    assert "18446744073709551615" in misfit["reason"] and "does not fit" in misfit["reason"], misfit["reason"]
