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


def json_lines(path: Path) -> list[bytes]:
    """Every line of a resource that opens a JSON object: the licence comment Paimon's files start with is
    left out, and a line that opens an object but does not parse stays in (the decoder must reject it)."""
    return [line for line in path.read_bytes().splitlines() if line.strip().startswith(b"{")]


def product_rows(*rows: tuple) -> list[dict]:
    """Rows of Paimon's ``product`` test table (id, name, description, weight, then age and address as the
    schema evolves)."""
    names = ("id", "name", "description", "weight", "age", "address")
    return [dict(zip(names, r)) for r in rows]


#: The rows after each of Paimon's three ``table/schemaevolution`` files
#: (KafkaSyncTableActionITCase.runSingleTableSchemaEvolution), the same for every format it tests.
PAIMON_SCHEMA_EVOLUTION_ROWS = [
    product_rows((101, "scooter", "Small 2-wheel scooter", "3.14"), (102, "car battery", "12V car battery", "8.1")),
    product_rows(
        (101, "scooter", "Small 2-wheel scooter", "3.14", None),
        (102, "car battery", "12V car battery", "8.1", None),
        (103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", "0.8", "18"),
        (104, "hammer", "12oz carpenter's hammer", "0.75", "24"),
    ),
    product_rows(
        (102, "car battery", "12V car battery", "8.1", None, None),
        (103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", "0.8", "18", None),
        (104, "hammer", "12oz carpenter's hammer", "0.75", "24", None),
        (105, "hammer", "14oz carpenter's hammer", "0.875", None, "Beijing"),
        (107, "rocks", "box of assorted rocks", "5.3", None, None),
    ),
]
