"""gold.ad_type_hourly on hand-built silver rows."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.tables.gold_ad_type_hourly import ad_type_hourly

SILVER = catalog.get("silver.ad_events")


def silver(spark, *events):
    """Silver rows from (event_id, ad_type, event_type, event_time)."""
    rows = [
        (
            event_id,
            "u",
            "p",
            "ad",
            ad_type,
            kind,
            at,
            "10.0.0.1",
            "c",
            None,
            "f",
            at,
            at.date(),
            at.hour,
        )
        for event_id, ad_type, kind, at in events
    ]
    return spark.createDataFrame(rows, SILVER.spark_schema())


def test_kpis_per_ad_type_and_hour(spark):
    events = silver(
        spark,
        ("e1", "banner", "view", datetime(2026, 11, 20, 10, 0, 0)),
        ("e2", "banner", "view", datetime(2026, 11, 20, 10, 59, 59)),
        ("e3", "banner", "click", datetime(2026, 11, 20, 10, 30)),
        ("e4", "mail", "purchase", datetime(2026, 11, 20, 10, 5)),  # no views: CTR null, not zero
        ("e5", "banner", "view", datetime(2026, 11, 20, 11, 0, 0)),
    )
    expected = spark.createDataFrame(
        [
            ("banner", datetime(2026, 11, 20, 10), 2, 1, 0, 0.5, date(2026, 11, 20)),
            ("mail", datetime(2026, 11, 20, 10), 0, 0, 1, None, date(2026, 11, 20)),
            ("banner", datetime(2026, 11, 20, 11), 1, 0, 0, 0.0, date(2026, 11, 20)),
        ],
        catalog.get("gold.ad_type_hourly").spark_schema(),
    )
    assertDataFrameEqual(ad_type_hourly(events), expected)
