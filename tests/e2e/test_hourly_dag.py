"""The hourly DAG run by a real Airflow (its own tasks, spark-submit and all) over generated data."""

from __future__ import annotations

from datetime import timedelta

from airflow_env import airflow, airflow_environment
from helpers import START, assert_tables_match_oracle, table
from lakehouse_tools.generator import write_campaigns, write_hours


def test_hourly_dag_run_by_airflow_matches_the_oracle(spark, lakehouse, airflow_home):
    write_campaigns(lakehouse, seed=21)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=21)
    env = airflow_environment(airflow_home, lakehouse)

    logical_date = (START + timedelta(hours=2)).isoformat()
    result = airflow(env, "dags", "test", "ysb_hourly", logical_date)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "state=success" in output, output[-5000:]

    assert_tables_match_oracle(spark, lakehouse)
    # The tasks ran spark-submit against the local[2] master of the JSON connection.
    assert "local[2]" in output
    assert table(spark, lakehouse, "gold.campaign_hourly").count() > 0
