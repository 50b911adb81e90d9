"""Kafka tests: one private broker for the whole session (tests/kafka_broker.py) and its topics."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kafka_broker import KafkaBroker, kafka_broker  # noqa: F401  (the session fixture)

from lakehouse.config import jar_paths


@pytest.fixture(scope="session", autouse=True)
def kafka_source_jars() -> None:
    """Fail with the command to run, not with Spark's "Failed to find data source: kafka"."""
    if not any(Path(jar).name.startswith("spark-sql-kafka-0-10_") for jar in jar_paths()):
        pytest.fail("No Spark Kafka source jar in .jars: run `make kafka-source-jars`.")


@pytest.fixture
def new_topic(kafka_broker: KafkaBroker):  # noqa: F811 (the fixture imported above)
    """Create a topic with a fresh name: ``new_topic(partitions) -> name`` (unique per test)."""
    from lakehouse_tools.kafka_producer import ensure_topic

    def create(partitions: int) -> str:
        name = f"t-{uuid.uuid4().hex[:12]}"
        ensure_topic(kafka_broker.bootstrap_servers, name, partitions)
        return name

    return create
