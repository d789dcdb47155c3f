"""Gold's idempotency stamps are stored in every warehouse it has written: they never change.

A retried micro-batch is skipped by Delta only if it carries the same ``txnAppId`` as the first
attempt, so a renamed step would apply a batch twice in a warehouse written before the rename.
"""

from __future__ import annotations

from pipelines.gold.batch import BatchContext, GoldStats, Step, batch_results_stamp
from pipelines.gold.identity import MirrorIdentity


def test_every_step_keeps_its_stored_stamp():
    ctx = BatchContext(
        spark=None,
        ident=MirrorIdentity("shop.t", "shop.t_mirror", None, None),
        wh=None,
        app_id="lakecdc-gold-abc",
        batch_id=7,
        stats=GoldStats(),
    )
    assert {step.name: ctx.stamp(step) for step in Step} == {
        "MIRROR": "lakecdc-gold-abc-m-shop.t_mirror",
        "TOMBSTONES": "lakecdc-gold-abc-d-shop.t_mirror",
        "TRUNCATE": "lakecdc-gold-abc-t-shop.t_mirror",
        "TRUNCATE_TOMBSTONES": "lakecdc-gold-abc-tt-shop.t_mirror",
        "TRUNCATE_HISTORY": "lakecdc-gold-abc-ht-shop.t_mirror",
        "HISTORY": "lakecdc-gold-abc-h-shop.t_mirror",
        "APPLIED": "lakecdc-gold-abc-a-shop.t_mirror",
        "QUARANTINE": "lakecdc-gold-abc-q-shop.t_mirror",
        "EXPECTATION_QUARANTINE": "lakecdc-gold-abc-qdq-shop.t_mirror",
        "EXPECTATION_RESULTS": "lakecdc-gold-abc-dq-shop.t_mirror",
        "MIRROR_EXPECTATION_RESULTS": "lakecdc-gold-abc-dqm-shop.t_mirror",
        "CDC_CHECK_RESULTS": "lakecdc-gold-abc-dqc-shop.t_mirror",
        "INVALID_VALUE_RESULTS": "lakecdc-gold-abc-dqi-shop.t_mirror",
        "REFUSED": "lakecdc-gold-abc-qr-shop.t_mirror",
    }


def test_mirrors_whose_names_read_alike_never_share_a_stamp():
    """(a.b, c) and (a, b.c) both read ``a.b.c``: the quarantine table would skip the second append."""
    stamps = set()
    for parts in (("a.b", "c"), ("a", "b.c"), ("a", "b", "c"), ("Shop", "Orders"), ("shop", "orders")):
        ident = MirrorIdentity(".".join(parts), ".".join(parts), None, None, name_parts=parts)
        ctx = BatchContext(spark=None, ident=ident, wh=None, app_id="x", batch_id=1, stats=GoldStats())
        stamps.add(ctx.stamp(Step.QUARANTINE))
    assert len(stamps) == 5
    plain = MirrorIdentity("shop.orders", "shop.orders", None, None, name_parts=("shop", "orders"))
    assert BatchContext(None, plain, None, "x", 1, GoldStats()).stamp(Step.MIRROR) == "x-m-shop.orders"  # as before


def test_the_batch_results_stamp_never_changes():
    """Every table's built-in check rows of a batch go to dq_results in one append with this stamp."""
    assert batch_results_stamp("lakecdc-gold-abc") == "lakecdc-gold-abc-dqb"


def test_source_tables_refused_by_one_mirror_never_share_a_stamp():
    """Two source tables aimed at one mirror (targets alike): the refused one's quarantine append is
    stamped per source table, so it is never skipped as the holder's own quarantine append of the batch."""
    stamps = set()
    for key in ('["shop",null,"t"]', '["shop",null,"u"]', '["Shop",null,"u"]', '["shop","s","u"]'):
        ident = MirrorIdentity("x", "merged", None, None, source_key=key, name_parts=("merged",))
        ctx = BatchContext(spark=None, ident=ident, wh=None, app_id="x", batch_id=1, stats=GoldStats())
        assert ctx.source_stamp(Step.REFUSED).startswith("x-qr-")
        assert ctx.source_stamp(Step.REFUSED) != ctx.stamp(Step.QUARANTINE)
        stamps.add(ctx.source_stamp(Step.REFUSED))
    assert len(stamps) == 4
