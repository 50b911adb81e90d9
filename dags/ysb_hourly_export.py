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

from airflow.sdk import StartOfHourMapper

from lakehouse_airflow.exports import export_dag

# StartOfHourMapper: the producer's key 2026-11-20T02:00:00 becomes this DAG's 2026-11-20T02.
dag = export_dag("ysb_hourly_export", StartOfHourMapper(), __doc__)
