"""gold.campaign_windows: YSB's views per campaign per 10-second event-time window.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/gold_campaign_windows.py [--lakehouse-root DIR]
    spark-submit ... jobs/gold_campaign_windows.py --mode batch --start 2026-11-20T00:00Z --end 2026-11-20T03:00Z

Incremental mode streams silver's new rows (availableNow) and recomputes, per micro-batch, the
event hours they touch; batch mode recomputes [start, end). Both replace exactly those hours with
Delta replaceWhere, so reruns are idempotent and late events are counted in their own hour.
Why not a streaming aggregation with a watermark in append mode: rows behind the watermark would
be dropped from gold, and under availableNow the last windows would wait in state for the next run.
"""

from lakehouse.runtime import parse_job_args, run_gold_job, run_job
from lakehouse.schemas import GOLD_CAMPAIGN_WINDOWS_SCHEMA
from lakehouse.spark import build_spark_session
from lakehouse.tables.gold_campaign_windows import campaign_windows


def main(argv: list[str] | None = None) -> None:
    args = parse_job_args(__doc__.splitlines()[0], argv)
    spark = build_spark_session("gold_campaign_windows")
    run_gold_job(spark, args, "gold.campaign_windows", campaign_windows, GOLD_CAMPAIGN_WINDOWS_SCHEMA)


if __name__ == "__main__":
    run_job(main)
