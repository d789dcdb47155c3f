"""``python -m bench.codegen_cases [--codegen] [--no-checks] [--changes 10000,100000] [--writes on,off] [--stream N]``:
gold beside the naive MERGE and the AUTO CDC shape, batch after batch in one process, with the seconds Spark spent
compiling generated code in each case: whether gold's plans are reused from batch to batch (issue 39).

``--codegen``: gold's small-batch settings keep generated code on; ``--no-checks``: ``quality_checks: false`` (what
gold's change checks cost, beside a run with them); ``--writes``: per case, whether gold's large writes generate
code (``on``, as shipped: :func:`pipelines.gold.settings.write_conf`) or are interpreted (``off``), an A/B in one
process; ``--stream``: then that many batches through one gold stream (:func:`stream_batches`). One 100,000-row
mirror per case, as the ``cost`` section's. A figure for people.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pipelines.gold.settings as gold_settings
from bench.changes import BATCH_SEQ, append_changes, bench_config, changes_frame, run_gold
from bench.cost import codegen_seconds, compiled_since, gold_codegen_on
from bench.gold_sections import forget_cases, gold_case
from pipelines.warehouse import Warehouse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.codegen_cases", description=__doc__.split("\n\n")[0])
    parser.add_argument("--codegen", action="store_true", help="gold's batches with generated code on")
    parser.add_argument("--no-checks", action="store_true", help="quality_checks: false (default: on)")
    parser.add_argument("--changes", default="10000,100000,100000", help="the cases' batch sizes, in order")
    parser.add_argument("--writes", default="", help="per case: on (large writes generate code, as shipped) or off")
    parser.add_argument("--stream", type=int, default=0, help="then this many batches into one mirror, one by one")
    parser.add_argument("--stream-changes", type=int, default=10_000, help="the changes of each --stream batch")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--work", default="build/bench/codegen_cases")
    args = parser.parse_args(argv)
    if args.codegen:
        gold_codegen_on()
    from pipelines.spark import get_spark

    spark = get_spark("lakecdc-bench-codegen")
    work = Path(args.work)
    gold_case(spark, work / "warmup", rows=1_000, changes=1_000, tables=1, checks=True, setup_chunk=args.rows)
    writes = [w == "on" for w in args.writes.split(",")] if args.writes else []
    for i, changes in enumerate(int(n) for n in args.changes.split(",")):
        forget_cases()  # the same size again is measured again
        gold_settings.WRITES_GENERATE_CODE = writes[i] if i < len(writes) else True
        before = codegen_seconds(spark)
        case = gold_case(spark, work / f"case_{i}", rows=args.rows, changes=changes, tables=1,
                         checks=not args.no_checks, setup_chunk=args.rows, anchor=True)  # fmt: skip
        compiled = compiled_since(spark, before)
        steps = steps_text(case["gold_steps"])
        print(
            f"{changes} changes, codegen {'on' if args.codegen else 'off'}, writes' codegen "
            f"{'on' if gold_settings.WRITES_GENERATE_CODE else 'off'}, "
            f"checks {'off' if args.no_checks else 'on'}: gold {case['gold_seconds']} s, naive "
            f"{case['naive_seconds']} s, AUTO CDC shape {case['autocdc_seconds']} s, gold / naive "
            f"{case['gold_seconds'] / case['naive_seconds']:.2f}; compiling code {compiled} s; {steps}",
            flush=True,
        )
    if args.stream:
        stream_batches(spark, work / "stream", args.rows, args.stream, args.stream_changes)
    return 0


def steps_text(steps: dict) -> str:
    """Gold's steps as ``plan 1.23 s, decide …``."""
    return ", ".join(f"{name} {cost['seconds']:.2f} s" for name, cost in steps.items())


def stream_batches(spark, work: Path, rows: int, batches: int, changes: int) -> None:
    """One mirror of ``rows`` rows, then ``batches`` batches of ``changes`` changes through one gold checkpoint,
    each printed with the seconds Spark spent compiling code in it: a plan that holds a batch's own literals
    (its id) compiles again every batch; one that does not is compiled by the stream's first batch only."""
    shutil.rmtree(work, ignore_errors=True)
    cfg = bench_config(work / "warehouse", True)
    wh = Warehouse.from_config(cfg)
    append_changes(spark, wh, changes_frame(spark, rows, seq_base=10**15))
    run_gold(spark, bench_config(work / "warehouse", False))
    for b in range(batches):
        append_changes(spark, wh, changes_frame(spark, changes, existing=rows, seq_base=BATCH_SEQ + b * 10**7, seed=b))
        before = codegen_seconds(spark)
        run = run_gold(spark, cfg)
        compiled, steps = compiled_since(spark, before), steps_text(run.stats["steps"])
        print(f"stream batch {b + 1} of {changes} changes: gold {run.batch_seconds:.2f} s, compiling code "
              f"{compiled} s; {steps}", flush=True)  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
