"""silver.ad_events and silver.quarantine_ad_events: parsed, typed, validated, enriched events.

Bronze lines are classified once: a line either becomes a typed event joined with its campaign,
or a quarantine row that keeps the raw line with a reason code. Nothing is dropped in between,
so ``silver + quarantine + duplicates == bronze`` for every batch.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse.schemas import (
    AD_TYPES,
    CORRUPT_RECORD_COLUMN,
    EVENT_TYPES,
    QUARANTINE_AD_EVENTS_SCHEMA,
    RAW_EVENT_FIELDS,
    RAW_EVENT_SCHEMA,
    SILVER_AD_EVENTS_SCHEMA,
)

# An event more than this far ahead of its ingestion time is a producer clock bug, not data.
MAX_FUTURE_SKEW = "1 day"
# Epoch millis as the producer writes them: digits only (no sign), at most 15 of them.
EVENT_TIME_PATTERN = r"^[0-9]{1,15}$"


class Reason:
    """Quarantine reason codes (stable strings: dashboards and alerts key on them)."""

    EMPTY_LINE = "empty_line"
    MALFORMED_JSON = "malformed_json"
    MISSING_FIELD = "missing_required_field"
    INVALID_EVENT_TIME = "invalid_event_time"
    FUTURE_EVENT_TIME = "event_time_in_future"
    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    UNKNOWN_AD_TYPE = "unknown_ad_type"
    UNKNOWN_AD = "unknown_ad_id"


def _first_failure(checks: list[tuple[Column, str, Column]]) -> tuple[Column, Column]:
    """(reason, detail) of the first failing check, both null when every check passes."""
    reason = F.lit(None).cast("string")
    detail = F.lit(None).cast("string")
    for failed, code, why in reversed(checks):
        reason = F.when(failed, F.lit(code)).otherwise(reason)
        detail = F.when(failed, why).otherwise(detail)
    return reason, detail


def classify_ad_events(bronze: DataFrame, campaigns: DataFrame) -> DataFrame:
    """Bronze rows parsed and checked, with ``reason`` null for a valid event.

    Output columns: every silver column, plus ``raw_line``, ``ingest_date``, ``reason`` and
    ``reason_detail``. ``campaigns`` is the (ad_id, campaign_id) dimension.
    """
    parsed = bronze.withColumn(
        "event",
        F.from_json(
            "raw_line",
            RAW_EVENT_SCHEMA,
            {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD_COLUMN},
        ),
    )
    enriched = parsed.join(
        F.broadcast(campaigns.select(F.col("ad_id").alias("_dim_ad_id"), "campaign_id")),
        F.col("event.ad_id") == F.col("_dim_ad_id"),
        "left",
    )

    event = F.col("event")
    missing = F.concat_ws(",", *[F.when(event[name].isNull(), F.lit(name)) for name in RAW_EVENT_FIELDS])
    millis = event["event_time"].cast("long")
    event_time = F.timestamp_millis(millis)
    reason, detail = _first_failure(
        [
            (F.trim("raw_line") == "", Reason.EMPTY_LINE, F.lit(None)),
            (event.isNull() | event[CORRUPT_RECORD_COLUMN].isNotNull(), Reason.MALFORMED_JSON, F.lit(None)),
            (missing != "", Reason.MISSING_FIELD, missing),
            (~event["event_time"].rlike(EVENT_TIME_PATTERN), Reason.INVALID_EVENT_TIME, event["event_time"]),
            (
                event_time > F.col("ingested_at") + F.expr(f"INTERVAL {MAX_FUTURE_SKEW}"),
                Reason.FUTURE_EVENT_TIME,
                event["event_time"],
            ),
            (~event["event_type"].isin(*EVENT_TYPES), Reason.UNKNOWN_EVENT_TYPE, event["event_type"]),
            (~event["ad_type"].isin(*AD_TYPES), Reason.UNKNOWN_AD_TYPE, event["ad_type"]),
            (F.col("campaign_id").isNull(), Reason.UNKNOWN_AD, event["ad_id"]),
        ]
    )

    return enriched.select(
        *[event[name].alias(name) for name in RAW_EVENT_FIELDS if name != "event_time"],
        event_time.alias("event_time"),
        "campaign_id",
        "source_file",
        "ingested_at",
        F.to_date(event_time).alias("event_date"),
        F.hour(event_time).alias("event_hour"),
        "raw_line",
        "ingest_date",
        reason.alias("reason"),
        detail.alias("reason_detail"),
    )


def valid_ad_events(classified: DataFrame) -> DataFrame:
    """The classified rows that passed every check, in silver's column order."""
    return classified.filter(F.col("reason").isNull()).select(*SILVER_AD_EVENTS_SCHEMA.fieldNames())


def quarantined_ad_events(classified: DataFrame) -> DataFrame:
    """The classified rows that failed a check, with their raw line and reason."""
    return classified.filter(F.col("reason").isNotNull()).select(*QUARANTINE_AD_EVENTS_SCHEMA.fieldNames())


def deduplicate_ad_events(events: DataFrame) -> DataFrame:
    """One row per ``event_id`` (an at-least-once producer re-sends identical events)."""
    return events.dropDuplicates(["event_id"])
