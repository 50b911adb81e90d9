"""gold.campaign_windows and gold.campaign_hourly on hand-built silver rows."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.tables.gold_campaign_hourly import campaign_hourly
from lakehouse.tables.gold_campaign_windows import campaign_windows


def silver(spark, *events):
    """Silver rows from (event_id, user_id, campaign_id, event_type, event_time)."""
    rows = [
        (
            event_id,
            user,
            "p",
            "ad",
            "banner",
            kind,
            at,
            "10.0.0.1",
            campaign,
            None,
            "f",
            at,
            at.date(),
            at.hour,
        )
        for event_id, user, campaign, kind, at in events
    ]
    return spark.createDataFrame(rows, catalog.get("silver.ad_events").spark_schema())


EVENTS = [
    ("e1", "u1", "c1", "view", datetime(2026, 11, 20, 10, 0, 0)),
    ("e2", "u2", "c1", "view", datetime(2026, 11, 20, 10, 0, 9, 999000)),
    ("e3", "u1", "c1", "view", datetime(2026, 11, 20, 10, 0, 10)),
    ("e4", "u1", "c1", "click", datetime(2026, 11, 20, 10, 0, 11)),
    ("e5", "u3", "c2", "view", datetime(2026, 11, 20, 10, 59, 59)),
    ("e6", "u3", "c2", "purchase", datetime(2026, 11, 20, 11, 0, 0)),
]


def test_campaign_windows_counts_views_per_10_second_window(spark):
    expected = spark.createDataFrame(
        [
            (
                "c1",
                datetime(2026, 11, 20, 10, 0, 0),
                datetime(2026, 11, 20, 10, 0, 10),
                2,
                datetime(2026, 11, 20, 10),
                date(2026, 11, 20),
            ),
            (
                "c1",
                datetime(2026, 11, 20, 10, 0, 10),
                datetime(2026, 11, 20, 10, 0, 20),
                1,
                datetime(2026, 11, 20, 10),
                date(2026, 11, 20),
            ),
            (
                "c2",
                datetime(2026, 11, 20, 10, 59, 50),
                datetime(2026, 11, 20, 11, 0, 0),
                1,
                datetime(2026, 11, 20, 10),
                date(2026, 11, 20),
            ),
        ],
        catalog.get("gold.campaign_windows").spark_schema(),
    )
    assertDataFrameEqual(campaign_windows(silver(spark, *EVENTS)), expected)


def test_campaign_hourly_kpis(spark):
    expected = spark.createDataFrame(
        [
            ("c1", datetime(2026, 11, 20, 10), 3, 1, 0, 2, 1 / 3, date(2026, 11, 20)),
            ("c2", datetime(2026, 11, 20, 10), 1, 0, 0, 1, 0.0, date(2026, 11, 20)),
            # An hour with a purchase but no view: CTR is undefined, not zero.
            ("c2", datetime(2026, 11, 20, 11), 0, 0, 1, 1, None, date(2026, 11, 20)),
        ],
        catalog.get("gold.campaign_hourly").spark_schema(),
    )
    assertDataFrameEqual(campaign_hourly(silver(spark, *EVENTS)), expected)
