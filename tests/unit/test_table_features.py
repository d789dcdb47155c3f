"""``gold.table_features`` (issue 33): the setting is checked like every key, and it decides the Delta features
and the document type of a new mirror (docs/readers.md); Spark tests: tests/spark/test_readers.py."""

from __future__ import annotations

import pytest

from pipelines.config import ConfigError, parse_config
from pipelines.gold.identity import TABLE_FEATURES_PROPERTY, feature_properties, readable_type

SOURCE = {"name": "s", "format": "oms_default", "path": "/landing"}


def test_the_default_is_full_and_compatible_is_read():
    assert parse_config({"sources": [SOURCE]}).gold_table_features == "full"
    cfg = parse_config({"sources": [SOURCE], "gold": {"table_features": "compatible"}})
    assert cfg.gold_table_features == "compatible"


def test_another_value_is_an_error_naming_the_key_and_the_choices():
    with pytest.raises(ConfigError, match=r"gold\.table_features: must be one of full, compatible .*'fast'"):
        parse_config({"sources": [SOURCE], "gold": {"table_features": "fast"}})


def test_full_enables_every_feature_and_compatible_none():
    full = feature_properties("full", ["id", "note"])
    assert full == {
        "delta.enableTypeWidening": "true",
        "delta.columnMapping.mode": "name",
        "delta.enableDeletionVectors": "true",
        TABLE_FEATURES_PROPERTY: "full",
    }
    assert feature_properties("compatible", ["id", "note"]) == {TABLE_FEATURES_PROPERTY: "compatible"}


@pytest.mark.parametrize("name", ["first name", "a,b", "x=y", "f(x)", "tab\there"])
def test_compatible_keeps_column_mapping_only_for_a_name_delta_needs_it_for(name):
    assert feature_properties("compatible", ["id", name])["delta.columnMapping.mode"] == "name"


def test_a_document_is_exact_text_under_compatible_only():
    for document in ("json", "jsonb", "object", "array"):
        assert readable_type(document, "compatible") == "text"
        assert readable_type(document, "full") == document
    for other in ("decimal(12,2)", "bigint unsigned", "datetime(6)", None):
        assert readable_type(other, "compatible") == other
