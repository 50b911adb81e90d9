"""Checkpoints and tables must agree, or the job refuses; the recovery it prints, followed to the letter, is safe.

Every damage is refused before anything is written (exit status 2, a ConfigError in process), the
harness does exactly what the message says (``fault_harness.checkpoint_trials.follow_recovery``),
runs the pipeline again, and the tables are compared with the landing files and the plain-Python
oracle.
"""

from __future__ import annotations

import re
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import START, assert_tables_match_oracle

from lakehouse import catalog
from lakehouse.config import Lakehouse
from lakehouse.errors import ConfigError
from lakehouse.flows.merge import MergeBatch
from lakehouse.runtime import Written, run_available_now
from lakehouse.sources import delta_stream
from lakehouse_tools.fault_harness import cli
from lakehouse_tools.fault_harness.checkpoint_trials import (
    follow_recovery,
    refusal_message,
    run_pipeline,
)
from lakehouse_tools.fault_harness.launch import REFUSED, TaskRunner
from lakehouse_tools.fault_harness.plan import plan_checkpoint_trials
from lakehouse_tools.fault_harness.verdict import PROBLEMS, check_tables
from lakehouse_tools.generator import write_campaigns, write_hours

# A seed whose plan gives each kind of damage once, on the job where it hurt most when found by hand:
# bronze's folder moved away (it appended every line again), silver's newest offsets file removed
# (CONCURRENT_STREAM_LOG_UPDATE, then a silent skip), the gold tables' one truncated, and the
# sessions' restored from an older copy.
SEED = 8
PLAN = [
    ("removed", "bronze_ad_events"),
    ("offsets_removed", "silver_ad_events"),
    ("offsets_truncated", "gold_aggregates"),
    ("restored_older", "gold_user_sessions"),
]
# What each refusal must say it found.
FOUND = {
    "removed": r"holds no batch \(moved away, deleted or never copied\), but the tables already hold this writer's",
    "offsets_removed": r"commits/(\d+) exists but offsets/\1 does not",
    "offsets_truncated": r"damaged \(truncated or not Spark's format\): offsets/\d+",
    "restored_older": r"the checkpoint is older than its tables",
}


def assert_whole(spark, lakehouse: Lakehouse) -> None:
    """Every table equals the oracle, and silver's metrics account for every batch exactly once."""
    assert_tables_match_oracle(spark, lakehouse)
    figures = check_tables(spark, lakehouse)
    assert all(f.get(k, 0) == 0 for f in figures.values() for k in PROBLEMS), figures


@pytest.mark.long  # 4 damaged pipelines end to end; the same refusals are each covered by the test below
def test_each_kind_of_checkpoint_damage_is_refused_and_its_recovery_restores_the_oracle(
    spark, tmp_path
):
    assert plan_checkpoint_trials(SEED, len(PLAN)) == PLAN
    options = cli.parse_args(
        [
            "--trials",
            "0",
            "--checkpoint-trials",
            str(len(PLAN)),
            "--seed",
            str(SEED),
            "--hours",
            "1",
            "--events-per-second",
            "0.02",
            "--in-process",
            "--keep",
            "--workdir",
            str(tmp_path),
        ]
    )
    summary = cli.run(options, spark=spark)

    trials = summary["checkpoint_trials"]
    details = "\n".join(str(t) for t in trials)
    assert summary["checkpoint"]["cases"] == len(PLAN) and summary["checkpoint"]["failed"] == [], (
        details
    )
    assert summary["checkpoint"]["lost"] == summary["checkpoint"]["duplicated"] == 0, details
    for trial, (kind, job) in zip(trials, PLAN):
        layer, name = catalog.task(job).layer, catalog.task(job).name
        checkpoints = Lakehouse(str(tmp_path / "checkpoint-trials")).table(name).checkpoint_root
        assert (trial["kind"], trial["job"], trial["refused_by"]) == (kind, job, job), trial
        message = trial["message"]
        assert re.match(rf"{name}: checkpoint {checkpoints}/gen=\d+ ", message), message
        assert re.search(FOUND[kind], message), message
        assert (
            "Nothing was written." in message and f"jobs/full_refresh.py --layer {layer}" in message
        ), message
        assert trial["recovery"] == f"full refresh of {layer}", trial
        assert all(f.get(k, 0) == 0 for f in trial["tables"].values() for k in PROBLEMS), trial
    # The lakehouse as the last recovery left it, against the oracle once more (helpers' own comparison).
    assert_whole(spark, Lakehouse(str(tmp_path / "checkpoint-trials")))


def newest(folder: Path) -> int:
    return max(int(p.name) for p in folder.iterdir() if p.name.isdigit())


@pytest.mark.long  # CI's budget (5 min): each refusal and a recovery of it stay in tests/faults/test_operational_errors.py
def test_recoveries_short_of_a_full_refresh_are_safe_to_follow(spark, lakehouse):
    """Deleting named files (a batch no table holds yet, or one replayed from intact offsets), the full refresh
    of a replaced checkpoint, the rerun after a concurrent commit: each followed to the letter, then the oracle."""
    run_task = TaskRunner(lakehouse, Path(lakehouse.root) / "logs", in_process=True)
    hours = iter(range(100))

    def add_hour() -> None:
        write_hours(
            lakehouse, START + timedelta(hours=next(hours)), 1, events_per_second=0.02, seed=61
        )

    def refused(job: str) -> str:
        failed = run_pipeline(run_task)
        assert failed is not None and failed[:2] == (job, REFUSED), failed
        return refusal_message(failed[2])

    def follow_and_check(message: str, expected_recovery: str) -> None:
        assert follow_recovery(message, run_task) == expected_recovery, message
        assert run_pipeline(run_task) is None
        assert_whole(spark, lakehouse)

    write_campaigns(lakehouse, seed=61)
    add_hour()
    assert run_task("dim_campaigns") == (0, "")
    assert run_pipeline(run_task) is None

    # Three checkpoints damaged at once, an hour of input waiting; each refuses in DAG order:
    # * silver: a torn offsets file of a batch that was planned, but not written anywhere yet (a
    #   driver that died while writing it): that batch may be planned again;
    # * the gold tables' query: the damaged newest commit file of a batch whose offsets are intact:
    #   replayed, and skipped where held;
    # * the sessions: a commit file of a batch that was never planned, and that no table holds.
    add_hour()
    assert run_task("bronze_ad_events")[0] == 0
    silver = Path(lakehouse.table("silver.ad_events").checkpoint())
    planned = newest(silver / "offsets") + 1
    (silver / "offsets" / str(planned)).write_bytes(
        (silver / "offsets" / str(planned - 1)).read_bytes()[:40]
    )
    commits = Path(lakehouse.table("gold.ad_hourly").checkpoint()) / "commits"
    last = newest(commits)
    (commits / str(last)).write_bytes(b"v1\n{")
    sessions = Path(lakehouse.table("gold.user_sessions").checkpoint())
    stray = newest(sessions / "commits") + 1
    shutil.copy(sessions / "commits" / str(stray - 1), sessions / "commits" / str(stray))

    message = refused("silver_ad_events")
    torn = [str(silver / "offsets" / str(planned)), str(silver / "offsets" / f".{planned}.crc")]
    assert (
        f"(truncated or not Spark's format): offsets/{planned}. No table holds batch {planned} yet"
        in message
    )
    assert (
        f"Recovery: delete {torn[0]} and {torn[1]} (nothing else), then rerun silver_ad_events"
        in message
    )
    assert follow_recovery(message, run_task) == f"deleted {', '.join(torn)}"

    message = refused("gold_aggregates")
    damaged = [str(commits / str(last)), str(commits / f".{last}.crc")]
    assert (
        f"damaged (truncated or not Spark's format): commits/{last}. Recovery: delete {damaged[0]} and"
        in message
    )
    assert f"batch {last} is replayed with the same input (offsets/{last} is intact)" in message
    assert follow_recovery(message, run_task) == f"deleted {', '.join(damaged)}"

    message = refused("gold_user_sessions")
    files = [str(sessions / "commits" / str(stray)), str(sessions / "commits" / f".{stray}.crc")]
    assert (
        f"commits/{stray} exists but offsets/{stray} does not. No table holds batch {stray}."
        in message
    )
    follow_and_check(message, f"deleted {', '.join(files)}")

    # Another query's checkpoint put in place of this one's (both read silver: Spark would resume it).
    hourly = Path(lakehouse.table("gold.ad_hourly").checkpoint())
    shutil.rmtree(hourly)
    shutil.copytree(sessions, hourly)
    add_hour()
    message = refused("gold_aggregates")
    assert (
        f"gold.ad_hourly: checkpoint {hourly} belongs to another query: its metadata names query"
        in message
    )
    assert f"(recorded in {hourly}.identity.json)" in message
    follow_and_check(message, "full refresh of gold")

    # Another driver commits the batch this one is running (no shared lock between them): Spark's
    # CONCURRENT_STREAM_LOG_UPDATE, translated. Silver's own micro-batch, then the other driver's commit.
    add_hour()
    assert run_task("bronze_ad_events")[0] == 0
    table = lakehouse.table("silver.ad_events")
    generation = table.current_generation()
    silver = Path(table.checkpoint())
    on_batch = MergeBatch(table, generation)

    def batch_then_another_driver_commits(rows, batch_id: int) -> None:
        on_batch(rows, batch_id)
        (silver / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')

    writer = delta_stream(spark, lakehouse.table("bronze.ad_events")).writeStream.foreachBatch(
        batch_then_another_driver_commits
    )
    writes = [Written(lakehouse.table(name), app_id) for name, app_id in on_batch.app_ids.items()]
    with pytest.raises(ConfigError) as failure:
        run_available_now(writer, str(silver), table.name, writes)
    message = str(failure.value)
    assert "silver.ad_events: while this driver ran batch" in message, message
    assert "another driver ran the same query at the same time" in message, message
    assert "CONCURRENT_STREAM_LOG_UPDATE" in message, message
    follow_and_check(message, "nothing: no other driver runs on the checkpoint")
