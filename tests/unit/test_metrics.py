"""Without Spark: the Prometheus text of a status reading and of a run's batches, and the textfile a
node-exporter collector reads (written whole, by rename)."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from pipelines.cli import build_parser
from pipelines.config import StatusThresholds
from pipelines.gold.batch import GoldStats, MirrorCounts, WrittenMirror
from pipelines.gold.steps import StepCost
from pipelines.metrics import RUN_COUNTERS, MeteredGoldStats, RunMetrics, start_metrics_server, status_metrics, text
from pipelines.status import MirrorStatus, SourceStatus, Status
from pipelines.warehouse import TableRef


def _samples(body: str) -> dict[tuple, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_a_status_reading_as_prometheus_gauges_per_mirror_and_source():
    source = SourceStatus("s1", "oms_default", "kafka", pending=7, lag_seconds=12.5, staleness_seconds=30.0)
    mirror = MirrorStatus("db.t", "/w/gold/db__t", 3, 1, "42", "t:0:1", None, 1, 2, None, pending=4)
    mirror.staleness_seconds, mirror.freshness_seconds, mirror.stale = 4000.0, 3600.0, True
    got = _samples(text(status_metrics(Status("now", "p.yaml", StatusThresholds(), [source], [mirror]))))
    m = (("mirror", "db.t"),)
    assert got[("lakecdc_mirror_rows", m)] == 3 and got[("lakecdc_mirror_changes_waiting", m)] == 4
    assert got[("lakecdc_mirror_staleness_seconds", m)] == 4000 and got[("lakecdc_mirror_stale", m)] == 1
    assert got[("lakecdc_mirror_changes_quarantined", (("mirror", "db.t"), ("stage", "gold")))] == 2
    assert got[("lakecdc_source_lag_seconds", (("source", "s1"),))] == 12.5
    assert got[("lakecdc_source_unread", (("source", "s1"),))] == 7
    assert got[("lakecdc_status_ok", ())] == 1


def test_each_batch_adds_to_the_counters_per_mirror_and_rewrites_the_textfile(tmp_path):
    path = tmp_path / "lakecdc.prom"
    stats = MeteredGoldStats(RunMetrics(str(path)))
    mirror = WrittenMirror("db.t", TableRef(path="/w/gold/db__t"), '["db",null,"t"]', {"s1"})
    for applied in (5, 2):
        batch = GoldStats(applied=applied + 1, stale=1, quarantined=1, skipped=1, changes=applied + 4, waiting=3)
        batch.mirrors = {
            "db.t": MirrorCounts(changes=applied + 2, applied=applied, stale=1, quarantined=1),
            "db.u": MirrorCounts(changes=2, applied=1, skipped=1),
        }
        assert batch.mirrors_total == batch.totals
        batch.steps = {"write": StepCost(1.5, 4, 1)}
        batch.written = {"k": mirror}
        # db.t waits after the first batch and is merged by the second; db.u is planned by the first only
        batch.pending = {"db.t": (4, time.time() - 30)} if applied == 5 else {"db.t": (0, None)}
        if applied == 5:
            batch.pending["db.u"] = (2, time.time() - 120)
        batch.applied_through = {"db.t": 1_767_225_800.0 if applied == 5 else 1_767_225_700.0}  # then a late one
        stats.add(batch)
        if applied == 5:  # the textfile after the first batch: what waits, per mirror, from the stream itself
            first = _samples(path.read_text())
            assert first[("lakecdc_mirror_changes_waiting", (("mirror", "db.t"),))] == 4
            arrived = first[("lakecdc_mirror_oldest_waiting_timestamp_seconds", (("mirror", "db.t"),))]
            assert 29 <= time.time() - arrived < 60
    assert stats.applied == 9 and stats.mirrors["db.t"].applied == 7  # still the runner's GoldStats, per mirror too
    assert stats.mirrors_total == stats.totals
    got = _samples(path.read_text())
    t, u = (("mirror", "db.t"),), (("mirror", "db.u"),)
    assert got[("lakecdc_changes_applied_total", t)] == 7 and got[("lakecdc_changes_total", t)] == 11
    assert got[("lakecdc_changes_stale_total", t)] == 2 and got[("lakecdc_changes_quarantined_total", t)] == 2
    assert got[("lakecdc_changes_applied_total", u)] == 2 and got[("lakecdc_changes_filtered_total", u)] == 2
    assert got[("lakecdc_changes_stale_total", u)] == 0  # every counter of a mirror gold counted, 0 too
    for attr, name, _ in RUN_COUNTERS:  # the mirrors' counters add up to the run's figures
        assert sum(v for (n, _labels), v in got.items() if n == name) == getattr(stats, attr)
    assert ("lakecdc_changes_applied_total", ()) not in got  # no unlabelled total: sum by mirror
    assert got[("lakecdc_gold_batches_total", ())] == 2 and got[("lakecdc_changes_waiting", ())] == 3
    assert got[("lakecdc_gold_step_seconds_total", (("step", "write"),))] == 3.0
    assert got[("lakecdc_gold_step_spark_jobs_total", (("step", "write"),))] == 8
    assert got[("lakecdc_mirror_batches_written_total", (("mirror", "db.t"),))] == 2
    oldest = "lakecdc_mirror_oldest_waiting_timestamp_seconds"
    assert got[("lakecdc_mirror_changes_waiting", t)] == 0 and got[(oldest, t)] == 0
    assert got[("lakecdc_mirror_changes_waiting", u)] == 2  # no batch planned it since: what waits still waits
    assert 119 <= time.time() - got[(oldest, u)] < 180
    assert stats.pending == {"db.t": (0, None), "db.u": (2, stats.pending["db.u"][1])}
    # the newest source time applied never goes back when a later batch applies an older (late) change
    assert got[("lakecdc_mirror_applied_event_timestamp_seconds", t)] == 1_767_225_800.0
    assert stats.applied_through == {"db.t": 1_767_225_800.0}
    assert [p.name for p in tmp_path.iterdir()] == ["lakecdc.prom"]  # the temporary file was renamed over it


def test_gold_stats_merge_their_mirrors_counts_without_sharing_them():
    first, second = GoldStats(), GoldStats()
    first.mirror("db.t").add(MirrorCounts(changes=3, applied=2, stale=1))
    second.mirror("db.t").add(MirrorCounts(changes=1, quarantined=1))
    second.mirror("db.u").add(MirrorCounts(changes=4, skipped=4))
    run = GoldStats()
    run.add(first)
    run.add(second)
    assert run.mirrors == {
        "db.t": MirrorCounts(changes=4, applied=2, stale=1, quarantined=1),
        "db.u": MirrorCounts(changes=4, skipped=4),
    }
    assert run.mirrors_total == MirrorCounts(changes=8, applied=2, stale=1, quarantined=1, skipped=4)
    assert first.mirrors["db.t"] == MirrorCounts(changes=3, applied=2, stale=1)  # merged by value, not shared


def test_the_metrics_server_answers_a_fresh_reading_and_404_elsewhere():
    import urllib.error
    import urllib.request

    from prometheus_client import CollectorRegistry, Gauge

    readings = []

    def read():
        registry = CollectorRegistry()
        readings.append(1)
        Gauge("lakecdc_readings", "Readings so far", registry=registry).set(len(readings))
        return registry

    server = start_metrics_server(read, port=0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert server.server_address[0] == "127.0.0.1"
        for n in (1, 2):
            with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
                assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain")
                assert _samples(response.read().decode())[("lakecdc_readings", ())] == n  # read afresh
        try:
            urllib.request.urlopen(f"{url}/other", timeout=30)
            raise AssertionError("a path other than /metrics answered")
        except urllib.error.HTTPError as err:
            assert err.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_the_metrics_command_line():
    args = build_parser().parse_args(["metrics", "--conf", "p.yaml", "--serve", "--port", "0"])
    assert (args.serve, args.port, args.json) == (True, 0, False)
    assert build_parser().parse_args(["metrics", "--conf", "p.yaml"]).port == 9464
