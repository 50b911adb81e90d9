"""A batch run without its interval is refused by preflight, once, before any Spark task starts,
in one line of the task's log and no traceback."""

from __future__ import annotations

import json

from airflow_env import airflow, airflow_environment, migrate, task_states

from lakehouse.config import Lakehouse


def test_a_batch_run_without_start_and_end_fails_in_preflight_and_starts_no_spark_task(tmp_path):
    home = tmp_path / "airflow_home"
    home.mkdir()
    migrate(home)
    env = airflow_environment(home, Lakehouse(str(tmp_path / "lakehouse")))
    result = airflow(
        env,
        "dags",
        "test",
        "ysb_hourly",
        "2026-11-20T03:00:00+00:00",
        "-c",
        json.dumps({"mode": "batch"}),
    )
    output = result.stdout + result.stderr
    refusals = [line for line in output.splitlines() if "Preflight refused the run: " in line]
    assert any("mode=batch needs the start and end params" in line for line in refusals), output[
        -4000:
    ]
    assert "Traceback" not in output and "AirflowFailException" not in output, output[-4000:]

    states = task_states(env, "ysb_hourly")
    assert states.pop("preflight") == [
        "failed",
        1,
    ]  # retries=0: no retry for what a person must fix
    assert states and all(state in ("upstream_failed", "None") for state, _ in states.values()), (
        states
    )
