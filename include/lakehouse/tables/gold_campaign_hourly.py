"""gold.campaign_hourly: the ads team's hourly KPIs per campaign."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, expect_not_negative, table
from lakehouse.tables import F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = """
    campaign_id STRING, hour_start TIMESTAMP, views BIGINT NOT NULL, clicks BIGINT NOT NULL,
    purchases BIGINT NOT NULL, distinct_users BIGINT NOT NULL, ctr DOUBLE, event_date DATE
"""


def count_of(event_type: str):
    """An aggregate: the number of events of ``event_type``."""
    return F.count(F.when(F.col("event_type") == event_type, True))


def event_counts() -> list:
    """The aggregates of a group of events: its views, clicks and purchases."""
    return [
        count_of("view").alias("views"),
        count_of("click").alias("clicks"),
        count_of("purchase").alias("purchases"),
    ]


def ctr():
    """Clicks / views, null without views (not zero: there was nothing to click through from)."""
    return F.when(F.col("views") > 0, F.col("clicks") / F.col("views")).alias("ctr")


def hourly_kpis(silver: DataFrame, *keys: str) -> DataFrame:
    """Views, clicks, purchases and CTR per ``keys`` and event hour, with the event date.

    CTR is clicks / views, null for an hour without views (not zero: nothing to click through from).
    """
    hourly = silver.groupBy(*keys, F.date_trunc("hour", "event_time").alias("hour_start")).agg(
        *event_counts()
    )
    return hourly.select(
        *keys,
        "hour_start",
        "views",
        "clicks",
        "purchases",
        ctr(),
        F.to_date("hour_start").alias("event_date"),
    )


@table(
    "gold.campaign_hourly",
    upstream=["silver.ad_events"],
    schema=SCHEMA,
    partition_by=["event_date", "hour_start"],
    write=Write.REPLACE_PERIODS,
    batch=True,
    task="gold_aggregates",
    expect=[expect_not_negative("no negative count", "views", "clicks", "purchases")],
)
def campaign_hourly(silver: DataFrame) -> DataFrame:
    """Views, clicks, purchases, distinct users and click-through rate per campaign and event hour.

    ``ctr`` is clicks / views, null for an hour without views (not zero: there was nothing to
    click through from). Distinct users are exact, not approximate: an hour is small.
    """
    hourly = silver.groupBy(
        "campaign_id", F.date_trunc("hour", "event_time").alias("hour_start")
    ).agg(*event_counts(), F.countDistinct("user_id").alias("distinct_users"))
    return hourly.select(
        "campaign_id",
        "hour_start",
        "views",
        "clicks",
        "purchases",
        "distinct_users",
        ctr(),
        F.to_date("hour_start").alias("event_date"),
    )
