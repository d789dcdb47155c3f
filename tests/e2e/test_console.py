"""``lakecdc demo`` on a console: lakecdc's progress lines, its own warnings and the summary; no line of
Spark's, Delta's or Great Expectations' logging (issue 25). It runs in a process of its own, as a user
starts it, because the driver's log level is decided when its JVM starts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: A line of Spark's log4j layout (``26/11/26 10:00:11 WARN NativeCodeLoader: ...``) or of Spark's shell notes.
SPARK_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ |Setting default log level|sc\.setLogLevel")
#: A Python logging line of a library (the CLI's format: time, level, logger).
LIBRARY_LINE = re.compile(r"^\S+ \S+ [A-Z]+ (great_expectations|py4j|pyspark)[.:]")
#: The JVM itself prints this for the module Spark's launcher always adds; it is not a logger's line.
JVM_NOTE = "WARNING: Using incubator modules: jdk.incubator.vector"


def test_the_demo_prints_no_line_of_spark_or_great_expectations(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("LAKECDC_SPARK_LOG_LEVEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "demo", "--changes", "60", "--dir", str(tmp_path / "demo")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    assert "lakecdc demo summary" in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip() and line != JVM_NOTE]
    noise = [line for line in lines if SPARK_LINE.search(line) or LIBRARY_LINE.search(line)]
    assert noise == [], "\n".join(noise)
    assert any(line.startswith("[lakecdc] gold: done in") for line in lines), done.stderr
