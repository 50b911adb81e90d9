"""Late events of the sessions: recorded as they arrive, reconciled once their session closes.

An event behind the sessions query's watermark cannot join its session in the state: the stream
records it in ``ops.late_session_events`` (:func:`late_rows`), and every run recomputes the
sessions of the users with unreconciled late events from silver (:func:`reconcile`), marking a
late event reconciled once a closed session holds it.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import delta_log
from lakehouse.config import Table
from lakehouse.flows.sessions.batch_form import recomputed_sessions, replace_sessions, utc_datetime
from lakehouse.flows.sessions.state import watermark_for
from lakehouse.runtime import log
from lakehouse.tables.gold_user_sessions import SESSION_GAP_MS


def reconcile(spark: SparkSession, target: Table, run_label: str) -> dict:
    """Recompute the sessions of users with unreconciled late events; mark those whose session has closed."""
    table = target.spec
    late_table = target.side("late")
    if not delta_log.may_hold_nulls(late_table.path, "reconciled_at"):  # from the log: no Spark job
        return {"late_pending": 0, "late_reconciled": 0}
    pending = (
        spark.read.format("delta")
        .load(late_table.path)
        .where(F.col("reconciled_at").isNull())
        .select("event_id", "user_id", F.unix_millis("event_time").alias("event_ms"))
        .collect()
    )
    if not pending:
        return {"late_pending": 0, "late_reconciled": 0}
    users = {row.user_id for row in pending}
    start_ms = min(row.event_ms for row in pending) - SESSION_GAP_MS
    watermark = watermark_for(spark, target)
    silver = target.upstream_tables()[0]
    sessions = recomputed_sessions(spark, silver, table, watermark, start_ms, None, users)
    try:
        replace_sessions(spark, target, table, sessions, watermark, start_ms, None, users)
        recomputed = sessions.collect()  # a few sessions per user with a late event
    finally:
        sessions.unpersist()
    # Each late event against its own user's closed sessions only (not every session: that was
    # quadratic in the client), then one MERGE marks them all.
    closed: dict[str, list] = {}
    for row in recomputed:
        if row.kind == "session":
            closed.setdefault(row.user_id, []).append(row)
    settled = [
        late.event_id
        for late in pending
        if any(s.start_ms <= late.event_ms <= s.end_ms for s in closed.get(late.user_id, ()))
    ]
    open_truth = [row for row in recomputed if row.kind == "open"]
    if settled:
        ids = spark.createDataFrame([(event_id,) for event_id in settled], "event_id string")
        spark.sql(
            f"MERGE INTO delta.`{late_table.path}` AS t USING {{ids}} AS s "
            "ON t.event_id = s.event_id AND t.reconciled_at IS NULL "
            "WHEN MATCHED THEN UPDATE SET reconciled_at = current_timestamp(), "
            f"reconciled_by = '{run_label}'",
            ids=ids,
        ).collect()
    still = len(pending) - len(settled)
    log.info(
        "%s: %d late event(s) of %d user(s) reconciled (%d wait for their session to close)",
        table.name,
        len(settled),
        len(users),
        still,
    )
    return {
        "late_pending": still,
        "late_reconciled": len(settled),
        "dirty_users": users,
        "open_truth": open_truth,
    }


def late_rows(
    spark: SparkSession, late: DataFrame, sessions: Table, batch_id: int, earliest_ms: int
) -> DataFrame:
    """Late events as ``ops.late_session_events`` rows, each with the emitted session it falls within the gap of.

    ``earliest_ms``: the earliest late event's time; only the session dates it can reach are read
    (a session touched ends within the gap of the event).
    """
    since = (utc_datetime(earliest_ms) - timedelta(days=1)).date()
    stored = (
        spark.read.format("delta")
        .load(sessions.path)
        .where(F.col("session_date") >= F.lit(since))
        .select(
            F.col("user_id").alias("s_user"),
            F.col("session_id"),
            F.unix_millis("session_start").alias("s_start"),
            F.unix_millis("session_end").alias("s_end"),
        )
    )
    near = (
        (F.col("s_user") == F.col("user_id"))
        & (F.col("event_ms") > F.col("s_start") - SESSION_GAP_MS)
        & (F.col("event_ms") < F.col("s_end") + SESSION_GAP_MS)
    )
    touched = (
        late.join(stored, near, "left")
        .groupBy("event_id", "user_id", "event_ms", "watermark_ms")
        .agg(F.min("session_id").alias("touches_session_id"))
    )
    return touched.select(
        "event_id",
        "user_id",
        F.timestamp_millis("event_ms").alias("event_time"),
        F.lit(batch_id).cast("bigint").alias("batch_id"),
        F.timestamp_millis("watermark_ms").alias("watermark"),
        "touches_session_id",
        F.current_timestamp().alias("recorded_at"),
        F.lit(None).cast("timestamp").alias("reconciled_at"),
        F.lit(None).cast("string").alias("reconciled_by"),
    )
