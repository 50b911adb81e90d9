"""silver.ad_events and silver.quarantine_ad_events: parsed, typed, validated, enriched events.

Bronze lines are classified once: a line either becomes a typed event joined with its campaign,
or a quarantine row that keeps the raw line with a reason code. Nothing is dropped in between,
so ``silver + quarantine + duplicates == bronze`` for every batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse.catalog import (
    Retention,
    Write,
    column_names,
    expect,
    expect_no_nulls,
    side_table,
    table,
)
from lakehouse.contract import (
    AD_TYPES,
    EVENT_TIME_FLOOR,
    EVENT_TIME_FLOOR_MILLIS,
    EVENT_TYPES,
    RAW_EVENT_FIELDS,
    SECONDS_DIGITS,
)
from lakehouse.tables import F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SCHEMA = """
    event_id STRING, user_id STRING, page_id STRING, ad_id STRING, ad_type STRING, event_type STRING,
    event_time TIMESTAMP, ip_address STRING, campaign_id STRING,
    rescued_data STRING, source_file STRING, ingested_at TIMESTAMP, event_date DATE, event_hour INT
"""  # rescued_data: fields beyond the event contract (schema drift), as a JSON object; null when none

# raw_bytes: the exact bytes of a line that is not valid UTF-8 (raw_line holds it with U+FFFD); last, so
# a quarantine created before it gains it by a schema merge.
QUARANTINE_SCHEMA = """
    raw_line STRING, reason STRING, reason_detail STRING, source_file STRING, ingested_at TIMESTAMP, ingest_date DATE,
    raw_bytes BINARY
"""

# One row per silver micro-batch: what happened to its lines, for operators and alerts.
BATCH_METRICS_SCHEMA = """
    generation INT, batch_id BIGINT, recorded_at TIMESTAMP, lines BIGINT, valid_lines BIGINT,
    duplicates_in_batch BIGINT, duplicates_of_earlier_batches BIGINT, inserted BIGINT, quarantined BIGINT,
    quarantined_by_reason MAP<STRING, BIGINT>
"""

# A producer that re-sends an event may re-stamp it: copies of one event_id whose event hours are at
# most this far apart are one event. Each micro-batch's MERGE reads this many hours of silver either
# side of the hours it writes; copies further apart would both be kept.
DUPLICATE_WINDOW_HOURS = 24
# How far ahead of its ingestion an event may be: more is a producer clock bug, not data, and is
# quarantined (event_time_in_future). The reference is the line's own ingested_at, recorded by bronze,
# so the stream and a backfill classify a line alike whatever else is in its batch (a batch's own
# newest event would be the outlier itself). Kept under the sessions' watermark delay (10 minutes;
# the session gap is 30): an accepted event moves the sessions' watermark at most this far past the
# ingestion clock, so one skewed event can no longer close every user's session early.
MAX_FUTURE_SKEW_SECONDS = 5 * 60
# Epoch millis as the producer writes them: ASCII digits only (no sign, point or zone), at most 15
# of them (year 33658 at most: timestamp_millis cannot overflow). \A and \z, not ^ and $: Java's $
# also matches before a final line break, and the cast would then read "123\n" as 123.
EVENT_TIME_PATTERN = r"\A[0-9]{1,15}\z"
# JSON's whitespace: a line, or a required field, of nothing else is empty.
JSON_WHITESPACE = " \t\r\n"
# A UTF-8 byte-order mark: Spark's line reader drops one at the start of a file, not one at the start
# of a Kafka record or of a file appended to another.
BOM = "\ufeff"
# A gzip stream's first bytes: a line that starts with them is a compressed file under a .jsonl name
# (bronze keeps one line of such a file, lakehouse.landing), never invalid text of an event.
GZIP_MAGIC = b"\x1f\x8b"
GZIP_PAYLOAD_FIX = "a gzip file named .jsonl: land it as .jsonl.gz and it is read"
# A YSB event is a few hundred bytes; a line this long is a producer bug (or an attack).
MAX_LINE_BYTES = 1024 * 1024


class Reason:
    """Quarantine reason codes (stable strings: dashboards and alerts key on them)."""

    GZIP_PAYLOAD = "gzip_payload"
    INVALID_UTF8 = "invalid_utf8"
    LINE_TOO_LONG = "line_too_long"
    EMPTY_LINE = "empty_line"
    MALFORMED_JSON = "malformed_json"
    MISSING_FIELD = "missing_required_field"
    WRONG_TYPE = "wrong_field_type"
    INVALID_EVENT_TIME = "invalid_event_time"
    TOO_OLD_EVENT_TIME = "event_time_too_old"
    FUTURE_EVENT_TIME = "event_time_in_future"
    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    UNKNOWN_AD_TYPE = "unknown_ad_type"
    UNKNOWN_AD = "unknown_ad_id"


def _first_failure(checks: list[tuple[Column, str]]) -> Column:
    """The reason code of the first failing check; null when every check passes."""
    reason = F.lit(None).cast("string")
    for failed, code in reversed(checks):
        reason = F.when(failed, F.lit(code)).otherwise(reason)
    return reason


def _detail_of(reason: Column, details: dict[str, Column]) -> Column:
    """A reason's detail, evaluated only for the rows with that reason (most rows have none)."""
    detail = F.lit(None).cast("string")
    for code, why in details.items():
        detail = F.when(reason == code, why).otherwise(detail)
    return detail


def _fields_where(condition) -> Column:
    """Comma-separated names of the event fields for which ``condition(name)`` holds ('' if none)."""
    return F.concat_ws(",", *[F.when(condition(name), F.lit(name)) for name in RAW_EVENT_FIELDS])


def _producer_form(whitespace: str = "[ \t\r\n]*") -> str:
    """A regex of a line in the producer's own form (see ``classify_ad_events``)."""
    plain_string = r'"[^"\\\x00-\x1f]*"'  # no quote, no escape, no control character
    members = f"{whitespace},{whitespace}".join(
        f'"{name}"{whitespace}:{whitespace}{plain_string}' for name in RAW_EVENT_FIELDS
    )
    return rf"\A{whitespace}\{{{whitespace}{members}{whitespace}\}}{whitespace}\z"


PRODUCER_FORM = _producer_form()


@table(
    "silver.ad_events",
    upstream=["bronze.ad_events", "dims.campaigns"],
    schema=SCHEMA,
    partition_by=["event_date", "event_hour"],
    write=Write.MERGE_NEW,
    key="event_id",
    # One winner per event_id, whichever hours a backfill covers: the copy bronze ingested first.
    first_by=["ingested_at", "source_file", "event_time"],
    key_window_hours=DUPLICATE_WINDOW_HOURS,
    batch=True,
    lineage=["source_file", "ingested_at", "rescued_data"],  # which copy of a duplicate was kept
    # Classification quarantines an unknown ad; a row without a campaign got here some other way.
    expect=[expect_no_nulls("every event has a campaign", "campaign_id")],
)
def classify_ad_events(
    bronze: DataFrame, campaigns: DataFrame, *, shortcut: bool = True
) -> DataFrame:
    """Bronze rows parsed and checked, with ``reason`` null for a valid event.

    Output columns: every silver column, plus ``raw_line`` (valid UTF-8), ``raw_bytes`` (the
    line's exact bytes when they were not valid UTF-8, else null), ``ingest_date``, ``reason``
    and ``reason_detail``. ``campaigns`` is the (ad_id, campaign_id) dimension.

    No expression here can fail on any input (ANSI mode is on): every parse is a ``try_`` form
    and the event time is converted only from digits, so one bad line can never stop the stream.
    The contract, checked in this order (the first failure is the reason):

    * the line is not the start of a gzip stream (``gzip_payload``: a compressed file under a
      ``.jsonl`` name), is valid UTF-8 (``invalid_utf8``), at most 1 MiB (``line_too_long``) and
      not blank (``empty_line``); a leading byte-order mark is ignored;
    * it is exactly one JSON object, nothing before or after it but whitespace, with no
      duplicate keys at any depth (``malformed_json``);
    * every contract field is present, not null and not blank (``missing_required_field``), and
      a JSON string (``wrong_field_type``): the Variant keeps each value's JSON type, so a number
      is never silently cast;
    * ``event_time`` is epoch milliseconds as 1 to 15 ASCII digits (``invalid_event_time``):
      ISO-8601 strings, signs, fractions and exponents are quarantined, not guessed at, since
      the producer promises millis and anything else is a producer bug to be seen;
    * it is not before the contract's floor (``event_time_too_old``: ``EVENT_TIME_FLOOR``, default
      2000-01-01; a value of 10 digits is flagged as likely epoch seconds in the detail);
    * it is at most ``MAX_FUTURE_SKEW_SECONDS`` (5 minutes) ahead of the line's ingestion
      (``event_time_in_future``; the detail says how far ahead), and its event type, ad type and
      ad id are known.

    Fields beyond the contract (schema drift) are kept, as JSON, in ``rescued_data``.

    Nearly every line is in the producer's form (``PRODUCER_FORM``): the contract's fields in
    their order, each a JSON string without escapes or control characters, nothing else. Such a
    line is one JSON object of distinct string fields by construction, and its values are the
    text between its quotes, so it is split on ``"`` instead of parsed (a Variant parse and its
    type checks cost several times the rest of the pipeline). Every other line takes the general
    path; ``shortcut=False`` sends every line there (the tests compare the two).
    """
    # Bronze rows written before raw_bytes existed still hold invalid UTF-8 in raw_line itself.
    stored_bytes = (
        F.col("raw_bytes") if "raw_bytes" in bronze.columns else F.lit(None).cast("binary")
    )
    raw_bytes = F.coalesce(
        stored_bytes, F.when(~F.is_valid_utf8("raw_line"), F.col("raw_line").cast("binary"))
    )
    in_producer_form = F.col("_raw_bytes").isNull() & F.coalesce(
        F.col("raw_line").rlike(PRODUCER_FORM), F.lit(False)
    )
    lines = bronze.withColumn("_raw_bytes", raw_bytes).withColumn(
        "_plain", in_producer_form if shortcut else F.lit(False)
    )
    fields = _fields_of_lines(lines)
    enriched = fields.join(
        F.broadcast(campaigns.select(F.col("ad_id").alias("_dim_ad_id"), "campaign_id")),
        F.col("_ad_id") == F.col("_dim_ad_id"),
        "left",
    )
    # Only digits reach the cast (and it is a try_cast anyway); 15 digits fit timestamp_millis.
    millis = F.when(
        F.col("_event_time").rlike(EVENT_TIME_PATTERN), F.col("_event_time").try_cast("long")
    )
    latest_accepted = F.try_add(
        F.col("ingested_at"), F.expr(f"INTERVAL {MAX_FUTURE_SKEW_SECONDS} SECONDS")
    )
    # A column of its own, so that it is computed once per row, not once per use.
    checked = enriched.withColumn("_millis", millis).withColumn(
        "_event_ts", F.timestamp_millis("_millis")
    )
    value_reason = _first_failure(
        [
            (F.col("_event_ts").isNull(), Reason.INVALID_EVENT_TIME),
            (F.col("_millis") < F.lit(EVENT_TIME_FLOOR_MILLIS), Reason.TOO_OLD_EVENT_TIME),
            (F.col("_event_ts") > latest_accepted, Reason.FUTURE_EVENT_TIME),
            (~F.col("_event_type").isin(*EVENT_TYPES), Reason.UNKNOWN_EVENT_TYPE),
            (~F.col("_ad_type").isin(*AD_TYPES), Reason.UNKNOWN_AD_TYPE),
            (F.col("campaign_id").isNull(), Reason.UNKNOWN_AD),
        ]
    )
    value_detail = _detail_of(
        F.col("reason"),
        {
            Reason.INVALID_EVENT_TIME: F.col("_event_time"),
            Reason.TOO_OLD_EVENT_TIME: F.concat(
                F.col("_event_time"),
                F.lit(f" ms is before {EVENT_TIME_FLOOR}"),
                F.when(
                    F.length("_event_time") == SECONDS_DIGITS,
                    F.lit(
                        f"; {SECONDS_DIGITS} digits: likely epoch seconds, the contract is milliseconds"
                    ),
                ).otherwise(F.lit("")),
            ),
            Reason.FUTURE_EVENT_TIME: F.concat(
                F.col("_event_time"),
                F.lit(" ms is "),
                F.expr("(_millis - unix_millis(ingested_at)) div 1000").cast("string"),
                F.lit(" s ahead of its ingestion at "),
                F.date_format("ingested_at", "yyyy-MM-dd HH:mm:ss"),
                F.lit(f" UTC; at most {MAX_FUTURE_SKEW_SECONDS} s is accepted"),
            ),
            Reason.UNKNOWN_EVENT_TYPE: F.col("_event_type"),
            Reason.UNKNOWN_AD_TYPE: F.col("_ad_type"),
            Reason.UNKNOWN_AD: F.col("_ad_id"),
        },
    )
    event_time = F.col("_event_ts")
    return checked.withColumn("reason", F.coalesce("_line_reason", value_reason)).select(
        *[F.col(f"_{name}").alias(name) for name in RAW_EVENT_FIELDS if name != "event_time"],
        event_time.alias("event_time"),
        "campaign_id",
        F.when(F.size("_extra_fields") > 0, F.to_json("_extra_fields")).alias("rescued_data"),
        "source_file",
        "ingested_at",
        F.to_date(event_time).alias("event_date"),
        F.hour(event_time).alias("event_hour"),
        F.col("_text").alias("raw_line"),
        "ingest_date",
        "reason",
        F.when(F.col("_line_reason").isNotNull(), F.col("_line_detail"))
        .otherwise(value_detail)
        .alias("reason_detail"),
        F.col("_raw_bytes").alias("raw_bytes"),
    )


def _blank(column: Column) -> Column:
    return F.btrim(column, F.lit(JSON_WHITESPACE)) == ""


def _fields_of_lines(lines: DataFrame) -> DataFrame:
    """Each line's own checks, its fields and its extra fields, by the shortcut or the general path.

    A line in the producer's form (``_plain``) is split on '"'; every other line is parsed as a
    Variant, each field's JSON type checked and its extra fields kept. Each step computes one
    path's value only (a ``when`` on ``_plain``), so the source is read once and a plain line
    never pays for the parse.
    """
    plain = F.col("_plain")
    text = F.when(plain, F.col("raw_line")).otherwise(F.make_valid_utf8("raw_line"))
    line = F.when(F.col("_text").startswith(BOM), F.substr("_text", F.lit(2))).otherwise(
        F.col("_text")
    )
    # parse_json reads the first JSON value of a line and ignores whatever follows it. Wrapped in
    # an array and, separately, as an object's value, a line parses both ways only when it is one
    # value and whitespace: after the value, "]" breaks the object, "}" the array, "," needs a key
    # and ":" in the object but no ":" in the array, and anything else breaks both.
    in_array = F.try_parse_json(F.concat(F.lit("["), F.col("_line"), F.lit("]")))
    in_object = F.try_parse_json(F.concat(F.lit('{"line":'), F.col("_line"), F.lit("}")))
    event = F.when(~plain & in_array.isNotNull(), F.try_variant_get(in_object, "$.line", "variant"))
    # '{"event_id": "<value 0>", "user_id": "<value 1>", ...}'
    quoted = F.when(plain, F.split("raw_line", '"'))
    parsed = (
        lines.withColumns({"_text": text, "_quoted": quoted})
        .withColumn("_line", F.when(~plain, line))
        .withColumn("_event", event)
        .withColumns(
            {
                **{
                    f"_{name}": F.when(
                        plain, F.try_element_at("_quoted", F.lit(4 * i + 4))
                    ).otherwise(F.try_variant_get("_event", f"$.{name}", "string"))
                    for i, name in enumerate(RAW_EVENT_FIELDS)
                },
                **{
                    f"_{name}_type": F.when(plain, F.lit("STRING")).otherwise(
                        F.schema_of_variant(F.try_variant_get("_event", f"$.{name}", "variant"))
                    )
                    for name in RAW_EVENT_FIELDS
                },
            }
        )
    )

    def missing_or_blank(name: str) -> Column:
        kind = F.coalesce(F.col(f"_{name}_type"), F.lit("VOID"))
        return (kind == "VOID") | ((kind == "STRING") & _blank(F.col(f"_{name}")))

    missing = _fields_where(missing_or_blank)
    wrong_type = _fields_where(lambda name: F.col(f"_{name}_type") != "STRING")
    reason = _first_failure(
        [
            (F.startswith(F.col("_raw_bytes"), F.lit(GZIP_MAGIC)), Reason.GZIP_PAYLOAD),
            (F.col("_raw_bytes").isNotNull(), Reason.INVALID_UTF8),
            (F.octet_length("raw_line") > MAX_LINE_BYTES, Reason.LINE_TOO_LONG),
            # A null line (a Kafka record without a value) is empty too.
            (~plain & F.coalesce(_blank(F.col("_line")), F.lit(True)), Reason.EMPTY_LINE),
            (
                ~plain
                & (F.col("_event").isNull() | ~F.schema_of_variant("_event").startswith("OBJECT")),
                Reason.MALFORMED_JSON,
            ),
            (missing != "", Reason.MISSING_FIELD),
            (~plain & (wrong_type != ""), Reason.WRONG_TYPE),
        ]
    )
    detail = _detail_of(
        F.col("_line_reason"),
        {
            Reason.GZIP_PAYLOAD: F.lit(GZIP_PAYLOAD_FIX),
            Reason.LINE_TOO_LONG: F.octet_length("raw_line").cast("string"),
            Reason.MISSING_FIELD: missing,
            Reason.WRONG_TYPE: wrong_type,
        },
    )
    extra_fields = F.when(
        ~plain,
        F.map_filter(
            F.try_variant_get("_event", "$", "map<string,string>"),
            lambda key, _: ~key.isin(*RAW_EVENT_FIELDS),
        ),
    )
    return parsed.withColumn("_line_reason", reason).withColumns(
        {"_line_detail": detail, "_extra_fields": extra_fields}
    )


side_table(
    "silver.quarantine_ad_events",
    written_by="silver.ad_events",
    role="quarantine",
    # A backfill that accepts a quarantined line (its ad is in the dimension now) marks its row resolved.
    schema=f"{QUARANTINE_SCHEMA}, resolved_at TIMESTAMP, resolved_by STRING",
    partition_by=["ingest_date"],
)
side_table(
    "ops.silver_batch_metrics",
    written_by="silver.ad_events",
    role="metrics",
    schema=BATCH_METRICS_SCHEMA,
    retention=Retention("recorded_at", days=30),  # one row a batch: kept a month
    # The generator's producer spoils 0.5 % of lines; far more means a producer or contract change.
    expect=[
        expect(
            "at most 5% of a batch's lines quarantined",
            "sum(quarantined) / sum(lines)",
            "<= 0.05",
            on_failure="warn",
            per="batch",
        )
    ],
)


def valid_ad_events(classified: DataFrame) -> DataFrame:
    """The classified rows that passed every check, in silver's column order."""
    return classified.filter(F.col("reason").isNull()).select(*column_names(SCHEMA))


def quarantined_ad_events(classified: DataFrame) -> DataFrame:
    """The classified rows that failed a check, with their raw line and reason."""
    return classified.filter(F.col("reason").isNotNull()).select(*column_names(QUARANTINE_SCHEMA))


def deduplicate_ad_events(events: DataFrame) -> DataFrame:
    """One row per ``event_id`` (an at-least-once producer re-sends identical events)."""
    return events.dropDuplicates(["event_id"])
