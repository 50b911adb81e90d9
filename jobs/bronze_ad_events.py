"""bronze.ad_events: append every new landing line, raw, with its source file and ingestion time.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/bronze_ad_events.py \
        [--lakehouse-root DIR] [--generation N] [--max-files-per-trigger N]

A streaming query with trigger(availableNow=True): it reads the files that appeared since its
checkpoint, appends them, and stops. The Delta sink records each micro-batch id in the table's
log, so a batch replayed after a crash is not appended twice.
"""

from lakehouse.runtime import parse_job_args, run_available_now, run_job
from lakehouse.sources import landing_lines_stream
from lakehouse.spark import build_spark_session
from lakehouse.tables.bronze_ad_events import bronze_ad_events


def main(argv: list[str] | None = None) -> None:
    args = parse_job_args(__doc__.splitlines()[0], argv, batch=False)
    spark = build_spark_session("bronze_ad_events")
    table = args.lakehouse.table("bronze.ad_events")

    lines = landing_lines_stream(spark, args.lakehouse.landing_events, args.max_files_per_trigger)
    writer = bronze_ad_events(lines).writeStream.format("delta").outputMode("append").partitionBy("ingest_date")
    run_available_now(writer.option("path", table.path), table.checkpoint(args.generation), name="bronze.ad_events")


if __name__ == "__main__":
    run_job(main)
