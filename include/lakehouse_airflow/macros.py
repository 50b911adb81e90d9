"""The DAGs' macros: run mode, event-hour interval, job paths, jars and Kafka brokers, at render time.

No Spark import here (Airflow parses DAG files every few seconds); these functions are Jinja
macros, evaluated only when a task instance runs.

Which event hour a run owns: Airflow 3's ``@hourly`` timetable gives a run with logical date H
an empty data interval (start == end == H). A run at H owns the event hour that has just ended,
[H - 1h, H): that is the hour a scheduled run at H has all the data of, and the hour a backfill
run of logical date H recomputes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from lakehouse.config import Lakehouse, jar_paths
from lakehouse.errors import ConfigError
from lakehouse.kafka_settings import KAFKA_CONN_ID
from lakehouse.periods import Periods, as_utc, parse_instant

PROJECT_DIR = Path(__file__).resolve().parents[2]
JOBS_DIR = PROJECT_DIR / "jobs"
SPARK_CONN_ID = "spark_lakehouse"

# The longest interval a manual batch run recomputes without confirm_long_interval=true: a month
# of hours is a big but ordinary repair; ten years typed by mistake is a day of Spark work.
LONG_INTERVAL = timedelta(days=31)


def job_path(name: str) -> str:
    """Absolute path of ``jobs/<name>.py`` (``LAKEHOUSE_JOBS_DIR`` overrides the folder)."""
    return f"{os.environ.get('LAKEHOUSE_JOBS_DIR', JOBS_DIR)}/{name}.py"


def owned_hour(logical_date: datetime) -> Periods:
    """The event hour a run with this logical date owns: [H - 1h, H), H the logical hour."""
    end = as_utc(logical_date).replace(minute=0, second=0, microsecond=0)
    return Periods.between(end - timedelta(hours=1), end)


def run_interval(run_type: str, params: dict, logical_date: datetime | None) -> Periods | None:
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
        return Periods.between(parse_instant(params["start"]), parse_instant(params["end"]))
    return None


def _interval(dag_run, params, logical_date) -> Periods | None:
    return run_interval(getattr(dag_run, "run_type", ""), dict(params or {}), logical_date)


def mode_arg(dag_run, params, logical_date) -> str:
    return "batch" if _interval(dag_run, params, logical_date) else "incremental"


def start_arg(dag_run, params, logical_date) -> str:
    hours = _interval(dag_run, params, logical_date)
    return f"{hours.first:%Y-%m-%dT%H:00Z}" if hours else ""


def end_arg(dag_run, params, logical_date) -> str:
    hours = _interval(dag_run, params, logical_date)
    return f"{hours.end:%Y-%m-%dT%H:00Z}" if hours else ""


def lakehouse_root() -> str:
    return Lakehouse.from_env().root


def jars_arg() -> str:
    return ",".join(jar_paths())


def py_files_arg() -> str:
    """The zip of the ``lakehouse`` package for cluster executors (``LAKEHOUSE_PY_FILES``), if any."""
    return os.environ.get("LAKEHOUSE_PY_FILES", "")


# --- Kafka: where bronze's brokers are, from the kafka_lakehouse connection


def bootstrap_servers_from_connection(
    host: str | None, port: int | None, extra: Mapping[str, Any] | None
) -> str:
    """Bootstrap servers from an Airflow connection's fields.

    ``extra["bootstrap.servers"]`` (the Kafka provider's convention, for several brokers) wins;
    otherwise ``host:port``, or ``host`` alone when it already lists ``host:port`` pairs.
    """
    listed = str((extra or {}).get("bootstrap.servers") or "").strip()
    if listed:
        return listed
    host = (host or "").strip()
    if not host:
        raise ConfigError(
            f"Airflow connection {KAFKA_CONN_ID!r} has no host: set host and port (or extra "
            '{"bootstrap.servers": "HOST:PORT,..."}).'
        )
    return host if ":" in host or not port else f"{host}:{port}"


def bootstrap_servers_arg(params: Mapping[str, Any] | None, conn: Any) -> str:
    """The ``--kafka-bootstrap-servers`` argument of the bronze task.

    Empty for the files source (the connection is then never looked up, so a deployment without
    Kafka needs none) and when the connection does not exist (the job then falls back to
    ``$KAFKA_BOOTSTRAP_SERVERS`` or fails naming all three places). ``conn`` is Airflow's template
    variable of that name.
    """
    if (params or {}).get("source") != "kafka":
        return ""
    connection = conn.get(KAFKA_CONN_ID)
    if connection is None:
        return ""
    return bootstrap_servers_from_connection(
        connection.host, connection.port, connection.extra_dejson
    )


MACROS = {
    "lakehouse_mode": mode_arg,
    "lakehouse_start": start_arg,
    "lakehouse_end": end_arg,
    "lakehouse_root": lakehouse_root,
    "lakehouse_jars": jars_arg,
    "lakehouse_py_files": py_files_arg,
    "lakehouse_kafka_bootstrap_servers": bootstrap_servers_arg,
}
