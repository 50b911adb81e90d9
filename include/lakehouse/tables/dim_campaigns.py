"""dims.campaigns: the ad -> campaign dimension, loaded from the landing zone's CSV file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, table
from lakehouse.tables import F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = "ad_id STRING NOT NULL, campaign_id STRING NOT NULL"


def invalid_campaign_rows(campaigns: DataFrame) -> DataFrame:
    """Rows that make the dimension ambiguous: a blank id, or an ad mapped more than once."""
    repeated = campaigns.groupBy("ad_id").count().filter("count > 1").select("ad_id")
    blank = campaigns.filter(
        F.col("ad_id").isNull()
        | (F.col("ad_id") == "")
        | F.col("campaign_id").isNull()
        | (F.col("campaign_id") == "")
    )
    return blank.select("ad_id").unionByName(repeated)


@table(
    "dims.campaigns",
    source="campaigns/campaigns.csv",
    schema=SCHEMA,
    write=Write.OVERWRITE,
    reject=invalid_campaign_rows,
)
def campaigns_from_csv(raw: DataFrame) -> DataFrame:
    """Trimmed (ad_id, campaign_id) rows; the job refuses a file with blank or repeated ads."""
    return raw.select(
        F.trim("ad_id").alias("ad_id"),
        F.trim("campaign_id").alias("campaign_id"),
    )
