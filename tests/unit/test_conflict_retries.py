"""with_conflict_retries retries exactly Delta's "another commit won" errors, as delta-spark raises them."""

from __future__ import annotations

import json
import logging

import pytest
from delta.exceptions import captured
from google.rpc.error_details_pb2 import ErrorInfo
from pyspark.errors.exceptions.connect import convert_exception

from lakehouse import sinks

# Delta's conflicts as the JVM names them.
CONFLICT_NAMES = [
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentWriteException",
    "ConcurrentTransactionException",
    "MetadataChangedException",
    "ProtocolChangedException",
]


def by_local_driver(name: str) -> Exception:
    """The class pyspark converts the JVM's io.delta.exceptions.<name> into (delta.exceptions.captured).

    In delta-spark 4 these do not derive from DeltaConcurrentModificationException: a conflict a
    backfill hit beside the hourly run (ConcurrentAppendException) once escaped the retry loop for
    that reason. Built without the constructor, which asks a JVM gateway for the stack trace: a JVM
    started only for that cost each test process seconds, and once failed to start in CI.
    """
    cls = getattr(captured, name)
    error = cls.__new__(cls)
    error._desc, error._stackTrace, error._cause, error._origin = (
        "Transaction conflict detected.",
        "",
        None,
        None,
    )
    return error


def by_engine(name: str) -> Exception:
    """The error the Connect client raises for the same conflict on the engine, converted from the
    server's error details as pyspark does (most-derived JVM class first)."""
    classes = [
        f"io.delta.exceptions.{name}",
        f"org.apache.spark.sql.delta.{name}",
        "io.delta.exceptions.DeltaConcurrentModificationException",
        "java.util.ConcurrentModificationException",
        "java.lang.RuntimeException",
    ]
    sinks.delta_conflict_exceptions()  # registers Delta's classes with pyspark, as before every write
    info = ErrorInfo(
        reason=classes[0], domain="org.apache.spark", metadata={"classes": json.dumps(classes)}
    )
    return convert_exception(info, "Transaction conflict detected.", None)


CONFLICTS = [(make, name) for make in (by_local_driver, by_engine) for name in CONFLICT_NAMES]


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(sinks.time, "sleep", lambda seconds: None)


@pytest.mark.parametrize(
    ("make", "name"), CONFLICTS, ids=[f"{make.__name__}-{name}" for make, name in CONFLICTS]
)
def test_a_conflict_is_retried_with_a_log_line_until_the_write_succeeds(make, name, caplog):
    calls = []
    conflict = make(name)
    assert type(conflict).__name__ == name and type(conflict).__module__.startswith("delta.")

    def write():
        calls.append(1)
        if len(calls) < 3:
            raise conflict
        return "committed"

    with caplog.at_level(logging.WARNING, logger="lakehouse"):
        assert sinks.with_conflict_retries(write, "gold.campaign_hourly 1 hour(s)") == "committed"
    assert len(calls) == 3
    lines = [r.getMessage() for r in caplog.records if "Delta write conflict" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].startswith(
        f"Delta write conflict on gold.campaign_hourly 1 hour(s) (attempt 1/6, {name})"
    )


@pytest.mark.parametrize("make", [by_local_driver, by_engine])
def test_a_conflict_that_persists_is_raised_after_the_last_attempt(make):
    calls = []
    conflict = make("ConcurrentAppendException")

    def write():
        calls.append(1)
        raise conflict

    with pytest.raises(type(conflict)):
        sinks.with_conflict_retries(write, "silver.ad_events batch 3", attempts=4)
    assert len(calls) == 4


def test_other_errors_are_not_retried():
    calls = []

    def write():
        calls.append(1)
        raise ValueError("not a conflict")

    with pytest.raises(ValueError):
        sinks.with_conflict_retries(write, "silver.ad_events batch 3")
    assert len(calls) == 1
