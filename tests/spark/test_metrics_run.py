"""A test scrapes a real run (issue 43): one pipeline run over a small Debezium landing directory of two tables
with ``metrics_file`` set, then the textfile the run wrote (prometheus_client's parser) and ``GET /metrics`` of
the metrics server on 127.0.0.1 (a fresh ``status`` reading).

* ``shop.customers`` (keyed, ``where: age < 100``, a ``drop`` rule on age): two inserts and an update applied,
  an insert the rule quarantines, one outside the ``where`` (filtered);
* ``shop.events`` (no key): two inserts applied, and a redelivered copy of the first (stale).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import datetime, timezone

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from pipelines.config import load_config
from pipelines.export import mirror_refs
from pipelines.formats.base import Change, DecodeContext
from pipelines.formats.debezium import DECODER
from pipelines.metrics import RUN_COUNTERS, start_metrics_server, status_metrics
from pipelines.runner import run_pipeline
from pipelines.status import collect_status
from pipelines.warehouse import Warehouse

CUSTOMER = {"id": "int", "name": "varchar(40)", "age": "int"}
EVENT = {"kind": "varchar(20)", "n": "int"}
#: per mirror: changes, applied, stale, quarantined, filtered (RUN_COUNTERS' order), and rows the mirror ends with
WANT = {"shop.customers": ((5, 3, 0, 1, 1), 2), "shop.events": ((3, 2, 1, 0, 0), 2)}


def _msg(op, table, before, after, seq):
    types = {"customers": CUSTOMER, "events": EVENT}[table]
    change = Change(op=op, db="shop", table=table, before=before, after=after, col_types=types, seq=(1, seq, 0),
                    event_time=f"2026-01-01T00:{seq // 60:02d}:{seq % 60:02d}Z")  # fmt: skip
    return DECODER.encode(change, DecodeContext())


def _messages() -> list[bytes]:
    c1 = {"id": "1", "name": "Ada", "age": "30"}
    first_event = _msg("INSERT", "events", None, {"kind": "login", "n": "1"}, 300)
    return [
        _msg("INSERT", "customers", None, c1, 100),
        _msg("INSERT", "customers", None, {"id": "2", "name": "Bo", "age": "40"}, 110),
        _msg("UPDATE", "customers", c1, {**c1, "age": "31"}, 200),
        _msg("INSERT", "customers", None, {"id": "3", "name": "Cy", "age": "999"}, 210),  # the drop rule
        _msg("INSERT", "customers", None, {"id": "4", "name": "Di", "age": "120"}, 220),  # outside the where
        first_event,
        _msg("INSERT", "events", None, {"kind": "logout", "n": "2"}, 310),
        first_event,  # redelivered
    ]


def _samples(body: str) -> dict[tuple[str, str | None], float]:
    return {
        (s.name, s.labels.get("mirror")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if set(s.labels) <= {"mirror"}
    }


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics_run")
    rule = {"name": "age_sane", "expect": "between", "column": "age", "min": 0, "max": 150, "action": "drop"}
    conf = {
        "warehouse": str(root / "warehouse"),
        "sources": [{"name": "shop", "format": "debezium", "path": str(root / "landing")}],
        "tables": {
            "shop.customers": {"key": ["id"], "columns": CUSTOMER, "where": "age < 100", "expectations": [rule]},
            "shop.events": {"columns": EVENT},
        },
        "quality_checks": False,
        "metrics_file": str(root / "textfile" / "lakecdc.prom"),
    }
    (root / "textfile").mkdir()
    (root / "landing").mkdir()
    (root / "landing" / "run-0.jsonl").write_bytes(b"\n".join(_messages()) + b"\n")
    path = root / "pipeline.yaml"
    path.write_text(yaml.safe_dump(conf))
    cfg = load_config(path)
    summary = run_pipeline(spark, cfg)
    return cfg, summary, root / "textfile" / "lakecdc.prom"


def test_the_textfile_holds_each_mirrors_counts_and_they_add_up_to_the_run(run):
    cfg, summary, textfile = run
    got = _samples(textfile.read_text())
    for mirror, (counts, _rows) in WANT.items():
        assert tuple(got[(name, mirror)] for _, name, _ in RUN_COUNTERS) == counts, mirror
        assert got[("lakecdc_mirror_batches_written_total", mirror)] >= 1
    run_figures = {"changes": len(_messages()), "applied": summary.applied, "stale": summary.stale}
    run_figures.update(quarantined=summary.gold_quarantined, skipped=summary.filtered)
    for attr, name, _ in RUN_COUNTERS:  # the mirrors' counters add up to the run's own figures
        assert sum(v for (n, _mirror), v in got.items() if n == name) == run_figures[attr], name
    assert got[("lakecdc_gold_batches_total", None)] >= 1
    keyed = [m for m in WANT if ("lakecdc_mirror_changes_waiting", m) in got]
    assert keyed == ["shop.customers"]  # per keyed mirror, from gold's pending: a run until caught up leaves none
    assert got[("lakecdc_mirror_changes_waiting", "shop.customers")] == 0
    assert got[("lakecdc_mirror_oldest_waiting_timestamp_seconds", "shop.customers")] == 0
    # the newest source time applied: the UPDATE at 00:03:20 (the drop rule's and the where's rows are not applied)
    through = datetime(2026, 1, 1, 0, 3, 20, tzinfo=timezone.utc).timestamp()
    assert got[("lakecdc_mirror_applied_event_timestamp_seconds", "shop.customers")] == through
    assert [p.name for p in textfile.parent.iterdir()] == ["lakecdc.prom"]  # written by rename, nothing left over


def test_a_scrape_of_the_metrics_server_reads_the_mirrors(spark, run):
    cfg, _summary, _textfile = run
    refs = mirror_refs(spark, Warehouse.from_config(cfg))
    assert sorted(refs) == sorted(WANT)
    rows = {name: ref.read(spark).count() for name, ref in refs.items()}
    assert rows == {name: want for name, (_counts, want) in WANT.items()}
    server = start_metrics_server(lambda: status_metrics(collect_status(spark, cfg)), port=0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1" and port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=300) as response:
            assert response.status == 200
            got = _samples(response.read().decode())
        for name, n in rows.items():
            assert got[("lakecdc_mirror_rows", name)] == n, name
            assert got[("lakecdc_mirror_changes_waiting", name)] == 0, name
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=30)
        assert missing.value.code == 404
    finally:
        server.shutdown()
        server.server_close()
