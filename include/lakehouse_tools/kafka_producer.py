"""The generator's Kafka producer: the same lines as the landing files, one record per line.

Usage:
    python -m lakehouse_tools.kafka_producer --start 2026-11-20T00:00Z --hours 3 --events-per-second 2 \
        --kafka-bootstrap-servers 127.0.0.1:9092 [--topic ysb-ad-events] [--topic-partitions 3]

Each producer hour comes from :func:`lakehouse_tools.generator.generate_hour`, so a topic holds exactly
the lines (disorder, duplicates, malformed ones included) that the files of that hour would hold,
in the same order. Keys are deterministic (the line's ``event_id``, or a hash of a line that has
none) and hashed like Java clients do (murmur2), so a line always lands in the same partition of
a topic with a given partition count, and a re-sent duplicate lands beside its original.

Delivery is checked: every record must be acknowledged by the broker (idempotent producer,
``acks=all``) within a timeout, or the call raises :class:`KafkaProduceError`. Producing an hour
again sends it again (as an at-least-once producer would): silver keeps one row per event_id.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lakehouse.config import Lakehouse
from lakehouse.kafka_settings import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_TOPIC,
    DEFAULT_TOPIC_PARTITIONS,
    validate_topic,
)
from lakehouse_tools.generator import (
    Disorder,
    HourManifest,
    data_arguments,
    generate_hour,
    parse_data_arguments,
    print_manifests,
    write_campaigns,
)

NO_DISORDER = (
    Disorder()
)  # the generator's default mess (Disorder is frozen: one shared value is safe)


class KafkaProduceError(RuntimeError):
    """Producing failed (no broker, records not acknowledged): records may be missing from the topic."""


# How long a record may wait for the broker's acknowledgement before it counts as failed.
DELIVERY_TIMEOUT_S = 30.0


def message_key(line: str) -> bytes:
    """The record key of a line: its ``event_id``, or a hash of the line when it has none."""
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    if isinstance(event, dict) and isinstance(event.get("event_id"), str) and event["event_id"]:
        return event["event_id"].encode()
    return hashlib.sha256(line.encode()).hexdigest()[:32].encode()


def hour_lines(
    hour_start: datetime,
    events_per_second: float,
    seed: int,
    disorder: Disorder = NO_DISORDER,
    files_per_hour: int = 4,
) -> tuple[list[str], HourManifest]:
    """The lines of one producer hour in arrival order (its files, concatenated) and its manifest."""
    files, manifest = generate_hour(hour_start, events_per_second, seed, disorder, files_per_hour)
    return [line for lines in files for line in lines], manifest


def _producer(bootstrap_servers: str, timeout_s: float) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            # acks=all, in-order, no duplicates from the client's own retries.
            "enable.idempotence": True,
            # The Java client's key hashing: any producer puts a key into the same partition.
            "partitioner": "murmur2_random",
            # A record not acknowledged within this fails with a delivery error (not a hang).
            "message.timeout.ms": int(timeout_s * 1000),
        }
    )


def _send(
    producer: Producer, bootstrap_servers: str, topic: str, lines: Sequence[str], timeout_s: float
) -> list[tuple[int, int]]:
    """Produce ``lines`` and wait for every delivery report; (partition, offset) of each line."""
    positions: list[tuple[int, int] | None] = [None] * len(lines)
    errors: list[str] = []

    def on_delivery(index: int):
        def report(error, message) -> None:
            if error is not None:
                errors.append(str(error))
            else:
                positions[index] = (message.partition(), message.offset())

        return report

    for index, line in enumerate(lines):
        while True:
            try:
                producer.produce(
                    topic,
                    value=line.encode(),
                    key=message_key(line),
                    on_delivery=on_delivery(index),
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.5)
        producer.poll(0)
    # Every record either is acknowledged or fails within message.timeout.ms; the margin only
    # covers the last delivery reports.
    undelivered = producer.flush(timeout_s + 5)
    missing = sum(position is None for position in positions)
    if errors or undelivered or missing:
        raise KafkaProduceError(
            f"{missing} of {len(lines)} record(s) to topic {topic!r} on {bootstrap_servers} were not "
            f"acknowledged within {timeout_s:.0f} s ({len(errors)} delivery error(s), e.g. "
            f"{errors[0] if errors else 'none reported'}; {undelivered} still queued). Check the broker "
            "and the bootstrap servers, then produce the hour again (silver keeps one row per event_id)."
        )
    return positions  # type: ignore[return-value]  # no None left: checked above


def produce_lines(
    bootstrap_servers: str, topic: str, lines: Sequence[str], timeout_s: float = DELIVERY_TIMEOUT_S
) -> list[tuple[int, int]]:
    """Produce one record per line to ``topic``; the (partition, offset) of each line, in order.

    Raises :class:`KafkaProduceError` when a record is not acknowledged within ``timeout_s``.
    """
    producer = _producer(bootstrap_servers, timeout_s)
    return _send(producer, bootstrap_servers, validate_topic(topic), lines, timeout_s)


def ensure_topic(
    bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = DEFAULT_TIMEOUT_S
) -> int:
    """Create ``topic`` with ``partitions`` partitions unless it exists; its partition count.

    Returns once every partition has a leader, so records produced next are not refused. An
    existing topic keeps its partition count (changing it would move keys to other partitions).
    """
    validate_topic(topic)
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    try:
        if topic not in admin.list_topics(timeout=timeout_s).topics:
            # replication_factor -1: the broker's default.replication.factor.
            future = admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=-1)]
            )[topic]
            try:
                future.result(timeout_s)
            except KafkaException as error:
                if "TOPIC_ALREADY_EXISTS" not in str(
                    error
                ):  # created meanwhile by another producer
                    raise
        deadline = time.monotonic() + timeout_s
        while True:  # partition leaders reach the metadata asynchronously after a create
            metadata = admin.list_topics(topic, timeout=timeout_s).topics[topic]
            if (
                metadata.error is None
                and metadata.partitions
                and all(p.leader >= 0 for p in metadata.partitions.values())
            ):
                return len(metadata.partitions)
            if time.monotonic() > deadline:
                raise KafkaProduceError(
                    f"Topic {topic!r} on {bootstrap_servers} has no partition leaders: {metadata}"
                )
            time.sleep(0.2)
    except KafkaException as error:
        raise KafkaProduceError(
            f"Kafka at {bootstrap_servers} did not answer within {timeout_s:.0f} s ({error}): "
            "is the broker up (make kafka-start) and the address right?"
        ) from error


def produce_hours(
    bootstrap_servers: str,
    topic: str,
    start: datetime,
    hours: int,
    events_per_second: float,
    seed: int,
    disorder: Disorder = NO_DISORDER,
    files_per_hour: int = 4,
    timeout_s: float = DELIVERY_TIMEOUT_S,
) -> list[HourManifest]:
    """Produce ``hours`` producer hours from ``start`` to ``topic``, hour by hour; their manifests.

    An hour is fully acknowledged before the next is generated, so a failure names the first
    hour that may be incomplete (the manifests of the hours before it are complete).
    """
    validate_topic(topic)
    producer = _producer(bootstrap_servers, timeout_s)
    manifests = []
    for offset in range(hours):
        hour_start = start + timedelta(hours=offset)
        lines, manifest = hour_lines(hour_start, events_per_second, seed, disorder, files_per_hour)
        try:
            _send(producer, bootstrap_servers, topic, lines, timeout_s)
        except KafkaProduceError as error:
            raise KafkaProduceError(f"Hour {manifest.hour}: {error}") from error
        manifests.append(manifest)
    return manifests


def main(argv: list[str] | None = None) -> None:
    """Produce generated hours to a topic; the campaign file still goes to the landing zone (dims read it)."""
    parser = data_arguments(__doc__.splitlines()[0])
    parser.add_argument("--kafka-bootstrap-servers", required=True)
    parser.add_argument("--topic", default=DEFAULT_TOPIC)
    parser.add_argument(
        "--topic-partitions",
        type=int,
        default=DEFAULT_TOPIC_PARTITIONS,
        help="of a topic it creates",
    )
    args, disorder = parse_data_arguments(parser, argv)
    if args.topic_partitions < 1:
        parser.error("--topic-partitions must be >= 1")
    write_campaigns(Lakehouse.from_env(args.lakehouse_root), args.seed)
    try:
        partitions = ensure_topic(args.kafka_bootstrap_servers, args.topic, args.topic_partitions)
        manifests = produce_hours(
            args.kafka_bootstrap_servers,
            args.topic,
            args.start,
            args.hours,
            args.events_per_second,
            args.seed,
            disorder,
            args.files_per_hour,
        )
    except KafkaProduceError as error:
        raise SystemExit(f"kafka_producer: {error}") from error
    print_manifests(manifests, "records")
    print(f"topic: {args.topic} ({partitions} partitions) on {args.kafka_bootstrap_servers}")


if __name__ == "__main__":
    main()
