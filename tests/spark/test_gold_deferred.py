"""Freshness budgets through the real gold stage (issue 27): a mirror not due waits in ``pending`` across
batches and is then applied equal to the model; a restart between the deferral and the apply (a new stream,
nothing in memory) loses and repeats nothing; the run's checks cover only the mirrors it wrote."""

from __future__ import annotations

from pipelines.config import parse_config
from pipelines.gold.stage import GoldStream, apply_gold_batch, flush_due
from pipelines.gold.state import GoldState
from pipelines.quality.storage import dq_results_ref
from pipelines.runner import RunSummary, check_run
from pipelines.testing.model import MirrorModel
from tests.spark.test_gold_semantics import Gold, _row, change

#: a mirror is due with 5 changes waiting; no budget in time runs out during a test
BUDGETS = {"max_pending": 5, "max_delay": 3600}


def _gold(spark, tmp_path, quality_checks: bool = False) -> Gold:
    gold = Gold(spark, tmp_path, quality_checks=quality_checks)
    doc = {
        "warehouse": gold.cfg.warehouse,
        "quality_checks": quality_checks,
        "sources": [{"name": "s", "format": "oms_canal", "path": str(tmp_path / "none")}],
        "gold": BUDGETS,
    }
    gold.cfg = parse_config(doc)
    return gold


def _continuous(gold: Gold, changes, stream: GoldStream):
    """One micro-batch of a continuous stream (mirrors wait within their budget)."""
    stream.drain = False
    stats = apply_gold_batch(gold.spark, gold.frame(changes), gold.batches, gold.cfg, gold.wh, "app-test", stream)
    gold.batches += 1
    return stats


def _hot(n: int) -> list:
    """Six inserts of table hot: due at once (five make a mirror due)."""
    return [change("INSERT", n + i, after=_row(n + i, a=str(i)), table="hot") for i in range(6)]


COLD = [  # two changes a batch: the cold mirror waits until five have come
    [
        change("INSERT", 100, after=_row(1, a="1"), table="cold"),
        change("INSERT", 101, after=_row(2, a="2"), table="cold"),
    ],
    [
        change("UPDATE", 102, before=_row(1, a="1"), after=_row(1, a="10"), table="cold"),
        change("INSERT", 103, after=_row(3, a="3"), table="cold"),
    ],
    [
        change("DELETE", 104, before=_row(2, a="2"), table="cold"),
        change("UPDATE", 99, before=_row(3, a="3"), after=_row(3, a="30"), table="cold"),  # older: stale
    ],
]


def _expected(changes) -> list[dict]:
    rows = MirrorModel().add_all(changes).rows("shop.cold")
    return sorted(({"id": int(r["id"]), "a": int(r["a"])} for r in rows), key=lambda r: r["id"])


def _waiting(gold: Gold) -> dict[str, int]:
    stream = GoldStream()
    stream.load(gold.spark, GoldState(gold.wh))
    return {mirror: p.changes for mirror, p in stream.pending.items()}


def test_a_cold_mirror_waits_across_batches_then_is_applied_equal_to_the_model(spark, tmp_path):
    gold, stream = _gold(spark, tmp_path), GoldStream()
    first = _continuous(gold, _hot(1) + COLD[0], stream)
    assert gold.rows("shop.hot") and gold.rows("shop.cold") == [], "hot is due at once, cold waits"
    assert first.waiting == 2 and list(_waiting(gold).values()) == [2], "the waiting changes are durable"
    second = _continuous(gold, _hot(11) + COLD[1], stream)
    assert gold.rows("shop.cold") == [] and second.waiting == 4
    third = _continuous(gold, COLD[2], stream)  # the fifth and sixth changes: due
    assert third.waiting == 0 and _waiting(gold) == {}
    assert third.stale == 1, "a change older than one waiting is stale against key state, which includes pending"
    assert (
        gold.rows("shop.cold")
        == _expected([c for batch in COLD for c in batch])
        == [
            {"id": 1, "a": 10},
            {"id": 3, "a": 3},
        ]
    )
    assert len(gold.rows("shop.hot")) == 12


def test_a_restart_between_the_deferral_and_the_apply_loses_and_repeats_nothing(spark, tmp_path):
    """The stream that deferred the cold mirror is gone (a kill: nothing in memory). A new stream reads what
    waits from the state tables; its batch retried from the checkpoint (the same batch id, as Spark does)
    and a flush merge each change once."""
    gold = _gold(spark, tmp_path)
    _continuous(gold, _hot(1) + COLD[0], GoldStream())
    _continuous(gold, COLD[1], GoldStream())  # a new stream: the pending changes are read, not remembered
    assert gold.rows("shop.cold") == []
    gold.batches -= 1
    _continuous(gold, COLD[1], GoldStream())  # killed after its commit, before the checkpoint: retried
    assert list(_waiting(gold).values()) == [4], "the retry appended nothing twice"
    drained = flush_due(spark, gold.cfg, gold.wh, GoldStream(), drain=True)  # a run until caught up, or a stop
    assert drained.waiting == 0 and _waiting(gold) == {}
    assert gold.rows("shop.cold") == _expected(COLD[0] + COLD[1])
    again = flush_due(spark, gold.cfg, gold.wh, GoldStream(), drain=True)
    assert not again.written, "nothing waits: a second flush writes nothing"
    assert gold.rows("shop.cold") == _expected(COLD[0] + COLD[1])


def _through_silver(gold: Gold, changes):
    """Silver's ``changes`` get the batch (freshness reads when each source was last seen there), then gold."""
    from pyspark.sql import functions as F

    frame, silver = gold.frame(changes), gold.wh.silver("changes")
    shape = silver.read(gold.spark).schema
    typed = [(F.col(f.name) if f.name in frame.columns else F.lit(None)).cast(f.dataType).alias(f.name) for f in shape]
    frame.select(*typed).write.format("delta").mode("append").save(silver.path)
    return gold.apply_frame(frame)


def test_the_run_checks_only_the_mirrors_it_wrote(spark, tmp_path):
    gold = _gold(spark, tmp_path, quality_checks=True)
    both = [
        change("INSERT", 1, after=_row(1, a="1"), table="t1"),
        change("INSERT", 2, after=_row(1, a="1"), table="t2"),
    ]
    _through_silver(gold, both)
    stats = _through_silver(gold, [change("UPDATE", 3, before=_row(1, a="1"), after=_row(1, a="2"), table="t1")])
    summary = RunSummary()
    check_run(spark, gold.cfg, gold.wh, stats, summary)
    results = dq_results_ref(gold.wh).read(spark)
    run = results.where("run_id LIKE 'run-%'").select("table", "expectation").distinct().collect()
    assert [(r["table"], r["expectation"]) for r in run] == [("shop.t1", "cdc_freshness")], run
    second_batch = {r["table"] for r in results.where("batch_id = 1").select("table").collect()}
    assert second_batch == {"shop.t1"}, "the batch's key and change checks: its one mirror"
    idle = RunSummary()
    check_run(spark, gold.cfg, gold.wh, type(stats)(), idle)  # a run that wrote nothing
    assert (idle.dq_results, results.count()) == (0, dq_results_ref(gold.wh).read(spark).count())


def test_a_stale_source_is_validated_once_for_every_mirror_it_feeds(spark, tmp_path, monkeypatch):
    """Two mirrors of one source whose newest change is from 2023: each gets its failed ``cdc_freshness`` row,
    from one Great Expectations validation (not one per mirror: 200 mirrors took 80 s so)."""
    import pipelines.quality.written as written

    gold = _gold(spark, tmp_path)  # the batch's own checks off: only the run's are looked at
    stats = _through_silver(
        gold,
        [change("INSERT", 1, after=_row(1, a="1"), table="t1"), change("INSERT", 2, after=_row(1, a="1"), table="t2")],
    )
    validations = []
    real = written.run_checks
    monkeypatch.setattr(written, "run_checks", lambda *a, **k: validations.append(a[0]) or real(*a, **k))
    check_run(spark, gold.cfg, gold.wh, stats, RunSummary())
    rows = dq_results_ref(gold.wh).read(spark).where("expectation = 'cdc_freshness'").collect()
    assert sorted((r["table"], r["success"]) for r in rows) == [("shop.t1", False), ("shop.t2", False)]
    assert len(validations) == 1, validations
