"""``lakecdc maintain``: table maintenance of a pipeline's tables, run between runs (docs/operations.md).

1. gold's state tables are compacted (:meth:`pipelines.gold.state.GoldState.compact`): every key's newest
   row, the pending changes not applied yet, each mirror's newest progress. The newest batch's rows stay as
   they are (a batch that crashed after writing them is retried against the rows before it);
2. ``OPTIMIZE`` every table: small files together, deletion vectors purged, a clustered mirror clustered;
3. ``VACUUM`` every table, keeping ``--retain-hours`` (default 168, Delta's own default; Delta refuses less
   unless a table's ``delta.deletedFileRetentionDuration`` allows it): files a stream behind by less than
   that, a change-feed reader or a time-travel query still needs stay.

Tables: bronze, silver (with ``quarantine_resolved``), ``dq_results`` (``dq/dq_results``), gold's state tables,
every mirror and its side tables
(tombstones of mirrors written before key state, keyless mirrors' applied ids, histories).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.warehouse import TableRef, Warehouse

#: Delta's default ``delta.deletedFileRetentionDuration``: VACUUM keeps what a week-old reader needs.
DEFAULT_RETAIN_HOURS = 168


def maintained_tables(spark: SparkSession, wh: Warehouse) -> list[TableRef]:
    """Every table ``maintain`` works on that exists, in flow order (bronze, silver, gold)."""
    from pipelines.export import mirror_refs

    return [ref for ref in candidate_tables(wh, mirror_refs(spark, wh).values()) if ref.exists(spark)]


def candidate_tables(wh: Warehouse, mirrors: Iterable[TableRef]) -> list[TableRef]:
    """The tables ``maintain`` works on where they exist: bronze, silver's, ``dq_results`` where the checks
    write it (``dq/dq_results``, or the silver schema: :func:`pipelines.quality.storage.dq_results_ref`), gold's
    state tables, and each of ``mirrors`` with its side tables."""
    from pipelines.quality.storage import dq_results_ref
    from pipelines.warehouse import SIDE_TABLES, SILVER_TABLES, STATE_TABLES

    refs = [wh.bronze, *(wh.silver(n) for n in SILVER_TABLES), dq_results_ref(wh)]
    refs += [wh.gold_state(n) for n in STATE_TABLES]
    for mirror in mirrors:
        refs += [mirror, *(wh.side_of(mirror, kind) for kind in SIDE_TABLES)]
    return refs


def compact_state(spark: SparkSession, wh: Warehouse) -> int | None:
    """Compact gold's state tables below their newest batch; that batch's number (None: no key state)."""
    from pyspark.sql import functions as F

    from pipelines.gold.state import GoldState

    state = GoldState(wh)
    if not state.keys.exists(spark):
        return None
    newest = state.keys.read(spark).agg(F.max("batch")).first()[0]
    if newest is None:
        return None
    state.compact(spark, int(newest))
    return int(newest)


def cmd_maintain(args: argparse.Namespace) -> int:
    from pipelines.cli_commands.pipeline import with_locations
    from pipelines.config import load_config
    from pipelines.spark import get_spark
    from pipelines.warehouse import Warehouse

    cfg = with_locations(load_config(args.conf), args)
    wh = Warehouse.from_config(cfg)
    spark = get_spark("lakecdc-maintain", master=args.master)
    tables = maintained_tables(spark, wh)
    if args.dry_run:
        for ref in tables:
            print(f"would OPTIMIZE and VACUUM (RETAIN {args.retain_hours:g} HOURS) {ref.name or ref.path}")
        print(f"would compact gold's state tables; {len(tables)} tables, nothing changed (--dry-run)")
        return 0
    newest = compact_state(spark, wh)
    print("gold state: none yet" if newest is None else f"gold state: compacted below batch {newest}")
    for ref in tables:
        metrics = spark.sql(f"OPTIMIZE {ref.sql}").first()["metrics"]
        spark.sql(f"VACUUM {ref.sql} RETAIN {args.retain_hours:g} HOURS")
        print(f"{ref.name or ref.path}: {metrics['numFilesRemoved']} files into {metrics['numFilesAdded']}; vacuumed")
        sys.stdout.flush()
    return 0
