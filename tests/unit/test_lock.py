"""Two runs on one warehouse (issue 35): the second stops at once naming the holder, or waits with
``--wait``; a holder that died frees the warehouse. Real processes, no timing: each process says what
it did on its stdout, and the test reads those lines in order."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipelines.lock import LEASE_NAME, PAUSE_ENV, Lease, WarehouseBusy, warehouse_lease

ROOT = Path(__file__).resolve().parents[2]

#: A process that takes the lease, says so, and holds it until its stdin closes (or it is killed).
HOLDER = textwrap.dedent(
    """
    import sys
    from pipelines.lock import warehouse_lease
    with warehouse_lease(sys.argv[1], "wh", "holder-run", wait=sys.argv[2] == "wait", poll=0.05,
                         progress=lambda m: print("waiting", flush=True)):
        print("held", flush=True)
        sys.stdin.read()
    print("released", flush=True)
    """
)


def _start(directory: Path, wait: bool = False, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), "wait" if wait else "no"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _stale_lease(directory: Path, host: str, pid: int) -> Path:
    """A lease file whose holder stopped heartbeating two hours ago."""
    lease_file = directory / LEASE_NAME
    lease_file.write_text(json.dumps({"host": host, "pid": pid, "run": "gone", "since": "2026-01-01T00:00:00Z",
                                      "token": "old"}))  # fmt: skip
    old = time.time() - 7200
    os.utime(lease_file, (old, old))
    return lease_file


def _conf(tmp_path: Path) -> Path:
    conf = tmp_path / "p.yaml"
    landing = tmp_path / "landing"
    landing.mkdir()
    conf.write_text(
        json.dumps(
            {"warehouse": str(tmp_path / "wh"), "sources": [{"name": "s1", "format": "canal", "path": str(landing)}]}
        )
    )
    return conf


def test_a_second_run_stops_at_once_naming_the_warehouse_the_holder_and_since_when(tmp_path):
    conf = _conf(tmp_path)
    holder = _start(tmp_path / "wh" / "_checkpoints")
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", "run", "--conf", str(conf), "--once"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert second.returncode == 2, second.stderr
        message = second.stderr
        assert f"warehouse {tmp_path / 'wh'} is held by another run" in message
        assert f"host {socket.gethostname()}, pid {holder.pid}, run holder-run, since 20" in message
        assert "--wait" in message
    finally:
        holder.communicate("")
    assert not (tmp_path / "wh" / "_checkpoints" / LEASE_NAME).exists()


def test_a_waiting_run_starts_when_the_holder_finishes(tmp_path):
    first = _start(tmp_path)
    assert first.stdout.readline().strip() == "held"
    second = _start(tmp_path, wait=True)
    assert second.stdout.readline().strip() == "waiting"
    first.communicate("")
    lines = second.communicate("")[0].split()
    assert "held" in lines and lines[-1] == "released"
    assert first.returncode == 0 and second.returncode == 0


def test_a_holder_that_died_does_not_block(tmp_path):
    first = _start(tmp_path)
    assert first.stdout.readline().strip() == "held"
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert (tmp_path / LEASE_NAME).exists()  # it had no chance to release
    second = _start(tmp_path)
    out, err = second.communicate("")
    assert out.split() == ["held", "released"], err


def test_a_lease_of_another_host_expires_without_a_heartbeat(tmp_path):
    lease_file = tmp_path / LEASE_NAME
    lease_file.write_text(json.dumps({"host": "elsewhere", "pid": 1, "run": "r", "since": "2026-01-01T00:00:00Z"}))
    with pytest.raises(WarehouseBusy, match="host elsewhere, pid 1, run r, since 2026-01-01T00:00:00Z"):
        with warehouse_lease(str(tmp_path), "wh", "me", expiry=60):
            pass
    old = time.time() - 120
    os.utime(lease_file, (old, old))
    with warehouse_lease(str(tmp_path), "wh", "me", expiry=60):
        assert Lease(tmp_path, "wh", "me").mine()
    assert not lease_file.exists()


def test_checkpoints_that_are_no_local_path_take_no_lease(tmp_path):
    with warehouse_lease("s3://bucket/ck", "wh", "me"):
        pass


def test_a_take_over_has_one_winner_however_long_a_run_pauses_between_check_and_act(tmp_path):
    """B judges the stale lease free and pauses; A takes the lease over meanwhile; B must then find it held
    (before issue 40, B renamed A's fresh lease away and both held the warehouse)."""
    _stale_lease(tmp_path, "elsewhere", 1)
    paused = tmp_path / f"{LEASE_NAME}.paused"
    b = _start(tmp_path, env={PAUSE_ENV: "3"})
    deadline = time.monotonic() + 120
    while not paused.exists() and b.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert paused.exists(), b.communicate("")[1]
    with warehouse_lease(str(tmp_path), "wh", "run-a", expiry=60):  # A, while B pauses
        out, err = b.communicate("")
        assert Lease(tmp_path, "wh", "run-a").mine()
    assert "held" not in out.split() and b.returncode != 0, (out, err)
    assert "is held by another run" in err and "run run-a" in err


def test_a_lease_without_a_heartbeat_is_free_even_when_its_pid_is_alive_again(tmp_path):
    """pids are reused (a container restart): this test's own live pid on this host, no heartbeat for two hours."""
    _stale_lease(tmp_path, socket.gethostname(), os.getpid())
    out, err = _start(tmp_path).communicate("")
    assert out.split() == ["held", "released"], err
