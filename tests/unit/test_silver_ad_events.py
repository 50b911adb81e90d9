"""silver.ad_events: parsing, validation reasons, enrichment and deduplication, on hand-built rows."""

from __future__ import annotations

import json
from datetime import date, datetime

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse.schemas import CAMPAIGNS_SCHEMA, QUARANTINE_AD_EVENTS_SCHEMA, SILVER_AD_EVENTS_SCHEMA
from lakehouse.tables.silver_ad_events import (
    classify_ad_events,
    deduplicate_ad_events,
    quarantined_ad_events,
    valid_ad_events,
)

INGESTED = datetime(2026, 11, 20, 10, 30)
# The bronze columns silver reads (bronze has more, e.g. Kafka lineage, which silver ignores).
BRONZE_COLUMNS = "raw_line string, source_file string, ingested_at timestamp, ingest_date date"
TEN_AM_MS = 1795168800000  # 2026-11-20T10:00:00Z


def event(**overrides) -> str:
    fields = {
        "event_id": "e-1",
        "user_id": "u-1",
        "page_id": "p-1",
        "ad_id": "ad-1",
        "ad_type": "banner",
        "event_type": "view",
        "event_time": str(TEN_AM_MS + 1234),
        "ip_address": "10.0.0.1",
    }
    fields.update(overrides)
    return json.dumps({k: v for k, v in fields.items() if v is not None})


@pytest.fixture
def campaigns(spark):
    return spark.createDataFrame([("ad-1", "camp-1"), ("ad-2", "camp-2")], CAMPAIGNS_SCHEMA)


def bronze(spark, *lines):
    return spark.createDataFrame(
        [(line, "file:/landing/part-0.jsonl", INGESTED, INGESTED.date()) for line in lines], BRONZE_COLUMNS
    )


def test_valid_events_are_typed_and_enriched(spark, campaigns):
    lines = [
        event(),
        event(event_id="e-2", ad_id="ad-2", event_type="click", event_time=str(TEN_AM_MS - 1)),
    ]
    classified = classify_ad_events(bronze(spark, *lines), campaigns)

    expected = spark.createDataFrame(
        [
            ("e-1", "u-1", "p-1", "ad-1", "banner", "view", datetime(2026, 11, 20, 10, 0, 1, 234000), "10.0.0.1",
             "camp-1", None, "file:/landing/part-0.jsonl", INGESTED, date(2026, 11, 20), 10),
            ("e-2", "u-1", "p-1", "ad-2", "banner", "click", datetime(2026, 11, 20, 9, 59, 59, 999000), "10.0.0.1",
             "camp-2", None, "file:/landing/part-0.jsonl", INGESTED, date(2026, 11, 20), 9),
        ],
        SILVER_AD_EVENTS_SCHEMA,
    )  # fmt: skip
    assertDataFrameEqual(valid_ad_events(classified), expected)
    assert quarantined_ad_events(classified).count() == 0


@pytest.mark.parametrize(
    ("line", "reason", "detail"),
    [
        ("", "empty_line", None),
        ("   ", "empty_line", None),
        ('{"event_id": "e-1", "user_id": ', "malformed_json", None),
        ("this is not json", "malformed_json", None),
        ('[{"event_id": "e-1"}]', "malformed_json", None),
        ('"just a string"', "malformed_json", None),
        (event()[:-40], "malformed_json", None),  # truncated
        (event(user_id=None).replace('"page_id"', '"user_id": null, "page_id"'), "missing_required_field", "user_id"),
        (event().replace('"u-1"', "42"), "wrong_field_type", "user_id"),
        (event().replace(f'"{TEN_AM_MS + 1234}"', str(TEN_AM_MS + 1234)), "wrong_field_type", "event_time"),
        (event().replace('"view"', '["view"]'), "wrong_field_type", "event_type"),
        (event(event_type=None), "missing_required_field", "event_type"),
        (event(ad_id=None, event_time=None), "missing_required_field", "ad_id,event_time"),
        (event(event_time="yesterday"), "invalid_event_time", "yesterday"),
        (event(event_time="-5"), "invalid_event_time", "-5"),
        (event(event_time=str(TEN_AM_MS + 3 * 86_400_000)), "event_time_in_future", str(TEN_AM_MS + 3 * 86_400_000)),
        (event(event_type="hover"), "unknown_event_type", "hover"),
        (event(ad_type="popup"), "unknown_ad_type", "popup"),
        (event(ad_id="ad-9"), "unknown_ad_id", "ad-9"),
    ],
)
def test_bad_lines_are_quarantined_with_raw_line_and_reason(spark, campaigns, line, reason, detail):
    classified = classify_ad_events(bronze(spark, line), campaigns)

    expected = spark.createDataFrame(
        [(line, reason, detail, "file:/landing/part-0.jsonl", INGESTED, INGESTED.date())],
        QUARANTINE_AD_EVENTS_SCHEMA,
    )
    assertDataFrameEqual(quarantined_ad_events(classified), expected)
    assert valid_ad_events(classified).count() == 0


def test_lines_that_are_not_utf8_or_too_long_are_quarantined_raw(spark, campaigns):
    invalid_utf8 = event().encode().replace(b"u-1", b"u-\xff\xfe")
    too_long = event(page_id="p" * (1024 * 1024)).encode()
    rows = spark.createDataFrame(
        [(invalid_utf8.hex(), "f", INGESTED, INGESTED.date()), (too_long.hex(), "f", INGESTED, INGESTED.date())],
        "hex string, source_file string, ingested_at timestamp, ingest_date date",
    )
    lines = rows.select(F.unhex("hex").cast("string").alias("raw_line"), "source_file", "ingested_at", "ingest_date")

    quarantined = quarantined_ad_events(classify_ad_events(lines, campaigns))
    rows = quarantined.select(F.hex(F.col("raw_line").cast("binary")).alias("hex"), "reason", "reason_detail").collect()
    assert sorted((r.hex.lower(), r.reason, r.reason_detail) for r in rows) == sorted(
        [(invalid_utf8.hex(), "invalid_utf8", None), (too_long.hex(), "line_too_long", str(len(too_long)))]
    )


def test_fields_beyond_the_contract_are_rescued_not_lost(spark, campaigns):
    line = event()[:-1] + ', "campaign_hint": "summer", "score": 0.5, "tags": ["a"]}'
    valid = valid_ad_events(classify_ad_events(bronze(spark, line), campaigns))

    assert [json.loads(row.rescued_data) for row in valid.collect()] == [
        {"campaign_hint": "summer", "score": "0.5", "tags": '["a"]'}
    ]


def test_duplicates_keep_one_row_per_event_id(spark, campaigns):
    lines = [event(), event(), event(event_id="e-2")]
    deduplicated = deduplicate_ad_events(valid_ad_events(classify_ad_events(bronze(spark, *lines), campaigns)))

    assert sorted(row.event_id for row in deduplicated.collect()) == ["e-1", "e-2"]
