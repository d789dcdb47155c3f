"""The plan of a micro-batch: for every source table it touches, the mirror it writes and how.

One :class:`TablePlan` per source table: the mirror's identity and configuration, its properties as the
batch begins, its key, and its shape after this batch's schema changes (:mod:`pipelines.gold.schema`,
the one step that may run DDL). Planning reads each mirror's metadata, not its rows: no Spark job.

A mirror's properties and schema are cached for the life of a stream (:class:`MirrorCache`): gold is the
only writer of its mirrors' metadata, so what it read or wrote last is what the table holds, and a
batch of 200 tables does not read 200 logs again. Any DDL gold runs drops the mirror's entry; a
restarted stream starts with an empty cache.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipelines.config import PipelineConfig, TableConfig
from pipelines.gold.computed import PartitionBy, computed_types, creation_columns, ensure_computed_columns
from pipelines.gold.identity import MirrorIdentity, identity_conflict
from pipelines.gold.profile import TableProfile
from pipelines.gold.schema import CLUSTER_PROPERTY, MirrorShape, shape_mirror
from pipelines.gold.soft import ensure_soft_columns, is_soft, keyless_refusal
from pipelines.gold.state import KEY_STATE_PROPERTY, state_since
from pipelines.gold.truncate import TRUNCATED_SEQ_PROPERTY
from pipelines.gold.type_mapping import map_type, mappings_for
from pipelines.gold.where import where_problem
from pipelines.mirror_columns import mirror_schema, table_properties
from pipelines.mirror_key import KEY_PROPERTY, key_of
from pipelines.routing import route_problem
from pipelines.warehouse import Warehouse, mirror_parts

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.warehouse import TableRef


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
    if props is not None and KEY_PROPERTY in props:
        return key_of(props)
    return profile.key or (tc.key if tc else ())


def mirror_identity(cfg: PipelineConfig, wh: Warehouse, source_key: str) -> MirrorIdentity:
    """The mirror a source table (its exact identity, :data:`~pipelines.gold.profile.SOURCE_TABLE`) writes."""
    source = TableProfile(source_key).source
    tc = table_config(cfg, source.name)
    target = bool(tc and tc.target)
    parts = tuple(tc.target.split(".")) if target else mirror_parts(source, cfg.gold_naming)
    return MirrorIdentity(
        source.name,
        tc.target if target else source.name,
        wh.mirror(parts, target=target),
        wh.tombstones(parts, target=target),
        policy=(tc.schema_changes if tc and tc.schema_changes else cfg.schema_changes),
        source_key=source_key,
        name_parts=parts,
        target=target,
        table_features=cfg.gold_table_features,
    )


def describe_table(cfg: PipelineConfig, wh: Warehouse, source_key: str) -> str:
    """A table as errors name it: the source table, its exact identity, and its mirror."""
    ident = mirror_identity(cfg, wh, source_key)
    return f"source table {ident.source_table} (identity {source_key}) → mirror {ident.mirror_name} ({ident.slug})"


@dataclass
class MirrorMeta:
    """A mirror's table properties and columns (name → (Delta type, source type)), as last read or written."""

    props: dict[str, str]
    schema: dict[str, tuple[str, str | None]]


class MirrorCache:
    """Mirror metadata for the life of one stream (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._meta: dict[str, MirrorMeta | None] = {}
        self._lock = threading.Lock()

    def get(self, spark: SparkSession, ref: TableRef) -> MirrorMeta | None:
        """The mirror's metadata; None when it does not exist."""
        with self._lock:
            if ref.sql in self._meta:
                return self._meta[ref.sql]
        meta = None
        if ref.exists(spark):
            props = table_properties(spark, ref)
            meta = MirrorMeta(props, mirror_schema(spark, ref, props))
        with self._lock:
            self._meta[ref.sql] = meta
        return meta

    def forget(self, ref: TableRef) -> None:
        """Read the mirror again next time (gold changed its metadata)."""
        with self._lock:
            self._meta.pop(ref.sql, None)


@dataclass
class TablePlan:
    """One source table of a batch: where its changes go and what gold knows of the mirror."""

    profile: TableProfile
    ident: MirrorIdentity
    tc: TableConfig | None
    props: dict[str, str] | None  # the mirror's properties as the batch began (None: no mirror yet)
    key: tuple[str, ...] = ()
    shape: MirrorShape | None = None  # None: the table is refused (``conflict``)
    conflict: str | None = None  # why the source table may not write its mirror
    invalid_policy: str = "null"
    history: TableRef | None = None
    max_delay: float | None = None  # seconds a change may wait before its mirror must be merged
    created: bool = False  # the mirror was created by this batch
    #: the batch since which the mirror's keys are in key state (-1: adopted; None: not yet, adopt it)
    since: int | None = None
    #: computed columns: name → (source type, the columns its expression reads) (pipelines.gold.computed)
    computed: dict | None = None

    @property
    def name(self) -> str:
        """The source table's exact identity (JSON)."""
        return self.profile.name

    @property
    def mirror(self) -> str:
        """The mirror's id in gold's shared state (:attr:`MirrorIdentity.state_key`)."""
        return self.ident.state_key

    @property
    def keyless(self) -> bool:
        return self.shape is not None and self.shape.keyless

    @property
    def keyed(self) -> bool:
        return self.shape is not None and not self.shape.keyless

    @property
    def truncated_seq(self) -> str:
        """The highest TRUNCATE sequence the mirror had applied when the batch began."""
        return (self.props or {}).get(TRUNCATED_SEQ_PROPERTY, "")

    @property
    def truncates(self) -> bool:
        return self.profile.truncate_ord is not None


def plan_tables(
    spark: SparkSession,
    cfg: PipelineConfig,
    wh: Warehouse,
    profiles: dict[str, TableProfile],
    cache: MirrorCache,
    batch_id: int,
) -> dict[str, TablePlan]:
    """A plan for every source table of the batch, in name order. Source tables aimed at one mirror
    (configured targets alike): the first creates it, the mirror's identity guard refuses the others.
    A mirror created now records that its keys are in key state since ``batch_id`` (the state tables' batch)."""
    plans: dict[str, TablePlan] = {}
    for name in sorted(profiles):
        try:
            plans[name] = _plan_table(spark, cfg, wh, profiles[name], cache, batch_id)
        except BaseException as exc:
            exc.add_note(
                f"gold: planning {describe_table(cfg, wh, name)} failed; the micro-batch was not committed and "
                "is retried from the checkpoint"
            )
            raise
    return plans


def _plan_table(
    spark: SparkSession, cfg: PipelineConfig, wh: Warehouse, profile: TableProfile, cache: MirrorCache, batch_id: int
) -> TablePlan:
    """One source table's plan (see :func:`plan_tables`)."""
    tc = table_config(cfg, profile.source.name)
    ident = mirror_identity(cfg, wh, profile.name)
    meta = cache.get(spark, ident.ref)
    props = dict(meta.props) if meta else None
    plan = TablePlan(profile, ident, tc, props, max_delay=_max_delay(cfg, tc))
    plan.conflict = route_problem(cfg, profile.source.name) or identity_conflict(ident, props)
    if plan.conflict:
        return plan
    plan.key = resolve_key(props, profile, tc)
    if (is_soft(tc) or (tc and tc.where)) and not plan.key:
        plan.conflict = keyless_refusal(ident.source_table, "deletes: soft" if is_soft(tc) else "where")
        return plan
    mappings = mappings_for(cfg, next(iter(profile.sources), None), profile.source.name)
    configured = {c: map_type(t, mappings) for c, t in tc.columns.items()} if tc else {}
    layout = tc.cluster_by if tc else ()
    if tc and props is None and tc.computed:  # a new mirror: its computed columns too (one may partition it)
        configured, problem = creation_columns(spark, ident.source_table, tc.computed, configured, profile.columns)
        if problem:
            plan.conflict = problem
            return plan
    if tc and tc.partition_by:  # at creation only: Delta cannot partition an existing table
        layout = PartitionBy(tc.partition_by) if props is None else json.loads(props.get(CLUSTER_PROPERTY) or "[]")
    plan.shape = shape_mirror(
        spark,
        ident,
        props,
        plan.key,
        configured,
        profile.columns,
        profile.shapes,
        profile.schemaless,
        keyless=not plan.key,
        sources=profile.sources,
        formats=profile.formats,
        existing=meta.schema if meta else None,
        new_props={KEY_STATE_PROPERTY: str(batch_id)},
        cluster_by=layout,
        sharded=bool(tc and tc.from_tables),
    )
    plan.since = batch_id if props is None else state_since(props)
    problem = where_problem(spark, ident.source_table, tc.where, plan.shape.columns) if tc and tc.where else None
    if problem:  # the mirror exists; the table's changes go to quarantine with why
        plan.conflict, plan.shape = problem, None
        return plan
    if tc and tc.computed:
        plan.computed, problem = computed_types(spark, ident.source_table, tc.computed, plan.shape.columns)
        if problem:
            plan.conflict, plan.shape = problem, None
            return plan
        plan.shape.altered |= ensure_computed_columns(spark, plan.ident.ref, plan.shape.columns, plan.computed)
    if is_soft(tc) and ensure_soft_columns(spark, ident, meta.schema if meta and not plan.shape.altered else None):
        plan.shape.altered = True
    if props is None or plan.shape.altered:
        cache.forget(ident.ref)  # later source tables of this batch see a new mirror, and its identity
        plan.created = props is None
    plan.invalid_policy = tc.invalid_values if tc and tc.invalid_values else cfg.invalid_values
    if tc and tc.history and plan.key:
        plan.history = wh.history(ident.name_parts, target=ident.target)
    return plan


def _max_delay(cfg: PipelineConfig, tc: TableConfig | None) -> float:
    return tc.max_delay if tc and tc.max_delay else cfg.gold_max_delay
