"""silver.ad_events (+ silver.quarantine_ad_events): parse, validate, deduplicate and enrich bronze.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/silver_ad_events.py \
        [--lakehouse-root DIR] [--generation N]
    spark-submit ... jobs/silver_ad_events.py --mode batch --start 2026-11-20T00:00Z --end 2026-11-20T03:00Z

Incremental mode streams bronze's new lines with trigger(availableNow=True). Each micro-batch is
classified against the current campaign dimension (a stream-static join, re-read every batch so
a dimension update applies from the next batch); valid events are MERGEd into silver on event_id
(insert-only, so a duplicate sent hours later is still recognised and a late event is never
dropped), bad lines are appended to the quarantine with their raw line and a reason.

Batch mode recomputes the event hours of [start, end) from all of bronze with the same functions
and replaces exactly those silver partitions.
"""

from datetime import datetime, timezone

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.faults import fault_point
from lakehouse.hours import HourRange
from lakehouse.runtime import log, parse_job_args, run_available_now, run_job
from lakehouse.schemas import (
    QUARANTINE_AD_EVENTS_SCHEMA,
    SILVER_AD_EVENTS_SCHEMA,
    SILVER_BATCH_METRICS_SCHEMA,
    SILVER_PARTITION_COLUMNS,
)
from lakehouse.sinks import (
    append,
    ensure_table,
    merge_new_rows,
    replace_silver_hours,
    txn_app_id,
    with_conflict_retries,
)
from lakehouse.sources import bronze_lines_for, delta_stream, require_table
from lakehouse.spark import build_spark_session
from lakehouse.tables.silver_ad_events import (
    ad_events_in_hours,
    classify_ad_events,
    deduplicate_ad_events,
    quarantined_ad_events,
    valid_ad_events,
)


def batch_metrics(generation: int, batch_id: int, by_reason: dict, unique: int, inserted: int) -> dict:
    """The stored account of one micro-batch: every line is valid, a duplicate or quarantined."""
    valid_lines = by_reason.get(None, 0)
    quarantined = {reason: count for reason, count in by_reason.items() if reason is not None}
    return {
        "generation": generation,
        "batch_id": batch_id,
        "recorded_at": datetime.now(timezone.utc).replace(tzinfo=None),
        "lines": sum(by_reason.values()),
        "valid_lines": valid_lines,
        "duplicates_in_batch": valid_lines - unique,
        "duplicates_of_earlier_batches": unique - inserted,
        "inserted": inserted,
        "quarantined": sum(quarantined.values()),
        "quarantined_by_reason": quarantined,
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_job_args(__doc__.splitlines()[0], argv)
    spark = build_spark_session("silver_ad_events")
    lakehouse = args.lakehouse
    bronze, dim = lakehouse.table("bronze.ad_events"), lakehouse.table("dims.campaigns")
    silver, quarantine = lakehouse.table("silver.ad_events"), lakehouse.table("silver.quarantine_ad_events")
    require_table(spark, dim)
    ensure_table(spark, silver, SILVER_AD_EVENTS_SCHEMA, SILVER_PARTITION_COLUMNS)
    ensure_table(spark, quarantine, QUARANTINE_AD_EVENTS_SCHEMA, ("ingest_date",))

    def campaigns() -> DataFrame:
        return spark.read.format("delta").load(dim.path)

    if args.mode == "batch":
        recomputed = ad_events_in_hours(
            bronze_lines_for(spark, bronze, args.hours), campaigns(), args.hours.silver_predicate()
        )
        with_conflict_retries(
            lambda: replace_silver_hours(recomputed, silver, args.hours),
            f"silver.ad_events {args.hours}",
        )
        log.info("silver.ad_events: recomputed %s from bronze", args.hours)
        return

    metrics_table = lakehouse.table("ops.silver_batch_metrics")
    ensure_table(spark, metrics_table, SILVER_BATCH_METRICS_SCHEMA, ())
    generation = args.generation_of(silver)
    silver_app_id = txn_app_id(silver, generation, "stream")
    quarantine_app_id = txn_app_id(quarantine, generation, "stream")
    metrics_app_id = txn_app_id(metrics_table, generation, "silver-stream")

    def on_batch(lines: DataFrame, batch_id: int) -> None:
        classified = classify_ad_events(lines, campaigns()).persist()
        try:
            by_reason = {row.reason: row["count"] for row in classified.groupBy("reason").count().collect()}
            valid = deduplicate_ad_events(valid_ad_events(classified)).persist()
            hours = HourRange.of(
                row.hour for row in valid.select(F.date_trunc("hour", "event_time").alias("hour")).distinct().collect()
            )
            fault_point("silver.before_merge", batch_id)
            inserted = 0
            if hours:
                inserted = with_conflict_retries(
                    lambda: merge_new_rows(spark, valid, silver, "event_id", hours, silver_app_id, batch_id),
                    f"silver.ad_events batch {batch_id}",
                )
            fault_point("silver.after_merge", batch_id)
            append(quarantined_ad_events(classified), quarantine, quarantine_app_id, batch_id, ("ingest_date",))
            fault_point("silver.after_quarantine", batch_id)
            unique = valid.count()
            valid.unpersist()
        finally:
            classified.unpersist()
        if inserted is None:  # Delta skipped the MERGE: this batch was committed before a crash
            log.info("silver batch %d: already committed before a restart; skipped", batch_id)
            return
        metrics = batch_metrics(generation, batch_id, by_reason, unique, inserted)
        append(spark.createDataFrame([metrics], SILVER_BATCH_METRICS_SCHEMA), metrics_table, metrics_app_id, batch_id)
        log.info(
            "silver batch %d: %d line(s): %d valid, %d duplicate(s) in the batch, %d of earlier batches, "
            "%d inserted; %d quarantined %s; %s",
            batch_id, metrics["lines"], metrics["valid_lines"], metrics["duplicates_in_batch"],
            metrics["duplicates_of_earlier_batches"], inserted, metrics["quarantined"],
            metrics["quarantined_by_reason"], hours,
        )  # fmt: skip

    run_available_now(
        delta_stream(spark, bronze).writeStream.foreachBatch(on_batch),
        silver.checkpoint(generation),
        name="silver.ad_events",
    )


if __name__ == "__main__":
    run_job(main)
