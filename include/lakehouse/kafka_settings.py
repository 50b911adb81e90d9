"""Kafka settings of the lakehouse: defaults, validators and where the brokers are.

Pure helpers (no pyspark, no Kafka client): the generator and the bronze job use the defaults and
validators (the DAG's macros are in ``lakehouse_airflow.macros``). Where the broker is, in order: the job's
``--kafka-bootstrap-servers``, the Airflow connection ``kafka_lakehouse`` (which the DAG renders
into that argument), then ``$KAFKA_BOOTSTRAP_SERVERS`` (exported by include/make/kafka.mk).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from lakehouse.config import Table
from lakehouse.errors import ConfigError

SOURCES = ("files", "kafka")
DEFAULT_TOPIC = "ysb-ad-events"
DEFAULT_TOPIC_PARTITIONS = 3
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 100_000
# How long a Kafka call may take before the job (or the generator) gives up: short, because a
# down broker should fail the task quickly and let Airflow retry it, not hang for minutes.
DEFAULT_TIMEOUT_S = 10.0
KAFKA_CONN_ID = "kafka_lakehouse"
BOOTSTRAP_SERVERS_ENV = "KAFKA_BOOTSTRAP_SERVERS"

# Kafka's own rule for topic names; it also keeps a topic safe to use in a checkpoint path.
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


def validate_topic(topic: str) -> str:
    """``topic`` if it is a legal Kafka topic name, else a ConfigError saying what is legal."""
    if not topic or not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
        raise ConfigError(
            f"Invalid Kafka topic {topic!r}: use 1-249 characters among letters, digits, '.', '_' and '-'."
        )
    return topic


def resolve_bootstrap_servers(given: str | None, env: Mapping[str, str] = os.environ) -> str:
    """The bootstrap servers to use: ``given`` (an argument), else ``$KAFKA_BOOTSTRAP_SERVERS``."""
    servers = (given or "").strip() or env.get(BOOTSTRAP_SERVERS_ENV, "").strip()
    if not servers:
        raise ConfigError(
            "No Kafka bootstrap servers: pass --kafka-bootstrap-servers HOST:PORT[,HOST:PORT...], set "
            f"{BOOTSTRAP_SERVERS_ENV}, or (in Airflow) define the connection {KAFKA_CONN_ID!r}."
        )
    return servers


def kafka_checkpoint_root(table: Table, topic: str) -> str:
    """Where the Kafka query writing ``table`` from ``topic`` keeps its checkpoint generations.

    Beside the file source's (``<root>/gen=N``), never inside it, and one per topic: a checkpoint
    holds per-partition offsets of one topic, so switching source or topic must never reuse one.
    """
    return f"{table.checkpoint_root}/kafka/{validate_topic(topic)}"


def kafka_checkpoint(table: Table, topic: str, generation: int) -> str:
    """The Kafka query's checkpoint folder of one generation (a full refresh starts a new one)."""
    return f"{kafka_checkpoint_root(table, topic)}/gen={generation}"
