"""The Databricks Asset Bundle (databricks.yml + resources/*.yml) checked as ``databricks bundle deploy`` would.

No PyPI package ships the bundle JSON schema itself (it lives in the Databricks CLI's Go repository, not in
``databricks-bundles`` nor ``databricks-sdk``). ``databricks-bundles``, Databricks' own package for bundles in
Python, ships typed models of every resource generated from that schema, which reject unknown fields, wrong types
and unknown enum values: each job is loaded through them when the package is installed. The rules the CLI
enforces at deploy time that no schema can express are asserted from the YAML itself: a production target with its
own root path and identity, every referenced file present, every variable used and given a value in every target,
tasks that form a chain, timeouts, and wheel tasks whose arguments the ``lakecdc`` CLI accepts.

Also here: the wheel's entry point fails loudly (SystemExit with the status), because a Databricks wheel task
ignores a returned status and would show a failed stage as a successful run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]
#: ${var.name}, and every ${...} reference of the bundle.
VAR_RE = re.compile(r"\$\{var\.([A-Za-z0-9_]+)\}")
REF_RE = re.compile(r"\$\{([A-Za-z0-9_.]+)\}")
#: What the CLI resolves itself (bundle.*, workspace.*) besides variables.
KNOWN_REFS = ("var.", "bundle.", "workspace.", "resources.")
#: {{job.parameters.name}}: a dynamic value reference to a job parameter.
JOB_PARAM_RE = re.compile(r"\{\{\s*job\.parameters\.([A-Za-z0-9_]+)\s*\}\}")


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def bundle() -> dict:
    return _load(ROOT / "databricks.yml")


@pytest.fixture(scope="module")
def included(bundle: dict) -> dict[Path, dict]:
    files = [path for pattern in bundle.get("include", []) for path in sorted(ROOT.glob(pattern))]
    return {path: _load(path) for path in files}


@pytest.fixture(scope="module")
def jobs(included: dict[Path, dict]) -> dict[str, tuple[Path, dict]]:
    """Job name → (the file that declares it, its definition)."""
    found: dict[str, tuple[Path, dict]] = {}
    for path, doc in included.items():
        for name, spec in (doc.get("resources", {}).get("jobs") or {}).items():
            assert name not in found, f"job {name} declared twice"
            found[name] = (path, spec)
    assert found, "the bundle declares no job"
    return found


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _bundle_text(included: dict[Path, dict]) -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in [ROOT / "databricks.yml", *included])


def test_jobs_validate_against_databricks_bundle_models(jobs: dict[str, tuple[Path, dict]]) -> None:
    models = pytest.importorskip("databricks.bundles.jobs", reason="databricks-bundles is not installed")
    for name, (_path, spec) in jobs.items():
        job = models.Job.from_dict(spec)  # raises on an unknown field, a wrong type, an unknown enum value
        assert job.tasks, name


def test_targets_dev_and_a_production_target_with_one_copy_and_an_identity(bundle: dict) -> None:
    targets = bundle["targets"]
    assert [name for name, t in targets.items() if t.get("default")] == ["dev"]
    assert targets["dev"]["mode"] == "development"
    prod = targets["prod"]
    assert prod["mode"] == "production"
    root_path = prod.get("workspace", {}).get("root_path", "")
    assert root_path.startswith("/Workspace/"), "production mode requires workspace.root_path"
    assert "current_user" not in root_path, "one production copy, whoever deploys: no per-user root path"
    run_as = prod.get("run_as") or {}
    assert run_as.get("service_principal_name") or run_as.get("user_name"), "production runs as a set identity"
    identity = run_as.get("service_principal_name") or run_as.get("user_name")
    managers = [p for p in prod.get("permissions", []) if p["level"] == "CAN_MANAGE"]
    assert any(identity in (p.get("service_principal_name"), p.get("user_name")) for p in managers), managers
    for permission in prod.get("permissions", []):
        assert permission["level"] in ("CAN_VIEW", "CAN_RUN", "CAN_MANAGE"), permission


def test_every_referenced_file_exists(
    bundle: dict, included: dict[Path, dict], jobs: dict[str, tuple[Path, dict]]
) -> None:
    from pipelines.config import load_config

    for pattern in bundle["include"]:
        assert list(ROOT.glob(pattern)), f"include {pattern} matches no file"
    for name, artifact in bundle["artifacts"].items():
        assert (ROOT / artifact["path"] / "pyproject.toml").is_file(), name
        out_dir = re.search(r"-w\s+(\S+)", artifact["build"]).group(1)
    conf_default = bundle["variables"]["conf_path"]["default"]
    assert conf_default.startswith("${workspace.file_path}/"), conf_default
    conf = ROOT / conf_default.removeprefix("${workspace.file_path}/")
    assert conf.is_file(), f"{conf} (the job's conf_path) does not exist"
    cfg = load_config(conf)  # a valid pipeline configuration
    assert cfg.catalog and cfg.schema and cfg.checkpoints.startswith("/Volumes/"), cfg
    for name, (path, spec) in jobs.items():
        for task in spec["tasks"]:
            if "condition_task" in task:  # no code of its own
                continue
            wheels = [lib["whl"] for lib in task.get("libraries", []) if "whl" in lib]
            wheels += [dep for dep in _environment(spec, task).get("dependencies", []) if dep.endswith(".whl")]
            assert wheels, f"{name}.{task['task_key']}: the wheel is neither a library nor a dependency"
            for wheel in wheels:  # the artifact's build output, relative to the file that names it
                assert (path.parent / wheel).parent.resolve() == (ROOT / out_dir).resolve(), wheel
            for key in ("notebook_task", "spark_python_task"):
                source = (task.get(key) or {}).get("notebook_path") or (task.get(key) or {}).get("python_file")
                if source:
                    assert (path.parent / source).exists(), f"{name}.{task['task_key']}: {source} does not exist"


def test_every_variable_is_used_and_has_a_value_in_every_target(bundle: dict, included: dict[Path, dict]) -> None:
    declared = bundle["variables"]
    text = _bundle_text(included)
    assert set(VAR_RE.findall(text)) == set(declared), "declared variables and ${var.*} references differ"
    for ref in REF_RE.findall(text):
        assert ref.startswith(KNOWN_REFS), f"${{{ref}}} is nothing the bundle CLI resolves"
    guide = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    for target_name, target in bundle["targets"].items():
        values = {name: spec.get("default") for name, spec in declared.items()}
        values.update(target.get("variables") or {})
        for name, value in values.items():
            if value is None:  # required: the user gives it, and the Databricks guide says how
                assert "required" in declared[name]["description"].lower(), f"{target_name}: {name} has no value"
                assert f"BUNDLE_VAR_{name}" in guide, f"docs/operations.md does not say how to give {name}"
            elif isinstance(value, dict):
                assert set(value) == {"lookup"}, f"{target_name}: {name}: {value}"


def test_tasks_chain_and_every_job_is_bounded(jobs: dict[str, tuple[Path, dict]]) -> None:
    for name, (_path, spec) in jobs.items():
        keys = [task["task_key"] for task in spec["tasks"]]
        assert len(keys) == len(set(keys)), f"{name}: task keys repeat: {keys}"
        clusters = {cluster["job_cluster_key"]: cluster["new_cluster"] for cluster in spec.get("job_clusters", [])}
        for task in spec["tasks"]:
            for dependency in task.get("depends_on", []):
                assert dependency["task_key"] in keys, f"{name}.{task['task_key']} depends on a missing task"
            if "condition_task" not in task:  # a condition runs on no compute
                assert task.get("job_cluster_key") in clusters or task.get("environment_key"), task["task_key"]
            assert task.get("timeout_seconds", 0) > 0, f"{name}.{task['task_key']} has no timeout"
        assert spec.get("timeout_seconds", 0) > 0, f"{name} has no timeout"
        assert spec.get("max_concurrent_runs") == 1, f"{name}: streaming checkpoints allow one run at a time"
        assert spec.get("email_notifications", {}).get("on_failure"), f"{name}: nobody hears of a failure"
        for cluster in clusters.values():
            assert cluster["node_type_id"].startswith("${var."), "the node type is per cloud: a variable"
            assert cluster.get("data_security_mode") in (
                "SINGLE_USER",
                "USER_ISOLATION",
                "DATA_SECURITY_MODE_DEDICATED",
                "DATA_SECURITY_MODE_STANDARD",
            ), "no Unity Catalog"
        defined = {parameter["name"]: parameter["default"] for parameter in spec.get("parameters", [])}
        used = set(JOB_PARAM_RE.findall(yaml.safe_dump(spec)))
        assert used <= set(defined), f"{name}: undefined job parameters {used - set(defined)}"
        assert {"conf", "catalog", "schema", "checkpoints"} <= set(defined), defined


def test_wheel_tasks_run_the_lakecdc_cli_with_arguments_it_accepts(
    jobs: dict[str, tuple[Path, dict]], pyproject: dict
) -> None:
    from pipelines.cli import build_parser, cmd_maintain, cmd_run

    scripts = pyproject["project"]["scripts"]
    for _name, (_path, spec) in jobs.items():
        stages = []
        defaults = {parameter["name"]: parameter["default"] for parameter in spec.get("parameters", [])}
        for task in spec["tasks"]:
            wheel_task = task.get("python_wheel_task")
            if not wheel_task:
                continue
            assert wheel_task["package_name"] == pyproject["project"]["name"]
            assert wheel_task["entry_point"] in scripts, f"{wheel_task['entry_point']} is no [project.scripts] entry"
            argv = [JOB_PARAM_RE.sub(lambda m, d=defaults: d[m.group(1)], str(arg)) for arg in wheel_task["parameters"]]
            args = build_parser().parse_args(argv)
            assert (args.catalog, args.schema) == (defaults["catalog"], defaults["schema"])
            assert args.checkpoints == defaults["checkpoints"]
            if args.func is cmd_maintain:
                assert not args.dry_run, argv
                stages.append("maintain")
            else:
                assert args.func is cmd_run and args.once, argv
                stages.append(args.stage)
            quality = [lib["pypi"]["package"] for lib in task.get("libraries", []) if "pypi" in lib]
            quality += [dep for dep in _environment(spec, task).get("dependencies", []) if not dep.endswith(".whl")]
            wanted = [
                req.replace("[spark]", "")
                for req in pyproject["project"]["optional-dependencies"]["quality"]
                if req.startswith("great-expectations")
            ]
            assert quality == wanted, "gold needs Great Expectations on the cluster, at the wheel's version"
        assert stages == ["bronze", "silver", "gold", "maintain"], _name


def test_maintain_runs_after_gold_once_a_day(jobs: dict[str, tuple[Path, dict]], bundle: dict) -> None:
    """operations.md: `lakecdc maintain` in the bundle as a task after gold, between runs: in the same job (one
    run at a time), behind two conditions: the hour ``maintain_hour`` and its first run (minute under 15)."""
    hour = bundle["variables"]["maintain_hour"]["default"]
    assert 0 <= int(hour) <= 23
    for name, (_path, spec) in jobs.items():
        tasks = {task["task_key"]: task for task in spec["tasks"]}
        defaults = {parameter["name"]: parameter["default"] for parameter in spec["parameters"]}
        assert defaults["maintain_hour"] == "${var.maintain_hour}", name
        gate_hour, gate_first = tasks["maintenance_hour"], tasks["maintenance_first_run"]
        assert gate_hour["depends_on"] == [{"task_key": "gold"}], name
        assert gate_hour["condition_task"] == {
            "op": "EQUAL_TO",
            "left": "{{job.start_time.hour}}",
            "right": "{{job.parameters.maintain_hour}}",
        }
        assert gate_first["depends_on"] == [{"task_key": "maintenance_hour", "outcome": "true"}]
        assert gate_first["condition_task"]["left"] == "{{job.start_time.minute}}"
        assert int(gate_first["condition_task"]["right"]) * 4 <= 60 < int(gate_first["condition_task"]["right"]) * 5
        assert spec["schedule"]["quartz_cron_expression"] == "0 */15 * * * ?", "the gate assumes a run every 15 min"
        assert tasks["maintain"]["depends_on"] == [{"task_key": "maintenance_first_run", "outcome": "true"}]


def _environment(job: dict, task: dict) -> dict:
    """The spec of a serverless task's environment (``environment_key``), empty for a cluster's task."""
    key = task.get("environment_key")
    specs = {env["environment_key"]: env.get("spec") or {} for env in job.get("environments", [])}
    assert key is None or key in specs, f"{task['task_key']}: no environment {key}"
    return specs.get(key, {})


def test_the_entry_point_raises_on_failure(pyproject: dict, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from pipelines.cli import console_main

    assert pyproject["project"]["scripts"]["lakecdc"] == "pipelines.cli:console_main"
    missing = str(tmp_path / "missing.yaml")
    with pytest.raises(SystemExit) as failed:
        console_main(["run", "--conf", missing, "--stage", "bronze", "--once"])
    assert failed.value.code == 2
    assert "cannot read configuration" in capsys.readouterr().err
    assert console_main(["formats"]) is None  # success returns: a wheel task that ends normally is green

    wheel_task = subprocess.run(
        [sys.executable, "-c", "from pipelines.cli import console_main; console_main()", "run", "--conf", missing],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wheel_task.returncode == 2, wheel_task.stderr
    assert wheel_task.stderr.startswith("lakecdc: error: cannot read configuration"), wheel_task.stderr
    submitted = subprocess.run(
        [sys.executable, str(ROOT / "jobs" / "run_stage.py"), "--conf", missing],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert submitted.returncode == 2, submitted.stderr


def test_one_job_runs_on_a_schedule_since_every_job_shares_the_tables_and_checkpoints(
    jobs: dict[str, tuple[Path, dict]],
) -> None:
    scheduled = [
        name for name, (_p, spec) in jobs.items() if (spec.get("schedule") or {}).get("pause_status") != "PAUSED"
    ]
    assert scheduled == ["lakecdc_pipeline"], "the serverless variant is opt-in: its schedule stays paused"
    serverless = jobs["lakecdc_pipeline_serverless"][1]
    assert "job_clusters" not in serverless and all(
        task.get("environment_key") or "condition_task" in task for task in serverless["tasks"]
    )
