"""One event_id, two payloads (a retrying producer re-stamped it): one winner, the copy bronze
ingested first, in the stream and in every backfill, whichever hours the backfill covers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from helpers import assert_tables_match_oracle, run_job, run_pipeline, table

GOLD = ("gold.campaign_hourly",)


def event(event_id: str, at: str) -> str:
    """A valid event of ad-1 at ``at`` (HH:MM) on 2026-11-20."""
    millis = int(datetime.fromisoformat(f"2026-11-20T{at}").replace(tzinfo=UTC).timestamp() * 1000)
    return json.dumps(
        {
            "event_id": event_id,
            "user_id": "u-1",
            "page_id": "p-1",
            "ad_id": "ad-1",
            "ad_type": "banner",
            "event_type": "view",
            "event_time": str(millis),
            "ip_address": "10.0.0.1",
        }
    )


def land(lakehouse, hour: str, name: str, *events: str) -> None:
    folder = Path(lakehouse.landing_events, "2026-11-20", hour)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(line + "\n" for line in events))


def silver_rows(spark, lakehouse) -> list[tuple[str, str]]:
    rows = table(spark, lakehouse, "silver.ad_events").collect()
    return sorted((r.event_id, f"{r.event_time:%H:%M}") for r in rows)


def backfill(lakehouse, start: str, end: str) -> None:
    hours = ("--mode", "batch", "--start", f"2026-11-20T{start}Z", "--end", f"2026-11-20T{end}Z")
    for job in ("silver_ad_events", "gold_aggregates"):
        run_job(job, lakehouse, *hours)


def test_a_re_stamped_copy_in_another_hour_file_or_run_never_wins_and_no_backfill_changes_that(
    spark, lakehouse
):
    campaigns = Path(lakehouse.landing_campaigns)
    campaigns.parent.mkdir(parents=True, exist_ok=True)
    campaigns.write_text("ad_id,campaign_id\nad-1,c-1\n")
    # Run 1: e-3's two copies in two files and two hours of one run; e-1's first copy.
    land(lakehouse, "10", "a.jsonl", event("e-1", "10:30"), event("e-3", "10:55"))
    land(lakehouse, "11", "b.jsonl", event("e-3", "11:05"), event("e-2", "11:10"))
    run_pipeline(lakehouse, up_to=GOLD)
    # Run 2: e-1 again, re-stamped into hour 11:00, beside a new event.
    land(lakehouse, "11", "c.jsonl", event("e-1", "11:10"), event("e-4", "11:20"))
    run_pipeline(lakehouse, up_to=GOLD)

    # The oracle keeps each id's first line in file order (a.jsonl, b.jsonl, c.jsonl): the copy
    # ingested first, as silver must.
    first_copies = [("e-1", "10:30"), ("e-2", "11:10"), ("e-3", "10:55"), ("e-4", "11:20")]
    assert silver_rows(spark, lakehouse) == first_copies
    assert_tables_match_oracle(spark, lakehouse, gold=GOLD)

    for start, end in (("11:00", "12:00"), ("10:00", "11:00"), ("10:00", "12:00")):
        backfill(lakehouse, start, end)
        assert (start, end, silver_rows(spark, lakehouse)) == (start, end, first_copies)
        assert_tables_match_oracle(spark, lakehouse, gold=GOLD)
