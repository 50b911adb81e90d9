"""Smoke test of the private Kafka broker fixture and of Spark's Kafka source against it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

if TYPE_CHECKING:  # the fixture itself comes from tests/kafka/conftest.py
    from kafka_broker import KafkaBroker

TOPIC = "smoke-events"
PARTITIONS = 2
N = 100

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def produced(kafka_broker: KafkaBroker) -> dict[str, tuple[str, int, int]]:
    """A 2-partition topic holding N keyed messages: value -> (key, partition, offset)."""
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[
        TOPIC
    ].result(30)
    deadline = time.monotonic() + 30
    while True:  # the topic's partition leaders reach the metadata cache asynchronously
        topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
        if (
            topic.error is None
            and len(topic.partitions) == PARTITIONS
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            break
        assert time.monotonic() < deadline, f"topic {TOPIC} has no leaders: {topic}"
        time.sleep(0.2)

    producer = Producer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "enable.idempotence": True}
    )
    delivered: dict[str, tuple[str, int, int]] = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.value().decode()] = (msg.key().decode(), msg.partition(), msg.offset())

    for i in range(N):
        producer.produce(TOPIC, key=f"key-{i:03d}", value=f"value-{i:03d}", on_delivery=on_delivery)
    assert producer.flush(30) == 0, "messages left undelivered"
    assert not errors, errors
    assert len(delivered) == N
    # 100 distinct keys spread over both partitions.
    assert {p for _, p, _ in delivered.values()} == set(range(PARTITIONS))
    return delivered


def test_consume_back_all_messages(kafka_broker: KafkaBroker, produced) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": f"smoke-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: dict[str, tuple[str, int, int]] = {}
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got[msg.value().decode()] = (msg.key().decode(), msg.partition(), msg.offset())
    finally:
        consumer.close()
    assert set(got) == {f"value-{i:03d}" for i in range(N)}
    assert got == produced


def _kafka_options(broker: KafkaBroker) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        "subscribe": TOPIC,
        "startingOffsets": "earliest",
    }


_COLUMNS = ("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")


def _as_dict(rows) -> dict[str, tuple[str, int, int]]:
    out = {r.value: (r.key, r.partition, r.offset) for r in rows}
    assert len(out) == len(rows), "duplicate values"
    return out


def test_spark_available_now_reads_all_messages(
    kafka_broker: KafkaBroker, produced, spark, tmp_path: Path
) -> None:
    name = "kafka_smoke_stream"
    query = (
        spark.readStream.format("kafka")
        .options(**_kafka_options(kafka_broker))
        .load()
        .selectExpr(*_COLUMNS)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "availableNow query did not finish"
        assert query.exception() is None
        rows = spark.sql(f"SELECT * FROM {name}").collect()
    finally:
        query.stop()
    got = _as_dict(rows)
    assert set(got) == {f"value-{i:03d}" for i in range(N)}
    assert got == produced  # same keys, partitions and offsets as the producer's delivery reports


def test_spark_batch_read(kafka_broker: KafkaBroker, produced, spark) -> None:
    rows = (
        spark.read.format("kafka")
        .options(**_kafka_options(kafka_broker))
        .load()
        .selectExpr(*_COLUMNS)
        .collect()
    )
    assert _as_dict(rows) == produced
