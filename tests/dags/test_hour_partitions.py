"""Event hours as Airflow partitions: the keys a task publishes, the DAG that consumes them, its report.

- the export DAG parses (DagBag) and is scheduled by the hour partitions of gold.campaign_hourly;
- a task's written tables become asset events, as Airflow's task runner serializes them: one per
  table and run, except a table a DAG is scheduled on by partitions, one per event period (its
  key); a table the run did not write gets none;
- the export writes exactly the rows of its hour.
"""

from __future__ import annotations

import csv
from datetime import UTC, date, datetime

import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import _serialize_outlet_events
from airflow_env import PROJECT_DIR

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse.object_storage import write_delta
from lakehouse_airflow.assets import PARTITION_CONSUMERS, asset, partition_keys, written
from lakehouse_airflow.exports import export_hour, report_path

H0, H1, H23 = "2026-11-20T00:00:00+00:00", "2026-11-20T01:00:00+00:00", "2026-11-19T23:00:00+00:00"
DAY20 = date(2026, 11, 20)


@pytest.fixture(scope="module")
def dag_bag() -> DagBag:
    return DagBag(dag_folder=str(PROJECT_DIR / "dags"))


def test_the_export_dag_is_scheduled_by_gold_hour_partitions(dag_bag):
    from airflow.partition_mappers.temporal import StartOfHourMapper
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.timetables.simple import PartitionedAssetTimetable

    assert dag_bag.import_errors == {}
    dag = dag_bag.get_dag("ysb_hourly_export")
    assert [task.task_id for task in dag.tasks] == ["export_campaign_hourly"]
    # The timetable as the scheduler reads it: from the serialized DAG.
    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable
    assert isinstance(timetable, PartitionedAssetTimetable)
    gold = asset(catalog.get("gold.campaign_hourly"))
    mapper = timetable.get_partition_mapper(name=gold.name, uri=gold.uri)
    assert isinstance(mapper, StartOfHourMapper)
    # What ysb_hourly publishes for event hour 02:00 is the export's key of that hour.
    assert partition_keys(["2026-11-20T02:00:00+00:00"]) == ["2026-11-20T02:00:00"]
    assert mapper.to_downstream("2026-11-20T02:00:00") == "2026-11-20T02"


def test_partition_keys_are_utc_hours_sorted_without_repeats():
    assert partition_keys([H1, H0, "2026-11-20T01:00:00+01:00", H1]) == [
        "2026-11-20T00:00:00",
        "2026-11-20T01:00:00",
    ]
    assert partition_keys([]) == []


def events_of(
    task_id: str, summary: dict, dag_bag: DagBag, extra: bool = False
) -> list[tuple[str, str | None]]:
    """The asset events the task runner would send for this summary: (asset, partition key), and
    each event's periods with ``extra``."""
    operator = dag_bag.get_dag("ysb_hourly").get_task(task_id)
    declared = operator.outlets  # the operator keeps only the written ones: put them back after
    events = OutletEventAccessors()
    try:
        operator.keep_written_outlets(
            {"outlet_events": events},
            written(catalog.task(task_id), summary),
        )
    finally:
        operator.outlets = declared
    return sorted(
        (event["dest_asset_key"]["name"], event.get("partition_key"))
        + ((tuple(event["extra"]["periods"]),) if extra else ())
        for event in _serialize_outlet_events(events)
    )


def gold_run(summary: dict) -> dict:
    """The summary of the gold_aggregates task for a run that wrote one of its tables: each
    table's own under ``tables`` (lakehouse.flows.recompute)."""
    return {
        "table": "gold.ad_hourly",
        "mode": summary.get("mode"),
        "tables": {summary["table"]: summary},
    }


def test_a_late_hour_is_a_partition_of_every_table_the_run_wrote(dag_bag):
    note = {"batch_id": 4, "rows_written": 6, "rows_deleted": 2, "periods": [H23, H1]}
    summary = {
        "table": "gold.campaign_hourly",
        "micro_batches": 1,
        "input_rows": 9,
        "batches": [note],
        "grain": "hour",
        "periods": [H23, H1],  # the runner's: every batch's periods
    }
    # The export DAG is scheduled by this table's partitions: an event per hour; its query's record
    # one event for the run, the hours in its extra.
    assert events_of("gold_aggregates", gold_run(summary), dag_bag, extra=True) == [
        ("gold.campaign_hourly", "2026-11-19T23:00:00", (H23, H1)),
        ("gold.campaign_hourly", "2026-11-20T01:00:00", (H23, H1)),
        ("ops.code_versions", None, (H23, H1)),
        ("ops.query_progress", None, (H23, H1)),
    ]


def test_a_table_no_dag_is_scheduled_on_by_partitions_gets_one_event_per_run_with_its_hours(
    dag_bag,
):
    hours = [H23, H0, H1, "2026-11-20T02:00:00+00:00"]
    note = {
        "batch_id": 0,
        "lines": 10,
        "valid_lines": 8,
        "inserted": 8,
        "quarantined": 2,
        "quarantined_by_reason": {"malformed_json": 2},
        "periods": hours,
    }
    summary = {
        "table": "silver.ad_events",
        "micro_batches": 1,
        "input_rows": 10,
        "batches": [note],
        "grain": "hour",
        "periods": hours,
        "expectations": {"checked": 4, "failed_warn": []},
    }
    # Four hours, six tables: six events, not twenty-four.
    assert events_of("silver_ad_events", summary, dag_bag, extra=True) == [
        (name, None, tuple(hours))
        for name in (
            "ops.code_versions",
            "ops.expectation_results",
            "ops.query_progress",
            "ops.silver_batch_metrics",
            "silver.ad_events",
            "silver.quarantine_ad_events",
        )
    ]


def test_the_export_dags_name_their_table_as_inlet_so_the_asset_lists_them(dag_bag):
    """The Asset page's consuming tasks are the tasks with the Asset as inlet."""
    for dag_id, table in PARTITION_CONSUMERS.items():
        [export] = dag_bag.get_dag(dag_id).tasks
        assert export.inlets == [asset(catalog.get(table))], dag_id


def test_a_table_without_event_time_gets_one_event_without_a_key_and_nothing_new_gets_none(
    dag_bag,
):
    bronze = {"table": "bronze.ad_events", "micro_batches": 1, "input_rows": 12, "batches": [{}]}
    assert events_of("bronze_ad_events", bronze, dag_bag) == [
        ("bronze.ad_events", None),
        ("ops.query_progress", None),
    ]
    nothing = {
        "table": "gold.campaign_hourly",
        "micro_batches": 0,
        "input_rows": 0,
        "batches": [],
        "not_started": "no new data",
    }
    assert events_of("gold_aggregates", gold_run(nothing), dag_bag) == []


def test_a_backfill_publishes_the_hours_it_replaced(dag_bag):
    summary = {
        "table": "gold.campaign_hourly",
        "mode": "batch",
        "rows_written": 0,
        "grain": "hour",
        "periods": [H0, "2026-11-20T01:00:00+00:00"],  # the runner's: the interval's hours
    }
    # Replaced by nothing is still replaced: the consumer must learn the hours are empty now.
    assert events_of("gold_aggregates", gold_run(summary), dag_bag) == [
        ("gold.campaign_hourly", "2026-11-20T00:00:00"),
        ("gold.campaign_hourly", "2026-11-20T01:00:00"),
        ("ops.code_versions", None),
    ]


def test_the_export_writes_exactly_the_rows_of_its_hour(tmp_path):
    import pyarrow as pa

    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    hour = datetime(2026, 11, 20, 1, tzinfo=UTC)

    def row(campaign: str, at: datetime, views: int) -> dict:
        return {
            "campaign_id": campaign,
            "hour_start": at,
            "views": views,
            "clicks": 1,
            "purchases": 0,
            "distinct_users": 1,
            "ctr": 1 / views,
            "event_date": at.date(),
        }

    rows = [
        row("c2", hour, 4),
        row("c1", hour, 2),
        row("c1", datetime(2026, 11, 20, 0, tzinfo=UTC), 8),
        row("c1", datetime(2026, 11, 21, 1, tzinfo=UTC), 16),  # the same hour of another day
    ]
    schema = pa.schema(
        [
            ("campaign_id", pa.string()),
            ("hour_start", pa.timestamp("us", tz="UTC")),
            ("views", pa.int64()),
            ("clicks", pa.int64()),
            ("purchases", pa.int64()),
            ("distinct_users", pa.int64()),
            ("ctr", pa.float64()),
            ("event_date", pa.date32()),
        ]
    )
    path = lakehouse.table("gold.campaign_hourly").path
    write_delta(path, pa.Table.from_pylist(rows, schema=schema), partition_by=["event_date"])

    done = export_hour(lakehouse, "gold.campaign_hourly", "2026-11-20T01")
    report = report_path(lakehouse, "gold.campaign_hourly", hour)
    assert done == {
        "table": "gold.campaign_hourly",
        "hour": "2026-11-20T01:00:00+00:00",
        "rows": 2,
        "report": report,
    }
    assert report == f"{lakehouse.root}/outbox/gold.campaign_hourly/2026-11-20T01.csv"
    with open(report, newline="") as written_report:
        got = [(r["campaign_id"], r["views"]) for r in csv.DictReader(written_report)]
    assert got == [("c1", "2"), ("c2", "4")]
    # An hour without rows: a report with the header only.
    assert export_hour(lakehouse, "gold.campaign_hourly", "2026-11-20T05")["rows"] == 0
    with pytest.raises(ValueError, match="not an event hour"):
        export_hour(lakehouse, "gold.campaign_hourly", "2026-11-20")


def test_a_day_table_publishes_day_keys_and_the_daily_export_runs_per_day(dag_bag):
    from airflow.partition_mappers.temporal import StartOfDayMapper
    from airflow.serialization.serialized_objects import DagSerialization

    # A run that touched hours 23:00 and 01:00 wrote two days of the day table: two day keys.
    summary = {
        "table": "gold.campaign_daily",
        "micro_batches": 1,
        "batches": [{"batch_id": 2, "rows_written": 3, "periods": [H23, H0]}],
        "grain": "day",
        "periods": ["2026-11-19T00:00:00+00:00", "2026-11-20T00:00:00+00:00"],
    }
    assert events_of("gold_aggregates", gold_run(summary), dag_bag) == [
        ("gold.campaign_daily", "2026-11-19"),
        ("gold.campaign_daily", "2026-11-20"),
        ("ops.code_versions", None),
        ("ops.query_progress", None),
    ]
    dag = dag_bag.get_dag("ysb_daily_export")
    timetable = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable
    daily = asset(catalog.get("gold.campaign_daily"))
    mapper = timetable.get_partition_mapper(name=daily.name, uri=daily.uri)
    assert isinstance(mapper, StartOfDayMapper)
    assert mapper.to_downstream("2026-11-20") == "2026-11-20"
    # An hour table's hour keys roll up to the same day keys (Airflow's own partition mapping).
    assert StartOfDayMapper().to_downstream(partition_keys([H1])[0]) == "2026-11-20"


def test_the_daily_export_writes_exactly_the_rows_of_its_day(tmp_path):
    import pyarrow as pa

    from lakehouse_airflow.exports import export_period

    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    spec = catalog.get("gold.campaign_daily")
    rows = [
        {"campaign_id": c, "views": v, "clicks": 1, "purchases": 0, "distinct_users": 1}
        | {"ctr": 1 / v, "event_date": day}
        for c, v, day in [("c2", 4, DAY20), ("c1", 2, DAY20), ("c1", 8, DAY20.replace(day=21))]
    ]
    schema = pa.schema(
        [
            ("campaign_id", pa.string()),
            ("views", pa.int64()),
            ("clicks", pa.int64()),
            ("purchases", pa.int64()),
            ("distinct_users", pa.int64()),
            ("ctr", pa.float64()),
            ("event_date", pa.date32()),
        ]
    )
    path = lakehouse.table(spec.name).path
    write_delta(path, pa.Table.from_pylist(rows, schema=schema), partition_by=["event_date"])

    done = export_period(lakehouse, spec.name, "2026-11-20")
    assert (done["day"], done["rows"]) == ("2026-11-20T00:00:00+00:00", 2)
    assert done["report"] == f"{lakehouse.root}/outbox/gold.campaign_daily/2026-11-20.csv"
    with open(done["report"], newline="") as written_report:
        got = [(r["campaign_id"], r["views"]) for r in csv.DictReader(written_report)]
    assert got == [("c1", "2"), ("c2", "4")]
    with pytest.raises(ValueError, match="not an event day"):
        export_period(lakehouse, spec.name, "2026-11-20T01")
