"""
### YSB hourly export

Writes each event hour of `gold.campaign_hourly` as a CSV report for a BI tool, into the
lakehouse's outbox: `<LAKEHOUSE_ROOT>/outbox/gold.campaign_hourly/2026-11-20T02.csv`.

Scheduled by the table's **hour partitions**, not by the clock: every `ysb_hourly` task publishes
one partitioned asset event per event hour it wrote (the hours an incremental run touched, late
ones included; the hours a backfill or repair replaced). This DAG runs once per such hour, its run's
partition key being the hour (`2026-11-20T02`), so a backfill of three hours makes three runs and a
late event re-runs the export of its hour. The partitioned runs view of the UI lists them by key.

Reads the table with delta-rs (no Spark); a re-run replaces that hour's report.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, PartitionedAssetTimetable, StartOfHourMapper, task

from lakehouse import catalog
from lakehouse_airflow.assets import asset

GOLD = catalog.get("gold.campaign_hourly")

with DAG(
    dag_id="ysb_hourly_export",
    # StartOfHourMapper: the producer's key 2026-11-20T02:00:00 becomes this DAG's 2026-11-20T02.
    schedule=PartitionedAssetTimetable(
        assets=asset(GOLD), default_partition_mapper=StartOfHourMapper()
    ),
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    doc_md=__doc__,
    tags=["ysb", "lakehouse", "export"],
) as dag:

    @task
    def export_campaign_hourly(dag_run=None) -> dict:
        """The run's event hour of gold.campaign_hourly as a CSV report in the outbox."""
        from lakehouse.config import Lakehouse
        from lakehouse_airflow.exports import export_hour

        return export_hour(Lakehouse.from_env(), GOLD.name, dag_run.partition_key)

    export_campaign_hourly()
