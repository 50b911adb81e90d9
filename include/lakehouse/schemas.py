"""Spark schemas some tests still build frames with (the catalog's declarations are the source; being retired)."""

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

