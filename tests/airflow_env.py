"""A private Airflow for tests: its own AIRFLOW_HOME and SQLite DB, the project's DAGs, a lakehouse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lakehouse.config import Lakehouse

PROJECT_DIR = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def airflow_environment(airflow_home: Path, lakehouse: Lakehouse, **extra: str) -> dict[str, str]:
    """The environment every Airflow command of a test runs with (never the developer's own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(airflow_home),
        AIRFLOW__CORE__DAGS_FOLDER=str(PROJECT_DIR / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
        AIRFLOW__LOGGING__LOGGING_LEVEL="INFO",
        AIRFLOW_CONN_SPARK_LAKEHOUSE=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        LAKEHOUSE_ROOT=lakehouse.root,
        LAKEHOUSE_JARS_DIR=os.environ.get("LAKEHOUSE_JARS_DIR", str(PROJECT_DIR / ".jars")),
        PYTHONPATH=os.pathsep.join([str(PROJECT_DIR / "include"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PATH=os.pathsep.join([str(VENV_BIN), env.get("PATH", "")]),
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    env.update(extra)
    return env


def airflow(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run an ``airflow`` CLI command; output is captured for the assertion message."""
    return subprocess.run(
        [str(VENV_BIN / "airflow"), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def migrate(airflow_home: Path) -> None:
    env = airflow_environment(airflow_home, Lakehouse(str(airflow_home / "unused")))
    result = airflow(env, "db", "migrate", timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
