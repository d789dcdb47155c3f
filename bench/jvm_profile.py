"""Where a block's CPU goes, by function: the Spark JVM's samples (Java Flight Recorder, started and stopped with
``jcmd`` on the session's own JVM) and the driver's Python (``cProfile``). What ``bench.gold_profile --functions``
prints beside the operators' metrics (issue 39 asks for a profile of the 100,000-change batch by operator and by
function). A figure for people: local mode only (the JVM must be this machine's process).
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Frames every sample of a task shares (the thread, the task, the iterator plumbing): no inclusive figure for them.
PLUMBING = (
    "java.", "jdk.", "scala.", "sun.", "org.apache.spark.executor.", "org.apache.spark.scheduler.",
    "org.apache.spark.rdd.", "org.apache.spark.util.", "org.apache.spark.storage.memory.",
    "org.apache.spark.sql.execution.SQLExecution", "org.apache.spark.sql.execution.WholeStageCodegen",
    "org.apache.spark.InterruptibleIterator", "org.apache.spark.TaskContext",
)  # fmt: skip


def jvm_pid(spark) -> int:
    """The pid of the session's JVM (local mode: driver and executors in one process)."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


@contextmanager
def jvm_samples(spark, out: Path) -> Iterator[dict]:
    """Record the JVM's CPU samples during the block (JFR's ``default`` settings: a sample of each running Java
    thread every 20 ms, about 1 % overhead) into ``out`` (``.jfr``); after it, the yielded dict holds the samples'
    counters (:func:`sample_counts`). Empty where ``jcmd``/``jfr`` are missing."""
    found: dict = {}
    jcmd, jfr = shutil.which("jcmd"), shutil.which("jfr")
    if not (jcmd and jfr):
        yield found
        return
    pid = str(jvm_pid(spark))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    name = "lakecdc-bench"
    subprocess.run([jcmd, pid, "JFR.start", f"name={name}", "settings=default"], check=True, capture_output=True)
    try:
        yield found
    finally:
        subprocess.run([jcmd, pid, "JFR.stop", f"name={name}", f"filename={out}"], check=True, capture_output=True)
    printed = subprocess.run(
        [jfr, "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample", str(out)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found.update(sample_counts(json.loads(printed)))


def sample_counts(printed: dict) -> dict[str, Counter]:
    """``jfr print --json`` of execution samples → ``self`` (the top method of each sample) and ``inclusive``
    (every method on its stack once, :data:`PLUMBING` aside) counters, as ``Class.method``, and ``total``."""
    self_time, inclusive = Counter(), Counter()
    events = printed.get("recording", {}).get("events", [])
    for event in events:
        frames = [_method(f) for f in (event.get("values", {}).get("stackTrace") or {}).get("frames", [])]
        if not frames:
            continue
        self_time[frames[0]] += 1
        inclusive.update({f for f in frames if not f.startswith(PLUMBING)})
    return {"self": self_time, "inclusive": inclusive, "total": Counter(all=len(events))}


def _method(frame: dict) -> str:
    """``Class.method`` of a JFR frame, a lambda's generated class name cut at ``$$Lambda``."""
    method = frame.get("method", {})
    cls = (method.get("type") or {}).get("name", "?").replace("/", ".").split("$$Lambda")[0]
    return f"{cls}.{method.get('name', '?')}"


#: JFR's ``default`` settings sample each running Java thread every 20 ms: a sample stands for 20 ms of CPU.
SAMPLE_MS = 20.0


def print_samples(found: dict, top: int = 40, per_k: float | None = None) -> None:
    """The samples' top methods, both ways; with ``per_k`` (1,000 / changes) each also as CPU milliseconds per
    1,000 changes (:data:`SAMPLE_MS` a sample)."""
    total = found.get("total", Counter()).get("all", 0)
    if not total:
        print("  (no JVM samples: jcmd/jfr missing, or nothing ran)")
        return
    for title, key in (("by method, inclusive (on the stack)", "inclusive"), ("by the top frame (self)", "self")):
        print(f"\n  JVM CPU samples {title} ({total} samples):")
        for name, n in found[key].most_common(top):
            share = n / total
            cpu = f" {n * SAMPLE_MS * per_k:8.1f} CPU ms/1k" if per_k else ""
            print(f"    {share * 100:5.1f} %{cpu}  {name[:150]}")


@contextmanager
def python_profile(module, name: str) -> Iterator[cProfile.Profile]:
    """The driver's Python functions in each call of ``module.name`` during the block (``cProfile``): a
    ``foreachBatch`` function runs in py4j's callback thread, which a profile of this thread would not see."""
    profile, wrapped = cProfile.Profile(), getattr(module, name)

    def profiled(*args, **kwargs):
        return profile.runcall(wrapped, *args, **kwargs)

    setattr(module, name, profiled)
    try:
        yield profile
    finally:
        setattr(module, name, wrapped)


def print_python(profile: cProfile.Profile, top: int = 25) -> None:
    """The driver's Python functions by cumulative and by own time."""
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).strip_dirs().sort_stats(order).print_stats(top)
        lines = [ln for ln in text.getvalue().splitlines() if ln.strip()]
        start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
        print(f"\n  driver Python by {order} time (cProfile):")
        for line in lines[start : start + top + 1]:
            print(f"    {line[:160]}")
