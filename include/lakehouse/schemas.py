"""Schemas of every table, declared once and reused by jobs, tests and the generator."""

from __future__ import annotations

from pyspark.sql.types import (
    DateType,
    MapType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# The YSB event as the producer writes it: every field a string (event_time is epoch millis).
RAW_EVENT_FIELDS = (
    "event_id",
    "user_id",
    "page_id",
    "ad_id",
    "ad_type",
    "event_type",
    "event_time",
    "ip_address",
)
AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")


CAMPAIGNS_SCHEMA = StructType(
    [
        StructField("ad_id", StringType(), nullable=False),
        StructField("campaign_id", StringType(), nullable=False),
    ]
)

# One bronze table whichever source fed a row. ``source_file`` is where the line came from: a
# file URI, or ``kafka://topic/partition/offset`` for a Kafka record (silver and the quarantine
# keep only that column). The Kafka lineage columns are null for file rows; they come last so a
# table created before them gains them by a plain schema merge.
BRONZE_AD_EVENTS_SCHEMA = StructType(
    [
        StructField("raw_line", StringType()),
        StructField("source_file", StringType()),
        StructField("ingested_at", TimestampType()),
        StructField("ingest_date", DateType()),
        StructField("kafka_topic", StringType()),
        StructField("kafka_partition", IntegerType()),
        StructField("kafka_offset", LongType()),
        StructField("kafka_timestamp", TimestampType()),
    ]
)
KAFKA_LINEAGE_COLUMNS = ("kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp")

SILVER_AD_EVENTS_SCHEMA = StructType(
    [
        StructField("event_id", StringType()),
        StructField("user_id", StringType()),
        StructField("page_id", StringType()),
        StructField("ad_id", StringType()),
        StructField("ad_type", StringType()),
        StructField("event_type", StringType()),
        StructField("event_time", TimestampType()),
        StructField("ip_address", StringType()),
        StructField("campaign_id", StringType()),
        # Fields beyond the event contract (schema drift), as a JSON object; null when none.
        StructField("rescued_data", StringType()),
        StructField("source_file", StringType()),
        StructField("ingested_at", TimestampType()),
        StructField("event_date", DateType()),
        StructField("event_hour", IntegerType()),
    ]
)
SILVER_PARTITION_COLUMNS = ("event_date", "event_hour")

QUARANTINE_AD_EVENTS_SCHEMA = StructType(
    [
        StructField("raw_line", StringType()),
        StructField("reason", StringType()),
        StructField("reason_detail", StringType()),
        StructField("source_file", StringType()),
        StructField("ingested_at", TimestampType()),
        StructField("ingest_date", DateType()),
    ]
)

GOLD_CAMPAIGN_WINDOWS_SCHEMA = StructType(
    [
        StructField("campaign_id", StringType()),
        StructField("window_start", TimestampType()),
        StructField("window_end", TimestampType()),
        StructField("views", LongType(), nullable=False),
        StructField("hour_start", TimestampType()),
        StructField("event_date", DateType()),
    ]
)

GOLD_CAMPAIGN_HOURLY_SCHEMA = StructType(
    [
        StructField("campaign_id", StringType()),
        StructField("hour_start", TimestampType()),
        StructField("views", LongType(), nullable=False),
        StructField("clicks", LongType(), nullable=False),
        StructField("purchases", LongType(), nullable=False),
        StructField("distinct_users", LongType(), nullable=False),
        StructField("ctr", DoubleType()),
        StructField("event_date", DateType()),
    ]
)
GOLD_PARTITION_COLUMNS = ("event_date",)

# One row per silver micro-batch: what happened to its lines, for operators and alerts.
SILVER_BATCH_METRICS_SCHEMA = StructType(
    [
        StructField("generation", IntegerType()),
        StructField("batch_id", LongType()),
        StructField("recorded_at", TimestampType()),
        StructField("lines", LongType()),
        StructField("valid_lines", LongType()),
        StructField("duplicates_in_batch", LongType()),
        StructField("duplicates_of_earlier_batches", LongType()),
        StructField("inserted", LongType()),
        StructField("quarantined", LongType()),
        StructField("quarantined_by_reason", MapType(StringType(), LongType())),
    ]
)
