"""Pipeline configuration: one YAML file, validated with messages that name the bad field.

See ``conf/pipeline.example.yaml`` for every option with comments. The shape::

    warehouse: ./warehouse          # local directory (default), or
    catalog: main                   # Databricks: Unity Catalog catalog ...
    schema: cdc                     # ... and schema; then `checkpoints:` is required (a volume path)
    checkpoints: null               # default: <warehouse>/_checkpoints (local warehouse only)
    trigger: available_now          # or: continuous (with processing_time)
    processing_time: 10 seconds
    queries: per_stage              # or: one (a single query lands, decodes and applies each batch)
    status: {max_lag_seconds: 900}  # `lakecdc status` exits 1 beyond it (and beyond a source's freshness)
    limits: {max_message_bytes: 16777216, max_depth: 64, max_width: 100000, max_elements: 1000000}
    sources:
      - name: shop_default
        format: oms_default         # a format id, or auto
        path: ./landing/shop_default    # landing directory of JSON-lines files, or:
        kafka: {bootstrap_servers: 127.0.0.1:9092, topics: [shop], starting_offsets: earliest}
    tables:
      shop.orders:                  # <db>.<table> as the messages name it
        key: [id]
        columns: {id: bigint, amount: "decimal(38,24)", note: varchar(64)}
        target: shop.orders         # mirror name (default: the same)
        schema_changes: fail        # DROP/RENAME/narrowing: fail | quarantine | evolve | ignore
        history: false              # true: also keep an SCD type 2 history (valid from/to)
        invalid_values: null        # a zero date or other value the source holds as invalid: "null" | quarantine
        expectations:               # Great Expectations rules: warn | drop | fail
          - {name: amount_positive, expect: between, column: amount, min: 0, action: drop}

Every error of a file is reported at once. Types are checked (a column type must be one lakecdc
knows), YAML aliases may not expand into a bomb, and a secret written as a literal is warned about.

The package, bottom to top: :mod:`~pipelines.config.model` (the dataclasses and constants),
:mod:`~pipelines.config.locations` (catalog, schemas, targets and checkpoints go together),
:mod:`~pipelines.config.fields` (every key of the file with its type, default and description:
what the validator allows, and the reference :func:`reference_markdown` renders),
:mod:`~pipelines.config.secrets` (literal secrets warned about, ``${VAR}`` resolved),
:mod:`~pipelines.config.validation` (:func:`parse_config`), :mod:`~pipelines.config.loading`
(:func:`load_config`). Import every name from ``pipelines.config``.
"""

from __future__ import annotations

from pipelines.config.fields import SECTIONS, reference_markdown
from pipelines.config.loading import YAML_ALIAS_BUDGET, load_config
from pipelines.config.locations import CHECKPOINTS_REQUIRED, check_locations, location_errors
from pipelines.config.model import (
    DEFAULT_GOLD_MAX_DELAY,
    DEFAULT_GOLD_MAX_PENDING,
    DEFAULT_GOLD_PARALLELISM,
    DEFAULT_INVALID_VALUE_POLICY,
    DEFAULT_SCHEMA_POLICY,
    DEFAULT_TABLE_FEATURES,
    INVALID_VALUE_POLICIES,
    MAX_GOLD_PARALLELISM,
    QUERIES,
    SCHEMA_POLICIES,
    STAGES,
    KafkaSource,
    PipelineConfig,
    Source,
    StatusThresholds,
    TableConfig,
)
from pipelines.config.replay import replay_source
from pipelines.config.secrets import resolve_secret
from pipelines.config.validation import parse_config
from pipelines.errors import ConfigError  # defined in pipelines.errors (quality's rule parser raises it too)
from pipelines.quality.rules import DEFAULT_FRESHNESS_TEXT, freshness_seconds  # sources[].freshness, shared

__all__ = [
    "CHECKPOINTS_REQUIRED",
    "DEFAULT_GOLD_MAX_DELAY",
    "DEFAULT_GOLD_MAX_PENDING",
    "DEFAULT_GOLD_PARALLELISM",
    "DEFAULT_INVALID_VALUE_POLICY",
    "DEFAULT_SCHEMA_POLICY",
    "DEFAULT_TABLE_FEATURES",
    "INVALID_VALUE_POLICIES",
    "MAX_GOLD_PARALLELISM",
    "QUERIES",
    "SCHEMA_POLICIES",
    "SECTIONS",
    "STAGES",
    "YAML_ALIAS_BUDGET",
    "ConfigError",
    "KafkaSource",
    "PipelineConfig",
    "Source",
    "StatusThresholds",
    "DEFAULT_FRESHNESS_TEXT",
    "freshness_seconds",
    "TableConfig",
    "check_locations",
    "load_config",
    "location_errors",
    "parse_config",
    "reference_markdown",
    "replay_source",
    "resolve_secret",
]
