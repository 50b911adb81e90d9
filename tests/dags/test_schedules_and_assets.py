"""What the scheduler makes of the DAGs in a fresh metadata DB, and the Assets they declare.

Maintenance (OPTIMIZE + VACUUM of every table, minutes of the engine) must wait for its schedule
instead of starting when `make airflow-ui` starts the scheduler; every catalog table is an Asset.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from airflow_env import airflow, airflow_environment, airflow_python, migrate

from lakehouse import catalog
from lakehouse.config import Lakehouse

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"

# What the dag-processor records for each DAG: when the scheduler will create its next run.
NEXT_RUNS = """
import json
from airflow.models.dag import DagModel
from airflow.utils.session import create_session
with create_session() as session:
    print(json.dumps({d.dag_id: d.next_dagrun_create_after and d.next_dagrun_create_after.isoformat()
                      for d in session.query(DagModel)}))
"""


def test_maintenance_first_runs_at_its_next_scheduled_time_not_at_start_up(tmp_path):
    home = tmp_path / "airflow_home"
    home.mkdir()
    migrate(home)
    env = airflow_environment(home, Lakehouse(str(tmp_path / "lakehouse")))
    before = datetime.now(UTC)
    serialized = airflow(env, "dags", "reserialize")
    assert serialized.returncode == 0, serialized.stderr[-3000:]

    next_runs = airflow_python(env, NEXT_RUNS)
    maintenance = datetime.fromisoformat(next_runs["ysb_maintenance"])
    # The next midnight (UTC), not the last one: the scheduler creates no run before then.
    assert maintenance > before and (maintenance.hour, maintenance.minute) == (0, 0)
    assert (maintenance - before).total_seconds() <= 24 * 3600
    assert next_runs["ysb_consistency_check"] is None  # run by hand only


def test_every_catalog_table_is_an_asset_of_the_task_that_writes_it():
    from airflow.dag_processing.dagbag import DagBag

    from lakehouse_airflow.assets import task_tables

    bag = DagBag(dag_folder=str(DAGS_DIR))
    outlets = {
        (dag_id, task.task_id): [(a.name, a.group) for a in task.outlets]
        for dag_id, dag in bag.dags.items()
        for task in dag.tasks
        if task.outlets
    }
    declared = {name for assets in outlets.values() for name, _ in assets}
    assert declared == {t.name for t in catalog.tables()}
    groups = {name: group for assets in outlets.values() for name, group in assets}
    assert groups == {
        t.name: "lakehouse_ops" if t.layer == "ops" else "lakehouse" for t in catalog.tables()
    }
    # The ops records shared by several tasks: progress by every streaming query, rule results by
    # every task with rules, maintenance records by each maintenance task.
    writers = {
        name: sorted(
            task for (_, task), assets in outlets.items() if (name, groups[name]) in assets
        )
        for name in ("ops.query_progress", "ops.expectation_results")
    }
    assert writers == {
        "ops.query_progress": sorted(t.task for t in catalog.tasks() if t.streamed),
        "ops.expectation_results": sorted(
            t.task for t in catalog.tasks() if any(s.expectations for s in task_tables(t))
        ),
    }
    assert "silver_ad_events" in writers["ops.expectation_results"]
    maintenance = [a for (dag_id, _), a in outlets.items() if dag_id == "ysb_maintenance"]
    assert maintenance == [[("ops.table_maintenance", "lakehouse_ops")]] * len(catalog.tables())
