"""Work another command asks of the continuous run that holds the warehouse: a one-table rebuild.

The lease (:mod:`pipelines.lock`) keeps two runs off one warehouse, so ``lakecdc rebuild --table T`` cannot
take it while a continuous pipeline runs. It asks that run instead, through files beside the lease in
``<checkpoints>/_lakecdc_requests/``:

* the serving run writes ``serving.json`` (its host and pid) while it serves, and removes it when it stops;
* a requester writes ``<id>.json`` (the table, when asked) and waits for ``<id>.answer.json``;
* between gold's batches (under the gold stream's lock, so no batch runs meanwhile) the serving run does the
  work (:func:`pipelines.quarantine.rebuild_mirror`) and writes the answer; the requester reads it and removes
  both files.

The work is safe to repeat: a run that dies mid-request leaves it unanswered, and the next one serving (or the
requester itself, once the lease is free) does it again from the start. Each file is written to a temporary
name and renamed, so no reader sees half of one. Local checkpoints only, as for the lease.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from pipelines.lock import local_path

REQUESTS_DIR = "_lakecdc_requests"
SERVING_NAME = "serving.json"
#: Requests older than this with nobody waiting for their answer are swept.
SWEEP_SECONDS = 24 * 3600.0


def _write(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


class RequestBox:
    """The requests of one warehouse's checkpoints (``None`` from :meth:`of` when they are not local)."""

    def __init__(self, directory: str) -> None:
        self.dir = Path(directory) / REQUESTS_DIR
        self.me = {"host": socket.gethostname(), "pid": os.getpid()}

    @classmethod
    def of(cls, checkpoint_root: str) -> RequestBox | None:
        directory = local_path(checkpoint_root)
        return None if directory is None else cls(directory)

    # the serving run

    def open(self) -> None:
        """Say this process serves requests (until :meth:`close`)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        _write(self.dir / SERVING_NAME, self.me)

    def close(self) -> None:
        if _read(self.dir / SERVING_NAME) == self.me:
            (self.dir / SERVING_NAME).unlink(missing_ok=True)

    def waiting(self) -> list[dict[str, Any]]:
        """The requests nobody answered yet, oldest first; answered ones a day old are swept."""
        if not self.dir.is_dir():
            return []
        found = []
        for path in sorted(self.dir.glob("*.json")):
            if path.name == SERVING_NAME or path.name.endswith(".answer.json"):
                continue
            doc = _read(path)
            if doc is None or not isinstance(doc.get("id"), str):
                continue
            if self._answer_path(doc).exists():
                if time.time() - path.stat().st_mtime > SWEEP_SECONDS:
                    self.withdraw(doc)
                continue
            found.append(doc)
        return sorted(found, key=lambda d: d.get("asked", 0))

    def answer(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        _write(self._answer_path(request), {**result, "id": request["id"], "answered": time.time()})

    # the requester

    def serves(self, holder: dict[str, Any]) -> bool:
        """Whether the lease's ``holder`` is a run that serves requests now."""
        serving = _read(self.dir / SERVING_NAME)
        return serving is not None and all(serving.get(k) == holder.get(k) for k in ("host", "pid"))

    def ask(self, kind: str, **what: Any) -> dict[str, Any]:
        self.dir.mkdir(parents=True, exist_ok=True)
        request = {"id": f"{kind}-{uuid.uuid4().hex[:12]}", "kind": kind, "asked": time.time(), **self.me, **what}
        _write(self.dir / f"{request['id']}.json", request)
        return request

    def answer_of(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return _read(self._answer_path(request))

    def withdraw(self, request: dict[str, Any]) -> None:
        """Remove a request and its answer (read, or no longer wanted)."""
        (self.dir / f"{request['id']}.json").unlink(missing_ok=True)
        self._answer_path(request).unlink(missing_ok=True)

    def _answer_path(self, request: dict[str, Any]) -> Path:
        return self.dir / f"{request['id']}.answer.json"
