"""The unchanged hourly DAG on a Spark standalone cluster, with Airflow's metadata in PostgreSQL.

The same DAG, jobs and lakehouse package as tests/e2e/test_hourly_dag.py; only the deployment
differs, and only through settings: the ``spark_lakehouse`` connection names the standalone master,
LAKEHOUSE_PY_FILES the zip of the package, AIRFLOW__DATABASE__SQL_ALCHEMY_CONN the database.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
import sqlalchemy
from airflow_env import airflow
from helpers import PIPELINE, START, assert_tables_match_oracle, table

from lakehouse_tools.generator import write_campaigns, write_hours

# long: a standalone cluster and a Postgres-backed Airflow, minutes to start; `make test-long` runs it
# (the suite outgrew CI's budget; tests/cluster/test_py_files.py still runs jobs on the cluster's path).
pytestmark = [pytest.mark.timeout(1800), pytest.mark.long]


def test_hourly_dag_on_the_cluster_with_airflow_on_postgres_matches_the_oracle(
    spark, lakehouse, spark_cluster, airflow_on_postgres, py_files
):
    write_campaigns(lakehouse, seed=21)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=21)
    env = airflow_on_postgres.environment(
        lakehouse,
        AIRFLOW_CONN_SPARK_LAKEHOUSE=json.dumps(
            {"conn_type": "spark", "host": spark_cluster.master_url}
        ),
        LAKEHOUSE_PY_FILES=str(py_files),
    )
    apps_before = {app["id"] for app in spark_cluster.master_state()["completedapps"]}

    logical_date = (START + timedelta(hours=2)).isoformat()
    started = time.monotonic()
    result = airflow(env, "dags", "test", "ysb_hourly", logical_date, timeout=1500)
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    (airflow_on_postgres.home / "dag-test.log").write_text(output)
    print(
        f"airflow dags test on the cluster: {seconds:.0f} s (output in {airflow_on_postgres.home / 'dag-test.log'})"
    )
    assert result.returncode == 0 and "state=success" in output, output[-5000:]

    assert_tables_match_oracle(spark, lakehouse)
    assert table(spark, lakehouse, "gold.campaign_hourly").count() > 0

    # Every task submitted to the standalone master, shipping the package zip to the executors.
    assert f"--master {spark_cluster.master_url}" in output
    assert f"--py-files {py_files}" in output

    # Each job was an application of the cluster whose tasks ran on the cluster's executor.
    apps = {
        app["name"]: app
        for app in spark_cluster.master_state()["completedapps"]
        if app["id"] not in apps_before
    }
    assert set(PIPELINE) <= set(apps), f"applications seen by the master: {sorted(apps)}"
    for name in PIPELINE:
        assert apps[name]["state"] == "FINISHED", apps[name]
        executor_logs = [
            p.read_text(errors="replace")
            for p in (spark_cluster.work_dir / apps[name]["id"]).glob("*/stderr")
        ]
        assert any("Finished task" in log for log in executor_logs), (
            f"{name}: no task ran on an executor"
        )

    # Airflow kept the run in PostgreSQL.
    engine = sqlalchemy.create_engine(airflow_on_postgres.db_url)
    try:
        with engine.connect() as connection:
            runs = connection.execute(
                sqlalchemy.text("SELECT state FROM dag_run WHERE dag_id = 'ysb_hourly'")
            ).all()
            tasks = connection.execute(
                sqlalchemy.text(
                    "SELECT task_id, state, EXTRACT(EPOCH FROM end_date - start_date) FROM task_instance "
                    "WHERE dag_id = 'ysb_hourly' ORDER BY start_date"
                )
            ).all()
    finally:
        engine.dispose()
    assert [state for (state,) in runs] == ["success"]
    states = {task_id: state for task_id, state, _ in tasks}
    assert {name: states.get(name) for name in ("preflight", *PIPELINE)} == dict.fromkeys(
        ("preflight", *PIPELINE), "success"
    )
    assert set(states.values()) <= {"success", "skipped"}, states
    print(
        "task seconds:",
        {task_id: round(float(s or 0), 1) for task_id, state, s in tasks if state == "success"},
    )
