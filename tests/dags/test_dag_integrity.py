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
    from lakehouse_airflow.assets import task_tables

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
    # preflight's problems need a person, not a retry (its refusal is final, in a line).
    assert {name: dag.get_task(name).retries for name in dag.task_ids} == {
        name: 0 if name == "preflight" else 2 for name in dag.task_ids
    }
    assert set(dag.params.keys()) == {
        "mode",
        "start",
        "end",
        "confirm_long_interval",
        "full_refresh",
        "source",
        "kafka_topic",
    }

    for table in tables:
        task = dag.get_task(table.task)
        assert [a.name for a in task.outlets] == [t.name for t in task_tables(table)]
        assert [t.name for t in task_tables(table)][: len(catalog.written_by_task(table))] == [
            t.name for t in catalog.written_by_task(table)
        ]
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


def test_the_consistency_check_offers_each_table_it_recomputes_or_every_table():
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.definitions.param import ParamValidationError

    from lakehouse import catalog

    dag = DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_consistency_check"]
    table = dag.params.get_param("table")
    assert (table.value, table.schema["enum"]) == (
        "",
        ["", *(t.name for t in catalog.batch_tables())],
    )
    args = dag.get_task("consistency_check").application_args
    assert args[args.index("--table") + 1] == "{{ params.table }}"
    params = copy.deepcopy(dag.params)
    with pytest.raises(ParamValidationError, match="'gold.nope' is not one of"):
        params.update({"table": "gold.nope"})


@pytest.mark.parametrize(
    ("conf", "refusal"),
    [
        ({"start": "2026-13-45T25:00Z"}, "Not an ISO-8601 time: '2026-13-45T25:00Z'"),
        ({"start": None}, "mode=batch needs the start and end params"),
    ],
    ids=["no-such-date", "no-start"],
)
def test_a_bad_interval_is_refused_by_preflight_saying_what_to_type(conf, refusal):
    """What the params' schemas let through (tests/dags/test_trigger_refusals.py: what they
    refuse); preflight refuses it in a sentence, before any Spark task."""
    from airflow.dag_processing.dagbag import DagBag

    from lakehouse_airflow.preflight import preflight

    dag = DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_hourly"]
    params = copy.deepcopy(dag.params)
    good = {"mode": "batch", "start": "2026-11-20T13:00Z", "end": "2026-11-20T14:00+00:00"}
    params.update({**good, **conf})
    validated = params.validate()  # what the trigger form and the REST API check
    problems = [p for p in preflight(validated, "manual", None) if "Landing directory" not in p]
    assert len(problems) == 1 and problems[0].startswith(refusal), problems
    assert problems[0].endswith(
        "Type whole hours in UTC, e.g. start=2026-11-20T13:00Z and end=2026-11-20T16:00Z for the hours 13:00 to 15:00."
    )
    assert [
        p for p in preflight(good | {"source": "files"}, "manual", None) if "Landing" not in p
    ] == []


def test_an_unknown_mode_is_refused_when_the_run_is_created():
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.definitions.param import ParamValidationError

    dag = DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_hourly"]
    params = copy.deepcopy(dag.params)
    with pytest.raises(ParamValidationError) as refused:
        params.update({"mode": "stream"})  # what the trigger form and the REST API check
    assert str(refused.value).splitlines()[0] == (
        "Invalid input for param mode: 'stream' is not one of ['incremental', 'batch']"
    )


def test_every_param_says_what_a_backfill_does_with_it():
    """The Backfill dialog shows the Run Parameters: each says a backfill ignores it, as the DAG's docs do."""
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAGS_DIR)).dags["ysb_hourly"]
    assert "A backfill ignores the Run Parameters" in dag.doc_md
    described = {name: dag.params.get_param(name).description for name in dag.params}
    assert all(described.values()), described
    mentions = {
        name: ("backfill" in text or "Incremental runs only" in text)
        for name, text in described.items()
    }
    assert mentions == {name: name != "kafka_topic" for name in described}, described
