"""Every DAG file parses with no import errors, imports no Spark, and is wired as documented."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
DAG_FILES = sorted(DAGS_DIR.glob("*.py"))

PARSE = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
spark_modules = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "delta", "py4j"))
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dags": sorted(bag.dag_ids), "spark_modules": spark_modules}))
"""


@pytest.mark.parametrize("dag_file", DAG_FILES, ids=[p.name for p in DAG_FILES])
def test_dag_file_parses_without_errors_or_spark(dag_file, tmp_path):
    # A fresh interpreter: the test session itself has imported pyspark already.
    from airflow_env import airflow_environment

    from lakehouse.config import Lakehouse

    env = airflow_environment(tmp_path, Lakehouse(str(tmp_path / "lh")))
    result = subprocess.run(
        [sys.executable, "-c", PARSE, str(dag_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    parsed = json.loads(result.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {}
    assert parsed["dags"], f"{dag_file.name} defines no DAG"
    assert parsed["spark_modules"] == [], "DAG files must not import Spark at parse time"


def test_hourly_dag_shape():
    """One task per catalog table with a query, wired by its upstream tables, with its tables as Assets."""
    from airflow.dag_processing.dagbag import DagBag

    from lakehouse import catalog

    dag = DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_hourly"]
    assert dag.timetable.expression == "0 * * * *"
    assert (dag.catchup, dag.max_active_runs) == (False, 1)
    assert dag.doc_md and "backfill" in dag.doc_md

    tables = catalog.tasks()
    downstream = {
        t.task: sorted(d.task for d in tables if t in catalog.upstream_tasks(d)) for t in tables
    }
    sources = sorted(t.task for t in tables if not catalog.upstream_tasks(t))
    first_batch = sorted(
        t.task for t in tables if t.batch and not any(u.batch for u in catalog.upstream_tasks(t))
    )
    assert {name: sorted(dag.get_task(name).downstream_task_ids) for name in dag.task_ids} == {
        "preflight": ["choose_path"],
        "choose_path": ["batch_recompute", "full_refresh", "incremental"],
        "full_refresh": sources,
        "incremental": sources,
        "batch_recompute": first_batch,
        **downstream,
    }
    # What the catalog says today, spelled out once so a wiring change is seen here.
    assert sources == ["bronze_ad_events", "dim_campaigns"] and first_batch == ["silver_ad_events"]
    assert all(dag.get_task(name).retries == 2 for name in dag.task_ids)
    assert set(dag.params.keys()) == {
        "mode",
        "start",
        "end",
        "full_refresh",
        "source",
        "kafka_topic",
    }

    for table in tables:
        task = dag.get_task(table.task)
        assert [a.name for a in task.outlets] == [t.name for t in catalog.written_by_task(table)]
        assert [a.name for a in task.inlets] == list(table.upstream)
        assert all(a.uri == f"delta://{a.name}/" for a in [*task.outlets, *task.inlets])


def test_maintenance_dag_maintains_every_table_one_at_a_time():
    from airflow.dag_processing.dagbag import DagBag

    from lakehouse import catalog

    dag = DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_maintenance"]
    assert (dag.timetable.expression, dag.max_active_tasks, dag.max_active_runs) == (
        "0 0 * * *",
        1,
        1,
    )
    assert sorted(dag.task_ids) == sorted(
        f"maintain_{t.name.replace('.', '_')}" for t in catalog.tables()
    )
    task = dag.get_task("maintain_silver_ad_events")
    assert (task.job, task.application_args[3], task.application_args[-1]) == (
        "maintenance",
        "silver.ad_events",
        "{{ params.retain_hours }}",
    )
    assert dag.params["retain_hours"] == 168


@pytest.mark.parametrize(
    "conf",
    [
        {"start": "yesterday"},
        {"start": "2026-11-20T13:30Z"},
        {"end": "20.11.2026 14:00"},
        {"mode": "stream"},
    ],
    ids=["not-a-time", "not-a-whole-hour", "not-iso", "unknown-mode"],
)
def test_a_bad_trigger_conf_is_refused_before_any_task_runs(conf):
    """What the UI's trigger form, the REST API and `airflow dags trigger` validate when a run is created."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.definitions.param import ParamValidationError

    dag = DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_hourly"]

    def validated(run_conf: dict) -> dict:
        params = copy.deepcopy(dag.params)
        params.update(run_conf)
        return params.validate()

    good = {"mode": "batch", "start": "2026-11-20T13:00Z", "end": "2026-11-20T14:00+00:00"}
    assert validated(good) | good == validated(good)
    with pytest.raises(ParamValidationError):
        validated({**good, **conf})
