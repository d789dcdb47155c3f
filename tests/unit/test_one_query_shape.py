"""``queries: one`` without Spark (pipelines.one_query, pipelines.gold.stream.StateBases): the key is validated,
a warehouse keeps the shape it was first run with, day two refuses while the one query has an interrupted batch,
and two writers of gold's state number their batches apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.config import STAGES, ConfigError, parse_config
from pipelines.gold.stream import StateBases
from pipelines.one_query import is_one_query, one_query_checkpoint, require_finished, uses_one_query
from pipelines.warehouse import Warehouse

SOURCE = {"name": "s", "format": "oms_canal", "path": "/tmp/landing"}


def _config(tmp_path: Path, **keys):
    return parse_config({"warehouse": str(tmp_path / "wh"), "sources": [SOURCE], **keys})


def _log(root: Path, name: str, *batches: int) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    for b in batches:
        (root / name / str(b)).write_text("v1")


def test_queries_is_per_stage_unless_asked_and_anything_else_is_refused(tmp_path):
    assert _config(tmp_path).queries == "per_stage"
    assert _config(tmp_path, queries="one").queries == "one"
    with pytest.raises(ConfigError, match="queries: must be per_stage or one"):
        _config(tmp_path, queries="single")


def test_a_warehouse_keeps_the_shape_it_was_first_run_with(tmp_path):
    one, per = _config(tmp_path, queries="one"), _config(tmp_path)
    wh = Warehouse.from_config(one)
    assert uses_one_query(wh, one, STAGES) and not uses_one_query(wh, per, STAGES)  # a new warehouse: as asked
    assert not uses_one_query(wh, one, ("gold",))  # a stage of its own: a day-two command's gold
    assert not is_one_query(wh)
    Path(one_query_checkpoint(wh)).mkdir(parents=True)
    assert is_one_query(wh)  # the warehouse's shape, whatever its config says: day two's gold follows it
    with pytest.raises(ConfigError, match="is run as one query"):
        uses_one_query(wh, one, ("silver",))
    with pytest.raises(ConfigError, match="queries: per_stage, but this warehouse is run as one query"):
        uses_one_query(wh, per, STAGES)

    other = Warehouse.from_config(_config(tmp_path / "other", queries="one"))
    _log(Path(other.checkpoint("bronze", "s")), "offsets", 0)
    with pytest.raises(ConfigError, match="stages run as queries of their own"):
        uses_one_query(other, _config(tmp_path / "other", queries="one"), STAGES)


def test_day_two_waits_for_an_interrupted_batch_of_the_one_query(tmp_path):
    wh = Warehouse.from_config(_config(tmp_path, queries="one"))
    require_finished(wh, "quarantine replay")  # never run as one query: nothing to wait for
    checkpoint = Path(one_query_checkpoint(wh))
    _log(checkpoint, "offsets", 0, 1)
    _log(checkpoint, "commits", 0)
    with pytest.raises(ConfigError, match="batch 1 was interrupted.*then quarantine replay"):
        require_finished(wh, "quarantine replay")
    _log(checkpoint, "commits", 1)
    require_finished(wh, "quarantine replay")


def test_two_writers_of_gold_state_number_their_batches_apart(tmp_path):
    bases = StateBases.of(str(tmp_path / "cp"))
    assert bases.entries() == [] and bases.base_for(7) == 0  # a stream of its own: its batch ids
    bases.start_above(0, -1)  # the first call records its base, nothing to be above
    assert bases.entries() == [(0, 0)]
    bases.start_above(5, 3)  # batch 5 is already above state batch 3: nothing changes
    assert bases.entries() == [(0, 0)]
    bases.start_above(5, 9)  # another stream wrote state batches up to 9: from batch 5 on, above them
    assert [bases.base_for(b) + b for b in (4, 5, 6)] == [4, 10, 11]
    assert StateBases.of(str(tmp_path / "cp")).entries() == [(0, 0), (5, 5)]  # kept in the checkpoint
    bases.start_above(5, 12)  # again, before batch 5 ran: its entry is replaced, the earlier ones kept
    assert bases.entries() == [(0, 0), (5, 8)] and bases.base_for(5) + 5 == 13
