"""Consistency check: recompute event periods in batch mode into a scratch location and diff the live tables.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/consistency_check.py \
        --start 2026-11-20T00:00Z --end 2026-11-20T03:00Z [--table gold.user_sessions ...] \
        [--lakehouse-root DIR] [--scratch DIR]

Silver is recomputed from bronze and gold from that recomputed silver, with the very functions
the streaming jobs use (``--table``: only those tables, each from its live upstream unless that is
checked too), into ``<root>/scratch/consistency/<start>_<end>`` (the live tables are only read).
It prints, per table and event period, the rows found only in the live table and only in the
recomputation, and exits 1 on any difference (0 when the live tables are consistent). With a day
table among those checked, the interval widens to whole days, for every table: a day is
recomputed from all of its hours.
Silver is compared without its lineage columns (which copy of a duplicated event was kept may
legitimately differ).
"""

import argparse
import sys
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse import catalog
from lakehouse.config import Lakehouse, Table
from lakehouse.errors import ConfigError
from lakehouse.periods import Grain, Periods, parse_instant
from lakehouse.runner import flow_job
from lakehouse.runtime import log
from lakehouse.sources import delta_periods
from lakehouse.spark import build_spark_session


def differences(live: DataFrame, recomputed: DataFrame, hour_column) -> list[tuple]:
    """(period, only_in_live, only_in_recomputed) for every period where the two differ."""
    only_live = (
        live.exceptAll(recomputed)
        .groupBy(hour_column.alias("hour"))
        .agg(F.count("*").alias("live"))
    )
    only_new = (
        recomputed.exceptAll(live).groupBy(hour_column.alias("hour")).agg(F.count("*").alias("new"))
    )
    joined = only_live.join(only_new, "hour", "full_outer").na.fill(0).orderBy("hour")
    return [(row.hour, row.live, row.new) for row in joined.collect()]


def tables_to_check(given: list[str] | None) -> list[catalog.TableSpec]:
    """The tables named by ``--table`` (in DAG order), or every table with a batch form when none
    is; an unknown name fails. A value may name several, comma-separated; a blank one names none
    (the DAG's form passes its choice, blank for every table)."""
    every = catalog.batch_tables()
    names = [name.strip() for value in given or () for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - {table.name for table in every})
    if unknown:
        raise ConfigError(
            f"--table {', '.join(unknown)}: not a table the check recomputes; "
            f"choose from {', '.join(table.name for table in every)}"
        )
    return [table for table in every if not names or table.name in names]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--start", required=True, help="first event hour, e.g. 2026-11-20T00:00Z")
    parser.add_argument("--end", required=True, help="end of the interval (exclusive)")
    parser.add_argument(
        "--table",
        action="append",
        metavar="NAME",
        help="check only this table (repeatable or comma-separated; default or blank: every table "
        "with a batch form)",
    )
    parser.add_argument(
        "--scratch", help="where to write the recomputation (default: under the lakehouse)"
    )
    args = parser.parse_args(argv)
    checked = tables_to_check(args.table)
    lakehouse = Lakehouse.from_env(args.lakehouse_root)
    asked = Periods.between(parse_instant(args.start), parse_instant(args.end))
    coarsest = max((t.grain for t in checked if t.grain), key=lambda g: g.step, default=Grain.HOUR)
    hours = asked.to(coarsest).hours()
    scratch_root = (
        args.scratch
        or f"{lakehouse.root}/scratch/consistency/{hours.first:%Y%m%dT%H}_{len(hours)}h"
    )
    spark = build_spark_session("consistency_check")

    def scratch(name: str) -> Table:
        layer, table = name.split(".")
        return replace(
            lakehouse.table(name),
            path=f"{scratch_root}/{layer}/{table}",
            checkpoint_root=f"{scratch_root}/_no_checkpoint",
        )

    # Upstream first, each computed from the scratch copies of its recomputed upstream tables (and
    # the live ones it does not recompute, such as bronze).
    recomputed = {table.name: scratch(table.name) for table in checked}
    report: list[tuple[str, object, int, int]] = []
    for table in checked:
        target = recomputed[table.name]
        flow_job(table).recompute(target, hours, reading=recomputed)
        live = delta_periods(spark, lakehouse.table(table.name), hours).drop(*table.lineage)
        new = spark.read.format("delta").load(target.path).drop(*table.lineage)
        report += [(table.name, *diff) for diff in differences(live, new, F.expr(table.period_sql))]

    print(f"Consistency check of {hours} (recomputed into {scratch_root}):")
    if not report:
        names = ", ".join(table.name for table in checked)
        print(f"  no differences: {names} {'is' if len(checked) == 1 else 'are'} consistent")
        return
    print(f"  {'table':<24} {'period':<17} {'only live':>10} {'only recomputed':>16}")
    for name, hour, live_rows, new_rows in report:
        print(f"  {name:<24} {hour:%Y-%m-%d %H:00}  {live_rows:>10} {new_rows:>16}")
    log.error(
        "%d table period(s) differ; backfill them (airflow backfill create ...) to repair",
        len(report),
    )
    sys.exit(1)
