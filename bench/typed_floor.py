"""``python -m bench.typed_floor [--rows N] [--changes N] [--repeat K] [--gold]``: the redesigned gold batch that
issue 39 names, built for the bench's one keyed table and measured beside the naive MERGE and the AUTO CDC shape:
how low gold's cost per change can go with its checks on.

The floor batch (:func:`floor_batch`) reads the same silver ``changes`` (``map<string,string>`` images) and does
what gold must do for keyed tables with full images, in the redesign's shape, every table of the batch in one pass:

1. **typed once, per column** – each value converted as gold converts it (:func:`pipelines.sql.convert_expr`), the
   column named in the SQL (no lambdas over the maps, no per-table facts looked up per row); a value that does not
   fit gives the change its quarantine ``reason``; a NULL or missing key too; an UPDATE that moves its key is a
   DELETE of the old key first (as :func:`pipelines.gold.decide.keyed_changes`); the typed changes are cached;
2. **one join with what the mirror holds** – each change beside its key's prior state read from the mirror itself
   (``_seq`` and a hash of the row's values) and from its tombstones (``_seq`` of the DELETE): no key-state copy;
   ``stale`` (older than the prior ``_seq``) and the drift check (the first UPDATE/DELETE's before-image hashed
   against the mirror's row) ride that join;
3. **one aggregation per key** – the last fresh change (``max_by`` its sequence), the counts of the change checks;
   checkpointed: the counts, the MERGE and the tombstones read it;
4. **one collect of the counts**, reconciled (changes = applied + stale + quarantined);
5. **a sequence-gated MERGE** into the mirror (``s.seq >= t._seq``, as Apache Spark's AUTO CDC ``Scd1BatchProcessor``),
   stamped with Delta's ``txnAppId``/``txnVersion`` (a retried batch merges once), and one into the tombstones.

A second floor (``floor, tombstone log``) appends the batch's DELETEs to an append-only tombstone log instead of
merging them into the tombstones, and reads each key's newest prior state.

What it leaves out of gold: schema evolution, partial images, ``deletes: soft``, history, TRUNCATE, computed
columns, ``where``, row rules, deferral and budgets, tables of other shapes in the same pass. So it is a floor:
what gold's checks and guarantees cost at least in this design, not a second gold. After each repetition the
floor's mirror is compared with the naive MERGE's (the batch has no stale change, so both hold the same rows). A
figure for people; docs/benchmark.md reads it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from bench.changes import (
    COLUMNS,
    append_changes,
    autocdc_tables,
    bench_config,
    changes_frame,
    naive_tables,
    run_autocdc,
    run_foreach,
    run_naive,
    table_name,
)
from pipelines.delta_writes import idempotent_dml, release_checkpoint
from pipelines.gold.steps import StepClock
from pipelines.sql import convert_expr, spark_type
from pipelines.warehouse import Warehouse

#: The bench table's columns as its mirror types them (:data:`bench.changes.NAIVE_DDL`), the key first.
FLOOR_TYPES = {column: spark_type(source) for column, source in COLUMNS.items()}
KEY = "id"
DATA = [c for c in FLOOR_TYPES if c != KEY]
#: A change's position in its batch: its sequence, a moved key's DELETE just before the UPDATE that moves it.
ORDER = "struct(seq, NOT moved)"


def converted(image: str, column: str) -> str:
    """SQL: one value of ``image`` converted to its column's type as gold converts it (NULL: it does not fit; a
    DECIMAL's text with more scale than the column's, or a time with more than 6 fractional digits, does not)."""
    return convert_expr(f"{image}['{column}']", COLUMNS[column])


def misfit(image: str, column: str) -> str:
    """SQL: the change's reason when ``image``'s value of ``column`` does not fit the column's type, else NULL."""
    raw = f"{image}['{column}']"
    return (
        f"CASE WHEN {raw} IS NOT NULL AND {converted(image, column)} IS NULL THEN "
        f"concat('value ', substr({raw}, 1, 80), ' of column {column} does not fit {FLOOR_TYPES[column].lower()}') END"
    )


def typed_changes(changes):
    """Step 1: each change's values typed once per column, its ``reason`` (NULL: it can apply), and a moved key's
    DELETE as a second row of the same change (``moved``)."""
    from pyspark.sql import functions as F

    reasons = [misfit(image, c) for image in ("after", "before") for c in FLOOR_TYPES]
    reasons.append(
        f"CASE WHEN op != 'TRUNCATE' AND coalesce(after, before)['{KEY}'] IS NULL THEN "
        f"'key column {KEY} is missing from the change or NULL' END"
    )
    row_hash = "xxhash64(" + ", ".join(converted("before", c) for c in DATA) + ")"
    typed = changes.selectExpr(
        "table",
        "seq",
        "op",
        "bronze_position",
        f"coalesce({', '.join(reasons)}) AS reason",
        f"coalesce({converted('after', KEY)}, {converted('before', KEY)}) AS new_id",
        f"CASE WHEN op = 'UPDATE' THEN {converted('before', KEY)} END AS old_id",
        *[f"{converted('after', c)} AS {c}" for c in DATA],
        f"CASE WHEN op IN ('UPDATE', 'DELETE') THEN {row_hash} END AS before_hash",
    )
    moves = "old_id IS NOT NULL AND old_id != new_id"
    both = typed.select("*", F.explode(F.expr(f"CASE WHEN {moves} THEN array(true, false) ELSE array(false) END"))
                        .alias("moved"))  # fmt: skip
    return both.selectExpr(
        "*",
        "CASE WHEN moved THEN old_id ELSE new_id END AS id",
        "moved OR op = 'DELETE' AS deleted",
        f"coalesce({moves}, false) AS moving",
    ).drop("new_id", "old_id")


def prior_state(spark, table: str, mirror: str, tombstones: str, log: bool = False):
    """What a table's mirror holds before the batch, per key: a live row's ``_seq`` and the hash of its values, or
    a tombstone's ``_seq`` (the key deleted). ``log``: the tombstones are an append-only log (a key's newest entry
    counts, and a key brought back keeps its older entries), so each key's newest prior state is taken."""
    from pyspark.sql import functions as F

    def held(path: str, live: bool):
        row_hash = F.xxhash64(*DATA) if live else F.lit(None).cast("bigint")
        return (
            spark.read.format("delta")
            .load(path)
            .select(F.lit(table).alias("table"), KEY, F.col("_seq").alias("p_seq"), F.lit(live).alias("p_live"),
                    row_hash.alias("p_hash"))
        )  # fmt: skip

    both = held(mirror, True).unionByName(held(tombstones, False))
    if not log:
        return both
    newest = F.max_by(F.struct("p_seq", "p_live", "p_hash"), "p_seq").alias("p")
    return both.groupBy("table", KEY).agg(newest).select("table", KEY, "p.*")


def per_key(typed, prior):
    """Steps 2 and 3: each change beside its key's prior state, ``stale`` and the drift check on that join, then one
    row per key: its last fresh change, its counts, what the MERGE and the key checks read."""
    from pyspark.sql import functions as F

    joined = typed.join(F.broadcast(prior), ["table", KEY], "left").selectExpr(
        "*", "reason IS NULL AND p_seq IS NOT NULL AND seq < p_seq AS stale"
    )
    fresh = "reason IS NULL AND NOT stale"
    last = F.struct(F.col("seq"), F.col("deleted"), *[F.col(c) for c in DATA])
    # the drift check: the first fresh UPDATE/DELETE of a key not applied yet (a retried batch's equal sequence is
    # no drift), its before-image against the mirror's row; an UPDATE that moves its key is compared on the old
    # key (its DELETE row), which its before-image describes
    compared = (
        f"{fresh} AND (p_seq IS NULL OR seq > p_seq) AND (op = 'DELETE' OR (op = 'UPDATE' AND (moved OR NOT moving)))"
    )
    first = F.struct(F.col("before_hash"), F.col("p_live"), F.col("p_hash"))
    return joined.groupBy("table", KEY).agg(
        F.max_by(F.when(F.expr(fresh), last), F.when(F.expr(fresh), F.expr(ORDER))).alias("l"),
        F.min_by(F.when(F.expr(compared), first), F.when(F.expr(compared), F.expr(ORDER))).alias("f"),
        F.count_if(F.expr("reason IS NOT NULL AND NOT moved")).alias("quarantined"),
        F.count_if(F.expr("reason IS NULL AND stale AND NOT moved")).alias("stale"),
        F.count_if(F.expr(f"{fresh} AND NOT moved")).alias("applied"),
        F.first("p_live", ignorenulls=True).alias("p_live"),
        F.first("p_seq", ignorenulls=True).alias("p_seq"),
    )


def batch_counts(keys) -> dict:
    """Step 4: the batch's counts in one collect: what it applied, left stale, quarantined, the drift check, and
    what each key's write is expected to do (the key checks against Delta's metrics)."""
    from pyspark.sql import functions as F

    live_before = "coalesce(p_live, false)"
    rows = (
        keys.groupBy("table")
        .agg(
            F.sum("quarantined").alias("quarantined"),
            F.sum("stale").alias("stale"),
            F.sum("applied").alias("applied"),
            F.count_if(F.expr("f IS NOT NULL")).alias("drift_n"),
            F.count_if(
                F.expr("f IS NOT NULL AND NOT (coalesce(f.p_live, false) AND f.before_hash <=> f.p_hash)")
            ).alias("drift_u"),
            F.count_if(F.expr(f"l IS NOT NULL AND NOT l.deleted AND NOT {live_before}")).alias("inserted"),
            F.count_if(F.expr(f"l IS NOT NULL AND NOT l.deleted AND {live_before}")).alias("updated"),
            F.count_if(F.expr(f"l IS NOT NULL AND l.deleted AND {live_before}")).alias("deleted"),
            F.count_if(F.expr("l IS NOT NULL AND (l.deleted OR p_live = false)")).alias("tombstones"),
        )
        .collect()
    )
    return {r["table"]: r.asDict() for r in rows}


def floor_batch(spark, batch_df, root: Path, batch_id: int, out: list[dict], tombstone_log: bool = False) -> None:
    """One batch through the floor design (the module docstring): every table's changes typed (cached), joined and
    folded per key in one pass (checkpointed), the counts in one collect, then each table's two MERGEs; per table
    its counts into ``out``. ``tombstone_log``: the batch's DELETEs appended to an append-only tombstone log instead
    of merged into the tombstones (:func:`prior_state` reads the log's newest entry per key)."""
    from pyspark.sql import functions as F

    clock = StepClock(spark, "floor")
    typed = typed_changes(batch_df).persist()
    try:
        with clock.step("typed"):  # the cache made, and the batch's tables read off it
            names = sorted(r["table"] for r in typed.select("table").distinct().collect())
        prior = None
        for name in names:
            mine = prior_state(spark, name, str(root / name), str(root / f"{name}__tombstones"), tombstone_log)
            prior = mine if prior is None else prior.unionByName(mine)
        with clock.step("per key"):
            keys = per_key(typed, prior).localCheckpoint()
    finally:
        typed.unpersist()
    try:
        with clock.step("counts"):
            counts = batch_counts(keys)
        for name in names:
            source = keys.where((F.col("table") == name) & F.col("l").isNotNull()).select(KEY, "l.*", "p_live")
            c = counts[name]
            with clock.step("merge"):
                c["merged"] = merge_mirror(spark, str(root / name), source, f"floor-m-{name}", batch_id)
            if c["tombstones"]:
                with clock.step("tombstones"):
                    write = append_tombstones if tombstone_log else merge_tombstones
                    write(spark, str(root / f"{name}__tombstones"), source, f"floor-d-{name}", batch_id)
            c["steps"] = {step: cost.seconds for step, cost in clock.costs.items()}
            out.append(c)
    finally:
        release_checkpoint(keys)


def merge_mirror(spark, mirror: str, source, stamp: str, batch_id: int) -> dict | None:
    """Step 5: the sequence-gated MERGE into the mirror, once per batch; Delta's metrics (None: skipped, a retry)."""
    from delta.tables import DeltaTable

    with idempotent_dml(spark, stamp, batch_id):
        metrics = (
            DeltaTable.forPath(spark, mirror)
            .alias("t")
            .merge(source.alias("s"), f"t.{KEY} = s.{KEY}")
            .whenMatchedDelete(condition="s.deleted AND s.seq > t._seq")
            .whenMatchedUpdate(
                condition="NOT s.deleted AND s.seq >= t._seq", set={**{c: f"s.{c}" for c in DATA}, "_seq": "s.seq"}
            )
            .whenNotMatchedInsert(
                condition="NOT s.deleted", values={**{c: f"s.{c}" for c in FLOOR_TYPES}, "_seq": "s.seq"}
            )
            .execute()
        )
    merged = metrics.first() if metrics is not None else None
    return merged.asDict() if merged is not None else None


def merge_tombstones(spark, tombstones: str, source, stamp: str, batch_id: int) -> None:
    """... and the keys the batch deletes into the tombstones, the keys it brings back out of them."""
    from delta.tables import DeltaTable

    with idempotent_dml(spark, stamp, batch_id):
        (
            DeltaTable.forPath(spark, tombstones)
            .alias("d")
            .merge(source.where("deleted OR p_live = false").alias("s"), f"d.{KEY} = s.{KEY}")
            .whenMatchedUpdate(condition="s.deleted", set={"_seq": "s.seq"})
            .whenMatchedDelete(condition="NOT s.deleted")
            .whenNotMatchedInsert(condition="s.deleted", values={KEY: f"s.{KEY}", "_seq": "s.seq"})
            .execute()
        )


def append_tombstones(spark, tombstones: str, source, stamp: str, batch_id: int) -> None:
    """... or the keys the batch deletes appended to the tombstone log, once per batch (Delta's ``txnAppId``)."""
    deleted = source.where("deleted").selectExpr(KEY, "seq AS _seq")
    deleted.write.format("delta").mode("append").option("txnAppId", stamp).option("txnVersion", batch_id).save(
        tombstones
    )


def key_check_differences(counts: dict) -> int | None:
    """The key checks: the rows Delta reports against what the prior state expected (0: as expected)."""
    merged = counts["merged"]
    if merged is None:
        return None
    return (
        abs(int(merged["num_inserted_rows"]) - counts["inserted"])
        + abs(int(merged["num_updated_rows"]) - counts["updated"])
        + abs(int(merged["num_deleted_rows"]) - counts["deleted"])
    )


def same_rows(spark, floor_mirror: str, naive_mirror: str) -> bool:
    """Whether the floor's mirror (``_seq`` aside) holds exactly the naive MERGE's rows."""
    floor = spark.read.format("delta").load(floor_mirror).drop("_seq")
    naive = spark.read.format("delta").load(naive_mirror).select(*floor.columns)
    return floor.exceptAll(naive).isEmpty() and naive.exceptAll(floor).isEmpty()


def case_dir(design: str) -> str:
    """The directory of a design's tables in a case (``floor, tombstone log`` → ``floor_tombstone_log``)."""
    return design.replace(",", "").replace(" ", "_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.typed_floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="cases of each design, in alternating order")
    parser.add_argument("--gold", action="store_true", help="gold's own case after them (bench.gold_sections)")
    parser.add_argument("--work", default="build/bench/typed_floor")
    args = parser.parse_args(argv)
    from pipelines.spark import get_spark

    spark = get_spark("lakecdc-bench-typed-floor")
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    wh = Warehouse.from_config(bench_config(work / "warehouse", True))
    warmup_version = append_changes(spark, wh, changes_frame(spark, 1_000, existing=1_000, seed=3))

    def naive(root: Path, v: int) -> float:
        naive_tables(spark, root, args.rows, 1)
        return run_naive(spark, wh, root, v, root / "_checkpoint").batch_seconds

    def autocdc(root: Path, v: int) -> float:
        autocdc_tables(spark, root, args.rows, 1)
        return run_autocdc(spark, wh, root, v, root / "_checkpoint").batch_seconds

    counted: dict[str, dict] = {}
    floor_steps: dict[str, list[dict[str, float]]] = {}

    def floor_design(name: str, tombstone_log: bool):
        def floor(root: Path, v: int) -> float:
            autocdc_tables(spark, root, args.rows, 1)  # the mirror with ``_seq``, and its empty tombstones
            out: list[dict] = []
            ids = iter(range(10**6))
            run = run_foreach(
                spark, wh, v, root / "_checkpoint", "bench_typed_floor",
                lambda df: floor_batch(spark, df, root, next(ids), out, tombstone_log),
            )  # fmt: skip
            counted[name] = out[0]
            floor_steps.setdefault(name, []).append(out[0]["steps"])
            return run.batch_seconds

        return floor

    floors = {"typed floor": False, "floor, tombstone log": True}
    designs = {"naive MERGE": naive, "AUTO CDC shape": autocdc}
    designs |= {name: floor_design(name, log) for name, log in floors.items()}
    for name, case in designs.items():  # classes loaded, code generated: the warm-up batch, not measured
        case(work / "warmup" / case_dir(name), warmup_version)
    version = append_changes(spark, wh, changes_frame(spark, args.changes, existing=args.rows))
    seconds: dict[str, list[float]] = {name: [] for name in designs}
    for i in range(args.repeat):
        order = list(designs) if i % 2 == 0 else list(reversed(designs))
        for name in order:
            root = work / f"case_{i}" / case_dir(name)
            seconds[name].append(designs[name](root, version))
        print(f"[typed floor] case {i + 1}: " + ", ".join(f"{n} {seconds[n][-1]:.2f} s" for n in order), flush=True)
        naive_mirror = str(work / f"case_{i}" / case_dir("naive MERGE") / table_name(0))
        for name in floors:
            c = counted[name]
            reconciled = c["applied"] + c["stale"] + c["quarantined"] == args.changes
            mirror = str(work / f"case_{i}" / case_dir(name) / table_name(0))
            same = same_rows(spark, mirror, naive_mirror)
            print(
                f"  {name}: applied {c['applied']}, stale {c['stale']}, quarantined {c['quarantined']} "
                f"(of {args.changes}: {'reconciled' if reconciled else 'NOT reconciled'}), "
                f"drift {c['drift_u']} of {c['drift_n']} compared, key-check differences {key_check_differences(c)}, "
                f"mirror {'equals' if same else 'DIFFERS FROM'} the naive MERGE's",
                flush=True,
            )
    median = {name: statistics.median(s) for name, s in seconds.items()}
    print(f"[typed floor] {args.changes} changes into {args.rows} rows, medians of {args.repeat}:")
    for name, s in median.items():
        print(f"  {name:21} {s:6.2f} s  {s / median['naive MERGE']:.2f}x the naive MERGE  "
              f"{1000 * s / args.changes:.3f} ms per change")  # fmt: skip
    for name, runs in floor_steps.items():
        steps = {n: statistics.median(s.get(n, 0.0) for s in runs) for n in runs[0]}
        print(f"  {name} by step (medians): " + ", ".join(f"{n} {s:.2f} s" for n, s in steps.items()))
    if args.gold:
        from bench.gold_sections import gold_case

        began = time.perf_counter()
        case = gold_case(spark, work / "gold", rows=args.rows, changes=args.changes, tables=1, checks=True,
                         setup_chunk=args.rows)  # fmt: skip
        print(
            f"  {'gold':21} {case['gold_seconds']:6.2f} s  {case['gold_seconds'] / median['naive MERGE']:.2f}x the "
            f"naive MERGE above (its own naive MERGE {case['naive_seconds']} s; {time.perf_counter() - began:.0f} s "
            "with its setup)",
            flush=True,
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
