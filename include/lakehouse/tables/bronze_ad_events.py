"""bronze.ad_events: every landing line or Kafka record, raw and lossless, with where it came from."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse.schemas import BRONZE_AD_EVENTS_SCHEMA, KAFKA_LINEAGE_COLUMNS


def bronze_ad_events(lines: DataFrame) -> DataFrame:
    """Lines from either source as bronze rows (``BRONZE_AD_EVENTS_SCHEMA``).

    ``lines`` is what a source gives: landing lines (``value``, ``source_file``, ``ingested_at``)
    or Kafka records (``value``, ``kafka_topic``, ``kafka_partition``, ``kafka_offset``,
    ``kafka_timestamp``, ``ingested_at``). A Kafka record's ``source_file`` is its address,
    ``kafka://topic/partition/offset``, so silver and quarantine rows still point at it; a file
    row's Kafka columns are null.

    Nothing is parsed or filtered here: a line that silver cannot read is still kept, so it can
    be quarantined with its raw payload and replayed after a fix.
    """
    from_kafka = "kafka_offset" in lines.columns
    if from_kafka:
        source_file = F.format_string("kafka://%s/%d/%d", "kafka_topic", "kafka_partition", "kafka_offset")
        lineage = [F.col(name) for name in KAFKA_LINEAGE_COLUMNS]
    else:
        source_file = F.col("source_file")
        lineage = [
            F.lit(None).cast(BRONZE_AD_EVENTS_SCHEMA[name].dataType).alias(name) for name in KAFKA_LINEAGE_COLUMNS
        ]
    return lines.select(
        F.col("value").alias("raw_line"),
        source_file.alias("source_file"),
        F.col("ingested_at"),
        F.to_date("ingested_at").alias("ingest_date"),
        *lineage,
    )
