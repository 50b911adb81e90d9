"""The sessions' run with nothing new while late events wait for their session to close (issue 60):
no query, no reconciliation, nothing written; and a run that can settle them still does."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

from helpers import START, assert_gold_matches_oracle, run_job, run_pipeline

from lakehouse import catalog, checkpoint_log, delta_log, expectations, runner
from lakehouse import spark as lakehouse_spark
from lakehouse.files import write_atomic
from lakehouse.flows import sessions as session_flow
from lakehouse_tools.generator import Disorder, write_campaigns, write_hours

SESSIONS = "gold.user_sessions"
TABLES = (SESSIONS, "gold.ad_hourly")  # the sessions' tasks, and an hour-replacing gold one
TASK = catalog.get(SESSIONS).task
MINUTE_MS = 60_000


def landed_events(folder: Path) -> list[dict]:
    events = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and str(event.get("event_time", "")).isdigit():
                events.append(event)
    return events


def land(lakehouse, hour, name: str, template: dict, user_id: str, times_ms: list[int]) -> None:
    lines = [
        json.dumps(
            {**template, "event_id": str(uuid.uuid4()), "user_id": user_id, "event_time": str(ms)}
        )
        for ms in times_ms
    ]
    folder = Path(lakehouse.landing_events) / f"{hour:%Y-%m-%d/%H}"
    write_atomic(folder / name, "".join(f"{line}\n" for line in lines))


def versions(lakehouse) -> dict:
    written = lakehouse.table(SESSIONS).written_by_its_task()
    return {t.name: delta_log.latest_version(t.path) for t in written}


def test_an_idle_run_with_late_events_pending_starts_nothing_and_a_closing_run_settles_them(
    spark, lakehouse, monkeypatch
):
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=31, disorder=Disorder.none())
    run_pipeline(lakehouse, up_to=TABLES)

    # A chain of one user's events, 20 minutes apart at most, up to the newest event time: the
    # older ones are behind the watermark (late) and their session is still open, so they wait.
    landed = landed_events(
        Path(lakehouse.landing_events) / f"{START + timedelta(hours=1):%Y-%m-%d/%H}"
    )
    template, newest = landed[0], max(int(e["event_time"]) for e in landed)
    user = str(uuid.UUID(int=7))
    chain = [newest - minutes * MINUTE_MS for minutes in (70, 50, 30, 12, 0)]
    land(lakehouse, START + timedelta(hours=2), "part-late.jsonl", template, user, chain)
    run_pipeline(lakehouse, up_to=TABLES)
    # The query recorded them in the run above; this one finds nothing new to settle.
    recorded = run_job(TASK, lakehouse)
    assert recorded["late_pending"] == 4

    sessions = lakehouse.table(SESSIONS)
    checkpoint = sessions.checkpoint(sessions.current_generation())
    before = versions(lakehouse), checkpoint_log.newest(checkpoint, "commits")

    def must_not_run(*args, **kwargs):
        raise AssertionError("nothing can close: no reconciliation, no open-sessions rewrite")

    def no_session(*args, **kwargs):
        raise AssertionError("a run with nothing new opens no engine session")

    with monkeypatch.context() as patched:
        patched.setattr(session_flow, "reconcile", must_not_run)
        patched.setattr(session_flow, "refresh_open_sessions", must_not_run)
        for module in (lakehouse_spark, runner, expectations):
            patched.setattr(module, "build_spark_session", no_session)
        idle = run_job(TASK, lakehouse)
        # Nor does any other task with nothing new: each finds it from files.
        run_pipeline(lakehouse, up_to=TABLES)
    assert "not_started" in idle and idle["reconcile_skipped"]
    assert (idle["late_pending"], idle["late_reconciled"]) == (4, 0)
    assert (versions(lakehouse), checkpoint_log.newest(checkpoint, "commits")) == before

    # The user's next event, long after: the watermark passes the chain's session, which closes,
    # and the reconciliation that follows settles its late events.
    later = START + timedelta(hours=3)
    land(lakehouse, later, "part-0000.jsonl", template, user, [newest + 3 * 60 * MINUTE_MS])
    run_pipeline(lakehouse, up_to=TABLES)
    closing = run_job(TASK, lakehouse)
    assert closing["late_pending"] == 0
    settled = spark.read.format("delta").load(sessions.side("late").path)
    assert settled.where("reconciled_at IS NULL").count() == 0
    assert settled.where(f"user_id = '{user}'").count() == 4
    assert_gold_matches_oracle(spark, lakehouse, names=(SESSIONS, "gold.open_sessions"))
