"""Thin entry point for Databricks jobs, spark-submit and Airflow: one stage (or all) from a YAML file.

    spark-submit jobs/run_stage.py --conf conf/pipeline.yaml --stage silver --once
    python jobs/run_stage.py --conf conf/pipeline.yaml            # all stages

On Databricks the cluster's session is used as is (``get_spark`` returns the active session).
"""
import sys

from pipelines.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(["run", *args]))
