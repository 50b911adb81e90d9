"""OpenLineage of one hourly run (docs/lineage.md): Spark's listener (on the engine, or in each
spark-submit driver) and Airflow's provider, both writing JSON lines into one folder."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from airflow_env import airflow, airflow_environment
from helpers import START, private_engine

from lakehouse import catalog
from lakehouse.config import Lakehouse
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


def runs_of(events: list[dict], event: dict) -> list[dict]:
    """Every event of ``event``'s run."""
    return [e for e in events if e["run"]["runId"] == event["run"]["runId"]]


def moment(event: dict) -> datetime:
    return datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def hourly_run(lineage_dir, airflow_home, tmp_path_factory):
    """One hourly run with lineage on, its events: (lakehouse, Airflow's, Spark's)."""
    lakehouse = Lakehouse(root=str(tmp_path_factory.mktemp("run") / "lakehouse"))
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

    if engine() == "connect":
        # The engine stops (as the fixture would at the module's end) so that its application
        # run ends too: every run then has its terminal event.
        subprocess.run([sys.executable, "-m", "lakehouse_tools.engine", "down"], check=False)
    airflow_events = read_events([lineage_dir / "airflow.jsonl"])
    spark_events = read_events(sorted(lineage_dir.glob("spark-*.jsonl")))
    assert spark_events, sorted(p.name for p in lineage_dir.iterdir())
    return lakehouse, airflow_events, spark_events


def test_every_spark_task_names_the_catalogs_tables_and_its_airflow_task(hourly_run):
    lakehouse, airflow_events, spark_events = hourly_run
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


# The OpenLineage spec's JSON schemas: the core and the facets' (openlineage_spec/README.md: from
# which package).
SPEC_DIR = Path(__file__).with_name("openlineage_spec")
TERMINAL = {"COMPLETE", "FAIL", "ABORT"}


class SpecValidator:
    """Validates an event against the core schema (``OpenLineage.json``: the event, its run, job and
    datasets, each facet as a facet) and each facet against the schema its ``_schemaURL`` names,
    when that is a facet of the spec's (the file of the same name, where the spec's version that
    the test holds is another). A custom facet (Spark's ``spark_properties``, the Airflow
    provider's ``airflow``) names the core's base facet, which the core's check covers."""

    def __init__(self) -> None:
        from jsonschema import Draft202012Validator, FormatChecker
        from referencing import Registry, Resource

        self.core = json.loads((SPEC_DIR / "OpenLineage.json").read_text())
        schemas = [self.core] + [
            json.loads(path.read_text()) for path in sorted((SPEC_DIR / "facets").glob("*.json"))
        ]
        self.registry = Registry().with_resources(
            (schema["$id"], Resource.from_contents(schema)) for schema in schemas
        )
        self.by_file = {schema["$id"].rsplit("/", 1)[1]: schema["$id"] for schema in schemas}
        self.checker = FormatChecker()
        self.validator = Draft202012Validator
        self.event = Draft202012Validator(
            self.core, registry=self.registry, format_checker=self.checker
        )
        self.facets: dict[str, object] = {}

    def facet_validator(self, url: str):
        """The validator of a facet whose ``_schemaURL`` is ``url``, or None (not a spec facet)."""
        base, _, fragment = url.partition("#")
        held = self.by_file.get(base.rsplit("/", 1)[-1])
        if held is None or held == self.core["$id"] or not fragment:
            return None
        ref = f"{held}#{fragment}"
        if ref not in self.facets:
            self.facets[ref] = self.validator(
                {"$ref": ref}, registry=self.registry, format_checker=self.checker
            )
        return self.facets[ref]

    def errors(self, event: dict) -> list[str]:
        errors = [f"event: {error.message}" for error in self.event.iter_errors(event)]
        containers = [
            ("run", (event.get("run") or {}).get("facets")),
            ("job", event["job"].get("facets")),
        ]
        for side in ("inputs", "outputs"):
            for dataset in event.get(side) or ():
                for kind in ("facets", "inputFacets", "outputFacets"):
                    containers.append((f"{side}[{dataset['name']}].{kind}", dataset.get(kind)))
        for where, container in containers:
            for key, facet in (container or {}).items():
                url = facet.get("_schemaURL", "") if isinstance(facet, dict) else ""
                if validator := self.facet_validator(url):
                    errors += [
                        f"{where}.{key} ({url}): {error.message}"
                        for error in validator.iter_errors(facet)
                    ]
        return errors


def test_every_event_keeps_the_spec_and_every_spark_run_is_its_tasks(hourly_run):
    """Issue 59: every event valid against the spec's JSON schemas; each run one START and one
    terminal event; on the engine each Spark run's job named after its task and table (a fixed set,
    from the DAG), its datasets the tables' own (no ``_delta_log``), its parent its Airflow task."""
    lakehouse, airflow_events, spark_events = hourly_run
    spec = SpecValidator()
    invalid = {
        f"{e['job']['name']} {e['eventType']} {e['run']['runId']}": errors
        for e in airflow_events + spark_events
        if (errors := spec.errors(e))
    }
    assert not invalid, json.dumps(invalid, indent=1)[:5000]

    # The run cycle: each run exactly one START and one terminal event (more only as RUNNING/OTHER).
    cycles: dict[str, list[str]] = {}
    names: dict[str, set[str]] = {}
    for event in airflow_events + spark_events:
        cycles.setdefault(event["run"]["runId"], []).append(event["eventType"])
        names.setdefault(event["run"]["runId"], set()).add(event["job"]["name"])
    # `airflow dags test` runs the DAG run without the scheduler's transition to running, so the
    # provider's DAG-run START (its on_dag_run_running listener) never comes: that run alone may
    # have its COMPLETE only.
    dag_runs = {e["run"]["runId"] for e in airflow_events if e["job"]["name"] == DAG_ID}
    broken = {
        f"{run} {sorted(names[run])}": types
        for run, types in cycles.items()
        if (types.count("START") != 1 and not (run in dag_runs and types == ["COMPLETE"]))
        or sum(t in TERMINAL for t in types) != 1
    }
    assert not broken, f"{len(broken)} of {len(cycles)} runs: {broken}"
    assert all(len(job) == 1 for job in names.values()), "a run under two job names"

    # No Delta log as a dataset: the tables' own names, as the Airflow side names them.
    logs = {d for e in spark_events for side in ("inputs", "outputs") for d in datasets([e], side)}
    assert not {d for d in logs if "/_delta_log" in d[1]}, sorted(logs)
    landing = {lineage_dataset(lakehouse.landing(s)) for s in {t.source for t in catalog.tables()}}
    tables = {lineage_dataset(lakehouse.table(t.name).path) for t in catalog.tables()}
    assert logs <= tables | landing, sorted(logs - tables - landing)

    if engine() != "connect":
        return  # a driver's query runs are its application's (Airflow task → application → query)
    tasks = {e["job"]["name"]: e for e in airflow_events if e["eventType"] == "COMPLETE"}
    dag_run = tasks[DAG_ID]["run"]["runId"]

    # The fixed set of job names: per task, <dag_id>.<task_id>.<table> for each table it writes
    # (its run records' too), reads upstream or lands from; the engine's own runs (its application,
    # its start's probe) under its name.
    expected = {"lakehouse_engine", "lakehouse_engine.range"}
    jobs = set()
    for spec in catalog.tasks():
        job = f"{DAG_ID}.{spec.task}"
        used = {t.name for t in catalog.written_by_task(spec)} | set(spec.upstream)
        used |= {t.name for t in task_tables(spec)}
        if spec.source:
            used.add(f"landing.{spec.source.split('/')[0]}")
        expected |= {f"{job}.{t}" for t in used}
        jobs.add(job)
    # A run that names no dataset at all (the sessions' state query) is named after its action.
    no_table = {
        e["job"]["name"]
        for e in spark_events
        if not any(x.get("inputs") or x.get("outputs") for x in runs_of(spark_events, e))
    }
    # No machine path, no engine counter in a job's name.
    assert not [e["job"]["name"] for e in spark_events if "/" in e["job"]["name"]]
    seen = {e["job"]["name"] for e in spark_events} - no_table
    assert seen <= expected, sorted(seen - expected)
    assert all(name.startswith((f"{DAG_ID}.", "lakehouse_engine")) for name in no_table), no_table
    # Every task's queries ran on the engine, under its name.
    assert {".".join(name.split(".")[:2]) for name in seen} >= jobs, sorted(seen)

    # Every Spark run of the DAG run has its Airflow task as parent (the DAG run as root), and its
    # job is named after that task; before the run, the engine's own probe has the engine's.
    began = min(moment(e) for e in airflow_events)
    for event in spark_events:
        name = event["job"]["name"]
        parent = (event["run"].get("facets") or {}).get("parent")
        if name == "lakehouse_engine" or (
            moment(event) < began and name.startswith("lakehouse_engine.")
        ):
            continue
        task = ".".join(name.split(".")[:2])
        assert parent and parent["job"]["name"] == task, (name, event["eventType"], parent)
        assert parent["job"]["namespace"] == tasks[task]["job"]["namespace"], name
        assert parent["run"]["runId"] == tasks[task]["run"]["runId"], (name, event["eventType"])
        assert parent["root"]["run"]["runId"] == dag_run, name
