"""Exactly-once on the warm engine: a client killed -9, the server killed -9, two clients at once.

On the engine a query runs in the server, not in the job's process: a killed client leaves its
query running there, and the server can die under a live client. Each test runs real jobs as
Spark Connect clients (``python jobs/run.py``, as an Airflow task does in-process) against the
session's engine, damages the run, reruns, and compares every table with the oracle.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import START, assert_tables_match_oracle, private_engine, run_job, table

from lakehouse import catalog
from lakehouse.config import Lakehouse, engine_settings
from lakehouse.runtime import CheckpointBusy, batch_running
from lakehouse.spark import build_spark_session, check_engine, engine, release_engine_sessions
from lakehouse_tools import engine as engine_tool
from lakehouse_tools.generator import write_campaigns, write_hours

PROJECT_DIR = Path(__file__).resolve().parents[2]
GOLD_TASKS = tuple(entry.task for entry in catalog.tasks() if entry.layer == "gold")

pytestmark = pytest.mark.skipif(
    engine() != "connect", reason="jobs run with their own driver (LAKEHOUSE_ENGINE=local)"
)


def land(lakehouse: Lakehouse, hours: int = 2, events_per_second: float = 3.0) -> None:
    write_campaigns(lakehouse, seed=7)
    write_hours(
        lakehouse, START, hours=hours, events_per_second=events_per_second, seed=7
    )  # late, dup, bad lines


def client(lakehouse: Lakehouse, task: str) -> subprocess.Popen:
    """A job as its own process: a Spark Connect client of the engine, killable."""
    env = {**os.environ, "LAKEHOUSE_ENGINE": "connect", "PYTHONPATH": str(PROJECT_DIR / "include")}
    return subprocess.Popen(
        [
            sys.executable,
            str(PROJECT_DIR / "jobs" / "run.py"),
            task,
            "--lakehouse-root",
            lakehouse.root,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(condition, what: str, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def metrics_batches(spark, lakehouse: Lakehouse) -> list[int]:
    return sorted(r.batch_id for r in table(spark, lakehouse, "ops.silver_batch_metrics").collect())


def test_a_client_killed_mid_batch_leaves_no_query_running_into_the_next_run(spark, lakehouse):
    land(lakehouse)
    run_job("dim_campaigns", lakehouse)
    run_job("bronze_ad_events", lakehouse)
    checkpoint = lakehouse.table("silver.ad_events").checkpoint()

    first = client(lakehouse, "silver_ad_events")
    wait_for(
        lambda: batch_running(checkpoint) or first.poll() is not None,
        "silver's first batch on the engine",
    )
    assert first.poll() is None, first.communicate()[0][-3000:]
    first.send_signal(signal.SIGKILL)
    first.wait()
    # The query is still on the engine, inside its batch. The next run waits for that batch, then
    # checks the checkpoint and takes the query over (Spark stops the orphan's run).
    assert batch_running(checkpoint), (
        "the killed client's batch should still be running on the engine"
    )
    summary = run_job("silver_ad_events", lakehouse)

    for task in GOLD_TASKS:
        run_job(task, lakehouse)
    assert_tables_match_oracle(spark, lakehouse)
    batches = metrics_batches(spark, lakehouse)
    assert batches == sorted(set(batches)), f"a batch was accounted twice: {batches}"
    assert summary["table"] == "silver.ad_events"
    # Nothing of the orphan runs on: a later run finds nothing new and starts no query.
    assert run_job("silver_ad_events", lakehouse)["not_started"]
    assert not batch_running(checkpoint)


@pytest.fixture
def own_engine(monkeypatch, tmp_path):
    """An engine of this test's own, up for its jobs and clients: the one it kills is not the
    session's, whose reader session (``spark``) the other tests go on using."""
    with private_engine(tmp_path / "engine", monkeypatch.setenv):
        yield


@pytest.mark.long  # CI's budget (3 min: an engine restart); a client killed mid-batch, two clients and no state between runs stay
def test_the_engine_killed_mid_batch_is_restarted_and_the_next_run_completes(own_engine, lakehouse):
    land(lakehouse)
    run_job("dim_campaigns", lakehouse)
    run_job("bronze_ad_events", lakehouse)
    checkpoint = lakehouse.table("silver.ad_events").checkpoint()

    running = client(lakehouse, "silver_ad_events")
    wait_for(
        lambda: batch_running(checkpoint) or running.poll() is not None,
        "silver's first batch on the engine",
    )
    server = engine_tool.server_pid()
    assert server is not None, "no engine server process found"
    os.kill(server, signal.SIGKILL)
    output, _ = running.communicate(timeout=600)
    assert running.returncode != 0, (
        f"a client whose engine died must fail, not succeed:\n{output[-2000:]}"
    )
    # The supervisor starts a new server; the next run resumes from the checkpoint.
    wait_for(
        lambda: check_engine(engine_settings().url, timeout_s=5) is None,
        "the restarted engine",
        timeout_s=300,
    )
    assert engine_tool.server_pid() not in (None, server)
    run_job("silver_ad_events", lakehouse)
    for task in GOLD_TASKS:
        run_job(task, lakehouse)
    reader = build_spark_session("engine-restart-check", engine_kind="connect", outlives_jobs=True)
    try:
        assert_tables_match_oracle(reader, lakehouse)
    finally:
        reader.stop()


def test_a_second_client_on_a_running_query_fails_fast_and_the_first_completes(spark, lakehouse):
    land(lakehouse, hours=1)
    run_job("dim_campaigns", lakehouse)
    run_job("bronze_ad_events", lakehouse)
    checkpoint = lakehouse.table("silver.ad_events").checkpoint()

    first = client(lakehouse, "silver_ad_events")
    wait_for(
        lambda: batch_running(checkpoint) or first.poll() is not None,
        "silver's first batch on the engine",
    )
    started = time.monotonic()
    with pytest.raises(CheckpointBusy, match="another driver is already running on checkpoint"):
        run_job("silver_ad_events", lakehouse)
    assert time.monotonic() - started < 30, "the second client should fail at once, not wait"
    output, _ = first.communicate(timeout=600)
    assert first.returncode == 0, output[-3000:]
    for task in GOLD_TASKS:
        run_job(task, lakehouse)
    assert_tables_match_oracle(spark, lakehouse)


def test_nothing_passes_between_runs_through_the_shared_engine(spark, lakehouse):
    land(lakehouse, hours=1, events_per_second=0.2)
    run_job("dim_campaigns", lakehouse)
    assert table(spark, lakehouse, "dims.campaigns").count() == 1000
    # A session setting of one job (the Delta transaction id of a MERGE) is not seen by the next,
    # though within the job, asked again (its expectations' checks), the factory gives the same session.
    first = build_spark_session("silver_ad_events")
    first.conf.set("spark.databricks.delta.write.txnAppId", "leaked")
    first.createDataFrame([(1,)], "x int").createOrReplaceTempView("leaked_view")
    assert build_spark_session("silver_ad_events") is first
    release_engine_sessions()
    second = build_spark_session("silver_ad_events")
    try:
        assert second is not first
        assert second.conf.get("spark.databricks.delta.write.txnAppId", None) is None
        assert not second.catalog.tableExists("leaked_view")
    finally:
        release_engine_sessions()
    # A changed dimension file is loaded by the next run, never served from an engine-side cache.
    campaigns = Path(lakehouse.landing_campaigns)
    lines = campaigns.read_text().splitlines()
    campaigns.write_text("\n".join(lines[:501]) + "\n")
    assert run_job("dim_campaigns", lakehouse)["rows_written"] == 500
    assert table(spark, lakehouse, "dims.campaigns").count() == 500
    assert run_job("dim_campaigns", lakehouse)["not_started"], "an unchanged file is not reloaded"
