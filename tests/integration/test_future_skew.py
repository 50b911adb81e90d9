"""Future skew: an event an hour ahead of its ingestion is quarantined, and the sessions never see it.

The producer hours are generated just behind the wall clock (the bound is relative to the line's
ingestion time, which bronze takes from the clock), and one line an hour ahead of it is landed
with them. Accepted, that one event would move the sessions' watermark an hour forward and close
every user's session early; quarantined, the sessions equal the oracle's without it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from helpers import expected_rows, rows_of, run_pipeline, table
from pyspark.sql import functions as F

from lakehouse.config import Lakehouse
from lakehouse.files import lake_path
from lakehouse_tools.generator import write_campaigns, write_hours
from lakehouse_tools.oracle import expected_from_landing

SEED = 5
SESSION_TABLES = ("gold.user_sessions", "gold.open_sessions")


def test_an_event_an_hour_ahead_is_quarantined_and_the_sessions_ignore_it(spark, tmp_path):
    lakehouse = Lakehouse(root=str(tmp_path / "lake"))
    write_campaigns(lakehouse, seed=SEED)
    # Two producer hours ending at least an hour before now: every event is in the past.
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    write_hours(lakehouse, start, 2, events_per_second=0.2, seed=SEED)
    last_hour = lake_path(lakehouse.landing_events) / f"{start + timedelta(hours=1):%Y-%m-%d/%H}"
    a_user = json.loads((last_hour / "part-0003.jsonl").read_text().splitlines()[-1])
    ingested_no_earlier_than = datetime.now(UTC)
    skewed = json.dumps(
        {
            **a_user,
            "event_id": "skewed-by-an-hour",
            "event_time": str(int(ingested_no_earlier_than.timestamp() * 1000) + 3_600_000),
        }
    )
    (last_hour / "part-0004.jsonl").write_text(skewed + "\n")

    run_pipeline(lakehouse, up_to="gold.user_sessions")

    quarantined = table(spark, lakehouse, "silver.quarantine_ad_events").where(
        F.col("reason") == "event_time_in_future"
    )
    [row] = quarantined.collect()
    ahead_s = (
        int(json.loads(skewed)["event_time"])
        - int(row.ingested_at.replace(tzinfo=UTC).timestamp() * 1000)
    ) // 1000
    assert (row.raw_line, row.reason, row.reason_detail, Path(row.source_file).name) == (
        skewed,
        "event_time_in_future",
        f"{json.loads(skewed)['event_time']} ms is {ahead_s} s ahead of its ingestion at"
        f" {row.ingested_at:%Y-%m-%d %H:%M:%S} UTC; at most 300 s is accepted",
        "part-0004.jsonl",
    )
    assert 3300 < ahead_s <= 3600  # bronze read it within minutes of landing
    assert (
        table(spark, lakehouse, "silver.ad_events")
        .where(F.col("event_id") == "skewed-by-an-hour")
        .count()
        == 0
    )

    # The oracle applies the same bound on its own, from the moment before bronze read the lines.
    expected = expected_from_landing(
        lakehouse.landing_events, lakehouse.landing_campaigns, ingested_no_earlier_than
    )
    assert expected.quarantined["event_time_in_future"] == 1
    for name in SESSION_TABLES:
        assert rows_of(spark, lakehouse, name) == expected_rows(expected, name), name
    # The skewed event would have moved the watermark: with it, the oracle closes other sessions.
    with_skewed = expected_from_landing(lakehouse.landing_events, lakehouse.landing_campaigns)
    assert expected_rows(with_skewed, "gold.open_sessions") != expected_rows(
        expected, "gold.open_sessions"
    )
