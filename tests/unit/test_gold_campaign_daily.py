"""gold.campaign_daily on hand-built silver rows."""

from __future__ import annotations

from datetime import date, datetime

from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.tables.gold_campaign_daily import campaign_daily

SILVER = catalog.get("silver.ad_events")


def silver(spark, *events):
    """Silver rows from (event_id, user_id, campaign_id, event_type, event_time)."""
    rows = [
        (event_id, user, "p", "a1", "banner", kind, at, "10.0.0.1", campaign_id)
        + (None, "f", at, at.date(), at.hour)
        for event_id, user, campaign_id, kind, at in events
    ]
    return spark.createDataFrame(rows, SILVER.spark_schema())


def test_kpis_per_campaign_and_utc_day_count_a_user_once_a_day(spark):
    events = silver(
        spark,
        ("e1", "u1", "c1", "view", datetime(2026, 11, 20, 0, 0, 0)),
        ("e2", "u1", "c1", "view", datetime(2026, 11, 20, 14, 30)),  # the same user, later hour
        ("e3", "u2", "c1", "click", datetime(2026, 11, 20, 23, 59, 59)),
        ("e4", "u3", "c2", "purchase", datetime(2026, 11, 20, 9)),  # no views: CTR null
        ("e5", "u1", "c1", "view", datetime(2026, 11, 21, 0, 0, 0)),  # the next UTC day
    )
    expected = spark.createDataFrame(
        [
            ("c1", 2, 1, 0, 2, 0.5, date(2026, 11, 20)),
            ("c2", 0, 0, 1, 1, None, date(2026, 11, 20)),
            ("c1", 1, 0, 0, 1, 0.0, date(2026, 11, 21)),
        ],
        catalog.get("gold.campaign_daily").spark_schema(),
    )
    assertDataFrameEqual(campaign_daily(events), expected)


def test_it_is_a_day_table_replaced_by_whole_days():
    spec = catalog.get("gold.campaign_daily")
    assert (spec.grain, spec.batch, spec.partition_by) == (catalog.Grain.DAY, True, ("event_date",))
