"""``python -m bench.codegen_cases [--codegen] [--no-checks] [--changes 10000,100000,100000]``: gold beside the
naive MERGE and the AUTO CDC shape, batch after batch in one process, with the seconds Spark spent compiling
generated code in each case: whether gold's plans are reused from batch to batch (issue 39). ``--codegen``: gold's
small-batch settings keep generated code on; ``--no-checks``: ``quality_checks: false`` (what gold's change checks
cost, beside a run with them). One 100,000-row mirror per case, as the ``cost`` section's. A figure for people.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.cost import codegen_seconds, gold_codegen_on
from bench.gold_sections import forget_cases, gold_case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.codegen_cases", description=__doc__.split("\n\n")[0])
    parser.add_argument("--codegen", action="store_true", help="gold's batches with generated code on")
    parser.add_argument("--no-checks", action="store_true", help="quality_checks: false (default: on)")
    parser.add_argument("--changes", default="10000,100000,100000", help="the cases' batch sizes, in order")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--work", default="build/bench/codegen_cases")
    args = parser.parse_args(argv)
    if args.codegen:
        gold_codegen_on()
    from pipelines.spark import get_spark

    spark = get_spark("lakecdc-bench-codegen")
    work = Path(args.work)
    gold_case(spark, work / "warmup", rows=1_000, changes=1_000, tables=1, checks=True, setup_chunk=args.rows)
    for i, changes in enumerate(int(n) for n in args.changes.split(",")):
        forget_cases()  # the same size again is measured again
        before = codegen_seconds(spark)
        case = gold_case(spark, work / f"case_{i}", rows=args.rows, changes=changes, tables=1,
                         checks=not args.no_checks, setup_chunk=args.rows, anchor=True)  # fmt: skip
        after = codegen_seconds(spark)
        compiled = None if before is None or after is None else round(after - before, 2)
        steps = ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in case["gold_steps"].items())
        print(
            f"{changes} changes, codegen {'on' if args.codegen else 'off'}, "
            f"checks {'off' if args.no_checks else 'on'}: gold {case['gold_seconds']} s, naive "
            f"{case['naive_seconds']} s, AUTO CDC shape {case['autocdc_seconds']} s, gold / naive "
            f"{case['gold_seconds'] / case['naive_seconds']:.2f}; compiling code {compiled} s; {steps}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
