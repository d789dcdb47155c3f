"""One run at a time per warehouse: a lease file next to the run's checkpoints.

Two runs against one warehouse (a scheduler's retry overlapping a slow run) lose nothing, since Delta
refuses the second writer. The loser then failed on a raw ``DELTA_CONCURRENT_TRANSACTION`` halfway
through a batch. Now the second run stops before it starts, and the message names the warehouse, the
holder (host, pid, run) and since when. With ``--wait`` it waits for the holder to finish instead.

The lease is ``<checkpoints>/_lakecdc_run.lock``, created atomically (``O_EXCL``). It holds the JSON
``{"host", "pid", "run", "since", "token"}`` (``token``: new at every acquisition). The holder touches it every
:data:`BEAT_SECONDS` (its mtime is the heartbeat). A lease is free when no heartbeat came for
:data:`EXPIRY_SECONDS`, whatever its pid (pids are reused: after a container restart the holder's pid may be a
live process that is not it), and at once when its pid is dead on its own host.

A free lease is taken over in one atomic step: the taker creates, with ``O_EXCL``, a claim named after the
stale lease's token (``_lakecdc_run.lock.takeover.<token>``). Only one run can create that claim, so however
long a run pauses between judging a lease stale and acting on it, it never takes over a lease another run
took meanwhile: its claim fails, it reads the lease again and finds it held. The winner checks that the lease
is still the one it judged and replaces it (write aside, ``os.replace``).

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
import uuid
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
#: Tests only: seconds a run pauses between judging a lease stale and taking it over (forces the race).
PAUSE_ENV = "LAKECDC_LEASE_TAKEOVER_PAUSE"
#: Take-over claims older than this are swept (their leases were replaced long ago).
CLAIM_SWEEP_SECONDS = 24 * 3600.0


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
        """Who holds the lease (its JSON, with ``beat``: its last heartbeat, and ``ident``: which lease file
        this is), None when nobody does."""
        try:
            text, st = self.path.read_text(encoding="utf-8"), self.path.stat()
        except FileNotFoundError:
            return None
        try:
            held = json.loads(text)
        except ValueError:  # being written this instant, or torn: its age still tells
            held = {}
        held = held if isinstance(held, dict) else {}
        ident = held.get("token") if isinstance(held.get("token"), str) else f"{st.st_ino}-{st.st_ctime_ns}"
        return {**held, "beat": st.st_mtime, "ident": "".join(c for c in ident if c.isalnum() or c == "-")}

    def stale(self, held: dict[str, Any]) -> bool:
        """The holder is gone: no heartbeat for ``expiry`` seconds (whether or not its pid is alive: pids are
        reused), or a dead pid on this host."""
        if time.time() - held["beat"] > self.expiry:
            return True
        return held.get("host") == self.me["host"] and isinstance(held.get("pid"), int) and not _alive(held["pid"])

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
                pause = float(os.environ.get(PAUSE_ENV) or 0)
                if pause:  # tests only: say so beside the lease, then pause between the check and the act
                    self.path.with_name(f"{LEASE_NAME}.paused").touch()
                    time.sleep(pause)
                if self._take_over(held):
                    return None
                continue  # another run took it over: read it again
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self._record(), out)
            return None
        return self.holder() or {}

    def _record(self) -> dict[str, Any]:
        since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {**self.me, "since": since, "token": uuid.uuid4().hex}

    def _take_over(self, held: dict[str, Any]) -> bool:
        """Take over the stale lease ``held``: True when this run now holds the warehouse. Only the run whose
        ``O_EXCL`` claim on that lease's token succeeds may replace it (see the module docstring)."""
        claim = self.path.with_name(f"{LEASE_NAME}.takeover.{held['ident']}")
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        now = self.holder()
        if now is None or now["ident"] != held["ident"]:  # released, or replaced, since it was judged
            return False
        fresh = self.path.with_name(f"{LEASE_NAME}.new.{uuid.uuid4().hex}")
        fresh.write_text(json.dumps(self._record()), encoding="utf-8")
        os.replace(fresh, self.path)
        log.warning("lease of %s taken over from a run that is gone: %s", self.warehouse, _who(held))
        self._sweep()
        return True

    def _sweep(self) -> None:
        """Remove take-over claims a day old (their leases were replaced long since)."""
        for old in self.path.parent.glob(f"{LEASE_NAME}.takeover.*"):
            try:
                if time.time() - old.stat().st_mtime > CLAIM_SWEEP_SECONDS:
                    old.unlink()
            except FileNotFoundError:
                pass

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
            f"({self.expiry:.0f} s without a heartbeat, or its pid gone on the same host); the lease is {self.path}"
        )


def _who(held: dict[str, Any]) -> str:
    beat = held.get("beat")
    last = f", last heartbeat {time.time() - beat:.0f} s ago" if isinstance(beat, float) else ""
    return (
        f"host {held.get('host', '?')}, pid {held.get('pid', '?')}, run {held.get('run', '?')}, "
        f"since {held.get('since', '?')}{last}"
    )


def local_path(directory: str) -> str | None:
    """``directory`` as a path this process opens as a file (a ``file:`` URI's path), None when it has
    another URI scheme (``s3://``, ``abfss://``, ``dbfs:``)."""
    if directory.startswith("file:"):
        directory = directory.removeprefix("file:").removeprefix("//")
    return None if "://" in directory or directory.startswith("dbfs:") else directory


def lease_holder(directory: str) -> dict[str, Any] | None:
    """Who holds the warehouse whose checkpoints are ``directory`` (the lease's JSON), None when nobody does,
    its holder is gone, or the checkpoints are not local (no lease)."""
    path = local_path(directory)
    if path is None:
        return None
    lease = Lease(path, "", "")
    held = lease.holder()
    return None if held is None or lease.stale(held) else held


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
    path = local_path(directory)
    if path is None:
        log.warning("checkpoints at %s are not a local path: no lease keeps two runs apart", directory)
        yield
        return
    lease = Lease(path, warehouse, run, expiry)
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
