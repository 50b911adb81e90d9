"""The generator's Kafka output: the lines of the files, deterministic keys and partitions, checked delivery."""

from __future__ import annotations

import socket
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import START
from kafka_helpers import consume_all

from lakehouse.config import Lakehouse
from lakehouse_tools import generator, kafka_producer
from lakehouse_tools.kafka_producer import KafkaProduceError, hour_lines, message_key, produce_lines

pytestmark = pytest.mark.timeout(120)


def test_generator_produces_the_lines_of_the_files(tmp_path, kafka_broker, new_topic):
    servers, topic = kafka_broker.bootstrap_servers, "generated-events"
    common = [
        "--start",
        "2026-11-20T00:00Z",
        "--hours",
        "2",
        "--events-per-second",
        "0.05",
        "--seed",
        "4",
    ]
    as_files, to_kafka = Lakehouse(str(tmp_path / "files")), Lakehouse(str(tmp_path / "kafka"))
    generator.main(["--lakehouse-root", as_files.root, *common])
    kafka_options = [
        "--kafka-bootstrap-servers",
        servers,
        "--topic",
        topic,
        "--topic-partitions",
        "3",
    ]
    kafka_producer.main(["--lakehouse-root", to_kafka.root, *common, *kafka_options])

    files = sorted(Path(as_files.landing_events).rglob("*.jsonl"))
    file_lines = [line for path in files for line in path.read_text().splitlines()]
    records = consume_all(servers, topic, len(file_lines))
    assert Counter(r.value().decode() for r in records) == Counter(file_lines)
    assert not Path(to_kafka.landing_events).exists(), "events went to Kafka, not to files"
    assert (
        Path(to_kafka.landing_campaigns).read_bytes()
        == Path(as_files.landing_campaigns).read_bytes()
    )

    # Keys are the event ids (a hash for a line without one); a key, duplicates included, has one partition.
    assert all(r.key() == message_key(r.value().decode()) for r in records)
    partitions_of_key: dict[bytes, set[int]] = {}
    for r in records:
        partitions_of_key.setdefault(r.key(), set()).add(r.partition())
    assert all(len(partitions) == 1 for partitions in partitions_of_key.values())
    assert {r.partition() for r in records} == {0, 1, 2}
    # Within a partition, records keep the files' (arrival) order.
    for partition in range(3):
        in_topic = [
            r.value().decode()
            for r in sorted(records, key=lambda r: r.offset())
            if r.partition() == partition
        ]
        assert in_topic == [
            line for line in file_lines if partitions_of_key[message_key(line)] == {partition}
        ]

    # Stable partitioning: the same lines into another topic of 3 partitions land in the same partitions.
    lines, _ = hour_lines(START, 0.05, seed=4)
    again = produce_lines(servers, new_topic(3), lines)
    assert [partition for partition, _ in again] == [
        next(iter(partitions_of_key[message_key(line)])) for line in lines
    ]


def test_unacknowledged_records_are_an_error():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        servers = f"127.0.0.1:{s.getsockname()[1]}"
    started = time.monotonic()
    with pytest.raises(
        KafkaProduceError,
        match=rf"2 of 2 record\(s\) to topic 'events' on {servers} were not acknowledged",
    ):
        produce_lines(servers, "events", ["a", "b"], timeout_s=2)
    assert time.monotonic() - started < 15


def test_message_keys_are_event_ids_or_a_hash_of_the_line():
    assert message_key('{"event_id": "e-1", "ad_id": "a"}') == b"e-1"
    assert (
        message_key("this is not json")
        == message_key("this is not json")
        != message_key("neither is this")
    )
    assert len(message_key('{"ad_id": "a"}')) == 32
