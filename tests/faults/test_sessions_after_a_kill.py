"""Sessions are written exactly once, and the query starts again, wherever its driver died."""

from __future__ import annotations

import json
import signal
import uuid
from datetime import timedelta
from pathlib import Path

from helpers import (
    START,
    assert_gold_matches_oracle,
    expected_rows,
    rows_of,
    run_job,
    run_pipeline,
    table,
)

from lakehouse import catalog, checkpoint_log
from lakehouse.flows.sessions import sessions_stream
from lakehouse.freshness import watermark_advance_pending
from lakehouse.runtime import record_identity
from lakehouse_tools.fault_harness.attempt import Attempt, BatchClock, run_attempt
from lakehouse_tools.generator import write_campaigns, write_hours

SESSIONS = "gold.user_sessions"


def test_a_kill_after_the_state_commit_and_before_the_write_loses_and_doubles_no_session(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 1, events_per_second=0.1, seed=31)
    run_pipeline(
        lakehouse, up_to=SESSIONS
    )  # batch 0 (and its no-data batch 1, which closes sessions)
    written_before = table(spark, lakehouse, SESSIONS).count()
    write_hours(lakehouse, START + timedelta(hours=1), 2, events_per_second=0.1, seed=31)
    for task in ("bronze_ad_events", "silver_ad_events"):
        run_job(task, lakehouse)

    checkpoint = Path(lakehouse.table(SESSIONS).checkpoint())
    # The run's second batch: the data batch moves the watermark, the next one (no data) fires the
    # timers, clears the closed sessions from state and writes them.
    batch = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()) + 2
    killed = run_attempt(
        Attempt("gold_user_sessions", 1, "gold.before_sessions_write", batch=batch),
        lakehouse,
        tmp_path / "killed.log",
        BatchClock(),
    )
    assert killed.killed and killed.returncode == -signal.SIGKILL, Path(killed.log).read_text()[
        -3000:
    ]
    # The batch's state was committed (the stateful tasks ran), its output not written, its commit not made.
    state_versions = {
        p.name.split(".")[0]
        for p in (checkpoint / "state" / "0").rglob("*")
        if p.suffix in (".zip", ".changelog")
    }
    assert str(batch + 1) in state_versions, sorted(state_versions)
    assert (checkpoint / "commits" / str(batch - 1)).exists() and not (
        checkpoint / "commits" / str(batch)
    ).exists()
    assert table(spark, lakehouse, SESSIONS).count() == written_before

    retry = run_job(
        "gold_user_sessions", lakehouse
    )  # the retry replays the batch from the state before it
    assert batch in [note["batch_id"] for note in retry["batches"]], retry
    expected = assert_gold_matches_oracle(spark, lakehouse, names=(SESSIONS, "gold.open_sessions"))
    assert (
        sum(rows_of(spark, lakehouse, SESSIONS).values())
        == len(expected.rows(SESSIONS))
        > written_before
    )


def test_a_kill_after_the_query_and_before_the_open_sessions_rewrite_is_mended_by_the_retry(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 1, events_per_second=0.1, seed=31)
    run_pipeline(lakehouse, up_to=SESSIONS)
    open_before = rows_of(spark, lakehouse, "gold.open_sessions")
    write_hours(lakehouse, START + timedelta(hours=1), 1, events_per_second=0.1, seed=31)
    for task in ("bronze_ad_events", "silver_ad_events"):
        run_job(task, lakehouse)

    # The query runs and commits its batches; the driver dies before gold.open_sessions is rewritten.
    killed = run_attempt(
        Attempt("gold_user_sessions", 1, "gold.before_open_sessions"),
        lakehouse,
        tmp_path / "killed.log",
        BatchClock(),
    )
    assert killed.killed and killed.returncode == -signal.SIGKILL, Path(killed.log).read_text()[
        -3000:
    ]
    assert rows_of(spark, lakehouse, "gold.open_sessions") == open_before, (
        "the rewrite had not happened"
    )

    # The retry finds nothing new to start a query for, and rewrites the open sessions all the same.
    retry = run_job("gold_user_sessions", lakehouse)
    assert "not_started" in retry and "open_sessions" in retry, retry
    expected = assert_gold_matches_oracle(spark, lakehouse, names=(SESSIONS, "gold.open_sessions"))
    assert expected_rows(expected, "gold.open_sessions") != open_before, (
        "the new hour changed the open sessions"
    )


def test_a_kill_between_the_batch_that_moves_the_watermark_and_the_one_that_closes_sessions(
    spark, lakehouse
):
    # Connect-mode fault trial 24 (seed 1): the engine died after the data batch was committed and
    # before Spark planned the no-data batch that fires the timers; Spark runs that batch only right
    # after the one that moved the watermark, so the retry found nothing to do and closed nothing.
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=31)
    run_pipeline(lakehouse, up_to="silver.ad_events")
    entry = catalog.get(SESSIONS)
    checkpoint = lakehouse.table(SESSIONS).checkpoint()

    # That checkpoint, made without a kill: the sessions query, run for one batch only (a one-time
    # trigger runs no no-data batch after it). Its data batch closes nothing: every event is on time.
    def closes_nothing(
        output, batch_id
    ) -> None:  # nested: pickled by value for the engine's Python worker
        if output.where("kind = 'session'").count():
            raise AssertionError(f"batch {batch_id} closed sessions: the test's premise is wrong")

    query = (
        sessions_stream(spark, lakehouse.table(entry.name))
        .writeStream.foreachBatch(closes_nothing)
        .option("checkpointLocation", checkpoint)
        .trigger(once=True)
        .start()
    )
    query.awaitTermination()
    assert checkpoint_log.batches(checkpoint, "commits") == (0,) and watermark_advance_pending(
        checkpoint
    )

    retry = run_job("gold_user_sessions", lakehouse)
    assert [note["batch_id"] for note in retry["batches"]] == [0, 1], (
        retry
    )  # the data batch replayed, then the no-data one
    expected = assert_gold_matches_oracle(spark, lakehouse, names=(SESSIONS, "gold.open_sessions"))
    assert expected.rows(SESSIONS), (
        "the sample has sessions that the second hour's watermark closes"
    )


def test_a_kill_while_the_first_batch_is_planned_leaves_a_checkpoint_the_retry_starts_on(
    spark, lakehouse
):
    # Connect-mode fault trial 70 (seed 1): the engine died while the sessions query wrote its first
    # offsets file, and Spark refused every retry: a new query's checkpoint must hold no file in
    # offsets/ (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), and the temp file of that write was there.
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 2, events_per_second=0.1, seed=31)
    run_pipeline(lakehouse, up_to="silver.ad_events")
    checkpoint = Path(lakehouse.table(SESSIONS).checkpoint())
    # What the killed run left, as trial 70's folder held it: the query's id (Spark's metadata file,
    # and the job's record of it), and the empty temp file of batch 0's offsets with its checksum.
    query_id = str(uuid.uuid4())
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    record_identity(str(checkpoint), SESSIONS, query_id)
    temp = f".0.{uuid.uuid4()}.tmp"
    for leftover in (temp, f".{temp}.crc"):
        (checkpoint / "offsets" / leftover).touch()

    retry = run_job("gold_user_sessions", lakehouse)
    assert [note["batch_id"] for note in retry["batches"]] == [0, 1], (
        retry
    )  # the first batch, and the one closing sessions
    expected = assert_gold_matches_oracle(spark, lakehouse, names=(SESSIONS, "gold.open_sessions"))
    assert (
        expected.rows(SESSIONS)
        and checkpoint_log.unfinished_writes(str(checkpoint), "offsets") == []
    )
