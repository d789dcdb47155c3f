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


#: The stages in flow order: one per layer of the warehouse.
STAGES = LAYERS


@dataclass(frozen=True)
class KafkaSource:
    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    security: Mapping[str, str] = field(default_factory=dict)  # values may be ${ENV_VAR}
    options: Mapping[str, str] = field(default_factory=dict)  # extra kafka.* options


@dataclass(frozen=True)
class Source:
    name: str
    format: str
    path: str | None = None
    kafka: KafkaSource | None = None
    freshness: str = "1 hour"  # data-quality: alert when the last event or heartbeat is older


@dataclass(frozen=True)
class TableConfig:
    name: str  # "<db>.<table>" as messages name it
    key: tuple[str, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None
    expectations: tuple = ()  # pipelines.quality.Rule, validated at load
    schema_changes: str | None = None  # DROP/RENAME/narrowing policy; None: the top-level one
    history: bool = False  # keep an SCD type 2 history next to the mirror (pipelines.gold.history)
    invalid_values: str | None = None  # null | quarantine; None: the top-level one
    max_delay: float | None = None  # seconds: freshness budget of continuous runs; None: gold.max_delay


@dataclass(frozen=True)
class StatusThresholds:
    """When ``lakecdc status`` exits 1 (None: not checked). ``max_lag_seconds``: the oldest message or
    landing file bronze has not read yet is older than this. ``max_staleness_seconds``: a source's newest
    change or heartbeat (source commit time) is older than this."""

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
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    max_width: int = DEFAULT_MAX_WIDTH  # elements of one JSON array / object in a message
    max_elements: int = DEFAULT_MAX_ELEMENTS  # elements of one message, all levels
    default_table: str | None = None  # for formats whose messages name no table (DebeziumSmt)
    format_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    quality_checks: bool = True  # built-in CDC checks + Data Docs after each gold run
    schema_changes: str = DEFAULT_SCHEMA_POLICY  # see pipelines.gold.schema
    invalid_values: str = DEFAULT_INVALID_VALUE_POLICY  # see INVALID_VALUE_POLICIES
    status: StatusThresholds = field(default_factory=StatusThresholds)  # `lakecdc status` alerts
    gold_parallelism: int = DEFAULT_GOLD_PARALLELISM  # tables applied at a time (gold.parallelism)
    gold_max_delay: float = DEFAULT_GOLD_MAX_DELAY  # seconds: a continuous run's longest wait for a mirror's change
    gold_max_pending: int = DEFAULT_GOLD_MAX_PENDING  # continuous runs: this many waiting changes merge a mirror
    origin: str = "<config>"

    def decode_context(self, format_id: str | None = None) -> DecodeContext:
        return DecodeContext(
            tables={name.lower(): TableSpec(key=t.key, columns=dict(t.columns)) for name, t in self.tables.items()},
            default_table=self.default_table,
            max_message_bytes=self.max_message_bytes,
            max_depth=self.max_depth,
            max_width=self.max_width,
            max_elements=self.max_elements,
            options=dict(self.format_options.get(format_id or "", {})),
        )

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise ConfigError(f"{self.origin}: no source named {name!r}")
