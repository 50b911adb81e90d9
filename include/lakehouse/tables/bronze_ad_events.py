"""bronze.ad_events: every landing line or Kafka record, raw and lossless, with where it came from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, parse_columns, table
from lakehouse.contract import KAFKA_LINEAGE_COLUMNS
from lakehouse.tables import F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# One bronze table whichever source fed a row. ``source_file`` is where the line came from: a
# file URI, or ``kafka://topic/partition/offset`` for a Kafka record (silver and the quarantine
# keep only that column). The Kafka lineage columns are null for file rows; they come last so a
# table created before them gains them by a plain schema merge.
SCHEMA = """
    raw_line STRING, source_file STRING, ingested_at TIMESTAMP, ingest_date DATE,
    kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP,
    raw_bytes BINARY
"""
COLUMN_TYPES = {column.name: column.type for column in parse_columns(SCHEMA)}


@table(
    "bronze.ad_events",
    source="events",  # the landing files; or a Kafka topic (--source kafka)
    schema=SCHEMA,
    partition_by=["ingest_date"],
    write=Write.APPEND,
)
def bronze_ad_events(lines: DataFrame) -> DataFrame:
    """Lines from either source as bronze rows (``SCHEMA``).

    ``lines`` is what a source gives: landing lines (``value``, ``source_file``, ``ingested_at``)
    or Kafka records (``value``, ``kafka_topic``, ``kafka_partition``, ``kafka_offset``,
    ``kafka_timestamp``, ``ingested_at``). A Kafka record's ``source_file`` is its address,
    ``kafka://topic/partition/offset``, so silver and quarantine rows still point at it; a file
    row's Kafka columns are null.

    Nothing is parsed or filtered here: a line that silver cannot read is still kept, so it can
    be quarantined with its raw payload and replayed after a fix. ``raw_bytes`` holds the exact
    bytes of a line that is not valid UTF-8 (null otherwise); ``raw_line`` is always valid UTF-8.
    """
    from_kafka = "kafka_offset" in lines.columns
    if from_kafka:
        source_file = F.format_string(
            "kafka://%s/%d/%d", "kafka_topic", "kafka_partition", "kafka_offset"
        )
        lineage = [F.col(name) for name in KAFKA_LINEAGE_COLUMNS]
    else:
        source_file = F.col("source_file")
        lineage = [
            F.lit(None).cast(COLUMN_TYPES[name]).alias(name) for name in KAFKA_LINEAGE_COLUMNS
        ]
    # Text columns hold valid UTF-8 only (other readers of the table, e.g. pandas or Polars, fail
    # on anything else): a line that is not keeps its exact bytes in raw_bytes, and its text with
    # each invalid sequence replaced by U+FFFD.
    return lines.select(
        F.make_valid_utf8("value").alias("raw_line"),
        source_file.alias("source_file"),
        F.col("ingested_at"),
        F.to_date("ingested_at").alias("ingest_date"),
        *lineage,
        F.when(~F.is_valid_utf8("value"), F.col("value").cast("binary")).alias("raw_bytes"),
    )
