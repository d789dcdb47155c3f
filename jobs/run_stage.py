"""Thin entry point for spark-submit (and Airflow's SparkSubmitOperator): ``lakecdc run`` with these arguments.

    spark-submit --master spark://host:7077 --jars "$(python -m pipelines.spark jars)" \\
        jobs/run_stage.py --conf conf/pipeline.yaml --stage silver --once
    python jobs/run_stage.py --conf conf/pipeline.yaml            # all stages, embedded local Spark

The master and settings given to spark-submit are used as they are (see pipelines/spark.py). Python must be one
with lakecdc installed (``PYSPARK_PYTHON``); from a source checkout the checkout's ``pipelines`` is used. A failure
exits non-zero (SystemExit), so spark-submit and whatever schedules it see it fail.
"""

from __future__ import annotations

import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
if (CHECKOUT / "pipelines" / "__init__.py").is_file() and str(CHECKOUT) not in sys.path:
    sys.path.insert(0, str(CHECKOUT))  # a source checkout: its own pipelines, installed or not

from pipelines.cli import console_main  # noqa: E402 - after the checkout is on the path

if __name__ == "__main__":
    console_main(["run", *sys.argv[1:]])
