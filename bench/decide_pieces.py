"""``python -m bench.decide_pieces [--rows N] [--changes N] [--repeat K]``: what each piece of gold's decide step
costs inside one measured batch (issue 39), where a whole batch drifts by a second from case to case.

One mirror of ``--rows`` rows (inserts), then one batch of ``--changes`` updates and deletes, through the bench's own
:func:`bench.gold_sections.gold_case`. Inside that batch, with its own frames (the checked changes cached as the
batch caches them), each piece of the keyed rows is built ``--repeat`` times and written to Spark's ``noop`` sink
(every column made, nothing stored), each figure including the pieces before it: the keyed rows, the key-state
lookup, the rows joined with it, the change checks' value hashes, their first-change window, and the change checks
whole. A figure for people; docs/benchmark.md reads it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import pipelines.gold.batch_decision as decision
from bench.decode import noop_seconds
from bench.gold_sections import gold_case
from pipelines.gold.decide import keyed_changes, probe_columns, with_change_checks, with_key_state
from pipelines.gold.lookups import MIRROR
from pipelines.gold.order import ORD

PIECES = ("keyed rows", "key-state lookup", "joined", "value hashes", "window", "change checks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decide_pieces", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", default="build/bench/decide_pieces")
    args = parser.parse_args(argv)
    from pipelines.spark import get_spark

    spark = get_spark("lakecdc-bench-decide-pieces")
    measured: dict[str, list[float]] = {}
    count_decisions = decision.count_decisions

    def timing_pieces(run, plans, lookups, checked, good, rows, skipped):
        if not measured and good.where("op IN ('UPDATE', 'DELETE')").limit(1).count():  # the measured batch
            noop_seconds(good)  # fills the batch's cache of its checked changes: what every piece reads
            for i in range(args.repeat):
                seconds = piece_seconds(run, plans, lookups, good)
                print(f"{i + 1}: " + ", ".join(f"{n} {s:.2f} s" for n, s in seconds.items()), flush=True)
                for name, s in seconds.items():
                    measured.setdefault(name, []).append(s)
        return count_decisions(run, plans, lookups, checked, good, rows, skipped)

    decision.count_decisions = timing_pieces
    try:
        gold_case(spark, Path(args.work), rows=args.rows, changes=args.changes, tables=1, checks=True,
                  setup_chunk=args.rows, batch_keys=min(args.rows, args.changes))  # fmt: skip
    finally:
        decision.count_decisions = count_decisions
    print(f"median of {args.repeat}, {args.changes} changes, each with the pieces before it: " + ", ".join(
        f"{n} {statistics.median(measured[n]):.2f} s" for n in PIECES if n in measured))  # fmt: skip
    return 0


def piece_seconds(run, plans, lookups, good) -> dict[str, float]:
    """Each piece of :func:`pipelines.gold.batch_decision.rows_with_key_state` over ``good``, written to the noop
    sink: seconds by piece."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # a column of its own: the batch's cached rows are the same plan as the last piece, and Spark would read them
    good = good.withColumn("_decide_piece", F.lit(time.perf_counter()))
    keyed = keyed_changes(good, lookups)
    wanted = keyed.select(F.col(MIRROR).alias("mirror"), "k").distinct()
    state = run.state.key_state(run.spark, wanted, run.state_batch, small=True)
    joined = with_key_state(keyed, state, plans, small=True)
    hashed = joined.withColumns({name: F.expr(sql) for name, sql in probe_columns(lookups).items()})
    first = F.row_number().over(Window.partitionBy(MIRROR, "k").orderBy(ORD)) == 1
    frames = {
        "keyed rows": keyed,
        "key-state lookup": state,
        "joined": joined,
        "value hashes": hashed,
        "window": joined.withColumn("first", first),
        "change checks": with_change_checks(joined, lookups),
    }
    return {name: noop_seconds(frame) for name, frame in frames.items()}


if __name__ == "__main__":
    raise SystemExit(main())
