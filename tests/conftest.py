"""Shared fixtures. Unit tests never start Spark; Spark tests share one local session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LAKECDC_SHARED", ROOT.parent / "shared"))
SEEDS_FIXTURES = ROOT / "tests" / "fixtures" / "seeds"
CONFORMANCE = SHARED / "conformance"


@pytest.fixture(scope="session")
def spark():
    """One local[2] session with Delta and Kafka jars for the whole test run."""
    from pipelines.spark import get_spark

    session = get_spark("lakecdc-tests", extra_conf={"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path):
    """A fresh warehouse directory per test."""
    return tmp_path / "warehouse"
