"""gold.ad_hourly: which ads (creatives) of a campaign work, hour by hour."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, expect_no_nulls, table
from lakehouse.tables.gold_campaign_hourly import hourly_kpis

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = """
    ad_id STRING, campaign_id STRING, hour_start TIMESTAMP, views BIGINT NOT NULL,
    clicks BIGINT NOT NULL, purchases BIGINT NOT NULL, ctr DOUBLE, event_date DATE
"""


@table(
    "gold.ad_hourly",
    upstream=["silver.ad_events"],
    schema=SCHEMA,
    partition_by=["event_date", "hour_start"],
    write=Write.REPLACE_PERIODS,
    batch=True,
    task="gold_aggregates",
    expect=[expect_no_nulls("every ad has a campaign", "campaign_id")],
)
def ad_hourly(silver: DataFrame) -> DataFrame:
    """Views, clicks, purchases and click-through rate per ad and event hour (CTR null without views).

    The campaign rides along (an ad belongs to one campaign), so a campaign's ads compare side by side.
    """
    return hourly_kpis(silver, "ad_id", "campaign_id")
