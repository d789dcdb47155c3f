"""Which mirrors a continuous batch merges (pipelines.gold.due): hot tables at once, cold ones within their
freshness budget, spread so that tables started together do not all fall due in one batch."""

from __future__ import annotations

from pipelines.gold.due import EARLY, Budget, Waiting, due_mirrors, due_reason, early_limit, overdue

NOW = 1_000_000.0
BUDGET = Budget(max_delay=300.0, max_pending=1000)


def test_a_hot_table_is_merged_as_soon_as_enough_changes_wait():
    assert due_reason(Waiting(1000, NOW - 1), BUDGET, NOW).startswith("1000 changes waiting")
    assert due_reason(Waiting(999, NOW - 1), BUDGET, NOW) is None


def test_a_cold_table_is_merged_when_its_oldest_change_reaches_the_budget():
    assert due_reason(Waiting(3, NOW - 299.0), BUDGET, NOW) is None
    assert "waited 300 s" in due_reason(Waiting(3, NOW - 300.0), BUDGET, NOW)
    assert overdue(Waiting(3, NOW - 330.0), BUDGET, NOW) == 30.0
    assert overdue(Waiting(3, NOW - 10.0), BUDGET, NOW) == 0.0


def test_what_cannot_wait_and_a_drain_merge_at_once():
    assert due_reason(Waiting(1, NOW, forced="truncate"), BUDGET, NOW) == "truncate"
    waiting = {"a": Waiting(1, NOW), "b": Waiting(0, None), "c": Waiting(5, NOW - 1)}
    assert due_mirrors(waiting, {}, NOW, drain=True) == {"a": "drain", "c": "drain"}, "nothing waits for b"
    assert due_mirrors(waiting, {}, NOW, drain=False) == {}


def test_cold_tables_that_started_together_are_spread_over_batches_most_overdue_first():
    budgets = {f"t{i:03d}": BUDGET for i in range(200)}
    half = EARLY * BUDGET.max_delay
    # 200 cold tables, each past half its budget, the older the lower its number
    waiting = {name: Waiting(3, NOW - half - 100 + i * 0.1) for i, name in enumerate(budgets)}
    due = due_mirrors(waiting, budgets, NOW, drain=False, parallelism=4)
    assert len(due) == early_limit(200, 4) == 25
    assert sorted(due) == [f"t{i:03d}" for i in range(25)], "the longest waiting first"
    # at its full budget a table is merged whatever the count
    waiting = {name: Waiting(3, NOW - 300.0 - i) for i, name in enumerate(budgets)}
    assert len(due_mirrors(waiting, budgets, NOW, drain=False, parallelism=4)) == 200
    # before half its budget, none
    waiting = {name: Waiting(3, NOW - half + 1) for name in budgets}
    assert due_mirrors(waiting, budgets, NOW, drain=False, parallelism=4) == {}
