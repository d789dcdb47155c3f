"""Airflow DAG: bronze → silver → gold every 15 minutes, each stage until caught up.

Runs the `lakecdc` console script of the environment Airflow's workers use (install the
wheel with the `local` extra there, or swap BashOperator for a DatabricksSubmitRunOperator).
"""
from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.bash import BashOperator

CONF = "{{ var.value.get('lakecdc_conf', '/opt/lakecdc/conf/pipeline.yaml') }}"

with DAG(
    dag_id="lakecdc_pipeline",
    start_date=datetime(2026, 1, 1),
    schedule=timedelta(minutes=15),
    catchup=False,
    max_active_runs=1,  # stages checkpoint; two runs at once would only wait on each other
    default_args={"retries": 2, "retry_delay": timedelta(minutes=2)},
    tags=["cdc", "delta"],
) as dag:
    stages = [
        BashOperator(task_id=stage, bash_command=f"lakecdc -v run --conf {CONF} --stage {stage} --once")
        for stage in ("bronze", "silver", "gold")
    ]
    stages[0] >> stages[1] >> stages[2]
