"""The hour partitions of gold through a real scheduler: `ysb_hourly_export` runs once per event hour written.

A 3-hour backfill of `ysb_hourly` replaces event hours 00:00-02:00 of gold.campaign_hourly, each
backfill run publishing its hour as a partition key; the export DAG then runs exactly three times,
one per key, each writing that hour's report. An incremental run whose new files hold late events
publishes the late hours too, and their exports run again. By spark-submit (a `spark`
connection), the driver's summary reaches the operator, so its events carry the same hours.
"""

from __future__ import annotations

import csv
import json
import time
from datetime import timedelta

import pytest
from airflow_env import (
    airflow,
    airflow_environment,
    airflow_services,
    create_backfill,
    describe_failures,
    metadata_query,
    migrate,
    reserialize_and_pause,
    short_retry_delay,
    wait_for_runs,
)
from helpers import START, run_pipeline

from lakehouse.config import Lakehouse
from lakehouse_airflow.exports import hour_of_key, report_path
from lakehouse_tools.generator import Disorder, write_campaigns, write_hours

GOLD = "gold.campaign_hourly"
EXPORT = "ysb_hourly_export"


def export_runs(airflow_home) -> list[tuple[str, str]]:
    """The export DAG's runs, oldest first: (partition key, state)."""
    return metadata_query(
        airflow_home,
        "SELECT partition_key, state FROM dag_run WHERE dag_id = ? ORDER BY id",
        EXPORT,
    )


def pending_exports(airflow_home) -> list[tuple]:
    """Hour partitions published for the export that the scheduler has not made a run of yet.

    A producer's asset event records its partition for the export (asset_partition_dag_run) in
    the event's own transaction; the scheduler then creates one run per pending row and links it
    (created_dag_run_id). An export run comes from nowhere else (catchup=False, no clock schedule).
    """
    return metadata_query(
        airflow_home,
        "SELECT partition_key FROM asset_partition_dag_run "
        "WHERE target_dag_id = ? AND created_dag_run_id IS NULL "
        "UNION ALL SELECT CAST(asset_id AS TEXT) FROM asset_dag_run_queue WHERE target_dag_id = ?",
        EXPORT,
        EXPORT,
    )


def wait_for_exports(airflow_home, count: int, log_dir, timeout: float = 300) -> list[tuple]:
    """Wait until ``count`` export runs exist, all have finished and no published partition awaits
    a run: called once the producer's runs have finished, so a run too many would be among them.

    (Was: a 15 s sleep after the runs finished, in which one more run would have been queued; the
    pending partitions say so without a wait, and for any delay.)
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = export_runs(airflow_home)
        if (
            len(runs) >= count
            and all(state in ("success", "failed") for _, state in runs)
            and not pending_exports(airflow_home)
        ):
            return export_runs(airflow_home)
        time.sleep(0.25)  # two read-only queries (~1 ms)
    raise AssertionError(
        f"{EXPORT}: runs {export_runs(airflow_home)}, partitions awaiting a run "
        f"{pending_exports(airflow_home)}; logs in {log_dir}"
    )


def report_rows(lakehouse, key: str) -> int:
    with open(report_path(lakehouse, GOLD, hour_of_key(key)), newline="") as report:
        return sum(1 for _ in csv.DictReader(report))


def gold_rows_per_hour(spark, lakehouse) -> dict[str, tuple]:
    """Each event hour's rows of gold.campaign_hourly (sorted tuples), keyed like the export's runs."""
    frame = spark.read.format("delta").load(lakehouse.table(GOLD).path)
    hours: dict[str, list] = {}
    for row in frame.collect():
        key = row["hour_start"].strftime("%Y-%m-%dT%H")
        hours.setdefault(key, []).append(tuple(row))
    return {key: tuple(sorted(rows, key=repr)) for key, rows in hours.items()}


def test_the_export_runs_once_per_hour_a_backfill_or_a_late_event_wrote(spark, lakehouse, tmp_path):
    airflow_home = tmp_path / "airflow_home"
    airflow_home.mkdir()
    migrate(airflow_home)
    short_retry_delay(airflow_home)  # a failed try retried after seconds, not the DAG's minute
    env = airflow_environment(airflow_home, lakehouse)
    # History: three hours streamed into every layer outside Airflow (no asset events).
    write_campaigns(lakehouse, seed=47)
    write_hours(lakehouse, START, 3, events_per_second=0.05, seed=47)
    run_pipeline(lakehouse)
    reserialize_and_pause(env, "ysb_maintenance")  # one CLI process for both

    with airflow_services(env, tmp_path / "airflow-logs") as services:
        # Runs at logical dates 01:00..03:00 own event hours 00:00, 01:00 and 02:00.
        create_backfill(env, START + timedelta(hours=1), START + timedelta(hours=3))
        # The 3 backfill runs and the scheduler's latest hourly run (catchup=False), which finds
        # nothing new and so publishes no hour.
        runs = wait_for_runs(env, count=4, log_dir=services.log_dir)
        assert {run["state"] for run in runs} == {"success"}, describe_failures(env, runs)
        exports = wait_for_exports(airflow_home, 3, services.log_dir)
        # Exactly three runs, one per key (the backfill's runs may finish in any order).
        assert sorted(exports) == [
            ("2026-11-20T00", "success"),
            ("2026-11-20T01", "success"),
            ("2026-11-20T02", "success"),
        ], exports
        gold = gold_rows_per_hour(spark, lakehouse)
        for key in ("2026-11-20T00", "2026-11-20T01", "2026-11-20T02"):
            assert report_rows(lakehouse, key) == len(gold[key]), key

        # A fourth producer hour lands, with events that arrive 90 minutes late: an incremental run
        # recomputes hour 03:00 and the earlier hours those events belong to.
        write_hours(lakehouse, START + timedelta(hours=3), 1, events_per_second=0.05, seed=47)
        assert airflow(env, "dags", "trigger", "ysb_hourly").returncode == 0
        runs = wait_for_runs(env, count=len(runs) + 1, log_dir=services.log_dir)
        assert {run["state"] for run in runs} == {"success"}, describe_failures(env, runs)
        after = gold_rows_per_hour(spark, lakehouse)
        # The hours whose rows changed, seen in the table itself: 03:00 and the late 01:00, 02:00
        # (the generator is seeded, so which hours its late events fall in is fixed).
        changed = sorted(key for key in after if after[key] != gold.get(key))
        assert changed == ["2026-11-20T01", "2026-11-20T02", "2026-11-20T03"], changed
        exports = wait_for_exports(airflow_home, 6, services.log_dir)
        assert len(exports) == 6, exports
        assert sorted(exports[3:]) == [(key, "success") for key in changed], exports
        for key in changed:
            assert report_rows(lakehouse, key) == len(after[key]), key


# Long tier (`make test-long`): ~3 minutes, a spark-submit JVM per task. Spark-submit drivers stay
# in the suite (tests/faults/test_fault_injection.py, tests/kafka), and so do a task's published
# hours (the test above, on the engine; tests/dags/test_hour_partitions.py).
@pytest.mark.long
def test_a_spark_submit_run_publishes_the_hours_it_wrote(tmp_path):
    """The whole hourly DAG by spark-submit (`airflow dags test`, a `spark` connection): the
    driver's summary reaches the asset events, one per table and event hour written."""
    home = tmp_path / "airflow_home"
    home.mkdir()
    migrate(home)
    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    # One producer hour, no disorder: every event is of hour 00:00, none malformed or late.
    write_campaigns(lakehouse, seed=53)
    write_hours(lakehouse, START, 1, events_per_second=0.02, seed=53, disorder=Disorder.none())
    env = airflow_environment(
        home,
        lakehouse,
        AIRFLOW_CONN_SPARK_LAKEHOUSE=json.dumps({"conn_type": "spark", "host": "local[2]"}),
        LAKEHOUSE_ENGINE="local",
        LAKEHOUSE_METASTORE="none",
    )
    result = airflow(env, "dags", "test", "ysb_hourly", "2026-11-20T03:00:00+00:00")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    events = metadata_query(
        home,
        "SELECT a.name, e.partition_key FROM asset_event e JOIN asset a ON a.id = e.asset_id "
        "WHERE a.\"group\" = 'lakehouse' ORDER BY a.name, e.partition_key",
    )
    # No quarantined line: no event for the quarantine. The sessions' incremental summary names no
    # event hours (lakehouse.flows.sessions), so their tables get one event without a key.
    assert events == [
        ("bronze.ad_events", None),
        ("dims.campaigns", None),
        ("gold.ad_hourly", "2026-11-20T00:00:00"),
        ("gold.ad_type_hourly", "2026-11-20T00:00:00"),
        ("gold.campaign_hourly", "2026-11-20T00:00:00"),
        ("gold.campaign_windows", "2026-11-20T00:00:00"),
        ("gold.open_sessions", None),
        ("gold.user_sessions", None),
        ("silver.ad_events", "2026-11-20T00:00:00"),
    ]
