"""gold.campaign_windows: YSB's query, views per campaign per 10-second event-time window."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, table
from lakehouse.tables import F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

WINDOW_DURATION = "10 seconds"

SCHEMA = """
    campaign_id STRING, window_start TIMESTAMP, window_end TIMESTAMP, views BIGINT NOT NULL,
    hour_start TIMESTAMP, event_date DATE
"""


@table(
    "gold.campaign_windows",
    upstream=["silver.ad_events"],
    schema=SCHEMA,
    partition_by=["event_date", "hour_start"],
    write=Write.REPLACE_PERIODS,
    batch=True,
    task="gold_aggregates",
)
def campaign_windows(silver: DataFrame) -> DataFrame:
    """Views per (campaign, 10-second tumbling window) of silver events.

    ``hour_start`` is the event hour that holds the window (windows never straddle an hour), so
    a whole hour of windows can be recomputed and replaced on its own.
    """
    views = silver.filter(F.col("event_type") == "view")
    counted = views.groupBy(
        "campaign_id", F.window("event_time", WINDOW_DURATION).alias("window")
    ).agg(F.count(F.lit(1)).alias("views"))
    return counted.select(
        "campaign_id",
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        "views",
        F.date_trunc("hour", "window.start").alias("hour_start"),
        F.to_date("window.start").alias("event_date"),
    )
