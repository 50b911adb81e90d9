"""bronze.ad_events and dims.campaigns transformations."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.testing import assertDataFrameEqual

from lakehouse.schemas import BRONZE_AD_EVENTS_SCHEMA, CAMPAIGNS_SCHEMA
from lakehouse.tables.bronze_ad_events import bronze_ad_events
from lakehouse.tables.dim_campaigns import campaigns_from_csv, invalid_campaign_rows


def test_bronze_keeps_every_line_unparsed(spark):
    at = datetime(2026, 11, 20, 23, 59, 59)
    lines = spark.createDataFrame(
        [('{"event_id": "e-1"}', "file:/a.jsonl", at), ("not json", "file:/a.jsonl", at), ("", "file:/b.jsonl", at)],
        "value string, source_file string, ingested_at timestamp",
    )
    expected = spark.createDataFrame(
        [
            ('{"event_id": "e-1"}', "file:/a.jsonl", at, date(2026, 11, 20)),
            ("not json", "file:/a.jsonl", at, date(2026, 11, 20)),
            ("", "file:/b.jsonl", at, date(2026, 11, 20)),
        ],
        BRONZE_AD_EVENTS_SCHEMA,
    )
    assertDataFrameEqual(bronze_ad_events(lines), expected)


def test_campaigns_are_trimmed_and_ambiguous_rows_found(spark):
    raw = spark.createDataFrame(
        [(" ad-1 ", "c-1"), ("ad-2", "c-1"), ("ad-2", "c-2"), ("ad-3", "")], CAMPAIGNS_SCHEMA.simpleString()
    )
    campaigns = campaigns_from_csv(raw)

    assertDataFrameEqual(
        campaigns,
        spark.createDataFrame([("ad-1", "c-1"), ("ad-2", "c-1"), ("ad-2", "c-2"), ("ad-3", "")], CAMPAIGNS_SCHEMA.simpleString()),
    )
    assert sorted(row.ad_id for row in invalid_campaign_rows(campaigns).collect()) == ["ad-2", "ad-3"]
