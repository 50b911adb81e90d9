"""The pipeline with its lakehouse on S3: hourly runs, a backfill and the oracle, nothing on local disk."""

from __future__ import annotations

from datetime import timedelta

from helpers import (
    START,
    assert_tables_match_oracle,
    local_files_named_like,
    run_job,
    run_pipeline,
    s3_requests,
)

from lakehouse import catalog, files
from lakehouse_tools.generator import write_campaigns, write_hours

EVENTS_PER_SECOND = 0.5
SEED = 11


def test_hourly_runs_and_a_backfill_on_s3_equal_the_oracle(s3_lakehouse, s3_reader, s3_engine):
    lakehouse = s3_lakehouse
    write_campaigns(lakehouse, SEED)
    write_hours(lakehouse, START, 2, EVENTS_PER_SECOND, SEED)
    before = s3_requests(s3_engine)

    run_pipeline(lakehouse)
    expected = assert_tables_match_oracle(s3_reader, lakehouse)
    assert expected.lines > 0

    # The next hour lands; the next run reads only it, and every table still equals the oracle.
    write_hours(lakehouse, START + timedelta(hours=2), 1, EVENTS_PER_SECOND, SEED)
    run_pipeline(lakehouse)
    assert_tables_match_oracle(s3_reader, lakehouse)

    # A backfill of the first hour replaces it with the same rows (idempotent).
    hour = START.strftime("%Y-%m-%dT%H:%MZ")
    end = (START + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%MZ")
    for task in (t.task for t in catalog.tasks() if t.batch):
        run_job(task, lakehouse, "--mode", "batch", "--start", hour, "--end", end)
    assert_tables_match_oracle(s3_reader, lakehouse)

    # Every table and checkpoint is in the bucket; nothing was written to a local path.
    assert local_files_named_like(lakehouse.root) == []
    tables = {
        p.name
        for layer in files.lake_path(f"{lakehouse.root}/tables").iterdir()
        for p in layer.iterdir()
    }
    assert {"ad_events", "campaign_hourly", "user_sessions"} <= tables
    after = s3_requests(s3_engine)
    assert after.get("put-if-absent", 0) > before.get("put-if-absent", 0)  # commits and leases
