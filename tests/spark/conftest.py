import pytest

#: Spark test modules that only ``make test-all`` runs (marked ``long``): CI's ``make test`` runs the rest, which
#: keep one test of each guarantee (the reference model for every format, gold's semantics, idempotence, the
#: SIGKILL tests, the row options, quality with a real Great Expectations run, status, why, erase, quarantine
#: replay, metrics). On the 2-core machine CI runs on, the whole suite measured over 90 minutes on 2026-12-02,
#: twice the 41 of the last green run; these modules are the variants and the features tested again elsewhere.
LONG_MODULES = {
    "test_analysts.py",  # SQL expectations, lists, rebuild under new lists: nine pipeline runs
    "test_catalog_layers.py",  # a schema per layer: the notebooks' and status' catalog tests cover the names
    "test_gold_batch_cost.py",  # jobs per step and kept threads: the bench's cost section measures them
    "test_gold_choices.py",  # column lists, ignore-null updates, clustering, documents
    "test_hostile_replay.py",  # hostile names through replay: test_gold_semantics quotes them in one batch
    "test_mirror_metadata.py",  # comments and properties of the mirror
    "test_readers.py",  # the readers' API over a small warehouse
    "test_silver_counts.py",  # silver's kept counts on retries: reconciliation is asserted by the pipeline tests
}


def pytest_collection_modifyitems(items):
    for item in items:
        if "/tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
            if item.fspath.basename in LONG_MODULES:
                item.add_marker(pytest.mark.long)
