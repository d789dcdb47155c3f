"""The gold stage: a streaming query over silver ``changes``, each micro-batch fanned out per table.

:func:`apply_table` runs the stages of :mod:`pipelines.gold` for one table (shape, check,
truncate, apply) with the data-quality hooks around them: the table's batch expectations (Great
Expectations row rules: ``drop`` quarantines, ``warn`` records, ``fail`` stops), the built-in CDC
checks that need the mirror as it was before the batch, and the mirror expectations after it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig, TableConfig
from pipelines.delta_writes import append_idempotent, quarantine_frame, run_id
from pipelines.gold.batch import BatchContext, GoldStats, Step, batch_results_stamp
from pipelines.gold.identity import MirrorIdentity, identity_conflict
from pipelines.gold.keyed import apply_keyed
from pipelines.gold.multiset import apply_multiset
from pipelines.gold.order import with_order
from pipelines.gold.parallel import apply_all
from pipelines.gold.profile import SOURCE_TABLE, TableProfile, profile_batch
from pipelines.gold.schema import shape_mirror
from pipelines.gold.truncate import TRUNCATED_SEQ_PROPERTY, apply_truncate
from pipelines.gold.validate import check_changes, quarantine_misfits, rename_columns
from pipelines.mirror_columns import table_properties
from pipelines.quality.batch import QualityFailure, check_batch, check_mirror, typed_changes
from pipelines.quality.checks import cdc_checks
from pipelines.quality.invalid_values import invalid_value_rows
from pipelines.quality.storage import write_results
from pipelines.silver import ensure_silver
from pipelines.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = [
    "GoldStats",
    "apply_gold_batch",
    "apply_table",
    "resolve_key",
    "source_table_col",
    "start_gold",
    "table_config",
]

log = logging.getLogger(__name__)

#: Great Expectations validations run one at a time (its context is not known to be thread-safe);
#: the tables' other steps run side by side (:mod:`pipelines.gold.parallel`).
_GE_LOCK = threading.Lock()
#: Settings of the sessions gold applies a batch with. (Delta's ``merge.materializeSource=none``
#: would save a job per MERGE, but Delta then refuses a source whose plan holds persisted frames.)
GOLD_SESSION_CONF = {
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",  # map_concat: later image wins
}


def table_config(cfg: PipelineConfig, source_table: str) -> TableConfig | None:
    """The configuration of a source table: the entry of exactly its name, else the one entry whose
    name differs only in case (two such entries, and it is ambiguous: none)."""
    if source_table in cfg.tables:
        return cfg.tables[source_table]
    alike = [tc for name, tc in cfg.tables.items() if name.lower() == source_table.lower()]
    return alike[0] if len(alike) == 1 else None


def resolve_key(props: dict[str, str] | None, profile: TableProfile, tc: TableConfig | None) -> tuple[str, ...]:
    """The mirror's key is fixed when it is created: from the messages, else the configuration.
    No key at all (and no vendor row id in the messages) means multiset semantics."""
    if props is not None and "lakecdc.key" in props:
        return tuple(k for k in props["lakecdc.key"].split(",") if k)
    return profile.key or (tc.key if tc else ())


def mirror_identity(cfg: PipelineConfig, wh: Warehouse, source_key: str) -> MirrorIdentity:
    """The mirror a source table (its exact identity, :data:`SOURCE_TABLE`) writes."""
    source = TableProfile(source_key).source
    tc = table_config(cfg, source.name)
    target = bool(tc and tc.target)
    parts = tuple(tc.target.split(".")) if target else source.parts
    return MirrorIdentity(
        source.name,
        tc.target if target else source.name,
        wh.mirror(parts, target=target),
        wh.tombstones(parts, target=target),
        policy=(tc.schema_changes if tc and tc.schema_changes else cfg.schema_changes),
        source_key=source_key,
        name_parts=parts,
        target=target,
    )


def describe_table(cfg: PipelineConfig, wh: Warehouse, source_key: str) -> str:
    """A table as errors name it: the source table, its exact identity, and its mirror."""
    ident = mirror_identity(cfg, wh, source_key)
    return f"source table {ident.source_table} (identity {source_key}) → mirror {ident.mirror_name} ({ident.slug})"


def apply_table(
    spark: SparkSession,
    changes: DataFrame,
    profile: TableProfile,
    cfg: PipelineConfig,
    wh: Warehouse,
    app_id: str,
    batch_id: int,
    results: list[dict],
) -> GoldStats:
    """The stages of :mod:`pipelines.gold`, for one table's changes of one micro-batch. The ``dq_results``
    rows of its checks and expectations are collected in ``results``: the caller writes them once for the batch."""
    source = profile.source
    tc = table_config(cfg, source.name)
    ident = mirror_identity(cfg, wh, profile.name)
    parts, target = ident.name_parts, ident.target
    ctx = BatchContext(
        spark, ident, wh, app_id, batch_id, GoldStats(tables={profile.name}, changes=profile.changes), results
    )
    # the mirror's properties as the batch begins (None: no mirror yet), read once for every stage
    props = table_properties(spark, ident.ref) if ident.ref.exists(spark) else None
    conflict = identity_conflict(ident, props)
    if conflict:
        return _refuse(ctx, changes, conflict)
    key = resolve_key(props, profile, tc)
    shape = shape_mirror(
        spark,
        ident,
        props,
        key,
        dict(tc.columns) if tc else {},
        profile.columns,
        profile.shapes,
        profile.schemaless,
        keyless=not key,
        sources=profile.sources,
        formats=profile.formats,
    )
    invalid_policy = tc.invalid_values if tc and tc.invalid_values else cfg.invalid_values
    checked = check_changes(rename_columns(changes, shape.renames), shape, key, invalid_policy).persist()
    try:
        good = quarantine_misfits(ctx, checked)
        if invalid_policy == "null" and profile.invalid_values:
            ctx.record(invalid_value_rows(ident.mirror_name, good, key, app_id, batch_id))
        good = _batch_expectations(ctx, tc, good, shape.columns)
        history = wh.history(parts, target=target) if tc and tc.history and key else None
        truncated_seq = (props or {}).get(TRUNCATED_SEQ_PROPERTY, "")
        good = apply_truncate(ctx, good, profile, truncated_seq, history)
        if cfg.quality_checks and key:
            _cdc_batch_checks(ctx, key, good, shape.columns)  # before the merge: the mirror as the batch finds it
        if shape.keyless:
            if tc and tc.history:
                log.warning("gold: %s has no key: no SCD type 2 history (a version needs a key)", profile.name)
            apply_multiset(ctx, good, shape)
        else:
            apply_keyed(ctx, good, shape, key, history)
    finally:
        checked.unpersist()
    _mirror_expectations(ctx, tc, key)
    stats = ctx.stats
    log.info(
        "gold: %s → %s: %d changes applied, %d stale skipped, %d quarantined (%s)",
        source.name,
        ident.mirror_name,
        stats.applied,
        stats.stale,
        stats.quarantined,
        f"key {', '.join(key)}" if key else "no key: multiset",
    )
    if stats.unaccounted:  # a gold fault: say so, loudly, rather than stop every other table
        log.error(
            "gold: %s: %d of the batch's %d changes are neither applied, stale nor quarantined",
            source.name,
            stats.unaccounted,
            stats.changes,
        )
    return stats


def _refuse(ctx: BatchContext, changes: DataFrame, reason: str) -> GoldStats:
    """Every change of a table that may not write its mirror goes to quarantine, with the reason."""
    from pyspark.sql import functions as F

    bad = changes.withColumn("reason", F.lit(reason)).withColumn("stage", F.lit("gold"))
    append_idempotent(quarantine_frame(bad), ctx.wh.silver("quarantine"), ctx.source_stamp(Step.REFUSED), ctx.batch_id)
    ctx.stats.quarantined = ctx.stats.changes  # every change of the table (the batch profile counted them)
    log.error("gold: %s: %d changes quarantined: %s", ctx.ident.source_table, ctx.stats.quarantined, reason)
    return ctx.stats


# ---------------------------------------------------------------- the quality hooks


def _batch_expectations(
    ctx: BatchContext, tc: TableConfig | None, good: DataFrame, columns: Mapping[str, str | None]
) -> DataFrame:
    """Run the table's row rules (Great Expectations) on this batch: ``drop`` quarantines exactly the
    offending changes with the rule's name, ``warn`` records, ``fail`` stops the stream."""
    rules = [r for r in (tc.expectations if tc else ()) if r.scope == "batch"]
    if not rules:
        return good
    from pyspark.sql import functions as F

    spark, mirror_name = ctx.spark, ctx.ident.mirror_name
    with _kept_if_failing(ctx, Step.EXPECTATION_RESULTS), _GE_LOCK:
        quality = check_batch(spark, mirror_name, typed_changes(good, columns), rules, ctx.app_id, ctx.batch_id)
    ctx.record(quality.results)
    keep, bad = quality.split(good)
    if bad is not None:
        ctx.append(
            quarantine_frame(bad.withColumn("stage", F.lit("gold"))),
            ctx.wh.silver("quarantine"),
            Step.EXPECTATION_QUARANTINE,
        )
        ctx.stats.quarantined += quality.dropped_count
        log.warning("gold: %s: %d changes quarantined by expectations", mirror_name, quality.dropped_count)
    return keep


def _cdc_batch_checks(
    ctx: BatchContext, key: tuple[str, ...], changes: DataFrame, columns: Mapping[str, str | None]
) -> None:
    """Built-in checks that need the mirror as it is before this batch's merge: sequences never go
    backwards for a key, and UPDATE/DELETE before-images match the mirror's row (else: drift).

    Run before the merge, so they read the mirror's current snapshot; read after it, they would
    time-travel to the version before, which costs Delta a snapshot rebuilt from the log (Spark
    jobs) per table and batch. Every probe row is counted, and validated where a check finds a row,
    before this returns: nothing of it is evaluated after the merge."""
    spark, ref = ctx.spark, ctx.ident.ref
    if not ref.exists(spark):
        return
    mirror = ref.read(spark)
    with _GE_LOCK:
        rows = cdc_checks(
            spark,
            ctx.ident.mirror_name,
            mirror,
            list(key),
            changes,
            run_id=ctx.app_id,
            batch_id=ctx.batch_id,
            mirror_before_df=mirror,
            columns=columns,
            checks=("seq_not_backwards", "source_drift"),
        )
    ctx.record(rows)


def _mirror_expectations(ctx: BatchContext, tc: TableConfig | None, key: tuple[str, ...]) -> None:
    """The table's rules on the whole mirror, after the batch."""
    rules = [r for r in (tc.expectations if tc else ()) if r.scope == "mirror"]
    if not rules:
        return
    spark = ctx.spark
    with _kept_if_failing(ctx, Step.MIRROR_EXPECTATION_RESULTS), _GE_LOCK:
        results = check_mirror(
            spark, ctx.ident.mirror_name, ctx.ident.ref.read(spark), rules, ctx.app_id, ctx.batch_id, key_cols=key
        )
    ctx.record(results)


@contextmanager
def _kept_if_failing(ctx: BatchContext, step: Step) -> Iterator[None]:
    """A ``fail`` rule stops the stream, so the batch's one ``dq_results`` append never comes: the
    failing check's rows are written at once (stamped per mirror and step, so a retry writes them once)."""
    try:
        yield
    except QualityFailure as failure:
        write_results(ctx.spark, ctx.wh, failure.results, app_id=ctx.stamp(step), version=ctx.batch_id)
        raise


# ---------------------------------------------------------------- the stream


#: The exact identity of a silver row's source table, as JSON ``[db, schema, table]`` (the form
#: :class:`~pipelines.warehouse.SourceTable` reads): an empty part is NULL, and a schema equal to
#: the database (MySQL-family formats report the database again as the schema) is NULL too.
SOURCE_IDENTITY_SQL = (
    "to_json(array(nullif(db, ''), CASE WHEN nullif(`schema`, '') = nullif(db, '') THEN NULL "
    "ELSE nullif(`schema`, '') END, `table`))"
)


def source_table_col() -> Column:
    """The exact identity of a silver row's source table (:data:`SOURCE_IDENTITY_SQL`): two tables
    whose names read alike (``a.b`` + ``c`` and ``a`` + ``b.c``; ``Shop`` and ``shop``; schemas
    ``public`` and ``audit``) are two tables."""
    from pyspark.sql import functions as F

    return F.expr(SOURCE_IDENTITY_SQL)


def apply_gold_batch(
    spark: SparkSession, batch_df: DataFrame, batch_id: int, cfg: PipelineConfig, wh: Warehouse, app_id: str
) -> GoldStats:
    """Fan one micro-batch out to every table it touches: ``gold.parallelism`` tables at a time
    (:mod:`pipelines.gold.parallel`), the built-in checks' rows of all of them written in one commit."""
    from pyspark.sql import functions as F

    for key, value in GOLD_SESSION_CONF.items():
        spark.conf.set(key, value)
    if "invalid" not in batch_df.columns:  # silver written before invalid values were kept
        batch_df = batch_df.withColumn("invalid", F.lit(None).cast("map<string,string>"))
    total = GoldStats()
    batch = with_order(batch_df.withColumn(SOURCE_TABLE, source_table_col())).persist()
    try:
        profiles = profile_batch(batch)
        names = sorted(profiles)
        results: dict[str, list[dict]] = {name: [] for name in names}
        # source tables aimed at one mirror (configured targets alike) are applied one after another, in
        # one thread: the first creates the mirror, the guard refuses the others (gold.identity)
        by_mirror: dict[str, list[str]] = {}
        for name in names:
            by_mirror.setdefault(mirror_identity(cfg, wh, name).ref.sql, []).append(name)

        def one_mirror(session: SparkSession, mirror: str) -> GoldStats:
            stats = GoldStats()
            for name in by_mirror[mirror]:
                changes = batch.where(F.col(SOURCE_TABLE) == name)
                try:
                    stats.add(apply_table(session, changes, profiles[name], cfg, wh, app_id, batch_id, results[name]))
                except BaseException as exc:
                    if len(by_mirror[mirror]) > 1:
                        exc.add_note(f"gold: the failing source table is {describe_table(cfg, wh, name)}")
                    raise
            return stats

        def describe(mirror: str) -> str:
            return "; ".join(describe_table(cfg, wh, name) for name in by_mirror[mirror])

        for stats in apply_all(spark, list(by_mirror), one_mirror, cfg.gold_parallelism, describe=describe):
            total.add(stats)
        rows = [row for name in names for row in results[name]]
        write_results(spark, wh, rows, app_id=batch_results_stamp(app_id), version=batch_id)
    finally:
        batch.unpersist()
    log.info(
        "gold batch %d: %d changes: %d applied to %d tables, %d stale, %d quarantined",
        batch_id,
        total.changes,
        total.applied,
        len(total.tables),
        total.stale,
        total.quarantined,
    )
    return total


def start_gold(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, available_now: bool, stats: GoldStats | None = None
) -> StreamingQuery:
    """Start the gold query: silver ``changes`` → :func:`apply_gold_batch`, checkpointed."""
    ensure_silver(spark, wh)
    checkpoint = wh.checkpoint("gold", "apply")
    app_id = f"lakecdc-gold-{run_id(checkpoint)}"
    stats = stats if stats is not None else GoldStats()

    def each_batch(df: DataFrame, batch_id: int) -> None:
        stats.add(apply_gold_batch(spark, df, batch_id, cfg, wh, app_id))

    writer = (
        wh.silver("changes")
        .read_stream(spark)
        .writeStream.queryName("gold_apply")
        .option("checkpointLocation", checkpoint)
        .foreachBatch(each_batch)
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=cfg.processing_time)
    return writer.start()
