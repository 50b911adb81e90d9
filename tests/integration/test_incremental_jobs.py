"""Every job, run incrementally over a landing zone: all data once, nothing twice, only what is new."""

from __future__ import annotations

import logging
import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

from helpers import (
    START,
    assert_tables_match_oracle,
    expected_rows,
    gold_tables,
    run_pipeline,
    table,
    table_version,
)
from pyspark.sql import functions as F

from lakehouse import catalog, delta_log
from lakehouse_tools.generator import write_campaigns, write_hours

STREAMED_TABLES = tuple(t.name for t in catalog.tables() if t.streamed and t.layer != "ops")
QUERIES = [t for t in catalog.tasks() if t.streamed]


def test_jobs_process_everything_once_then_nothing_then_only_new_files(spark, lakehouse, caplog):
    write_campaigns(lakehouse, seed=11)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=11)

    with caplog.at_level(logging.INFO, logger="lakehouse"):
        run_pipeline(lakehouse)
    first = assert_tables_match_oracle(spark, lakehouse)
    # Every query sized its input from files and, this small, runs interpreted (lakehouse.spark.fit_code_generation).
    chosen = {
        m.split(": ")[0]
        for m in caplog.messages
        if re.fullmatch(r"\S+: input at most \d+\.\d MiB: queries interpreted", m)
    }
    assert chosen == {t.name for t in QUERIES}
    assert first.duplicates > 0 and first.quarantined, (
        "the sample must exercise duplicates and bad lines"
    )

    # Every query's micro-batch is on record: what it read and the version of its table it wrote.
    progress = batches_with_data(spark, lakehouse)
    read_from = {"bronze.ad_events": first.lines, "silver.ad_events": first.lines}
    assert {(r.table_name, r.batch_id, r.input_rows) for r in progress} == {
        (t.name, 0, read_from.get(t.name, len(first.events))) for t in QUERIES
    }
    for row in progress:
        if (
            catalog.get(row.table_name).write is not catalog.Write.SESSIONS
        ):  # sessions reconcile after the query
            assert row.table_version == delta_log.latest_version(
                lakehouse.table(row.table_name).path
            ), row
    # Blind appends: a transaction id would make Delta rebuild the table's state at every record.
    assert delta_log.committed_txns(lakehouse.table("ops.query_progress").path) == {}

    versions = {name: table_version(spark, lakehouse, name) for name in STREAMED_TABLES}
    run_pipeline(lakehouse)
    assert {name: table_version(spark, lakehouse, name) for name in STREAMED_TABLES} == versions
    assert batches_with_data(spark, lakehouse) == progress, (
        "a run with nothing new records no batch"
    )

    bronze_before = table_version(spark, lakehouse, "bronze.ad_events")
    new_hour = START + timedelta(hours=2)
    write_hours(lakehouse, new_hour, 1, events_per_second=0.1, seed=11)
    run_pipeline(lakehouse)

    bronze_path = lakehouse.table("bronze.ad_events").path
    before = spark.read.format("delta").option("versionAsOf", bronze_before).load(bronze_path)
    added = table(spark, lakehouse, "bronze.ad_events").exceptAll(before)
    new_files = sorted(Path(lakehouse.landing_events, f"{new_hour:%Y-%m-%d/%H}").glob("*.jsonl"))
    added_per_file = Counter(
        Path(row.source_file.removeprefix("file:")).name for row in added.collect()
    )
    assert added_per_file == {p.name: len(p.read_text().splitlines()) for p in new_files}
    assert_tables_match_oracle(spark, lakehouse)
    # The new run's batches start where the first run's ended.
    runs = {
        t.name: [r for r in batches_with_data(spark, lakehouse) if r.table_name == t.name]
        for t in QUERIES
    }
    for name, (first_run, new_run) in runs.items():  # exactly two batches with data each
        assert new_run.source_start_offset == first_run.source_end_offset, name
    assert runs["bronze.ad_events"][1].input_rows == sum(added_per_file.values())


def batches_with_data(spark, lakehouse) -> list:
    rows = table(spark, lakehouse, "ops.query_progress").filter("input_rows > 0")
    return sorted(rows.drop("duration_ms").collect(), key=lambda r: (r.table_name, r.batch_id))


# The gold tables of event hours (the sessions' late events: tests/integration/test_user_sessions.py).
HOURLY = tuple(entry.name for entry in gold_tables() if "hour_start" in entry.column_names)


def test_late_events_are_counted_in_their_own_hour(spark, lakehouse):
    """Events written 90 minutes late (far behind any watermark) update the hour they belong to."""
    write_campaigns(lakehouse, seed=12)
    write_hours(lakehouse, START, 1, events_per_second=0.1, seed=12)
    run_pipeline(lakehouse, up_to=HOURLY)
    first_hour = START.replace(tzinfo=None)
    before = gold_in_hour(spark, lakehouse, first_hour)

    # The next producer hours carry late events whose event time falls in the first hour.
    write_hours(lakehouse, START + timedelta(hours=1), 2, events_per_second=0.1, seed=12)
    run_pipeline(lakehouse, up_to=HOURLY)

    expected = assert_tables_match_oracle(spark, lakehouse, gold=HOURLY)
    after = gold_in_hour(spark, lakehouse, first_hour)
    for name, rows in after.items():
        hour_start = catalog.get(name).column_names.index("hour_start")
        wanted = Counter(
            {
                row: n
                for row, n in expected_rows(expected, name).items()
                if row[hour_start] == first_hour
            }
        )
        assert rows == wanted != before[name], f"{name}: the late events' hour was not recomputed"


def gold_in_hour(spark, lakehouse, hour) -> dict[str, Counter]:
    """Every hourly gold table's rows of one event hour."""
    found = {}
    for entry in map(catalog.get, HOURLY):
        rows = table(spark, lakehouse, entry.name).filter(F.col("hour_start") == F.lit(hour))
        found[entry.name] = Counter(
            tuple(row) for row in rows.select(*entry.column_names).collect()
        )
    return found
