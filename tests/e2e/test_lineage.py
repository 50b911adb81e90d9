"""OpenLineage of one hourly run (docs/lineage.md): Spark's listener (on the engine, or in each
spark-submit driver) and Airflow's provider, both writing JSON lines into one folder."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from airflow_env import airflow, airflow_environment
from helpers import START, private_engine

from lakehouse import catalog
from lakehouse.spark import engine
from lakehouse_airflow.assets import task_tables
from lakehouse_airflow.operators import lineage_dataset
from lakehouse_tools.generator import write_campaigns, write_hours

DAG_ID = "ysb_hourly"


@pytest.fixture(scope="module")
def lineage_dir(tmp_path_factory):
    """Lineage on, into a folder of this module's. On the engine, an engine of its own started
    with it: its listener's settings are read once, when its JVM starts."""
    folder = tmp_path_factory.mktemp("lineage")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEHOUSE_LINEAGE", "1")
        patch.setenv("LAKEHOUSE_LINEAGE_DIR", str(folder))
        if engine() == "connect":
            with private_engine(tmp_path_factory.mktemp("engine"), patch.setenv):
                yield folder
        else:
            yield folder


def read_events(paths) -> list[dict]:
    return [json.loads(line) for path in paths for line in path.read_text().splitlines() if line]


def datasets(events: list[dict], side: str) -> set[tuple[str, str]]:
    return {(d["namespace"], d["name"]) for e in events for d in e.get(side) or ()}


def parent_run(event: dict) -> str | None:
    return ((event["run"].get("facets") or {}).get("parent") or {}).get("run", {}).get("runId")


def spark_runs_of(events: list[dict], task: dict) -> list[dict]:
    """The Spark events of one Airflow task run (``task``: its START and COMPLETE events).

    By spark-submit: the driver's application run, whose parent is the task, and its query runs,
    whose parent is that application. On the engine: its query runs, whose parent is the task (the
    job's Connect sessions carry it as a tag, docs/lineage.md).
    """
    run = task["COMPLETE"]["run"]["runId"]
    apps = {e["run"]["runId"] for e in events if parent_run(e) == run}
    return [e for e in events if parent_run(e) == run or parent_run(e) in apps]


def moment(event: dict) -> datetime:
    return datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))


def test_every_spark_task_names_the_catalogs_tables_and_its_airflow_task(
    lineage_dir, lakehouse, airflow_home
):
    write_campaigns(lakehouse, seed=7)
    # seed 7: one malformed line (the quarantine write, whose query reads the dimension too)
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=7)
    env = airflow_environment(
        airflow_home,
        lakehouse,
        AIRFLOW__OPENLINEAGE__NAMESPACE="ysb-lakehouse",
        AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD="True",  # as the Makefile sets it
        AIRFLOW__OPENLINEAGE__TRANSPORT=json.dumps(
            {"type": "file", "log_file_path": str(lineage_dir / "airflow.jsonl"), "append": True}
        ),
    )
    result = airflow(env, "dags", "test", DAG_ID, (START + timedelta(hours=1)).isoformat())
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "state=success" in output, output[-5000:]

    airflow_events = read_events([lineage_dir / "airflow.jsonl"])
    spark_events = read_events(sorted(lineage_dir.glob("spark-*.jsonl")))
    assert spark_events, sorted(p.name for p in lineage_dir.iterdir())
    tasks: dict[str, dict[str, dict]] = {}
    for event in airflow_events:
        tasks.setdefault(event["job"]["name"], {})[event["eventType"]] = event
    # The engine's application run (its START was written when the engine started).
    engine_app = {e["run"]["runId"] for e in spark_events if e["job"]["name"] == "lakehouse_engine"}
    dag_run = tasks[DAG_ID]["COMPLETE"]["run"]["runId"]
    # On the engine every query run of the DAG run is a task's (foreachBatch's too): none is left
    # with the engine's application as parent (before it, the engine's start probed it with a query).
    began = min(moment(e) for e in airflow_events)
    orphans = {
        e["job"]["name"] for e in spark_events if parent_run(e) in engine_app and moment(e) >= began
    }
    assert not orphans, sorted(orphans)

    def table_of(dataset: tuple[str, str]) -> tuple[str, str]:
        """A dataset as the catalog's storage path: a table's folder (Delta's own log-replay queries
        name ``<table>/_delta_log``), or the landing source (bronze names each hour folder it read)."""
        for spec in catalog.tables():
            folder = lineage_dataset(lakehouse.table(spec.name).path)
            if dataset == folder or dataset[1].startswith(folder[1] + "/"):
                return folder
        for source in {spec.source for spec in catalog.tables() if spec.source}:
            landing = lineage_dataset(lakehouse.landing(source))
            if dataset == landing or dataset[1].startswith(landing[1] + "/"):
                return landing
        return dataset

    for spec in catalog.tasks():
        job = f"{DAG_ID}.{spec.task}"
        task = tasks.get(job, {})
        assert set(task) >= {"START", "COMPLETE"}, (job, sorted(tasks))
        task_run = task["COMPLETE"]["run"]["runId"]
        assert task["START"]["run"]["runId"] == task_run, job
        runs = spark_runs_of(spark_events, task)
        assert runs, f"no Spark run of {job} (Airflow run {task_run})"

        expected_in = {lineage_dataset(lakehouse.table(name).path) for name in spec.upstream}
        if spec.source:
            expected_in.add(lineage_dataset(lakehouse.landing(spec.source)))
        written = {
            lineage_dataset(lakehouse.table(t.name).path) for t in catalog.written_by_task(spec)
        }
        # Beside its tables a task may create its run records' tables (CREATE TABLE IF NOT EXISTS,
        # once: delta-rs appends their rows afterwards, outside Spark).
        records = {lineage_dataset(lakehouse.table(t.name).path) for t in task_tables(spec)}
        # Delta's log-replay queries (a snapshot's state, read) name the log as their output too.
        outputs = {
            table_of(d) for d in datasets(runs, "outputs") if not d[1].endswith("/_delta_log")
        }
        inputs = {table_of(d) for d in datasets(runs, "inputs")}
        assert written <= outputs <= records, (job, sorted(outputs))
        # A MERGE, a replace of hours or a state store reads what it writes.
        assert inputs - outputs == expected_in, (job, sorted(inputs))

        # The Spark runs' parent: by spark-submit the driver's application, whose parent is the
        # Airflow task; on the engine the Airflow task itself. Either way the DAG run is the root.
        roots = {e["run"]["facets"]["parent"]["root"]["run"]["runId"] for e in runs}
        assert roots == {dag_run}, (job, roots)
        if engine() == "connect":
            assert engine_app and not {parent_run(e) for e in runs} & engine_app, job
            assert {parent_run(e) for e in runs} == {task_run}, job
            assert {e["job"]["name"] for e in runs} != {"lakehouse_engine"}, job
        else:
            app = {e["run"]["runId"] for e in runs if parent_run(e) == task_run}
            assert len(app) == 1, (job, app)
            assert {parent_run(e) for e in runs} <= {task_run, *app}, job

        # The Airflow task's own event names its inputs and the tables its run wrote rows to
        # (SparkJobOperator's facets): its own table at least, in a first run.
        assert datasets([task["COMPLETE"]], "inputs") == expected_in, job
        own = lineage_dataset(lakehouse.table(spec.name).path)
        assert {own} <= datasets([task["COMPLETE"]], "outputs") <= records, job
