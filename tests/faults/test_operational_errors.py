"""Operational faults (missing inputs, a damaged or foreign checkpoint) fail with a message that says what to do."""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import START, run_job, table, table_version
from pyspark.sql import functions as F

from lakehouse.errors import ConfigError
from lakehouse.runtime import run_available_now
from lakehouse.runtime.checkpoint_checks import identity_record
from lakehouse.sources import delta_stream
from lakehouse_tools.fault_harness.checkpoint_trials import follow_recovery
from lakehouse_tools.fault_harness.launch import TaskRunner
from lakehouse_tools.generator import write_campaigns, write_hours


def test_bronze_without_a_landing_directory_says_to_generate_data(lakehouse):
    with pytest.raises(ConfigError) as failure:
        run_job("bronze_ad_events", lakehouse)
    message = str(failure.value)
    assert f"Landing directory {lakehouse.landing_events} does not exist" in message
    assert "python -m lakehouse_tools.generator" in message and "LAKEHOUSE_ROOT" in message


def test_silver_before_the_dimension_was_loaded_names_the_missing_table(lakehouse):
    write_campaigns(lakehouse, seed=31)
    write_hours(lakehouse, START, 1, events_per_second=0.01, seed=31)
    run_job("bronze_ad_events", lakehouse)
    with pytest.raises(ConfigError) as failure:
        run_job("silver_ad_events", lakehouse)
    message = str(failure.value)
    assert (
        f"Table dims.campaigns does not exist at {lakehouse.table('dims.campaigns').path}"
        in message
    )
    assert "run its job first (jobs/run.py dim_campaigns, or the DAG task of that name)" in message


def bronze_lines(spark, lakehouse) -> Counter:
    rows = table(spark, lakehouse, "bronze.ad_events").select("source_file", "raw_line").collect()
    return Counter((row.source_file.rsplit("landing/events/", 1)[1], row.raw_line) for row in rows)


def landing_lines(lakehouse) -> Counter:
    landing = Path(lakehouse.landing_events)
    return Counter(
        (str(path.relative_to(landing)), line)
        for path in sorted(landing.rglob("*.jsonl"))
        for line in path.read_text().splitlines()
    )


def bronze_with_new_data_waiting(spark, lakehouse, seed: int) -> tuple[Path, int]:
    """One bronze run over an hour of landing files, then a second hour lands; (checkpoint, version)."""
    write_campaigns(lakehouse, seed=seed)
    write_hours(lakehouse, START, 1, events_per_second=0.02, seed=seed)
    run_job("bronze_ad_events", lakehouse)
    write_hours(lakehouse, START + timedelta(hours=1), 1, events_per_second=0.02, seed=seed)
    return Path(lakehouse.table("bronze.ad_events").checkpoint()), table_version(
        spark, lakehouse, "bronze.ad_events"
    )


def newest(folder: Path) -> Path:
    return max((p for p in folder.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def refused(spark, lakehouse, checkpoint: Path, version: int, found: str) -> str:
    """Bronze refuses to start on its damaged checkpoint, says what it found, and writes nothing."""
    with pytest.raises(ConfigError) as failure:
        run_job("bronze_ad_events", lakehouse)
    message = str(failure.value)
    assert message.startswith(f"bronze.ad_events: checkpoint {checkpoint} "), message
    assert found in message, message
    assert table_version(spark, lakehouse, "bronze.ad_events") == version, (
        "nothing may be written from a bad log"
    )
    return message


def follow(message: str, lakehouse) -> str:
    """Do exactly what the message says (the fault harness's reading of it), then rerun bronze."""
    done = follow_recovery(
        message, TaskRunner(lakehouse, Path(lakehouse.root) / "logs", in_process=True)
    )
    run_job("bronze_ad_events", lakehouse)
    return done


def test_a_corrupted_offsets_file_of_a_written_batch_is_refused_and_the_full_refresh_it_names_recovers(
    spark, lakehouse
):
    checkpoint, version = bronze_with_new_data_waiting(spark, lakehouse, seed=32)
    offsets = newest(checkpoint / "offsets")
    offsets.write_bytes(offsets.read_bytes()[:5])  # a torn write: "v1\n{" and a bit

    damaged = f"does not agree with its tables: damaged (truncated or not Spark's format): offsets/{offsets.name}."
    message = refused(spark, lakehouse, checkpoint, version, damaged)
    # The batch is in the table: planning it again would have Delta skip it; only a rebuild is safe.
    assert (
        "Recovery: a full refresh of bronze" in message
        and "jobs/full_refresh.py --layer bronze" in message
    )

    assert follow(message, lakehouse) == "full refresh of bronze"
    assert bronze_lines(spark, lakehouse) == landing_lines(lakehouse), (
        "every landing line exactly once"
    )


def test_a_lost_checkpoint_folder_and_its_record_are_recovered_by_the_full_refresh_it_names(
    spark, lakehouse
):
    """The whole checkpoint folder gone, the record of its query beside it too: bronze holds the
    batches of a query no checkpoint is recorded for. The full refresh it names rebuilds bronze
    once (it used to refuse again at every new generation: Delta keeps the old query's
    transaction in the table's log)."""
    checkpoint, version = bronze_with_new_data_waiting(spark, lakehouse, seed=36)
    shutil.rmtree(checkpoint)
    identity_record(str(checkpoint)).unlink()

    unknown = "written by a streaming query that no checkpoint of the table is recorded for"
    message = refused(spark, lakehouse, checkpoint, version, unknown)
    assert follow(message, lakehouse) == "full refresh of bronze"
    assert bronze_lines(spark, lakehouse) == landing_lines(lakehouse), (
        "every landing line exactly once"
    )


def test_a_corrupted_commit_file_is_recovered_by_deleting_it_alone(spark, lakehouse):
    """The batch's offsets are intact: Spark runs that very batch again and the sink skips it."""
    checkpoint, version = bronze_with_new_data_waiting(spark, lakehouse, seed=34)
    commit = newest(checkpoint / "commits")
    commit.write_bytes(commit.read_bytes()[:5])

    damaged = f"does not agree with its tables: damaged (truncated or not Spark's format): commits/{commit.name}."
    message = refused(spark, lakehouse, checkpoint, version, damaged)
    crc = commit.with_name(f".{commit.name}.crc")
    assert (
        f"Recovery: delete {commit} and {crc} (nothing else), then rerun bronze_ad_events"
        in message
    )

    assert follow(message, lakehouse) == f"deleted {commit}, {crc}"
    assert bronze_lines(spark, lakehouse) == landing_lines(lakehouse), (
        "every landing line exactly once"
    )


def test_deleting_the_newest_offsets_and_commit_files_by_hand_is_refused_instead_of_losing_input(
    spark, lakehouse
):
    """Once the newest batch's files are deleted, Spark would plan that batch id again with all the
    input available now; the Delta sink holds the id already and would skip the whole batch, new
    lines included (as it did before this check). The job refuses, and the full refresh it names
    brings every line in exactly once."""
    checkpoint, version = bronze_with_new_data_waiting(spark, lakehouse, seed=35)
    offsets = newest(checkpoint / "offsets")
    for log_file in (offsets, checkpoint / "commits" / offsets.name):
        log_file.unlink()
        log_file.with_name(f".{log_file.name}.crc").unlink(missing_ok=True)

    # (One batch so far: the checkpoint holds none now; with more, it would be older than the table.)
    held = f"bronze.ad_events holds batch {offsets.name} (Delta transaction "
    message = refused(spark, lakehouse, checkpoint, version, held)

    assert follow(message, lakehouse) == "full refresh of bronze"
    assert bronze_lines(spark, lakehouse) == landing_lines(lakehouse), (
        "every landing line exactly once"
    )


def test_a_checkpoint_of_another_query_says_to_do_a_full_refresh(spark, lakehouse):
    write_campaigns(lakehouse, seed=33)
    write_hours(lakehouse, START, 1, events_per_second=0.02, seed=33)
    for job in ("dim_campaigns", "bronze_ad_events", "silver_ad_events"):
        run_job(job, lakehouse)
    write_hours(lakehouse, START + timedelta(hours=1), 1, events_per_second=0.02, seed=33)
    run_job(
        "bronze_ad_events", lakehouse
    )  # new bronze rows, so the next silver run has a batch to plan

    # A changed silver job: a stateful query (a streaming aggregation) on silver's stateless checkpoint.
    bronze, silver = lakehouse.table("bronze.ad_events"), lakehouse.table("silver.ad_events")
    counts = (
        delta_stream(spark, bronze).groupBy("ingest_date").agg(F.count(F.lit(1)).alias("lines"))
    )
    writer = counts.writeStream.outputMode("update").foreachBatch(lambda batch, batch_id: None)
    with pytest.raises(ConfigError) as failure:
        run_available_now(writer, silver.checkpoint(), "silver.ad_events")
    message = str(failure.value)
    assert (
        f"silver.ad_events: the query no longer matches its checkpoint {silver.checkpoint()}"
        in message
    ), message
    assert "full_refresh=silver" in message and "jobs/full_refresh.py --layer silver" in message
    # Spark's own reason is kept in the message.
    assert "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY" in message, message
