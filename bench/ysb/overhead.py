"""Out-of-process measurements: spark-submit start-up, and an Airflow DAG run with nothing new.

These need processes of their own (a fresh JVM, the Airflow CLI), so they run here, in the
benchmark's own process, not in a worker.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.ysb.data import Dataset, fresh_lakehouse
from bench.ysb.measuring import run_measured

PROJECT_DIR = Path(__file__).resolve().parents[2]
DAG_ID = "ysb_hourly"


def spark_env() -> dict[str, str]:
    """The environment of a process that runs the project's code (a worker, spark-submit, Airflow)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PROJECT_DIR / "include"), str(PROJECT_DIR), env.get("PYTHONPATH", "")]
    )
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def measure_spark_submit(reps: int, master: str = "local[2]") -> dict:
    """Wall time of spark-submit of a trivial script: bare (JVM + Python), and one that builds the session."""
    from lakehouse.config import jar_paths

    submit = str(Path(sys.executable).parent / "spark-submit")
    results = {"bare": [], "session": []}
    for _ in range(reps):
        for kind in results:
            done, wall, _cpu = run_measured(
                [
                    submit,
                    "--master",
                    master,
                    "--jars",
                    ",".join(jar_paths()),
                    str(PROJECT_DIR / "bench" / "noop_job.py"),
                    kind,
                ],
                env=spark_env(),
                capture_output=True,
            )
            done.check_returncode()
            results[kind].append(wall)
    return results


def measure_dag_idle(work: Path, dataset: Dataset, reps: int) -> dict:
    """``airflow dags test ysb_hourly`` once to process everything, then ``reps`` runs with nothing new.

    A private AIRFLOW_HOME (SQLite) and lakehouse under ``work``. Task start/end times come from
    the metadata DB; Airflow's share is the DAG run's wall time minus its Spark tasks' time.
    """
    home = work / "airflow_home"
    shutil.rmtree(work, ignore_errors=True)
    home.mkdir(parents=True)
    lakehouse = fresh_lakehouse(work / "lakehouse", dataset)
    venv_bin = Path(sys.executable).parent
    env = {k: v for k, v in spark_env().items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(PROJECT_DIR / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS="lakehouse_tools.airflow_sqlite.CONNECT_ARGS",
        AIRFLOW_CONN_SPARK_LAKEHOUSE=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        LAKEHOUSE_ROOT=lakehouse.root,
        PATH=os.pathsep.join([str(venv_bin), env.get("PATH", "")]),
    )

    def airflow(*args: str):
        done, wall, _cpu = run_measured(
            [str(venv_bin / "airflow"), *args], env=env, capture_output=True, text=True
        )
        return done, wall

    migrated, _ = airflow("db", "migrate")
    if migrated.returncode != 0:
        raise RuntimeError(f"airflow db migrate failed: {migrated.stderr[-2000:]}")
    runs = []
    for index in range(reps + 1):
        logical_date = (dataset.end_time + timedelta(hours=index)).isoformat()
        result, wall = airflow("dags", "test", DAG_ID, logical_date)
        if result.returncode != 0 or "state=success" not in result.stdout + result.stderr:
            raise RuntimeError(
                f"DAG run {logical_date} failed:\n{(result.stdout + result.stderr)[-3000:]}"
            )
        tasks = task_durations(home / "airflow.db", logical_date)
        runs.append(
            {"logical_date": logical_date, "wall": wall, "tasks": tasks, "primes": index == 0}
        )
    shutil.rmtree(work, ignore_errors=True)
    return {"runs": runs}


def task_durations(db: Path, logical_date: str) -> dict[str, float]:
    """Seconds per task instance of the ysb_hourly run with ``logical_date`` (from the SQLite DB)."""
    when = datetime.fromisoformat(logical_date).astimezone(UTC)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT ti.task_id, ti.start_date, ti.end_date, dr.logical_date FROM task_instance ti "
            "JOIN dag_run dr ON dr.dag_id = ti.dag_id AND dr.run_id = ti.run_id WHERE ti.dag_id = ?",
            (DAG_ID,),
        ).fetchall()
    out = {}
    for task_id, start, end, run_date in rows:
        if run_date and _utc(run_date) == when and start and end:
            out[task_id] = (_utc(end) - _utc(start)).total_seconds()
    return out


def dag_runs_from_db(db: Path) -> dict:
    """The finished ysb_hourly runs in a metadata DB, as :func:`measure_dag_idle` reports them.

    For a measurement cut short: the wall time is from the first task's start to the last one's end
    (without the `airflow dags test` start-up and DAG parsing), so it understates the CLI's wall time.
    """
    with sqlite3.connect(db) as conn:
        # `dags test` records the logical date as the run's start: the tasks' span is the run's.
        rows = conn.execute(
            "SELECT dr.logical_date, MIN(ti.start_date), MAX(ti.end_date) FROM dag_run dr "
            "JOIN task_instance ti ON ti.dag_id = dr.dag_id AND ti.run_id = dr.run_id "
            "WHERE dr.dag_id = ? AND dr.state = 'success' GROUP BY dr.logical_date ORDER BY dr.logical_date",
            (DAG_ID,),
        ).fetchall()
    runs = []
    for index, (logical, start, end) in enumerate(rows):
        when = _utc(logical).isoformat()
        runs.append(
            {
                "logical_date": when,
                "wall": (_utc(end) - _utc(start)).total_seconds(),
                "tasks": task_durations(db, when),
                "primes": index == 0,
                "from_db": True,
            }
        )
    return {"runs": runs}


def _utc(value: str) -> datetime:
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
