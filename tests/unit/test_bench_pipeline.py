"""The pipeline section's arithmetic (bench/pipeline.py): when a message is visible, and the verdict."""

from __future__ import annotations

import math

from bench.latency import latencies_of, visibility
from bench.pipeline import _figures

SIZES = {"messages": 100, "tables": 4, "rate": 200}


def test_a_message_is_visible_at_the_first_commit_of_it_or_a_later_offset_of_its_partition():
    # partition 0: offsets up to 4 merged at 10 s, up to 9 at 20 s; partition 1 never merged
    seen = visibility([(0, 9, 20_000), (0, 4, 10_000)])
    delivered = [(0, 0, 1_000), (0, 4, 2_000), (0, 5, 3_000), (1, 0, 1_000)]
    assert latencies_of(delivered, seen) == [8.0, 9.0, 17.0, math.inf]


def _case(whole_s, hand_s, whole_p99, hand_p99, one=(30.0, 20.0)):
    """Figures of a per-stage run (``whole_s``, ``whole_p99``) and a one-query run (``one``: seconds, p99)."""
    caught = {"hand_seconds": hand_s, "per_stage": {"whole_seconds": whole_s}, "one": {"whole_seconds": one[0]}}
    whole = {
        "per_stage": {"p99": whole_p99, "p99_seconds": whole_p99, "p50_seconds": 1.0},
        "one": {"p99": one[1], "p99_seconds": one[1], "p50_seconds": 1.0},
    }
    hand = {"p99": hand_p99, "p99_seconds": hand_p99, "p50_seconds": 1.0}
    return _figures(SIZES, caught, hand, whole)


def test_the_verdict_needs_every_target():
    assert _case(10.0, 10.0, 8.0, 16.0)["verdict"] == "PASS"
    assert _case(10.5, 10.0, 8.0, 16.0)["verdict"] == "FAIL"  # catch-up slower than the hand-written job
    assert _case(10.0, 10.0, 16.0, 40.0)["verdict"] == "FAIL"  # p99 over 15 s
    assert _case(10.0, 10.0, 9.0, 16.0)["verdict"] == "FAIL"  # p99 over half the hand-written one
    assert _case(10.0, 10.0, math.inf, 16.0)["verdict"] == "FAIL"  # a message never visible
    figures = _case(10.0, 8.0, 8.0, 16.0)["figures"]
    assert [f["ratio"] for f in figures[:2]] == [1.25, 0.5]


def test_the_one_query_is_measured_beside_the_default_shape_with_a_verdict_of_its_own():
    result = _case(10.0, 10.0, 8.0, 16.0, one=(8.0, 6.0))
    assert result["verdict"] == "PASS" and result["one_query_verdict"] == "PASS"
    one = [f for f in result["figures"] if f["name"].endswith("queries: one")]
    assert [f["value"] for f in one] == [8.0, 6.0, 1.0] and [f["ratio"] for f in one[:2]] == [0.8, 0.38]
    assert _case(10.0, 10.0, 8.0, 16.0, one=(12.0, 6.0))["one_query_verdict"] == "FAIL"  # its catch-up too slow
    assert _case(12.0, 10.0, 8.0, 16.0, one=(8.0, 6.0))["verdict"] == "FAIL"  # the default shape decides it
