"""Where and on what the benchmark ran: the machine, Spark, the git commit, and memory (RSS from /proc).

psutil is not a dependency of the project, so :class:`MemorySampler` reads ``/proc`` itself: the JVM is
the ``java`` process under this one whose command line runs ``SparkSubmit`` (the Kafka broker's
``java`` is left out), the Python workers are the ``python`` processes under that JVM.
"""

from __future__ import annotations

import os
import platform
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")


def git_info() -> dict:
    """The commit the tree is at, and whether the tree has changes on top of it (read-only git calls)."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": git("rev-parse", "HEAD") or None,
        "dirty": bool(status),
        "branch": git("branch", "--show-current"),
    }


def machine_info(spark=None) -> dict:
    """Cores, memory, load, OS, Python, and (with a session) Spark, Delta and the driver's settings."""
    info: dict = {
        "cores": os.cpu_count(),
        "memory_gib": round(_meminfo_kib("MemTotal") / 2**20, 1),
        "loadavg_1_5_15": list(os.getloadavg()),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    try:
        from importlib.metadata import version

        info["pyspark"] = version("pyspark")
        info["delta_spark"] = version("delta-spark")
    except Exception:  # noqa: BLE001 - informative only
        pass
    if spark is not None:
        conf = spark.sparkContext.getConf()
        info["spark"] = spark.version
        info["master"] = spark.sparkContext.master
        info["driver_memory"] = conf.get("spark.driver.memory", None)
        info["shuffle_partitions"] = spark.conf.get("spark.sql.shuffle.partitions")
    return info


def _meminfo_kib(field: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _children() -> dict[int, list[int]]:
    """ppid → child pids, for every process we can read."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _descendants(pid: int, tree: dict[int, list[int]]) -> list[int]:
    out, todo = [], list(tree.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(tree.get(p, []))
    return out


def _status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in bytes."""
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class MemorySampler:
    """Samples the RSS of the Spark driver JVM and of its Python workers every ``interval`` seconds.

    ``peak()`` gives the driver's peak RSS (the larger of the sampled maximum and the kernel's VmHWM
    high-water mark) and the peak of the Python workers' summed RSS (and of the largest one)."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[tuple[float, int, int, int]] = []  # (t, driver rss, workers rss sum, workers)
        self.driver_hwm = 0
        self.worker_max_single = 0
        self.section_marks: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self.driver_pid: int | None = None

    def start(self) -> MemorySampler:
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def mark(self, label: str) -> None:
        self.section_marks.append((round(time.monotonic() - self._t0, 1), label))

    def _find_driver(self, tree: dict[int, list[int]]) -> int | None:
        for pid in _descendants(os.getpid(), tree):
            if "org.apache.spark.deploy.SparkSubmit" in _cmdline(pid):
                return pid
        return None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        tree = _children()
        if self.driver_pid is None or not Path(f"/proc/{self.driver_pid}").exists():
            self.driver_pid = self._find_driver(tree)
        if self.driver_pid is None:
            return
        st = _status(self.driver_pid)
        self.driver_hwm = max(self.driver_hwm, st.get("VmHWM", 0))
        workers = [p for p in _descendants(self.driver_pid, tree) if "python" in _cmdline(p).split(" ")[0]]
        sizes = [_status(p).get("VmRSS", 0) for p in workers]
        self.worker_max_single = max([self.worker_max_single, *sizes])
        self.samples.append((round(time.monotonic() - self._t0, 2), st.get("VmRSS", 0), sum(sizes), len(workers)))

    def peak(self, since: float | None = None) -> dict:
        rows = [s for s in self.samples if since is None or s[0] >= since]
        driver = max([r[1] for r in rows], default=0)
        return {
            "driver_rss_bytes": max(driver, self.driver_hwm if since is None else 0),
            "workers_rss_sum_bytes": max([r[2] for r in rows], default=0),
            "workers_rss_max_single_bytes": self.worker_max_single if since is None else None,
            "max_workers": max([r[3] for r in rows], default=0),
            "samples": len(rows),
        }

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def timeline(self, points: int = 400) -> list[list[float]]:
        """Downsampled (t, driver GiB, workers GiB) for the chart."""
        step = max(1, len(self.samples) // points)
        return [[t, round(d / 2**30, 3), round(w / 2**30, 3)] for t, d, w, _n in self.samples[::step]]
