"""Each batch's seconds per step, kept by gold's stats and the one query, and summed by the bench's pipeline
section: where a batch's time goes, batch by batch (issue 41)."""

from __future__ import annotations

from bench.latency import stage_batches, step_seconds
from pipelines.gold.batch import GoldStats
from pipelines.gold.steps import KEPT_BATCHES
from pipelines.one_query import with_run_steps


def test_stats_keep_each_batch_in_order_and_only_the_newest():
    total = GoldStats()
    for batch in range(KEPT_BATCHES + 3):
        total.add(GoldStats(batches=[{"batch": batch, "plan": 0.5}]))
    assert len(total.batches) == KEPT_BATCHES, "a long run keeps a bounded record"
    assert [b["batch"] for b in total.batches[:2]] == [3, 4] and total.batches[-1]["batch"] == KEPT_BATCHES + 2


def test_a_one_query_batch_is_one_record_of_its_own_steps_and_gold_s():
    applied = GoldStats(batches=[{"batch": 4, "plan": 1.0, "write": 2.0}])
    record = with_run_steps(applied, {"batch": 4, "land": 0.5, "decode": 1.5, "apply": 3.25}).batches
    assert record == [{"batch": 4, "land": 0.5, "decode": 1.5, "apply": 3.25, "plan": 1.0, "write": 2.0}]
    assert list(record[0]) == ["batch", "land", "decode", "apply", "plan", "write"], "in the order they ran"
    assert with_run_steps(GoldStats(), {"batch": 5, "land": 0.1}).batches == [{"batch": 5, "land": 0.1}]


def test_seconds_per_step_over_batches_leave_ids_and_flush_marks_out():
    batches = [
        {"batch": 0, "land": 1.0, "apply": 4.0},
        {"batch": 1, "land": 3.0, "apply": 2.0},
        {"batch": 1, "apply": 1.0, "flush": True},
    ]
    steps = step_seconds(batches)
    assert list(steps) == ["land", "apply"]
    assert steps["land"] == {"batches": 2, "median_seconds": 3.0, "max_seconds": 3.0, "sum_seconds": 4.0}
    assert steps["apply"] == {"batches": 3, "median_seconds": 2.0, "max_seconds": 4.0, "sum_seconds": 7.0}
    assert step_seconds([]) == {}


def test_a_query_s_batches_are_its_busy_triggers_whole_and_by_step():
    class Query:  # what stage_batches reads of a StreamingQuery
        name, id = "gold_apply", None
        recentProgress = [
            {"numInputRows": 0, "durationMs": {"triggerExecution": 9000}},  # idle: not counted
            {"numInputRows": 5, "durationMs": {"triggerExecution": 3000, "addBatch": 2500}},
            {"numInputRows": 7, "durationMs": {"triggerExecution": 1000, "addBatch": 800}},
        ]

    (got,) = stage_batches([Query()]).values()
    assert (got["batches"], got["rows"]) == (2, 12)
    assert (got["median_seconds"], got["max_seconds"], got["sum_seconds"]) == (3.0, 3.0, 4.0)
    assert got["trigger_steps"]["addBatch"] == {"batches": 2, "median_seconds": 2.5, "max_seconds": 2.5,
                                                "sum_seconds": 3.3}  # fmt: skip
    Query.recentProgress = []
    (idle,) = stage_batches([Query()]).values()
    assert (idle["median_seconds"], idle["max_seconds"], idle["sum_seconds"]) == (None, None, 0)
