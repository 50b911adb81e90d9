"""The pipeline with its lakehouse on S3: hourly runs, a rollback, a backfill beside an hourly run, and
the oracle; nothing on local disk.

`make test` runs two hourly runs; the rollback and the backfill beside a run (about five more minutes)
are in the long tier, as the same cases on local disk are in `make test`.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from helpers import (
    START,
    assert_tables_match_oracle,
    local_files_named_like,
    run_pipeline,
    s3_requests,
)

from lakehouse import catalog, files
from lakehouse_tools import cli
from lakehouse_tools.fault_harness.launch import client_command, client_environment
from lakehouse_tools.generator import write_campaigns, write_hours

EVENTS_PER_SECOND = 0.5
SEED = 11
# Rolled back and redone (bronze, the raw log, is not rolled back).
ROLLED_BACK = ("silver.ad_events", "gold.campaign_hourly", "gold.user_sessions")
# Columns that say when a row was processed, not what it holds: a redone run writes new values.
PROCESSING_TIME = {"ingested_at", "recorded_at", "reconciled_at", "reconciled_by", "resolved_at"}


def snapshot(spark, lakehouse) -> dict[str, Counter]:
    tables = {}
    for name in ROLLED_BACK:
        columns = [c for c in catalog.get(name).column_names if c not in PROCESSING_TIME]
        rows = spark.read.format("delta").load(lakehouse.table(name).path).select(*columns)
        tables[name] = Counter(tuple(row) for row in rows.collect())
    return tables


def run_clients(tasks: list[str], lakehouse, failures: list[str], args: tuple[str, ...]) -> None:
    """Each task in turn as a client process of the engine; a failure's output goes to ``failures``."""
    for task in tasks:
        done = subprocess.run(
            client_command(task, lakehouse, *args),
            env=client_environment(lakehouse),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            failures.append(f"{task}: {(done.stdout + done.stderr)[-3000:]}")
            return


def hourly_runs(lakehouse, s3_reader) -> tuple[datetime, dict, dict]:
    """Two hours, then a run; the next hour, then a run: each equals the oracle. Returns the moment
    between the runs and the rolled-back tables before and after the second."""
    write_campaigns(lakehouse, SEED)
    write_hours(lakehouse, START, 2, EVENTS_PER_SECOND, SEED)
    run_pipeline(lakehouse)
    expected = assert_tables_match_oracle(s3_reader, lakehouse)
    assert expected.lines > 0
    before_the_run = snapshot(s3_reader, lakehouse)

    # The next hour lands; the next run reads only it, and every table still equals the oracle.
    time.sleep(1.5)  # commit times are in milliseconds, checkpoint objects' in seconds
    moment = datetime.now(UTC)
    time.sleep(1.5)
    write_hours(lakehouse, START + timedelta(hours=2), 1, EVENTS_PER_SECOND, SEED)
    run_pipeline(lakehouse)
    assert_tables_match_oracle(s3_reader, lakehouse)
    after_the_run = snapshot(s3_reader, lakehouse)
    assert after_the_run != before_the_run
    return moment, before_the_run, after_the_run


def assert_all_on_s3(lakehouse, s3_engine, before: dict) -> None:
    """Every table and checkpoint is in the bucket; nothing was written to a local path."""
    assert local_files_named_like(lakehouse.root) == []
    tables = {
        p.name
        for layer in files.lake_path(f"{lakehouse.root}/tables").iterdir()
        for p in layer.iterdir()
    }
    assert {"ad_events", "campaign_hourly", "user_sessions"} <= tables
    after = s3_requests(s3_engine)
    assert after.get("put-if-absent", 0) > before.get("put-if-absent", 0)  # commits and leases


def test_hourly_runs_on_s3_equal_the_oracle(s3_lakehouse, s3_reader, s3_engine):
    before = s3_requests(s3_engine)
    hourly_runs(s3_lakehouse, s3_reader)
    assert_all_on_s3(s3_lakehouse, s3_engine, before)


@pytest.mark.long
def test_hourly_runs_a_rollback_and_a_backfill_beside_a_run_on_s3_equal_the_oracle(
    s3_lakehouse, s3_reader, s3_engine
):
    lakehouse = s3_lakehouse
    backfill_failures: list[str] = []
    before = s3_requests(s3_engine)
    moment, before_the_run, after_the_run = hourly_runs(lakehouse, s3_reader)

    # Rolled back to before that run (restores by delta-rs, checkpoints rewound on S3), then redone.
    assert (
        cli.main(["rollback", "--lakehouse-root", lakehouse.root, "--to", moment.isoformat()]) == 0
    )
    assert snapshot(s3_reader, lakehouse) == before_the_run
    run_pipeline(lakehouse)
    assert snapshot(s3_reader, lakehouse) == after_the_run
    assert_tables_match_oracle(s3_reader, lakehouse)

    # A backfill of the first hour (engine clients, as Airflow's backfill tasks) beside the hourly
    # run of the next hour: both commit to the same tables, and every table equals the oracle.
    write_hours(lakehouse, START + timedelta(hours=3), 1, EVENTS_PER_SECOND, SEED)
    hour, end = (
        START.strftime("%Y-%m-%dT%H:%MZ"),
        (START + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%MZ"),
    )
    backfill = threading.Thread(
        target=run_clients,
        args=([t.task for t in catalog.tasks() if t.batch], lakehouse, backfill_failures),
        kwargs={"args": ("--mode", "batch", "--start", hour, "--end", end)},
    )
    backfill.start()
    run_pipeline(lakehouse)
    backfill.join()
    assert backfill_failures == []
    assert_tables_match_oracle(s3_reader, lakehouse)

    assert_all_on_s3(lakehouse, s3_engine, before)
