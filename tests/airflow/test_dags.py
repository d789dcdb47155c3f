"""The Airflow DAGs (airflow/*.py) as Airflow's scheduler loads them: a real DagBag, no import errors, no
deprecation warnings, and the task graph each one promises.

Runs in its own virtualenv with Airflow and its providers (scripts/airflow_check.sh, make test-airflow): the main
test run ignores this directory.
"""

from __future__ import annotations

import inspect
import warnings
from datetime import timedelta
from pathlib import Path

import pytest

try:
    from airflow.dag_processing.dagbag import DagBag  # Airflow 3.1+
except ImportError:  # Airflow 2.10, 3.0
    from airflow.models.dagbag import DagBag

DAGS = Path(__file__).resolve().parents[2] / "airflow"


@pytest.fixture(scope="module")
def dagbag() -> DagBag:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Airflow 2.10 takes include_examples; 3.x reads [core] load_examples (off in scripts/airflow_check.sh)
        examples = {"include_examples": False} if "include_examples" in inspect.signature(DagBag).parameters else {}
        bag = DagBag(dag_folder=str(DAGS), **examples)
    bag.lakecdc_warnings = [w for w in caught if Path(w.filename).resolve().parent == DAGS]
    return bag


def test_dags_load_without_errors_or_deprecations(dagbag: DagBag) -> None:
    assert dagbag.import_errors == {}
    assert sorted(dagbag.dag_ids) == ["lakecdc_databricks", "lakecdc_spark_submit"]
    # Warnings raised by our files' own lines (a library's warning while a provider imports is not ours).
    ours = [
        w
        for warned in getattr(dagbag, "captured_warnings", {}).values()
        for w in warned
        if w.startswith(str(DAGS) + "/")
    ]
    assert ours == []
    assert [str(w.message) for w in dagbag.lakecdc_warnings] == []


@pytest.mark.parametrize("dag_id", ["lakecdc_databricks", "lakecdc_spark_submit"])
def test_runs_are_bounded_and_retried(dagbag: DagBag, dag_id: str) -> None:
    dag = dagbag.dags[dag_id]
    assert dag.max_active_runs == 1
    assert not dag.catchup
    for task in dag.tasks:
        assert task.retries >= 1, task.task_id
        assert task.execution_timeout is not None and task.execution_timeout <= timedelta(hours=2), task.task_id


def test_databricks_dag_runs_the_bundle_job_with_the_conf_as_a_job_parameter(dagbag: DagBag) -> None:
    from airflow.providers.databricks.operators.databricks import DatabricksRunNowOperator

    dag = dagbag.dags["lakecdc_databricks"]
    (task,) = dag.tasks
    assert isinstance(task, DatabricksRunNowOperator)
    assert task.wait_for_termination
    env = dag.get_template_env()
    params = {name: param.value for name, param in dag.params.items()}
    assert params == {"job_name": "lakecdc pipeline", "conf": ""}
    render = lambda value, **given: task.render_template(value, {"params": {**params, **given}}, env)  # noqa: E731
    # the provider keeps them as attributes (7.20+) or in the request it builds (older, as on Airflow 2.10)
    job_name = getattr(task, "job_name", None) or task.json["job_name"]
    job_parameters = getattr(task, "job_parameters", None) or task.json["job_parameters"]
    assert render(job_name) == "lakecdc pipeline"
    assert render(job_parameters) == {}  # the job's own conf, catalog, schema and checkpoints
    conf = "/Workspace/Shared/lakecdc confs/pipeline.yaml"
    assert render(job_parameters, conf=conf) == {"conf": conf}


def test_spark_submit_dag_runs_the_stages_in_order_with_packages_and_conf(dagbag: DagBag) -> None:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    dag = dagbag.dags["lakecdc_spark_submit"]
    assert sorted(dag.task_ids) == ["bronze", "gold", "maintain", "maintenance_due", "silver"]
    assert dag.get_task("bronze").downstream_task_ids == {"silver"}
    assert dag.get_task("silver").downstream_task_ids == {"gold"}
    assert dag.get_task("gold").downstream_task_ids == {"maintenance_due"}
    assert dag.get_task("maintenance_due").downstream_task_ids == {"maintain"}
    for stage in ("bronze", "silver", "gold"):
        task = dag.get_task(stage)
        assert isinstance(task, SparkSubmitOperator)
        assert task.application.endswith("/jobs/run_stage.py")
        packages = task.packages.split(",")
        assert any(p.startswith("io.delta:delta-spark_") for p in packages), packages
        assert any(p.startswith("org.apache.spark:spark-sql-kafka-0-10_") for p in packages), packages
        args = task.application_args
        assert args[0] == "--conf" and args[2:] == ["--stage", stage, "--once"], args  # a list: no shell splitting
        assert "spark.pyspark.python" in task.conf


def test_spark_submit_dag_maintains_after_gold_once_a_day(dagbag: DagBag) -> None:
    """operations.md: ``lakecdc maintain`` after gold, between runs, in the first run of the hour
    ``lakecdc_maintain_hour`` (default 3, UTC): one run a day of a DAG that runs every 15 minutes."""
    from datetime import datetime, timezone

    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    dag = dagbag.dags["lakecdc_spark_submit"]
    assert dag.max_active_runs == 1, "maintain must never run beside gold"
    maintain = dag.get_task("maintain")
    assert isinstance(maintain, SparkSubmitOperator)
    assert maintain.application.endswith("/jobs/maintain.py") and maintain.application_args[0] == "--conf"
    assert (Path(__file__).resolve().parents[2] / "jobs" / "maintain.py").is_file()
    due = dag.get_task("maintenance_due")
    assert due.op_kwargs == {"hour": "{{ var.value.get('lakecdc_maintain_hour', '3') }}"}
    day = [datetime(2026, 1, 1, h, m, tzinfo=timezone.utc) for h in range(24) for m in (0, 15, 30, 45)]
    runs = [t for t in day if due.python_callable("3", data_interval_end=t)]
    assert runs == [datetime(2026, 1, 1, 3, 0, tzinfo=timezone.utc)]
    assert not due.python_callable("3")
