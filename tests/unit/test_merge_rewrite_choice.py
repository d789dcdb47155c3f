"""Which write a checkpointed MERGE takes (``pipelines.delta_writes.rewrites_files``): a small table or a
MERGE that touches most of a table's rows rewrites the files it touches; any other keeps deletion vectors."""

from __future__ import annotations

from pipelines.delta_writes import REWRITE_BELOW_BYTES, REWRITE_FROM_BYTES_PER_TOUCHED_ROW, rewrites_files

BENCH_MIRROR = 4_400_000  # the bench's 100,000-row mirror, 44 bytes a row


def test_a_table_under_the_threshold_is_rewritten_whatever_the_merge_touches():
    assert rewrites_files(REWRITE_BELOW_BYTES - 1, 0)
    assert not rewrites_files(REWRITE_BELOW_BYTES, 0)


def test_a_merge_of_a_few_rows_into_a_larger_table_writes_deletion_vectors():
    assert not rewrites_files(BENCH_MIRROR, 796), "1,000 changes: 796 rows updated or deleted"
    assert not rewrites_files(BENCH_MIRROR, 9_000), "10,000 changes"


def test_a_merge_that_touches_most_rows_rewrites():
    assert rewrites_files(BENCH_MIRROR, 55_069), "100,000 changes: 55,069 rows updated or deleted"
    edge = BENCH_MIRROR // REWRITE_FROM_BYTES_PER_TOUCHED_ROW
    assert rewrites_files(BENCH_MIRROR, edge + 1) and not rewrites_files(BENCH_MIRROR, edge - 1)


def test_an_unknown_size_keeps_deletion_vectors():
    """Spark Connect or another runtime's Delta: the size is not known, and vectors never copy a large file."""
    assert not rewrites_files(None, 0) and not rewrites_files(None, 10**9)
