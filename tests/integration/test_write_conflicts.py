"""A real Delta write conflict (a commit lands while a backfill's replaceWhere runs) is retried, not fatal."""

from __future__ import annotations

import logging
import threading
import time
from datetime import date, datetime
from pathlib import Path

from helpers import START
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse.catalog import TableSpec, Write
from lakehouse.config import Table
from lakehouse.periods import Periods
from lakehouse.sinks import replace_periods, with_conflict_retries

DAY = date(2026, 11, 20)
# A gold table of the catalog's replace-periods kind (of hours) (not registered: the test owns it).
GOLD_TEST = TableSpec(
    name="gold.test",
    schema="event_date DATE, hour_start TIMESTAMP, campaign_id STRING, events BIGINT",
    write=Write.REPLACE_PERIODS,
    task="test",
    partition_by=("event_date",),
)


def hour_rows(hour: int, count: int) -> list[Row]:
    return [
        Row(event_date=DAY, hour_start=datetime(2026, 11, 20, hour), campaign_id="c1", events=count)
    ]


def test_a_commit_landing_during_a_replace_where_is_retried_and_nothing_is_lost(
    spark, tmp_path, caplog
):
    gold = str(tmp_path / "gold")
    spark.createDataFrame(hour_rows(0, 1) + hour_rows(1, 10)).write.format("delta").partitionBy(
        "event_date"
    ).save(gold)
    reading, committed = tmp_path / "reading", tmp_path / "committed"

    # The backfill's rows pass through a UDF that, the first time, stops mid-write until another
    # writer (the hourly run, standing in) has committed to the same date partition: the interleaving
    # that made a gold task fail beside a real scheduler's backfill.
    @F.udf("long")
    def hold_until_the_other_commit(events):
        if not committed.exists():
            reading.touch()
            deadline = time.monotonic() + 300  # fail, not hang, if the other writer never commits
            while not committed.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the concurrent writer never committed")
                time.sleep(0.05)
        return events

    def concurrent_append():
        try:
            while not reading.exists():
                time.sleep(0.05)
            spark.createDataFrame(hour_rows(2, 5)).write.format("delta").mode("append").save(gold)
        finally:
            committed.touch()

    other_writer = threading.Thread(target=concurrent_append, daemon=True)
    other_writer.start()
    backfill = spark.createDataFrame(hour_rows(0, 7)).withColumn(
        "events", hold_until_the_other_commit("events")
    )
    hour_zero = Periods.between(START, START.replace(hour=1))
    with caplog.at_level(logging.WARNING, logger="lakehouse"):
        with_conflict_retries(
            lambda: replace_periods(backfill, _paths(gold), hour_zero), "gold hour 00"
        )
    other_writer.join(timeout=60)

    conflicts = [r.getMessage() for r in caplog.records if "Delta write conflict" in r.getMessage()]
    assert len(conflicts) == 1 and "(attempt 1/6, ConcurrentAppendException)" in conflicts[0], (
        conflicts
    )
    # Hour 00 replaced, hour 01 untouched, the other writer's hour 02 kept.
    expected = spark.createDataFrame(hour_rows(0, 7) + hour_rows(1, 10) + hour_rows(2, 5))
    assertDataFrameEqual(spark.read.format("delta").load(gold), expected)


def _paths(path: str) -> Table:
    return Table(spec=GOLD_TEST, path=path, checkpoint_root=str(Path(path).parent / "checkpoints"))
