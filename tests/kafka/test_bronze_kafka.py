"""bronze.ad_events from a real Kafka topic: every record once, even across a killed driver; nothing
twice; only what is new; and a broken source fails with an error that says what to do."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from helpers import PIPELINE, START, run_job, table, table_version
from kafka_helpers import (
    assert_tables_match,
    bronze_positions,
    delete_topic,
    kafka_args,
    produce_generated_hours,
)
from pyspark.sql import functions as F

from lakehouse.config import jar_paths
from lakehouse.errors import ConfigError
from lakehouse.kafka_settings import kafka_checkpoint
from lakehouse.sources import KafkaUnavailableError
from lakehouse_tools.generator import write_campaigns, write_hours
from lakehouse_tools.kafka_producer import ensure_topic, produce_lines
from lakehouse_tools.oracle import expected_from_lines

PROJECT_DIR = Path(__file__).resolve().parents[2]
EVENTS_PER_SECOND = 0.1  # 360 lines an hour

pytestmark = pytest.mark.timeout(
    900
)  # only a guard against hangs: a shared 2-core machine can be slow


def test_bronze_from_kafka_survives_a_killed_driver_then_reads_only_new_records(
    spark, lakehouse, kafka_broker, new_topic, tmp_path
):
    servers, topic = kafka_broker.bootstrap_servers, new_topic(2)
    write_campaigns(lakehouse, seed=21)
    # The first producer hour arrives as files, the next ones through Kafka: one bronze table for both.
    write_hours(lakehouse, START, 1, EVENTS_PER_SECOND, seed=21)
    files = sorted(Path(lakehouse.landing_events).rglob("*.jsonl"))
    file_lines = [line for path in files for line in path.read_text().splitlines()]
    run_job("dim_campaigns", lakehouse)
    run_job("bronze_ad_events", lakehouse)
    lines, positions = produce_generated_hours(
        servers, topic, START + timedelta(hours=1), 2, EVENTS_PER_SECOND, seed=21
    )
    assert {partition for partition, _ in positions} == {0, 1}

    # A driver SIGKILLed after its first micro-batch commit (small batches: it is still running).
    _kill_after_first_commit(
        lakehouse, kafka_args(servers, topic, "--max-offsets-per-trigger", "60"), tmp_path
    )
    killed_at = len(bronze_positions(spark, lakehouse, topic))
    assert 0 < killed_at < len(lines), (
        f"killed after {killed_at} of {len(lines)} records: not mid-run"
    )

    # The rerun resumes from the checkpoint: every record once, none twice, no gap.
    run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    assert Counter(bronze_positions(spark, lakehouse, topic)) == Counter(positions)
    bronze = table(spark, lakehouse, "bronze.ad_events")
    from_kafka = bronze.filter(F.col("kafka_topic") == topic).collect()
    assert Counter(row.raw_line for row in from_kafka) == Counter(lines)
    assert all(
        row.source_file == f"kafka://{topic}/{row.kafka_partition}/{row.kafka_offset}"
        for row in from_kafka
    )
    assert all(row.kafka_timestamp is not None for row in from_kafka)
    from_files = bronze.filter(F.col("kafka_topic").isNull()).collect()
    assert Counter(row.raw_line for row in from_files) == Counter(file_lines)
    assert all(
        row.source_file.startswith("file:") and row.kafka_offset is None for row in from_files
    )

    version = table_version(spark, lakehouse, "bronze.ad_events")
    run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    assert table_version(spark, lakehouse, "bronze.ad_events") == version, (
        "a rerun with nothing new wrote a commit"
    )

    new_lines, new_positions = produce_generated_hours(
        servers, topic, START + timedelta(hours=3), 1, EVENTS_PER_SECOND, seed=21
    )
    run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    added = Counter(bronze_positions(spark, lakehouse, topic)) - Counter(
        bronze_positions(spark, lakehouse, topic, version)
    )
    assert added == Counter(new_positions)

    for job in PIPELINE[PIPELINE.index("silver_ad_events") :]:
        run_job(job, lakehouse)
    expected = expected_from_lines(file_lines + lines + new_lines, lakehouse.landing_campaigns)
    assert expected.duplicates > 0 and expected.quarantined, (
        "the sample must exercise duplicates and bad lines"
    )
    assert_tables_match(spark, lakehouse, expected)


def test_broker_down_fails_fast_naming_the_servers(lakehouse):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        servers = f"127.0.0.1:{s.getsockname()[1]}"
    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError, match=rf"{servers} did not answer.*will retry"):
        run_job("bronze_ad_events", lakehouse, *kafka_args(servers, "ysb-ad-events"))
    assert time.monotonic() - started < 30


def test_missing_topic_is_named(lakehouse, kafka_broker):
    with pytest.raises(ConfigError, match="topic 'no-such-topic' does not exist"):
        run_job(
            "bronze_ad_events",
            lakehouse,
            *kafka_args(kafka_broker.bootstrap_servers, "no-such-topic"),
        )


def test_topic_recreated_under_a_checkpoint_fails_with_the_full_refresh_remedy(
    spark, lakehouse, kafka_broker, new_topic
):
    servers, topic = kafka_broker.bootstrap_servers, new_topic(2)
    produce_lines(servers, topic, [f'{{"n": {i}}}' for i in range(20)])
    run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))

    delete_topic(servers, topic)
    ensure_topic(servers, topic, partitions=1)
    recreated = produce_lines(servers, topic, [f'{{"m": {i}}}' for i in range(5)])
    version = table_version(spark, lakehouse, "bronze.ad_events")
    checkpoint = kafka_checkpoint(lakehouse.table("bronze.ad_events"), topic, 0)
    with pytest.raises(ConfigError) as failure:
        run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    message = str(failure.value)
    for needed in (
        "bronze.ad_events",
        checkpoint,
        "have been deleted",
        "full_refresh.py --layer bronze",
        "generation 1",
    ):
        assert needed in message, message
    assert table_version(spark, lakehouse, "bronze.ad_events") == version

    # The remedy works: after a full refresh, bronze holds the recreated topic, read from its start.
    run_job("full_refresh", lakehouse, "--layer", "bronze")
    run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    assert Counter(bronze_positions(spark, lakehouse, topic)) == Counter(recreated)


def test_records_gone_before_bronze_read_them_fail_the_run(
    spark, lakehouse, kafka_broker, new_topic
):
    """failOnDataLoss=true: records deleted (as retention would) under a checkpoint stop the job."""
    servers, topic = kafka_broker.bootstrap_servers, new_topic(1)
    produce_lines(servers, topic, [f'{{"n": {i}}}' for i in range(20)])
    run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    produce_lines(servers, topic, [f'{{"n": {i}}}' for i in range(20, 40)])
    admin = AdminClient(
        {"bootstrap.servers": servers}
    )  # kept referenced until its futures are done
    for future in admin.delete_records([TopicPartition(topic, 0, 30)]).values():
        future.result(30)

    version = table_version(spark, lakehouse, "bronze.ad_events")
    with pytest.raises(ConfigError) as failure:
        run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    message = str(failure.value)
    for needed in (
        "Could not read records in offset [20, 40)",
        "failOnDataLoss=true",
        "generation 1",
    ):
        assert needed in message, message
    assert table_version(spark, lakehouse, "bronze.ad_events") == version, (
        "a partial batch was written"
    )

    run_job("full_refresh", lakehouse, "--layer", "bronze")
    run_job("bronze_ad_events", lakehouse, *kafka_args(servers, topic))
    # From the earliest offset retained.
    assert Counter(bronze_positions(spark, lakehouse, topic)) == Counter(
        (0, offset) for offset in range(30, 40)
    )


def _kill_after_first_commit(lakehouse, args: tuple[str, ...], tmp_path: Path) -> None:
    """Run the bronze job with spark-submit; SIGKILL its driver once it has committed a batch to bronze."""
    delta_log = Path(lakehouse.table("bronze.ad_events").path) / "_delta_log"
    commits_before = set(delta_log.glob("*.json"))
    log = tmp_path / "spark-submit.log"
    driver = _spark_submit_bronze(lakehouse.root, args, log)
    try:
        deadline = time.monotonic() + 180
        while driver.poll() is None and time.monotonic() < deadline:
            if set(delta_log.glob("*.json")) - commits_before:
                break
            time.sleep(0.1)
    finally:
        os.killpg(
            driver.pid, signal.SIGKILL
        )  # the driver leads its own process group (JVM + Python)
        driver.wait(30)
    assert driver.returncode == -signal.SIGKILL, (
        f"the driver ended on its own before the kill:\n{_tail(log)}"
    )


def _spark_submit_bronze(lakehouse_root: str, args: tuple[str, ...], log: Path) -> subprocess.Popen:
    """``spark-submit jobs/run.py bronze_ad_events`` in its own process group, output to ``log``."""
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_DIR / "include"),
        "LAKEHOUSE_ROOT": lakehouse_root,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master",
        "local[2]",
        "--jars",
        ",".join(jar_paths()),
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        str(PROJECT_DIR / "jobs" / "run.py"),
        "bronze_ad_events",
        *args,
    ]
    with open(log, "wb") as out:
        return subprocess.Popen(
            command,
            env=env,
            cwd=PROJECT_DIR,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _tail(path: Path, lines: int = 40) -> str:
    return (
        "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        if path.exists()
        else "(no log)"
    )
