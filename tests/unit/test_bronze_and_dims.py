"""bronze.ad_events and dims.campaigns transformations."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from lakehouse import catalog
from lakehouse.tables.bronze_ad_events import bronze_ad_events
from lakehouse.tables.dim_campaigns import campaigns_from_csv, invalid_campaign_rows


def test_bronze_keeps_every_line_unparsed(spark):
    at = datetime(2026, 11, 20, 23, 59, 59)
    lines = spark.createDataFrame(
        [('{"event_id": "e-1"}', "file:/a.jsonl", at), ("not json", "file:/a.jsonl", at), ("", "file:/b.jsonl", at)],
        "value string, source_file string, ingested_at timestamp",
    )
    no_kafka_valid_utf8 = (None, None, None, None, None)
    expected = spark.createDataFrame(
        [
            ('{"event_id": "e-1"}', "file:/a.jsonl", at, date(2026, 11, 20), *no_kafka_valid_utf8),
            ("not json", "file:/a.jsonl", at, date(2026, 11, 20), *no_kafka_valid_utf8),
            ("", "file:/b.jsonl", at, date(2026, 11, 20), *no_kafka_valid_utf8),
        ],
        catalog.get("bronze.ad_events").spark_schema(),
    )
    assertDataFrameEqual(bronze_ad_events(lines), expected)
    assertSchemaEqual(bronze_ad_events(lines).schema, catalog.get("bronze.ad_events").spark_schema())


def test_bronze_keeps_kafka_records_with_their_address(spark):
    at, sent = datetime(2026, 11, 21, 0, 0, 1), datetime(2026, 11, 20, 23, 59, 58)
    records = spark.createDataFrame(
        [('{"event_id": "e-1"}', "ysb", 0, 41, sent, at), ("not json", "ysb", 2, 7, sent, at)],
        "value string, kafka_topic string, kafka_partition int, kafka_offset long, kafka_timestamp timestamp, "
        "ingested_at timestamp",
    )
    expected = spark.createDataFrame(
        [
            ('{"event_id": "e-1"}', "kafka://ysb/0/41", at, date(2026, 11, 21), "ysb", 0, 41, sent, None),
            ("not json", "kafka://ysb/2/7", at, date(2026, 11, 21), "ysb", 2, 7, sent, None),
        ],
        catalog.get("bronze.ad_events").spark_schema(),
    )
    assertDataFrameEqual(bronze_ad_events(records), expected)
    assertSchemaEqual(bronze_ad_events(records).schema, catalog.get("bronze.ad_events").spark_schema())


def test_campaigns_are_trimmed_and_ambiguous_rows_found(spark):
    raw = spark.createDataFrame(
        [(" ad-1 ", "c-1"), ("ad-2", "c-1"), ("ad-2", "c-2"), ("ad-3", "")], "ad_id string, campaign_id string"
    )
    campaigns = campaigns_from_csv(raw)

    assertDataFrameEqual(
        campaigns,
        spark.createDataFrame([("ad-1", "c-1"), ("ad-2", "c-1"), ("ad-2", "c-2"), ("ad-3", "")], "ad_id string, campaign_id string"),
    )
    assert sorted(row.ad_id for row in invalid_campaign_rows(campaigns).collect()) == ["ad-2", "ad-3"]
