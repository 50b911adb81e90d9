"""What the DAGs need at task-render time: run mode, event-hour interval, job paths and jars.

No Spark import here (Airflow parses DAG files every few seconds); these functions are Jinja
macros, evaluated only when a task instance runs.

Which event hour a run owns: Airflow 3's ``@hourly`` timetable gives a run with logical date H
an empty data interval (start == end == H). A run at H owns the event hour that has just ended,
[H - 1h, H): that is the hour a scheduled run at H has all the data of, and the hour a backfill
run of logical date H recomputes.
"""

from __future__ import annotations

import glob
import os
from datetime import datetime, timedelta
from pathlib import Path

from lakehouse.config import Lakehouse, jar_paths
from lakehouse.errors import ConfigError
from lakehouse.hours import HourRange, as_utc, parse_instant

PROJECT_DIR = Path(__file__).resolve().parents[2]
JOBS_DIR = PROJECT_DIR / "jobs"
SPARK_CONN_ID = "spark_lakehouse"


def job_path(name: str) -> str:
    """Absolute path of ``jobs/<name>.py`` (``LAKEHOUSE_JOBS_DIR`` overrides the folder)."""
    return f"{os.environ.get('LAKEHOUSE_JOBS_DIR', JOBS_DIR)}/{name}.py"


def owned_hour(logical_date: datetime) -> HourRange:
    """The event hour a run with this logical date owns: [H - 1h, H), H the logical hour."""
    end = as_utc(logical_date).replace(minute=0, second=0, microsecond=0)
    return HourRange.between(end - timedelta(hours=1), end)


def run_interval(run_type: str, params: dict, logical_date: datetime | None) -> HourRange | None:
    """The event hours a run recomputes in batch mode, or None for an incremental run.

    A backfill run recomputes the hour it owns; a manual run recomputes [start, end) when its
    ``mode`` param is ``batch``; every other run (scheduled, manual incremental) is incremental.
    """
    run_type = getattr(run_type, "value", run_type)  # a DagRunType enum or its string value
    if run_type == "backfill" and logical_date is not None:
        return owned_hour(logical_date)
    if params.get("mode") == "batch":
        if not (params.get("start") and params.get("end")):
            raise ConfigError(
                "mode=batch needs the start and end params (an event-time interval [start, end))"
            )
        return HourRange.between(parse_instant(params["start"]), parse_instant(params["end"]))
    return None


def _interval(dag_run, params, logical_date) -> HourRange | None:
    return run_interval(getattr(dag_run, "run_type", ""), dict(params or {}), logical_date)


def mode_arg(dag_run, params, logical_date) -> str:
    return "batch" if _interval(dag_run, params, logical_date) else "incremental"


def start_arg(dag_run, params, logical_date) -> str:
    hours = _interval(dag_run, params, logical_date)
    return f"{hours.hours[0]:%Y-%m-%dT%H:00Z}" if hours else ""


def end_arg(dag_run, params, logical_date) -> str:
    hours = _interval(dag_run, params, logical_date)
    return f"{hours.hours[-1] + timedelta(hours=1):%Y-%m-%dT%H:00Z}" if hours else ""


def lakehouse_root() -> str:
    return Lakehouse.from_env().root


def jars_arg() -> str:
    return ",".join(jar_paths())


def py_files_arg() -> str:
    """The zip of the ``lakehouse`` package for cluster executors (``LAKEHOUSE_PY_FILES``), if any."""
    return os.environ.get("LAKEHOUSE_PY_FILES", "")


MACROS = {
    "lakehouse_mode": mode_arg,
    "lakehouse_start": start_arg,
    "lakehouse_end": end_arg,
    "lakehouse_root": lakehouse_root,
    "lakehouse_jars": jars_arg,
    "lakehouse_py_files": py_files_arg,
}


def master_problems(conn_master: str | None) -> list[str]:
    """What is wrong with a ``spark`` connection's master (the spark-submit kind of task)."""
    if conn_master == "yarn" or (conn_master or "").startswith("spark://local") or not conn_master:
        return [
            f"Connection {SPARK_CONN_ID!r} resolves to master {conn_master!r}; give the master in the "
            'connection host, e.g. {"conn_type": "spark", "host": "local[2]"} or "spark://HOST:7077".'
        ]
    return []


def preflight(params: dict, run_type: str, logical_date: datetime | None) -> list[str]:
    """Everything that would make the Spark tasks fail late, checked before any of them starts.

    Returns the problems found (empty when the run can go); the DAG's preflight task raises
    with all of them at once, each saying what to fix. The Spark connection is checked by
    :func:`lakehouse.operators.spark_problems`.
    """
    problems = []
    try:
        lakehouse = Lakehouse.from_env()
        if (params or {}).get("source", "files") == "files" and not Path(
            lakehouse.landing_events
        ).is_dir():
            problems.append(
                f"Landing directory {lakehouse.landing_events} does not exist (generate data first)."
            )
    except ConfigError as error:
        problems.append(str(error))
    try:
        jar_paths()
    except ConfigError as error:
        problems.append(str(error))
    try:
        run_interval(run_type, params, logical_date)
    except ConfigError as error:
        problems.append(str(error))
    if not glob.glob(job_path("*")):
        problems.append(f"No job files at {job_path('*')}: set LAKEHOUSE_JOBS_DIR.")
    return problems
