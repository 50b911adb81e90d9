"""A backlog of days caught up in one run records no more late events than hour-by-hour runs of the same files.

Silver's MERGE writes every event hour of a batch as one commit, each writer task's hours in turn:
the commit's files are in no event-time order. Delta's source cut the sessions query's run into
batches of 1,000 files, so the first batch's events reached the backlog's end, the watermark
jumped there, and the later batches' events were recorded as late (41 % of a 30-day catch-up,
issue 56). The sessions query now admits everything new in one micro-batch: an event is late only
when it lies behind the watermark of an earlier run, which an hourly run of its folder would find
too.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from helpers import (
    assert_gold_matches_oracle,
    hourly_late_events,
    run_pipeline,
    table,
)

from lakehouse.config import Lakehouse
from lakehouse_tools.generator import write_campaigns, write_hours

SEED = 56
# Five weeks of one small file an hour, about 36 events each: silver's catch-up MERGE writes more
# than Delta's default 1,000 files a batch (its two writer tasks each write most hours; four on a
# larger backlog). Fewer days stay under 1,000 files, where the old code ran one batch too.
DAYS = 36
EVENTS_PER_SECOND = 0.01
# Well in the past: silver quarantines events more than a day ahead of their ingestion.
START = datetime(2026, 10, 1, tzinfo=UTC)
SESSIONS = "gold.user_sessions"
SESSION_TABLES = (SESSIONS, "gold.open_sessions")
DELTA_SOURCE_FILES_PER_BATCH = 1000  # Delta's default maxFilesPerTrigger


# About three minutes (a month of hours through bronze, silver and the sessions): the long tier. The
# regular tier compares one run with hourly runs in tests/integration/test_user_sessions.py.
@pytest.mark.long
def test_a_backlog_of_days_caught_up_in_one_run_records_no_more_late_events_than_hourly_runs(
    spark, tmp_path
):
    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    write_campaigns(lakehouse, seed=SEED)
    write_hours(
        lakehouse,
        START,
        DAYS * 24,
        events_per_second=EVENTS_PER_SECOND,
        seed=SEED,
        files_per_hour=1,
    )

    run_pipeline(lakehouse, up_to=SESSIONS)  # one catch-up run of every task the sessions need

    silver_files = (
        spark.sql(f"DESCRIBE DETAIL delta.`{lakehouse.table('silver.ad_events').path}`")
        .first()
        .numFiles
    )
    assert silver_files > DELTA_SOURCE_FILES_PER_BATCH, (
        f"the backlog must span more silver files ({silver_files}) than Delta admits a batch by default"
    )
    caught_up = table(spark, lakehouse, "ops.late_session_events").count()
    hourly = hourly_late_events(lakehouse)
    print(f"late events: catch-up {caught_up}, hour-by-hour runs {hourly}")
    assert hourly > 0, "the sample must have events that hourly runs record as late"
    assert caught_up <= hourly, f"catch-up recorded {caught_up} late events, hourly runs {hourly}"
    assert caught_up == 0, "a first run has no earlier watermark: nothing is late"
    assert_gold_matches_oracle(spark, lakehouse, names=SESSION_TABLES)
