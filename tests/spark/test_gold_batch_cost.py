"""What a gold batch costs is recorded step by step (``pipelines.gold.steps``), a small batch runs without
adaptive query execution and gives the session back as it found it, and a stream keeps its threads."""

from __future__ import annotations

from pipelines.config import parse_config
from pipelines.gold.settings import small_batch_conf
from pipelines.gold.stage import apply_gold_batch
from pipelines.gold.steps import STEPS, StepClock, spark_jobs
from pipelines.gold.stream import GoldStream
from tests.spark.test_gold_semantics import Gold, _row, change


def test_a_step_counts_the_spark_jobs_it_ran(spark):
    clock = StepClock(spark)
    with clock.step("decide"):
        spark.range(10).count()
        spark.range(5).collect()
    with clock.step("plan"):
        pass
    cost = clock.costs["decide"]
    assert cost.jobs >= 2 and cost.seconds > 0 and cost.batches == 1
    assert clock.costs["plan"].jobs == 0
    assert clock.summary().startswith("plan 0 jobs"), "steps print in the order a batch runs them"
    assert spark_jobs(spark) is not None
    run = StepClock(spark, "run")
    with run.step("land"):
        assert spark.sparkContext.getLocalProperty("spark.job.description") == "run land"
    assert set(run.seconds(7)) == {"batch", "land"} and run.seconds(7)["batch"] == 7


def test_a_batch_records_each_step_and_restores_the_sessions_settings(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    before = {key: spark.conf.get(key) for key in small_batch_conf(spark)}
    assert small_batch_conf(spark)["spark.sql.adaptive.enabled"] == "false"
    stats = gold.apply([change("INSERT", 1, after=_row(1, a="5")), change("INSERT", 2, after=_row(2, a="6"))])
    assert stats.applied == 2
    assert set(stats.steps) == set(STEPS), stats.steps
    assert all(cost.jobs is not None and cost.jobs >= 0 for cost in stats.steps.values())
    assert stats.steps["write"].jobs >= 1, "the mirror's write is a Spark job"
    (batch,) = stats.batches  # the batch's own seconds per step, as the bench's pipeline section reads them
    assert batch == {"batch": batch["batch"], **{name: round(c.seconds, 3) for name, c in stats.steps.items()}}
    assert {key: spark.conf.get(key) for key in before} == before, "the batch's own settings are undone"
    again = gold.apply([change("UPDATE", 3, before=_row(1, a="5"), after=_row(1, a="7"))])
    assert again.applied == 1 and gold.rows() == [{"id": 1, "a": 7}, {"id": 2, "a": 6}]


def test_a_stream_keeps_its_threads_and_their_sessions_from_batch_to_batch(spark, tmp_path):
    gold = Gold(spark, tmp_path)
    gold.cfg = parse_config(
        {
            "warehouse": str(tmp_path / "wh"),
            "sources": [{"name": "s", "format": gold.fmt, "path": str(tmp_path / "none")}],
            "gold": {"parallelism": 2},
        }
    )
    stream = GoldStream()
    tables = ("t0", "t1", "t2")
    try:
        for batch, seq in enumerate((1, 2)):
            frame = gold.frame([change("INSERT", seq, after=_row(seq, a=str(seq)), table=t) for t in tables])
            stats = apply_gold_batch(spark, frame, batch, gold.cfg, gold.wh, "app-test", stream)
            assert stats.applied == len(tables)
            if batch == 0:
                workers = stream.workers
                assert workers is not None
            assert stream.workers is workers, "the second batch ran on the first one's threads"
        assert stream.last_changes == len(tables)
    finally:
        stream.close()
    assert stream.workers is None
    for t in tables:
        assert gold.rows(f"shop.{t}") == [{"id": 1, "a": 1}, {"id": 2, "a": 2}]


def _limited(gold: Gold, tmp_path, limit: int) -> None:
    gold.cfg = parse_config(
        {
            "warehouse": str(tmp_path / "wh"),
            "sources": [{"name": "s", "format": gold.fmt, "path": str(tmp_path / "none")}],
            "limits": {"new_mirrors_per_batch": limit},
        }
    )


def test_new_tables_past_the_limit_wait_for_the_next_batch_and_nothing_is_lost(spark, tmp_path):
    from pipelines.gold.stage import flush_due
    from pipelines.gold.stream import GoldStream

    gold = Gold(spark, tmp_path)
    _limited(gold, tmp_path, 2)
    tables = ("t0", "t1", "t2", "t3", "t4")
    first = gold.apply([change("INSERT", 1, after=_row(1, a="1"), table=t) for t in tables])
    assert first.applied == 2 and first.later == 3, "two mirrors made, three tables' changes wait"
    assert gold.rows("shop.t0") == [{"id": 1, "a": 1}] and gold.rows("shop.t2") == []
    # the next batch (a new stream: what waits is durable) takes the waiting tables first, two of them
    second = gold.apply([change("INSERT", 2, after=_row(2, a="2"), table="t0")])
    assert second.applied == 1 + 2 and second.later == 1
    assert gold.rows("shop.t2") == [{"id": 1, "a": 1}] and gold.rows("shop.t4") == []
    # a run until caught up ends with a flush that makes the rest, as many rounds as it takes
    stream = GoldStream()
    try:
        flushed = flush_due(spark, gold.cfg, gold.wh, stream, drain=True)
    finally:
        stream.close()
    assert flushed.applied == 1 and flushed.later == 0 and not stream.later_waiting
    for t in tables:
        assert gold.rows(f"shop.{t}")[0] == {"id": 1, "a": 1}, t
    assert gold.rows("shop.t0") == [{"id": 1, "a": 1}, {"id": 2, "a": 2}]
    again = gold.apply([change("INSERT", 3, after=_row(3, a="3"), table="t4")])
    assert again.applied == 1 and again.later == 0, "nothing waits twice"
    assert gold.rows("shop.t4") == [{"id": 1, "a": 1}, {"id": 3, "a": 3}]


def test_the_new_mirror_limit_is_validated():
    import pytest

    from pipelines.config import ConfigError

    base = {"sources": [{"name": "s", "format": "oms_canal", "path": "/x"}]}
    assert parse_config(base).new_mirrors_per_batch == 100
    with pytest.raises(ConfigError, match="limits.new_mirrors_per_batch"):
        parse_config({**base, "limits": {"new_mirrors_per_batch": 0}})


def test_a_large_write_generates_code_and_a_small_one_runs_as_the_batch_does(spark, tmp_path, monkeypatch):
    """A write of many keys runs with the session's own generated code (the same code batch after batch: compiled
    once per stream), a write of few keys as the small batch runs (interpreted), and either way the mirror holds
    the same rows and the session its settings."""
    import pipelines.gold.batch_writes as batch_writes
    import pipelines.gold.settings as gold_settings
    from pipelines.gold.settings import CODEGEN_SWITCHES

    mode = CODEGEN_SWITCHES[1]
    own = spark.conf.get(mode)
    seen: list[str] = []
    write_keyed = batch_writes.write_keyed

    def spied(decided, session, *args, **kwargs):
        seen.append(session.conf.get(mode))
        return write_keyed(decided, session, *args, **kwargs)

    monkeypatch.setattr(batch_writes, "write_keyed", spied)
    gold = Gold(spark, tmp_path)
    gold.apply([change("INSERT", 1, after=_row(1, a="5")), change("INSERT", 2, after=_row(2, a="6"))])
    assert seen == ["NO_CODEGEN"], "two keys: the write runs as the small batch does"
    monkeypatch.setattr(gold_settings, "COMPILED_WRITE_KEYS", 2)
    gold.apply([change("UPDATE", 3, before=_row(1, a="5"), after=_row(1, a="7")), change("DELETE", 4, before=_row(2))])
    assert seen[1:] == [own], "two keys now count as many: the write generates code"
    assert spark.conf.get(mode) == own, "the session's settings come back after the batch"
    assert gold.rows() == [{"id": 1, "a": 7}]
