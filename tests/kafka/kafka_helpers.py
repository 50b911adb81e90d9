"""Kafka test helpers: produce generated hours, read records back, compare tables with the oracle."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from helpers import assert_tables_match_oracle
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse.config import Lakehouse
from lakehouse_tools.kafka_producer import hour_lines, produce_lines
from lakehouse_tools.oracle import Expected


def produce_generated_hours(
    bootstrap_servers: str,
    topic: str,
    start: datetime,
    hours: int,
    events_per_second: float,
    seed: int,
) -> tuple[list[str], list[tuple[int, int]]]:
    """Produce generated hours (the generator's lines); the lines and their (partition, offset)."""
    lines: list[str] = []
    positions: list[tuple[int, int]] = []
    for offset in range(hours):
        hour, _ = hour_lines(start + timedelta(hours=offset), events_per_second, seed)
        positions += produce_lines(bootstrap_servers, topic, hour)
        lines += hour
    return lines, positions


def kafka_args(bootstrap_servers: str, topic: str, *extra: str) -> tuple[str, ...]:
    """The bronze job's arguments for reading ``topic``."""
    return (
        "--source",
        "kafka",
        "--kafka-bootstrap-servers",
        bootstrap_servers,
        "--kafka-topic",
        topic,
        *extra,
    )


def bronze_positions(
    spark: SparkSession, lakehouse: Lakehouse, topic: str, version: int | None = None
) -> list[tuple[int, int]]:
    """(partition, offset) of every bronze row read from ``topic`` (at a table version, if given)."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    rows = (
        reader.load(lakehouse.table("bronze.ad_events").path)
        .filter(F.col("kafka_topic") == topic)
        .select("kafka_partition", "kafka_offset")
        .collect()
    )
    return [(row.kafka_partition, row.kafka_offset) for row in rows]


def consume_all(bootstrap_servers: str, topic: str, count: int, timeout_s: float = 60) -> list:
    """The first ``count`` records of ``topic`` (every partition, from the beginning)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"read-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            records.append(message)
    finally:
        consumer.close()
    return records


def delete_topic(bootstrap_servers: str, topic: str, timeout_s: float = 30) -> None:
    """Delete ``topic`` and wait until the broker no longer lists it (so it can be recreated)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.delete_topics([topic])[topic].result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, (
            f"topic {topic} still listed {timeout_s} s after its deletion"
        )
        time.sleep(0.2)


def assert_tables_match(spark: SparkSession, lakehouse: Lakehouse, expected: Expected) -> None:
    """Bronze, silver, quarantine and every gold table agree with an oracle computed from lines."""
    assert_tables_match_oracle(spark, lakehouse, expected)
