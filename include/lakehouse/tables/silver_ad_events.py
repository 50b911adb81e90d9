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
    EVENT_TYPES,
    QUARANTINE_AD_EVENTS_SCHEMA,
    RAW_EVENT_FIELDS,
    SILVER_AD_EVENTS_SCHEMA,
)

# An event more than this far ahead of its ingestion time is a producer clock bug, not data.
MAX_FUTURE_SKEW = "1 day"
# Epoch millis as the producer writes them: digits only (no sign), at most 15 of them.
EVENT_TIME_PATTERN = r"^[0-9]{1,15}$"
# A YSB event is a few hundred bytes; a line this long is a producer bug (or an attack).
MAX_LINE_BYTES = 1024 * 1024


class Reason:
    """Quarantine reason codes (stable strings: dashboards and alerts key on them)."""

    INVALID_UTF8 = "invalid_utf8"
    LINE_TOO_LONG = "line_too_long"
    EMPTY_LINE = "empty_line"
    MALFORMED_JSON = "malformed_json"
    MISSING_FIELD = "missing_required_field"
    WRONG_TYPE = "wrong_field_type"
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


def _fields_where(condition) -> Column:
    """Comma-separated names of the event fields for which ``condition(name)`` holds ('' if none)."""
    return F.concat_ws(",", *[F.when(condition(name), F.lit(name)) for name in RAW_EVENT_FIELDS])


def classify_ad_events(bronze: DataFrame, campaigns: DataFrame) -> DataFrame:
    """Bronze rows parsed and checked, with ``reason`` null for a valid event.

    Output columns: every silver column, plus ``raw_line``, ``ingest_date``, ``reason`` and
    ``reason_detail``. ``campaigns`` is the (ad_id, campaign_id) dimension.

    Lines are parsed into a Variant, which keeps each value's JSON type: a number where the
    contract says string is a ``wrong_field_type``, not silently cast. Fields beyond the
    contract (schema drift) are kept, as JSON, in ``rescued_data``. (A UTF-8 byte-order mark and
    CRLF line ends never reach here: Spark's line reader drops them.)
    """
    event = F.try_parse_json("raw_line")
    parsed = bronze.withColumns(
        {
            "_event": event,
            **{f"_{name}": F.try_variant_get(event, f"$.{name}", "string") for name in RAW_EVENT_FIELDS},
            **{
                f"_{name}_type": F.schema_of_variant(F.try_variant_get(event, f"$.{name}", "variant"))
                for name in RAW_EVENT_FIELDS
            },
        }
    )
    enriched = parsed.join(
        F.broadcast(campaigns.select(F.col("ad_id").alias("_dim_ad_id"), "campaign_id")),
        F.col("_ad_id") == F.col("_dim_ad_id"),
        "left",
    )

    missing = _fields_where(lambda name: F.coalesce(F.col(f"_{name}_type"), F.lit("VOID")) == "VOID")
    wrong_type = _fields_where(lambda name: F.col(f"_{name}_type") != "STRING")
    millis = F.col("_event_time").cast("long")
    event_time = F.timestamp_millis(millis)
    reason, detail = _first_failure(
        [
            (~F.is_valid_utf8("raw_line"), Reason.INVALID_UTF8, F.lit(None)),
            (F.octet_length("raw_line") > MAX_LINE_BYTES, Reason.LINE_TOO_LONG, F.octet_length("raw_line").cast("string")),
            (F.trim("raw_line") == "", Reason.EMPTY_LINE, F.lit(None)),
            (
                F.col("_event").isNull() | ~F.schema_of_variant("_event").startswith("OBJECT"),
                Reason.MALFORMED_JSON,
                F.lit(None),
            ),
            (missing != "", Reason.MISSING_FIELD, missing),
            (wrong_type != "", Reason.WRONG_TYPE, wrong_type),
            (~F.col("_event_time").rlike(EVENT_TIME_PATTERN), Reason.INVALID_EVENT_TIME, F.col("_event_time")),
            (
                event_time > F.col("ingested_at") + F.expr(f"INTERVAL {MAX_FUTURE_SKEW}"),
                Reason.FUTURE_EVENT_TIME,
                F.col("_event_time"),
            ),
            (~F.col("_event_type").isin(*EVENT_TYPES), Reason.UNKNOWN_EVENT_TYPE, F.col("_event_type")),
            (~F.col("_ad_type").isin(*AD_TYPES), Reason.UNKNOWN_AD_TYPE, F.col("_ad_type")),
            (F.col("campaign_id").isNull(), Reason.UNKNOWN_AD, F.col("_ad_id")),
        ]
    )

    extra_fields = F.map_filter(
        F.from_json("raw_line", "map<string,string>"), lambda key, _: ~key.isin(*RAW_EVENT_FIELDS)
    )
    return enriched.select(
        *[F.col(f"_{name}").alias(name) for name in RAW_EVENT_FIELDS if name != "event_time"],
        event_time.alias("event_time"),
        "campaign_id",
        F.when(F.size(extra_fields) > 0, F.to_json(extra_fields)).alias("rescued_data"),
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


def ad_events_in_hours(bronze: DataFrame, campaigns: DataFrame, hours_predicate: str) -> DataFrame:
    """Silver's rows for the event hours selected by ``hours_predicate``, recomputed from bronze.

    The batch form of the stream (a backfill, the consistency check): the same classification
    and deduplication, restricted to whole event hours.
    """
    valid = valid_ad_events(classify_ad_events(bronze, campaigns))
    return deduplicate_ad_events(valid.filter(hours_predicate))
