"""Airflow: bronze → silver → gold every 15 minutes on a self-managed Spark cluster, one spark-submit per stage,
then ``lakecdc maintain`` (``jobs/maintain.py``) once a day: in the first run of the UTC hour of the Airflow
Variable ``lakecdc_maintain_hour`` (default 3), after gold, as docs/operations.md ("Maintenance") says.

Each stage is ``spark-submit jobs/run_stage.py --conf FILE --stage STAGE --once`` on the master of the Airflow
connection ``spark_default`` (host ``spark://master:7077``, or ``yarn`` / ``k8s://...``). Delta's and Kafka's jars
come from Maven Central (``packages``); the Python that runs the driver and executors must have lakecdc installed
(``lakecdc_python``). Airflow Variables: ``lakecdc_home`` (a checkout or install of lakecdc holding
jobs/run_stage.py), ``lakecdc_conf`` (the pipeline YAML), ``lakecdc_python``. Arguments are passed as a list,
never through a shell, so a path with spaces stays one argument.

Airflow 3.x (``airflow.sdk``); the same file loads on Airflow 2.10.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

try:
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.10
    from airflow import DAG
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:
    from airflow.providers.standard.operators.python import ShortCircuitOperator
except ImportError:  # Airflow 2.10
    from airflow.operators.python import ShortCircuitOperator

#: Delta Lake for Spark 4.1 and Spark's Kafka source, at the versions lakecdc is built and tested with.
PACKAGES = "io.delta:delta-spark_4.1_2.13:4.4.0,org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.3"
HOME = "{{ var.value.get('lakecdc_home', '/opt/lakecdc') }}"
CONF = "{{ var.value.get('lakecdc_conf', '/opt/lakecdc/conf/pipeline.yaml') }}"
PYTHON = "{{ var.value.get('lakecdc_python', '/opt/lakecdc/.venv/bin/python') }}"
#: What every stage needs wherever it runs (pipelines/spark.py adds what spark-submit leaves unset).
SPARK_CONF = {
    "spark.pyspark.python": PYTHON,
    "spark.sql.session.timeZone": "UTC",
}

MAINTAIN_HOUR = "{{ var.value.get('lakecdc_maintain_hour', '3') }}"
#: The schedule's interval: the first run of an hour starts in its first this many minutes.
EVERY_MINUTES = 15


def maintenance_due(hour: str, data_interval_end=None, logical_date=None) -> bool:
    """The first run of the UTC hour ``hour``: ``maintain`` runs after its gold (once a day)."""
    when = data_interval_end or logical_date
    return when is not None and when.hour == int(hour) and when.minute < EVERY_MINUTES


with DAG(
    dag_id="lakecdc_spark_submit",
    description="lakecdc on a Spark cluster: bronze → silver → gold, each until caught up",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    schedule=timedelta(minutes=EVERY_MINUTES),
    catchup=False,
    max_active_runs=1,  # the stages checkpoint; a second run at once would only wait on the first
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=2),
        "execution_timeout": timedelta(hours=1),  # one stage, until caught up
    },
    tags=["lakecdc", "cdc", "spark"],
) as dag:
    stages = [
        SparkSubmitOperator(
            task_id=stage,
            conn_id="spark_default",
            application=f"{HOME}/jobs/run_stage.py",
            application_args=["--conf", CONF, "--stage", stage, "--once"],
            packages=PACKAGES,
            conf=SPARK_CONF,
            name=f"lakecdc-{stage}",
        )
        for stage in ("bronze", "silver", "gold")
    ]
    due = ShortCircuitOperator(
        task_id="maintenance_due",
        python_callable=maintenance_due,
        op_kwargs={"hour": MAINTAIN_HOUR},
    )
    maintain = SparkSubmitOperator(
        task_id="maintain",
        conn_id="spark_default",
        application=f"{HOME}/jobs/maintain.py",
        application_args=["--conf", CONF],
        packages=PACKAGES,
        conf=SPARK_CONF,
        name="lakecdc-maintain",
    )
    stages[0] >> stages[1] >> stages[2] >> due >> maintain
