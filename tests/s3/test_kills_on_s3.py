"""Drivers killed while their write to S3 is in flight: the retry loses and doubles nothing.

The server holds the write (include/s3/server.py, ``Faults``) until the test has killed its driver
(a spark-submit of the job, as the DAG runs it), then drops it unapplied: S3 never shows an upload
whose client died. Two writes matter most: a streaming query's offsets entry (its write-ahead log)
and a table's Delta commit (put-if-absent of the next ``_delta_log`` version).
"""

from __future__ import annotations

import re
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import START, assert_tables_match_oracle, run_pipeline, s3_faults, s3_requests

from lakehouse import files
from lakehouse_tools.fault_harness.launch import kill_group, log_tail, start_job
from lakehouse_tools.generator import write_campaigns, write_hours

SEED = 31
EVENTS_PER_SECOND = 0.05
LEASE_S = 6  # a killed driver's lease outlives it this long (the default, 45 s, is for production)
HELD_WITHIN_S = 600


def newest(folder, pattern: str) -> int:
    """The highest number among ``folder``'s entries matching ``pattern`` (-1: none)."""
    found = [int(m.group(1)) for p in folder.iterdir() if (m := re.fullmatch(pattern, p.name))]
    return max(found, default=-1)


def kill_while_writing(job: str, key: str, settings: dict, lakehouse, log: Path) -> None:
    """Run ``job`` by spark-submit until the server holds its write of ``key``; SIGKILL it there;
    drop the write."""
    s3_faults(settings, hold=re.escape(key) + "$")
    driver = start_job(job, lakehouse, log)
    deadline = time.monotonic() + HELD_WITHIN_S
    try:
        while not s3_faults(settings)["held"]:
            assert driver.poll() is None, f"{job} ended before writing {key}:\n{log_tail(str(log))}"
            assert time.monotonic() < deadline, f"{job} never wrote {key}:\n{log_tail(str(log))}"
            time.sleep(0.1)
        kill_group(driver)
        assert driver.wait(timeout=60) == -signal.SIGKILL
    finally:
        kill_group(driver)
        s3_faults(settings, "/drop")


def retry(job: str, lakehouse, log: Path) -> None:
    """The job's retry, once the killed driver's lease has expired (as Airflow's retry delay waits)."""
    time.sleep(LEASE_S + 1)
    driver = start_job(job, lakehouse, log)
    assert driver.wait(timeout=900) == 0, log_tail(str(log), 60)


# long: about 7 minutes of a CI worker (its own engine, four spark-submit drivers, two lease
# expiries); `make test-long` runs it. In make test, tests/faults kills drivers on local disk and
# tests/s3 runs the pipeline, a rollback and the lease takeover on S3.
@pytest.mark.long
def test_kills_during_an_offsets_write_and_a_delta_commit_lose_and_double_nothing(
    s3_lakehouse, s3_reader, s3_engine, monkeypatch, tmp_path
):
    monkeypatch.setenv("LAKEHOUSE_LEASE_EXPIRES_S", str(LEASE_S))
    lakehouse = s3_lakehouse
    write_campaigns(lakehouse, SEED)  # the hours hold duplicates and bad lines
    write_hours(lakehouse, START, 1, EVENTS_PER_SECOND, SEED)
    run_pipeline(lakehouse)
    write_hours(lakehouse, START + timedelta(hours=1), 1, EVENTS_PER_SECOND, SEED)
    before = s3_requests(s3_engine)

    # Bronze dies while its next offsets entry (the batch's write-ahead record) is uploading.
    bronze = files.lake_path(lakehouse.table("bronze.ad_events").checkpoint())
    batch = newest(bronze / "offsets", r"(\d+)") + 1
    kill_while_writing(
        "bronze_ad_events", f"offsets/{batch}", s3_engine, lakehouse, tmp_path / "bronze.log"
    )
    assert not (bronze / "offsets" / str(batch)).exists()
    retry("bronze_ad_events", lakehouse, tmp_path / "bronze.log")
    assert (bronze / "commits" / str(batch)).exists()

    # Silver dies while its Delta commit (put-if-absent of the next log version) is uploading.
    silver_log = files.lake_path(lakehouse.table("silver.ad_events").path) / "_delta_log"
    version = newest(silver_log, r"(\d{20})\.json") + 1
    kill_while_writing(
        "silver_ad_events",
        f"_delta_log/{version:020d}.json",
        s3_engine,
        lakehouse,
        tmp_path / "silver.log",
    )
    assert newest(silver_log, r"(\d{20})\.json") == version - 1  # the commit never happened
    retry("silver_ad_events", lakehouse, tmp_path / "silver.log")
    assert newest(silver_log, r"(\d{20})\.json") >= version

    # The rest of the run, then every table equals the oracle: nothing lost, nothing twice.
    run_pipeline(lakehouse)
    assert_tables_match_oracle(s3_reader, lakehouse)
    after = s3_requests(s3_engine)
    assert after.get("dropped", 0) - before.get("dropped", 0) == 2
