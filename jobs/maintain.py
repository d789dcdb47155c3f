"""Thin entry point for spark-submit (and Airflow's SparkSubmitOperator): ``lakecdc maintain`` with these arguments.

    spark-submit --master spark://host:7077 --jars "$(python -m pipelines.spark jars)" \\
        jobs/maintain.py --conf conf/pipeline.yaml

Between runs, as docs/operations.md ("Maintenance") says: compact gold's state, then OPTIMIZE and VACUUM every
table. A failure exits non-zero (SystemExit), so spark-submit and whatever schedules it see it fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
if (CHECKOUT / "pipelines" / "__init__.py").is_file() and str(CHECKOUT) not in sys.path:
    sys.path.insert(0, str(CHECKOUT))  # a source checkout: its own pipelines, installed or not

from pipelines.cli import console_main  # noqa: E402 - after the checkout is on the path

if __name__ == "__main__":
    console_main(["maintain", *sys.argv[1:]])
