"""Helpers shared by the tests that read other projects' real messages (tests/fixtures/real)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pipelines.formats.base import Change
from pipelines.testing.model import MirrorModel

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def records(path: Path) -> list[bytes]:
    """The message lines of a resource file, as Paimon's KafkaActionITCaseBase.isRecordLine keeps them:
    every line that is a JSON object (Paimon's files start with the Apache licence header)."""
    out = []
    for line in path.read_bytes().splitlines():
        try:
            if line.strip() and isinstance(json.loads(line), dict):
                out.append(line)
        except ValueError:
            continue
    return out


def mirror(changes: Iterable[Change]) -> dict[str, list[dict]]:
    """The reference model's mirror of every table the changes touch."""
    model = MirrorModel().add_all(changes)
    return {t: model.rows(t) for t in model.tables()}


def full_rows(rows: Iterable[dict], key: str) -> list[dict]:
    """Rows with every column any of them has (NULL where a row never carried it: the mirror's schema
    evolution, as Paimon shows it), sorted by the integer ``key``."""
    rows = list(rows)
    columns = {c for r in rows for c in r}
    return sorted(({c: r.get(c) for c in columns} for r in rows), key=lambda r: int(r[key]))
