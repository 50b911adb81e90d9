"""gold.campaign_daily: the ads team's daily KPIs per campaign (a UTC day)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, expect_not_negative, table
from lakehouse.tables import F
from lakehouse.tables.gold_campaign_hourly import ctr, event_counts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = """
    campaign_id STRING, views BIGINT NOT NULL, clicks BIGINT NOT NULL, purchases BIGINT NOT NULL,
    distinct_users BIGINT NOT NULL, ctr DOUBLE, event_date DATE
"""


@table(
    "gold.campaign_daily",
    upstream=["silver.ad_events"],
    schema=SCHEMA,
    partition_by=["event_date"],
    write=Write.REPLACE_PERIODS,
    grain="day",
    batch=True,
    task="gold_aggregates",
    expect=[expect_not_negative("no negative count", "views", "clicks", "purchases")],
)
def campaign_daily(silver: DataFrame) -> DataFrame:
    """Views, clicks, purchases, distinct users and click-through rate per campaign and UTC day.

    Distinct users are counted over the whole day (not summed over its hours: a user active in two
    hours is one user of the day). ``ctr`` is clicks / views, null for a day without views.
    """
    daily = silver.groupBy("campaign_id", F.to_date("event_time").alias("event_date")).agg(
        *event_counts(), F.countDistinct("user_id").alias("distinct_users")
    )
    return daily.select(
        "campaign_id", "views", "clicks", "purchases", "distinct_users", ctr(), "event_date"
    )
