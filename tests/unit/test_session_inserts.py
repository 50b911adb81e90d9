"""How the sessions stream writes a batch's closed sessions: inserted by id within their hours, once
per batch; a session the table holds already (a recomputation from silver wrote it) is kept.
Real Delta MERGEs on a local session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.testing import assertDataFrameEqual

from lakehouse.flows.sessions.processor import OUTPUT_SCHEMA, table_rows
from lakehouse.periods import Periods
from lakehouse.sinks import ensure_table, merge_new_rows

START = datetime(2026, 11, 20, 3, tzinfo=UTC)
START_MS = int(START.timestamp() * 1000)
HOUR_MS = 3_600_000


def closed(user: str, start_ms: int, end_ms: int, events: int) -> tuple:
    """An emitted row of kind session (OUTPUT_SCHEMA)."""
    return (
        "session",
        user,
        start_ms,
        end_ms,
        events,
        events,
        0,
        0,
        1,
        1,
        "c1",
        "c1",
        None,
        None,
        None,
    )


def test_a_batch_inserts_its_new_sessions_once_and_keeps_one_the_table_holds(spark, lakehouse):
    table = lakehouse.table("gold.user_sessions")
    ensure_table(spark, table)
    rows = lambda *sessions: table_rows(spark.createDataFrame(list(sessions), OUTPUT_SCHEMA))  # noqa: E731
    # Written by a backfill beside the stream, with a late event the stream's copy lacks.
    recomputed = closed("u1", START_MS, START_MS + 60_000, 5)
    rows(recomputed).write.format("delta").mode("append").save(table.path)

    new = closed("u2", START_MS + HOUR_MS, START_MS + HOUR_MS + 90_000, 2)
    batch = rows(closed("u1", START_MS, START_MS + 60_000, 4), new)
    hours = Periods.of([START, START + timedelta(hours=1)])
    app_id = "stream->gold.user_sessions@gen0"
    for _ in range(2):  # the second: the batch replayed after a crash
        merge_new_rows(spark, batch, table, table.spec.key, hours, app_id, 7)

    assertDataFrameEqual(spark.read.format("delta").load(table.path), rows(recomputed, new))
