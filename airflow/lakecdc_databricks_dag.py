"""Airflow: run the Databricks job of the bundle (resources/lakecdc.job.yml) every 15 minutes, and wait for it.
The job is bronze → silver → gold, then its ``maintain`` task once a day (bundle variable ``maintain_hour``).

Deploy the bundle first (docs/operations.md, "Run on Databricks"). Airflow finds the job by name and passes job
parameters: the pipeline YAML in ``conf`` when this DAG's ``conf`` param is set (a workspace path), else the job
runs with its bundle target's own conf, catalog, schema and checkpoints. The Databricks connection is
``databricks_default`` (workspace URL and a token or a service principal's OAuth secret).

Airflow 3.x (``airflow.sdk``); the same file loads on Airflow 2.10.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

try:
    from airflow.sdk import DAG, Param
except ImportError:  # Airflow 2.10
    from airflow.models.param import Param

    from airflow import DAG
from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator

with DAG(
    dag_id="lakecdc_databricks",
    description="lakecdc on Databricks: the bundle's job, bronze → silver → gold until caught up",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    schedule=timedelta(minutes=15),
    catchup=False,
    max_active_runs=1,  # the job's stages checkpoint; a second run at once would only queue behind the first
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=5),
        "execution_timeout": timedelta(hours=2),  # the job's own timeout_seconds is 2 hours too
    },
    params={
        "job_name": Param(
            "lakecdc pipeline",
            type="string",
            description="the job's name as deployed (dev mode prefixes '[dev <user>] ')",
        ),
        "conf": Param("", type="string", description="workspace path of the pipeline YAML; empty: the job's own"),
    },
    render_template_as_native_obj=True,  # job_parameters renders to a mapping, not its text
    tags=["lakecdc", "cdc", "databricks"],
) as dag:
    DatabricksRunNowOperator(
        task_id="run_lakecdc_job",
        databricks_conn_id="databricks_default",
        job_name="{{ params.job_name }}",
        job_parameters="{{ {'conf': params.conf} if params.conf else {} }}",
        wait_for_termination=True,
        polling_period_seconds=30,
    )
