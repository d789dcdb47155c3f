"""A small batch's large writes generate code again (``pipelines.gold.settings.write_conf``): the session's own
values of the two switches a small batch turns off, nothing else, and only for a write of many keys."""

from __future__ import annotations

import pytest

import pipelines.gold.settings as gold_settings
from pipelines.gold.settings import CODEGEN_SWITCHES, COMPILED_WRITE_KEYS, compiled_write, write_conf

SMALL = {"spark.sql.adaptive.enabled": "false", CODEGEN_SWITCHES[0]: "false", CODEGEN_SWITCHES[1]: "NO_CODEGEN"}
OWN = {"spark.sql.adaptive.enabled": "true", CODEGEN_SWITCHES[0]: "true", CODEGEN_SWITCHES[1]: "FALLBACK"}


def test_a_small_batchs_large_writes_take_the_sessions_own_code_generation_and_nothing_else():
    assert write_conf(SMALL, OWN) == {CODEGEN_SWITCHES[0]: "true", CODEGEN_SWITCHES[1]: "FALLBACK"}


def test_a_large_batch_or_a_connect_session_needs_nothing_over_its_settings():
    assert write_conf({}, OWN) == {}, "Spark Connect: the server's settings stand"
    assert write_conf({key: OWN[key] for key in SMALL}, OWN) == {}


def test_a_session_that_switched_code_generation_off_itself_keeps_it_off():
    assert write_conf(SMALL, {**OWN, CODEGEN_SWITCHES[0]: "false"}) == {CODEGEN_SWITCHES[1]: "FALLBACK"}


def test_only_a_write_of_many_keys_is_compiled():
    assert compiled_write(COMPILED_WRITE_KEYS) and not compiled_write(COMPILED_WRITE_KEYS - 1)
    assert not compiled_write(0)


def test_writes_can_be_measured_interpreted(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gold_settings, "WRITES_GENERATE_CODE", False)
    assert write_conf(SMALL, OWN) == {}
