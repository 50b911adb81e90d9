"""SESSIONS tables: a stateful streaming query keeps each user's open sessions and emits each once, when the watermark closes it.

Incremental mode streams silver's new events (availableNow, a run's all in one micro-batch, so a
backlog's watermark cannot run ahead of its events) through ``transformWithState`` (rows),
keyed by a bucket of users (``fragments.USER_BUCKETS``; each micro-batch's events reach it as
session fragments, a run of a user's events each, made by Arrow and passed a bucket at a time):
the state (RocksDB, in the checkpoint) holds each user's open sessions in their bucket's value,
an event-time timer per bucket fires when the watermark passes the earliest of its open sessions'
last event plus the gap, and the sessions closed then are emitted (output mode append) and
inserted by their id (an insert-only MERGE) under the batch's Delta transaction id: a replayed
batch (a crash between the state commit and the write) is written once.

Late events. The watermark is declared on silver's ``event_time``, but the processor reads a
copy of it (``event_ms``) that carries no watermark mark, so Spark hands it the events behind the
watermark instead of dropping them unseen; the processor records them (``ops.late_session_events``)
without applying them, since they may belong to sessions already emitted. After the query, the
batch form (the same fragments and session functions, over silver) recomputes the sessions of the
users with late events not yet reconciled and replaces theirs; a late event is reconciled once
the session it belongs to has closed and been written.

Batch mode (a backfill of [start, end)) recomputes every session that overlaps the interval, read
with the margin sessionization needs (widened until no session can reach past what was read),
and replaces exactly those (and, for one reaching past the interval, its user's rows within it). ``gold.open_sessions`` is rewritten after every run from the query's
state (the state data source), corrected for users with unreconciled late events.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse import catalog, delta_log
from lakehouse.config import Table
from lakehouse.errors import ConfigError
from lakehouse.faults import fault_point
from lakehouse.flows.sessions.batch_form import (
    iso_instant,
    recomputed_sessions,
    replace_sessions,
)
from lakehouse.flows.sessions.fragments import fragments_by_bucket
from lakehouse.flows.sessions.late import (
    late_rows,
    reconcile,
    record_reconciled,
    unchanged_since_reconciled,
)
from lakehouse.flows.sessions.open_sessions import (
    open_sessions_current,
    refresh_open_sessions,
    show_state,
)
from lakehouse.flows.sessions.processor import (
    OUTPUT_SCHEMA,
    STATE_VERSION,
    UserSessions,
    table_rows,
)
from lakehouse.flows.sessions.state import (
    check_state_contract,
    checkpoint_watermark_ms,
    watermark_for,
    whole_sessions,
)
from lakehouse.freshness import delta_source_caught_up, job_input
from lakehouse.periods import Periods
from lakehouse.progress import ProgressLog
from lakehouse.runtime import (
    JobArgs,
    Written,
    guarded_batches,
    log,
    run_available_now,
)
from lakehouse.sinks import (
    append,
    ensure_table,
    merge_new_rows,
    txn_app_id,
    with_conflict_retries,
)
from lakehouse.sources import delta_stream
from lakehouse.spark import build_spark_session, fit_code_generation, lazy_session
from lakehouse.tables.gold_user_sessions import (
    WATERMARK_DELAY,
)

# What jobs, tests and the bench use of the sessions flow (its parts: processor, batch_form, state).
__all__ = [
    "STATE_VERSION",
    "check_state_contract",
    "late_rows",
    "reconcile",
    "recompute",
    "recomputed_sessions",
    "replace_sessions",
    "run",
    "sessions_stream",
    "show_state",
    "table_rows",
    "watermark_for",
    "whole_sessions",
]

# What the processor keeps per bucket of users (fragments.USER_BUCKETS), one value: their open
# sessions and the one timer registered for them (the earliest close). One state read and one
# write per bucket and batch, and the timer moved only when the earliest close moves: each state
# or timer call is a round trip between the Python worker and the JVM, and per-user calls were
# most of the query's cost (issue 39).

# A backfill's recomputations of sessions while silver keeps growing beside it, before it gives up.
RECOMPUTE_ATTEMPTS = 5
HOUR_MS = 3_600_000


def recompute(
    target: Table,
    hours: Periods,
    reading: dict[str, Table] | None = None,
    spark: SparkSession | None = None,
) -> dict:
    """Replace every session overlapping ``hours`` (first to last) of ``target`` (the live table or
    a scratch copy) with its recomputation from live silver.

    Always from the live silver, even for the consistency check's scratch copy: sessions need
    events from beyond the hours checked, which the check does not recompute.

    Silver may grow meanwhile (a backfill beside the hourly run). A late event of these hours that
    the hourly run reconciles into a stored session meanwhile would be put back without it by this
    older view (seen with the backfill in a JVM of its own, as by spark-submit: its cached
    recomputation is not refreshed by another JVM's write to silver). So it is recomputed again
    until silver gained nothing between its read and the replace.
    """
    spark = spark or build_spark_session(target.task)
    table, lakehouse = target.spec, target.lakehouse
    hours = hours.hours()
    ensure_table(spark, target)
    silver = lakehouse.table(table.upstream[0])
    start_ms = int(hours.first.timestamp() * 1000)
    end_ms = int(hours.end.timestamp() * 1000)
    for attempt in range(1, RECOMPUTE_ATTEMPTS + 1):
        read_from = delta_log.latest_version(silver.path)
        watermark = watermark_for(spark, target)
        sessions = recomputed_sessions(spark, silver, table, watermark, start_ms, end_ms)
        try:
            replace_sessions(spark, target, table, sessions, watermark, start_ms, end_ms)
            written = sessions.where(F.col("kind") == "session").count()
        finally:
            sessions.unpersist()
        if read_from is None or not delta_log.data_changed_since(silver.path, read_from + 1):
            break
        log.info(
            "%s: silver gained rows while the sessions overlapping %s were recomputed (attempt %d of %d); "
            "recomputing them again",
            table.name,
            hours,
            attempt,
            RECOMPUTE_ATTEMPTS,
        )
    else:
        raise ConfigError(
            f"{table.name}: silver gained rows during each of {RECOMPUTE_ATTEMPTS} recomputations of the sessions "
            f"overlapping {hours}; what was written may miss the newest. Rerun this backfill when the hourly run is idle."
        )
    log.info(
        "%s: recomputed %d closed session(s) overlapping %s (watermark %s)",
        table.name,
        written,
        hours,
        iso_instant(watermark),
    )
    return {"sessions": written, "watermark": iso_instant(watermark)}


def sessions_stream(spark: SparkSession, table: Table) -> DataFrame:
    """The stateful query: silver's events as a stream, per user, into closed sessions (kind "session")
    and late events (kind "late"); open sessions stay in its state."""
    silver = table.upstream_tables()[0]
    events = table.spec.transform(
        delta_stream(spark, silver, one_batch=True).withWatermark("event_time", WATERMARK_DELAY)
    )
    return (
        fragments_by_bucket(events)
        .groupBy("bucket")
        .transformWithState(
            UserSessions(),
            outputStructType=OUTPUT_SCHEMA,
            outputMode="Append",
            timeMode="EventTime",
        )
    )


def run(target: Table, args: JobArgs) -> dict:
    # Connected on first use: a run with nothing to do (told from files) opens no engine session.
    spark = lazy_session(target.task)
    table, lakehouse = target.spec, target.lakehouse
    for written in target.written_by_its_task():
        ensure_table(spark, written)

    def fit_code(checkpoint: str | None = None) -> None:
        input_bytes, new_only = job_input(target, checkpoint)
        log.info("%s: %s", table.name, fit_code_generation(spark, input_bytes, new_only))

    if args.mode == "batch":
        fit_code()
        figures = recompute(target, args.interval, spark=spark)
        return {"table": table.name, "mode": "batch", "hours": str(args.interval), **figures}

    generation = args.generation_of(target)
    checkpoint = target.checkpoint(generation)
    late_table = lakehouse.table(catalog.side(table, "late").name)
    app_id = txn_app_id(target, generation, "stream")
    late_app_id = txn_app_id(late_table, generation, "stream")
    check_state_contract(checkpoint, table.name)

    def on_batch(output: DataFrame, batch_id: int) -> dict:
        # Runs where foreachBatch runs (the engine's Python worker). Persisted: each action on the
        # output would otherwise run the stateful operator again.
        output = output.persist()
        try:
            # One job counts each kind, finds the earliest late event (late_rows reads sessions from
            # its day) and the event hours written: each closed session's, start to end, and each
            # late event's (the Airflow task's asset events carry them as partitions).
            hour = F.lit(HOUR_MS)
            kinds = (
                output.groupBy("kind")
                .agg(
                    F.count("*").alias("count"),
                    F.min("event_ms").alias("earliest"),
                    F.collect_set(
                        F.when(
                            F.col("kind") == "session",
                            F.sequence(
                                F.floor(F.col("start_ms") / hour), F.floor(F.col("end_ms") / hour)
                            ),
                        ).otherwise(F.array(F.floor(F.col("event_ms") / hour)))
                    ).alias("hour_spans"),
                )
                .collect()
            )
            counts = {row.kind: row["count"] for row in kinds}
            hours_of = {
                kind: {
                    hour_index
                    for row in kinds
                    if row.kind == kind
                    for span in row.hour_spans
                    for hour_index in span
                    if hour_index is not None
                }
                for kind in ("session", "late")
            }
            written_hours = sorted(hours_of["session"] | hours_of["late"])
            fault_point(f"{table.layer}.before_sessions_write", batch_id)
            spark_ = output.sparkSession
            if counts.get(
                "session"
            ):  # most batches with data close nothing: their sessions are still open
                # Inserted unless the table holds its id already: only a recomputation from silver
                # (a backfill beside this batch, a reconciliation) can have written it first, and
                # that one is at least as complete. Only the files of the sessions' hours are read
                # (an update-or-insert here read every file of the table, a cost growing with history).
                closed = table_rows(output.where(F.col("kind") == "session"))
                hours = Periods.of(
                    datetime.fromtimestamp(h * 3600, UTC) for h in hours_of["session"]
                )
                with_conflict_retries(
                    lambda: merge_new_rows(
                        spark_, closed, target, table.key, hours, app_id, batch_id
                    ),
                    f"{table.name} batch {batch_id}",
                )
            late = output.where(F.col("kind") == "late")
            if counts.get("late"):
                earliest = next(row.earliest for row in kinds if row.kind == "late")
                append(
                    late_rows(spark_, late, target, batch_id, earliest),
                    late_table,
                    late_app_id,
                    batch_id,
                )
            fault_point(f"{table.layer}.after_sessions_write", batch_id)
        finally:
            output.unpersist()
        sessions, late_events = counts.get("session", 0), counts.get("late", 0)
        return {
            "batch_id": batch_id,
            "sessions": sessions,
            "late": late_events,
            "periods": [datetime.fromtimestamp(h * 3600, UTC).isoformat() for h in written_hours],
            "summary": f"{sessions} session(s) closed, {late_events} late event(s) recorded",
        }

    silver = lakehouse.table(table.upstream[0])

    def writer(lease):
        fit_code(checkpoint)
        return sessions_stream(spark, target).writeStream.foreachBatch(
            guarded_batches(on_batch, checkpoint, lease, table.name)
        )

    summary = run_available_now(
        writer,
        checkpoint,
        name=table.name,
        writes=[Written(target, app_id), Written(late_table, late_app_id)],
        caught_up=lambda: delta_source_caught_up(checkpoint, silver.path),
        progress_log=ProgressLog(spark, lakehouse),
    )
    run_label = f"sessions run of {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
    # Nothing new read and nothing moved since the last reconciliation (no new silver, late event,
    # watermark or write): it would settle nothing and rewrite what is there, a few Spark jobs
    # for nothing in most idle runs (late events are almost always pending). Files only.
    unchanged = unchanged_since_reconciled(target, checkpoint) if "not_started" in summary else None
    if unchanged is not None and open_sessions_current(target, checkpoint):
        log.info("%s: nothing moved since the last reconciliation; not reconciled", table.name)
        summary["reconcile_skipped"] = True
        reconciled = unchanged
    else:
        reconciled = reconcile(spark, target, run_label)
        try:
            fault_point(f"{table.layer}.before_open_sessions")
            if (
                "not_started" not in summary
                or reconciled.dirty_users is not None
                or not open_sessions_current(target, checkpoint)
            ):
                started = time.monotonic()
                summary["open_sessions"] = refresh_open_sessions(
                    spark, target, checkpoint, reconciled
                )
                log.info(
                    "%s: %s rewritten: %d open session(s) in %.1f s",
                    table.name,
                    target.side("open").name,
                    summary["open_sessions"],
                    time.monotonic() - started,
                )
        finally:
            reconciled.release()
        record_reconciled(target, checkpoint, reconciled)
    summary.update(reconciled.figures())
    watermark = checkpoint_watermark_ms(checkpoint)
    summary["watermark"] = iso_instant(watermark) if watermark is not None else None
    log.info(
        "%s: watermark %s, %s open session(s), late events: %d reconciled, %d pending",
        table.name,
        summary["watermark"],
        summary.get("open_sessions", "unchanged"),
        summary["late_reconciled"],
        summary["late_pending"],
    )
    return summary
