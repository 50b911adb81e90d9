"""Contender ``plain_spark``: a minimal hand-written PySpark batch job with the project's outputs.

No project code runs here but the session factory: ``lakehouse.spark.build_spark_session(...,
engine_kind="local")`` with the settings the ``project`` contender gets (``DEFAULT_CONF``: Delta,
UTC, 4 shuffle partitions; ``local[2]``; the YSB benchmark's ``spark.driver.memory`` 2g, no UI).

The job: ``spark.read.text`` of the landing lines; one ``from_json`` with an explicit schema (a
corrupt-record column marks lines that are not JSON); the quarantine reasons that occur in the
generated data (malformed JSON, a missing field, an event time that is not a number, an unknown
ad); a broadcast join with campaigns.csv; ``dropDuplicates(event_id)``; silver and the quarantine
each written from the classification (not cached: Spark recomputes it for the second write, which
was cheaper than caching it, 122 vs 137 CPU-s at 1M events), then the gold aggregates from silver
read back; every table a plain Delta overwrite, partitioned as the catalog declares.
"""

from __future__ import annotations

import time
from functools import reduce
from operator import or_

from bench.compare import (
    AD_TYPE_HOURLY,
    CAMPAIGN_HOURLY,
    CAMPAIGN_WINDOWS,
    FIELDS,
    QUARANTINE,
    SILVER,
    WINDOW_SECONDS,
)

CORRUPT = "_corrupt_record"


def run(spec: dict) -> dict:
    from pyspark.sql import functions as F

    from bench.ysb.worker import BENCH_SPARK_CONF
    from lakehouse.spark import build_spark_session

    steps, started = {}, time.perf_counter()
    spark = build_spark_session(
        "compare-plain-spark", {**BENCH_SPARK_CONF, "spark.master": "local[2]"}, engine_kind="local"
    )
    spark.sparkContext.setLogLevel("ERROR")
    steps["session"] = time.perf_counter() - started

    def write(frame, name: str) -> None:
        began = time.perf_counter()
        frame.write.format("delta").mode("overwrite").partitionBy(*spec["partition_by"][name]).save(
            spec["tables"][name]
        )
        steps[name] = time.perf_counter() - began

    schema = ", ".join(f"{name} STRING" for name in FIELDS) + f", {CORRUPT} STRING"
    lines = spark.read.text(spec["lines"]).select(
        F.col("value").alias("raw_line"),
        F.col("_metadata.file_path").alias("source_file"),
        F.current_timestamp().alias("ingested_at"),
    )
    campaigns = spark.read.csv(
        spec["campaigns"], header=True, schema="ad_id STRING, campaign_id STRING"
    )
    parsed = lines.select(
        "*", F.from_json("raw_line", schema, {"columnNameOfCorruptRecord": CORRUPT}).alias("e")
    ).select("raw_line", "source_file", "ingested_at", "e.*")
    millis = F.col("event_time").try_cast("long")
    reason = (
        F.when(F.col(CORRUPT).isNotNull(), "malformed_json")
        .when(reduce(or_, [F.col(name).isNull() for name in FIELDS]), "missing_required_field")
        .when(millis.isNull(), "invalid_event_time")
        .when(F.col("campaign_id").isNull(), "unknown_ad_id")
    )
    classified = (
        parsed.join(F.broadcast(campaigns), "ad_id", "left")
        .withColumn("reason", reason)
        .withColumn("event_time", F.timestamp_millis(millis))
    )
    silver = (
        classified.filter("reason IS NULL")
        .dropDuplicates(["event_id"])
        .select(
            *FIELDS,
            "campaign_id",
            "source_file",
            "ingested_at",
            F.to_date("event_time").alias("event_date"),
            F.hour("event_time").alias("event_hour"),
        )
    )
    write(silver, SILVER)
    quarantine = classified.filter("reason IS NOT NULL").select(
        "raw_line",
        "reason",
        "source_file",
        "ingested_at",
        F.to_date("ingested_at").alias("ingest_date"),
    )
    write(quarantine, QUARANTINE)

    silver = spark.read.format("delta").load(spec["tables"][SILVER])
    hour = F.date_trunc("hour", "event_time")

    def count_of(event_type: str):
        return F.count(F.when(F.col("event_type") == event_type, True))

    ctr = F.when(F.col("views") > 0, F.col("clicks") / F.col("views")).alias("ctr")
    windows = (
        silver.filter("event_type = 'view'")
        .groupBy("campaign_id", F.window("event_time", f"{WINDOW_SECONDS} seconds").alias("w"))
        .agg(F.count(F.lit(1)).alias("views"))
        .select(
            "campaign_id",
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "views",
            F.date_trunc("hour", "w.start").alias("hour_start"),
            F.to_date("w.start").alias("event_date"),
        )
    )
    write(windows, CAMPAIGN_WINDOWS)
    campaign_hourly = (
        silver.groupBy("campaign_id", hour.alias("hour_start"))
        .agg(
            count_of("view").alias("views"),
            count_of("click").alias("clicks"),
            count_of("purchase").alias("purchases"),
            F.countDistinct("user_id").alias("distinct_users"),
        )
        .select(
            "campaign_id",
            "hour_start",
            "views",
            "clicks",
            "purchases",
            "distinct_users",
            ctr,
            F.to_date("hour_start").alias("event_date"),
        )
    )
    write(campaign_hourly, CAMPAIGN_HOURLY)
    ad_type_hourly = (
        silver.groupBy("ad_type", hour.alias("hour_start"))
        .agg(
            count_of("view").alias("views"),
            count_of("click").alias("clicks"),
            count_of("purchase").alias("purchases"),
        )
        .select(
            "ad_type",
            "hour_start",
            "views",
            "clicks",
            "purchases",
            ctr,
            F.to_date("hour_start").alias("event_date"),
        )
    )
    write(ad_type_hourly, AD_TYPE_HOURLY)
    began = time.perf_counter()
    spark.stop()
    steps["stop"] = time.perf_counter() - began
    return {"steps": steps}
