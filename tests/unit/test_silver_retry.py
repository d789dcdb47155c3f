"""Which silver batch looks for its commit markers (pipelines.delta_writes.may_be_retried): only the one a restart
runs again."""

from __future__ import annotations

from pathlib import Path

from pipelines.delta_writes import may_be_retried


def _log(root, name: str, *batches: int) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    for b in batches:
        (root / name / str(b)).write_text("v1")
        (root / name / f".{b}.crc").write_text("")


def test_only_the_batch_begun_and_not_committed_is_checked(tmp_path):
    assert not any(may_be_retried(str(tmp_path))(b) for b in range(3))  # a new stream: nothing written before
    _log(tmp_path, "offsets", 0, 1, 2)
    _log(tmp_path, "commits", 0, 1)
    retried = may_be_retried(str(tmp_path))
    assert [retried(b) for b in range(4)] == [False, False, True, False]
    _log(tmp_path, "commits", 2)  # every batch finished: the next one is new
    assert not any(may_be_retried(str(tmp_path))(b) for b in range(4))


def test_a_checkpoint_that_cannot_be_listed_checks_the_first_batch(tmp_path, monkeypatch):
    _log(tmp_path, "offsets", 0)

    def unreadable(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", unreadable)
    retried = may_be_retried(str(tmp_path))
    assert [retried(b) for b in (5, 6, 7)] == [True, False, False]
