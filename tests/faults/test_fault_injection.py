"""Exactly-once under crashes: SIGKILLed drivers (real spark-submit) resume without loss or duplicates."""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import START, oracle, run_job, table, table_version

from lakehouse import catalog
from lakehouse.runtime import checkpoint_lock
from lakehouse_tools.fault_harness import cli
from lakehouse_tools.fault_harness.attempt import Attempt, BatchClock, run_attempt
from lakehouse_tools.fault_harness.launch import job_environment, spark_submit_command
from lakehouse_tools.fault_harness.plan import (
    CONNECT_KILL_MODES,
    ENGINE,
    KILL_MODES,
    LAYER,
    RANDOM,
    plan_trial,
)
from lakehouse_tools.generator import write_campaigns, write_hours

# One trial (two spark-submits per streaming job, the suite's time budget) of a seed whose plan kills
# bronze at random early in its stream (so the kill cannot come after the job has finished), silver
# between its Delta commit and the checkpoint's (silver.after_merge), and each gold job at a fault
# point or at random; its data holds duplicates and bad lines. `make faults` runs more trials.
HARNESS_ARGS = ("--trials", "1", "--seed", "116", "--hours", "1", "--events-per-second", "0.05")


@pytest.mark.long  # CI's budget; kills in silver, sessions and the engine stay in the suite (tests/faults)
def test_harness_kills_every_layer_and_nothing_is_lost_or_doubled(spark, tmp_path):
    report = tmp_path / "report.json"
    options = cli.parse_args([*HARNESS_ARGS, "--workdir", str(tmp_path), "--report", str(report)])
    summary = cli.run(options, spark=spark)

    details = "\n".join(str(trial) for trial in summary["trials"])
    assert summary["trials_run"] == 1 and summary["trials_failed"] == [], details
    assert summary["lost"] == summary["duplicated"] == summary["unexpected_or_mismatched"] == 0, (
        summary["rows"]
    )
    # A harness that never kills would pass vacuously: every job of every trial was killed.
    for trial in summary["trials"]:
        killed = sorted(attempt["job"] for attempt in trial["attempts"] if attempt["killed"])
        assert killed == sorted(KILL_MODES), trial
    # Each job was killed as the trial's plan (a function of the seed alone) said.
    plan = {p.job: p.mode for p in plan_trial(116, 0, landing_files=4)[1]}
    assert summary["kills_per_layer"] == dict(Counter(LAYER[job] for job in plan)), summary
    assert summary["kills_per_fault_point"] == dict(
        Counter(mode if mode != RANDOM else f"random ({LAYER[job]})" for job, mode in plan.items())
    ), summary
    # The fault points landed between a Delta commit and the checkpoint's.
    landed = summary["kills_landed"]
    after_commit = [
        job for job, mode in plan.items() if mode in ("silver.after_merge", "gold.after_replace")
    ]
    assert after_commit, plan
    for job in after_commit:
        assert landed.get(f"{job}: {catalog.task(job).name} committed, checkpoint not") == 1, landed
    # The data exercised duplicates and quarantined lines, and every check compared real rows.
    for trial in summary["trials"]:
        tables = trial["tables"]
        assert tables["silver.quarantine_ad_events"]["expected"] > 0, tables
        assert (
            tables["bronze.ad_events"]["expected"] > tables["silver.ad_events"]["expected"] > 0
        ), tables
        assert all(tables[t.name]["expected"] > 0 for t in catalog.tables() if t.layer == "gold"), (
            tables
        )
    assert json.loads(report.read_text())["summary"]["trials_run"] == 1


# One connect-mode trial: every job a client of the harness's own engine. Seed 186's plan kills the
# engine's server during bronze's second micro-batch (its supervisor restarts it) and every other
# job's client early in its batch (the query goes on in the server until the rerun takes it over).
CONNECT_ARGS = (
    "--engine",
    "connect",
    "--trials",
    "1",
    "--seed",
    "186",
    "--hours",
    "1",
    "--events-per-second",
    "0.05",
)


# The harness starts, kills and stops an engine of its own, on a free port: the suite's is not touched.
@pytest.mark.long  # client and server kills on the engine are covered by tests/faults/test_engine_faults.py
def test_connect_mode_kills_clients_and_the_engine_and_nothing_is_lost_or_doubled(tmp_path):
    report = tmp_path / "report.json"
    options = cli.parse_args([*CONNECT_ARGS, "--workdir", str(tmp_path), "--report", str(report)])
    summary = cli.run(options)

    details = "\n".join(str(trial) for trial in summary["trials"])
    assert summary["engine"] == "connect"
    assert summary["trials_run"] == 1 and summary["trials_failed"] == [], details
    assert summary["lost"] == summary["duplicated"] == summary["unexpected_or_mismatched"] == 0, (
        summary["rows"]
    )
    # Every job was killed once, as the plan said: its client, or the engine's server under it.
    plan = {p.job: p.mode for p in plan_trial(186, 0, landing_files=4, engine="connect")[1]}
    assert Counter(plan.values()) == {
        ENGINE: 1,
        RANDOM: len(plan) - 1,
    }, plan
    trial = summary["trials"][0]
    killed = sorted(attempt["job"] for attempt in trial["attempts"] if attempt["killed"])
    assert killed == sorted(CONNECT_KILL_MODES), details
    assert summary["kills_per_fault_point"] == dict(
        Counter(f"{mode} ({LAYER[job]})" for job, mode in plan.items())
    )
    # The engine kill happened: the server was killed once, and its supervisor started a new one.
    assert summary["engine_kills"] == 1, summary
    engine_log = (tmp_path / "engine" / "engine.log").read_text(errors="replace")
    assert (
        "the server exited with" in engine_log
        and engine_log.count("starting the Spark Connect server") >= 2
    )
    # Real rows were compared, and the harness's engine is down again.
    tables = trial["tables"]
    assert tables["bronze.ad_events"]["expected"] > tables["silver.ad_events"]["expected"] > 0, (
        tables
    )
    assert all(tables[t.name]["expected"] > 0 for t in catalog.tables() if t.layer == "gold"), (
        tables
    )
    assert not (tmp_path / "engine" / "supervisor.pid").exists(), "the harness's engine was stopped"
    written = json.loads(report.read_text())
    assert written["options"]["engine"] == written["summary"]["engine"] == "connect"


def test_a_second_driver_on_a_locked_checkpoint_fails_fast_and_writes_nothing(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=21)
    write_hours(lakehouse, START, 1, events_per_second=0.02, seed=21)
    run_job("bronze_ad_events", lakehouse)
    version = table_version(spark, lakehouse, "bronze.ad_events")
    write_hours(
        lakehouse, START + timedelta(hours=1), 1, events_per_second=0.02, seed=21
    )  # new data waiting

    bronze = lakehouse.table("bronze.ad_events")
    with checkpoint_lock(bronze.checkpoint(), "the test, standing in for a first driver"):
        second = subprocess.run(
            spark_submit_command("bronze_ad_events", lakehouse),
            env=job_environment(lakehouse),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
        )

    # spark-submit passes the Python driver's stderr (where jobs log) on to its own stdout.
    output = second.stdout + second.stderr
    assert second.returncode == 2, output[-3000:]
    busy = "ERROR lakehouse: bronze.ad_events: another driver is already running on checkpoint"
    assert busy in output, output[-3000:]
    assert table_version(spark, lakehouse, "bronze.ad_events") == version


def test_a_retry_after_a_kill_between_the_silver_commit_and_the_checkpoint_adds_no_duplicate(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=27)  # an hour with duplicates and bad lines
    write_hours(lakehouse, START, 1, events_per_second=0.05, seed=27)
    run_job("dim_campaigns", lakehouse)
    run_job("bronze_ad_events", lakehouse)
    expected = oracle(lakehouse)
    assert expected.duplicates and expected.quarantined, (
        "the sample must hold duplicates and bad lines"
    )
    checkpoint = Path(lakehouse.table("silver.ad_events").checkpoint())

    killed = run_attempt(
        Attempt("silver_ad_events", 1, "silver.after_merge", batch=0),
        lakehouse,
        tmp_path / "killed.log",
        BatchClock(),
    )
    assert killed.returncode == -signal.SIGKILL and killed.killed, Path(killed.log).read_text()[
        -3000:
    ]
    assert killed.phase == "batch 0: silver.ad_events committed, checkpoint not"
    assert (checkpoint / "offsets" / "0").exists() and not (checkpoint / "commits" / "0").exists()
    ids = [
        row.event_id
        for row in table(spark, lakehouse, "silver.ad_events").select("event_id").collect()
    ]
    assert sorted(ids) == sorted(expected.events), (
        "silver's commit is whole even though the driver died"
    )
    assert table(spark, lakehouse, "silver.quarantine_ad_events").count() == 0
    silver_version = table_version(spark, lakehouse, "silver.ad_events")

    retry = run_attempt(
        Attempt("silver_ad_events", 2, None), lakehouse, tmp_path / "retry.log", BatchClock()
    )
    assert retry.returncode == 0, Path(retry.log).read_text()[-3000:]

    assert (checkpoint / "commits" / "0").exists() and not (checkpoint / "offsets" / "1").exists()
    # The replayed batch's MERGE was recognised as done (its Delta transaction id): no new version.
    assert table_version(spark, lakehouse, "silver.ad_events") == silver_version
    ids = [
        row.event_id
        for row in table(spark, lakehouse, "silver.ad_events").select("event_id").collect()
    ]
    assert len(ids) == len(set(ids)) and set(ids) == set(expected.events)
    reasons = (
        table(spark, lakehouse, "silver.quarantine_ad_events").groupBy("reason").count().collect()
    )
    assert {row.reason: row["count"] for row in reasons} == dict(expected.quarantined)
