"""gold.ad_hourly on hand-built silver rows."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.tables.gold_ad_hourly import ad_hourly

SILVER = catalog.get("silver.ad_events")


def silver(spark, *events):
    """Silver rows from (event_id, ad_id, campaign_id, event_type, event_time)."""
    rows = [
        (event_id, "u", "p", ad_id, "banner", kind, at, "10.0.0.1", campaign_id)
        + (None, "f", at, at.date(), at.hour)
        for event_id, ad_id, campaign_id, kind, at in events
    ]
    return spark.createDataFrame(rows, SILVER.spark_schema())


def test_kpis_per_ad_and_hour_with_its_campaign(spark):
    events = silver(
        spark,
        ("e1", "a1", "c1", "view", datetime(2026, 11, 20, 10, 0, 0)),
        ("e2", "a1", "c1", "view", datetime(2026, 11, 20, 10, 59, 59)),
        ("e3", "a1", "c1", "click", datetime(2026, 11, 20, 10, 30)),
        ("e4", "a2", "c1", "purchase", datetime(2026, 11, 20, 10, 5)),  # no views: CTR null
        ("e5", "a1", "c1", "view", datetime(2026, 11, 20, 11, 0, 0)),
        ("e6", "a3", "c2", "view", datetime(2026, 11, 20, 11, 1)),
    )
    expected = spark.createDataFrame(
        [
            ("a1", "c1", datetime(2026, 11, 20, 10), 2, 1, 0, 0.5, date(2026, 11, 20)),
            ("a2", "c1", datetime(2026, 11, 20, 10), 0, 0, 1, None, date(2026, 11, 20)),
            ("a1", "c1", datetime(2026, 11, 20, 11), 1, 0, 0, 0.0, date(2026, 11, 20)),
            ("a3", "c2", datetime(2026, 11, 20, 11), 1, 0, 0, 0.0, date(2026, 11, 20)),
        ],
        catalog.get("gold.ad_hourly").spark_schema(),
    )
    assertDataFrameEqual(ad_hourly(events), expected)
