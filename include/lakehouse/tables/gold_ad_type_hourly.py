"""gold.ad_type_hourly: which ad formats work, hour by hour."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, table
from lakehouse.tables.gold_campaign_hourly import hourly_kpis

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = """
    ad_type STRING, hour_start TIMESTAMP, views BIGINT NOT NULL, clicks BIGINT NOT NULL,
    purchases BIGINT NOT NULL, ctr DOUBLE, event_date DATE
"""


@table(
    "gold.ad_type_hourly",
    upstream=["silver.ad_events"],
    schema=SCHEMA,
    partition_by=["event_date", "hour_start"],
    write=Write.REPLACE_PERIODS,
    batch=True,
    task="gold_aggregates",
)
def ad_type_hourly(silver: DataFrame) -> DataFrame:
    """Views, clicks, purchases and click-through rate per ad type and event hour (CTR null without views)."""
    return hourly_kpis(silver, "ad_type")
