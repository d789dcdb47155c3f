"""The configuration's keys are declared once (``pipelines.config.fields``): the validator allows exactly
the declared keys of each section, a declared default is what a file without the key gets, and the
reference renders every key."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import pytest

from pipelines.config import SECTIONS, ConfigError, PipelineConfig, parse_config, reference_markdown

UNKNOWN = "no_such_key"

#: Each section's path in the documents below.
WHERE = {
    "": "",
    "gold": "gold",
    "limits": "limits",
    "status": "status",
    "schemas": "schemas",
    "sources[]": "sources[0]",
    "sources[].kafka": "sources[0].kafka",
    "tables.<name>": "tables.db.t",
    "tables.<name>.history": "tables.db.t.history",
    "gold.naming": "gold.naming",
}

PATH_SOURCE = {"name": "by_path", "format": "oms_default", "path": "./landing"}
TOPICS_SOURCE = {"name": "by_topics", "format": "oms_canal", "kafka": {"bootstrap_servers": "h:1", "topics": ["t"]}}
PATTERN_SOURCE = {
    "name": "by_pattern",
    "format": "oms_canal",
    "kafka": {"bootstrap_servers": "h:1", "topic_pattern": "t.*"},
}


def test_every_section_is_reached_here():
    assert sorted(WHERE) == sorted(s.name for s in SECTIONS)
    assert len({s.name for s in SECTIONS}) == len(SECTIONS)
    for section in SECTIONS:
        assert len(section.names()) == len(section.fields), f"{section.name!r} declares a key twice"


def test_the_validator_allows_exactly_the_declared_keys():
    """A key nowhere declared is refused in every section, and the refusal lists what the validator
    allows there: the declared keys, no more, no fewer."""
    document = {
        UNKNOWN: 1,
        **{name: {UNKNOWN: 1} for name in ("limits", "status", "schemas")},
        "gold": {UNKNOWN: 1, "naming": {UNKNOWN: 1}},
        "sources": [
            {"name": "s", "format": "oms_default", "kafka": {"bootstrap_servers": "h:1", "topics": ["t"], UNKNOWN: 1}}
            | {UNKNOWN: 1}
        ],
        "tables": {"db.t": {UNKNOWN: 1, "history": {UNKNOWN: 1}}},
    }
    with pytest.raises(ConfigError) as refused:
        parse_config(document, origin="f.yaml")
    allowed = {
        where: set(names.split(", "))
        for where, names in re.findall(
            rf"f\.yaml: (?:(\S+)\.)?{UNKNOWN}: unknown field; allowed here: ([^\n]+)", str(refused.value)
        )
    }
    assert sorted(allowed) == sorted(WHERE.values())
    for section in SECTIONS:
        assert allowed[WHERE[section.name]] == section.names(), section.name


def test_every_declared_key_is_accepted():
    """A document that names every declared key of every section: no key is refused as unknown."""

    def every_key(section_name: str, **given: object) -> dict:
        [section] = [s for s in SECTIONS if s.name == section_name]
        return {f.name: None for f in section.fields} | given

    document = every_key(
        "",
        gold=every_key("gold", naming=every_key("gold.naming")),
        limits=every_key("limits"),
        status=every_key("status"),
        schemas=every_key("schemas"),
        sources=[every_key("sources[]", name="s", format="oms_default", kafka=every_key("sources[].kafka"))],
        tables={"db.t": every_key("tables.<name>", history=every_key("tables.<name>.history"))},
    )
    with pytest.raises(ConfigError) as refused:  # None is no valid value of most keys
        parse_config(document, origin="f.yaml")
    assert "unknown field" not in str(refused.value)


def _yaml_text(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)) and not value:
        return "[]"
    if isinstance(value, Mapping) and not value:
        return "{}"
    return str(value)


def _source(cfg: PipelineConfig, name: str):
    return cfg.source(name)


#: (section, key) → the value a file without the key gets (None: the key is a section of its own, whose
#: keys are checked there). Top-level keys are read from a file with one source and nothing else.
PARSED: dict[tuple[str, str], Callable[[PipelineConfig], object] | None] = {
    ("", "warehouse"): lambda c: c.warehouse,
    ("", "catalog"): lambda c: c.catalog,
    ("", "schema"): lambda c: c.schema,
    ("", "schemas"): lambda c: c.schemas,
    ("", "trigger"): lambda c: c.trigger,
    ("", "processing_time"): lambda c: c.processing_time,
    ("", "queries"): lambda c: c.queries,
    ("", "limits"): None,
    ("", "tables"): lambda c: c.tables,
    ("", "default_table"): lambda c: c.default_table,
    ("", "format_options"): lambda c: c.format_options,
    ("", "quality_checks"): lambda c: c.quality_checks,
    ("", "schema_changes"): lambda c: c.schema_changes,
    ("", "invalid_values"): lambda c: c.invalid_values,
    ("", "status"): None,
    ("", "gold"): None,
    ("", "include"): lambda c: c.include,
    ("", "exclude"): lambda c: c.exclude,
    ("gold", "naming"): None,
    ("gold.naming", "template"): lambda c: c.gold_naming.template,
    ("gold", "parallelism"): lambda c: c.gold_parallelism,
    ("gold", "max_delay"): lambda c: f"{c.gold_max_delay / 60:g} minutes",
    ("gold", "max_pending"): lambda c: c.gold_max_pending,
    ("gold", "table_features"): lambda c: c.gold_table_features,
    ("limits", "max_message_bytes"): lambda c: c.max_message_bytes,
    ("limits", "max_depth"): lambda c: c.max_depth,
    ("limits", "max_width"): lambda c: c.max_width,
    ("limits", "max_elements"): lambda c: c.max_elements,
    ("limits", "new_mirrors_per_batch"): lambda c: c.new_mirrors_per_batch,
    ("limits", "batch_bytes"): lambda c: c.batch_bytes,
    ("status", "max_lag_seconds"): lambda c: c.status.max_lag_seconds,
    ("status", "max_staleness_seconds"): lambda c: c.status.max_staleness_seconds,
    ("sources[]", "path"): lambda c: _source(c, "by_topics").path,
    ("sources[]", "kafka"): lambda c: _source(c, "by_path").kafka,
    ("sources[]", "freshness"): lambda c: _source(c, "by_path").freshness,
    ("sources[]", "include"): lambda c: _source(c, "by_path").include,
    ("sources[]", "exclude"): lambda c: _source(c, "by_path").exclude,
    ("sources[]", "ignore_null_updates"): lambda c: c.ignores_null_updates("by_path", "db.t"),
    ("sources[].kafka", "topics"): lambda c: _source(c, "by_pattern").kafka.topics,
    ("sources[].kafka", "topic_pattern"): lambda c: _source(c, "by_topics").kafka.topic_pattern,
    ("sources[].kafka", "starting_offsets"): lambda c: _source(c, "by_topics").kafka.starting_offsets,
    ("sources[].kafka", "max_offsets_per_trigger"): lambda c: _source(c, "by_topics").kafka.max_offsets_per_trigger,
    ("sources[].kafka", "fail_on_data_loss"): lambda c: _source(c, "by_topics").kafka.fail_on_data_loss,
    ("sources[].kafka", "security"): lambda c: _source(c, "by_topics").kafka.security,
    ("sources[].kafka", "options"): lambda c: _source(c, "by_topics").kafka.options,
    ("tables.<name>", "key"): lambda c: c.tables["db.t"].key,
    ("tables.<name>", "columns"): lambda c: c.tables["db.t"].columns,
    ("tables.<name>", "expectations"): lambda c: c.tables["db.t"].expectations,
    ("tables.<name>", "history"): lambda c: c.tables["db.t"].history,
    ("tables.<name>", "columns_exclude"): lambda c: c.tables["db.t"].columns_exclude,
    ("tables.<name>", "cluster_by"): lambda c: c.tables["db.t"].cluster_by,
    ("tables.<name>", "deletes"): lambda c: c.tables["db.t"].deletes,
    ("tables.<name>", "where"): lambda c: c.tables["db.t"].where,
    ("tables.<name>", "from"): lambda c: c.tables["db.t"].from_tables,
    ("tables.<name>", "computed"): lambda c: c.tables["db.t"].computed,
    ("", "type_mapping"): lambda c: c.type_mapping,
    ("tables.<name>", "partition_by"): lambda c: c.tables["db.t"].partition_by,
    ("tables.<name>.history", "except_columns"): lambda c: c.tables["db.t"].history_except_columns,
}


def test_a_declared_default_is_what_a_file_without_the_key_gets():
    bare = parse_config({"sources": [PATH_SOURCE]})
    full = parse_config({"sources": [PATH_SOURCE, TOPICS_SOURCE, PATTERN_SOURCE], "tables": {"db.t": {}}})
    plain = {(s.name, f.name): f.default for s in SECTIONS for f in s.fields if not f.default.startswith("(")}
    assert sorted(plain) == sorted(PARSED), "a key with a plain default needs its line in PARSED"
    for (section, key), default in plain.items():
        read = PARSED[(section, key)]
        if read is not None:
            assert _yaml_text(read(bare if section == "" else full)) == default, f"{section or 'top level'}: {key}"


def test_the_reference_has_a_row_per_key():
    text = reference_markdown()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == sum(len(s.fields) for s in SECTIONS)
    for section in SECTIONS:
        assert (f"## `{section.name}`" if section.name else "## Top level") in text
        for f in section.fields:
            [row] = [r for r in rows[:] if r.startswith(f"| `{f.name}` |") and f.doc.replace("|", "\\|") in r]
            assert len(re.findall(r"(?<!\\)\|", row)) == 5, row  # four cells: a | inside one is escaped
            assert f.type_text and f.default and f.doc.endswith("."), f"{section.name}: {f.name}"
