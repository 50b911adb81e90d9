"""The hourly DAG run by a real Airflow (its own tasks, on the warm engine or by spark-submit) over generated data."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from airflow_env import airflow, airflow_environment, airflow_python
from helpers import START, assert_tables_match_oracle, oracle, run_job, table
from pyspark.sql import functions as F

from lakehouse import catalog
from lakehouse.periods import Periods
from lakehouse.spark import engine
from lakehouse_airflow.assets import partition_keys, partitioned, task_tables
from lakehouse_tools.generator import campaign_dimension, write_campaigns, write_hours

# What Airflow's metadata DB knows of the lakehouse's Assets: each table, the tasks that write and
# read it, and the asset events the run produced (what the UI's Assets page shows).
# The session's Airflow home is shared with other tests that run this DAG (the lineage test), so
# the events and summaries read are those of this test's own run: the DAG's newest run.
READ_ASSETS = """
import json
from airflow.models.asset import AssetEvent, AssetModel, TaskInletAssetReference, TaskOutletAssetReference
from airflow.models.dagrun import DagRun
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
with create_session() as session:
    names = {asset.id: asset.name for asset in session.query(AssetModel)}
    hourly = lambda refs: refs.filter_by(dag_id="ysb_hourly")
    run = session.query(DagRun).filter_by(dag_id="ysb_hourly").order_by(DagRun.id.desc()).first()
    print(json.dumps({
        "assets": {asset.name: [asset.uri, asset.group] for asset in session.query(AssetModel)},
        "outlets": sorted([r.task_id, names[r.asset_id]] for r in hourly(session.query(TaskOutletAssetReference))),
        "inlets": sorted([r.task_id, names[r.asset_id]] for r in hourly(session.query(TaskInletAssetReference))),
        "run": run.run_id,
        "events": sorted(
            [e.source_run_id, e.source_task_id, names[e.asset_id], e.extra, e.partition_key]
            for e in session.query(AssetEvent).filter_by(source_dag_id="ysb_hourly")
        ),
        "summaries": {
            x.task_id: x.value
            for x in session.query(XComModel).filter_by(key="return_value", dag_id="ysb_hourly", run_id=run.run_id)
        },
    }))
"""


def expected_lines(lakehouse) -> int:
    return oracle(lakehouse).lines


# An event of an ad the dimension learns only after the first run (quarantined, then admitted).
AD_FIXED_LATER = "ad-fixed-later"


def test_hourly_dag_run_by_airflow_matches_the_oracle(spark, lakehouse, airflow_home):
    campaigns = write_campaigns(lakehouse, seed=21)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=21)
    late_ad_line = land_an_event_of_an_unknown_ad(lakehouse)
    env = airflow_environment(airflow_home, lakehouse)

    logical_date = (START + timedelta(hours=2)).isoformat()
    result = airflow(env, "dags", "test", "ysb_hourly", logical_date)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "state=success" in output, output[-5000:]

    assert_tables_match_oracle(spark, lakehouse)
    assert all(
        table(spark, lakehouse, t.name).count() > 0 for t in catalog.tables() if t.layer == "gold"
    )

    # Every catalog table is an Asset (the ops records in a group of their own), with its writers
    # and readers; each task's outlets are the tables its job may write.
    assets = airflow_python(env, READ_ASSETS)
    assert assets["assets"] == {
        t.name: [f"delta://{t.name}/", "lakehouse_ops" if t.layer == "ops" else "lakehouse"]
        for t in catalog.tables()
    }
    assert assets["outlets"] == sorted(
        [t.task, written.name] for t in catalog.tasks() for written in task_tables(t)
    )
    assert assets["inlets"] == sorted([t.task, up] for t in catalog.tasks() for up in t.upstream)

    if engine() != "connect":
        assert "local[2]" in output  # spark-submit against the master of the JSON connection
        # The drivers started the fast way (the operator's options, not the tests'), and their
        # lines carry only the task logger's time: neither Spark's nor Python logging's own.
        assert "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1" in output
        assert re.search(r"INFO lakehouse[.\w]*: silver\.ad_events", output), output[-5000:]
        for own_time in (
            r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN)",
            r"\d\d:\d\d:\d\d,\d{3} INFO",
        ):
            assert not re.search(own_time, output), re.search(own_time, output)
        return
    # On the engine each Spark task returned its job's summary (an XCom the UI shows), silver's with
    # the account of every batch it ran; by spark-submit the tasks return nothing.
    summaries = {
        task: json.loads(value) if isinstance(value, str) else value
        for task, value in assets["summaries"].items()
    }
    silver = summaries["silver_ad_events"]
    lines = expected_lines(lakehouse)
    assert silver["table"] == "silver.ad_events" and silver["input_rows"] == lines, silver
    assert sum(batch["lines"] for batch in silver["batches"]) == lines, silver
    assert {summaries[t.task]["table"] for t in catalog.tasks() if t.streamed} == {
        t.name for t in catalog.tasks() if t.streamed
    }
    first_run = [e for e in assets["events"] if e[0] == assets["run"]]
    assert_events_say_what_was_written(spark, lakehouse, first_run)

    # A second run with nothing new writes nothing, so it emits no asset event at all.
    later = (START + timedelta(hours=3)).isoformat()
    again = airflow(env, "dags", "test", "ysb_hourly", later)
    assert again.returncode == 0, (again.stdout + again.stderr)[-5000:]
    after = airflow_python(env, READ_ASSETS)
    assert after["run"] != assets["run"]
    assert [e for e in after["events"] if e[0] == after["run"]] == []
    assert [e for e in after["events"] if e[0] == assets["run"]] == first_run

    # The dimension learns the ad: the next run, with no new event, admits the quarantined line
    # into silver, gold and the sessions (no backfill), and marks it resolved.
    with campaigns.open("a") as dimension:
        dimension.write(f"{AD_FIXED_LATER},{campaign_dimension(21)[0][1]}\n")
    fixed = airflow(env, "dags", "test", "ysb_hourly", (START + timedelta(hours=4)).isoformat())
    assert fixed.returncode == 0, (fixed.stdout + fixed.stderr)[-5000:]
    assert_tables_match_oracle(spark, lakehouse)
    resolved = table(spark, lakehouse, "silver.quarantine_ad_events").filter(
        "resolved_at IS NOT NULL"
    )
    assert [(r.raw_line, r.resolved_by) for r in resolved.collect()] == [
        (late_ad_line, "replay after upstream change")
    ]


def land_an_event_of_an_unknown_ad(lakehouse) -> str:
    """One valid event in hour 00:00 of an ad the dimension lacks yet; its line."""
    line = json.dumps(
        {
            "event_id": "e-fixed-later",
            "user_id": "u-fixed-later",
            "page_id": "p-1",
            "ad_id": AD_FIXED_LATER,
            "ad_type": "banner",
            "event_type": "view",
            "event_time": str(int((START + timedelta(minutes=30)).timestamp() * 1000)),
            "ip_address": "10.0.0.1",
        }
    )
    folder = Path(lakehouse.landing_events, f"{START:%Y-%m-%d}", f"{START:%H}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fixed-later.jsonl").write_text(line + "\n")
    return line


def assert_events_say_what_was_written(spark, lakehouse, events: list) -> None:
    """The first run's events: one per table it wrote, with its rows and hours (one per event
    period, its partition key, for a table a DAG is scheduled on by partitions).

    A table its run added nothing to has none (only tables with rows); the rows of the append-only
    tables, over every event, are the table's rows; each event names the event hours written.
    """
    # A write is one event without a key, or one per period it wrote for a partition-consumed table.
    writes: dict[tuple, tuple[dict, list]] = {}
    for run, task, name, extra, key in events:
        writes.setdefault((run, task, name), (extra, []))[1].append(key)
    by_table: dict[str, list[dict]] = {}
    for (_, task, name), (extra, keys) in writes.items():
        assert set(extra) >= {"rows", "grain", "periods", "mode"}, (task, name, extra)
        assert extra["rows"] > 0 or name == "gold.open_sessions", (task, name, extra)
        keyed = partition_keys(extra["periods"], extra["grain"]) if partitioned(name) else []
        assert sorted(keys, key=str) == (keyed or [None]), (
            task,
            name,
            keys,
        )
        by_table.setdefault(name, []).append(extra)
    counts = {
        t.name: table(spark, lakehouse, t.name).count()
        for t in catalog.tables()
        if t.name != "ops.table_maintenance"
    }
    assert sorted(by_table) == sorted(
        name for name, rows in counts.items() if rows or name == "gold.open_sessions"
    ), counts
    # One progress event per streaming query; one expectations event per task with rules.
    assert len(by_table["ops.query_progress"]) == sum(t.streamed for t in catalog.tasks())
    appended = [
        "dims.campaigns",
        "bronze.ad_events",
        "silver.ad_events",
        "silver.quarantine_ad_events",
        "ops.silver_batch_metrics",
        "ops.query_progress",
        "ops.expectation_results",
        "gold.user_sessions",
        "ops.late_session_events",
    ]
    assert {n: sum(e["rows"] for e in by_table.get(n, [])) for n in appended} == {
        n: counts[n] for n in appended
    }
    hours = (
        table(spark, lakehouse, "silver.ad_events")
        .select(F.date_trunc("HOUR", "event_time").alias("h"))
        .distinct()
    )
    written_hours = Periods.of(r.h for r in hours.collect())
    # The sessions task's: every hour a closed session spans, start to end, and each late event's.
    spans = table(spark, lakehouse, "gold.user_sessions").select(
        F.explode(
            F.sequence(
                F.date_trunc("HOUR", "session_start"),
                F.date_trunc("HOUR", "session_end"),
                F.expr("INTERVAL 1 HOUR"),
            )
        ).alias("h")
    )
    late = table(spark, lakehouse, "ops.late_session_events").select(
        F.date_trunc("HOUR", "event_time").alias("h")
    )
    session_hours = Periods.of(r.h for r in spans.union(late).distinct().collect()).isoformats()
    assert session_hours, "the first run closed no session: the check below would prove nothing"
    for name, extras in by_table.items():
        spec = catalog.get(name)
        writer = catalog.get(spec.written_by or name) if spec.operation is None else None
        if writer is not None and writer.write is catalog.Write.SESSIONS:
            assert [e["periods"] for e in extras] == [session_hours], name
        elif writer is not None and writer.batch:
            # A day table's events name the days of the hours written.
            periods = written_hours.to(writer.grain).isoformats()
            assert [(e["grain"], e["periods"]) for e in extras] == [
                (writer.grain.value, periods)
            ], name
        if name in ("dims.campaigns", "bronze.ad_events"):
            assert extras[0]["periods"] == [], name


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
