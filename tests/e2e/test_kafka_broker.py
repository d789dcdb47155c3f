"""Real broker tests: start, topics, exact byte round trip, status, clean stop from any process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _java_kafka_pids(data_dir: Path) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"kafka.Kafka" in cmd and str(data_dir).encode() in cmd:
                pids.append(int(d.name))
    return pids


def test_broker_is_up_and_status_reports_running(kafka_broker):
    from pipelines.testing.kafka_broker import LocalBroker

    host, port = kafka_broker.bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    st = LocalBroker.status(kafka_broker.data_dir)
    assert st["running"] is True
    assert st["bootstrap"] == kafka_broker.bootstrap
    assert st["pid"] == kafka_broker.broker.pid
    assert kafka_broker.broker.status() == st  # instance form reads the same files
    state = json.loads((kafka_broker.data_dir / "state.json").read_text())
    assert state["pid"] == st["pid"] and state["data_dir"] == str(kafka_broker.data_dir)
    assert (kafka_broker.data_dir / "broker.pid").read_text().strip() == str(st["pid"])


def test_topic_admin(kafka_broker):
    from confluent_kafka.admin import AdminClient

    name = kafka_broker.unique_topic("admin", partitions=3)
    assert name in kafka_broker.list_topics()
    md = AdminClient({"bootstrap.servers": kafka_broker.bootstrap}).list_topics(name, timeout=10)
    assert len(md.topics[name].partitions) == 3
    kafka_broker.create_topic(name, 3)  # exist_ok by default
    kafka_broker.delete_topic(name)
    assert name not in kafka_broker.list_topics()
    kafka_broker.delete_topic(name)  # missing_ok by default


def test_keyed_bytes_round_trip_exact(kafka_broker):
    topic = kafka_broker.unique_topic("roundtrip", partitions=3)
    records = []
    for i in range(300):
        key = f"order-{i % 17}".encode()
        value = bytes([i % 256, 0x00, 0xFF, 0xFE, 0x80]) + "é中".encode("gbk") + os.urandom(i % 50)
        records.append((key, value))
    records += [
        (None, b"\xff\xfe no key, not utf-8 \xc3\x28"),
        (b"\x00\x01binary-key\xff", b""),  # empty value
        (b"tombstone-key", None),  # delete marker
        (b"big", os.urandom(512 * 1024)),
    ]
    assert kafka_broker.produce(topic, records) == len(records)

    got = kafka_broker.consume(topic, timeout=60)
    assert len(got) == len(records)
    assert sorted((r.key or b"", r.value or b"", r.value is None) for r in got) == sorted(
        (k or b"", v or b"", v is None) for k, v in records
    )
    # keyed records: one partition per key, produce order kept within the key
    by_key = defaultdict(list)
    parts = defaultdict(set)
    for r in got:
        if r.key is not None:
            by_key[r.key].append(r.value)
            parts[r.key].add(r.partition)
    assert all(len(p) == 1 for p in parts.values())
    expected = defaultdict(list)
    for k, v in records:
        if k is not None:
            expected[k].append(v)
    assert dict(by_key) == dict(expected)
    assert len({r.partition for r in got}) == 3  # 17+ keys spread over all 3 partitions


def test_headers_and_explicit_partition(kafka_broker):
    topic = kafka_broker.unique_topic("hdr", partitions=3)
    kafka_broker.produce(topic, [(b"k", b"v\x00", [("op", b"\x01"), ("src", b"oms")])], partition=2)
    (r,) = kafka_broker.consume(topic, expected=1)
    assert (r.partition, r.offset, r.key, r.value) == (2, 0, b"k", b"v\x00")
    assert r.headers == [("op", b"\x01"), ("src", b"oms")]


def test_cluster_ids_never_read_as_options():
    """kafka-storage's parser took an id starting with "-" for an option: CI failed one start in 64."""
    import base64

    from pipelines.testing.kafka_broker import _random_cluster_id

    ids = [_random_cluster_id() for _ in range(5000)]
    assert not [i for i in ids if i.startswith("-")]
    assert {len(base64.urlsafe_b64decode(i + "==")) for i in ids} == {16}


def test_stop_leaves_no_process_and_frees_port(tmp_path, monkeypatch):
    from pipelines.testing import kafka_broker
    from pipelines.testing.kafka_broker import LocalBroker
    from pipelines.testing.kafka_client import produce

    # the format step passes the id as --cluster-id=..., so even a dash-led id formats
    monkeypatch.setattr(kafka_broker, "_random_cluster_id", lambda: "-" + "A" * 21)
    with LocalBroker(data_dir=tmp_path / "b1", fresh=True) as b:
        pid, port, cport = b.pid, b.port, b.controller_port
        b.create_topic("x", 1)
        assert produce(b.bootstrap, "x", [(b"k", b"v")]) == 1
        assert LocalBroker.status(b.data_dir)["running"]
    assert _pid_gone(pid)
    assert _java_kafka_pids(tmp_path / "b1") == []
    assert _port_free(port) and _port_free(cport)
    st = LocalBroker.status(tmp_path / "b1")
    assert st["running"] is False and st["pid"] is None
    assert not (tmp_path / "b1" / "state.json").exists()
    assert b.stop() is False  # idempotent


def test_detached_broker_status_and_down_from_other_processes(tmp_path):
    from pipelines.testing.kafka_broker import LocalBroker

    ddir = tmp_path / "detached"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    up = (
        "import sys; from pipelines.testing.kafka_broker import LocalBroker;"
        f"b = LocalBroker(data_dir={str(ddir)!r}, fresh=True).start(detach=True); print(b.bootstrap)"
    )
    out = subprocess.run([sys.executable, "-c", up], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    bootstrap = out.stdout.strip().splitlines()[-1]
    try:
        st = LocalBroker.status(ddir)  # the starting process has exited; the broker must live on
        assert st["running"] and st["bootstrap"] == bootstrap and st["detached"] is True
        pid, port = st["pid"], st["port"]
        down = f"from pipelines.testing.kafka_broker import LocalBroker;print(LocalBroker.down({str(ddir)!r}))"
        out = subprocess.run([sys.executable, "-c", down], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "True"
        deadline = time.monotonic() + 10
        while not _pid_gone(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _pid_gone(pid)
        assert _port_free(port)
        assert LocalBroker.status(ddir)["running"] is False
    finally:
        LocalBroker.down(ddir)
