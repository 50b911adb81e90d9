"""The hourly DAG run by a real Airflow (its own tasks, on the warm engine or by spark-submit) over generated data."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from airflow_env import airflow, airflow_environment, airflow_python
from helpers import START, assert_tables_match_oracle, oracle, run_job, table
from pyspark.sql import functions as F

from lakehouse import catalog
from lakehouse.hours import HourRange
from lakehouse.spark import engine
from lakehouse_tools.generator import write_campaigns, write_hours

# What Airflow's metadata DB knows of the lakehouse's Assets: each table, the tasks that write and
# read it, and the asset events the run produced (what the UI's Assets page shows).
READ_ASSETS = """
import json
from airflow.models.asset import AssetEvent, AssetModel, TaskInletAssetReference, TaskOutletAssetReference
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
with create_session() as session:
    names = {asset.id: asset.name for asset in session.query(AssetModel)}
    print(json.dumps({
        "assets": {asset.name: asset.uri for asset in session.query(AssetModel)},
        "outlets": sorted([r.task_id, names[r.asset_id]] for r in session.query(TaskOutletAssetReference)),
        "inlets": sorted([r.task_id, names[r.asset_id]] for r in session.query(TaskInletAssetReference)),
        "events": sorted({names[e.asset_id] for e in session.query(AssetEvent)}),
        "extras": {names[e.asset_id]: e.extra for e in session.query(AssetEvent)},
        "summaries": {x.task_id: x.value for x in session.query(XComModel).filter(XComModel.key == "return_value")},
    }))
"""


def expected_lines(lakehouse) -> int:
    return oracle(lakehouse).lines


def test_hourly_dag_run_by_airflow_matches_the_oracle(spark, lakehouse, airflow_home):
    write_campaigns(lakehouse, seed=21)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=21)
    env = airflow_environment(airflow_home, lakehouse)

    logical_date = (START + timedelta(hours=2)).isoformat()
    result = airflow(env, "dags", "test", "ysb_hourly", logical_date)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "state=success" in output, output[-5000:]

    assert_tables_match_oracle(spark, lakehouse)
    assert all(
        table(spark, lakehouse, t.name).count() > 0 for t in catalog.tables() if t.layer == "gold"
    )

    # Every table is an Asset with its lineage (writer and readers), and the run emitted an event for each.
    assets = airflow_python(env, READ_ASSETS)
    written = [
        t for t in catalog.tables() if t.operation is None
    ]  # not the ops records of every query or of maintenance
    assert assets["assets"] == {t.name: f"delta://{t.name}/" for t in written}
    assert assets["outlets"] == sorted([t.task, t.name] for t in written)
    assert assets["inlets"] == sorted([t.task, up] for t in catalog.tasks() for up in t.upstream)
    assert assets["events"] == sorted(t.name for t in written)

    # On the engine each Spark task returned its job's summary (an XCom the UI shows), silver's with
    # the account of every batch it ran; by spark-submit the tasks return nothing.
    summaries = {
        task: json.loads(value) if isinstance(value, str) else value
        for task, value in assets["summaries"].items()
    }
    if engine() == "connect":
        silver = summaries["silver_ad_events"]
        lines = expected_lines(lakehouse)
        assert silver["table"] == "silver.ad_events" and silver["input_rows"] == lines, silver
        assert sum(batch["lines"] for batch in silver["batches"]) == lines, silver
        assert {summaries[t.task]["table"] for t in catalog.tasks() if t.streamed} == {
            t.name for t in catalog.tasks() if t.streamed
        }
        # Each hour-addressed table's Asset event names the event hours the run wrote (the UI shows them).
        hours = (
            table(spark, lakehouse, "silver.ad_events")
            .select(F.date_trunc("HOUR", "event_time").alias("h"))
            .distinct()
        )
        written_hours = {
            "mode": "incremental",
            "event_hours": HourRange.of(r.h for r in hours.collect()).isoformats(),
        }
        hour_tables = [
            t
            for t in written
            if (t.written_by and catalog.get(t.written_by) or t).write in catalog.HOUR_LAYOUTS
        ]
        assert {t.name: assets["extras"][t.name] for t in hour_tables} == {
            t.name: written_hours for t in hour_tables
        }
        assert assets["extras"]["bronze.ad_events"] == {}
    else:
        assert "local[2]" in output  # spark-submit against the master of the JSON connection


# The task states of the newest ysb_hourly run, with their try numbers.
NEWEST_RUN_STATES = """
import json
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.utils.session import create_session
with create_session() as session:
    run = session.query(DagRun).filter(DagRun.dag_id == "ysb_hourly").order_by(DagRun.id.desc()).first()
    rows = session.query(TaskInstance).filter(TaskInstance.dag_id == "ysb_hourly", TaskInstance.run_id == run.run_id)
    print(json.dumps({ti.task_id: [str(ti.state), ti.try_number] for ti in rows}))
"""


def test_a_failed_gating_rule_fails_silver_once_and_nothing_downstream_runs(
    spark, lakehouse, airflow_home
):
    if engine() != "connect":
        pytest.skip(
            "the engine task fails at once; by spark-submit each retry fails again (two minutes of retries)"
        )
    write_campaigns(lakehouse, seed=22)
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=22)
    env = airflow_environment(airflow_home, lakehouse)
    # Silver's hour 00 already holds an event without a campaign (a manual insert, say) ...
    for task in ("dim_campaigns", "bronze_ad_events", "silver_ad_events"):
        run_job(task, lakehouse)
    (
        table(spark, lakehouse, "silver.ad_events")
        .filter(F.col("event_hour") == START.hour)
        .limit(1)
        .withColumn("event_id", F.lit("no-campaign"))
        .withColumn("campaign_id", F.lit(None).cast("string"))
        .withColumn("source_file", F.lit("a manual insert"))
        .write.format("delta")
        .mode("append")
        .save(lakehouse.table("silver.ad_events").path)
    )
    # ... and the hourly run brings one more event of that hour.
    hour_folder = Path(lakehouse.landing_events, f"{START:%Y-%m-%d/%H}")
    event = json.loads(next(hour_folder.glob("*.jsonl")).read_text().splitlines()[0])
    (hour_folder / "part-9000.jsonl").write_text(
        json.dumps({**event, "event_id": "one-more"}) + "\n"
    )

    result = airflow(env, "dags", "test", "ysb_hourly", (START + timedelta(hours=2)).isoformat())
    output = result.stdout + result.stderr
    assert (
        f"silver.ad_events hour {START:%Y-%m-%dT%H:00Z}: rule 'every event has a campaign'"
        in output
    ), output[-4000:]
    states = airflow_python(env, NEWEST_RUN_STATES)
    assert states["silver_ad_events"] == ["failed", 1], (
        states
    )  # no retry: a retry would find the hour failing again
    assert {states[t.task][0] for t in catalog.tasks() if "silver.ad_events" in t.upstream} == {
        "upstream_failed"
    }, states
    assert states["bronze_ad_events"][0] == "success", states
