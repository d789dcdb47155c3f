"""One run at a time per warehouse: a lease file next to the run's checkpoints.

Two runs against one warehouse (a scheduler's retry overlapping a slow run) lose nothing, since Delta
refuses the second writer. The loser then failed on a raw ``DELTA_CONCURRENT_TRANSACTION`` halfway
through a batch. Now the second run stops before it starts, and the message names the warehouse, the
holder (host, pid, run) and since when. With ``--wait`` it waits for the holder to finish instead.

The lease is ``<checkpoints>/_lakecdc_run.lock``, created atomically (``O_EXCL``). It holds the JSON
``{"host", "pid", "run", "since"}``. The holder touches it every :data:`BEAT_SECONDS` (its mtime is the
heartbeat), so a holder that died does not block for ever. On the holder's host its pid is checked,
and a dead pid frees the lease at once. From another host, a lease whose heartbeat is older than
:data:`EXPIRY_SECONDS` is free. A free lease is taken over by renaming it away, and only one taker's
rename succeeds.

Checkpoints on a path this process cannot open as a file (``s3://``, ``abfss://``) have no lease.
The scheduler must keep such runs apart, and :func:`warehouse_lease` logs that it does not.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

LEASE_NAME = "_lakecdc_run.lock"
#: How often the holder renews its lease (touches the file).
BEAT_SECONDS = 10.0
#: A lease not renewed for this long is free (its holder is gone).
EXPIRY_SECONDS = 60.0
#: How often a waiting run looks again.
POLL_SECONDS = 2.0


class WarehouseBusy(RuntimeError):
    """Another run holds the warehouse."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class Lease:
    """The lease file of one warehouse. :meth:`acquire` takes it or says who holds it."""

    def __init__(self, directory: str | Path, warehouse: str, run: str, expiry: float = EXPIRY_SECONDS) -> None:
        self.path = Path(directory) / LEASE_NAME
        self.warehouse, self.run, self.expiry = warehouse, run, expiry
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "run": run}

    def holder(self) -> dict[str, Any] | None:
        """Who holds the lease (its JSON, with ``beat``: its last heartbeat), None when nobody does."""
        try:
            text, beat = self.path.read_text(encoding="utf-8"), self.path.stat().st_mtime
        except FileNotFoundError:
            return None
        try:
            held = json.loads(text)
        except ValueError:  # being written this instant, or torn: its age still tells
            held = {}
        return {**(held if isinstance(held, dict) else {}), "beat": beat}

    def stale(self, held: dict[str, Any]) -> bool:
        """The holder is gone: a dead pid on this host, or no heartbeat for ``expiry`` seconds."""
        if held.get("host") == self.me["host"] and isinstance(held.get("pid"), int):
            return not _alive(held["pid"])
        return time.time() - held["beat"] > self.expiry

    def try_acquire(self) -> dict[str, Any] | None:
        """Take the lease; None when taken, else the holder that keeps it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                held = self.holder()
                if held is None:
                    continue  # released this instant: try again
                if not self.stale(held):
                    return held
                self._break(held)
                continue
            since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump({**self.me, "since": since}, out)
            return None
        return self.holder() or {}

    def _break(self, held: dict[str, Any]) -> None:
        """Move a stale lease away (one taker's rename wins; the others find the file gone)."""
        aside = self.path.with_name(f"{LEASE_NAME}.stale.{os.getpid()}")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        log.warning("lease of %s taken over from a run that is gone: %s", self.warehouse, _who(held))
        aside.unlink(missing_ok=True)

    def mine(self) -> bool:
        held = self.holder()
        return held is not None and all(held.get(k) == v for k, v in self.me.items())

    def renew(self) -> None:
        if self.mine():
            os.utime(self.path)
        else:
            log.error("the lease of %s was taken by another run (%s)", self.warehouse, _who(self.holder() or {}))

    def release(self) -> None:
        if self.mine():
            self.path.unlink(missing_ok=True)

    def busy(self, held: dict[str, Any]) -> WarehouseBusy:
        return WarehouseBusy(
            f"warehouse {self.warehouse} is held by another run: {_who(held)}. Nothing was done; run again when "
            f"it has finished, or pass --wait to wait for it. A holder that died frees the warehouse by itself "
            f"(its pid on the same host, or {self.expiry:.0f} s without a heartbeat); the lease is {self.path}"
        )


def _who(held: dict[str, Any]) -> str:
    beat = held.get("beat")
    last = f", last heartbeat {time.time() - beat:.0f} s ago" if isinstance(beat, float) else ""
    return (
        f"host {held.get('host', '?')}, pid {held.get('pid', '?')}, run {held.get('run', '?')}, "
        f"since {held.get('since', '?')}{last}"
    )


def _local(directory: str) -> bool:
    """A path this process opens as a file (no URI scheme other than ``file:``)."""
    return "://" not in directory and not directory.startswith("dbfs:")


@contextmanager
def warehouse_lease(
    directory: str,
    warehouse: str,
    run: str,
    wait: bool = False,
    progress: Callable[[str], None] = lambda msg: None,
    beat: float = BEAT_SECONDS,
    expiry: float = EXPIRY_SECONDS,
    poll: float = POLL_SECONDS,
) -> Iterator[None]:
    """Hold the warehouse for the block: raise :class:`WarehouseBusy` when another run holds it, or
    (``wait``) wait until it is free. The lease is renewed every ``beat`` seconds and released at the end."""
    if directory.startswith("file:"):
        directory = directory.removeprefix("file:").removeprefix("//")
    if not _local(directory):
        log.warning("checkpoints at %s are not a local path: no lease keeps two runs apart", directory)
        yield
        return
    lease = Lease(directory, warehouse, run, expiry)
    held = lease.try_acquire()
    if held is not None and not wait:
        raise lease.busy(held)
    while held is not None:
        progress(f"waiting for warehouse {warehouse}: {_who(held)}")
        time.sleep(poll)
        held = lease.try_acquire()
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(beat):
            lease.renew()

    beater = threading.Thread(target=renew, name="lakecdc-lease", daemon=True)
    beater.start()
    try:
        yield
    finally:
        stop.set()
        beater.join()
        lease.release()
