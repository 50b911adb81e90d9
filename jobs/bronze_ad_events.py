"""bronze.ad_events: append every new landing line or Kafka record, raw, with where it came from.

Usage:
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/bronze_ad_events.py \
        [--lakehouse-root DIR] [--generation N] [--max-files-per-trigger N]
    spark-submit --jars "$(ls .jars/*.jar | paste -sd,)" jobs/bronze_ad_events.py --source kafka \
        [--kafka-bootstrap-servers HOST:PORT] [--kafka-topic ysb-ad-events] [--max-offsets-per-trigger N] \
        [--lakehouse-root DIR] [--generation N]

A streaming query with trigger(availableNow=True): it reads what arrived since its checkpoint (new
files, or new records of every partition of the topic), appends it, and stops. The Delta sink
records each micro-batch id in the table's log, so a batch replayed after a crash is not
appended twice. Both sources append to the one bronze table; each has its own checkpoint in
bronze's current generation N (``checkpoints/bronze/ad_events/gen=N`` for files,
``.../ad_events/kafka/<topic>/gen=N`` for Kafka), so switching source or topic never reuses
another's offsets, and a full refresh of bronze moves both to N+1.

Kafka: the bootstrap servers come from --kafka-bootstrap-servers, else $KAFKA_BOOTSTRAP_SERVERS.
A new checkpoint starts at the earliest retained offset; each micro-batch reads at most
--max-offsets-per-trigger records. Before reading anything the job fails fast when the brokers
do not answer (after ~10 s, saying the task will retry) or the topic does not exist.

failOnDataLoss is true, deliberately: when records the checkpoint has not read yet are gone
(aged out of retention, deleted, the topic deleted or recreated, partitions removed), the job
stops with an error naming the table, the checkpoint and the remedy instead of silently skipping
them. An operator decides: restore the data, or accept the loss and do a full refresh of bronze
(jobs/full_refresh.py --layer bronze, or the DAG's full_refresh=bronze), which empties bronze
and the layers after it and moves to checkpoint generation N+1: the next run re-reads the
landing files and the topic from its earliest retained offset. Records the topic no longer
holds are then gone from bronze too: with Kafka, bronze is the only full copy of old data.
"""

import argparse

from pyspark.errors import StreamingQueryException

from lakehouse.config import ConfigError
from lakehouse.kafka_settings import (
    DEFAULT_MAX_OFFSETS_PER_TRIGGER,
    DEFAULT_TOPIC,
    SOURCES,
    kafka_checkpoint,
    resolve_bootstrap_servers,
    validate_topic,
)
from lakehouse.runtime import parse_job_args, run_available_now, run_job
from lakehouse.sources import (
    KafkaUnavailableError,
    kafka_lines_stream,
    kafka_source_changed,
    kafka_unavailable,
    landing_lines_stream,
    require_kafka_topic,
)
from lakehouse.spark import build_spark_session
from lakehouse.tables.bronze_ad_events import bronze_ad_events

# The options only bronze has; parse_job_args parses the rest.
SOURCE_OPTIONS = argparse.ArgumentParser(prog="bronze_ad_events.py", add_help=False, allow_abbrev=False)
SOURCE_OPTIONS.add_argument("--source", choices=SOURCES, default="files")
SOURCE_OPTIONS.add_argument("--kafka-bootstrap-servers", help="default: $KAFKA_BOOTSTRAP_SERVERS")
SOURCE_OPTIONS.add_argument("--kafka-topic", default=DEFAULT_TOPIC)
SOURCE_OPTIONS.add_argument("--max-offsets-per-trigger", type=int, default=DEFAULT_MAX_OFFSETS_PER_TRIGGER)


def main(argv: list[str] | None = None) -> None:
    source, rest = SOURCE_OPTIONS.parse_known_args(argv)
    if "-h" in rest or "--help" in rest:
        SOURCE_OPTIONS.print_help()
    args = parse_job_args(__doc__.splitlines()[0], rest, batch=False)
    table = args.lakehouse.table("bronze.ad_events")

    generation = args.generation_of(table)
    if source.source == "kafka":
        servers, topic = resolve_bootstrap_servers(source.kafka_bootstrap_servers), validate_topic(source.kafka_topic)
        if source.max_offsets_per_trigger < 1:
            raise ConfigError("--max-offsets-per-trigger must be >= 1")
        require_kafka_topic(servers, topic)  # before any JVM starts: a down broker fails in seconds
        checkpoint = kafka_checkpoint(table, topic, generation)
        spark = build_spark_session("bronze_ad_events")
        lines = kafka_lines_stream(spark, servers, topic, source.max_offsets_per_trigger)
    else:
        checkpoint = table.checkpoint(generation)
        spark = build_spark_session("bronze_ad_events")
        lines = landing_lines_stream(spark, args.lakehouse.landing_events, args.max_files_per_trigger)

    # mergeSchema: a bronze table created before the Kafka lineage columns gains them (nullable,
    # at the end); the transform's output is the declared schema, so nothing else can slip in.
    writer = (
        bronze_ad_events(lines)
        .writeStream.format("delta")
        .outputMode("append")
        .option("mergeSchema", "true")
        .partitionBy("ingest_date")
    )
    try:
        run_available_now(writer.option("path", table.path), checkpoint, name="bronze.ad_events")
    except StreamingQueryException as error:
        if source.source != "kafka":
            raise
        reason = kafka_source_changed(error)
        if reason:
            raise ConfigError(
                f"bronze.ad_events: topic {topic!r} on {servers} no longer matches checkpoint {checkpoint} "
                f"({reason}). Records it had not read yet are gone: aged out of retention or deleted, or the "
                "topic was deleted, recreated or lost partitions. Nothing was skipped (failOnDataLoss=true): "
                "restore the data, or accept the loss and do a full refresh of bronze (spark-submit "
                "jobs/full_refresh.py --layer bronze, or the DAG's full_refresh=bronze): it empties bronze and "
                f"the layers after it and moves to checkpoint generation {table.current_generation() + 1}, whose "
                "first run re-reads the landing files and the topic from its earliest retained offset."
            ) from error
        if kafka_unavailable(error):
            raise KafkaUnavailableError(
                f"bronze.ad_events: Kafka brokers {servers} stopped answering during the run "
                f"({error.getMessage()[:300]}). What was committed stays committed; the task fails now and will "
                f"retry from checkpoint {checkpoint}."
            ) from error
        raise


if __name__ == "__main__":
    run_job(main)
