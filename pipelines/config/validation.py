"""Validation: :func:`parse_config` turns a parsed YAML document into a :class:`PipelineConfig`, checking
each field's type and value with :class:`_Validator`, and reports every error of the document at once
(each names the file and the field path).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pipelines.config.choices as choices
from pipelines.config.checker import Checker
from pipelines.config.fields import GOLD, KAFKA, LIMITS, SCHEMAS, SOURCE, STATUS, TABLE, TOP_LEVEL
from pipelines.config.locations import location_errors
from pipelines.config.model import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_GOLD_MAX_DELAY,
    DEFAULT_GOLD_MAX_PENDING,
    DEFAULT_GOLD_PARALLELISM,
    DEFAULT_INVALID_VALUE_POLICY,
    DEFAULT_MAX_OFFSETS_PER_TRIGGER,
    DEFAULT_NEW_MIRRORS_PER_BATCH,
    DEFAULT_SCHEMA_POLICY,
    DEFAULT_TABLE_FEATURES,
    INVALID_VALUE_POLICIES,
    MAX_GOLD_PARALLELISM,
    QUERIES,
    SCHEMA_POLICIES,
    TABLE_FEATURES,
    KafkaSource,
    PipelineConfig,
    Source,
    StatusThresholds,
    TableConfig,
)
from pipelines.config.secrets import warn_literal_secrets
from pipelines.errors import ConfigError, Reject
from pipelines.formats import ALL_FORMAT_IDS
from pipelines.formats.base import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ELEMENTS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_WIDTH,
)
from pipelines.formats.confluent import registry_settings
from pipelines.quality.rules import DEFAULT_FRESHNESS_TEXT, parse_duration, parse_expectations
from pipelines.routing import config_problems as routing_problems
from pipelines.values import is_known_type

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_LIMITS = {
    "max_message_bytes": DEFAULT_MAX_MESSAGE_BYTES,
    "max_depth": DEFAULT_MAX_DEPTH,
    "max_width": DEFAULT_MAX_WIDTH,
    "max_elements": DEFAULT_MAX_ELEMENTS,
    "new_mirrors_per_batch": DEFAULT_NEW_MIRRORS_PER_BATCH,
    "batch_bytes": DEFAULT_BATCH_BYTES,
}
#: A Spark trigger interval: ``10 seconds``, ``1 minute 30 seconds``, ``interval 500 milliseconds``.
_INTERVAL_RE = re.compile(
    r"(?:interval\s+)?(?:\d+(?:\.\d+)?\s*"
    r"(?:microsecond|millisecond|second|minute|hour|day|week)s?(?:\s+|$))+",
    re.I | re.ASCII,
)


def parse_config(data: Any, origin: str = "<config>") -> PipelineConfig:
    """Validate a parsed YAML document; every error names ``origin`` and the field path, and all the
    errors of a document are reported together (one ConfigError listing each)."""
    v = _Validator(origin)
    root = v.mapping(data, "")
    v.only(root, "", TOP_LEVEL.names())
    gold_raw = v.mapping(root.get("gold") or {}, "gold")
    v.only(gold_raw, "gold", GOLD.names())
    gold_parallelism = v.positive_int(
        gold_raw.get("parallelism", DEFAULT_GOLD_PARALLELISM), "gold.parallelism", DEFAULT_GOLD_PARALLELISM
    )
    if gold_parallelism > MAX_GOLD_PARALLELISM:
        v.fail(
            "gold.parallelism",
            f"at most {MAX_GOLD_PARALLELISM} tables at a time (each one is a thread with its own Spark session), "
            f"got {gold_parallelism}",
        )
    gold_max_delay = (
        v.duration(gold_raw.get("max_delay", DEFAULT_GOLD_MAX_DELAY), "gold.max_delay") or DEFAULT_GOLD_MAX_DELAY
    )
    gold_max_pending = v.positive_int(
        gold_raw.get("max_pending", DEFAULT_GOLD_MAX_PENDING), "gold.max_pending", DEFAULT_GOLD_MAX_PENDING
    )
    gold_naming = choices.naming(v, gold_raw.get("naming"))
    gold_table_features = v.one_of(
        gold_raw.get("table_features", DEFAULT_TABLE_FEATURES),
        "gold.table_features",
        TABLE_FEATURES,
        DEFAULT_TABLE_FEATURES,
        "the Delta features of a new mirror: docs/readers.md",
    )
    include, exclude = choices.table_lists(v, root, "")
    limits_raw = v.mapping(root.get("limits") or {}, "limits")
    v.only(limits_raw, "limits", LIMITS.names())
    limits = {k: v.positive_int(limits_raw.get(k, default), f"limits.{k}", default) for k, default in _LIMITS.items()}
    # status.max_staleness_seconds: the freshness of every source that sets none (one setting, shared)
    status, stale_after = v.status(root.get("status"), "status")
    default_freshness = DEFAULT_FRESHNESS_TEXT if stale_after is None else f"{stale_after:g} seconds"
    sources = tuple(
        s
        for i, raw in enumerate(v.sequence(root.get("sources"), "sources"))
        if (s := v.source(raw, f"sources[{i}]", default_freshness)) is not None
    )
    if root.get("sources") == []:
        v.fail("sources", "at least one source is required")
    names = [s.name for s in sources]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        v.fail("sources", f"source names must be unique; repeated: {', '.join(sorted(dup))}")
    tables_raw = v.mapping(root.get("tables") or {}, "tables")
    tables = {str(name): v.table(str(name), spec, f"tables.{name}") for name, spec in tables_raw.items()}
    choices.skipped_tables(v, tables, (include, exclude), sources)
    for where, message in routing_problems(tables):
        v.fail(where, message)
    trigger = root.get("trigger", "available_now")
    if trigger not in ("available_now", "continuous"):
        v.fail("trigger", f"must be available_now or continuous, got {trigger!r}")
    processing_time = v.text(root.get("processing_time", "10 seconds"), "processing_time", "10 seconds")
    if not _INTERVAL_RE.fullmatch(processing_time.strip()):
        v.fail(
            "processing_time",
            f"must be a Spark trigger interval such as '10 seconds' or '1 minute', got {processing_time!r}",
        )
    queries = root.get("queries", "per_stage")
    if queries not in QUERIES:
        v.fail("queries", f"must be {' or '.join(QUERIES)}, got {queries!r}")
    catalog = v.text(root.get("catalog"), "catalog", None)
    schema = v.text(root.get("schema"), "schema", None)
    schemas_raw = v.mapping(root.get("schemas") or {}, "schemas")
    v.only(schemas_raw, "schemas", SCHEMAS.names())
    schemas = {layer: v.text(name, f"schemas.{layer}", None) for layer, name in schemas_raw.items()}
    checkpoints = v.text(root.get("checkpoints"), "checkpoints", None)
    default_table = v.text(root.get("default_table"), "default_table", None)
    if default_table is not None and "." not in default_table:
        v.fail("default_table", f"must be <db>.<table>, got {default_table!r}")
    format_options = {}
    for fmt, opts in v.mapping(root.get("format_options") or {}, "format_options").items():
        if fmt not in ALL_FORMAT_IDS:
            v.fail(f"format_options.{fmt}", f"unknown format; known formats: {', '.join(ALL_FORMAT_IDS)}")
        format_options[fmt] = dict(v.mapping(opts or {}, f"format_options.{fmt}"))
        try:  # the schema registry's settings (formats.confluent); ${VAR}s are read where decoding runs
            registry_settings(format_options[fmt])
        except Reject as exc:
            v.fail(f"format_options.{fmt}", str(exc))
    config = PipelineConfig(
        sources=sources,
        tables=tables,
        warehouse=v.text(root.get("warehouse") or "./warehouse", "warehouse", "./warehouse"),
        catalog=catalog,
        schema=schema,
        schemas={k: n for k, n in schemas.items() if n},
        checkpoints=checkpoints,
        trigger=trigger,
        processing_time=processing_time,
        queries=queries,
        **limits,
        default_table=default_table,
        format_options=format_options,
        quality_checks=v.boolean(root.get("quality_checks", True), "quality_checks", True),
        metrics_file=v.text(root.get("metrics_file"), "metrics_file", None),
        schema_changes=v.schema_policy(root.get("schema_changes", DEFAULT_SCHEMA_POLICY), "schema_changes"),
        invalid_values=v.invalid_value_policy(
            root.get("invalid_values", DEFAULT_INVALID_VALUE_POLICY), "invalid_values"
        ),
        status=status,
        gold_parallelism=gold_parallelism,
        gold_max_delay=gold_max_delay,
        gold_max_pending=gold_max_pending,
        gold_naming=gold_naming,
        gold_table_features=gold_table_features,
        include=include,
        exclude=exclude,
        type_mapping=choices.type_mapping(v, root.get("type_mapping"), "type_mapping"),
        origin=origin,
    )
    for where, message in location_errors(config):
        v.fail(where, message)
    warn_literal_secrets(root, origin)
    v.done()
    return config


class _Validator(Checker):
    """:class:`~pipelines.config.checker.Checker`'s generic checks, and the checks of this file's own fields."""

    def schema_policy(self, value: Any, where: str) -> str:
        what = "what DROP COLUMN, RENAME and narrowing do to the mirror"
        return self.one_of(value, where, SCHEMA_POLICIES, DEFAULT_SCHEMA_POLICY, what)

    def invalid_value_policy(self, value: Any, where: str) -> str:
        if value is None:  # YAML reads an unquoted `null` as nothing: the user means the policy
            return "null"
        what = "what a zero date or another value the source holds as invalid becomes"
        return self.one_of(value, where, INVALID_VALUE_POLICIES, DEFAULT_INVALID_VALUE_POLICY, what)

    def status(self, raw: Any, where: str) -> tuple[StatusThresholds, float | None]:
        """The thresholds, and ``max_staleness_seconds``: not a threshold of its own any more but the
        ``freshness`` of every source that sets none (what ``lakecdc status`` and ``cdc_freshness`` share)."""
        s = self.mapping(raw or {}, where)
        self.only(s, where, STATUS.names())
        limits = {}
        for name in ("max_lag_seconds", "max_staleness_seconds"):
            value = s.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                self.fail(f"{where}.{name}", f"must be a positive number of seconds, got {value!r:.80}")
                value = None
            limits[name] = value
        return StatusThresholds(max_lag_seconds=limits["max_lag_seconds"]), limits["max_staleness_seconds"]

    def duration(self, value: Any, where: str) -> float | None:
        """A duration (``5 minutes``, ``90 seconds``, or a number of seconds) in seconds."""
        parsed = self.rule(parse_duration, value, f"{self.origin}: {where}")
        return None if parsed is None else parsed.total_seconds()

    def positive_int(self, value: Any, where: str, default: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.fail(where, f"must be a positive integer, got {value!r:.80}")
            return default
        return value

    def settings(self, value: Any, where: str) -> dict[str, str]:
        """Client settings: names → text (numbers and booleans written as Kafka reads them)."""
        out = {}
        for name, item in self.mapping(value or {}, where).items():
            if isinstance(item, bool):
                out[str(name)] = "true" if item else "false"
            elif isinstance(item, (str, int, float)):
                out[str(name)] = str(item)
            else:
                self.fail(f"{where}.{name}", f"must be a string, number or boolean, got {type(item).__name__}")
        return out

    def source(self, raw: Any, where: str, default_freshness: str = DEFAULT_FRESHNESS_TEXT) -> Source | None:
        s = self.mapping(raw, where)
        if not s:
            return None
        self.only(s, where, SOURCE.names())
        name = s.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            self.fail(f"{where}.name", f"must be letters, digits, _ . - (got {name!r:.80})")
            name = str(name)
        fmt = s.get("format")
        if fmt not in ALL_FORMAT_IDS:
            self.fail(f"{where}.format", f"unknown format {fmt!r:.80}; known formats: {', '.join(ALL_FORMAT_IDS)}")
        if bool(s.get("path")) == bool(s.get("kafka")):
            self.fail(where, "give exactly one of path (landing directory) or kafka")
        path = self.text(s.get("path"), f"{where}.path", None)
        kafka = self.kafka(s["kafka"], f"{where}.kafka") if s.get("kafka") else None
        freshness = self.text(s.get("freshness", default_freshness), f"{where}.freshness", default_freshness)
        self.rule(parse_duration, freshness, f"{self.origin}: {where}.freshness")
        include, exclude = choices.table_lists(self, s, where)
        return Source(
            name=name,
            format=str(fmt),
            path=path or None,
            kafka=kafka,
            freshness=freshness,
            include=include,
            exclude=exclude,
            ignore_null_updates=choices.optional_boolean(self, s, "ignore_null_updates", where),
            type_mapping=choices.type_mapping(self, s["type_mapping"], f"{where}.type_mapping")
            if "type_mapping" in s
            else None,
        )

    def rule(self, parser: Any, *args: Any) -> Any:
        """Run one of quality's parsers, which raise ConfigError themselves; collect its error."""
        try:
            return parser(*args)
        except ConfigError as exc:
            self.errors.append(str(exc))
            return None

    def kafka(self, raw: Any, where: str) -> KafkaSource:
        k = self.mapping(raw, where)
        self.only(k, where, KAFKA.names())
        servers = self.text(k.get("bootstrap_servers"), f"{where}.bootstrap_servers", "")
        given = k.get("topics") or []
        topics = self.sequence([given] if isinstance(given, str) else given, f"{where}.topics")
        for i, topic in enumerate(topics):
            self.text(topic, f"{where}.topics[{i}]", "")
        pattern = self.text(k.get("topic_pattern"), f"{where}.topic_pattern", None)
        if bool(given) == bool(pattern):
            self.fail(where, "give exactly one of topics or topic_pattern")
        mopt = k.get("max_offsets_per_trigger")
        if mopt is not None:
            mopt = self.positive_int(mopt, f"{where}.max_offsets_per_trigger")
        return KafkaSource(
            bootstrap_servers=servers,
            topics=tuple(map(str, topics)),
            topic_pattern=pattern,
            starting_offsets=self.starting_offsets(k.get("starting_offsets", "earliest"), f"{where}.starting_offsets"),
            max_offsets_per_trigger=DEFAULT_MAX_OFFSETS_PER_TRIGGER if mopt is None else mopt,
            fail_on_data_loss=self.boolean(k.get("fail_on_data_loss", True), f"{where}.fail_on_data_loss", True),
            security=self.settings(k.get("security"), f"{where}.security"),
            options=self.settings(k.get("options"), f"{where}.options"),
        )

    def starting_offsets(self, value: Any, where: str) -> str:
        """earliest, latest, or Spark's JSON of offsets per partition (text, or a YAML mapping)."""
        if value in ("earliest", "latest"):
            return value
        offsets = value
        if isinstance(value, str):
            try:
                offsets = json.loads(value)
            except ValueError:
                offsets = None
        valid = (
            isinstance(offsets, dict)
            and bool(offsets)
            and all(
                isinstance(topic, str)
                and isinstance(parts, dict)
                and parts
                and all(
                    str(part).isdigit() and isinstance(offset, int) and not isinstance(offset, bool) and offset >= -2
                    for part, offset in parts.items()
                )
                for topic, parts in offsets.items()
            )
        )
        if not valid:
            self.fail(
                where,
                "must be earliest, latest, or JSON offsets per partition such as "
                f'{{"topic": {{"0": 23, "1": -2}}}}, got {value!r:.80}',
            )
            return "earliest"
        return value if isinstance(value, str) else json.dumps(offsets)

    def table(self, name: str, raw: Any, where: str) -> TableConfig:
        t = self.mapping(raw or {}, where)
        self.only(t, where, TABLE.names())
        if "." not in name:
            self.fail(where, "table names are <db>.<table> as the messages name them")
        key = t.get("key") or []
        if isinstance(key, str):
            key = [c.strip() for c in key.split(",")]
        key = tuple(str(self.text(c, f"{where}.key", "")) for c in self.sequence(key, f"{where}.key"))
        columns = {}
        for column, typ in self.mapping(t.get("columns") or {}, f"{where}.columns").items():
            if not isinstance(typ, str) or not is_known_type(typ):
                self.fail(
                    f"{where}.columns.{column}",
                    f"unknown column type {typ!r:.80}: write a type as the "
                    "source database names it (bigint, decimal(12,2), varchar(64), datetime, timestamp(6), "
                    "blob, ...; any text type such as varchar or text is kept as STRING)",
                )
            columns[str(column)] = str(typ)
        routed = {"_source_table"} if t.get("from") else set()  # a sharded mirror's column (pipelines.routing)
        missing = [c for c in key if columns and c not in columns and c not in routed]
        if missing:
            self.fail(f"{where}.key", f"key column {missing[0]!r} is not among the columns")
        rules = self.rule(parse_expectations, t.get("expectations"), f"{self.origin}: {where}.expectations")
        policy = self.schema_policy(t["schema_changes"], f"{where}.schema_changes") if "schema_changes" in t else None
        target = self.text(t.get("target"), f"{where}.target", None)
        invalid = (
            self.invalid_value_policy(t["invalid_values"], f"{where}.invalid_values") if "invalid_values" in t else None
        )
        chosen = {"columns": columns, **choices.table_choices(self, t, where, key, columns, rules or ())}
        return TableConfig(
            name=name,
            key=key,
            target=target,
            expectations=tuple(rules or ()),
            schema_changes=policy,
            invalid_values=invalid,
            max_delay=self.duration(t["max_delay"], f"{where}.max_delay") if "max_delay" in t else None,
            **chosen,
        )
