"""The files a one-table rebuild asks a running pipeline through (pipelines/run_requests.py), and how the serving
run reads gold's stream offsets (pipelines/serving.py)."""

from __future__ import annotations

import json
import os

from pipelines.lock import LEASE_NAME, lease_holder, warehouse_lease
from pipelines.run_requests import REQUESTS_DIR, SERVING_NAME, RequestBox
from pipelines.serving import has_read, read_through


class _Query:
    def __init__(self, progress):
        self.lastProgress = progress


def test_a_request_is_seen_until_answered_and_gone_once_withdrawn(tmp_path):
    serving, asking = RequestBox(str(tmp_path)), RequestBox(str(tmp_path))
    assert serving.waiting() == []
    first = asking.ask("rebuild", table="db.a")
    second = asking.ask("rebuild", table="db.b")
    assert [r["table"] for r in serving.waiting()] == ["db.a", "db.b"], "oldest first"
    serving.answer(first, {"ok": True, "applied": False})
    assert [r["table"] for r in serving.waiting()] == ["db.b"], "an answered request is not served again"
    assert asking.answer_of(first)["applied"] is False and asking.answer_of(second) is None
    serving.answer(first, {"ok": True, "applied": True})
    assert asking.answer_of(first)["applied"] is True, "a later answer replaces the earlier one"
    asking.withdraw(first)
    assert asking.answer_of(first) is None
    assert sorted(p.name for p in (tmp_path / REQUESTS_DIR).iterdir()) == [f"{second['id']}.json"]


def test_only_the_lease_holder_that_serves_is_asked(tmp_path):
    box = RequestBox(str(tmp_path))
    with warehouse_lease(str(tmp_path), "wh", "run-1"):
        holder = lease_holder(str(tmp_path))
        assert holder is not None and holder["pid"] == os.getpid()
        assert not box.serves(holder), "a holder that never said it serves (a --once run) is not asked"
        box.open()
        assert box.serves(holder)
        assert not box.serves({**holder, "pid": holder["pid"] + 1}), "another process"
        box.close()
        assert not box.serves(holder) and not (tmp_path / REQUESTS_DIR / SERVING_NAME).exists()
    assert lease_holder(str(tmp_path)) is None and not (tmp_path / LEASE_NAME).exists()
    assert lease_holder("s3://bucket/checkpoints") is None and RequestBox.of("s3://bucket/checkpoints") is None
    assert RequestBox.of(f"file://{tmp_path}").dir == tmp_path / REQUESTS_DIR


def test_a_torn_or_foreign_file_is_not_a_request(tmp_path):
    box = RequestBox(str(tmp_path))
    box.dir.mkdir()
    (box.dir / "junk.json").write_text("{not json", encoding="utf-8")
    (box.dir / "list.json").write_text("[1, 2]", encoding="utf-8")
    (box.dir / "noid.json").write_text(json.dumps({"table": "t"}), encoding="utf-8")
    assert box.waiting() == []


def test_the_gold_querys_offset_says_when_a_silver_version_was_read():
    offset = {"sourceVersion": 1, "reservoirId": "x", "reservoirVersion": 7, "index": 2, "isStartingVersion": False}
    for end in (offset, json.dumps(offset), str(offset)):  # PySpark gives a dict, JSON or a dict's repr
        assert read_through(_Query({"sources": [{"endOffset": end}]})) == (7, 2)
    assert read_through(None) is None and read_through(_Query(None)) is None
    assert read_through(_Query({"sources": []})) is None
    assert has_read((8, -1), 7, 3), "past the version"
    assert has_read((7, 2), 7, 3), "its last file"
    assert not has_read((7, 1), 7, 3) and not has_read((7, -1), 7, 1) and not has_read(None, 7, 1)
