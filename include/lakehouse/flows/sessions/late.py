"""Late events of the sessions: recorded as they arrive, reconciled once their session closes.

An event behind the sessions query's watermark cannot join its session in the state: the stream
records it in ``ops.late_session_events`` (:func:`late_rows`), and every run recomputes the
sessions of the users with unreconciled late events from silver (:func:`reconcile`), marking a
late event reconciled once a closed session holds it.

All of it runs on the engine, whatever the number of late events: the pending events and their
users stay DataFrames (never collected), silver is read for those users by a semi join, a late
event is matched with its user's recomputed sessions by a join, and one MERGE marks the settled
ones. A 30-day catch-up once recorded 591,131 late events; matching them in the client's Python
would have run for hours (issue 56).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import catalog, checkpoint_log, delta_log
from lakehouse.config import Table
from lakehouse.files import lake_path, write_atomic
from lakehouse.flows.sessions.batch_form import (
    recomputed_sessions,
    replace_users_sessions,
    utc_datetime,
)
from lakehouse.flows.sessions.state import watermark_for
from lakehouse.runtime import log
from lakehouse.tables.gold_user_sessions import SESSION_GAP_MS


@dataclass
class Reconciled:
    """What a reconciliation did, and what ``gold.open_sessions`` needs of it.

    ``dirty_users`` (one column, ``user_id``) are the users with pending late events, whose open
    sessions the query's state does not know fully; ``open_truth`` their recomputed open sessions
    (``OUTPUT_SCHEMA``). Both are cached DataFrames (None with no pending event): the caller
    calls :meth:`release` once it has rewritten the open sessions.
    """

    late_pending: int = 0
    late_reconciled: int = 0
    dirty_users: DataFrame | None = None
    open_truth: DataFrame | None = None
    cached: list[DataFrame] = field(default_factory=list)

    def figures(self) -> dict:
        """The counts a run's summary carries."""
        return {"late_pending": self.late_pending, "late_reconciled": self.late_reconciled}

    def release(self) -> None:
        """Drop the cached frames."""
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()


def reconcile_inputs(target: Table, checkpoint: str) -> dict:
    """What a reconciliation's outcome depends on, from files alone (no Spark job).

    The pending events (the late table's version), the events of their users (silver's), the
    watermark that closes their sessions (the checkpoint's newest batch), what was written (the
    sessions' and open sessions' versions) and the code that computes it: while none of these
    moves, a reconciliation settles nothing new and writes what is there already.
    """
    return {
        "code_version": catalog.code_version(target.name),
        "checkpoint_batch": checkpoint_log.newest(checkpoint, "commits"),
        **{
            table.name: delta_log.latest_version(table.path)
            for table in (*target.upstream_tables(), *target.written_by_its_task())
        },
    }


def _reconciled_record(checkpoint: str):
    return lake_path(f"{checkpoint}.reconciled.json")


def unchanged_since_reconciled(target: Table, checkpoint: str) -> Reconciled | None:
    """The last reconciliation's outcome when nothing it depends on has moved since (its pending
    events then stay pending: a new run would settle none); None when it must run."""
    record = _reconciled_record(checkpoint)
    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if recorded.get("inputs") != reconcile_inputs(target, checkpoint):
        return None
    return Reconciled(late_pending=int(recorded.get("late_pending", 0)))


def record_reconciled(target: Table, checkpoint: str, reconciled: Reconciled) -> None:
    """Note what a run's reconciliation (and open-sessions rewrite) left, for :func:`unchanged_since_reconciled`.

    Written after the run's last write: a run that dies before it leaves the older note, whose
    inputs no longer match, so the next run reconciles.
    """
    inputs = reconcile_inputs(target, checkpoint)
    write_atomic(
        _reconciled_record(checkpoint),
        json.dumps({"inputs": inputs, "late_pending": reconciled.late_pending}),
    )


def reconcile(spark: SparkSession, target: Table, run_label: str) -> Reconciled:
    """Recompute the sessions of users with unreconciled late events; mark those whose session has closed.

    Costs a few Spark jobs (joins and aggregates, O(n log n) in the late events), whatever their number.
    """
    table = target.spec
    late_table = target.side("late")
    if not delta_log.may_hold_nulls(late_table.path, "reconciled_at"):  # from the log: no Spark job
        return Reconciled()
    started = time.monotonic()
    pending = (
        spark.read.format("delta")
        .load(late_table.path)
        .where(F.col("reconciled_at").isNull())
        .select("event_id", "user_id", F.unix_millis("event_time").alias("event_ms"))
        .persist()
    )
    figures = pending.agg(
        F.count("*").alias("pending"),
        F.min("event_ms").alias("earliest"),
        F.countDistinct("user_id").alias("users"),
    ).first()
    if not figures.pending:
        pending.unpersist()
        return Reconciled()
    result = Reconciled(cached=[pending])
    try:
        # Cached and counted: the planner knows its size, so the joins below broadcast it when small.
        users = pending.select("user_id").distinct()
        start_ms = figures.earliest - SESSION_GAP_MS
        watermark = watermark_for(spark, target)
        silver = target.upstream_tables()[0]
        sessions = recomputed_sessions(spark, silver, table, watermark, start_ms, None, users)
        result.cached.append(sessions)
        replace_users_sessions(spark, target, table, sessions, users, watermark, start_ms)
        # A late event is settled once a closed session of its user holds it: a join on the user.
        closed = sessions.where(F.col("kind") == "session").select(
            F.col("user_id").alias("s_user"), "start_ms", "end_ms"
        )
        settled = pending.join(
            closed,
            (F.col("user_id") == F.col("s_user"))
            & F.col("event_ms").between(F.col("start_ms"), F.col("end_ms")),
            "left_semi",
        ).select("event_id")
        merged = spark.sql(
            f"MERGE INTO delta.`{late_table.path}` AS t USING {{settled}} AS s "
            "ON t.event_id = s.event_id AND t.reconciled_at IS NULL "
            "WHEN MATCHED THEN UPDATE SET reconciled_at = current_timestamp(), "
            f"reconciled_by = '{run_label}'",
            settled=settled,
        ).first()
        reconciled = int(merged["num_updated_rows"]) if merged is not None else 0
        still = figures.pending - reconciled
        log.info(
            "%s: %d late event(s) of %d user(s) reconciled (%d wait for their session to close) in %.1f s",
            table.name,
            reconciled,
            figures.users,
            still,
            time.monotonic() - started,
        )
    except BaseException:
        result.release()
        raise
    result.late_pending, result.late_reconciled = still, reconciled
    result.dirty_users, result.open_truth = users, sessions.where(F.col("kind") == "open")
    return result


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
