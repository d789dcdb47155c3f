"""The wheel deployed to Databricks: the runtime, without the dev tools, importable on its own.

Builds the wheel from a copy of the checkout (setuptools leaves stale files in ``build/lib`` that
would end up in a wheel built in place), then checks its file list against the source tree and
imports every runtime module it carries in an isolated interpreter that sees only the unpacked
wheel and site-packages, so nothing can come from the checkout or from ``pipelines.testing``.
Runtime modules are discovered from the tree and the wheel, never listed here.
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEV_TOOLS = "pipelines/testing/"


def _module_name(path: str) -> str:
    """``pipelines/gold/__init__.py`` → ``pipelines.gold``; ``pipelines/sql.py`` → ``pipelines.sql``."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "setup.cfg", "setup.py"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "pipelines", source / "pipelines", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (whl,) = out.glob("lakecdc-*.whl")
    return whl


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    return target


def _isolated(unpacked: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in ``python -I -S`` with sys.path = stdlib + the unpacked wheel + site-packages.

    ``-S`` also skips site-packages' ``.pth`` files: the editable install's finder there would map
    ``pipelines`` back to the checkout."""
    paths = [str(unpacked), *site.getsitepackages()]
    prelude = f"import sys\nsys.path[:0] = {paths[:1]!r}\nsys.path += {paths[1:]!r}\n"
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + code], capture_output=True, text=True, timeout=600, cwd=unpacked
    )


def test_wheel_has_no_dev_tools(wheel_files):
    assert [f for f in wheel_files if f.startswith(DEV_TOOLS)] == []


def test_wheel_has_every_runtime_module(wheel_files):
    runtime = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "pipelines").rglob("*.py")
        if not p.relative_to(ROOT).as_posix().startswith(DEV_TOOLS) and "__pycache__" not in p.parts
    }
    assert "pipelines/cli.py" in runtime
    assert sorted(runtime - set(wheel_files)) == []


_IMPORT_ALL = """
import importlib, importlib.util, json
result = {"file": None, "dev_tools": None, "imported": [], "skipped": {}, "failed": {}}
import pipelines
result["file"] = pipelines.__file__
result["dev_tools"] = importlib.util.find_spec("pipelines.testing") is not None
for name in MODULES:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == "pipelines" or missing.startswith("pipelines."):
            result["failed"][name] = repr(exc)
        else:
            result["skipped"][name] = missing
    except Exception as exc:
        result["failed"][name] = repr(exc)
    else:
        result["imported"].append(name)
result["loaded_dev_tools"] = sorted(m for m in sys.modules if m.startswith("pipelines.testing"))
print(json.dumps(result))
"""


def test_every_runtime_module_imports_from_the_wheel_alone(wheel_files, unpacked):
    modules = sorted(_module_name(f) for f in wheel_files if f.startswith("pipelines/") and f.endswith(".py"))
    done = _isolated(unpacked, f"MODULES = {modules!r}\n" + _IMPORT_ALL)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["file"]).resolve() == (unpacked / "pipelines" / "__init__.py").resolve()
    assert result["dev_tools"] is False
    assert result["failed"] == {}
    assert result["loaded_dev_tools"] == []
    # a third-party package missing here (e.g. great_expectations) may skip a module, never the core
    assert {"pipelines", "pipelines.cli", "pipelines.config", "pipelines.formats"} <= set(result["imported"])


@pytest.mark.parametrize(
    "argv",
    [
        ["demo"],
        ["soak", "--format", "oms_canal"],
        ["kafka", "status"],
        ["produce", "--format", "oms_canal", "--topic", "t"],
    ],
)
def test_dev_commands_say_they_need_a_checkout(unpacked, argv):
    done = _isolated(unpacked, f"from pipelines.cli import main\nraise SystemExit(main({argv!r}))\n")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"lakecdc {argv[0]} is a dev tool: run it from a source checkout (pip install -e .)")
