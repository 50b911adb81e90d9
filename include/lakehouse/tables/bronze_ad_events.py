"""bronze.ad_events: every landing line, raw and lossless, with its source file and ingestion time."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def bronze_ad_events(lines: DataFrame) -> DataFrame:
    """Landing lines (``value``, ``source_file``, ``ingested_at``) as bronze rows.

    Nothing is parsed or filtered here: a line that silver cannot read is still kept, so it can
    be quarantined with its raw payload and replayed after a fix.
    """
    return lines.select(
        F.col("value").alias("raw_line"),
        F.col("source_file"),
        F.col("ingested_at"),
        F.to_date("ingested_at").alias("ingest_date"),
    )
