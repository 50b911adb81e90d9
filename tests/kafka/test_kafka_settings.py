"""Kafka settings and the DAG wiring helpers (pure), and how Kafka query failures are recognised."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lakehouse.config import Lakehouse
from lakehouse.errors import ConfigError
from lakehouse.kafka_settings import kafka_checkpoint, resolve_bootstrap_servers, validate_topic
from lakehouse.sources import kafka_source_changed, kafka_unavailable
from lakehouse_airflow.macros import bootstrap_servers_arg, bootstrap_servers_from_connection
from lakehouse_airflow.preflight import source_problems


class Connections:
    """Airflow's ``conn`` template variable, holding at most one connection."""

    def __init__(self, connection=None):
        self.connection, self.asked = connection, []

    def get(self, conn_id, default_conn=None):
        self.asked.append(conn_id)
        return self.connection or default_conn


def kafka_connection(host, port=None, extra=None):
    return SimpleNamespace(host=host, port=port, extra_dejson=extra or {})


def test_bootstrap_servers_come_from_the_argument_then_the_environment():
    assert resolve_bootstrap_servers("b:9092", {"KAFKA_BOOTSTRAP_SERVERS": "e:9092"}) == "b:9092"
    assert resolve_bootstrap_servers("", {"KAFKA_BOOTSTRAP_SERVERS": "e:9092"}) == "e:9092"
    with pytest.raises(
        ConfigError, match="--kafka-bootstrap-servers.*KAFKA_BOOTSTRAP_SERVERS.*kafka_lakehouse"
    ):
        resolve_bootstrap_servers(None, {})


@pytest.mark.parametrize(
    ("host", "port", "extra", "servers"),
    [
        ("127.0.0.1", 9092, None, "127.0.0.1:9092"),
        ("k1:9092,k2:9092", None, None, "k1:9092,k2:9092"),
        ("ignored", 1, {"bootstrap.servers": "k1:9092,k2:9092"}, "k1:9092,k2:9092"),
    ],
)
def test_bootstrap_servers_from_an_airflow_connection(host, port, extra, servers):
    assert bootstrap_servers_from_connection(host, port, extra) == servers


def test_the_bronze_task_looks_up_the_connection_only_for_the_kafka_source():
    unused = Connections()
    assert bootstrap_servers_arg({"source": "files"}, unused) == "" and unused.asked == []
    assert (
        bootstrap_servers_arg({"source": "kafka"}, Connections()) == ""
    )  # the job falls back to the env
    assert (
        bootstrap_servers_arg({"source": "kafka"}, Connections(kafka_connection("k", 9092)))
        == "k:9092"
    )
    with pytest.raises(ConfigError, match="no host"):
        bootstrap_servers_arg({"source": "kafka"}, Connections(kafka_connection("")))


def test_source_problems_for_the_preflight():
    with_connection = Connections(kafka_connection("k", 9092))
    assert source_problems({"source": "files"}, Connections(), {}) == []
    assert source_problems({"source": "kafka", "kafka_topic": "ysb"}, with_connection, {}) == []
    assert (
        source_problems({"source": "kafka"}, Connections(), {"KAFKA_BOOTSTRAP_SERVERS": "e:9092"})
        == []
    )
    assert "Unknown source" in source_problems({"source": "s3"}, Connections())[0]
    problems = source_problems({"source": "kafka", "kafka_topic": "a/b"}, Connections(), {})
    assert [p.split(":")[0] for p in problems] == [
        "Invalid Kafka topic 'a/b'",
        "No Kafka bootstrap servers",
    ]
    assert (
        "no host" in source_problems({"source": "kafka"}, Connections(kafka_connection("")), {})[0]
    )


def test_topics_are_checked_and_each_has_its_own_checkpoint(tmp_path):
    assert validate_topic("ysb-ad-events.v1_2") == "ysb-ad-events.v1_2"
    for bad in ("", "..", "a/b", "a b", "x" * 250):
        with pytest.raises(ConfigError, match="Invalid Kafka topic"):
            validate_topic(bad)
    bronze = Lakehouse(str(tmp_path)).table("bronze.ad_events")
    assert kafka_checkpoint(bronze, "ysb", 2) == f"{bronze.checkpoint_root}/kafka/ysb/gen=2"
    assert kafka_checkpoint(bronze, "ysb", 0) != bronze.checkpoint(0)


class CapturedError(Exception):
    """Like PySpark's captured JVM errors: the causes are only in ``_stackTrace``."""

    def __init__(self, message, stack_trace=""):
        super().__init__(message)
        self._stackTrace = stack_trace


def test_kafka_query_failures_are_recognised():
    lost = CapturedError(
        "[STREAM_FAILED] Query terminated with exception: [TASK_WRITE_FAILED] Task failed while writing rows",
        "Caused by: org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because "
        "they are not available in Kafka any more;\nReason: Could not read records in offset [20, 40) for topic "
        "partition t-0\nwith consumer group spark-kafka-source",
    )
    assert (
        kafka_source_changed(lost)
        == "Could not read records in offset [20, 40) for topic partition t-0"
    )
    deleted = CapturedError(
        "terminated: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: gone"
    )
    assert kafka_source_changed(deleted).startswith("terminated: ")
    timeout = CapturedError(
        "x", "Caused by: org.apache.kafka.common.errors.TimeoutException: Timed out waiting"
    )
    assert kafka_source_changed(timeout) is None and kafka_unavailable(timeout)
    assert kafka_source_changed(ValueError("boom")) is None and not kafka_unavailable(
        ValueError("boom")
    )
