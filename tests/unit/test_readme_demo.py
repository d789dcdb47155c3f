"""README's demo block is a real run's output (issue 33: it had kept an older run's mirror paths and check
counts). This keeps its figures consistent, without Spark: the messages, changes, heartbeats, DDL and
malformed messages are what decoding the demo's own traffic (``lakecdc demo``'s defaults) gives; the counts
reconcile; the check totals equal the data-quality table's; the mirrors are the demo's."""

from __future__ import annotations

import re
from pathlib import Path

from pipelines.cli import build_parser
from pipelines.formats import Reject, get_decoder
from pipelines.formats.base import DecodeContext
from pipelines.testing.demo import SOURCES, TABLE_TYPES, generate_keyed

README = Path(__file__).resolve().parents[2] / "README.md"


def _block() -> str:
    section = README.read_text(encoding="utf-8").split("### 1. The demo", 1)[1]
    return section.split("```\n", 1)[1].split("\n```", 1)[0]


def _figure(label: str) -> int:
    return int(re.search(rf"^  {re.escape(label)} +(\d+)", _block(), re.M)[1])


def _demo_defaults() -> tuple[int, int]:
    args = build_parser().parse_args(["demo"])
    return args.changes, args.seed


def test_the_message_counts_are_what_the_demo_traffic_decodes_to():
    changes, seed = _demo_defaults()
    traffic = generate_keyed(changes, seed, dq_faults=True)
    counts = {"changes": 0, "HEARTBEAT": 0, "DDL": 0, "rejected": 0}
    for source, pairs in traffic.items():
        decoder = get_decoder(SOURCES[source])
        for _key, raw in pairs:
            try:
                ops = {c.op for c in decoder.decode(raw, DecodeContext())}
            except Reject:
                counts["rejected"] += 1
                continue
            kind = next((k for k in ("HEARTBEAT", "DDL") if k in ops), "changes")
            counts[kind] += 1
    messages = sum(map(len, traffic.values()))
    assert re.search(rf"generated {messages} messages for {len(traffic)} sources", _block())
    assert _figure("messages in bronze") == messages
    assert _figure("with row changes") == counts["changes"] == changes
    assert (_figure("heartbeats"), _figure("DDL"), _figure("quarantined")) == (
        counts["HEARTBEAT"],
        counts["DDL"],
        counts["rejected"],
    )


def test_the_summary_reconciles_and_the_checks_add_up():
    block = _block()
    bronze = _figure("messages in bronze")
    parts = ("with row changes", "heartbeats", "DDL", "quarantined")
    assert bronze == sum(map(_figure, parts)) + int(re.search(r"skipped \(include/exclude\) +(\d+)", block)[1])
    assert f"reconciled              yes ({bronze} of {bronze} messages accounted for)" in block
    applied, stale, in_gold = map(
        int, re.search(r"changes applied +(\d+)  \((\d+) stale skipped, (\d+) quar", block).groups()
    )
    assert applied + stale + in_gold == _figure("with row changes"), "each demo message carries one change"
    table = re.findall(r"^(\S+) +(\d+) +[\d.]+% +(\d+) +(\d+) ", block, re.M)
    checks, failed = map(int, re.search(r"data quality: (\d+) checks, (\d+) failed", block).groups())
    assert checks == sum(int(t[1]) for t in table) and failed == sum(int(t[2]) for t in table)
    assert failed == len(re.findall(r"^  \S+: \S+ \((?:warn|drop|fail)\) failed", block, re.M))
    assert in_gold == sum(int(t[3]) for t in table), "gold's quarantine: what the drop expectations dropped"
    mirrors = re.findall(r"^    (\S+) +\d+ +build/lakecdc-demo/warehouse/gold/\S+$", block, re.M)
    assert sorted(mirrors) == sorted(t[0] for t in table) and len(mirrors) == len(TABLE_TYPES)
