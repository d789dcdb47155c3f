"""Gold's idempotency stamps are stored in every warehouse it has written: they never change.

A retried micro-batch is skipped by Delta only if it carries the same ``txnAppId`` as the first
attempt, so a renamed step would apply a batch twice in a warehouse written before the rename.
"""

from __future__ import annotations

from pipelines.gold.batch import BatchContext, GoldStats, Step
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
