"""User sessions: hourly runs, one run, the batch form and a full refresh all equal the oracle.

The tests run only the tasks the sessions need (not the other gold tables'), except before the
consistency check, which compares every table.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, timedelta
from pathlib import Path

import pytest
from helpers import (
    START,
    assert_gold_matches_oracle,
    expected_rows,
    hourly_late_events,
    oracle,
    rows_of,
    run_by_spark_submit,
    run_job,
    run_pipeline,
    table,
)
from pyspark.sql import functions as F

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse.flows import sessions as session_flow
from lakehouse.periods import Periods
from lakehouse_tools.generator import write_campaigns, write_hours

HOURS = 4
SEED = 21
EVENTS_PER_SECOND = 0.2
SESSIONS = "gold.user_sessions"
SESSION_TABLES = (
    SESSIONS,
    "gold.open_sessions",
)  # the sessions query's tables: its own and the sessions still open


@dataclass
class BesideTheStream:
    """What a backfill of hour 01:00, beside the hourly run that ingested hour 02:00, left."""

    closed_since: set[str]  # sessions the backfill saw open and the hourly run closed meanwhile
    reconciled_in_its_hour: int  # late events of hour 01:00 reconciled before the replace
    tables: dict[str, Counter]  # the sessions tables after the backfill's replace
    expected: dict[str, Counter]  # the oracle's, over the landing zone then (hours 00-02)


@pytest.fixture(scope="module")
def four_hours(spark, tmp_path_factory) -> tuple[Lakehouse, Lakehouse, BesideTheStream]:
    """(hourly, at_once, beside): the same producer hours, streamed a run per hour and in one run,
    and what a backfill of hour 01:00 beside the hourly run of hour 02:00 left (see its test).

    Shared by the tests that take it, in file order (building them cost each test half a minute
    of CI): each leaves the sessions tables as the oracle has them.
    """
    folder = tmp_path_factory.mktemp("sessions")
    hourly, at_once = (
        Lakehouse(root=str(folder / "hourly")),
        Lakehouse(root=str(folder / "at_once")),
    )
    for lakehouse in (hourly, at_once):
        write_campaigns(lakehouse, seed=SEED)
    for hour in range(HOURS):  # a run per producer hour: sessions cross hours and runs
        if hour == 2:
            backfill = backfill_of_hour_one_reads(spark, hourly)
        write_hours(
            hourly, START + timedelta(hours=hour), 1, events_per_second=EVENTS_PER_SECOND, seed=SEED
        )
        run_pipeline(hourly, up_to=SESSIONS)
        if hour == 2:
            beside = backfill_of_hour_one_replaces(spark, hourly, *backfill)
    write_hours(at_once, START, HOURS, events_per_second=EVENTS_PER_SECOND, seed=SEED)
    run_pipeline(at_once, up_to=SESSIONS)
    return hourly, at_once, beside


def backfill_of_hour_one_reads(spark, lakehouse: Lakehouse) -> tuple:
    """The backfill of hour 01:00 reads the stream's watermark and recomputes the hour's sessions."""
    entry = catalog.get(SESSIONS)
    start_ms = int((START + timedelta(hours=1)).timestamp() * 1000)
    end_ms = start_ms + 3_600_000
    watermark = session_flow.watermark_for(spark, lakehouse.table(entry.name))
    recomputed = session_flow.recomputed_sessions(
        spark, lakehouse.table(entry.upstream[0]), entry, watermark, start_ms, end_ms
    )
    open_then = {
        row.session_id
        for row in session_flow.table_rows(recomputed.where(F.col("kind") == "open")).collect()
    }
    return open_then, recomputed, watermark, start_ms, end_ms


def backfill_of_hour_one_replaces(
    spark, lakehouse: Lakehouse, open_then, recomputed, watermark, start_ms, end_ms
) -> BesideTheStream:
    """After the hourly run of hour 02:00 (its watermark closes sessions the backfill saw open),
    the backfill's replace commits last."""
    entry = catalog.get(SESSIONS)
    closed_since = open_then & {
        row.session_id for row in table(spark, lakehouse, SESSIONS).select("session_id").collect()
    }
    reconciled = table(spark, lakehouse, "ops.late_session_events").where(
        F.col("reconciled_at").isNotNull()
    )
    reconciled_in_its_hour = reconciled.where(F.hour("event_time") == 1).count()
    try:
        session_flow.replace_sessions(
            spark, lakehouse.table(SESSIONS), entry, recomputed, watermark, start_ms, end_ms
        )
    finally:
        recomputed.unpersist()
    expected = oracle(lakehouse)
    return BesideTheStream(
        closed_since=closed_since,
        reconciled_in_its_hour=reconciled_in_its_hour,
        tables={name: rows_of(spark, lakehouse, name) for name in SESSION_TABLES},
        expected={name: expected_rows(expected, name) for name in SESSION_TABLES},
    )


def test_hourly_runs_one_run_and_the_batch_form_give_the_oracles_sessions(
    spark, four_hours, capsys
):
    hourly, at_once, _ = four_hours
    expected = oracle(hourly)
    assert expected.events == oracle(at_once).events
    for lakehouse in (hourly, at_once):
        assert_gold_matches_oracle(spark, lakehouse, expected, names=SESSION_TABLES)

    # What the sample exercised: sessions across an hour (and so a run) boundary, late events
    # (90 minutes behind, past the watermark) that the hourly stream recorded and reconciled.
    closed = expected.rows(SESSIONS)
    assert any(row["session_start"].hour != row["session_end"].hour for row in closed)
    late = table(spark, hourly, "ops.late_session_events")
    assert late.count() > 0
    # The plain-Python count the catch-up test compares with (test_sessions_catch_up.py) is this one.
    assert late.count() == hourly_late_events(hourly)
    pending = late.where(F.col("reconciled_at").isNull()).select("user_id").collect()
    still_open = {row["user_id"] for row in expected.rows("gold.open_sessions")}
    assert {row.user_id for row in pending} <= still_open, (
        "a late event waits only for a session still open"
    )
    assert table(spark, at_once, "ops.late_session_events").count() == 0, (
        "one run sees no event behind its watermark"
    )

    # The consistency check, of the sessions alone, recomputes the sessions of the hourly runs'
    # hours and finds them equal (a check of every table: tests/integration/test_batch_mode.py).
    first = START - timedelta(
        hours=3
    )  # late events fall up to 90 minutes before the first producer hour
    interval = [
        "--start",
        f"{first:%Y-%m-%dT%H:%MZ}",
        "--end",
        f"{START + timedelta(hours=HOURS + 1):%Y-%m-%dT%H:%MZ}",
    ]
    capsys.readouterr()
    run_job("consistency_check", hourly, *interval, "--table", SESSIONS)
    assert f"no differences: {SESSIONS} is consistent" in capsys.readouterr().out

    # The batch form alone: sessions deleted, then a backfill of the whole range brings them back.
    path = at_once.table(SESSIONS).path
    spark.sql(f"DELETE FROM delta.`{path}`")
    interval = ["--mode", "batch", *interval]
    run_job("gold_user_sessions", at_once, *interval)
    assert rows_of(spark, at_once, SESSIONS) == rows_of(spark, hourly, SESSIONS)
    run_job("gold_user_sessions", at_once, *interval)  # idempotent
    assert_gold_matches_oracle(spark, at_once, expected, names=SESSION_TABLES)


def test_a_backfill_of_one_hour_replaces_exactly_the_sessions_overlapping_it(spark, four_hours):
    _, lakehouse, _ = four_hours  # after its batch form's backfills: the oracle's sessions
    before = rows_of(spark, lakehouse, SESSIONS)
    path = lakehouse.table(SESSIONS).path
    hour = START + timedelta(hours=1)
    # Damage the hour: drop one session overlapping it, and corrupt another one's figures.
    overlapping = (F.col("session_end") >= F.lit(hour.replace(tzinfo=None))) & (
        F.col("session_start") < F.lit((hour + timedelta(hours=1)).replace(tzinfo=None))
    )
    ids = [
        row.session_id
        for row in table(spark, lakehouse, SESSIONS).where(overlapping).limit(2).collect()
    ]
    spark.sql(f"DELETE FROM delta.`{path}` WHERE session_id = '{ids[0]}'")
    spark.sql(f"UPDATE delta.`{path}` SET events = events + 100 WHERE session_id = '{ids[1]}'")
    untouched = table(spark, lakehouse, SESSIONS).where(~overlapping).count()

    run_job(
        "gold_user_sessions",
        lakehouse,
        "--mode",
        "batch",
        "--start",
        f"{hour:%Y-%m-%dT%H:%MZ}",
        "--end",
        f"{hour + timedelta(hours=1):%Y-%m-%dT%H:%MZ}",
    )
    assert rows_of(spark, lakehouse, SESSIONS) == before
    assert table(spark, lakehouse, SESSIONS).where(~overlapping).count() == untouched


def test_a_backfill_beside_the_stream_keeps_the_sessions_the_stream_closed_after_it_read_the_watermark(
    four_hours,
):
    # CI, once: a backfill of hours 00-02 beside the hourly run that ingested hour 02 lost 10 sessions
    # of hour 01. The hourly runs of the fixture take the same order, step by step, as the batch
    # form's recompute takes it: after the run of hours 00-01, the backfill of hour 01:00 reads the
    # stream's watermark and recomputes the hour's sessions; the hourly run ingests hour 02 meanwhile,
    # and its watermark closes sessions the backfill saw open; the backfill's replace commits last:
    # it must not delete what it saw open.
    *_, beside = four_hours
    assert beside.closed_since, (
        "the sample must have sessions of hour 01:00 that the next hour's watermark closes"
    )
    assert beside.reconciled_in_its_hour == 1, (
        "and a late event of that hour, reconciled before the replace"
    )
    for name in SESSION_TABLES:
        actual, wanted = beside.tables[name], beside.expected[name]
        missing, extra = wanted - actual, actual - wanted
        assert actual == wanted, f"{name}: {missing.total()} row(s) missing, {extra.total()} extra"


def test_a_backfill_recomputes_again_when_the_hourly_run_reconciles_a_late_event_of_its_hour_meanwhile(
    spark, four_hours, monkeypatch
):
    # With silver written by another JVM (spark-submit) while a backfill of hour 00:00 computed, the
    # backfill's cached recomputation missed a late event that the hourly run had recorded and
    # reconciled into a session of that hour, and its replace put the session back without it.
    _, lakehouse, _ = four_hours  # the hours streamed in one run, the oracle's sessions
    entry = catalog.get(SESSIONS)
    closed = table(spark, lakehouse, SESSIONS).where(
        F.col("session_start") >= F.lit(START.replace(minute=5, tzinfo=None))
    )
    touched = (
        closed.where(F.col("session_end") < F.lit(START.replace(minute=40, tzinfo=None)))
        .orderBy("session_id")
        .first()
    )
    # A late event one minute after that session's last, from the same user, in a later arrival folder.
    event = next(
        json.loads(line)
        for path in sorted(Path(lakehouse.landing_events).rglob("*.jsonl"))
        for line in path.read_text().splitlines()
        if f'"user_id": "{touched.user_id}"' in line
    )
    last_ms = int(touched.session_end.replace(tzinfo=UTC).timestamp() * 1000)
    event.update(event_id=str(uuid.uuid4()), event_time=str(last_ms + 60_000))

    def the_hourly_run_meanwhile(spark_, target, table_, sessions, watermark, start_ms, end_ms):
        if not backfill_replaces:  # the backfill's first replace
            arrival = (
                Path(lakehouse.landing_events)
                / f"{START + timedelta(hours=HOURS):%Y-%m-%d/%H}"
                / "part-0000.jsonl"
            )
            arrival.parent.mkdir(parents=True)
            arrival.write_text(json.dumps(event) + "\n")
            run_job("bronze_ad_events", lakehouse)
            run_by_spark_submit("silver_ad_events", lakehouse)
            run_job("gold_user_sessions", lakehouse)
            late = table(spark, lakehouse, "ops.late_session_events").where(
                F.col("event_id") == event["event_id"]
            )
            assert late.where(F.col("reconciled_at").isNotNull()).count() == 1, (
                "recorded late and reconciled"
            )
        backfill_replaces.append(start_ms)
        return replace_sessions(spark_, target, table_, sessions, watermark, start_ms, end_ms)

    backfill_replaces, replace_sessions = [], session_flow.replace_sessions
    monkeypatch.setattr(session_flow, "replace_sessions", the_hourly_run_meanwhile)
    session_flow.recompute(
        lakehouse.table(entry.name),
        Periods.between(START, START + timedelta(hours=1)),
        spark=spark,  # the hourly run meanwhile releases the sessions a job of its own made
    )
    expected = assert_gold_matches_oracle(spark, lakehouse, names=SESSION_TABLES)
    sessions = {row["session_id"]: row for row in expected.rows(SESSIONS)}
    assert sessions[touched.session_id]["events"] == touched.events + 1, (
        "the late event joined the session"
    )
    assert len(backfill_replaces) == 2, "recomputed again after silver grew"


def test_a_full_refresh_rebuilds_the_sessions_state_from_silver(spark, four_hours):
    lakehouse, _, _ = four_hours  # the hourly runs' sessions, late events reconciled: the oracle's
    before = {name: rows_of(spark, lakehouse, name) for name in SESSION_TABLES}

    run_job("full_refresh", lakehouse, "--layer", "gold")
    assert table(spark, lakehouse, SESSIONS).count() == 0
    assert lakehouse.table(SESSIONS).current_generation() == 1
    run_pipeline(lakehouse, up_to=SESSIONS)
    assert {name: rows_of(spark, lakehouse, name) for name in before} == before
    assert_gold_matches_oracle(spark, lakehouse, names=SESSION_TABLES)
