"""Consistency check: recompute event hours in batch mode into a scratch location and diff the live tables.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/consistency_check.py \
        --start 2026-11-20T00:00Z --end 2026-11-20T03:00Z [--lakehouse-root DIR] [--scratch DIR]

Silver is recomputed from bronze and gold from that recomputed silver, with the very functions
the streaming jobs use, into ``<root>/scratch/consistency/<start>_<end>`` (the live tables are
only read). It prints, per table and event hour, the rows found only in the live table and only
in the recomputation, and exits 1 on any difference (0 when the live tables are consistent).
Silver is compared without its lineage columns (which copy of a duplicated event was kept may
legitimately differ).
"""

import argparse
import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.config import Lakehouse, TablePaths
from lakehouse.hours import HourRange, parse_instant
from lakehouse.runtime import log, run_job
from lakehouse.sinks import replace_hours, replace_silver_hours
from lakehouse.sources import bronze_lines_for, delta_hours, require_table
from lakehouse.spark import build_spark_session
from lakehouse.tables.gold_campaign_hourly import campaign_hourly
from lakehouse.tables.gold_campaign_windows import campaign_windows
from lakehouse.tables.silver_ad_events import ad_events_in_hours

GOLD = {"gold.campaign_windows": campaign_windows, "gold.campaign_hourly": campaign_hourly}
LINEAGE = ("source_file", "ingested_at", "rescued_data")


def differences(live: DataFrame, recomputed: DataFrame, hour_column) -> list[tuple]:
    """(hour, only_in_live, only_in_recomputed) for every hour where the two differ."""
    only_live = live.exceptAll(recomputed).groupBy(hour_column.alias("hour")).agg(F.count("*").alias("live"))
    only_new = recomputed.exceptAll(live).groupBy(hour_column.alias("hour")).agg(F.count("*").alias("new"))
    joined = only_live.join(only_new, "hour", "full_outer").na.fill(0).orderBy("hour")
    return [(row.hour, row.live, row.new) for row in joined.collect()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--start", required=True, help="first event hour, e.g. 2026-11-20T00:00Z")
    parser.add_argument("--end", required=True, help="end of the interval (exclusive)")
    parser.add_argument("--scratch", help="where to write the recomputation (default: under the lakehouse)")
    args = parser.parse_args(argv)
    lakehouse = Lakehouse.from_env(args.lakehouse_root)
    hours = HourRange.between(parse_instant(args.start), parse_instant(args.end))
    scratch_root = args.scratch or f"{lakehouse.root}/scratch/consistency/{hours.hours[0]:%Y%m%dT%H}_{len(hours.hours)}h"
    spark = build_spark_session("consistency_check")

    def scratch(name: str) -> TablePaths:
        layer, table = name.split(".")
        return TablePaths(name, f"{scratch_root}/{layer}/{table}", f"{scratch_root}/_no_checkpoint")

    bronze, dim = lakehouse.table("bronze.ad_events"), lakehouse.table("dims.campaigns")
    require_table(spark, dim)
    campaigns = spark.read.format("delta").load(dim.path)
    silver_scratch = scratch("silver.ad_events")
    recomputed_silver = ad_events_in_hours(bronze_lines_for(spark, bronze, hours), campaigns, hours.silver_predicate())
    replace_silver_hours(recomputed_silver, silver_scratch, hours)

    report: list[tuple[str, object, int, int]] = []
    silver_hour = F.date_trunc("hour", "event_time")
    live_silver = delta_hours(spark, lakehouse.table("silver.ad_events"), hours).drop(*LINEAGE)
    new_silver = spark.read.format("delta").load(silver_scratch.path).drop(*LINEAGE)
    report += [("silver.ad_events", *diff) for diff in differences(live_silver, new_silver, silver_hour)]

    for name, transform in GOLD.items():
        target = scratch(name)
        replace_hours(transform(delta_hours(spark, silver_scratch, hours)), target, hours, "", None)
        live = spark.read.format("delta").load(lakehouse.table(name).path).filter(hours.gold_predicate())
        new = spark.read.format("delta").load(target.path)
        report += [(name, *diff) for diff in differences(live, new, F.col("hour_start"))]

    print(f"Consistency check of {hours} (recomputed into {scratch_root}):")
    if not report:
        print("  no differences: silver.ad_events, gold.campaign_windows and gold.campaign_hourly are consistent")
        return
    print(f"  {'table':<24} {'hour':<17} {'only live':>10} {'only recomputed':>16}")
    for name, hour, live_rows, new_rows in report:
        print(f"  {name:<24} {hour:%Y-%m-%d %H:00}  {live_rows:>10} {new_rows:>16}")
    log.error("%d table-hour(s) differ; backfill them (airflow backfill create ...) to repair", len(report))
    sys.exit(1)


if __name__ == "__main__":
    run_job(main)
