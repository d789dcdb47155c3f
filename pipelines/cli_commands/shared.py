"""What the command bodies share: progress lines on stderr (per stage and per micro-batch) and the
configuration a command works on (``--conf`` with ``--catalog``/``--schema``/``--checkpoints``, or
``--warehouse``, or ``--table``/``--key``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.config import PipelineConfig
    from pipelines.progress import ProgressReporter
    from pipelines.warehouse import Warehouse


def progress_line(message: str) -> None:
    print(f"[lakecdc] {message}", file=sys.stderr, flush=True)


def batch_reporter(is_tty: bool | None = None) -> ProgressReporter:
    """Per-batch progress: printed by :func:`progress_line` when stderr is a terminal, else only logged (INFO)."""
    from pipelines.progress import ProgressReporter

    return ProgressReporter(emit=progress_line, is_tty=sys.stderr.isatty() if is_tty is None else is_tty)


@contextmanager
def reporting_batches(spark: SparkSession, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """Report each micro-batch of the streams run inside the block (rows, batches, lag). Yields the stage
    printer to give the runner: it prints a stage's batches before the stage's next line. A continuous run
    (``enabled`` false) reports its batches itself."""
    from pipelines.progress import batch_progress

    if not enabled:
        yield progress_line
        return
    with batch_progress(spark, batch_reporter()) as listener:

        def stage_line(message: str) -> None:
            listener.drain()
            progress_line(message)

        yield stage_line


@contextmanager
def holding_warehouse(cfg: PipelineConfig, command: str, wait: bool = False) -> Iterator[None]:
    """Hold the configuration's warehouse for the block (:mod:`pipelines.lock`): another run holding it
    stops this one at once with who and since when, or (``--wait``) this one waits for it."""
    import uuid

    from pipelines.lock import warehouse_lease
    from pipelines.warehouse import Warehouse

    wh = Warehouse.from_config(cfg)
    schemas = ", ".join(sorted({s for s in wh.schemas.values() if s}))
    where = f"{wh.catalog} (schemas {schemas})" if wh.catalog else str(wh.root)
    run = f"{command}-{uuid.uuid4().hex[:12]}"
    with warehouse_lease(wh.checkpoint_root, where, run, wait=wait, progress=progress_line):
        yield


def target_warehouse(args: argparse.Namespace) -> tuple[Warehouse, PipelineConfig]:
    """(Warehouse, PipelineConfig) of --conf, or of --warehouse with an empty configuration."""
    from pipelines.config import PipelineConfig, check_locations, load_config
    from pipelines.warehouse import Warehouse

    if args.conf:
        cfg = check_locations(load_config(args.conf))
        wh = Warehouse.from_config(cfg)
        if not wh.catalog and not Path(wh.root).is_dir():
            raise FileNotFoundError(f"--conf {args.conf}: its warehouse {wh.root} does not exist (nothing ran yet?)")
        return wh, cfg
    wh = Warehouse(args.warehouse)
    if not Path(wh.root).is_dir():
        raise FileNotFoundError(f"--warehouse {args.warehouse}: no such directory")
    return wh, PipelineConfig(sources=(), tables={}, warehouse=wh.root)


def context_config(args: argparse.Namespace, format_id: str, source_path: str | None = None) -> PipelineConfig:
    """A PipelineConfig from --conf plus --table/--key, with one source for ``format_id``."""
    from dataclasses import replace

    from pipelines.config import ConfigError, PipelineConfig, Source, TableConfig, load_config

    cfg = load_config(args.conf) if getattr(args, "conf", None) else PipelineConfig(sources=(), tables={})
    tables = dict(cfg.tables)
    for item in args.key:
        name, eq, cols = item.partition("=")
        if not eq or "." not in name or not cols:
            raise ConfigError(f"--key {item!r}: expected DB.TABLE=COL1,COL2")
        old = tables.get(name)
        key = tuple(c.strip() for c in cols.split(",") if c.strip())
        # the file's other settings of the table (columns kept, target, ...) stay
        tables[name] = replace(old, key=key) if old else TableConfig(name=name, key=key)
    if args.table and "." not in args.table:
        raise ConfigError(f"--table {args.table!r}: expected DB.TABLE")
    sources = cfg.sources
    if source_path is not None:
        sources = (Source(name=f"replay_{format_id}", format=format_id, path=source_path),)
    return replace(cfg, tables=tables, default_table=args.table or cfg.default_table, sources=sources)
