"""Shared fixtures: one local Spark session for the whole run, a fresh lakehouse per test."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_DIR / "include"))
sys.path.insert(0, str(PROJECT_DIR / "tests"))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from lakehouse.config import Lakehouse  # noqa: E402

TEST_SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "2g",
}


@pytest.fixture(scope="session")
def spark():
    from lakehouse.spark import build_spark_session

    session = build_spark_session("lakehouse-tests", TEST_SPARK_CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def lakehouse(tmp_path: Path) -> Lakehouse:
    return Lakehouse(root=str(tmp_path / "lakehouse"))


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory) -> Path:
    """A migrated SQLite Airflow metadata DB, shared by the tests that run Airflow commands."""
    from airflow_env import migrate

    home = tmp_path_factory.mktemp("airflow_home")
    migrate(home)
    return home
