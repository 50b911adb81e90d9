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

from airflow.sdk import StartOfDayMapper

from lakehouse_airflow.assets import DAY_KEY_FORMAT
from lakehouse_airflow.exports import export_dag

# The producer's day keys are already days: the mapper reads them as such.
mapper = StartOfDayMapper(input_format=DAY_KEY_FORMAT)
dag = export_dag("ysb_daily_export", mapper, __doc__)
