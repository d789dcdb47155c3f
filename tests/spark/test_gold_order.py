"""``ord``, the order gold applies changes in, is a struct that sorts exactly like the text it replaced.

The text was ``seq␁queue_pos␁change_index(6 digits)␁step`` (``␁`` = U+0001, below every digit
and ``.``), with ``step`` 1 for a change and 0 for the delete of a key it moves away from; the
multiset apply appended one more character: 0 for a removed before-image, 1 for an added row.
"""

from __future__ import annotations

import itertools
import json

import pytest

from pipelines.gold.order import BY_ORD, ORD, delete_first, ord_literal, with_order

SEQS = [
    "",
    "00000000000000000001",
    "00000000000000000001.00000000000000000002",
    "00000000000000000001.00000000000000000010",
    "00000000000000000002",
    "00000000000000000010",
]
QUEUE_POS = ["", "f#000000000001", "f#000000000002", "shop:000001:00000000000000000007"]
CHANGE_INDEX = [0, 1, 2, 10, 999999]
OLD_SEPARATOR = "\u0001"


@pytest.fixture(scope="module")
def changes(spark):
    rows = [(i, seq, qp, ci) for i, (seq, qp, ci) in enumerate(itertools.product(SEQS, QUEUE_POS, CHANGE_INDEX))]
    return with_order(spark.createDataFrame(rows, "id INT, seq STRING, queue_pos STRING, change_index INT"))


def _old_ord(step: str) -> str:
    return f"concat_ws('{OLD_SEPARATOR}', seq, queue_pos, lpad(CAST(change_index AS STRING), 6, '0'), '{step}')"


def _disagreements(events) -> list:
    """Pairs of events the struct ``ord`` and the old text ``old`` order differently."""
    sign = "CASE WHEN {0} < {1} THEN -1 WHEN {0} > {1} THEN 1 ELSE 0 END"
    pairs = events.alias("l").crossJoin(events.alias("r"))
    return pairs.where(f"{sign.format('l.ord', 'r.ord')} != {sign.format('l.old', 'r.old')}").limit(5).collect()


def test_the_struct_sorts_like_the_old_text_with_moved_key_deletes(changes):
    """Empty sequences, sequence prefixes, queue positions, places in the message, and the delete
    of a moved key (step 0) just before its change: every pair compares as it did."""
    from pyspark.sql import functions as F

    events = changes.select(ORD, F.expr(_old_ord("1")).alias("old")).unionByName(
        changes.select(delete_first().alias(ORD), F.expr(_old_ord("0")).alias("old"))
    )
    assert events.count() == 2 * len(SEQS) * len(QUEUE_POS) * len(CHANGE_INDEX)
    assert _disagreements(events) == []


def test_the_struct_sorts_like_the_old_text_of_multiset_events(changes):
    """The multiset apply's events: a removed before-image (old text + '0') just before the row its
    change adds (old text + '1')."""
    from pyspark.sql import functions as F

    added = changes.select(F.col(ORD), F.expr(f"concat({_old_ord('1')}, '1')").alias("old"))
    removed = changes.select(delete_first().alias(ORD), F.expr(f"concat({_old_ord('1')}, '0')").alias("old"))
    assert _disagreements(added.unionByName(removed)) == []


def test_a_full_load_row_sorts_before_every_incremental_change(changes):
    first_incremental = changes.where("seq != ''").agg({ORD: "min"}).first()[0]
    last_full_load = changes.where("seq = ''").agg({ORD: "max"}).first()[0]
    assert last_full_load.seq == "" and first_incremental.seq == SEQS[1]
    assert changes.where("seq = ''").where(changes[ORD] >= ord_literal(first_incremental.asDict())).count() == 0


def test_array_sort_by_ord_sorts_like_the_old_text(changes):
    from pyspark.sql import functions as F

    sorted_ = (
        changes.select(F.struct(ORD, F.expr(_old_ord("1")).alias("old")).alias("e"))
        .agg(F.collect_list("e").alias("es"))
        .select(
            F.expr(f"transform(array_sort(es, {BY_ORD}), e -> e.old)").alias("by_ord"),
            F.expr("array_sort(transform(es, e -> e.old))").alias("by_old"),
        )
    ).first()
    assert sorted_["by_ord"] == sorted_["by_old"]


def test_the_truncate_bound_survives_its_trip_through_json(changes):
    """The profile collects the last TRUNCATE's ``ord`` as JSON; the literal built from it is that ord."""
    from pyspark.sql import functions as F

    bounds = changes.where("change_index = 2").select(F.to_json(F.struct(ORD)).alias("j")).collect()
    for row in bounds:
        bound = json.loads(row["j"])[ORD]
        same = changes.where(F.col(ORD) == ord_literal(bound)).count()
        later = changes.where(F.col(ORD) > ord_literal(bound)).count()
        expected_later = changes.where(
            F.expr(_old_ord("1"))
            > F.concat_ws(
                OLD_SEPARATOR,
                F.lit(bound["seq"]),
                F.lit(bound["queue_pos"]),
                F.lpad(F.lit(str(bound["change_index"])), 6, "0"),
                F.lit("1"),
            )
        ).count()
        assert (same, later) == (1, expected_later)
