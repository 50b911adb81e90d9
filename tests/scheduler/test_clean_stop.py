"""Airflow stopped while an hourly run works (what Ctrl-C on `make airflow-ui` does): the next start resumes it."""

from __future__ import annotations

import time
from pathlib import Path

from airflow_env import (
    AirflowServices,
    airflow_environment,
    airflow_services,
    dag_runs,
    describe_failures,
    metadata_query,
    migrate,
    reserialize_and_pause,
    short_retry_delay,
    wait_for_runs,
)
from helpers import START, assert_tables_match_oracle

from lakehouse_tools.generator import write_campaigns, write_hours


def task_state(airflow_home: Path, task_id: str) -> str | None:
    """The task's state in the one run of the DAG (read from the metadata DB, read-only)."""
    rows = metadata_query(
        airflow_home,
        "SELECT state FROM task_instance WHERE dag_id = 'ysb_hourly' AND task_id = ?",
        task_id,
    )
    return rows[0][0] if rows else None


def wait_for_task_state(airflow_home: Path, task_id: str, state: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if task_state(airflow_home, task_id) == state:
            return
        time.sleep(0.5)
    raise AssertionError(
        f"{task_id} was not {state} within {timeout} s (it is {task_state(airflow_home, task_id)})"
    )


def test_a_run_in_flight_when_airflow_stops_is_resumed_by_the_next_start(
    spark, lakehouse, tmp_path
):
    airflow_home = tmp_path / "airflow_home"
    airflow_home.mkdir()
    migrate(airflow_home)
    short_retry_delay(airflow_home)  # a failed try retried after seconds, not the DAG's minute
    # The check for tasks orphaned by a stopped scheduler: every 30 s under make airflow-ui, every 5
    # here. The next start resets the stopped run's task at the first check once the stopped
    # scheduler has missed its heartbeats for 30 s ([scheduler] scheduler_health_check_threshold):
    # the same reset, by the same check, 5 s after that instead of up to 30 (idle test time).
    env = airflow_environment(
        airflow_home, lakehouse, AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL="5"
    )
    write_campaigns(lakehouse, seed=43)
    write_hours(
        lakehouse, START, 2, events_per_second=1, seed=43
    )  # silver works long enough to be stopped
    # Neither the daily maintenance DAG's latest run nor the exports of the hours the run writes
    # take task slots or CPU from the run under test.
    reserialize_and_pause(env, "ysb_maintenance", "ysb_hourly_export", "ysb_daily_export")

    # The scheduler starts the latest hourly run at once (catchup=False): stop everything mid-silver.
    # Stopped gracefully, a scheduler lets its running tasks finish; make airflow-ui waits 10 s for
    # that, then kills what is left. The case here is a task that outlasts the wait: killed at once.
    services = AirflowServices(env, tmp_path / "logs-before-the-stop").start()
    try:
        wait_for_task_state(airflow_home, "silver_ad_events", "running")
    finally:
        services.stop(timeout=0)
    # The run stays "running" (a second, queued one appears if the wall clock crosses an hour meanwhile).
    left = dag_runs(env)
    running = [run for run in left if run["state"] == "running"]
    assert len(running) == 1, left
    stopped = running[0]

    with airflow_services(env, tmp_path / "logs-after-the-start") as services:
        runs = wait_for_runs(env, count=1, log_dir=services.log_dir, timeout=900)
    [run] = [run for run in runs if run["run_id"] == stopped["run_id"]]
    assert run["state"] == "success", describe_failures(env, [run])
    # The interrupted try ended nowhere; the next start ran silver again, to its end.
    task_logs = (
        airflow_home
        / "logs"
        / "dag_id=ysb_hourly"
        / f"run_id={run['run_id']}"
        / "task_id=silver_ad_events"
    )
    attempts = [
        (task_logs / f"attempt={n}.log").read_text()
        for n in range(1, len(list(task_logs.iterdir())) + 1)
    ]
    assert len(attempts) >= 2 and "silver_ad_events done: " not in attempts[0], (
        f"{task_logs}: {len(attempts)} attempt(s)"
    )
    assert "silver_ad_events done: " in attempts[-1], (
        f"{task_logs}: the last attempt did not finish"
    )
    assert_tables_match_oracle(spark, lakehouse)
