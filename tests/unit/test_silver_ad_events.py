"""silver.ad_events: parsing, validation reasons, enrichment and deduplication, on hand-built rows."""

from __future__ import annotations

import json
from datetime import date, datetime

import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog
from lakehouse.tables import silver_ad_events as silver
from lakehouse.tables.bronze_ad_events import bronze_ad_events
from lakehouse.tables.silver_ad_events import (
    GZIP_PAYLOAD_FIX,
    classify_ad_events,
    deduplicate_ad_events,
    quarantined_ad_events,
    valid_ad_events,
)

INGESTED = datetime(2026, 11, 20, 10, 30)
# The bronze columns silver reads (bronze has more, e.g. Kafka lineage, which silver ignores).
BRONZE_COLUMNS = "raw_line string, source_file string, ingested_at timestamp, ingest_date date"
# What each quarantined line must keep, whatever else the quarantine table holds.
QUARANTINE_COLUMNS = "raw_line string, reason string, reason_detail string, source_file string, ingested_at timestamp, ingest_date date"
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
    return spark.createDataFrame(
        [("ad-1", "camp-1"), ("ad-2", "camp-2")], "ad_id string, campaign_id string"
    )


def bronze(spark, *lines):
    return spark.createDataFrame(
        [(line, "file:/landing/part-0.jsonl", INGESTED, INGESTED.date()) for line in lines],
        BRONZE_COLUMNS,
    )


def quarantine_columns(frame):
    return frame.select(*[column.split()[0] for column in QUARANTINE_COLUMNS.split(", ")])


def test_valid_events_are_typed_and_enriched(spark, campaigns):
    lines = [
        event(),
        event(event_id="e-2", ad_id="ad-2", event_type="click", event_time=str(TEN_AM_MS - 1)),
    ]
    classified = classify_ad_events(bronze(spark, *lines), campaigns)

    expected = spark.createDataFrame(
        [
            (
                "e-1",
                "u-1",
                "p-1",
                "ad-1",
                "banner",
                "view",
                datetime(2026, 11, 20, 10, 0, 1, 234000),
                "10.0.0.1",
                "camp-1",
                None,
                "file:/landing/part-0.jsonl",
                INGESTED,
                date(2026, 11, 20),
                10,
            ),
            (
                "e-2",
                "u-1",
                "p-1",
                "ad-2",
                "banner",
                "click",
                datetime(2026, 11, 20, 9, 59, 59, 999000),
                "10.0.0.1",
                "camp-2",
                None,
                "file:/landing/part-0.jsonl",
                INGESTED,
                date(2026, 11, 20),
                9,
            ),
        ],
        catalog.get("silver.ad_events").spark_schema(),
    )
    assertDataFrameEqual(valid_ad_events(classified), expected)
    assert quarantined_ad_events(classified).count() == 0


ISO_TIME = "2026-11-20T00:00:05+01:00"


# (line, reason, reason_detail) of each kind of bad line.
BAD_LINES = [
    ("", "empty_line", None),
    ("   ", "empty_line", None),
    (" \t\r\n ", "empty_line", None),
    ("\ufeff", "empty_line", None),
    ('{"event_id": "e-1", "user_id": ', "malformed_json", None),
    ("this is not json", "malformed_json", None),
    ('[{"event_id": "e-1"}]', "malformed_json", None),
    ('"just a string"', "malformed_json", None),
    ("\x0b" + event(), "malformed_json", None),  # a vertical tab is not JSON whitespace
    (event()[:-40], "malformed_json", None),  # truncated
    # Text after the object: a second object, garbage, or a closing bracket or brace.
    (event() + event(event_id="e-2"), "malformed_json", None),
    (event() + " x", "malformed_json", None),
    (event() + "]", "malformed_json", None),
    (event() + "}", "malformed_json", None),
    (event() + "," + event(event_id="e-2"), "malformed_json", None),
    (event() + ',"more": 1}', "malformed_json", None),
    (event() + "\x00", "malformed_json", None),
    (event()[:-1] + ', "event_id": "e-2"}', "malformed_json", None),  # duplicate key
    (event()[:-1] + ', "x": {"k": 1, "k": 2}}', "malformed_json", None),  # duplicate key, nested
    (event()[:-1] + ', "x": "\\ud800"}', "malformed_json", None),  # an escaped lone surrogate
    (
        event(page_id="p\udda2"),
        "malformed_json",
        None,
    ),  # a lone low surrogate (json.dumps escapes it)
    (
        event(user_id=None).replace('"page_id"', '"user_id": null, "page_id"'),
        "missing_required_field",
        "user_id",
    ),
    (event(event_id=""), "missing_required_field", "event_id"),
    (event(event_id=" \t"), "missing_required_field", "event_id"),
    (event(ad_id="", event_time="\n"), "missing_required_field", "ad_id,event_time"),
    (event().replace('"u-1"', "42"), "wrong_field_type", "user_id"),
    (event().replace('"u-1"', "true"), "wrong_field_type", "user_id"),
    (event().replace('"u-1"', '{"id": "u-1"}'), "wrong_field_type", "user_id"),
    (
        event().replace(f'"{TEN_AM_MS + 1234}"', str(TEN_AM_MS + 1234)),
        "wrong_field_type",
        "event_time",
    ),
    (event().replace(f'"{TEN_AM_MS + 1234}"', "1795168801234.0"), "wrong_field_type", "event_time"),
    (event().replace(f'"{TEN_AM_MS + 1234}"', "1e400"), "wrong_field_type", "event_time"),
    (event().replace('"view"', '["view"]'), "wrong_field_type", "event_type"),
    (event(event_type=None), "missing_required_field", "event_type"),
    (event(ad_id=None, event_time=None), "missing_required_field", "ad_id,event_time"),
    # event_time is epoch millis as 1 to 15 ASCII digits in a JSON string, nothing else.
    (event(event_time="yesterday"), "invalid_event_time", "yesterday"),
    (event(event_time=ISO_TIME), "invalid_event_time", ISO_TIME),
    (event(event_time="2026-11-20T00:00:05Z"), "invalid_event_time", "2026-11-20T00:00:05Z"),
    (event(event_time="-5"), "invalid_event_time", "-5"),
    (event(event_time="+5"), "invalid_event_time", "+5"),
    (event(event_time="1795168801234.5"), "invalid_event_time", "1795168801234.5"),
    (event(event_time="1.7e12"), "invalid_event_time", "1.7e12"),
    (event(event_time="123\n"), "invalid_event_time", "123\n"),
    (event(event_time=" 123"), "invalid_event_time", " 123"),
    (event(event_time="١٢٣"), "invalid_event_time", "١٢٣"),  # Arabic-Indic digits
    (event(event_time="9" * 16), "invalid_event_time", "9" * 16),
    (event(event_time="9" * 400), "invalid_event_time", "9" * 400),
    (  # year 33658, no overflow
        event(event_time="9" * 15),
        "event_time_in_future",
        "9" * 15 + " ms is 998204829399 s ahead of its ingestion at 2026-11-20 10:30:00 UTC;"
        " at most 300 s is accepted",
    ),
    # Digits that no producer means: before the contract's floor (2000-01-01), 10 digits flagged.
    (
        event(event_time="1763596800"),  # 2025-11-20 in seconds: read as millis, 1970-01-21
        "event_time_too_old",
        "1763596800 ms is before 2000-01-01; 10 digits: likely epoch seconds, the contract is milliseconds",
    ),
    (event(event_time="0"), "event_time_too_old", "0 ms is before 2000-01-01"),
    (event(event_time="1000"), "event_time_too_old", "1000 ms is before 2000-01-01"),
    (
        event(event_time="946684799999"),  # 1999-12-31T23:59:59.999Z
        "event_time_too_old",
        "946684799999 ms is before 2000-01-01",
    ),
    (
        event(event_time=str(TEN_AM_MS + 3 * 86_400_000)),
        "event_time_in_future",
        f"{TEN_AM_MS + 3 * 86_400_000} ms is 257400 s ahead of its ingestion at 2026-11-20 10:30:00"
        " UTC; at most 300 s is accepted",
    ),
    (  # an hour ahead of its ingestion: a producer clock bug (the bound is 5 minutes)
        event(event_time=str(TEN_AM_MS + 90 * 60_000)),
        "event_time_in_future",
        f"{TEN_AM_MS + 90 * 60_000} ms is 3600 s ahead of its ingestion at 2026-11-20 10:30:00"
        " UTC; at most 300 s is accepted",
    ),
    (event(event_type="hover"), "unknown_event_type", "hover"),
    (event(ad_type="popup"), "unknown_ad_type", "popup"),
    (event(ad_id="ad-9"), "unknown_ad_id", "ad-9"),
]


def test_bad_lines_are_quarantined_with_raw_line_and_reason(spark, campaigns):
    """Every kind of bad line, in one batch: no expression may fail the batch (ANSI mode is on)."""
    classified = classify_ad_events(bronze(spark, *[line for line, _, _ in BAD_LINES]), campaigns)

    expected = spark.createDataFrame(
        [
            (line, reason, detail, "file:/landing/part-0.jsonl", INGESTED, INGESTED.date())
            for line, reason, detail in BAD_LINES
        ],
        QUARANTINE_COLUMNS,
    )
    assertDataFrameEqual(quarantine_columns(quarantined_ad_events(classified)), expected)
    assert valid_ad_events(classified).count() == 0
    # Every column is computed, year 33658 included (as strings: that is beyond Python's datetime).
    computed = classified.select(
        *[F.col(c).cast("string") for c in ("event_time", "event_date", "event_hour")]
    )
    assert len(computed.collect()) == len(BAD_LINES)


def test_an_event_at_the_event_time_floor_is_valid(spark, campaigns):
    """The floor is the first accepted moment: 2000-01-01T00:00:00.000Z itself is an event."""
    classified = classify_ad_events(
        bronze(spark, event(event_time="946684800000"), event(event_id="e-2")), campaigns
    )
    valid = valid_ad_events(classified).select("event_id", "event_time", "event_date")
    expected = spark.createDataFrame(
        [
            ("e-1", datetime(2000, 1, 1), date(2000, 1, 1)),
            ("e-2", datetime(2026, 11, 20, 10, 0, 1, 234000), date(2026, 11, 20)),
        ],
        "event_id string, event_time timestamp, event_date date",
    )
    assertDataFrameEqual(valid, expected)


def test_lines_with_a_bom_whitespace_or_braces_in_strings_are_valid(spark, campaigns):
    lines = [
        "\ufeff" + event(event_id="e-bom"),  # a Kafka record, or a file appended to another
        event(event_id="e-ws") + "  \t\r",
        "\r\n " + event(event_id="e-lead"),
        event(event_id="e-braces", page_id='}{"]["'),
        event(event_id="e-nested")[:-1] + ', "x": {"y": [{"z": "}"}, []], "e": {}}}',
    ]
    classified = classify_ad_events(bronze(spark, *lines), campaigns)

    assert quarantine_columns(quarantined_ad_events(classified)).collect() == []
    valid = valid_ad_events(classified).select("event_id", "page_id", "rescued_data")
    expected = spark.createDataFrame(
        [
            ("e-bom", "p-1", None),
            ("e-ws", "p-1", None),
            ("e-lead", "p-1", None),
            ("e-braces", '}{"]["', None),
            ("e-nested", "p-1", '{"x":"{\\"e\\":{},\\"y\\":[{\\"z\\":\\"}\\"},[]]}"}'),
        ],
        "event_id string, page_id string, rescued_data string",
    )
    assertDataFrameEqual(valid, expected)


def test_empty_event_ids_do_not_collapse_into_one_event(spark, campaigns):
    lines = [event(event_id="", user_id="u-1"), event(event_id="", user_id="u-2")]
    classified = classify_ad_events(bronze(spark, *lines), campaigns)

    assert deduplicate_ad_events(valid_ad_events(classified)).count() == 0
    assert [r.reason for r in quarantined_ad_events(classified).collect()] == [
        "missing_required_field"
    ] * 2


def valid_text(line: bytes) -> bytes:
    """The line with each invalid UTF-8 sequence replaced by U+FFFD."""
    return line.decode("utf-8", errors="replace").encode()


def test_lines_that_are_not_utf8_or_too_long_are_quarantined_raw(spark, campaigns):
    """Invalid UTF-8 keeps its exact bytes in raw_bytes; every text column is valid UTF-8."""
    invalid_utf8 = event().encode().replace(b"u-1", b"u-\xff\xfe")
    truncated_bom = b"\xef\xbb" + event(event_id="e-2").encode()
    gzip_start = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff\x8b\xae"  # a gzip file's first "line"
    too_long = event(page_id="p" * (1024 * 1024)).encode()
    # Old bronze rows (before raw_bytes existed) hold the bytes in raw_line; new ones come from
    # bronze_ad_events, which makes raw_line valid and keeps the bytes in raw_bytes.
    old_bronze = spark.createDataFrame(
        [(line.hex(), "f", INGESTED, INGESTED.date()) for line in (invalid_utf8, too_long)],
        "hex string, source_file string, ingested_at timestamp, ingest_date date",
    ).select(
        F.unhex("hex").cast("string").alias("raw_line"), "source_file", "ingested_at", "ingest_date"
    )
    new_bronze = bronze_ad_events(
        spark.createDataFrame(
            [(line.hex(), "f", INGESTED) for line in (invalid_utf8, truncated_bom, gzip_start)],
            "hex string, source_file string, ingested_at timestamp",
        ).select(F.unhex("hex").cast("string").alias("value"), "source_file", "ingested_at")
    )
    bronze_rows = new_bronze.select(
        F.hex(F.col("raw_line").cast("binary")).alias("line"), F.hex("raw_bytes").alias("b")
    )
    assert sorted(
        (bytes.fromhex(r.line), r.b and bytes.fromhex(r.b)) for r in bronze_rows.collect()
    ) == sorted(
        [
            (valid_text(invalid_utf8), invalid_utf8),
            (valid_text(truncated_bom), truncated_bom),
            (valid_text(gzip_start), gzip_start),
        ]
    )

    both = old_bronze.unionByName(
        new_bronze.select(*old_bronze.columns, "raw_bytes"), allowMissingColumns=True
    )
    classified = classify_ad_events(both, campaigns)
    rows = classified.select(
        F.hex(F.col("raw_line").cast("binary")).alias("line"),
        F.hex("raw_bytes").alias("b"),
        "reason",
        "reason_detail",
    ).collect()
    assert sorted(
        (bytes.fromhex(r.line), r.b and bytes.fromhex(r.b), r.reason, r.reason_detail) for r in rows
    ) == sorted(
        [
            (valid_text(invalid_utf8), invalid_utf8, "invalid_utf8", None),
            (too_long, None, "line_too_long", str(len(too_long))),
            (valid_text(invalid_utf8), invalid_utf8, "invalid_utf8", None),
            (valid_text(truncated_bom), truncated_bom, "invalid_utf8", None),
            (valid_text(gzip_start), gzip_start, "gzip_payload", GZIP_PAYLOAD_FIX),
        ]
    )
    assert classified.filter(~F.is_valid_utf8("raw_line")).count() == 0


def test_a_kafka_record_without_a_value_is_an_empty_line(spark, campaigns):
    classified = classify_ad_events(bronze(spark, None), campaigns)

    assert [(r.raw_line, r.reason) for r in quarantined_ad_events(classified).collect()] == [
        (None, "empty_line")
    ]


def test_fields_beyond_the_contract_are_rescued_not_lost(spark, campaigns):
    line = event()[:-1] + ', "campaign_hint": "summer", "score": 0.5, "tags": ["a"]}'
    valid = valid_ad_events(classify_ad_events(bronze(spark, line), campaigns))

    assert [json.loads(row.rescued_data) for row in valid.collect()] == [
        {"campaign_hint": "summer", "score": "0.5", "tags": '["a"]'}
    ]


def test_duplicates_keep_one_row_per_event_id(spark, campaigns):
    lines = [event(), event(), event(event_id="e-2")]
    deduplicated = deduplicate_ad_events(
        valid_ad_events(classify_ad_events(bronze(spark, *lines), campaigns))
    )

    assert sorted(row.event_id for row in deduplicated.collect()) == ["e-1", "e-2"]


def test_the_oracle_gives_each_bad_line_the_same_reason(tmp_path):
    """The plain-Python oracle applies the same contract (no Spark: it shares no code with silver)."""
    from lakehouse_tools.oracle import expected_from_lines

    campaigns_csv = tmp_path / "campaigns.csv"
    campaigns_csv.write_text("ad_id,campaign_id\nad-1,camp-1\nad-2,camp-2\n")
    for line, reason, _ in BAD_LINES:
        expected = expected_from_lines([line], campaigns_csv, ingested_at=INGESTED)
        assert dict(expected.quarantined) == {reason: 1}, line
    valid = expected_from_lines(
        ["\ufeff" + event(), event(event_id="e-2") + " \r"], campaigns_csv, INGESTED
    )
    assert (set(valid.events), valid.duplicates, dict(valid.quarantined)) == ({"e-1", "e-2"}, 0, {})


# Lines near the producer's form (the shortcut of classify_ad_events): each is classified the same
# whether or not the shortcut may take it.
NEAR_PRODUCER_FORM = [
    event(),
    event(user_id=""),  # blank values are in the form: still missing_required_field
    event(user_id=" \t"),
    event(event_time="12x"),
    event(event_time="2026-11-20T00:00:05+01:00"),
    event(ad_id="ad-404"),
    event(event_type="hover"),
    event(ad_type="popup"),
    event(event_time=str(TEN_AM_MS + 3 * 86_400_000)),  # days ahead of ingestion
    event(event_time="1763596800"),  # seconds: before the floor
    event().replace(
        "10.0.0.1", "10.0.0.1 \u00e9\u4e2d\U0001f600"
    ),  # non-ASCII, unescaped: in the form
    json.dumps(json.loads(event()), separators=(",", ":")),  # compact
    "  " + event() + " \t",
    event().replace(", ", " ,\t"),
    event(user_id='u"1'),  # an escape: the general path
    event(user_id="u\\1"),
    event().replace('"e-1"', '"e\\u002d1"'),
    event() + "{}",
    event() + " x",
    event()[:-1] + ', "extra": "drift"}',
    event()[:-1] + ', "event_id": "e-2"}',  # a duplicate key
    json.dumps(
        {**{k: v for k, v in json.loads(event()).items() if k != "event_id"}, "event_id": "e-1"}
    ),  # other order
    event().replace('"e-1"', "7"),  # a number
    "\ufeff" + event(),
    "",
    "   ",
    "{}",
    "[]",
]


def test_the_producer_form_shortcut_classifies_like_the_general_path(spark, campaigns):
    lines = bronze(spark, *NEAR_PRODUCER_FORM)
    assertDataFrameEqual(
        classify_ad_events(lines, campaigns), classify_ad_events(lines, campaigns, shortcut=False)
    )
    # The test means something only if the shortcut took some of these lines and left others.
    taken = lines.filter(F.col("raw_line").rlike(silver.PRODUCER_FORM)).count()
    assert taken == 13, taken  # the first 14 lines but the one whose tab json.dumps escapes
