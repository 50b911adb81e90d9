"""A table whose declared partitioning changed: rewritten in it in place when no table reads it
(gold, by its first run of the new declaration), refused with the fix when one does. Real Delta
tables on a local session."""

from __future__ import annotations

import json

import pytest
from pyspark.testing import assertDataFrameEqual

from lakehouse import delta_log
from lakehouse.errors import ConfigError
from lakehouse.periods import Periods
from lakehouse.schema_evolution import repartition
from lakehouse.sinks import replace_periods

ROWS = """
    SELECT campaign_id, hour_start, 10L AS views, 2L AS clicks, 0L AS purchases,
           3L AS distinct_users, 0.2D AS ctr, to_date(hour_start) AS event_date
    FROM VALUES ('c1', TIMESTAMP'2026-11-19 23:00:00'), ('c1', TIMESTAMP'2026-11-20 00:00:00'),
                ('c2', TIMESTAMP'2026-11-20 00:00:00') AS t(campaign_id, hour_start)
"""
APP_ID = "gold_aggregates stream->gold.campaign_hourly@gen0"


def test_a_gold_table_in_its_old_partitioning_is_rewritten_in_the_declared_one(spark, lakehouse):
    table = lakehouse.table("gold.campaign_hourly")
    assert table.spec.partition_by == ("event_date", "hour_start")
    rows = spark.sql(ROWS)
    # As the table was before the hour partitions: by day, written by batch 4 of the stream.
    rows.write.format("delta").partitionBy("event_date").option("txnAppId", APP_ID).option(
        "txnVersion", 4
    ).save(table.path)

    assert repartition(lambda: spark, table.path, table.spec) == ("event_date",)

    assert delta_log.partition_columns(table.path) == ["event_date", "hour_start"]
    assertDataFrameEqual(spark.read.format("delta").load(table.path), rows)
    # The stream's replay protection survives the rewrite.
    assert delta_log.committed_txns(table.path) == {APP_ID: 4}
    assert repartition(lambda: pytest.fail("no rewrite twice"), table.path, table.spec) is None

    # An hour is now replaced as a partition, from the log alone.
    hour = Periods.of([rows.first().hour_start])
    replace_periods(rows.where(f"hour_start = '{hour.first:%Y-%m-%d %H:%M:%S}'"), table, hour)
    assertDataFrameEqual(spark.read.format("delta").load(table.path), rows)
    replace = delta_log.latest_commit_info(table.path)["operationParameters"]
    assert json.loads(replace["partitionBy"]) == ["event_date", "hour_start"]


def test_a_table_another_one_reads_is_refused_with_the_full_refresh(lakehouse, tmp_path):
    silver = lakehouse.table("silver.ad_events")
    log = tmp_path / "silver_log"
    log.mkdir()
    metadata = {"id": "t", "schemaString": "{}", "partitionColumns": ["event_date"]}
    (log / f"{0:020d}.json").write_text(json.dumps({"metaData": metadata}) + "\n")
    path = str(tmp_path)
    (tmp_path / "silver_log").rename(tmp_path / "_delta_log")

    with pytest.raises(ConfigError) as refused:
        repartition(lambda: pytest.fail("nothing rewritten"), path, silver.spec)
    message = str(refused.value)
    assert "gold.user_sessions" in message and "full_refresh=silver" in message
    assert "Nothing was written" in message
