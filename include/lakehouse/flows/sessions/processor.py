"""The stateful processor: users' open sessions in state, by bucket of users, emitted when the watermark closes them."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from lakehouse.tables.gold_user_sessions import (
    SESSION_GAP_MS,
    Session,
    add_events,
)

SESSION_STATE = StructType(
    [StructField(name, LongType()) for name in ("start_ms", "end_ms", "first_ms")]
    + [StructField(name, StringType()) for name in ("first_event_id", "first_campaign_id")]
    + [StructField("last_ms", LongType())]
    + [StructField(name, StringType()) for name in ("last_event_id", "last_campaign_id")]
    + [StructField(name, LongType()) for name in ("events", "views", "clicks", "purchases")]
    + [StructField(name, ArrayType(StringType())) for name in ("ads", "campaigns")]
)
USER_STATE = StructType(
    [StructField("user_id", StringType()), StructField("sessions", ArrayType(SESSION_STATE))]
)
STATE_SCHEMA = StructType(
    [StructField("users", ArrayType(USER_STATE)), StructField("timer_ms", LongType())]
)
STATE_NAME = "open_sessions"
# The query's key: a bucket of users (a hash of user_id), not the user. Each state or timer call
# is a round trip between the Python worker and the JVM's state server, a few per key and batch;
# per user they were most of the query's cost (1M events: some 40k users, issue 39). Per bucket
# they are a few thousand per batch, and a bucket's value (its users' open sessions) stays small.
USER_BUCKETS = 1024
# Raised with every change the checkpoint's state cannot take (the state schema, the gap, the
# meaning of a field): the run then refuses to start and names the full refresh that rebuilds it.
# 2: one value per user (sessions and timer) instead of a list of sessions.
# 3: one value per bucket of users (USER_BUCKETS): each user's sessions, the bucket's timer.
STATE_VERSION = 3

# What the processor and the batch form emit: kind "session" (closed), "open" or "late" (an event).
OUTPUT_SCHEMA = (
    "kind STRING, user_id STRING, start_ms BIGINT, end_ms BIGINT, events BIGINT, views BIGINT, clicks BIGINT, "
    "purchases BIGINT, distinct_ads BIGINT, distinct_campaigns BIGINT, first_campaign_id STRING, "
    "last_campaign_id STRING, event_id STRING, event_ms BIGINT, watermark_ms BIGINT"
)
OUTPUT_COLUMNS = [part.split()[0] for part in OUTPUT_SCHEMA.split(", ")]
OutputRow = Row(*OUTPUT_COLUMNS)
EVENT_FIELDS = ["event_ms", "event_id", "event_type", "ad_id", "campaign_id"]
# What the processor reads: a user's events of one input partition of a micro-batch, as lists
# (:func:`events_per_user`), one list per field in the order of EVENT_FIELDS.
EVENTS_PER_USER_SCHEMA = "bucket INT, user_id STRING, " + ", ".join(
    f"{name} ARRAY<{'BIGINT' if name == 'event_ms' else 'STRING'}>" for name in EVENT_FIELDS
)


def events_per_user(batches):
    """A partition's events (Arrow batches of ``user_id`` and EVENT_FIELDS) -> one row per user, the fields as lists.

    For ``mapInArrow`` before the stateful processor, grouped by Arrow in C++: the processor then
    receives one row per user and input partition instead of one per event. PySpark hands a
    row-based processor each cell as a Python object made on its own, and those conversions, one
    per event and field, were most of the query's Python time (issue 39); a list converts in one
    call.
    """
    import pyarrow as pa

    batches = list(batches)
    if not batches:
        return
    events = pa.Table.from_batches(batches)
    if events.num_rows == 0:
        return
    grouped = events.group_by(["bucket", "user_id"], use_threads=False).aggregate(
        [(name, "list") for name in EVENT_FIELDS]
    )
    per_user = pa.table(
        [
            grouped["bucket"],
            grouped["user_id"],
            *(grouped[f"{name}_list"] for name in EVENT_FIELDS),
        ],
        names=["bucket", "user_id", *EVENT_FIELDS],
    )
    yield from per_user.to_batches(max_chunksize=1024)


def user_bucket(user_id: Column) -> Column:
    """The query's key for a user: one of USER_BUCKETS, a hash of the user id (Spark's, stable across runs)."""
    return F.pmod(F.xxhash64(user_id), F.lit(USER_BUCKETS)).cast("int")


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
    """Per bucket of users: their open sessions in state, a timer at the earliest close, closed sessions emitted once.

    Row-based (``transformWithState``): a bucket's events arrive as rows of one user's events
    each, as lists (:func:`events_per_user`), and what it emits leaves as rows, without a pandas
    frame per key each way.
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.open = handle.getValueState(STATE_NAME, STATE_SCHEMA)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        on_time: dict[str, list[tuple]] = {}
        late = []
        for row in rows:  # EVENTS_PER_USER_SCHEMA: a user's events of one input partition
            user_events = on_time.setdefault(row.user_id, [])
            for event in zip(
                row.event_ms, row.event_id, row.event_type, row.ad_id, row.campaign_id
            ):
                if event[0] < watermark:
                    late.append(OutputRow(*_late(row.user_id, event, watermark)))
                else:
                    user_events.append(event)
        if any(on_time.values()):
            users, timer = self._load()
            for user_id, events in on_time.items():
                if events:
                    users[user_id] = add_events(users.get(user_id, []), events)
            self._keep(users, timer)
        yield from late

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        users, timer = self._load()
        # Spark deletes the timer that fired once this returns.
        if timer == expiredTimerInfo.getExpiryTimeInMs():
            timer = None
        closed = []
        for user_id, sessions in list(users.items()):
            kept = []
            for s in sessions:
                if s.closed_at(watermark):
                    closed.append(OutputRow(*_output("session", user_id, s)))
                else:
                    kept.append(s)
            if kept:
                users[user_id] = kept
            else:
                del users[user_id]
        self._keep(users, timer)
        yield from closed

    def _load(self) -> tuple[dict[str, list[Session]], int | None]:
        """The bucket's users' open sessions and its registered timer (none: a bucket new to the state)."""
        value = self.open.get()
        if value is None:
            return {}, None
        return {user[0]: [_from_state(s) for s in user[1]] for user in value[0]}, value[1]

    def _keep(self, users: dict[str, list[Session]], timer: int | None) -> None:
        """Store ``users``' sessions, and move the registered ``timer`` to their earliest close if it moved."""
        ends = [s.end for sessions in users.values() for s in sessions]
        wanted = min(ends) + SESSION_GAP_MS if ends else None
        if timer is not None and timer != wanted:
            self.handle.deleteTimer(timer)
        if wanted is not None and wanted != timer:
            self.handle.registerTimer(wanted)
        if users:
            self.open.update(
                (
                    [
                        (user_id, [_to_state(s) for s in sessions])
                        for user_id, sessions in sorted(users.items())
                    ],
                    wanted,
                )
            )
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
