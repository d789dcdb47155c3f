"""The benchmark harness runs end to end (``python -m bench --quick``, shrunk further): every section is
recorded in results.json with numeric figures, and the charts are drawn. No timing is asserted: CI
machines are too noisy for that; the figures are for people (docs/benchmark.md, ``make bench``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from numbers import Number
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The sections checked and the charts they draw: CI's slice (``make test``: one decode and one apply, about two
#: minutes on 2 cores), and the long variant (``make test-all``: tables, the whole run, latency and memory too, about
#: eleven minutes here). ``scale``, ``freshness``, ``pipeline`` and ``new_tables`` (a mirror ten times larger, Kafka
#: pipelines of minutes each, hundreds of mirrors) are left to ``make bench-quick``.
SLICES = {
    "ci": (("decode", "apply"), ("decode.png", "apply_scale.png")),
    "long": (
        ("decode", "tables", "run", "apply", "latency", "memory"),
        ("decode.png", "tables.png", "apply_scale.png", "latency.png", "memory.png"),
    ),
}

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.kafka]


def _skip_reason() -> str | None:
    if shutil.which("java") is None:
        return "java (17+) is not installed"
    from pipelines.spark import build_dir
    from pipelines.testing.kafka_broker import KAFKA_VERSION, _jars_present

    if shutil.which("mvn") is None and not _jars_present(build_dir() / "kafka" / "lib", KAFKA_VERSION):
        return "Kafka jars not cached and mvn is not installed"
    return None


@pytest.mark.parametrize("slice_", ["ci", pytest.param("long", marks=pytest.mark.long)])
def test_quick_bench_records_every_section_with_numbers_and_draws_the_charts(tmp_path, slice_):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    sections, charts = SLICES[slice_]
    out = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--scale", "0.25", "--table-counts", "1,2"]
        + ["--only", ",".join(sections), "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["machine"]["cores"] >= 1 and results["machine"]["spark"]
    assert "commit" in results["git"]
    for name in (s for s in sections if s != "run"):
        body = results["sections"][name]
        assert "error" not in body, (name, body.get("error"))
        assert body["verdict"] in ("PASS", "FAIL"), name
        assert body["target"]["text"], name
        assert isinstance(body["seconds"], Number), name
        assert body["figures"], name
        for figure in body["figures"]:
            assert isinstance(figure["value"], Number), (name, figure)
        if name != "memory":
            assert body["sizes"], name
    if "tables" in sections:
        assert isinstance(results["sections"]["tables"]["ratio"], Number)
    for chart in charts:
        png = out / chart
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", chart
    # the printed table names every section and a verdict
    for name in (s for s in sections if s != "run"):
        assert name in done.stdout
