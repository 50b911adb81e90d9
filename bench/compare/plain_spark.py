"""Contender ``plain_spark``: a minimal hand-written PySpark batch job with the project's tables.

No project code runs here but the session factory: :func:`bench.harness.local_driver` with the
settings the ``project`` contender gets (``DEFAULT_CONF``: Delta, UTC, 4 shuffle partitions;
``local[2]``; the YSB benchmark's ``spark.driver.memory`` 2g, no UI).

The job: campaigns.csv as the dimension; ``spark.read.text`` of the landing lines as bronze; from
bronze read back, one ``from_json`` with an explicit schema (a corrupt-record column marks lines
that are not JSON), the quarantine reasons that occur in the generated data (malformed JSON, a
missing field, an event time that is not a number, an unknown ad), a broadcast join with the
campaigns, ``dropDuplicates(event_id)``; silver and the quarantine each written from the
classification (not cached: Spark recomputes it for the second write, which was cheaper than
caching it, 122 vs 137 CPU-s at 1M events); then the gold aggregates from silver read back, and
the sessions with Spark's native ``session_window`` (its sessions cached: closed ones go to
gold.user_sessions, open ones to gold.open_sessions). Every table a plain Delta overwrite,
partitioned as the catalog declares. No ops records (reported as not implemented).

Each table's step is timed, wall and CPU (this process and its driver JVM), so the sessions'
share is known (the ``sessions_ratio_to_native_spark`` figure).
"""

from __future__ import annotations

import time
from functools import reduce
from operator import or_

from bench.compare import (
    AD_HOURLY,
    AD_TYPE_HOURLY,
    BRONZE,
    CAMPAIGN_DAILY,
    CAMPAIGN_HOURLY,
    CAMPAIGN_WINDOWS,
    CAMPAIGNS,
    FIELDS,
    OPEN_SESSIONS,
    QUARANTINE,
    SESSION_GAP_MS,
    SILVER,
    USER_SESSIONS,
    WATERMARK_DELAY_MS,
    WINDOW_SECONDS,
    hourly_columns,
)
from bench.harness import BENCH_SPARK_CONF, jvm_pid, local_driver, process_cpu, unreaped_cpu

CORRUPT = "_corrupt_record"
# Spark merges a user's event into a session when it is at most the gap after the session's last
# event (MergingSessionsIterator: start <= end); the project starts a new session at exactly the
# gap. Event times are whole milliseconds, so a gap 1 ms shorter makes Spark's rule the project's.
NATIVE_GAP = f"{SESSION_GAP_MS - 1} milliseconds"


def run(spec: dict) -> dict:
    from pyspark.sql import functions as F

    steps, started = {}, time.perf_counter()
    spark = local_driver("compare-plain-spark", BENCH_SPARK_CONF)
    pid = jvm_pid()

    def cpu() -> float:
        return process_cpu(pid)

    steps["session"] = {"wall": time.perf_counter() - started, "cpu": cpu()}

    def write(frame, name: str) -> None:
        began, cpu_before = time.perf_counter(), cpu()
        frame.write.format("delta").mode("overwrite").partitionBy(*spec["partition_by"][name]).save(
            spec["tables"][name]
        )
        steps[name] = {"wall": time.perf_counter() - began, "cpu": cpu() - cpu_before}

    def read(name: str):
        return spark.read.format("delta").load(spec["tables"][name])

    write(
        spark.read.csv(spec["campaigns"], header=True, schema="ad_id STRING, campaign_id STRING"),
        CAMPAIGNS,
    )
    write(
        spark.read.text(spec["lines"]).select(
            F.col("value").alias("raw_line"),
            F.col("_metadata.file_path").alias("source_file"),
            F.current_timestamp().alias("ingested_at"),
            F.current_date().alias("ingest_date"),
        ),
        BRONZE,
    )

    schema = ", ".join(f"{name} STRING" for name in FIELDS) + f", {CORRUPT} STRING"
    parsed = (
        read(BRONZE)
        .select(
            "raw_line",
            "source_file",
            "ingested_at",
            F.from_json("raw_line", schema, {"columnNameOfCorruptRecord": CORRUPT}).alias("e"),
        )
        .select("raw_line", "source_file", "ingested_at", "e.*")
    )
    millis = F.col("event_time").try_cast("long")
    reason = (
        F.when(F.col(CORRUPT).isNotNull(), "malformed_json")
        .when(reduce(or_, [F.col(name).isNull() for name in FIELDS]), "missing_required_field")
        .when(millis.isNull(), "invalid_event_time")
        .when(F.col("campaign_id").isNull(), "unknown_ad_id")
    )
    classified = (
        parsed.join(F.broadcast(read(CAMPAIGNS)), "ad_id", "left")
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

    silver = read(SILVER)
    hour = F.date_trunc("hour", "event_time")

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
    counts = [count_of(kind).alias(f"{kind}s") for kind in ("view", "click", "purchase")]
    users = F.countDistinct("user_id").alias("distinct_users")

    def per_hour(*keys: str, distinct_users: bool = False):
        """Each group's hourly counts and CTR, columns in the catalog's order."""
        extra = [users] if distinct_users else []
        return (
            silver.groupBy(*keys, hour.alias("hour_start"))
            .agg(*counts, *extra)
            .withColumns({"ctr": ctr, "event_date": F.to_date("hour_start")})
            .select(*hourly_columns(keys, distinct_users))
        )

    write(per_hour("campaign_id", distinct_users=True), CAMPAIGN_HOURLY)
    write(per_hour("ad_type"), AD_TYPE_HOURLY)
    write(per_hour("ad_id", "campaign_id"), AD_HOURLY)
    campaign_daily = (
        silver.groupBy("campaign_id", F.to_date("event_time").alias("event_date"))
        .agg(*counts, users)
        .select("campaign_id", "views", "clicks", "purchases", "distinct_users", ctr, "event_date")
    )
    write(campaign_daily, CAMPAIGN_DAILY)

    sessions = native_sessions(silver, spec["session_figures"]).cache()
    write(sessions.filter("closed").drop("closed"), USER_SESSIONS)
    write(
        sessions.filter("NOT closed")
        .drop("closed")
        .withColumn("closes_at", F.timestamp_millis(F.unix_millis("session_end") + SESSION_GAP_MS)),
        OPEN_SESSIONS,
    )
    sessions.unpersist()
    lost = unreaped_cpu(pid) if pid else 0.0  # Python workers' CPU (none expected here)
    began, cpu_before = time.perf_counter(), cpu()
    spark.stop()
    steps["stop"] = {"wall": time.perf_counter() - began, "cpu": cpu() - cpu_before}
    return {
        "steps": steps,
        "tables": sorted(name for name in steps if "." in name),
        "unreaped_cpu": lost,
    }


def native_sessions(silver, figures: list[str]):
    """Spark's session windows over every user's events, each closed or open by the watermark
    (the newest event time minus the delay), as one batch over all of silver sees it: the lean
    job's sessions, with a ``closed`` column (also :mod:`bench.sessions_compare`'s ``native``)."""
    from pyspark.sql import functions as F

    order = F.struct("event_time", "event_id")
    return (
        silver.groupBy("user_id", F.session_window("event_time", NATIVE_GAP).alias("w"))
        .agg(
            F.min("event_time").alias("session_start"),
            F.max("event_time").alias("session_end"),
            F.count(F.lit(1)).alias("events"),
            count_of("view").alias("views"),
            count_of("click").alias("clicks"),
            count_of("purchase").alias("purchases"),
            # Not countDistinct: over session windows it counted too many (Spark 4.2, checked
            # against the oracle); a set per session merges right.
            F.size(F.collect_set("ad_id")).cast("long").alias("distinct_ads"),
            F.size(F.collect_set("campaign_id")).cast("long").alias("distinct_campaigns"),
            F.min_by("campaign_id", order).alias("first_campaign_id"),
            F.max_by("campaign_id", order).alias("last_campaign_id"),
        )
        .crossJoin(
            F.broadcast(
                silver.agg(
                    (F.unix_millis(F.max("event_time")) - WATERMARK_DELAY_MS).alias("watermark")
                )
            )
        )
        .select(
            F.md5(F.concat_ws("/", "user_id", F.unix_millis("session_start").cast("string"))).alias(
                "session_id"
            ),
            "user_id",
            "session_start",
            "session_end",
            ((F.unix_millis("session_end") - F.unix_millis("session_start")) / 1000.0).alias(
                "duration_seconds"
            ),
            *figures,
            F.to_date("session_start").alias("session_date"),
            (F.unix_millis("session_end") + SESSION_GAP_MS <= F.col("watermark")).alias("closed"),
        )
    )


def count_of(kind: str):
    """Events of one type, in an aggregation."""
    from pyspark.sql import functions as F

    return F.count(F.when(F.col("event_type") == kind, True))
