"""A run's ops records are appended by delta-rs from the task's process (lakehouse.sinks.append_records)."""

from __future__ import annotations

import multiprocessing
import time
from datetime import UTC, datetime, timedelta

import pytest
from pyspark.testing import assertDataFrameEqual

from lakehouse import catalog, object_storage
from lakehouse.config import Lakehouse
from lakehouse.progress import PROGRESS_TABLE
from lakehouse.sinks import append_records, ensure_table

WHEN = datetime(2026, 11, 20, 13, 5, 7, 123456, tzinfo=UTC)


def progress_row(batch_id: int, **changes) -> dict:
    row = {column: None for column in catalog.get(PROGRESS_TABLE).column_names}
    row.update(
        table_name="silver.ad_events",
        query_id="q",
        batch_id=batch_id,
        batch_started_at=WHEN,
        airflow_try=1,
        input_rows=720,
        duration_ms={"addBatch": 812, "triggerExecution": 1304},
        input_rows_per_second=0.5,
        watermark=None,
        table_version=batch_id + 1,
    )
    row.update(changes)
    return row


@pytest.fixture
def local_zone_not_utc(monkeypatch):
    """This process's local time zone set to one off UTC (a naive datetime then means something else)."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_records_read_back_by_spark_exactly_as_appended(spark, lakehouse, local_zone_not_utc):
    table = lakehouse.table(PROGRESS_TABLE)
    ensure_table(spark, table)
    # A naive datetime is local time to PySpark (what its collect returns): here UTC+5:30, stored as UTC.
    naive = (WHEN + timedelta(hours=1)).astimezone().replace(tzinfo=None)
    rows = [
        progress_row(0),
        progress_row(1, batch_started_at=naive, watermark=WHEN, state_rows=70, duration_ms={}),
    ]
    append_records(rows, table)
    append_records([progress_row(2, query_run_id="r2")], table)

    expected = [
        progress_row(0),
        progress_row(
            1,
            batch_started_at=WHEN + timedelta(hours=1),
            watermark=WHEN,
            state_rows=70,
            duration_ms={},
        ),
        progress_row(2, query_run_id="r2"),
    ]
    as_spark = [tuple(r[c] for c in table.spec.column_names) for r in expected]
    assertDataFrameEqual(
        spark.read.format("delta").load(table.path),
        spark.createDataFrame(as_spark, table.spec.spark_schema()),
    )
    # Each writing process's transaction id (on S3) is kept a week, not for good.
    properties = object_storage.delta_table(table.path).metadata().configuration
    assert properties["delta.setTransactionRetentionDuration"] == "interval 7 days"


def _append_many(root: str, writer: int, appends: int) -> None:
    table = Lakehouse(root=root).table(PROGRESS_TABLE)
    for n in range(appends):
        append_records([progress_row(n, query_id=f"writer {writer}")], table)


def test_tasks_appending_at_once_lose_no_record(spark, lakehouse):
    table = lakehouse.table(PROGRESS_TABLE)
    ensure_table(spark, table)
    writers, appends = 4, 10
    context = multiprocessing.get_context("spawn")  # a clean process, as each Airflow task is
    processes = [
        context.Process(target=_append_many, args=(lakehouse.root, w, appends))
        for w in range(writers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * writers
    stored = spark.read.format("delta").load(table.path).groupBy("query_id").count()
    assertDataFrameEqual(
        stored,
        spark.createDataFrame(
            [(f"writer {w}", appends) for w in range(writers)], "query_id string, count long"
        ),
    )
