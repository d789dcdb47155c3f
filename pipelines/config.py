"""Pipeline configuration: one YAML file, validated with messages that name the bad field.

See ``conf/pipeline.example.yaml`` for every option with comments. The shape::

    warehouse: ./warehouse          # local directory (default), or
    catalog: main                   # Databricks: Unity Catalog catalog ...
    schema: cdc                     # ... and schema; then `checkpoints:` must be a volume path
    checkpoints: null               # default: <warehouse>/_checkpoints
    trigger: available_now          # or: continuous (with processing_time)
    processing_time: 10 seconds
    limits: {max_message_bytes: 16777216, max_depth: 64}
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
        expectations:               # Great Expectations rules: warn | drop | fail
          - {name: amount_positive, expect: between, column: amount, min: 0, action: drop}
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from pipelines.errors import ConfigError
from pipelines.formats import ALL_FORMAT_IDS
from pipelines.formats.base import DEFAULT_MAX_DEPTH, DEFAULT_MAX_MESSAGE_BYTES, DecodeContext, TableSpec

__all__ = ["ConfigError"]  # defined in pipelines.errors (quality's rule parser raises it too)

#: What gold does with a DROP, RENAME, narrowing or retype (``schema_changes``; see pipelines.gold.schema).
SCHEMA_POLICIES = ("fail", "quarantine", "evolve", "ignore")
DEFAULT_SCHEMA_POLICY = "fail"


STAGES = ("bronze", "silver", "gold")
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_KAFKA_KEYS = {
    "bootstrap_servers", "topics", "topic_pattern", "starting_offsets", "max_offsets_per_trigger",
    "fail_on_data_loss", "security", "options",
}


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
    history: bool = False  # keep an SCD type 2 history next to the mirror (pipelines.history)


@dataclass(frozen=True)
class PipelineConfig:
    sources: tuple[Source, ...]
    tables: Mapping[str, TableConfig]
    warehouse: str = "./warehouse"
    catalog: str | None = None
    schema: str | None = None
    checkpoints: str | None = None
    trigger: str = "available_now"
    processing_time: str = "10 seconds"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    default_table: str | None = None  # for formats whose messages name no table (DebeziumSmt)
    format_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    quality_checks: bool = True  # built-in CDC checks + Data Docs after each gold run
    schema_changes: str = DEFAULT_SCHEMA_POLICY  # see pipelines.mirror_schema
    origin: str = "<config>"

    def decode_context(self, format_id: str | None = None) -> DecodeContext:
        return DecodeContext(
            tables={name.lower(): TableSpec(key=t.key, columns=dict(t.columns)) for name, t in self.tables.items()},
            default_table=self.default_table,
            max_message_bytes=self.max_message_bytes,
            max_depth=self.max_depth,
            options=dict(self.format_options.get(format_id or "", {})),
        )

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise ConfigError(f"{self.origin}: no source named {name!r}")


def load_config(path: str | os.PathLike) -> PipelineConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration {p}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {exc}") from None
    return parse_config(data, origin=str(p))


def parse_config(data: Any, origin: str = "<config>") -> PipelineConfig:
    """Validate a parsed YAML document; every error names ``origin`` and the field path."""
    v = _Validator(origin)
    root = v.mapping(data, "")
    v.only(root, "", {
        "warehouse", "catalog", "schema", "checkpoints", "trigger", "processing_time", "limits",
        "sources", "tables", "default_table", "format_options", "quality_checks", "schema_changes",
    })
    limits = v.mapping(root.get("limits") or {}, "limits")
    v.only(limits, "limits", {"max_message_bytes", "max_depth"})
    sources = tuple(v.source(s, f"sources[{i}]") for i, s in enumerate(v.sequence(root.get("sources"), "sources")))
    if not sources:
        v.fail("sources", "at least one source is required")
    names = [s.name for s in sources]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        v.fail("sources", f"source names must be unique; repeated: {', '.join(sorted(dup))}")
    tables_raw = v.mapping(root.get("tables") or {}, "tables")
    tables = {str(name): v.table(str(name), spec, f"tables.{name}") for name, spec in tables_raw.items()}
    trigger = root.get("trigger", "available_now")
    if trigger not in ("available_now", "continuous"):
        v.fail("trigger", f"must be available_now or continuous, got {trigger!r}")
    catalog, schema = root.get("catalog"), root.get("schema")
    if bool(catalog) != bool(schema):
        v.fail("catalog", "catalog and schema go together (Unity Catalog names catalog.schema.table)")
    default_table = root.get("default_table")
    if default_table is not None and "." not in str(default_table):
        v.fail("default_table", f"must be <db>.<table>, got {default_table!r}")
    format_options = v.mapping(root.get("format_options") or {}, "format_options")
    for fmt in format_options:
        if fmt not in ALL_FORMAT_IDS:
            v.fail(f"format_options.{fmt}", f"unknown format; known formats: {', '.join(ALL_FORMAT_IDS)}")
    return PipelineConfig(
        sources=sources,
        tables=tables,
        warehouse=str(root.get("warehouse") or "./warehouse"),
        catalog=catalog,
        schema=schema,
        checkpoints=root.get("checkpoints"),
        trigger=trigger,
        processing_time=str(root.get("processing_time", "10 seconds")),
        max_message_bytes=v.positive_int(limits.get("max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES), "limits.max_message_bytes"),
        max_depth=v.positive_int(limits.get("max_depth", DEFAULT_MAX_DEPTH), "limits.max_depth"),
        default_table=default_table,
        format_options={k: dict(val or {}) for k, val in format_options.items()},
        quality_checks=v.boolean(root.get("quality_checks", True), "quality_checks"),
        schema_changes=v.schema_policy(root.get("schema_changes", DEFAULT_SCHEMA_POLICY), "schema_changes"),
        origin=origin,
    )


class _Validator:
    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, where: str, message: str) -> None:
        raise ConfigError(f"{self.origin}: {where or 'top level'}: {message}")

    def mapping(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"expected a mapping, got {type(value).__name__}")
        return value

    def sequence(self, value: Any, where: str) -> list:
        if not isinstance(value, list):
            self.fail(where, f"expected a list, got {type(value).__name__}")
        return value

    def only(self, value: dict, where: str, allowed: set[str]) -> None:
        unknown = sorted(set(map(str, value)) - allowed)
        if unknown:
            prefix = f"{where}." if where else ""
            self.fail(f"{prefix}{unknown[0]}", f"unknown field; allowed here: {', '.join(sorted(allowed))}")

    def boolean(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            self.fail(where, f"must be true or false, got {value!r}")
        return value

    def schema_policy(self, value: Any, where: str) -> str:
        if value not in SCHEMA_POLICIES:
            self.fail(where, f"must be one of {', '.join(SCHEMA_POLICIES)} (what DROP COLUMN, RENAME and "
                             f"narrowing do to the mirror), got {value!r}")
        return value

    def positive_int(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.fail(where, f"must be a positive integer, got {value!r}")
        return value

    def source(self, raw: Any, where: str) -> Source:
        s = self.mapping(raw, where)
        self.only(s, where, {"name", "format", "path", "kafka", "freshness"})
        name = s.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            self.fail(f"{where}.name", f"must be letters, digits, _ . - (got {name!r})")
        fmt = s.get("format")
        if fmt not in ALL_FORMAT_IDS:
            self.fail(f"{where}.format", f"unknown format {fmt!r}; known formats: {', '.join(ALL_FORMAT_IDS)}")
        if bool(s.get("path")) == bool(s.get("kafka")):
            self.fail(where, "give exactly one of path (landing directory) or kafka")
        kafka = self.kafka(s["kafka"], f"{where}.kafka") if s.get("kafka") else None
        freshness = str(s.get("freshness", "1 hour"))
        from pipelines.quality import parse_duration

        parse_duration(freshness, f"{self.origin}: {where}.freshness")
        return Source(name=name, format=fmt, path=str(s["path"]) if s.get("path") else None, kafka=kafka,
                      freshness=freshness)

    def kafka(self, raw: Any, where: str) -> KafkaSource:
        k = self.mapping(raw, where)
        self.only(k, where, _KAFKA_KEYS)
        if not k.get("bootstrap_servers"):
            self.fail(f"{where}.bootstrap_servers", "required")
        topics = k.get("topics") or []
        if isinstance(topics, str):
            topics = [topics]
        if bool(topics) == bool(k.get("topic_pattern")):
            self.fail(where, "give exactly one of topics or topic_pattern")
        mopt = k.get("max_offsets_per_trigger")
        return KafkaSource(
            bootstrap_servers=str(k["bootstrap_servers"]),
            topics=tuple(map(str, topics)),
            topic_pattern=k.get("topic_pattern"),
            starting_offsets=str(k.get("starting_offsets", "earliest")),
            max_offsets_per_trigger=self.positive_int(mopt, f"{where}.max_offsets_per_trigger") if mopt is not None else None,
            fail_on_data_loss=bool(k.get("fail_on_data_loss", True)),
            security={str(a): str(b) for a, b in self.mapping(k.get("security") or {}, f"{where}.security").items()},
            options={str(a): str(b) for a, b in self.mapping(k.get("options") or {}, f"{where}.options").items()},
        )

    def table(self, name: str, raw: Any, where: str) -> TableConfig:
        t = self.mapping(raw or {}, where)
        self.only(t, where, {"key", "columns", "target", "expectations", "schema_changes", "history"})
        if "." not in name:
            self.fail(where, "table names are <db>.<table> as the messages name them")
        key = t.get("key") or []
        if isinstance(key, str):
            key = [c.strip() for c in key.split(",")]
        key = tuple(str(c) for c in self.sequence(key, f"{where}.key"))
        columns = {str(c): str(typ) for c, typ in self.mapping(t.get("columns") or {}, f"{where}.columns").items()}
        missing = [c for c in key if columns and c not in columns]
        if missing:
            self.fail(f"{where}.key", f"key column {missing[0]!r} is not among the columns")
        from pipelines.quality import parse_expectations

        rules = tuple(parse_expectations(t.get("expectations"), f"{self.origin}: {where}.expectations"))
        policy = self.schema_policy(t["schema_changes"], f"{where}.schema_changes") if "schema_changes" in t else None
        return TableConfig(name=name, key=key, columns=columns, target=t.get("target"), expectations=rules,
                           schema_changes=policy, history=self.boolean(t.get("history", False), f"{where}.history"))


def resolve_secret(value: str) -> str:
    """``${NAME}`` → the environment variable NAME (Kafka SASL/SSL secrets never live in YAML)."""
    m = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value.strip())
    if not m:
        return value
    if m.group(1) not in os.environ:
        raise ConfigError(f"environment variable {m.group(1)} is not set (referenced by the configuration)")
    return os.environ[m.group(1)]
