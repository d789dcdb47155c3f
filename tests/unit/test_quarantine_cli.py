"""Day-two commands without Spark: what ``maintain`` looks after, how a quarantined message reads, the
``quarantine`` and ``rebuild --table`` parsers, and the CLI's description."""

from __future__ import annotations

import base64

import pytest

from pipelines.cli import build_parser
from pipelines.cli_commands.maintain import candidate_tables
from pipelines.quality.storage import dq_results_ref
from pipelines.quarantine import excerpt_text, readable
from pipelines.warehouse import Warehouse


def test_maintain_looks_after_dq_results_where_the_checks_write_it(tmp_path):
    wh = Warehouse(str(tmp_path / "wh"))
    refs = candidate_tables(wh, [])
    assert dq_results_ref(wh) in refs and dq_results_ref(wh).path.endswith("/dq/dq_results")
    assert not any(r.path and r.path.endswith("/silver/dq_results") for r in refs)
    assert wh.silver("quarantine_resolved") in refs
    catalog = Warehouse(catalog="main", schema="cdc")
    assert dq_results_ref(catalog) in candidate_tables(catalog, [])


def test_a_quarantined_message_reads_as_text_or_says_base64():
    assert readable(b'{"a": "\xc3\xa9"}') == {"encoding": "utf-8", "text": '{"a": "é"}'}
    raw = b"\xff\xfe\x00binary"
    assert readable(raw) == {"encoding": "base64", "text": base64.b64encode(raw).decode()}
    assert readable(None) is None
    assert excerpt_text(readable(raw)).startswith("base64:")
    assert excerpt_text(readable(b"line1\nline2" * 40), 20) == "line1\\nline2line1\\n…"
    assert "b'" not in excerpt_text(readable(b"abc"))


@pytest.mark.parametrize("action", ["list", "show", "replay"])
def test_quarantine_parses_each_action_with_its_filters(action):
    args = build_parser().parse_args(
        ["quarantine", action, "--conf", "p.yaml", "--table", "shop.orders", "--rule", "amount_positive", "--json"]
    )
    assert (args.action, args.table, args.rule, args.json, args.yes) == (
        action,
        "shop.orders",
        "amount_positive",
        True,
        False,
    )


def test_rebuild_takes_one_table():
    args = build_parser().parse_args(["rebuild", "--conf", "p.yaml", "--table", "shop.orders", "--yes"])
    assert (args.table, args.yes) == ("shop.orders", True)
    assert build_parser().parse_args(["rebuild", "--conf", "p.yaml"]).table is None


def test_the_description_names_no_short_list_of_formats():
    assert "(OMS, DataWorks, DTS, DRS formats)" not in build_parser().description


def test_kafka_bootstrap_servers_may_name_an_environment_variable(monkeypatch):
    """operations.md: ``bootstrap_servers: ${KAFKA_BOOTSTRAP_SERVERS}`` reads the variable when bronze starts."""
    from pipelines.bronze import kafka_options
    from pipelines.config import ConfigError, KafkaSource

    source = KafkaSource(bootstrap_servers="${KAFKA_BOOTSTRAP_SERVERS}", topics=("shop",))
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "b-1.kafka.internal:9094,b-2.kafka.internal:9094")
    assert kafka_options(source)["kafka.bootstrap.servers"] == "b-1.kafka.internal:9094,b-2.kafka.internal:9094"
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    with pytest.raises(ConfigError, match="KAFKA_BOOTSTRAP_SERVERS is not set"):
        kafka_options(source)
    assert kafka_options(KafkaSource(bootstrap_servers="127.0.0.1:9092", topics=("shop",)))["kafka.bootstrap.servers"]
