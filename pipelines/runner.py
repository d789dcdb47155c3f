"""Run stages as checkpointed streams: until caught up (``availableNow``) or continuously.

A restarted stage resumes from its checkpoint; what it had committed is not redone
(bronze: the Delta sink's own log; silver and gold: idempotent Delta commits).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.bronze import start_bronze
from pipelines.config import STAGES, PipelineConfig
from pipelines.connect_relay import receive, relay_key
from pipelines.consistent import record_point
from pipelines.errors import ConfigError
from pipelines.export import mirror_refs
from pipelines.gold.identity import SOURCE_IDENTITY_PROPERTY
from pipelines.gold.stage import GoldStats, GoldStream, flush_due, gold_checkpoint, source_table_col, start_gold
from pipelines.gold.type_mapping import map_batch_types
from pipelines.metrics import MeteredGoldStats, RunMetrics
from pipelines.mirror_columns import table_properties
from pipelines.mirror_key import key_of
from pipelines.one_query import (
    ONE_QUERY_UNIT,
    continue_above_state,
    require_finished,
    start_one_query,
    take_relayed,
    uses_one_query,
)
from pipelines.preflight import preflight
from pipelines.quality.certify import certify, newest_version, pipeline_running
from pipelines.quality.checks import cdc_checks
from pipelines.quality.docs import build_data_docs
from pipelines.quality.rows import check_rows
from pipelines.quality.storage import write_results
from pipelines.quality.written import freshness_rows
from pipelines.routing import route_shards
from pipelines.serving import RebuildServer
from pipelines.silver import SilverStats, last_seen, silver_checkpoint, start_silver
from pipelines.spark_logs import is_connect
from pipelines.warehouse import SourceTable, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass
class RunSummary:
    stages: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    applied: int = 0
    stale: int = 0
    gold_quarantined: int = 0
    skipped: int = 0  # changes of tables the configuration leaves out (silver's ``skipped``)
    filtered: int = 0  # changes outside a table's ``where`` (gold's ``skipped``)
    dq_results: int = 0
    dq_failed: int = 0
    data_docs: str | None = None
    certified: list = field(default_factory=list)  # pipelines.quality.certify.Verdict per mirror checked
    #: gold's batches, each one's seconds per step (the one query's ``land``/``decode``/``apply`` too; the newest
    #: ``pipelines.gold.steps.KEPT_BATCHES``)
    batches: list[dict] = field(default_factory=list)


def run_pipeline(
    spark: SparkSession,
    cfg: PipelineConfig,
    stages: tuple[str, ...] = STAGES,
    available_now: bool = True,
    progress: Callable[[str], None] = lambda msg: None,
    stop_after: float | None = None,
    *,
    rebuilding: bool = False,
    from_version: int | None = None,
) -> RunSummary:
    """Run the named stages in flow order. ``available_now`` runs each until caught up, one after
    the other; otherwise all run together until stopped (Ctrl-C, a failure, or ``stop_after`` seconds).
    Every stage of a ``queries: one`` warehouse runs as one query (:mod:`pipelines.one_query`); stages of their
    own run there only to rebuild silver and gold (``rebuilding``), or as gold over what a day-two command
    appended to silver at ``from_version`` (a gold stream of its own from that version on)."""
    wh = Warehouse.from_config(cfg)
    _require_schemas(spark, wh)
    preflight(spark, cfg, wh)
    summary = RunSummary()
    gold_stats, gold_stream, silver_stats = MeteredGoldStats(RunMetrics(cfg.metrics_file)), GoldStream(), SilverStats()
    starters = {
        "bronze": lambda: [start_bronze(spark, cfg, wh, s, available_now) for s in cfg.sources],
        "silver": lambda: [start_silver(spark, cfg, wh, available_now, silver_stats)],
        "gold": lambda: [start_gold(spark, cfg, wh, available_now, gold_stats, gold_stream, from_version=from_version)],
        ONE_QUERY_UNIT: lambda: [start_one_query(spark, cfg, wh, available_now, silver_stats, gold_stats, gold_stream)],
    }
    ordered = [s for s in STAGES if s in stages]
    one = not rebuilding and from_version is None and uses_one_query(wh, cfg, stages)
    units = [ONE_QUERY_UNIT] if one else ordered  # what runs, in flow order
    if available_now:
        for unit in units:
            began = time.monotonic()
            progress(f"{unit}: running until caught up ...")
            for query in starters[unit]():
                _await(query)
            _take_relayed(spark, wh, silver_stats, gold_stats)
            # changes an earlier continuous run left waiting: a run until caught up merges them
            if unit in ("gold", ONE_QUERY_UNIT):
                gold_stats.add(flush_due(spark, cfg, wh, gold_stream, drain=True))
                _record_consistent(spark, cfg, wh, progress)
                if unit == "gold":  # a warehouse run as one query: its next batches above what this gold wrote
                    continue_above_state(spark, wh)
            summary.seconds[unit] = round(time.monotonic() - began, 1)
            summary.stages.append(unit)
            progress(f"{unit}: done in {summary.seconds[unit]} s")
    else:
        queries = [q for unit in units for q in starters[unit]()]
        connect = is_connect(spark)
        # between gold's batches this run does what other commands ask of it (rebuild --table: its changes go to
        # silver, which only a gold stream reads); over Connect the batches run in a worker this process cannot reach
        serves = "gold" in units and not connect
        server = RebuildServer.of(spark, cfg, wh, gold_stream) if serves else None
        progress(f"running {', '.join(units)} continuously every {cfg.processing_time}; Ctrl-C stops")
        began = time.monotonic()
        try:
            while all(q.isActive for q in queries):
                if stop_after is not None and time.monotonic() - began > stop_after:
                    break
                time.sleep(2)
                for q in queries:
                    p = q.lastProgress
                    if p and p.get("numInputRows"):
                        progress(f"{q.name}: batch {p['batchId']}: {p['numInputRows']} rows")
                if "gold" in ordered and not connect:  # a quiet topic brings no batch: mirrors past their budget
                    # merge here (over Connect the batches' stream is the worker's: they merge when the run stops)
                    flushed = flush_due(spark, cfg, wh, gold_stream, wait=False)
                    if flushed is not None and flushed.written:
                        gold_stats.add(flushed)
                        progress(f"gold: {len(flushed.written)} mirrors past their freshness budget merged")
                if server is not None:
                    server.serve(_gold_query(queries), progress)
        except KeyboardInterrupt:
            progress("stopping ...")
        finally:
            for q in queries:
                q.stop()
            if server is not None:  # what gold had read merges below; what it had not, the next run applies
                server.close(_gold_query(queries))
        for q in queries:
            _raise_if_failed(q)
        _take_relayed(spark, wh, silver_stats, gold_stats)
        if "gold" in ordered:  # a run that stops leaves no mirror behind: what waits in its budget merges now
            flushed = flush_due(spark, cfg, wh, gold_stream, drain=True)
            if flushed is not None and flushed.written:
                gold_stats.add(flushed)
                progress(f"gold: stopping, {len(flushed.written)} mirrors with waiting changes merged")
        if "gold" in ordered:
            _record_consistent(spark, cfg, wh, progress)
        summary.stages = units
    gold_stream.close()  # its kept threads and their sessions: the run's streams are over
    summary.skipped = silver_stats.skipped
    summary.applied, summary.stale, summary.gold_quarantined = (
        gold_stats.applied,
        gold_stats.stale,
        gold_stats.quarantined,
    )
    summary.filtered = gold_stats.skipped
    summary.batches = gold_stats.batches
    if gold_stats.unaccounted:
        progress(
            f"gold: {gold_stats.unaccounted} of {gold_stats.changes} changes were neither applied, stale, "
            "quarantined nor outside a where (the log names the tables)"
        )
    if gold_stats.later:
        progress(
            f"gold: {gold_stats.later} changes of new tables wait for the next batch "
            f"(limits.new_mirrors_per_batch: {cfg.new_mirrors_per_batch})"
        )
    if gold_stats.waiting:
        progress(f"gold: {gold_stats.waiting} changes wait within their mirrors' freshness budget (lakecdc status)")
    if "gold" in ordered and cfg.quality_checks:
        progress(f"data quality: checks of the {len(gold_stats.written)} mirrors this run wrote ...")
        check_run(spark, cfg, wh, gold_stats, summary)
        progress(f"data quality: {summary.dq_results} checks, {summary.dq_failed} failed; report {summary.data_docs}")
    return summary


def _record_consistent(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, progress) -> None:
    """After gold: each source's consistent point (:mod:`pipelines.consistent`); a failure to record one is
    logged, never the run's failure (the last point stays)."""
    try:
        for line in record_point(spark, cfg, wh):
            progress(line)
    except Exception as exc:  # noqa: BLE001 - the point is a reader's aid: the mirrors are written
        log.warning("consistent point not recorded: %s: %s", type(exc).__name__, exc)


def _take_relayed(spark: SparkSession, wh: Warehouse, silver: SilverStats, gold: GoldStats) -> None:
    """Over Spark Connect, add what silver's and gold's batches counted in the worker beside the server
    (:mod:`pipelines.connect_relay`); a classic session's batches add to these directly."""
    if not is_connect(spark):
        return
    relayed = receive(spark, relay_key(silver_checkpoint(wh)))
    if relayed is not None:
        silver.add(relayed.rows)
    relayed = receive(spark, relay_key(gold_checkpoint(wh)))
    if relayed is not None:
        gold.add(relayed)
    relayed = take_relayed(spark, wh)
    if relayed is not None:
        silver.add(relayed[0].rows)
        gold.add(relayed[1])


def _require_schemas(spark: SparkSession, wh: Warehouse) -> None:
    """A catalog's schemas are the administrator's (grants, storage, owners), so stages never create
    them; a missing one is named before any stream starts, not discovered by the first write."""
    if not wh.catalog:
        return
    needed = dict.fromkeys([*wh.schemas.values(), *wh.mirror_schemas])
    missing = [s for s in needed if not spark.catalog.databaseExists(f"{wh.catalog}.{s}")]
    if missing:
        names = ", ".join(f"{wh.catalog}.{s}" for s in missing)
        raise ConfigError(f"schema {names} does not exist: create it (CREATE SCHEMA), or deploy the bundle's schemas")


def check_run(spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, gold: GoldStats, summary: RunSummary) -> None:
    """The built-in checks after a run, scaled to what it wrote. Gold recorded the key and change checks of
    every mirror it wrote, batch by batch; here come freshness (one read of silver's changes and heartbeats
    for all sources, validated once per set of sources and recorded for each mirror the run wrote) and, for a
    mirror the run gave only full-load rows while it holds nothing else, the reconciliation of its rows with the
    full load. A run that wrote nothing checks nothing (``lakecdc status`` watches a quiet source;
    ``lakecdc dq check`` every mirror)."""
    run_id = f"run-{uuid.uuid4().hex[:12]}"
    rows: list[dict] = []
    if gold.written:
        seen = last_seen(spark, wh)
        thresholds = {s.name: s.freshness for s in cfg.sources}
        checked: dict[frozenset[str], list[dict]] = {}  # sources → the rows of the first mirror fed by them
        for mirror in sorted(gold.written.values(), key=lambda m: m.name):
            sources = frozenset(mirror.sources)
            if sources in checked:  # the same sources, the same verdict: validated once, not once per mirror
                rows += [{**row, "table": mirror.name} for row in checked[sources]]
            else:
                checked[sources] = freshness_rows(mirror.name, sources, seen, thresholds, run_id=run_id)
                rows += checked[sources]
    changes = None
    for mirror in gold.snapshot_only:
        tc = cfg.table_for(SourceTable.from_key(mirror.source_key).name)
        if tc is not None and (tc.where or tc.computed):  # by design not the full load: nothing to compare
            continue
        if changes is None:  # as gold read them (routing reads the changes' table names: only when needed)
            changes = map_batch_types(route_shards(wh.silver("changes").read(spark), cfg), cfg)
        rows += _reconcile(spark, mirror, changes, run_id)
    summary.dq_results = gold.results + write_results(spark, wh, rows)
    summary.dq_failed = gold.failed + sum(1 for r in rows if r.get("success") is False)
    # the mirrors the run wrote whose checks (gold's per batch, stored; these) passed: their versions certified
    written = {m.name: m.ref for m in gold.written.values()}
    summary.certified = certify(spark, wh, rows, mirrors=written, refs=written, run_id=run_id)
    summary.data_docs = build_data_docs(warehouse=wh)


def _reconcile(spark: SparkSession, mirror, changes, run_id: str) -> list[dict]:
    """Reconcile a mirror that holds only full-load rows with the full load silver delivered for its table."""
    from pyspark.sql import functions as F

    table = mirror.ref.read(spark)
    if table.where("_op != 'SNAPSHOT'").limit(1).count():
        return []  # it holds other changes from earlier runs: no full load to compare with
    snapshot = changes.where("op = 'SNAPSHOT'").where(source_table_col() == F.lit(mirror.source_key))
    props = table_properties(spark, mirror.ref)
    key = list(key_of(props))
    return cdc_checks(
        spark, mirror.name, table, key, run_id=run_id, snapshot_df=snapshot, checks=("reconcile",), mirror_props=props
    )


def check_every_mirror(
    spark: SparkSession,
    cfg: PipelineConfig,
    wh: Warehouse,
    summary: RunSummary,
    *,
    table: str | None = None,
    rules: bool = False,
) -> None:
    """``lakecdc dq check``: the built-in checks on every whole mirror now: key not NULL, key unique,
    freshness per source, and (while a mirror holds only full-load rows) reconciliation of its row count and
    checksum with the full load. Recorded in ``dq_results`` and rendered as Great Expectations Data Docs.
    ``table``: only that mirror (its name, or its source table's); ``rules``: its configured rules on its current
    rows too (:mod:`pipelines.quality.rows`). Mirrors whose checks pass are certified
    (:mod:`pipelines.quality.certify`): with ``rules``, on these checks of the whole mirror alone."""
    from pyspark.sql import functions as F

    run_id = f"run-{uuid.uuid4().hex[:12]}"
    heartbeats = wh.silver("heartbeats").read(spark)
    thresholds = {s.name: s.freshness for s in cfg.sources}
    rows: list[dict] = []
    changes = wh.silver("changes").read(spark)
    versions: dict[str, int] = {}
    for name, ref in sorted(mirror_refs(spark, wh, table).items()):
        props = table_properties(spark, ref)
        key = list(key_of(props))
        versions[name] = newest_version(spark, ref)  # every check reads the mirror as of one version
        mirror = spark.sql(f"SELECT * FROM {ref.sql} VERSION AS OF {versions[name]}")
        if rules:
            tc = cfg.table_for(props.get("lakecdc.source_table") or name)
            rows += check_rows(spark, name, mirror, tc.expectations if tc else (), run_id, key_cols=key)
        checks = ["key_not_null", "key_unique", "freshness"]
        snapshot = None
        if mirror.where("_op != 'SNAPSHOT'").limit(1).count() == 0:
            # the mirror holds only full-load rows: reconcile it with what the full load delivered
            identity = props.get(SOURCE_IDENTITY_PROPERTY)
            holds = (
                (source_table_col() == identity)
                if identity
                else (F.concat_ws(".", "db", "table") == props.get("lakecdc.source_table", name))
            )  # written before identities
            snapshot = changes.where("op = 'SNAPSHOT'").where(holds)
            if snapshot.limit(1).count():
                checks.append("reconcile")
            else:
                snapshot = None
        rows += cdc_checks(
            spark,
            name,
            mirror,
            key,
            run_id=run_id,
            heartbeats_df=heartbeats,
            freshness_threshold=thresholds,
            snapshot_df=snapshot,
            checks=tuple(checks),
            mirror_props=props,
        )
    summary.dq_results = write_results(spark, wh, rows)
    summary.dq_failed = sum(1 for r in rows if r.get("success") is False)
    summary.certified = certify(
        spark, wh, rows, mirrors=versions, whole=rules, run_id=run_id, versions=versions,
        set_property=not pipeline_running(wh),
    )  # fmt: skip
    summary.data_docs = build_data_docs(warehouse=wh)


def rebuild(spark: SparkSession, cfg: PipelineConfig, progress: Callable[[str], None] = lambda msg: None) -> RunSummary:
    """Silver and gold again from bronze: drop them and their checkpoints, then run both stages
    to the end. Deterministic decoding, ordering and idempotency ids make the rebuilt tables equal
    to the ones they replace (tests/spark/test_gold_vs_model.py checks it)."""
    wh = Warehouse.from_config(cfg)
    require_finished(wh, "lakecdc rebuild")
    for item in wh.drop_derived(spark):
        progress(f"dropped {item}")
    return run_pipeline(spark, cfg, ("silver", "gold"), available_now=True, progress=progress, rebuilding=True)


def _gold_query(queries: list):
    return next((q for q in queries if q.name == "gold_apply"), None)


def _await(query) -> None:
    from pyspark.errors import StreamingQueryException

    try:
        query.awaitTermination()
    except StreamingQueryException as exc:
        raise RuntimeError(
            f"stream {query.name} failed: {exc.getMessage() if hasattr(exc, 'getMessage') else exc}"
        ) from None
    _raise_if_failed(query)


def _raise_if_failed(query) -> None:
    exc = query.exception()
    if exc is not None:
        raise RuntimeError(f"stream {query.name} failed: {exc}")
