"""
### YSB daily export

Writes each UTC day of `gold.campaign_daily` as a CSV report for a BI tool, into the lakehouse's
outbox: `<LAKEHOUSE_ROOT>/outbox/gold.campaign_daily/2026-11-20.csv`.

Scheduled by the table's **day partitions**: a day table's asset events carry one partition key
per day its run replaced (`2026-11-20`), so this DAG runs once per day written, a late event
re-running the export of its day and a backfill of any hour of a day re-running that day's.

Reads the table with delta-rs (no Spark); a re-run replaces that day's report.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, PartitionedAssetTimetable, StartOfDayMapper, task

from lakehouse import catalog
from lakehouse_airflow.assets import DAY_KEY_FORMAT, asset

DAILY = catalog.get("gold.campaign_daily")

with DAG(
    dag_id="ysb_daily_export",
    # The producer's day keys are already days: the mapper reads them as such.
    schedule=PartitionedAssetTimetable(
        assets=asset(DAILY), default_partition_mapper=StartOfDayMapper(input_format=DAY_KEY_FORMAT)
    ),
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    doc_md=__doc__,
    tags=["ysb", "lakehouse", "export"],
) as dag:

    @task
    def export_campaign_daily(dag_run=None) -> dict:
        """The run's UTC day of gold.campaign_daily as a CSV report in the outbox."""
        from lakehouse.config import Lakehouse
        from lakehouse_airflow.exports import export_period

        return export_period(Lakehouse.from_env(), DAILY.name, dag_run.partition_key)

    export_campaign_daily()
