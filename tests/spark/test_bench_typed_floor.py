"""The redesign's floor (``bench/typed_floor.py``) does the checks it is timed with: a value that does not fit is
quarantined, a change older than the mirror's row is stale, a before-image that is not the mirror's row is drift,
and the counts reconcile. Its figure in docs/benchmark.md means something only while that holds."""

from __future__ import annotations

from bench.changes import BATCH_SEQ, SETUP_SEQ, autocdc_tables, changes_frame, table_name
from bench.typed_floor import DATA, floor_batch, key_check_differences


def test_the_floor_quarantines_a_misfit_skips_a_stale_change_and_finds_drift(spark, tmp_path):
    autocdc_tables(spark, tmp_path, 100, 1)  # keys 1 … 100, each with its sequence, and no tombstones
    changes = changes_frame(spark, 50, existing=100, mix=(70, 100), seed=5).selectExpr(
        "*", "row_number() OVER (ORDER BY seq) AS n"
    )
    faults = changes.selectExpr(  # map_concat: the fault's value wins (the session's mapKeyDedupPolicy, LAST_WIN)
        "* EXCEPT (n, after, before, seq)",
        "CASE WHEN n = 2 THEN map_concat(after, map('amount', 'abc')) ELSE after END AS after",
        "CASE WHEN n = 4 THEN map_concat(before, map('qty', '-1')) ELSE before END AS before",
        f"CASE WHEN n = 3 THEN lpad(CAST({SETUP_SEQ - 5} AS STRING), 20, '0') ELSE seq END AS seq",
        "n",
    ).persist()
    try:
        chosen = {r["n"]: r for r in faults.where("n IN (2, 3, 4)").collect()}
        assert chosen[2]["op"] == "UPDATE" and chosen[3]["op"] == "UPDATE"  # the faults land on UPDATEs
        counted: list[dict] = []
        floor_batch(spark, faults.drop("n"), tmp_path, 1, counted)
    finally:
        faults.unpersist()
    (c,) = counted
    assert (c["quarantined"], c["stale"]) == (1, 1), c
    assert c["applied"] + c["stale"] + c["quarantined"] == 50, c
    assert c["drift_u"] == 1 and c["drift_n"] > 1, c  # the drifted before-image, and only it
    assert key_check_differences(c) == 0, c
    mirror = spark.read.format("delta").load(str(tmp_path / table_name(0)))
    stale_key = int(chosen[3]["after"]["id"])
    # the stale UPDATE did not write its row: the key holds what a newer change or the setup left
    held = mirror.where(f"id = {stale_key}").first()
    assert held is None or held["_seq"] > chosen[3]["seq"], held
    assert mirror.where("amount IS NULL").count() == 0  # the misfit's NULL was never written


def test_the_tombstone_log_and_the_merged_tombstones_agree_across_batches(spark, tmp_path):
    """Batch 1 deletes keys; batch 2 brings one back and sends an UPDATE older than another's DELETE; batch 3 updates
    the key brought back (live, and still in the tombstone log): the floor with its tombstones merged and the one with
    an append-only tombstone log leave the same mirror and the same counts, and the late UPDATE is stale in both."""
    first = changes_frame(spark, 40, existing=60, mix=(0, 100), seed=9).persist()  # DELETEs only
    try:
        deleted = sorted({int(r["before"]["id"]) for r in first.collect()})
        back, late = deleted[0], deleted[1]
        second = changes_frame(spark, 2, existing=60, mix=(0, 0), seq_base=BATCH_SEQ + 10**6).selectExpr(
            "* EXCEPT (op, before, after, seq)",
            "CASE WHEN queue_pos LIKE '%0' THEN 'INSERT' ELSE 'UPDATE' END AS op",
            f"CASE WHEN queue_pos LIKE '%0' THEN NULL ELSE map('id', '{late}', 'name', 'n', 'amount', '1.00', "
            "'qty', '1', 'updated_at', '2024-01-01T00:00:00', 'note', 'x') END AS before",
            f"map('id', CASE WHEN queue_pos LIKE '%0' THEN '{back}' ELSE '{late}' END, 'name', 'again', "
            "'amount', '2.00', 'qty', '2', 'updated_at', '2024-01-02T00:00:00', 'note', 'y') AS after",
            # the UPDATE is older than every DELETE of batch 1; the INSERT newer
            f"CASE WHEN queue_pos LIKE '%0' THEN seq ELSE lpad(CAST({BATCH_SEQ - 1} AS STRING), 20, '0') END AS seq",
        )
        third = second.where("op = 'INSERT'").selectExpr(  # the key brought back, updated: live, with a tombstone
            "* EXCEPT (op, before, seq)", "'UPDATE' AS op", "after AS before",
            f"lpad(CAST({BATCH_SEQ + 2 * 10**6} AS STRING), 20, '0') AS seq",
        )  # fmt: skip
        mirrors, counts = [], []
        for log in (False, True):
            root = tmp_path / ("log" if log else "merged")
            autocdc_tables(spark, root, 60, 1)
            out: list[dict] = []
            floor_batch(spark, first, root, 1, out, tombstone_log=log)
            floor_batch(spark, second, root, 2, out, tombstone_log=log)
            floor_batch(spark, third, root, 3, out, tombstone_log=log)
            counts.append([{k: c[k] for k in ("applied", "stale", "quarantined")} for c in out])
            mirrors.append(
                sorted(
                    tuple(r)
                    for r in spark.read.format("delta")
                    .load(str(root / table_name(0)))
                    .select("id", *DATA, "_seq")
                    .collect()
                )
            )
    finally:
        first.unpersist()
    assert counts[0] == counts[1], counts
    assert counts[0][1] == {"applied": 1, "stale": 1, "quarantined": 0}, counts  # the INSERT back; the late UPDATE
    assert counts[0][2] == {"applied": 1, "stale": 0, "quarantined": 0}, counts  # once, though it has a tombstone
    assert mirrors[0] == mirrors[1]
    ids = [row[0] for row in mirrors[0]]
    assert back in ids and late not in ids
    assert len(ids) == 60 - len(deleted) + 1
