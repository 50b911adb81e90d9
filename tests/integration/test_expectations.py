"""Data-quality expectations: every check on record; a failed `fail` rule stops its task until the hour is fixed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers import START, expected_rows, oracle, rows_of, run_job, table
from pyspark.sql import functions as F

from lakehouse import delta_log
from lakehouse.catalog import ExpectationFailed
from lakehouse_tools import cli
from lakehouse_tools.generator import write_campaigns, write_hours

CAMPAIGN_RULE = "every event has a campaign"
SHARE_RULE = "at most 5% of a batch's lines quarantined"
COUNT_RULE = "no negative count"
AD_RULE = "every ad has a campaign"
TASKS = ("dim_campaigns", "bronze_ad_events", "silver_ad_events", "gold_aggregates")


def results(spark, lakehouse) -> list[tuple]:
    """(table, rule, hour or batch, observed, passed, on_failure) of every check, in check order."""
    rows = (
        table(spark, lakehouse, "ops.expectation_results")
        .orderBy("checked_at", "table_name", "hour_start")
        .collect()
    )
    return [
        (r.table_name, r.rule, r.hour_start or r.batch_id, r.observed, r.passed, r.on_failure)
        for r in rows
    ]


def naive(hour: datetime) -> datetime:
    return hour.replace(tzinfo=None)


def test_a_failed_rule_stops_silver_until_its_hour_is_fixed_and_a_warning_only_records(
    spark, lakehouse
):
    write_campaigns(lakehouse, seed=5)
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=5)
    for task in TASKS:
        run_job(task, lakehouse)

    # First run: one result per rule and event hour written (per batch for the share), all holding.
    silver_hours = sorted(
        r.h
        for r in table(spark, lakehouse, "silver.ad_events")
        .select(F.date_trunc("HOUR", "event_time").alias("h"))
        .distinct()
        .collect()
    )
    gold_hours = sorted(
        r.hour_start
        for r in table(spark, lakehouse, "gold.campaign_hourly")
        .select("hour_start")
        .distinct()
        .collect()
    )
    metrics = table(spark, lakehouse, "ops.silver_batch_metrics").collect()
    assert [m.batch_id for m in metrics] == [0]
    share = metrics[0].quarantined / metrics[0].lines
    assert 0 < share <= 0.05
    assert sorted(results(spark, lakehouse), key=str) == sorted(
        [("silver.ad_events", CAMPAIGN_RULE, hour, 0.0, True, "fail") for hour in silver_hours]
        + [("ops.silver_batch_metrics", SHARE_RULE, 0, pytest.approx(share), True, "warn")]
        + [("gold.campaign_hourly", COUNT_RULE, hour, 0.0, True, "fail") for hour in gold_hours]
        # the other tables of gold's task, each by its own rules and grain
        + [("gold.ad_hourly", AD_RULE, hour, 0.0, True, "fail") for hour in gold_hours]
        + [
            ("gold.campaign_daily", COUNT_RULE, day, 0.0, True, "fail")
            for day in sorted({hour.replace(hour=0) for hour in gold_hours})
        ],
        key=str,
    )
    checks_before = len(results(spark, lakehouse))
    # Checks are events: appended without a Delta transaction id, whose lookup rebuilds the table's state.
    assert delta_log.committed_txns(lakehouse.table("ops.expectation_results").path) == {}

    # A row without a campaign reaches silver's hour 00 some other way (a manual write, a bug) ...
    silver_path = lakehouse.table("silver.ad_events").path
    (
        table(spark, lakehouse, "silver.ad_events")
        .filter(F.col("event_hour") == 0)
        .limit(1)
        .withColumn("event_id", F.lit("no-campaign"))
        .withColumn("campaign_id", F.lit(None).cast("string"))
        .withColumn("source_file", F.lit("a manual insert"))
        .write.format("delta")
        .mode("append")
        .save(silver_path)
    )
    # ... and the next file brings one more event for that hour and one line that is not JSON.
    hour_folder = Path(lakehouse.landing_events, f"{START:%Y-%m-%d/%H}")
    event = json.loads(next(hour_folder.glob("*.jsonl")).read_text().splitlines()[0])
    event["event_id"] = "one-more"
    (hour_folder / "part-9000.jsonl").write_text(json.dumps(event) + "\n{not json\n")
    run_job("bronze_ad_events", lakehouse)
    with pytest.raises(ExpectationFailed) as failed:
        run_job("silver_ad_events", lakehouse)
    assert (
        f"silver.ad_events hour {START:%Y-%m-%dT%H:00Z}: rule '{CAMPAIGN_RULE}' "
        "(count_if(campaign_id IS NULL) = 0) measured 1"
    ) in str(failed.value)
    assert "ops.silver_batch_metrics" not in str(failed.value), "a warning does not gate"
    assert results(spark, lakehouse)[checks_before:] == [
        ("ops.silver_batch_metrics", SHARE_RULE, 1, 0.5, False, "warn"),
        ("silver.ad_events", CAMPAIGN_RULE, naive(START), 1.0, False, "fail"),
    ]
    assert (
        table(spark, lakehouse, "silver.ad_events").filter("event_id = 'one-more'").count() == 1
    ), "written, then judged"

    # A retry (or the next hourly run) finds nothing new, and still fails: the hour is not fixed.
    with pytest.raises(ExpectationFailed, match=CAMPAIGN_RULE):
        run_job("silver_ad_events", lakehouse)
    # `lakehouse status` shows the hour failed, and why.
    row = next(r for r in cli.grade(cli.observe(lakehouse)).rows if r.hour == naive(START))
    assert (
        row.state == "failed"
        and f"silver.ad_events: rule '{CAMPAIGN_RULE}' failed (measured 1)" in row.reasons
    )

    # Fixed: the hour passes again, and gold, recomputed, equals the oracle.
    spark.sql(f"DELETE FROM delta.`{silver_path}` WHERE event_id = 'no-campaign'")
    summary = run_job("silver_ad_events", lakehouse)
    assert summary["not_started"] and summary["expectations"] == {"checked": 1, "failed_warn": []}
    assert results(spark, lakehouse)[-1] == (
        "silver.ad_events",
        CAMPAIGN_RULE,
        naive(START),
        0.0,
        True,
        "fail",
    )
    assert cli.observe(lakehouse).failed_rules == {}
    run_job("gold_aggregates", lakehouse)
    assert rows_of(spark, lakehouse, "gold.campaign_hourly") == expected_rows(
        oracle(lakehouse), "gold.campaign_hourly"
    )

    # A backfill checks the hours it recomputed.
    before = len(results(spark, lakehouse))
    end = START + timedelta(hours=1)
    run_job(
        "gold_aggregates",
        lakehouse,
        "--mode",
        "batch",
        "--start",
        f"{START:%Y-%m-%dT%H:%MZ}",
        "--end",
        f"{end:%Y-%m-%dT%H:%MZ}",
    )
    # Each of the task's tables checks its own rules over its periods (the day table: the day).
    assert sorted(results(spark, lakehouse)[before:]) == [
        ("gold.ad_hourly", AD_RULE, naive(START), 0.0, True, "fail"),
        ("gold.campaign_daily", COUNT_RULE, naive(START), 0.0, True, "fail"),
        ("gold.campaign_hourly", COUNT_RULE, naive(START), 0.0, True, "fail"),
    ]
