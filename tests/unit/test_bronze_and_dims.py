"""bronze.ad_events and dims.campaigns transformations."""

from __future__ import annotations

import re
from datetime import date, datetime

import pytest
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from lakehouse import catalog
from lakehouse.errors import ConfigError
from lakehouse.flows.snapshot import check_csv_shape
from lakehouse.tables.bronze_ad_events import bronze_ad_events
from lakehouse.tables.dim_campaigns import campaigns_from_csv, invalid_campaign_rows


def test_bronze_keeps_every_line_unparsed(spark):
    at = datetime(2026, 11, 20, 23, 59, 59)
    lines = spark.createDataFrame(
        [
            ('{"event_id": "e-1"}', "file:/a.jsonl", at),
            ("not json", "file:/a.jsonl", at),
            ("", "file:/b.jsonl", at),
        ],
        "value string, source_file string, ingested_at timestamp",
    )
    no_kafka_valid_utf8 = (None, None, None, None, None)
    expected = spark.createDataFrame(
        [
            ('{"event_id": "e-1"}', "file:/a.jsonl", at, date(2026, 11, 20), *no_kafka_valid_utf8),
            ("not json", "file:/a.jsonl", at, date(2026, 11, 20), *no_kafka_valid_utf8),
            ("", "file:/b.jsonl", at, date(2026, 11, 20), *no_kafka_valid_utf8),
        ],
        catalog.get("bronze.ad_events").spark_schema(),
    )
    assertDataFrameEqual(bronze_ad_events(lines), expected)
    assertSchemaEqual(
        bronze_ad_events(lines).schema, catalog.get("bronze.ad_events").spark_schema()
    )


def test_bronze_keeps_kafka_records_with_their_address(spark):
    at, sent = datetime(2026, 11, 21, 0, 0, 1), datetime(2026, 11, 20, 23, 59, 58)
    records = spark.createDataFrame(
        [('{"event_id": "e-1"}', "ysb", 0, 41, sent, at), ("not json", "ysb", 2, 7, sent, at)],
        "value string, kafka_topic string, kafka_partition int, kafka_offset long, kafka_timestamp timestamp, "
        "ingested_at timestamp",
    )
    expected = spark.createDataFrame(
        [
            (
                '{"event_id": "e-1"}',
                "kafka://ysb/0/41",
                at,
                date(2026, 11, 21),
                "ysb",
                0,
                41,
                sent,
                None,
            ),
            ("not json", "kafka://ysb/2/7", at, date(2026, 11, 21), "ysb", 2, 7, sent, None),
        ],
        catalog.get("bronze.ad_events").spark_schema(),
    )
    assertDataFrameEqual(bronze_ad_events(records), expected)
    assertSchemaEqual(
        bronze_ad_events(records).schema, catalog.get("bronze.ad_events").spark_schema()
    )


def test_campaigns_are_trimmed_and_ambiguous_rows_found(spark):
    raw = spark.createDataFrame(
        [(" ad-1 ", "c-1"), ("ad-1", "c-1"), ("ad-2", "c-1"), ("ad-2", "c-2"), ("ad-3", "")],
        "ad_id string, campaign_id string",
    )
    campaigns = campaigns_from_csv(raw)

    # The same row twice (once with spaces) is one row, not an ambiguity.
    assertDataFrameEqual(
        campaigns,
        spark.createDataFrame(
            [("ad-1", "c-1"), ("ad-2", "c-1"), ("ad-2", "c-2"), ("ad-3", "")],
            "ad_id string, campaign_id string",
        ),
    )
    assert sorted(row.ad_id for row in invalid_campaign_rows(campaigns).collect()) == [
        "ad-2",
        "ad-3",
    ]


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"", "is empty"),
        (
            b"campaign_id,ad_id\nc-1,ad-1\n",
            "the header is 'campaign_id,ad_id', not 'ad_id,campaign_id'",
        ),
        (b"ad,campaign\nad-1,c-1\n", "the header is 'ad,campaign'"),
        (b"ad_id,campaign_id\n", "has a header and no rows"),
        (b"ad_id,campaign_id\nad-1,c-1\nad-2\n", "line 3: 1 field(s) ['ad-2'], expected 2"),
        (b"ad_id,campaign_id\nad-1,c-1,c-2\n", "line 2: 3 field(s)"),
        (b"ad_id,campaign_id\nad-1,c-\xff\n", "is not UTF-8 text"),
        (
            b"ad_id,campaign_id\nad-1,c-1\nad-2,c-1\nad-1, c-2\n",
            "lines 2 and 4: ad_id 'ad-1' has two different rows (ad-1,c-1 and ad-1,c-2)",
        ),
        (b"ad_id,campaign_id\nad-1,c-1\nad-2, \n", "line 3: campaign_id is blank"),
    ],
)
def test_a_campaigns_file_of_the_wrong_shape_is_refused_with_what_to_fix(
    tmp_path, content, problem
):
    source = tmp_path / "campaigns.csv"
    source.write_bytes(content)
    spec = catalog.get("dims.campaigns")
    with pytest.raises(ConfigError, match=re.escape(problem)) as refused:
        check_csv_shape(source, spec.column_names, spec.key, ("ad_id", "campaign_id"))
    assert str(source) in str(refused.value)


def test_the_same_campaigns_row_twice_is_one_row_not_an_ambiguity(tmp_path):
    source = tmp_path / "campaigns.csv"
    source.write_bytes(b"ad_id,campaign_id\nad-1,c-1\nad-2,c-2\nad-1 , c-1\n")
    assert check_csv_shape(source, ["ad_id", "campaign_id"], "ad_id", ("ad_id",)) == 3


def test_a_byte_order_mark_blank_lines_and_crlf_are_a_valid_campaigns_file(tmp_path):
    source = tmp_path / "campaigns.csv"
    source.write_bytes(b'\xef\xbb\xbfad_id, campaign_id\r\nad-1,c-1\r\n\r\n"ad-2",c-2')
    assert check_csv_shape(source, ["ad_id", "campaign_id"]) == 2
