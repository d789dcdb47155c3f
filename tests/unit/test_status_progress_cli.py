"""Without Spark: `lakecdc status` thresholds and output, per-batch progress lines and when they print,
`--warehouse`/`--conf` for export and dq, and the checkpoint rule for catalogs."""

from __future__ import annotations

import json
import logging

import pytest

from pipelines.cli import build_parser, main
from pipelines.cli_commands.pipeline import with_locations
from pipelines.config import ConfigError, StatusThresholds, parse_config
from pipelines.progress import BatchProgressListener, ProgressReporter, format_progress, source_lag
from pipelines.status import MirrorStatus, SourceStatus, Status, breaches, render

SOURCES = [{"name": "s1", "format": "oms_default", "path": "/tmp/landing"}]


# ---------------------------------------------------------------- configuration


def test_a_catalog_without_checkpoints_is_an_error_that_says_why():
    with pytest.raises(ConfigError) as err:
        parse_config({"catalog": "main", "schema": "cdc", "sources": SOURCES}, origin="p.yaml")
    message = str(err.value)
    assert "p.yaml: checkpoints:" in message and "catalog" in message and "local disk" in message
    cfg = parse_config({"catalog": "main", "schema": "cdc", "checkpoints": "/Volumes/main/cdc/ck", "sources": SOURCES})
    assert cfg.checkpoints == "/Volumes/main/cdc/ck"
    assert parse_config({"warehouse": "/tmp/w", "sources": SOURCES}).checkpoints is None  # local: the default


def test_a_catalog_given_on_the_command_line_needs_checkpoints_too():
    cfg = parse_config({"warehouse": "/tmp/w", "sources": SOURCES}, origin="p.yaml")
    args = build_parser().parse_args(["run", "--conf", "p.yaml", "--catalog", "main", "--schema", "cdc"])
    with pytest.raises(ConfigError, match="checkpoints.*--checkpoints"):
        with_locations(cfg, args)
    args = build_parser().parse_args(
        ["run", "--conf", "p.yaml", "--catalog", "main", "--schema", "cdc", "--checkpoints", "/Volumes/x"]
    )
    assert with_locations(cfg, args).checkpoints == "/Volumes/x"


def test_status_thresholds_are_validated():
    cfg = parse_config({"sources": SOURCES, "status": {"max_lag_seconds": 900, "max_staleness_seconds": 1.5}})
    assert cfg.status == StatusThresholds(max_lag_seconds=900)
    assert parse_config({"sources": SOURCES}).status == StatusThresholds()
    with pytest.raises(ConfigError) as err:
        parse_config({"sources": SOURCES, "status": {"max_lag_seconds": -1, "max_staleness_seconds": "1h", "x": 1}})
    text = str(err.value)
    assert "3 configuration errors" in text
    assert "status.max_lag_seconds" in text and "status.max_staleness_seconds" in text and "status.x" in text


# ---------------------------------------------------------------- command line


@pytest.mark.parametrize("command", [["export"], ["dq", "report"], ["dq", "check"]])
def test_export_and_dq_take_exactly_one_of_warehouse_and_conf(command, capsys):
    for extra in ([], ["--warehouse", "w", "--conf", "c.yaml"]):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args([*command, *extra])
        assert exit_.value.code == 2
        assert "--warehouse" in capsys.readouterr().err
    assert build_parser().parse_args([*command, "--conf", "c.yaml"]).conf == "c.yaml"
    assert build_parser().parse_args([*command, "--warehouse", "w"]).warehouse == "w"


def test_a_missing_warehouse_or_configuration_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["export", "--warehouse", str(tmp_path / "nowhere")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["dq", "report", "--conf", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read configuration" in capsys.readouterr().err
    conf = tmp_path / "p.yaml"
    conf.write_text(json.dumps({"warehouse": str(tmp_path / "w"), "sources": SOURCES}))
    assert main(["export", "--conf", str(conf)]) == 2
    assert "does not exist" in capsys.readouterr().err
    conf.write_text(json.dumps({"catalog": "c", "schema": "s", "sources": SOURCES}))
    assert main(["status", "--conf", str(conf)]) == 2
    assert "checkpoints" in capsys.readouterr().err


def test_status_flags_take_positive_seconds(capsys):
    args = build_parser().parse_args(["status", "--conf", "c", "--max-lag-seconds", "90", "--json"])
    assert (args.max_lag_seconds, args.max_staleness_seconds, args.json) == (90.0, None, True)
    for bad in ("0", "-5", "soon", "inf"):
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["status", "--conf", "c", "--max-staleness-seconds", bad])
        assert exit_.value.code == 2
        assert "positive number of seconds" in capsys.readouterr().err


# ---------------------------------------------------------------- status verdicts and output


def _status(**source_fields) -> Status:
    source = SourceStatus(name="s1", format="oms_default", kind="kafka", pending=7, **source_fields)
    mirror = MirrorStatus("db.t", "/w/gold/db__t", 3, 1, "42", "t:0:1", "2026-01-01T00:00:00Z", 1, 2, None)
    return Status("2026-01-01T01:00:00Z", "p.yaml", StatusThresholds(), [source], [mirror])


def test_breaches_name_the_source_and_the_threshold():
    status = _status(lag_seconds=120.0, staleness_seconds=30.0)
    assert breaches(status, StatusThresholds()) == []
    assert breaches(status, StatusThresholds(max_lag_seconds=120, max_staleness_seconds=30)) == []
    found = breaches(status, StatusThresholds(max_lag_seconds=60, max_staleness_seconds=10))
    assert len(found) == 2
    assert "s1: lag 2m00s > max_lag_seconds 60 (7 messages unread)" in found
    assert any("max_staleness_seconds 10" in b for b in found)


def test_what_cannot_be_measured_breaches_the_threshold_that_needs_it():
    status = _status(error="RuntimeError: topic 't' does not exist")
    assert breaches(status, StatusThresholds(max_lag_seconds=60)) == [
        "s1: lag unknown (RuntimeError: topic 't' does not exist)"
    ]
    assert breaches(status, StatusThresholds(max_staleness_seconds=60)) == ["s1: no change or heartbeat seen yet"]


def test_human_and_json_output():
    status = _status(lag_seconds=3725.0, staleness_seconds=5.0)
    status.thresholds = StatusThresholds(max_lag_seconds=60)
    status.breaches = breaches(status, status.thresholds)
    text = render(status)
    assert "7 msgs" in text and "1h02m" in text and "db.t" in text and "1/2" in text
    assert text.splitlines()[-2:] == ["BREACHED (max_lag_seconds 60):", f"  {status.breaches[0]}"]
    doc = json.loads(json.dumps(status.to_json()))
    assert doc["ok"] is False and doc["breaches"] == status.breaches
    assert doc["sources"][0]["pending"] == 7 and doc["mirrors"][0]["quarantined_gold"] == 2
    assert doc["thresholds"] == {
        "max_lag_seconds": 60,
        "max_staleness_seconds": None,
        "freshness_seconds": {"s1": None},
    }


# ---------------------------------------------------------------- progress


def _kafka_progress(batch_id: int, rows: int) -> dict:
    """The shape of Spark's progress JSON for a Kafka source (StreamingQueryProgress.json)."""
    return {
        "name": "bronze_s1",
        "batchId": batch_id,
        "numInputRows": rows,
        "processedRowsPerSecond": 1234.5,
        "sources": [
            {
                "description": "KafkaV2[Subscribe[t]]",
                "endOffset": {"t": {"0": 10, "1": 4}},
                "latestOffset": {"t": {"0": 15, "1": 4}},
                "metrics": {"maxOffsetsBehindLatest": "5"},
            }
        ],
    }


def test_progress_lines_count_rows_batches_and_lag():
    lines: list[str] = []
    reporter = ProgressReporter(emit=lines.append, is_tty=True)
    reporter.batch(_kafka_progress(0, 10))
    reporter.batch(_kafka_progress(1, 4))
    assert lines == [
        "bronze_s1: batch 0: 10 rows (1,234 rows/s); 1 batch, 10 rows so far; lag 5 messages",
        "bronze_s1: batch 1: 4 rows (1,234 rows/s); 2 batches, 14 rows so far; lag 5 messages",
    ]


def test_sources_without_a_latest_offset_show_no_lag():
    """Delta's source (silver, gold read it) and the file source, as their progress shows them."""
    delta = {"endOffset": {"sourceVersion": 1, "reservoirVersion": 2, "index": 1}, "latestOffset": None}
    files = {"endOffset": {"logOffset": 0}, "latestOffset": None, "metrics": {}}
    assert source_lag([delta]) is None and source_lag([files]) is None
    line = format_progress({"name": "silver_decode", "batchId": 3, "numInputRows": 0, "sources": [delta]}, 4, 9)
    assert line == "silver_decode: batch 3: 0 rows; 4 batches, 9 rows so far"
    assert source_lag([delta, _kafka_progress(0, 1)["sources"][0]]) == "5 messages"


def test_progress_is_quiet_off_a_terminal_but_logged(caplog):
    lines: list[str] = []
    quiet = ProgressReporter(emit=lines.append, is_tty=False)
    with caplog.at_level(logging.INFO, logger="lakecdc.progress"):
        quiet.batch(_kafka_progress(0, 10))
        quiet("produce t: batch 0: 5/5 messages")
    assert lines == []
    assert [r.getMessage() for r in caplog.records] == [
        "bronze_s1: batch 0: 10 rows (1,234 rows/s); 1 batch, 10 rows so far; lag 5 messages",
        "produce t: batch 0: 5/5 messages",
    ]
    caplog.clear()
    loud = ProgressReporter(emit=lines.append, is_tty=True)
    with caplog.at_level(logging.INFO, logger="lakecdc.progress"):
        loud("x")
    assert lines == ["x"] and caplog.records == []  # shown once, not again by the log


def test_the_cli_reporter_follows_stderr(capsys):
    from pipelines.cli_commands.shared import batch_reporter

    batch_reporter(is_tty=True)("a batch")
    batch_reporter(is_tty=False)("not shown")
    batch_reporter()("not shown either: pytest's stderr is no terminal")
    assert capsys.readouterr().err == "[lakecdc] a batch\n"


def test_the_listener_reports_batches_and_drains_until_every_query_ended():
    from types import SimpleNamespace

    lines: list[str] = []
    listener = BatchProgressListener(ProgressReporter(emit=lines.append, is_tty=True))
    assert listener.drain(timeout=0.01)  # nothing started: nothing to wait for
    listener.onQueryStarted(SimpleNamespace(id="q1"))
    listener.onQueryProgress(SimpleNamespace(progress=SimpleNamespace(json=json.dumps(_kafka_progress(0, 3)))))
    assert not listener.drain(timeout=0.05)
    listener.onQueryTerminated(SimpleNamespace(id="q1"))
    assert listener.drain(timeout=0.05)
    assert listener.seen == {"bronze_s1": 1} and lines[0].startswith("bronze_s1: batch 0: 3 rows")


# ---------------------------------------------------------------- one freshness setting


def test_status_and_cdc_freshness_share_one_freshness_setting_and_default():
    from pipelines.config import DEFAULT_FRESHNESS_TEXT, freshness_seconds
    from pipelines.quality.checks import threshold_seconds
    from pipelines.quality.rules import DEFAULT_FRESHNESS
    from pipelines.status import _freshness

    assert freshness_seconds() == DEFAULT_FRESHNESS.total_seconds() == freshness_seconds(DEFAULT_FRESHNESS_TEXT)
    two = [*SOURCES, {"name": "s2", "format": "oms_default", "path": "/tmp/l2", "freshness": "10 minutes"}]
    cfg = parse_config({"sources": two})
    by_source = {s.name: s.freshness for s in cfg.sources}  # what dq check and a run's check pass
    for name, seconds in (("s1", 3600.0), ("s2", 600.0)):
        assert _freshness(cfg, name, cfg.status) == threshold_seconds(by_source, name) == seconds
    assert _freshness(cfg, "replay_x", cfg.status) == threshold_seconds(by_source, "replay_x") == 3600.0
    assert _freshness(cfg, "s2", StatusThresholds(max_staleness_seconds=5)) == 5.0  # one call's flag
    # status.max_staleness_seconds (before the setting was shared): the freshness of each source without one
    cfg = parse_config({"sources": two, "status": {"max_staleness_seconds": 120}})
    assert [s.freshness for s in cfg.sources] == ["120 seconds", "10 minutes"]
    assert _freshness(cfg, "s1", cfg.status) == 120.0


def test_a_source_staler_than_its_freshness_breaches_by_default_and_names_its_mirrors():
    status = _status(lag_seconds=0.0, staleness_seconds=4000.0, freshness_seconds=3600.0)
    status.mirrors[0].sources = ["s1"]
    assert breaches(status, StatusThresholds()) == [
        "s1: last change or heartbeat 1h06m ago > its freshness 1h00m; its mirrors db.t"
    ]
    status.sources[0].freshness_seconds = 7200.0
    assert breaches(status, StatusThresholds()) == []
