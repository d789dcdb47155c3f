"""``lakecdc why``'s reading of gold's decisions from key state, pending changes and quarantine (no Spark)."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.why import KeyStateRow, decide, parse_key

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def change(seq: str, ingest: int, position: str = "p", queue_pos: str = "q") -> dict:
    return {"seq": seq, "queue_pos": queue_pos, "bronze_position": position, "ingest_time": at(ingest)}


def row(batch: int, seq: str, written: int, queue_pos: str = "q") -> KeyStateRow:
    return KeyStateRow(batch, seq, queue_pos, True, at(written))


def test_parse_key_pairs_and_commas():
    assert parse_key(["id=1"]) == {"id": "1"}
    assert parse_key(["a=1,b=x"]) == {"a": "1", "b": "x"}
    assert parse_key(["a=1", "b=x,y"]) == {"a": "1", "b": "x,y"}  # a piece without = belongs to the value
    with pytest.raises(ValueError):
        parse_key(["nokey"])


def test_the_batch_last_change_and_a_folded_one():
    keys = [row(0, "200", written=10)]
    assert decide(change("200", 1), keys, {}, {}, [], None) == {"status": "applied", "batch": 0, "last": True}
    folded = decide(change("100", 1), keys, {}, {}, [], None)
    assert folded == {"status": "applied", "batch": 0, "last": False, "batch_seq": "200"}


def test_a_late_change_is_stale_against_what_the_key_held():
    keys = [row(0, "200", written=10)]
    # arrived after batch 0, older than its sequence; no later batch wrote the key (a stale change writes none)
    assert decide(change("150", 20), keys, {}, {}, [], None) == {"status": "stale", "against_seq": "200"}
    # a later batch did write the key: the state before it is what the late change met
    keys = [row(0, "200", written=10), row(1, "300", written=30)]
    assert decide(change("150", 20), keys, {}, {}, [], None) == {"status": "stale", "against_seq": "200"}
    # an equal sequence re-applies (gold's rule: strictly older is stale)
    assert decide(change("200", 20, queue_pos="a"), keys, {}, {}, [], None)["status"] == "applied"


def test_quarantined_waiting_and_undecided():
    held = {"p": {"stage": "gold", "reason": "value x of column age does not fit INT", "rule": None, "bad_value": None}}
    got = decide(change("250", 1), [], held, {}, [], None)
    assert got["status"] == "quarantined" and "does not fit" in got["reason"]
    pending = {("p", "400"): 3}
    assert decide(change("400", 1), [], {}, pending, [], None) == {"status": "waiting", "since_batch": 3}
    assert decide(change("400", 1), [], {}, pending, [2, 5], None)["batch"] == 5  # applied by batch 5's merge
    assert decide(change("500", 1), [], {}, {}, [], None)["status"] == "undecided"
    assert decide(change("500", 1), [], {}, {}, [], at(5))["status"] == "compacted"


def test_a_late_image_under_a_soft_delete_is_applied_to_the_marked_row():
    """Gold (``deletes: soft``) applies an image older than the key's DELETE but newer than the values the
    deleted row holds (key state's ``img_seq``); why says so, and one older than those values is stale."""
    tomb = KeyStateRow(0, "700", "q", False, at(10), img_seq="300")
    buried = KeyStateRow(1, "700", "q", False, at(30), img_seq="500")
    got = decide(change("500", 20), [tomb, buried], {}, {}, [], None)
    assert got == {"status": "applied", "batch": 1, "under_delete_seq": "700"}
    assert decide(change("100", 20), [tomb, buried], {}, {}, [], None) == {"status": "stale", "against_seq": "700"}
    old = KeyStateRow(0, "700", "q", False, at(10))  # a tombstone an earlier version wrote: no img_seq, stale
    assert decide(change("500", 20), [old, buried], {}, {}, [], None)["status"] == "stale"


def test_a_sharded_mirror_without_its_configuration_is_refused_naming_conf():
    """Silver names a shard's changes by the shard (``inventory.stock_0``), not the mirror: without ``--conf``
    (whose ``from`` routes them) why would find none, so it says what to give instead of reporting 0 changes."""
    from pipelines.why import KeyTarget, table_changes

    target = KeyTarget("inventory.stock", None, "inventory__stock", ("sku",), {"sku": "S-1"},
                       {"sku": "varchar(16)", "_source_table": None}, '["inventory", null, "stock"]', '["S-1"]')  # fmt: skip
    with pytest.raises(ValueError, match="fed by shards .* give --conf"):
        table_changes(None, None, None, target)
