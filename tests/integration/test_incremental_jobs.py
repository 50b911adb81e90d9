"""Every job, run incrementally over a landing zone: all data once, nothing twice, only what is new,
late events in their own hour."""

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

    # Two new producer hours: their late events (90 minutes behind, far behind any watermark)
    # fall in hour 01:00, which the first run wrote.
    bronze_before = table_version(spark, lakehouse, "bronze.ad_events")
    late_hour = (START + timedelta(hours=1)).replace(tzinfo=None)
    before_late = gold_in_hour(spark, lakehouse, late_hour)
    write_hours(lakehouse, START + timedelta(hours=2), 2, events_per_second=0.1, seed=11)
    run_pipeline(lakehouse)

    bronze_path = lakehouse.table("bronze.ad_events").path
    before = spark.read.format("delta").option("versionAsOf", bronze_before).load(bronze_path)
    added = table(spark, lakehouse, "bronze.ad_events").exceptAll(before)
    new_files = [
        path
        for hour in (2, 3)
        for path in Path(
            lakehouse.landing_events, f"{START + timedelta(hours=hour):%Y-%m-%d/%H}"
        ).glob("*.jsonl")
    ]
    added_per_file = Counter(
        Path(row.source_file.removeprefix("file:")).parts[-2:] for row in added.collect()
    )  # by hour folder and file name
    assert added_per_file == {p.parts[-2:]: len(p.read_text().splitlines()) for p in new_files}
    expected = assert_tables_match_oracle(spark, lakehouse)
    # The new run's batches start where the first run's ended.
    runs = {
        t.name: [r for r in batches_with_data(spark, lakehouse) if r.table_name == t.name]
        for t in QUERIES
    }
    for name, (first_run, new_run) in runs.items():  # exactly two batches with data each
        assert new_run.source_start_offset == first_run.source_end_offset, name
    assert runs["bronze.ad_events"][1].input_rows == sum(added_per_file.values())

    # Late events are counted in their own hour: every hourly gold table's rows of hour 01:00
    # are the oracle's, and differ from what the first run wrote there.
    after_late = gold_in_hour(spark, lakehouse, late_hour)
    for name, rows in after_late.items():
        hour_start = catalog.get(name).column_names.index("hour_start")
        wanted = Counter(
            {
                row: n
                for row, n in expected_rows(expected, name).items()
                if row[hour_start] == late_hour
            }
        )
        assert rows == wanted != before_late[name], (
            f"{name}: the late events' hour was not recomputed"
        )


def batches_with_data(spark, lakehouse) -> list:
    rows = table(spark, lakehouse, "ops.query_progress").filter("input_rows > 0")
    return sorted(rows.drop("duration_ms").collect(), key=lambda r: (r.table_name, r.batch_id))


# The gold tables of event hours (the sessions' late events: tests/integration/test_user_sessions.py).
HOURLY = tuple(entry.name for entry in gold_tables() if "hour_start" in entry.column_names)


def gold_in_hour(spark, lakehouse, hour) -> dict[str, Counter]:
    """Every hourly gold table's rows of one event hour."""
    found = {}
    for entry in map(catalog.get, HOURLY):
        rows = table(spark, lakehouse, entry.name).filter(F.col("hour_start") == F.lit(hour))
        found[entry.name] = Counter(
            tuple(row) for row in rows.select(*entry.column_names).collect()
        )
    return found
