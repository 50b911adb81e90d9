"""with_conflict_retries retries exactly Delta's "another commit won" errors, as delta-spark raises them."""

from __future__ import annotations

import logging

import pytest
from delta.exceptions import captured

from lakehouse import sinks

# The classes a Delta write really raises from Python: pyspark converts the JVM's
# io.delta.exceptions.* into these (delta.exceptions.captured), and in delta-spark 4 they do not
# derive from DeltaConcurrentModificationException. A conflict a backfill hit beside the hourly
# run (ConcurrentAppendException) once escaped the retry loop for that reason.
CONFLICTS = [
    captured.ConcurrentAppendException,
    captured.ConcurrentDeleteReadException,
    captured.ConcurrentDeleteDeleteException,
    captured.ConcurrentWriteException,
    captured.ConcurrentTransactionException,
    captured.MetadataChangedException,
    captured.ProtocolChangedException,
]


@pytest.fixture(scope="module", autouse=True)
def jvm():
    """pyspark's captured exceptions are built on a JVM in this process: its gateway, no session."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    monkeypatch.setattr(sinks.time, "sleep", lambda seconds: None)


def conflict_error(cls):
    return cls("Transaction conflict detected.", "io.delta.exceptions.ConcurrentAppendException")


@pytest.mark.parametrize("conflict", CONFLICTS, ids=lambda cls: cls.__name__)
def test_a_conflict_is_retried_with_a_log_line_until_the_write_succeeds(conflict, caplog):
    calls = []

    def write():
        calls.append(1)
        if len(calls) < 3:
            raise conflict_error(conflict)
        return "committed"

    with caplog.at_level(logging.WARNING, logger="lakehouse"):
        assert sinks.with_conflict_retries(write, "gold.campaign_hourly 1 hour(s)") == "committed"
    assert len(calls) == 3
    lines = [r.getMessage() for r in caplog.records if "Delta write conflict" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].startswith(f"Delta write conflict on gold.campaign_hourly 1 hour(s) (attempt 1/6, {conflict.__name__})")


def test_a_conflict_that_persists_is_raised_after_the_last_attempt():
    calls = []

    def write():
        calls.append(1)
        raise conflict_error(captured.ConcurrentAppendException)

    with pytest.raises(captured.ConcurrentAppendException):
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
