"""gold.user_sessions: a user's activity split by 30 minutes of event-time inactivity, one row per closed session.

Sessions cross hour boundaries, so they cannot be recomputed hour by hour like the other gold
tables: a stateful streaming query keeps each user's open sessions (``lakehouse.flows.sessions``)
and emits a session once, when the watermark passes its last event plus the gap. This module holds
the session logic itself, in plain Python, so that the streaming processor and the batch form
(backfills, reconciling late events) apply the very same functions.

Semantics (the oracle states them independently):
- a user's events sorted by (event_time, event_id) belong to one session while each follows the
  previous one by less than :data:`SESSION_GAP_MS`; a gap of exactly 30 minutes starts a new one;
- the watermark is the newest event time seen minus :data:`WATERMARK_DELAY_MS`; a session is
  closed when its last event plus the gap is at or behind the watermark, open otherwise;
- an event behind the watermark is late: the stream records it and does not apply it to state
  (it could bridge sessions already emitted); the batch form reconciles that user's sessions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lakehouse.catalog import Retention, Write, side_table, table
from lakehouse.tables import F

SESSION_GAP_MS = 30 * 60 * 1000
WATERMARK_DELAY = "10 minutes"
WATERMARK_DELAY_MS = 10 * 60 * 1000

SCHEMA = """
    session_id STRING NOT NULL, user_id STRING NOT NULL, session_start TIMESTAMP NOT NULL,
    session_end TIMESTAMP NOT NULL, duration_seconds DOUBLE NOT NULL, events BIGINT NOT NULL,
    views BIGINT NOT NULL, clicks BIGINT NOT NULL, purchases BIGINT NOT NULL, distinct_ads BIGINT NOT NULL,
    distinct_campaigns BIGINT NOT NULL, first_campaign_id STRING, last_campaign_id STRING, session_date DATE
"""
# The sessions still open at the end of the last run ("who is active now"): replaced by every run.
OPEN_SCHEMA = SCHEMA + ", closes_at TIMESTAMP"
# Events that arrived behind the watermark: the stream could not apply them; the batch form did.
LATE_SCHEMA = """
    event_id STRING, user_id STRING, event_time TIMESTAMP, batch_id BIGINT, watermark TIMESTAMP,
    touches_session_id STRING, recorded_at TIMESTAMP, reconciled_at TIMESTAMP, reconciled_by STRING
"""
# The columns of silver a session is computed from, in the order the functions here read them.
EVENT_COLUMNS = ("user_id", "event_time", "event_id", "event_type", "ad_id", "campaign_id")


@table(
    "gold.user_sessions",
    upstream=["silver.ad_events"],
    schema=SCHEMA,
    partition_by=["session_date"],
    write=Write.SESSIONS,
    batch=True,
    key="session_id",
    event_time="session_start",
)
def user_session_events(silver):
    """Silver reduced to what sessions need, event time as epoch millis (what the session logic reads)."""
    return silver.select(
        "user_id", F.unix_millis("event_time").alias("event_ms"), *EVENT_COLUMNS[2:]
    )


side_table(
    "gold.open_sessions",
    written_by="gold.user_sessions",
    role="open",
    schema=OPEN_SCHEMA,
    write=Write.OVERWRITE,
)
side_table(
    "ops.late_session_events",
    written_by="gold.user_sessions",
    role="late",
    schema=LATE_SCHEMA,
    # A pending late event stays until a run reconciles it; a reconciled one is kept a month.
    retention=Retention("recorded_at", days=30, keep="reconciled_at IS NULL"),
)


# --------------------------------------------------------------------------------------------
# The session logic (plain Python: the streaming processor and the batch form both call it)


@dataclass
class Session:
    """One user's session so far. ``first``/``last`` are (event_ms, event_id, campaign_id)."""

    start: int
    end: int
    first: tuple[int, str, str]
    last: tuple[int, str, str]
    events: int = 0
    views: int = 0
    clicks: int = 0
    purchases: int = 0
    ads: set[str] = field(default_factory=set)
    campaigns: set[str] = field(default_factory=set)

    @classmethod
    def of_event(
        cls, event_ms: int, event_id: str, event_type: str, ad_id: str, campaign_id: str
    ) -> Session:
        mark = (event_ms, event_id, campaign_id)
        return cls(
            event_ms,
            event_ms,
            mark,
            mark,
            1,
            int(event_type == "view"),
            int(event_type == "click"),
            int(event_type == "purchase"),
            {ad_id},
            {campaign_id},
        )

    def merged(self, other: Session) -> Session:
        return Session(
            min(self.start, other.start),
            max(self.end, other.end),
            min(self.first, other.first),
            max(self.last, other.last),
            self.events + other.events,
            self.views + other.views,
            self.clicks + other.clicks,
            self.purchases + other.purchases,
            self.ads | other.ads,
            self.campaigns | other.campaigns,
        )

    def closed_at(self, watermark_ms: int) -> bool:
        return self.end + SESSION_GAP_MS <= watermark_ms


def add_events(sessions: list[Session], events: Iterable[tuple]) -> list[Session]:
    """A user's sessions after ``events`` (tuples of :data:`EVENT_COLUMNS` without user_id, time in ms).

    Order does not matter: sorted by start, a session merges into the one before it when it
    begins less than the gap after that one's last event; so an event falling between two
    sessions bridges them into one.

    One pass, folding into a fresh accumulator per session (``sessions`` are not modified): the
    stream calls this for every event, and a new Session per event and per merge (sets copied
    each time) was most of the processor's Python time (issue 39).
    """
    items = sorted(
        [(s.start, 1, s) for s in sessions] + [(event[0], 0, event) for event in events],
        key=lambda item: item[0],
    )
    merged: list[Session] = []
    current: Session | None = None
    for start, is_session, item in items:
        if current is None or start - current.end >= SESSION_GAP_MS:
            current = Session(start, start, None, None)  # first and last: from its first item
            merged.append(current)
        if is_session:
            current.end = max(current.end, item.end)
            current.first = item.first if current.first is None else min(current.first, item.first)
            current.last = item.last if current.last is None else max(current.last, item.last)
            current.events += item.events
            current.views += item.views
            current.clicks += item.clicks
            current.purchases += item.purchases
            current.ads |= item.ads
            current.campaigns |= item.campaigns
        else:
            event_ms, event_id, event_type, ad_id, campaign_id = item
            mark = (event_ms, event_id, campaign_id)
            if event_ms > current.end:
                current.end = event_ms
            if current.first is None or mark < current.first:
                current.first = mark
            if current.last is None or mark > current.last:
                current.last = mark
            current.events += 1
            if event_type == "view":
                current.views += 1
            elif event_type == "click":
                current.clicks += 1
            elif event_type == "purchase":
                current.purchases += 1
            current.ads.add(ad_id)
            current.campaigns.add(campaign_id)
    return merged
