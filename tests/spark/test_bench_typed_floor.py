"""The redesign's floor (``bench/typed_floor.py``) does the checks it is timed with: a value that does not fit is
quarantined, a change older than the mirror's row is stale, a before-image that is not the mirror's row is drift,
and the counts reconcile. Its figure in docs/benchmark.md means something only while that holds."""

from __future__ import annotations

from bench.changes import SETUP_SEQ, autocdc_tables, changes_frame, table_name
from bench.typed_floor import floor_batch, key_check_differences


def test_the_floor_quarantines_a_misfit_skips_a_stale_change_and_finds_drift(spark, tmp_path):
    autocdc_tables(spark, tmp_path, 100, 1)  # keys 1 … 100, each with its sequence, and no tombstones
    changes = changes_frame(spark, 50, existing=100, mix=(70, 100), seed=5).selectExpr(
        "*", "row_number() OVER (ORDER BY seq) AS n"
    )
    faults = changes.selectExpr(
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
        spark.conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # map_concat: the fault's value wins
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
