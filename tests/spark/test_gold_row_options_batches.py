"""Gold's row options whatever a batch's boundary (issue 40): the same changes, applied as one micro-batch,
as two or as many, leave the same mirrors and the same counts. Tables with every row option share one
warehouse: ``deletes: soft`` with a TRUNCATE, ``where`` over Debezium updates with and without a
before-image (PostgreSQL's default replica identity sends none), ``computed`` over an input that widens
from INT to BIGINT (and a value ``to_date`` cannot read), and shards routed by ``from`` (with and without a
column one shard lacks). A few examples here; ``make fuzz`` runs more (``LAKECDC_FUZZ_EXAMPLES``).

Also, one case each of the where and computed fixes: an UPDATE without a before-image that leaves the
filter moves the row out; a condition or an expression that raises on a row quarantines that row, also
when the batch's frame comes from another session than the stage's (a stream's ``foreachBatch``)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pipelines.config import parse_config
from pipelines.export import export_warehouse
from pipelines.formats import get_decoder
from pipelines.formats.base import Change
from pipelines.gold.stage import apply_gold_batch
from pipelines.silver import decode_frame, ensure_silver
from pipelines.testing.model import MirrorModel
from pipelines.warehouse import Warehouse
from tests.spark.test_gold_semantics import TYPES, _row, change

#: ``make fuzz`` sets LAKECDC_FUZZ_EXAMPLES (per decoder case); each example here is six gold batches in
#: three warehouses, so it takes a hundredth of them; CI runs one example of each property.
EXAMPLES = max(1, int(os.environ.get("LAKECDC_FUZZ_EXAMPLES", "0")) // 100)
WIDE = {**TYPES, "a": "bigint"}  # shop.c's input after it widens
SHARD_WIDE = {**TYPES, "e": "varchar(8)"}  # a column shop_1.orders has and shop_2.orders lacks
TABLES = {
    "shop.s": {"deletes": "soft"},
    "shop.w": {"where": "a >= 10", "key": ["id"]},
    "shop.c": {"computed": {"a2": "a * 2", "day": "to_date(b)"}},
    "shop.orders": {"from": [r"shop_[0-9]\.orders"], "key": ["_source_table", "id"]},
}


class Warehouse2:
    """A warehouse fed by two sources, OMS Canal (``s``) and Debezium (``d``, whose UPDATE may carry no
    before-image); ``apply`` runs one gold micro-batch of (format, change) pairs. ``stage``: the session
    gold runs with, when the batch's frame comes from another (as in a stream's ``foreachBatch``)."""

    def __init__(self, spark, root: Path, tables: dict, stage=None) -> None:
        self.spark, self.stage = spark, stage or spark
        self.cfg = parse_config({
            "warehouse": str(root / "wh"), "quality_checks": False, "tables": tables,
            "sources": [{"name": "s", "format": "oms_canal", "path": str(root / "none")},
                        {"name": "d", "format": "debezium", "path": str(root / "none")}],
        })  # fmt: skip
        self.wh = Warehouse.from_config(self.cfg)
        ensure_silver(spark, self.wh)
        self.batches = 0
        self.stats: list = []

    def apply(self, changes: list[tuple[str, Change]]):
        rows = []
        for i, (fmt, ch) in enumerate(changes):
            raw = get_decoder(fmt).encode(ch, self.cfg.decode_context(fmt))
            rows.append((fmt[0], fmt, raw, f"file:/x#{self.batches}.{i}", f"{self.batches:06d}{i:06d}", None))
        bronze = self.spark.createDataFrame(
            rows, "source STRING, format STRING, value BINARY, position STRING, queue_pos STRING, ingest_time TIMESTAMP"
        )
        frame = decode_frame(bronze, self.cfg).where("kind = 'change'").drop("kind")
        stats = apply_gold_batch(self.stage, frame, self.batches, self.cfg, self.wh, "app-test")
        self.batches += 1
        self.stats.append(stats)
        return stats

    def mirrors(self) -> dict:
        return export_warehouse(self.spark, self.wh)

    def types(self, tables=("shop.c", "shop.orders")) -> dict:
        return {
            t: {f.name: f.dataType.simpleString() for f in self.wh.mirror(t).read(self.spark).schema.fields}
            for t in tables
        }

    def quarantine(self) -> list[str]:
        rows = self.wh.silver("quarantine").read(self.spark).where("stage = 'gold'").select("reason").collect()
        return sorted(r["reason"] for r in rows)

    def counts(self) -> dict:
        return {k: sum(getattr(s, k) for s in self.stats) for k in ("changes", "applied", "stale", "quarantined",
                                                                     "skipped", "unaccounted")}  # fmt: skip


# ---------------------------------------------------------------- the property


@st.composite
def traffic(draw, truncate: bool, shards_differ: bool) -> list[tuple[str, Change]]:
    """Changes of every option's table, in source order (one sequence: ``n``), keys 1..3 per table."""
    out: list[tuple[str, Change]] = []
    n = 0

    def seq() -> int:
        nonlocal n
        n += 1
        return n

    def keyed(fmt, table, types, values, db="shop", truncate_at=None, before_none=False, steps=(2, 7)):
        rows: dict[int, dict] = {}
        count = draw(st.integers(*steps))
        for step in range(count):
            if truncate_at is not None and step == truncate_at:
                out.append((fmt, replace(_truncate(seq()), db=db, table=table)))
                rows.clear()
                continue
            k = draw(st.integers(1, 3))
            row = _row(k, **values(k))
            ty = types(row)
            if k not in rows:
                out.append((fmt, replace(change("INSERT", seq(), after=row, types=ty, table=table), db=db)))
                rows[k] = row
                continue
            op = draw(st.sampled_from(["UPDATE", "UPDATE", "DELETE"]))
            if op == "DELETE":
                out.append((fmt, replace(change("DELETE", seq(), before=rows.pop(k), types=ty, table=table), db=db)))
                continue
            before = None if before_none and draw(st.booleans()) else rows[k]
            out.append((fmt, replace(change("UPDATE", seq(), before=before, after=row, types=ty, table=table), db=db)))
            rows[k] = row

    a = st.sampled_from(["1", "5", "10", "15", "20"])
    # soft deletes, with a TRUNCATE among its changes
    keyed("oms_canal", "s", lambda r: TYPES, lambda k: {"a": draw(a), "b": draw(st.sampled_from(["x", "y"]))},
          truncate_at=draw(st.integers(1, 5)) if truncate else None)  # fmt: skip
    # where a >= 10, UPDATEs with and without a before-image
    keyed("debezium", "w", lambda r: TYPES, lambda k: {"a": draw(a)}, before_none=True)
    # computed a * 2 and to_date(b): a widens to BIGINT at some change (and stays so); some b no date
    widened = {"from": draw(st.integers(0, 6))}

    def computed_types(row: dict) -> dict:
        widened["from"] -= 1
        return WIDE if widened["from"] < 0 else TYPES

    def computed_values(k: int) -> dict:
        big = widened["from"] <= 0 and draw(st.booleans())
        day = draw(st.sampled_from(["2024-01-05", "2024-02-29", "nope"]))
        return {"a": "3000000000" if big else draw(a), "b": day}

    keyed("oms_canal", "c", computed_types, computed_values)
    # shards: shop_1.orders carries e, shop_2.orders (full images) lacks it where shards_differ
    keyed("oms_canal", "orders", lambda r: SHARD_WIDE if "e" in r else TYPES,
          lambda k: {"a": draw(a), "e": "e1"}, db="shop_1", steps=(1, 4))  # fmt: skip
    keyed(
        "oms_canal",
        "orders",
        lambda r: SHARD_WIDE if "e" in r else TYPES,
        lambda k: {"a": draw(a)} if shards_differ else {"a": draw(a), "e": "e2"},
        db="shop_2",
        steps=(1, 4),
    )
    # one source order for the whole history: interleave the tables' changes by a drawn permutation that
    # keeps each table's own order, then number them again
    order = draw(st.permutations(range(len(out))))
    by_table: dict[str, list] = {}
    for fmt, ch in out:
        by_table.setdefault(f"{ch.db}.{ch.table}", []).append((fmt, ch))
    tables = sorted(by_table)
    merged, taken = [], dict.fromkeys(tables, 0)
    for t in [tables[i % len(tables)] for i in order]:
        if taken[t] < len(by_table[t]):
            merged.append(by_table[t][taken[t]])
            taken[t] += 1
    for t in tables:
        merged += by_table[t][taken[t] :]
    return [(fmt, _renumbered(ch, i + 1)) for i, (fmt, ch) in enumerate(merged)]


def _truncate(n: int) -> Change:
    return Change(
        op="TRUNCATE", db="shop", table="t", key_columns=("id",), seq=(1_700_000_000_000 + n,),
        event_time=f"2023-11-14T22:13:20.{n:03d}Z", ddl="TRUNCATE TABLE shop.t",
    )  # fmt: skip


def _renumbered(ch: Change, n: int) -> Change:
    return replace(
        ch, seq=(1_700_000_000_000 + n,), event_time=f"2023-11-14T22:13:{20 + n // 1000:02d}.{n % 1000:03d}Z"
    )


def _splits(draw, count: int) -> list[list[int]]:
    """Cut points: one batch, two batches, many batches (three)."""
    two = [draw(st.integers(1, count - 1))] if count > 1 else []
    many = sorted(draw(st.sets(st.integers(1, count - 1), min_size=min(2, count - 1), max_size=min(2, count - 1))))
    return [[], two, many]


def _batches(changes: list, cuts: list[int]) -> list[list]:
    edges = [0, *cuts, len(changes)]
    return [changes[a:b] for a, b in zip(edges, edges[1:], strict=False) if b > a]


def _run_splits(spark, data, truncate: bool, shards_differ: bool) -> None:
    changes = data.draw(traffic(truncate, shards_differ), label="changes")
    results = []
    for cuts in _splits(data.draw, len(changes)):
        with tempfile.TemporaryDirectory() as tmp:
            wh = Warehouse2(spark, Path(tmp), TABLES)
            for batch in _batches(changes, cuts):
                wh.apply(batch)
            results.append((cuts, wh.mirrors(), wh.types(), wh.quarantine(), wh.counts()))
    _, mirrors, types, refused, counts = results[0]
    assert counts["unaccounted"] == 0, counts
    for cuts, other_mirrors, other_types, other_refused, other_counts in results[1:]:
        assert other_mirrors == mirrors, f"one batch and batches cut at {cuts} leave other mirrors"
        assert other_types == types, f"one batch and batches cut at {cuts} leave other column types"
        assert other_refused == refused, f"cut at {cuts}: other quarantine"
        assert other_counts == counts, f"cut at {cuts}: other counts"
    # the where table against the model: the source's rows that match, whatever path brought them
    model = MirrorModel().add_all(ch for _fmt, ch in changes if ch.table == "w")
    want = [{"id": int(r["id"]), "a": int(r["a"])} for r in model.rows("shop.w", where=lambda r: int(r["a"]) >= 10)]
    assert [{"id": r["id"], "a": r["a"]} for r in mirrors.get("shop.w", [])] == want
    # every change of the computed table whose b is no date is quarantined, nothing else
    nope = sum(1 for _f, ch in changes if ch.table == "c" and ch.after and ch.after.get("b") == "nope")
    assert len([r for r in refused if "to_date(b) fails on this row" in r]) == nope, refused


PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="LAKECDC_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: each attempt is six gold batches
)


@pytest.mark.skipif(os.environ.get("LAKECDC_SKIP_SLOW") == "1", reason="six gold batches per example")
@PROPERTY
@given(data=st.data())
def test_row_options_leave_the_same_mirrors_and_counts_in_one_two_or_many_batches(spark, data):
    _run_splits(spark, data, truncate=False, shards_differ=False)


@pytest.mark.long  # make test-all: CI runs the property over every row option above and test_gold_row_options' soft/shard cases
@pytest.mark.skipif(os.environ.get("LAKECDC_SKIP_SLOW") == "1", reason="six gold batches per example")
@PROPERTY
@given(data=st.data())
def test_soft_truncates_and_shards_of_other_columns_hold_in_one_two_or_many_batches(spark, data):
    _run_splits(spark, data, truncate=True, shards_differ=True)


# ---------------------------------------------------------------- the where and computed fixes, one case each


def test_an_update_without_a_before_image_that_leaves_the_where_moves_out_and_a_raising_row_is_quarantined(
    spark, tmp_path
):
    """``where: a >= 10 AND (b IS NULL OR CAST(b AS INT) >= 0)``, Debezium updates with ``before: null``:
    one that leaves the filter deletes the row (it was skipped, and the mirror kept a value the source no
    longer had); one that stays updates it; a row whose ``b`` the CAST cannot read is quarantined with the
    condition and the value, the batch goes on."""
    wh = Warehouse2(spark, tmp_path, {"shop.t": {"where": "a >= 10 AND (b IS NULL OR CAST(b AS INT) >= 0)",
                                                 "key": ["id"]}})  # fmt: skip
    d = "debezium"
    wh.apply(
        [
            (d, change("INSERT", 1, after=_row(1, a="15", b=None))),
            (d, change("INSERT", 2, after=_row(2, a="20", b=None))),
        ]
    )
    stats = wh.apply([
        (d, change("UPDATE", 3, before=None, after=_row(1, a="3", b=None))),  # leaves the filter: moves out
        (d, change("UPDATE", 4, before=None, after=_row(2, a="25", b="7"))),
        (d, change("INSERT", 5, after=_row(3, a="30", b="x"))),  # CAST('x' AS INT) raises: quarantined
    ])  # fmt: skip
    assert (stats.applied, stats.quarantined, stats.skipped, stats.unaccounted) == (2, 1, 0, 0)
    assert [{"id": r["id"], "a": r["a"], "b": r["b"]} for r in wh.mirrors()["shop.t"]] == [{"id": 2, "a": 25, "b": "7"}]
    refused = wh.quarantine()
    assert len(refused) == 1, refused
    [why] = refused
    assert "tables.shop.t.where 'a >= 10" in why and 'cannot be evaluated on this row ({"a":"30","b":"x"})' in why, why


def test_computed_from_a_frame_of_another_session_quarantines_what_fails_and_widens_with_its_input(spark, tmp_path):
    """The batch's frame from another session than gold's (as a stream's ``foreachBatch`` hands it, ANSI
    mode on there): ``to_date(b)`` on ``nope`` quarantines that row (it failed every batch with
    CAST_INVALID_INPUT); ``nullif(a, 4)`` is NULL by design and stored; when ``a`` widens from INT to BIGINT,
    ``a * 2`` widens with it (it was NULL, nothing quarantined)."""
    other = spark.newSession()
    wh = Warehouse2(
        other,
        tmp_path,
        {"shop.t": {"computed": {"a2": "a * 2", "day": "to_date(b)", "z": "nullif(a, 4)"}}},
        stage=spark,
    )
    c = "oms_canal"
    stats = wh.apply([
        (c, change("INSERT", 1, after=_row(1, a="3", b="2024-01-05"))),
        (c, change("INSERT", 2, after=_row(2, a="5", b="nope"))),
        (c, change("INSERT", 3, after=_row(3, a="4", b="2024-01-06"))),
    ])  # fmt: skip
    assert (stats.applied, stats.quarantined, stats.unaccounted) == (2, 1, 0)
    [why] = wh.quarantine()
    assert 'computed column day = to_date(b) fails on this row ({"b":"nope"})' in why, why
    wh.apply([(c, change("INSERT", 4, after=_row(4, a="3000000000", b="2024-01-07"), types=WIDE))])
    rows = [{k: r[k] for k in ("id", "a", "a2", "day", "z")} for r in wh.mirrors()["shop.t"]]
    assert rows == [
        {"id": 1, "a": 3, "a2": 6, "day": "2024-01-05", "z": 3},
        {"id": 3, "a": 4, "a2": 8, "day": "2024-01-06", "z": None},
        {"id": 4, "a": 3000000000, "a2": 6000000000, "day": "2024-01-07", "z": 3000000000},
    ]
    assert wh.types(["shop.t"])["shop.t"]["a2"] == "bigint"
    assert len(wh.quarantine()) == 1
