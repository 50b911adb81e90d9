"""A day table (gold.campaign_daily) through hourly runs, a late drop and a one-hour backfill.

A touched hour widens to its whole UTC day: the day's row is recomputed from all of the day's
hours every time, so it equals the oracle's day after a late event into an earlier hour and
after a backfill of a single hour, never a partial day.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from helpers import START, assert_gold_matches_oracle, run_job, run_pipeline, table
from pyspark.sql import functions as F

from lakehouse.config import Lakehouse
from lakehouse.files import write_atomic
from lakehouse_tools.generator import write_campaigns, write_hours

DAILY = "gold.campaign_daily"
DAY = f"{START:%Y-%m-%d}"


def late_drop(lakehouse: Lakehouse, into_hour: int, arrives_in_hour: int) -> int:
    """Copies of hour 1's valid lines, renamed and moved into ``into_hour`` (earlier, same day),
    landed in the later producer folder ``arrives_in_hour``: late events. Returns how many."""
    source = Path(lakehouse.landing_events, f"{START:%Y-%m-%d}", "01", "part-0000.jsonl")
    moved = []
    for number, line in enumerate(source.read_text().splitlines()):
        try:
            event = json.loads(line)
            millis = int(event["event_time"])
        except (ValueError, KeyError, TypeError):
            continue  # a malformed line of the generator's: not needed here
        hour_one = START.timestamp() * 1000 + 3_600_000
        if not hour_one <= millis < hour_one + 3_600_000:
            continue  # the folder's own late events (earlier hours): moved, they would leave the day
        event["event_id"] = f"late-{number}"
        event["event_time"] = str(millis - (1 - into_hour) * 3_600_000)
        moved.append(json.dumps(event))
    folder = START + timedelta(hours=arrives_in_hour)
    write_atomic(
        f"{lakehouse.landing_events}/{folder:%Y-%m-%d/%H}/late-drop.jsonl",
        "".join(f"{line}\n" for line in moved),
    )
    return len(moved)


def test_a_day_is_recomputed_whole_after_a_late_drop_and_a_one_hour_backfill(spark, lakehouse):
    write_campaigns(lakehouse, seed=23)
    write_hours(lakehouse, START, 3, events_per_second=0.05, seed=23)
    run_pipeline(lakehouse, up_to=DAILY)
    assert_gold_matches_oracle(spark, lakehouse, names=(DAILY,))

    # Late events into hour 00, landed in hour 03's folder: the next run touches hour 00 only.
    assert late_drop(lakehouse, into_hour=0, arrives_in_hour=3) > 0
    summaries = {}
    for task in ("bronze_ad_events", "silver_ad_events", "gold_aggregates"):
        summaries[task] = run_job(task, lakehouse)
    # One query, each table in its own grain: the day of hour 00, and hour 00 alone.
    gold = summaries["gold_aggregates"]["tables"]
    assert (gold[DAILY]["grain"], gold[DAILY]["periods"]) == ("day", [START.isoformat()])
    assert (gold["gold.campaign_hourly"]["grain"], gold["gold.campaign_hourly"]["periods"]) == (
        "hour",
        [START.isoformat()],
    )
    assert_gold_matches_oracle(spark, lakehouse, names=(DAILY,))

    # Damage the whole day, then backfill one hour of it (14:00 holds no data): the day is
    # recomputed from all of its hours, not from the hour asked.
    spark.sql(
        f"UPDATE delta.`{lakehouse.table(DAILY).path}` SET views = 0, clicks = 0 "
        f"WHERE event_date = DATE'{DAY}'"
    )
    hour = START + timedelta(hours=14)
    done = run_job(
        "gold_aggregates",
        lakehouse,
        *("--mode", "batch"),
        *("--start", f"{hour:%Y-%m-%dT%H:%MZ}"),
        *("--end", f"{hour + timedelta(hours=1):%Y-%m-%dT%H:%MZ}"),
    )
    daily = done["tables"][DAILY]
    assert (daily["grain"], daily["periods"]) == ("day", [START.isoformat()])
    assert_gold_matches_oracle(spark, lakehouse, names=(DAILY,))
    # One commit replaced the day by its date: no partial-day predicate.
    last = spark.sql(f"DESCRIBE HISTORY delta.`{lakehouse.table(DAILY).path}` LIMIT 1").first()
    assert last.operation == "WRITE"
    assert last.operationParameters["predicate"] == f"event_date IN (DATE'{DAY}')"
    # The generator's late events reach the day before: that day, not backfilled, was not touched.
    assert table(spark, lakehouse, DAILY).select(F.countDistinct("event_date")).first()[0] == 2
