"""Kill the pipeline with SIGKILL at random points, again and again, then check the mirrors.

    .venv/bin/python scripts/kill_restart.py --kills 20 --changes 600

Each round lands one more file of traffic per source, starts ``lakecdc run --once`` in its own
process and kills it after a random delay (anywhere from JVM start-up through bronze, silver,
gold and the data-quality checks). After the last kill one run goes to completion, and every
mirror must equal the reference model over all messages, with no duplicate in bronze or silver.
Prints what it did and the result; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipelines.export import expected_rows, export_warehouse  # noqa: E402
from pipelines.formats import Reject, get_decoder  # noqa: E402
from pipelines.testing.demo import KEYS, TABLE_TYPES, demo_config, generate  # noqa: E402
from pipelines.testing.model import MirrorModel  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--changes", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default="build/kill_restart")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(args.dir).resolve()
    shutil.rmtree(work, ignore_errors=True)
    messages = generate(args.changes, args.seed)
    conf = demo_config(work, quality=False)
    (work / "landing").mkdir(parents=True)
    conf_path = work / "pipeline.yaml"
    conf_path.write_text(yaml.safe_dump(conf))
    chunks = {s: [lines[i :: args.kills] for i in range(args.kills)] for s, lines in messages.items()}
    began = time.monotonic()
    for round_ in range(args.kills):
        for source, parts in chunks.items():
            folder = work / "landing" / source
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{round_:04d}.jsonl").write_bytes(b"\n".join(parts[round_]) + b"\n")
        delay = rng.uniform(3, 75)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", "run", "--conf", str(conf_path), "--once"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=delay)
            note = f"finished before the kill ({delay:.0f} s)"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            note = f"SIGKILL after {delay:.1f} s"
        print(f"round {round_ + 1}/{args.kills}: {note}", flush=True)

    from pipelines.cli import main as cli
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    assert cli(["run", "--conf", str(conf_path), "--once"]) == 0
    spark = get_spark("kill-restart-check")
    wh = Warehouse(str(work / "warehouse"))
    exported = export_warehouse(spark, wh)
    model = MirrorModel()
    from pipelines.config import load_config

    cfg = load_config(conf_path)
    for source, lines in messages.items():
        fmt = cfg.source(source).format
        for raw in lines:
            try:
                model.add_all(get_decoder(fmt).decode(raw, cfg.decode_context(fmt)))
            except Reject:
                pass
    expected = {t: expected_rows(model.rows(t), TABLE_TYPES[t], KEYS[t]) for t in model.tables()}
    bronze = wh.bronze.read(spark)
    changes = wh.silver("changes").read(spark)
    dup_bronze = bronze.count() - bronze.select("position").distinct().count()
    dup_changes = changes.count() - changes.select("bronze_position", "change_index").distinct().count()
    sent = sum(map(len, messages.values()))
    print(
        f"{args.kills} rounds in {time.monotonic() - began:.0f} s; bronze {bronze.count()} of {sent} messages, "
        f"{dup_bronze} duplicates; silver changes {changes.count()}, {dup_changes} duplicates"
    )
    for table in sorted(expected):
        same = exported.get(table) == expected[table]
        print(
            f"  {table}: {len(exported.get(table, []))} rows, model {len(expected[table])}: "
            f"{'equal' if same else 'DIFFERENT'}"
        )
    ok = exported == expected and dup_bronze == 0 and dup_changes == 0 and bronze.count() == sent
    print("PASS: mirrors equal the model, no duplicates, no holes" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
