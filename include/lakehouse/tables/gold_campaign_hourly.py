"""gold.campaign_hourly: the ads team's hourly KPIs per campaign."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def _count_of(event_type: str):
    return F.count(F.when(F.col("event_type") == event_type, True))


def campaign_hourly(silver: DataFrame) -> DataFrame:
    """Views, clicks, purchases, distinct users and click-through rate per campaign and event hour.

    ``ctr`` is clicks / views, null for an hour without views (not zero: there was nothing to
    click through from). Distinct users are exact, not approximate: an hour is small.
    """
    hourly = silver.groupBy("campaign_id", F.date_trunc("hour", "event_time").alias("hour_start")).agg(
        _count_of("view").alias("views"),
        _count_of("click").alias("clicks"),
        _count_of("purchase").alias("purchases"),
        F.countDistinct("user_id").alias("distinct_users"),
    )
    return hourly.select(
        "campaign_id",
        "hour_start",
        "views",
        "clicks",
        "purchases",
        "distinct_users",
        F.when(F.col("views") > 0, F.col("clicks") / F.col("views")).alias("ctr"),
        F.to_date("hour_start").alias("event_date"),
    )
