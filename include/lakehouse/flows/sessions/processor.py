"""The stateful processor: users' open sessions in state, by bucket of users, emitted when the watermark closes them."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from lakehouse.flows.sessions.fragments import (
    events_of,
    fragments_by_bucket,
    read_events,
    read_fragments,
)
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
# A bucket's users as JSON text (an array of USER_STATE; SQL reads it with from_json). A nested
# struct went through PySpark's per-field conversion and pickling on both sides at every state
# read and write, a third of the query's Python time at 1M events (issue 39); text costs one
# encode or decode in Python (orjson: the standard library's json took 5-10x as long) and one
# string in the JVM.
USERS_JSON_SCHEMA = ArrayType(USER_STATE)
STATE_SCHEMA = StructType(
    [StructField("users_json", StringType()), StructField("timer_ms", LongType())]
)
STATE_NAME = "open_sessions"
# Raised with every change the checkpoint's state cannot take (the state schema, the gap, the
# meaning of a field): the run then refuses to start and names the full refresh that rebuilds it.
# 2: one value per user (sessions and timer) instead of a list of sessions.
# 3: one value per bucket of users (USER_BUCKETS): each user's sessions, the bucket's timer.
# 4: the bucket's users as JSON text (USERS_JSON_SCHEMA) instead of a nested struct; 256 buckets.
STATE_VERSION = 4

# What the processor and the batch form emit: kind "session" (closed), "open" or "late" (an event).
OUTPUT_SCHEMA = (
    "kind STRING, user_id STRING, start_ms BIGINT, end_ms BIGINT, events BIGINT, views BIGINT, clicks BIGINT, "
    "purchases BIGINT, distinct_ads BIGINT, distinct_campaigns BIGINT, first_campaign_id STRING, "
    "last_campaign_id STRING, event_id STRING, event_ms BIGINT, watermark_ms BIGINT"
)
OUTPUT_COLUMNS = [part.split()[0] for part in OUTPUT_SCHEMA.split(", ")]
OUTPUT_ARROW = pa.schema(
    [
        (name, pa.string() if kind == "STRING" else pa.int64())
        for name, kind in (part.split() for part in OUTPUT_SCHEMA.split(", "))
    ]
)
OutputRow = Row(*OUTPUT_COLUMNS)


def _to_state(s: Session) -> dict:
    """A session as its state JSON object (SESSION_STATE's fields)."""
    return {
        "start_ms": s.start,
        "end_ms": s.end,
        "first_ms": s.first[0],
        "first_event_id": s.first[1],
        "first_campaign_id": s.first[2],
        "last_ms": s.last[0],
        "last_event_id": s.last[1],
        "last_campaign_id": s.last[2],
        "events": s.events,
        "views": s.views,
        "clicks": s.clicks,
        "purchases": s.purchases,
        "ads": sorted(s.ads),
        "campaigns": sorted(s.campaigns),
    }


def _from_state(state: dict) -> Session:
    return Session(
        state["start_ms"],
        state["end_ms"],
        (state["first_ms"], state["first_event_id"], state["first_campaign_id"]),
        (state["last_ms"], state["last_event_id"], state["last_campaign_id"]),
        state["events"],
        state["views"],
        state["clicks"],
        state["purchases"],
        set(state["ads"]),
        set(state["campaigns"]),
    )


def _from_fragment(fields: tuple) -> Session:
    """A session from a fragment's fields after user_id (FRAGMENT_COLUMNS)."""
    (
        start,
        end,
        first_id,
        first_campaign,
        last_id,
        last_campaign,
        events,
        views,
        clicks,
        purchases,
    ) = fields[:10]
    return Session(
        start,
        end,
        (start, first_id, first_campaign),
        (end, last_id, last_campaign),
        events,
        views,
        clicks,
        purchases,
        set(fields[10]),
        set(fields[11]),
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

    Row-based (``transformWithState``): a bucket's events arrive as its users' session fragments
    (:func:`session_fragments`), and what it emits leaves as rows, without a pandas frame per key
    each way. A fragment wholly at or after the watermark merges into the state as it is; one
    starting behind it is taken apart into its events, and those behind the watermark are late.
    """

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.open = handle.getValueState(STATE_NAME, STATE_SCHEMA)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        watermark = timerValues.getCurrentWatermarkInMs()
        fragments: dict[str, list[Session]] = {}
        events: dict[str, list[tuple]] = {}
        late = []
        for _, fragment_cell, events_cell in rows:  # FRAGMENTS_SCHEMA: one input partition's
            bucket_events, next_row = None, 0
            for user_id, *fields in read_fragments(fragment_cell):
                first_row, count = next_row, fields[6]  # its rows in the bucket's events
                next_row += count
                if fields[0] >= watermark:  # starts at or after the watermark: no event is late
                    fragments.setdefault(user_id, []).append(_from_fragment(fields))
                    continue
                if bucket_events is None:
                    bucket_events = read_events(events_cell)
                for event in events_of(bucket_events, first_row, count):
                    if event[0] < watermark:
                        late.append(OutputRow(*_late(user_id, event, watermark)))
                    else:
                        events.setdefault(user_id, []).append(event)
        if fragments or events:
            users, timer = self._load()
            for user_id in fragments.keys() | events.keys():
                users[user_id] = add_events(
                    users.get(user_id, []) + fragments.get(user_id, []), events.get(user_id, [])
                )
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
        users = orjson.loads(value[0])
        return {
            user["user_id"]: [_from_state(s) for s in user["sessions"]] for user in users
        }, value[1]

    def _keep(self, users: dict[str, list[Session]], timer: int | None) -> None:
        """Store ``users``' sessions, and move the registered ``timer`` to their earliest close if it moved."""
        ends = [s.end for sessions in users.values() for s in sessions]
        wanted = min(ends) + SESSION_GAP_MS if ends else None
        if timer is not None and timer != wanted:
            self.handle.deleteTimer(timer)
        if wanted is not None and wanted != timer:
            self.handle.registerTimer(wanted)
        if users:
            users_json = orjson.dumps(
                [
                    {"user_id": user_id, "sessions": [_to_state(s) for s in sessions]}
                    for user_id, sessions in sorted(users.items())
                ]
            ).decode()
            self.open.update((users_json, wanted))
        else:
            self.open.clear()

    def close(self) -> None:
        pass


def batch_sessions(events: DataFrame, watermark_ms: int) -> DataFrame:
    """The batch form: every user's sessions of ``events`` (user_id and EVENT_FIELDS), closed or open as
    of ``watermark_ms`` (OUTPUT_SCHEMA rows of kind "session" or "open").

    The stream's own steps: fragments cut by Arrow per input partition, then merged per bucket of
    users. A batch has no late events, so no fragment's events are needed.
    """
    return (
        fragments_by_bucket(events, with_events=False)
        .groupBy("bucket")
        .applyInArrow(_sessions_of_fragments(watermark_ms), OUTPUT_SCHEMA)
    )


def _sessions_of_fragments(watermark_ms: int):
    def per_bucket(cells):  # no type hints: applyInArrow's form with a whole table
        users: dict[str, list[Session]] = {}
        for cell in cells.column("fragments").to_pylist():
            for user_id, *fields in read_fragments(cell):
                users.setdefault(user_id, []).append(_from_fragment(fields))
        rows = [
            _output("session" if s.closed_at(watermark_ms) else "open", user_id, s)
            for user_id, fragments in users.items()
            for s in add_events(fragments, [])
        ]
        columns = zip(*rows, strict=True) if rows else ([] for _ in OUTPUT_COLUMNS)
        return pa.Table.from_arrays(
            [
                pa.array(list(values), type=field.type)
                for values, field in zip(columns, OUTPUT_ARROW, strict=True)
            ],
            schema=OUTPUT_ARROW,
        )

    return per_bucket


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
