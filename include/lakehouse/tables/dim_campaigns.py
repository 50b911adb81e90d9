"""dims.campaigns: the ad -> campaign dimension, loaded from the landing zone's CSV file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import Write, table
from lakehouse.tables import F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = "ad_id STRING NOT NULL, campaign_id STRING NOT NULL"


def invalid_campaign_rows(campaigns: DataFrame) -> DataFrame:
    """Rows that make the dimension ambiguous: a blank id, or an ad mapped to two campaigns.

    The job names such rows by line before Spark reads the file (its key, ``ad_id``); this is the
    same rule on the rows Spark read.
    """
    repeated = (
        campaigns.groupBy("ad_id")
        .agg(F.countDistinct("campaign_id").alias("campaigns"))
        .filter("campaigns > 1")
        .select("ad_id")
    )
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
    key="ad_id",
    reject=invalid_campaign_rows,
)
def campaigns_from_csv(raw: DataFrame) -> DataFrame:
    """Trimmed (ad_id, campaign_id) rows, the same row twice kept once; the job refuses a file with
    a blank id or an ad in two campaigns."""
    return raw.select(
        F.trim("ad_id").alias("ad_id"),
        F.trim("campaign_id").alias("campaign_id"),
    ).dropDuplicates()
