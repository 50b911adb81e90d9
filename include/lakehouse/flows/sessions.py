"""SESSIONS tables: a stateful streaming query keeps each user's open sessions and emits each once, when the watermark closes it.

Incremental mode streams silver's new events (availableNow) through ``transformWithState`` (rows):
the state (RocksDB, in the checkpoint) holds each user's open sessions, an event-time timer per
user fires when the watermark passes its open session's last event plus the gap, and the session
is emitted then (output mode append) and MERGEd into the table by its id under the batch's Delta
transaction id: a replayed batch (a crash between the state commit and the write) is written once.

Late events. The watermark is declared on silver's ``event_time``, but the processor reads a
copy of it (``event_ms``) that carries no watermark mark, so Spark hands it the events behind the
watermark instead of dropping them unseen; the processor records them (``ops.late_session_events``)
without applying them, since they may belong to sessions already emitted. After the query, the
batch form (the same session functions, per user, over silver) recomputes the sessions of the
users with late events not yet reconciled and replaces theirs; a late event is reconciled once
the session it belongs to has closed and been written.

Batch mode (a backfill of [start, end)) recomputes every session that overlaps the interval, read
with the margin sessionization needs (widened until no session can reach past what was read),
and replaces exactly those (and, for one reaching past the interval, its user's rows within it). ``gold.open_sessions`` is rewritten after every run from the query's
state (the state data source), corrected for users with unreconciled late events.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from lakehouse import catalog, checkpoint_log, delta_log
from lakehouse.catalog import TableSpec, Write
from lakehouse.config import ConfigError, Lakehouse, Table
from lakehouse.faults import fault_point
from lakehouse.freshness import delta_source_caught_up, job_input_bytes
from lakehouse.hours import HourRange
from lakehouse.progress import ProgressLog
from lakehouse.runtime import (
    JobArgs,
    Written,
    guarded_batches,
    log,
    refresh_advice,
    run_available_now,
)
from lakehouse.sinks import (
    append,
    ensure_table,
    replace_where,
    txn_app_id,
    upsert,
    with_conflict_retries,
)
from lakehouse.sources import delta_stream
from lakehouse.spark import build_spark_session, fit_code_generation
from lakehouse.tables.gold_user_sessions import (
    SESSION_GAP_MS,
    WATERMARK_DELAY,
    WATERMARK_DELAY_MS,
    Session,
    add_events,
)

FAULT_POINTS = ("before_sessions_write", "after_sessions_write", "before_open_sessions")

# What the processor keeps per user, one value: their open sessions and the one timer registered
# for them (the earliest close). One state read and one write per user and batch, and the timer
# moved only when the earliest close moves: each state or timer call is a round trip between the
# Python worker and the JVM, and per-user calls were most of the query's cost (issue 39).
SESSION_STATE = StructType(
    [StructField(name, LongType()) for name in ("start_ms", "end_ms", "first_ms")]
    + [StructField(name, StringType()) for name in ("first_event_id", "first_campaign_id")]
    + [StructField("last_ms", LongType())]
    + [StructField(name, StringType()) for name in ("last_event_id", "last_campaign_id")]
    + [StructField(name, LongType()) for name in ("events", "views", "clicks", "purchases")]
    + [StructField(name, ArrayType(StringType())) for name in ("ads", "campaigns")]
)
STATE_SCHEMA = StructType(
    [StructField("sessions", ArrayType(SESSION_STATE)), StructField("timer_ms", LongType())]
)
STATE_NAME = "open_sessions"
# Raised with every change the checkpoint's state cannot take (the state schema, the gap, the
# meaning of a field): the run then refuses to start and names the full refresh that rebuilds it.
# 2: one value per user (sessions and timer) instead of a list of sessions.
STATE_VERSION = 2

# What the processor and the batch form emit: kind "session" (closed), "open" or "late" (an event).
OUTPUT_SCHEMA = (
    "kind STRING, user_id STRING, start_ms BIGINT, end_ms BIGINT, events BIGINT, views BIGINT, clicks BIGINT, "
    "purchases BIGINT, distinct_ads BIGINT, distinct_campaigns BIGINT, first_campaign_id STRING, "
    "last_campaign_id STRING, event_id STRING, event_ms BIGINT, watermark_ms BIGINT"
)
OUTPUT_COLUMNS = [part.split()[0] for part in OUTPUT_SCHEMA.split(", ")]
OutputRow = Row(*OUTPUT_COLUMNS)
EVENT_FIELDS = ["event_ms", "event_id", "event_type", "ad_id", "campaign_id"]


def _to_state(s: Session) -> tuple:
    return (
        s.start,
        s.end,
        *s.first,
        *s.last,
        s.events,
        s.views,
        s.clicks,
        s.purchases,
        sorted(s.ads),
        sorted(s.campaigns),
    )


def _from_state(row) -> Session:
    (
        start,
        end,
        first_ms,
        first_id,
        first_campaign,
        last_ms,
        last_id,
        last_campaign,
        events,
        views,
        clicks,
        purchases,
        ads,
        campaigns,
    ) = row
    return Session(
        int(start),
        int(end),
        (int(first_ms), first_id, first_campaign),
        (int(last_ms), last_id, last_campaign),
        int(events),
        int(views),
        int(clicks),
        int(purchases),
        set(ads),
        set(campaigns),
    )


def _output(kind: str, user_id: str, s: Session) -> tuple:
    return (
        kind,
        user_id,
        s.start,
        s.end,
        s.events,
        s.views,
        s.clicks,
        s.purchases,
        len(s.ads),
        len(s.campaigns),
        s.first[2],
        s.last[2],
        None,
        None,
        None,
    )


def _late(user_id: str, event: tuple, watermark_ms: int) -> tuple:
    return ("late", user_id, *([None] * 10), event[1], int(event[0]), watermark_ms)


class UserSessions(StatefulProcessor):
    """Per user: open sessions in state, a timer at the earliest close, closed sessions emitted once.

    Row-based (``transformWithState``): a user's events arrive as rows and what it emits leaves as
    rows, without a pandas frame per user each way.
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.open = handle.getValueState(STATE_NAME, STATE_SCHEMA)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        (user_id,) = key
        watermark = timerValues.getCurrentWatermarkInMs()
        on_time, late = [], []
        for row in rows:
            event = (row.event_ms, row.event_id, row.event_type, row.ad_id, row.campaign_id)
            (late if event[0] < watermark else on_time).append(event)
        if on_time:
            sessions, timer = self._load()
            self._keep(add_events(sessions, on_time), timer)
        for event in late:
            yield OutputRow(*_late(user_id, event, watermark))

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        (user_id,) = key
        watermark = timerValues.getCurrentWatermarkInMs()
        sessions, timer = self._load()
        # Spark deletes the timer that fired once this returns.
        if timer == expiredTimerInfo.getExpiryTimeInMs():
            timer = None
        self._keep([s for s in sessions if not s.closed_at(watermark)], timer)
        for s in sessions:
            if s.closed_at(watermark):
                yield OutputRow(*_output("session", user_id, s))

    def _load(self) -> tuple[list[Session], int | None]:
        """The user's open sessions and their registered timer (none: a user new to the state)."""
        value = self.open.get()
        if value is None:
            return [], None
        return [_from_state(s) for s in value[0]], value[1]

    def _keep(self, sessions: list[Session], timer: int | None) -> None:
        """Store ``sessions``, and move the registered ``timer`` to their earliest close if it moved."""
        wanted = min(s.end for s in sessions) + SESSION_GAP_MS if sessions else None
        if timer is not None and timer != wanted:
            self.handle.deleteTimer(timer)
        if wanted is not None and wanted != timer:
            self.handle.registerTimer(wanted)
        if sessions:
            self.open.update(([_to_state(s) for s in sessions], wanted))
        else:
            self.open.clear()

    def close(self) -> None:
        pass


def sessions_of_users(watermark_ms: int):
    """The batch form: a user's events (a pandas frame) -> their closed and open sessions as of ``watermark_ms``."""

    def per_user(key, events):  # no type hints: pandas' grouped-map form is chosen by applyInPandas
        (user_id,) = key
        sessions = add_events([], events[EVENT_FIELDS].itertuples(index=False, name=None))
        rows = [
            _output("session" if s.closed_at(watermark_ms) else "open", user_id, s)
            for s in sessions
        ]
        return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)

    return per_user


def table_rows(output: DataFrame, with_closes_at: bool = False) -> DataFrame:
    """The table's columns from emitted sessions (``OUTPUT_SCHEMA`` rows of kind session or open)."""
    start = F.timestamp_millis("start_ms")
    columns = [
        F.md5(F.concat_ws("/", "user_id", F.col("start_ms").cast("string"))).alias("session_id"),
        "user_id",
        start.alias("session_start"),
        F.timestamp_millis("end_ms").alias("session_end"),
        ((F.col("end_ms") - F.col("start_ms")) / 1000).cast("double").alias("duration_seconds"),
        "events",
        "views",
        "clicks",
        "purchases",
        "distinct_ads",
        "distinct_campaigns",
        "first_campaign_id",
        "last_campaign_id",
        F.to_date(start).alias("session_date"),
    ]
    if with_closes_at:
        columns.append(F.timestamp_millis(F.col("end_ms") + SESSION_GAP_MS).alias("closes_at"))
    return output.select(*columns)


# --------------------------------------------------------------------------------------------
# The batch form: sessions recomputed from silver and replaced


INITIAL_MARGIN_MS = 2 * 3_600_000
MAX_MARGIN_MS = 32 * 24 * 3_600_000


def _silver_events(
    spark: SparkSession, silver: Table, table: TableSpec, from_ms: int, to_ms: int | None, users
) -> DataFrame:
    rows = spark.read.format("delta").load(silver.path)
    after = _utc(from_ms)
    rows = rows.where(F.col("event_date") >= F.lit(after.date())).where(
        F.unix_millis("event_time") >= from_ms
    )
    if to_ms is not None:
        before = _utc(to_ms)
        rows = rows.where(F.col("event_date") <= F.lit(before.date())).where(
            F.unix_millis("event_time") < to_ms
        )
    if users is not None:
        rows = rows.where(F.col("user_id").isin(sorted(users)))
    return table.transform(rows)


def recomputed_sessions(
    spark: SparkSession,
    silver: Table,
    table: TableSpec,
    watermark_ms: int,
    start_ms: int,
    end_ms: int | None = None,
    users: set[str] | None = None,
) -> DataFrame:
    """Every session (closed or open as of ``watermark_ms``) overlapping [start_ms, end_ms), whole.

    Silver is read with a margin around the interval, doubled while a session could reach past
    what was read (a session is whole when no event lies within the gap before its first or after
    its last). Returns the sessions (``OUTPUT_SCHEMA``), cached: the caller unpersists them.
    """
    margin = INITIAL_MARGIN_MS
    while True:
        read_from, read_to = start_ms - margin, (end_ms + margin if end_ms is not None else None)
        events = _silver_events(spark, silver, table, read_from, read_to, users)
        sessions = events.groupBy("user_id").applyInPandas(
            sessions_of_users(watermark_ms), OUTPUT_SCHEMA
        )
        overlapping = sessions.where(F.col("end_ms") >= start_ms)
        if end_ms is not None:
            overlapping = overlapping.where(F.col("start_ms") < end_ms)
        overlapping = overlapping.persist()
        reach = overlapping.agg(
            F.min("start_ms").alias("first"), F.max("end_ms").alias("last")
        ).first()
        first, last = reach["first"], reach["last"]
        whole = first is None or (
            first - SESSION_GAP_MS >= read_from
            and (read_to is None or last + SESSION_GAP_MS < read_to)
        )
        if whole:
            return overlapping
        overlapping.unpersist()
        if margin >= MAX_MARGIN_MS:
            raise ConfigError(
                f"{table.name}: a session reaches more than {MAX_MARGIN_MS // 86_400_000} days beyond "
                f"{_iso(start_ms)}..{_iso(end_ms)}; a user active without a {SESSION_GAP_MS // 60_000}-minute "
                "pause for that long is a producer bug. Check silver for that user."
            )
        margin *= 2


def _utc(millis: int) -> datetime:
    """Epoch milliseconds as a naive UTC datetime, exactly (no float rounding)."""
    return datetime(1970, 1, 1) + timedelta(milliseconds=millis)


def _iso(millis: int | None) -> str:
    return "now" if millis is None else f"{_utc(millis):%Y-%m-%dT%H:%M:%SZ}"


def _ts(millis: int) -> str:
    return f"TIMESTAMP'{_utc(millis):%Y-%m-%d %H:%M:%S.%f}'"


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def replace_sessions(
    spark: SparkSession,
    target: Table,
    table: TableSpec,
    sessions: DataFrame,
    watermark_ms: int,
    start_ms: int,
    end_ms: int | None,
    users: set[str] | None = None,
) -> None:
    """Replace the target's sessions overlapping [start_ms, end_ms) (of ``users``) with the closed ones of ``sessions``.

    ``sessions`` are every recomputed session overlapping the interval, closed or open as of
    ``watermark_ms``. One that reaches past its start or end also replaces the rows of its user
    within its own extent: a stored session that it now contains (merged by an event since) would
    otherwise stay beside it. Only stored sessions closed as of ``watermark_ms`` are replaced: one
    that the stream closed since (beside a backfill that read an older watermark) is newer than
    this recomputation, which saw it open and would delete it without writing it back.
    """
    overlapping = f"session_end >= {_ts(start_ms)}" + (
        f" AND session_start < {_ts(end_ms)}" if end_ms is not None else ""
    )
    if users is not None:
        overlapping += f" AND user_id IN ({', '.join(_quoted(user) for user in sorted(users))})"
    reaching_out = F.col("start_ms") < start_ms
    if end_ms is not None:
        reaching_out = reaching_out | (F.col("end_ms") >= end_ms)
    extents = [
        f"(user_id = {_quoted(row.user_id)} AND session_end >= {_ts(row.start_ms)} AND session_start <= {_ts(row.end_ms)})"
        for row in sessions.where(reaching_out).select("user_id", "start_ms", "end_ms").collect()
    ]
    closed_by_then = (
        f"session_end <= {_ts(watermark_ms - SESSION_GAP_MS)}"  # Session.closed_at, as SQL
    )
    predicate = f"({' OR '.join([f'({overlapping})', *extents])}) AND {closed_by_then}"
    closed = table_rows(sessions.where(F.col("kind") == "session"))
    with_conflict_retries(
        lambda: replace_where(closed, target, table, predicate), f"{table.name} sessions"
    )


# --------------------------------------------------------------------------------------------
# The watermark and the state contract, read from the checkpoint


def checkpoint_watermark_ms(checkpoint: str) -> int | None:
    """The watermark of the checkpoint's newest planned batch (None: no batch yet)."""
    offsets = Path(checkpoint) / "offsets"
    for batch in reversed(checkpoint_log.batches(checkpoint, "offsets")):
        try:
            metadata = json.loads((offsets / str(batch)).read_text().splitlines()[1])
            return int(metadata.get("batchWatermarkMs", 0))
        except (OSError, ValueError, IndexError):
            continue
    return None


def watermark_for(spark: SparkSession, lakehouse: Lakehouse, table: TableSpec) -> int:
    """The stream's watermark, or (no stream yet) the one it will reach over today's silver."""
    target = lakehouse.table(table.name)
    recorded = checkpoint_watermark_ms(target.checkpoint(target.current_generation()))
    if recorded is not None:
        return recorded
    return final_watermark(spark.read.format("delta").load(lakehouse.table(table.upstream[0]).path))


def final_watermark(silver: DataFrame) -> int:
    """The watermark the stream reaches once it has read all of ``silver``."""
    newest = silver.agg(F.max(F.unix_millis("event_time")).alias("newest")).first()["newest"]
    return (newest or 0) - WATERMARK_DELAY_MS


def whole_sessions(silver: DataFrame, table: TableSpec) -> tuple[DataFrame, DataFrame]:
    """Every session of ``silver`` as of :func:`final_watermark`: (closed rows, open rows); no stream, no state."""
    sessions = (
        table.transform(silver)
        .groupBy("user_id")
        .applyInPandas(sessions_of_users(final_watermark(silver)), OUTPUT_SCHEMA)
    )
    return table_rows(sessions.where(F.col("kind") == "session")), table_rows(
        sessions.where(F.col("kind") == "open"), with_closes_at=True
    )


def _contract() -> dict:
    return {
        "state_version": STATE_VERSION,
        "state_schema": STATE_SCHEMA.simpleString(),
        "session_gap_ms": SESSION_GAP_MS,
        "watermark_delay": WATERMARK_DELAY,
    }


def check_state_contract(checkpoint: str, name: str) -> None:
    """Refuse to run a query whose state the checkpoint holds in another shape; record the shape otherwise.

    Spark would fail mid-batch on a changed state schema, and would carry on silently under a
    changed gap or meaning; both are caught here, before the query starts.
    """
    record = Path(checkpoint).with_name(Path(checkpoint).name + ".state.json")
    has_state = bool(checkpoint_log.batches(checkpoint, "offsets"))
    wanted = _contract()
    if has_state and record.exists():
        recorded = json.loads(record.read_text())
        if recorded != wanted:
            changed = ", ".join(
                f"{k} {recorded.get(k)!r} -> {v!r}"
                for k, v in wanted.items()
                if recorded.get(k) != v
            )
            raise ConfigError(
                f"{name}: the sessions query changed in a way its checkpoint's state cannot take ({changed}; "
                f"state recorded in {record}). Nothing was written. The state is rebuilt from silver by a new "
                f"checkpoint generation. {refresh_advice('gold')}"
            )
        return
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_name(f".{record.name}.tmp")
    tmp.write_text(json.dumps(wanted))
    os.replace(tmp, record)


def open_sessions_in_state(spark: SparkSession, checkpoint: str) -> DataFrame:
    """The open sessions the query's state holds (Spark's state data source: also for debugging)."""
    spark.streams.active  # noqa: B018 - the state reader needs the state store coordinator a query manager starts
    state = spark.read.format("statestore").option("stateVarName", STATE_NAME).load(checkpoint)
    s = F.col("session")
    return state.select(
        F.col("key.user_id").alias("user_id"), F.explode("value.sessions").alias("session")
    ).select(
        F.lit("open").alias("kind"),
        "user_id",
        s.start_ms.alias("start_ms"),
        s.end_ms.alias("end_ms"),
        s.events.alias("events"),
        s.views.alias("views"),
        s.clicks.alias("clicks"),
        s.purchases.alias("purchases"),
        F.size(s.ads).cast("bigint").alias("distinct_ads"),
        F.size(s.campaigns).cast("bigint").alias("distinct_campaigns"),
        s.first_campaign_id.alias("first_campaign_id"),
        s.last_campaign_id.alias("last_campaign_id"),
        F.lit(None).cast("string").alias("event_id"),
        F.lit(None).cast("bigint").alias("event_ms"),
        F.lit(None).cast("bigint").alias("watermark_ms"),
    )


# --------------------------------------------------------------------------------------------
# The job


# A backfill's recomputations of sessions while silver keeps growing beside it, before it gives up.
RECOMPUTE_ATTEMPTS = 5


def recompute(
    spark: SparkSession,
    lakehouse: Lakehouse,
    table: TableSpec,
    hours: HourRange,
    target: Table | None = None,
    upstream: dict[str, Table] | None = None,
) -> dict:
    """Replace every session overlapping ``hours`` (first to last) with its recomputation from live silver.

    Always from the live silver, even for the consistency check's scratch copy: sessions need
    events from beyond the hours checked, which the check does not recompute.

    Silver may grow meanwhile (a backfill beside the hourly run). A late event of these hours that
    the hourly run reconciles into a stored session meanwhile would be put back without it by this
    older view (seen with the backfill in a JVM of its own, as by spark-submit: its cached
    recomputation is not refreshed by another JVM's write to silver). So it is recomputed again
    until silver gained nothing between its read and the replace.
    """
    target = target or lakehouse.table(table.name)
    ensure_table(spark, target, table)
    silver = lakehouse.table(table.upstream[0])
    start_ms = int(hours.hours[0].timestamp() * 1000)
    end_ms = int(hours.hours[-1].timestamp() * 1000) + 3_600_000
    for attempt in range(1, RECOMPUTE_ATTEMPTS + 1):
        read_from = delta_log.latest_version(silver.path)
        watermark = watermark_for(spark, lakehouse, table)
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
        _iso(watermark),
    )
    return {"sessions": written, "watermark": _iso(watermark)}


def reconcile(spark: SparkSession, lakehouse: Lakehouse, table: TableSpec, run_label: str) -> dict:
    """Recompute the sessions of users with unreconciled late events; mark those whose session has closed."""
    late_table = lakehouse.table(catalog.side(table, "late").name)
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
    watermark = watermark_for(spark, lakehouse, table)
    target = lakehouse.table(table.name)
    sessions = recomputed_sessions(
        spark, lakehouse.table(table.upstream[0]), table, watermark, start_ms, None, users
    )
    try:
        replace_sessions(spark, target, table, sessions, watermark, start_ms, None, users)
        recomputed = sessions.collect()  # a few sessions per user with a late event
    finally:
        sessions.unpersist()
    closed = [row for row in recomputed if row.kind == "session"]
    settled = [
        late.event_id
        for late in pending
        if any(
            row.user_id == late.user_id and row.start_ms <= late.event_ms <= row.end_ms
            for row in closed
        )
    ]
    open_truth = [row for row in recomputed if row.kind == "open"]
    if settled:
        ids = ", ".join(f"'{event_id}'" for event_id in settled)
        spark.sql(
            f"UPDATE delta.`{late_table.path}` SET reconciled_at = current_timestamp(), reconciled_by = '{run_label}' "
            f"WHERE reconciled_at IS NULL AND event_id IN ({ids})"
        )
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


def _state_tag(checkpoint: str) -> str:
    """What an open-sessions commit was written from: the checkpoint (its generation) and its newest committed batch."""
    return f"open sessions of the state of {checkpoint} as of batch {checkpoint_log.newest(checkpoint, 'commits')}"


def open_sessions_current(lakehouse: Lakehouse, table: TableSpec, checkpoint: str) -> bool:
    """``gold.open_sessions`` was last rewritten from the state of the checkpoint's newest committed batch.

    From the tables' logs, no Spark job. Not so when a run died between its query and the rewrite:
    its retry, with nothing new to start a query for, rewrites it then.
    """
    written = delta_log.latest_commit_info(lakehouse.table(catalog.side(table, "open").name).path)
    return written.get("userMetadata") == _state_tag(checkpoint)


def refresh_open_sessions(
    spark: SparkSession, lakehouse: Lakehouse, table: TableSpec, checkpoint: str, reconciled: dict
) -> int:
    """Rewrite ``gold.open_sessions``: the state's open sessions, the recomputed ones for users with late events.

    The commit is tagged with the batch whose state it holds (:func:`open_sessions_current`).
    """
    target = lakehouse.table(catalog.side(table, "open").name)
    ensure_table(spark, target, catalog.side(table, "open"))
    opened = (
        open_sessions_in_state(spark, checkpoint) if (Path(checkpoint) / "state").is_dir() else None
    )
    dirty = reconciled.get("dirty_users")
    if opened is not None and dirty:
        opened = opened.where(~F.col("user_id").isin(sorted(dirty)))
    if dirty:
        truth = spark.createDataFrame(reconciled["open_truth"], OUTPUT_SCHEMA)
        opened = truth if opened is None else opened.unionByName(truth)
    if opened is None:
        return 0
    rows = table_rows(opened, with_closes_at=True)
    rows.write.format("delta").mode("overwrite").option(
        "userMetadata", _state_tag(checkpoint)
    ).save(target.path)
    return int(
        delta_log.latest_commit_info(target.path)
        .get("operationMetrics", {})
        .get("numOutputRows", 0)
    )


def sessions_stream(spark: SparkSession, lakehouse: Lakehouse, table: TableSpec) -> DataFrame:
    """The stateful query: silver's events as a stream, per user, into closed sessions (kind "session")
    and late events (kind "late"); open sessions stay in its state."""
    silver = lakehouse.table(table.upstream[0])
    events = table.transform(
        delta_stream(spark, silver).withWatermark("event_time", WATERMARK_DELAY)
    )
    return events.groupBy("user_id").transformWithState(
        UserSessions(), outputStructType=OUTPUT_SCHEMA, outputMode="Append", timeMode="EventTime"
    )


def run(table: TableSpec, args: JobArgs) -> dict:
    spark = build_spark_session(table.task)
    lakehouse = args.lakehouse
    target = lakehouse.table(table.name)
    for written in catalog.written_by_task(table):
        ensure_table(spark, lakehouse.table(written.name), written)
    log.info("%s: %s", table.name, fit_code_generation(spark, job_input_bytes(lakehouse, table)))

    if args.mode == "batch":
        figures = recompute(spark, lakehouse, table, args.hours)
        return {"table": table.name, "mode": "batch", "hours": str(args.hours), **figures}

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
            # One job counts each kind and finds the earliest late event (late_rows reads sessions from its day).
            kinds = (
                output.groupBy("kind")
                .agg(F.count("*").alias("count"), F.min("event_ms").alias("earliest"))
                .collect()
            )
            counts = {row.kind: row["count"] for row in kinds}
            fault_point(f"{table.layer}.before_sessions_write", batch_id)
            spark_ = output.sparkSession
            if counts.get(
                "session"
            ):  # most batches with data close nothing: their sessions are still open
                closed = table_rows(output.where(F.col("kind") == "session"))
                with_conflict_retries(
                    lambda: upsert(spark_, closed, target, table, app_id, batch_id),
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
            "summary": f"{sessions} session(s) closed, {late_events} late event(s) recorded",
        }

    silver = lakehouse.table(table.upstream[0])
    sessions = sessions_stream(spark, lakehouse, table)
    summary = run_available_now(
        lambda lease: sessions.writeStream.foreachBatch(
            guarded_batches(on_batch, checkpoint, lease, table.name)
        ),
        checkpoint,
        name=table.name,
        writes=[Written(target, app_id), Written(late_table, late_app_id)],
        caught_up=lambda: delta_source_caught_up(checkpoint, silver.path),
        progress_log=ProgressLog(spark, lakehouse),
    )
    run_label = f"sessions run of {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
    reconciled = reconcile(spark, lakehouse, table, run_label)
    fault_point(f"{table.layer}.before_open_sessions")
    if (
        "not_started" not in summary
        or reconciled.get("dirty_users")
        or not open_sessions_current(lakehouse, table, checkpoint)
    ):
        summary["open_sessions"] = refresh_open_sessions(
            spark, lakehouse, table, checkpoint, reconciled
        )
    summary.update(
        {k: v for k, v in reconciled.items() if k in ("late_pending", "late_reconciled")}
    )
    watermark = checkpoint_watermark_ms(checkpoint)
    summary["watermark"] = _iso(watermark) if watermark is not None else None
    log.info(
        "%s: watermark %s, %s open session(s), late events: %d reconciled, %d pending",
        table.name,
        summary["watermark"],
        summary.get("open_sessions", "unchanged"),
        summary["late_reconciled"],
        summary["late_pending"],
    )
    return summary


def late_rows(
    spark: SparkSession, late: DataFrame, sessions: Table, batch_id: int, earliest_ms: int
) -> DataFrame:
    """Late events as ``ops.late_session_events`` rows, each with the emitted session it falls within the gap of.

    ``earliest_ms``: the earliest late event's time; only the session dates it can reach are read
    (a session touched ends within the gap of the event).
    """
    since = (_utc(earliest_ms) - timedelta(days=1)).date()
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


def show_state(argv: list[str] | None = None) -> None:
    """Print what the sessions query holds in its state: for debugging, without touching it.

    Usage: ``spark-submit ... jobs/session_state.py [--user USER_ID] [--lakehouse-root DIR]``
    """
    import argparse

    parser = argparse.ArgumentParser(description=show_state.__doc__.splitlines()[0])
    parser.add_argument("--lakehouse-root", help="default: $LAKEHOUSE_ROOT")
    parser.add_argument("--user", help="show this user's open sessions")
    args = parser.parse_args(argv)
    table = next(t for t in catalog.tasks() if t.write is Write.SESSIONS)
    target = Lakehouse.from_env(args.lakehouse_root).table(table.name)
    checkpoint = target.checkpoint(target.current_generation())
    if not (Path(checkpoint) / "state").is_dir():
        raise ConfigError(
            f"{table.name}: no state in {checkpoint} yet: run the {table.task} task first"
        )
    spark = build_spark_session("session_state")
    spark.read.format("state-metadata").load(checkpoint).select(
        "operatorName", "numPartitions", "minBatchId", "maxBatchId"
    ).show(truncate=False)
    opened = table_rows(open_sessions_in_state(spark, checkpoint), with_closes_at=True)
    figures = opened.agg(
        F.count("*").alias("sessions"),
        F.countDistinct("user_id").alias("users"),
        F.min("session_start").alias("oldest_start"),
        F.max("session_end").alias("newest_event"),
    ).first()
    watermark = checkpoint_watermark_ms(checkpoint)
    print(
        f"{table.name}: checkpoint {checkpoint}\n  watermark {_iso(watermark) if watermark is not None else 'none'}; "
        f"{figures.sessions} open session(s) of {figures.users} user(s); oldest start {figures.oldest_start}, "
        f"newest event {figures.newest_event}"
    )
    if args.user:
        opened.where(F.col("user_id") == args.user).orderBy("session_start").show(truncate=False)
