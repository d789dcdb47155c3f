"""The configuration's model: the frozen dataclasses a YAML file becomes (:class:`PipelineConfig` and its
sources, tables and status thresholds) and the constants of its policies and defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines.errors import ConfigError
from pipelines.formats.base import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_WIDTH,
    DecodeContext,
    TableSpec,
)
from pipelines.layout import LAYERS
from pipelines.names import MirrorNaming
from pipelines.quality.rules import DEFAULT_FRESHNESS_TEXT
from pipelines.selection import ColumnFilter, Selection, TableFilter

#: Mirrors gold creates in one batch at most (``limits.new_mirrors_per_batch``): the changes of further new
#: tables wait for the next batch (about 1 s per new mirror on 2 cores: docs/benchmark.md).
DEFAULT_NEW_MIRRORS_PER_BATCH = 100
#: Bytes of Delta files one silver or gold micro-batch reads at most (``limits.batch_bytes``: Delta's
#: ``maxBytesPerTrigger``, soft: a batch reads at least one file). A backlog then arrives in batches a 3 GB
#: driver holds, whatever its size, instead of as one batch that fails on every retry (issue 39: a batch of
#: 2,000,000 changes ran out of heap). 32 MiB of silver changes is about 650,000 changes of the bench's six-column
#: table (50 bytes a change in Parquet); a wider table's changes are fewer, and so is the memory they take.
DEFAULT_BATCH_BYTES = 32 * 1024 * 1024
#: Messages one Kafka micro-batch reads at most (``sources[].kafka.max_offsets_per_trigger``) when none is set.
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 200_000

#: What gold does with a DROP, RENAME, narrowing or retype (``schema_changes``; see pipelines.gold.schema).
SCHEMA_POLICIES = ("fail", "quarantine", "evolve", "ignore")
DEFAULT_SCHEMA_POLICY = "fail"
#: What gold does with a value the source itself holds as invalid (``invalid_values``): MySQL's zero
#: dates ``0000-00-00 00:00:00``, which OMS passes on as they are, and dates OMS passes as their
#: original text (seeds 000, 001). ``null``: the row applies with that column NULL and the built-in
#: check ``cdc_invalid_value`` records table, key, column and raw text. ``quarantine``: the change
#: goes to quarantine.
INVALID_VALUE_POLICIES = ("null", "quarantine")
DEFAULT_INVALID_VALUE_POLICY = "null"
#: Continuous runs (pipelines.gold.due): the longest a change waits before its mirror is merged, and the
#: waiting changes that merge a mirror at once.
DEFAULT_GOLD_MAX_DELAY = 300.0  # seconds
DEFAULT_GOLD_MAX_PENDING = 100
#: How many tables of a micro-batch gold applies at a time (``gold.parallelism``; pipelines.gold.parallel).
DEFAULT_GOLD_PARALLELISM = 4
MAX_GOLD_PARALLELISM = 64
#: Which Delta table features gold gives a new mirror (``gold.table_features``; pipelines.gold.identity):
#: ``full`` deletion vectors, column mapping, type widening and VARIANT documents; ``compatible`` none of them
#: (documents as their exact JSON text), for readers that lack them (docs/readers.md).
TABLE_FEATURES = ("full", "compatible")
DEFAULT_TABLE_FEATURES = "full"
#: Type mappings (``type_mapping``, Paimon's ``--type_mapping``): which exactness a mirror gives up for a schema
#: that never breaks (pipelines.gold.type_mapping, docs/row-options.md).
TYPE_MAPPINGS = ("to-string", "tinyint1-not-bool", "char-to-string", "bigint-unsigned-to-bigint")
#: What a DELETE does to the mirror's row (``tables.<name>.deletes``): remove it, or mark it deleted.
DELETE_MODES = ("hard", "soft")
#: Delta liquid clustering takes at most this many columns (``tables.<name>.cluster_by``).
MAX_CLUSTER_COLUMNS = 4


#: The stages in flow order: one per layer of the warehouse.
STAGES = LAYERS
#: How a run of every stage runs: three streaming queries, or one that lands, decodes and applies each batch.
QUERIES = ("per_stage", "one")


@dataclass(frozen=True)
class KafkaSource:
    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = DEFAULT_MAX_OFFSETS_PER_TRIGGER
    fail_on_data_loss: bool = True
    security: Mapping[str, str] = field(default_factory=dict)  # values may be ${ENV_VAR}
    options: Mapping[str, str] = field(default_factory=dict)  # extra kafka.* options


@dataclass(frozen=True)
class Source:
    name: str
    format: str
    path: str | None = None
    kafka: KafkaSource | None = None
    # stale when its newest change or heartbeat is older: `lakecdc status` and the cdc_freshness check
    freshness: str = DEFAULT_FRESHNESS_TEXT
    include: tuple[str, ...] = ()  # table names or glob patterns this source keeps (empty: every table)
    exclude: tuple[str, ...] = ()  # ... and skips (pipelines.selection)
    ignore_null_updates: bool | None = None  # NULL in an UPDATE means "unchanged"; None: not set here
    type_mapping: tuple[str, ...] | None = None  # None: the top level's


@dataclass(frozen=True)
class TableConfig:
    name: str  # "<db>.<table>" as messages name it
    key: tuple[str, ...] = ()
    #: the mirror's configured column types: ``columns`` of the file without the columns
    #: ``columns_include`` / ``columns_exclude`` keep out (those never reach gold)
    columns: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None
    expectations: tuple = ()  # pipelines.quality.Rule, validated at load
    schema_changes: str | None = None  # DROP/RENAME/narrowing policy; None: the top-level one
    history: bool = False  # keep an SCD type 2 history next to the mirror (pipelines.gold.history)
    invalid_values: str | None = None  # null | quarantine; None: the top-level one
    max_delay: float | None = None  # seconds: freshness budget of continuous runs; None: gold.max_delay
    #: every configured column type (``columns`` of the file), which decoders read; None: ``columns``
    source_columns: Mapping[str, str] | None = None
    columns_include: tuple[str, ...] | None = None  # the only columns kept (silver drops the rest)
    columns_exclude: tuple[str, ...] = ()  # columns silver drops
    #: ``history: {columns: [...]}``: the columns whose changes make a new version (None: every column)
    history_columns: tuple[str, ...] | None = None
    history_except_columns: tuple[str, ...] = ()  # ``history: {except_columns: [...]}``: changes ignored
    ignore_null_updates: bool | None = None  # None: the source's setting, else false
    cluster_by: tuple[str, ...] = ()  # Delta liquid clustering columns of the mirror (none by default)
    deletes: str = "hard"  # hard | soft: a DELETE keeps the row, _deleted = true (pipelines.gold.soft)
    where: str | None = None  # Spark SQL over the row's columns: rows that do not match stay out (gold.where)
    computed: Mapping[str, str] = field(default_factory=dict)  # column → Spark SQL over the row (gold.computed)
    partition_by: tuple[str, ...] = ()  # Delta partition columns of a new mirror (not with cluster_by)
    type_mapping: tuple[str, ...] | None = None  # None: the source's, else the top level's
    from_tables: tuple[str, ...] = ()  # ``from``: regexes over db.table; matching tables feed this mirror (routing)

    @property
    def decode_columns(self) -> Mapping[str, str]:
        """The configured types decoders read: every column of the file, kept or not."""
        return self.columns if self.source_columns is None else self.source_columns


@dataclass(frozen=True)
class StatusThresholds:
    """When ``lakecdc status`` exits 1 (None: not checked). ``max_lag_seconds``: the oldest message or
    landing file bronze has not read yet is older than this. A source's newest change or heartbeat (source
    commit time) older than its ``freshness`` is a breach too; ``max_staleness_seconds`` (the
    ``--max-staleness-seconds`` of one call) stands for every source's ``freshness`` then."""

    max_lag_seconds: float | None = None
    max_staleness_seconds: float | None = None


@dataclass(frozen=True)
class PipelineConfig:
    sources: tuple[Source, ...]
    tables: Mapping[str, TableConfig]
    warehouse: str = "./warehouse"
    catalog: str | None = None
    schema: str | None = None
    schemas: Mapping[str, str] = field(default_factory=dict)  # a layer's own schema (bronze, silver, gold)
    checkpoints: str | None = None
    trigger: str = "available_now"
    processing_time: str = "10 seconds"
    queries: str = "per_stage"  # QUERIES: three streaming queries, or one (pipelines.one_query)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    max_width: int = DEFAULT_MAX_WIDTH  # elements of one JSON array / object in a message
    max_elements: int = DEFAULT_MAX_ELEMENTS  # elements of one message, all levels
    new_mirrors_per_batch: int = DEFAULT_NEW_MIRRORS_PER_BATCH  # more new tables wait for the next batch
    batch_bytes: int = DEFAULT_BATCH_BYTES  # Delta bytes one silver / gold micro-batch reads at most
    default_table: str | None = None  # for formats whose messages name no table (DebeziumSmt)
    format_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    quality_checks: bool = True  # built-in CDC checks + Data Docs after each gold run
    metrics_file: str | None = None  # pipelines.metrics: Prometheus text written after each gold batch
    schema_changes: str = DEFAULT_SCHEMA_POLICY  # see pipelines.gold.schema
    invalid_values: str = DEFAULT_INVALID_VALUE_POLICY  # see INVALID_VALUE_POLICIES
    status: StatusThresholds = field(default_factory=StatusThresholds)  # `lakecdc status` alerts
    gold_parallelism: int = DEFAULT_GOLD_PARALLELISM  # tables applied at a time (gold.parallelism)
    gold_max_delay: float = DEFAULT_GOLD_MAX_DELAY  # seconds: a continuous run's longest wait for a mirror's change
    gold_max_pending: int = DEFAULT_GOLD_MAX_PENDING  # continuous runs: this many waiting changes merge a mirror
    gold_naming: MirrorNaming = field(default_factory=MirrorNaming)  # gold.naming: the mirrors' names
    gold_table_features: str = DEFAULT_TABLE_FEATURES  # gold.table_features: what a new mirror enables
    include: tuple[str, ...] = ()  # table names or glob patterns every source keeps (empty: every table)
    exclude: tuple[str, ...] = ()  # ... and skips (pipelines.selection)
    type_mapping: tuple[str, ...] = ()  # every table's, unless its source or its entry says otherwise
    origin: str = "<config>"

    def decode_context(self, format_id: str | None = None) -> DecodeContext:
        return DecodeContext(
            tables={
                name.lower(): TableSpec(key=t.key, columns=dict(t.decode_columns)) for name, t in self.tables.items()
            },
            default_table=self.default_table,
            max_message_bytes=self.max_message_bytes,
            max_depth=self.max_depth,
            max_width=self.max_width,
            max_elements=self.max_elements,
            options=dict(self.format_options.get(format_id or "", {})),
        )

    def table_for(self, source_table: str) -> TableConfig | None:
        """The configuration of a source table (its name as :class:`~pipelines.warehouse.SourceTable`
        gives it): the entry of exactly its name, else the one entry whose name differs only in case
        (two such entries, and it is ambiguous: none)."""
        if source_table in self.tables:
            return self.tables[source_table]
        alike = [tc for name, tc in self.tables.items() if name.lower() == source_table.lower()]
        return alike[0] if len(alike) == 1 else None

    def ignores_null_updates(self, source: str, source_table: str) -> bool:
        """``ignore_null_updates`` of a source table: its table's setting, else its source's, else false."""
        tc = self.table_for(source_table)
        if tc is not None and tc.ignore_null_updates is not None:
            return tc.ignore_null_updates
        return bool(next((s.ignore_null_updates for s in self.sources if s.name == source), None))

    def selection(self) -> Selection | None:
        """The tables and columns this configuration keeps (:class:`~pipelines.selection.Selection`); None when
        it keeps every table and column."""
        sources = {
            s.name: TableFilter(f"sources[{i}].", s.include, s.exclude)
            for i, s in enumerate(self.sources)
            if s.include or s.exclude
        }
        columns = {
            name: ColumnFilter(
                name,
                None if t.columns_include is None else frozenset(c.lower() for c in t.columns_include),
                frozenset(c.lower() for c in t.columns_exclude),
            )
            for name, t in self.tables.items()
            if t.columns_include is not None or t.columns_exclude
        }
        top = TableFilter("", self.include, self.exclude)
        if not (top.include or top.exclude or sources or columns):
            return None
        return Selection(top, sources, columns)

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise ConfigError(f"{self.origin}: no source named {name!r}")
