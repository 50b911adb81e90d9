"""Test helpers: run a job in-process, read tables, compare gold with the oracle."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from lakehouse.config import Lakehouse
from lakehouse_tools.oracle import Expected, expected_from_landing

JOBS_DIR = Path(__file__).resolve().parents[1] / "jobs"
PIPELINE = ("dim_campaigns", "bronze_ad_events", "silver_ad_events", "gold_campaign_windows", "gold_campaign_hourly")
START = datetime(2026, 11, 20, 0, tzinfo=timezone.utc)


@lru_cache(maxsize=None)
def _job_module(name: str):
    spec = importlib.util.spec_from_file_location(f"jobs_{name}", JOBS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_job(name: str, lakehouse: Lakehouse, *args: str) -> None:
    """Run ``jobs/<name>.py`` in this process (its SparkSession is the test session)."""
    _job_module(name).main(["--lakehouse-root", lakehouse.root, *args])


def run_pipeline(lakehouse: Lakehouse, *args: str) -> None:
    """One incremental run of every layer, in DAG order."""
    for name in PIPELINE:
        run_job(name, lakehouse, *(args if name.startswith(("silver", "gold")) else ()))


def table(spark: SparkSession, lakehouse: Lakehouse, name: str) -> DataFrame:
    return spark.read.format("delta").load(lakehouse.table(name).path)


def table_version(spark: SparkSession, lakehouse: Lakehouse, name: str) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, lakehouse.table(name).path).history(1).collect()[0].version


def oracle(lakehouse: Lakehouse) -> Expected:
    return expected_from_landing(lakehouse.landing_events, lakehouse.landing_campaigns)


def gold_windows(spark: SparkSession, lakehouse: Lakehouse) -> dict:
    return {
        (row.campaign_id, row.window_start): row.views
        for row in table(spark, lakehouse, "gold.campaign_windows").collect()
    }


def gold_hourly(spark: SparkSession, lakehouse: Lakehouse) -> dict:
    return {
        (row.campaign_id, row.hour_start): (row.views, row.clicks, row.purchases, row.distinct_users, row.ctr)
        for row in table(spark, lakehouse, "gold.campaign_hourly").collect()
    }


def assert_gold_matches_oracle(spark: SparkSession, lakehouse: Lakehouse) -> Expected:
    """Both gold tables equal the plain-Python oracle over the raw landing files, row for row."""
    expected = oracle(lakehouse)
    windows, hourly = gold_windows(spark, lakehouse), gold_hourly(spark, lakehouse)
    assert windows == expected.campaign_windows(), _diff(windows, expected.campaign_windows())
    assert hourly == expected.campaign_hourly(), _diff(hourly, expected.campaign_hourly())
    return expected


def _diff(actual: dict, expected: dict) -> str:
    missing = {k: v for k, v in expected.items() if actual.get(k) != v}
    extra = {k: v for k, v in actual.items() if k not in expected}
    return f"{len(missing)} row(s) differ or missing, e.g. {list(missing.items())[:3]}; {len(extra)} extra, e.g. {list(extra.items())[:3]}"


def assert_tables_match_oracle(spark: SparkSession, lakehouse: Lakehouse) -> Expected:
    """Bronze, silver, quarantine and gold all agree with the oracle over the landing zone."""
    expected = oracle(lakehouse)
    assert table(spark, lakehouse, "bronze.ad_events").count() == expected.lines
    silver_ids = [row.event_id for row in table(spark, lakehouse, "silver.ad_events").select("event_id").collect()]
    assert len(silver_ids) == len(set(silver_ids)), "silver holds an event twice"
    assert set(silver_ids) == set(expected.events)
    quarantine = table(spark, lakehouse, "silver.quarantine_ad_events").groupBy("reason").count().collect()
    assert {row.reason: row["count"] for row in quarantine} == dict(expected.quarantined)
    assert_gold_matches_oracle(spark, lakehouse)
    return expected
