"""A job's refusal (a ConfigError: a bad argument, a missing setting) fails its task once, in a sentence.

The consistency check given ``start=yesterday`` (what a user typed in the form): the job refuses
before any Spark session, and the task fails at once (no retry for what a person must fix),
with the message and no chained traceback under it.
"""

from __future__ import annotations

import json

from airflow_env import airflow, airflow_environment, migrate, task_states

from lakehouse.config import Lakehouse


def test_a_bad_time_fails_the_consistency_check_once_with_the_message_alone(tmp_path):
    home = tmp_path / "airflow_home"
    home.mkdir()
    migrate(home)
    env = airflow_environment(home, Lakehouse(str(tmp_path / "lakehouse")))
    conf = {"start": "yesterday", "end": "2026-11-20T03:00Z"}
    result = airflow(
        env,
        "dags",
        "test",
        "ysb_consistency_check",
        "2026-11-20T03:00:00+00:00",
        "-c",
        json.dumps(conf),
    )
    output = result.stdout + result.stderr
    assert "Not an ISO-8601 time: 'yesterday' (expected e.g. 2026-11-20T13:00Z)" in output, output[
        -4000:
    ]
    assert "AirflowFailException" in output, output[-4000:]
    assert "ConfigError" not in output and "The above exception was the direct cause" not in output
    assert task_states(env, "ysb_consistency_check") == {"consistency_check": ["failed", 1]}
