"""The independent oracle: expected silver and gold computed in plain Python from raw event lines.

It shares no code with the Spark transformations (only the published field names and codes of the
event contract), so a bug there cannot hide here: tests and the demo compare the Delta tables
with what this module computes straight from the bytes the producer wrote.

Every gold table has its expectation here, as whole rows (:meth:`Expected.rows`); adding a gold
table means adding its method to ``GOLD`` (a test checks that every gold table of the catalog has one).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse.files import lake_path
from lakehouse_tools.oracle_lines import file_lines, line_verdict

WINDOW_MS = 10_000
HOUR_MS = 3_600_000
SESSION_GAP_MS = 30 * 60 * 1000  # inactivity that ends a user's session
WATERMARK_DELAY_MS = 10 * 60 * 1000  # how far behind the newest event time the watermark trails


@dataclass
class Expected:
    """What the lakehouse should hold after processing a landing zone."""

    lines: int = 0
    events: dict[str, dict] = field(default_factory=dict)  # event_id -> event (first seen)
    duplicates: int = 0
    quarantined: Counter = field(default_factory=Counter)  # reason -> lines

    def campaign_windows(self) -> dict[tuple[str, datetime], int]:
        """(campaign_id, window_start) -> views."""
        views: Counter = Counter()
        for event in self.events.values():
            if event["event_type"] == "view":
                views[(event["campaign_id"], _utc(event["millis"] // WINDOW_MS * WINDOW_MS))] += 1
        return dict(views)

    def campaign_hourly(
        self,
    ) -> dict[tuple[str, datetime], tuple[int, int, int, int, float | None]]:
        """(campaign_id, hour_start) -> (views, clicks, purchases, distinct_users, ctr)."""
        counts: dict = defaultdict(Counter)
        users: dict = defaultdict(set)
        for event in self.events.values():
            key = (event["campaign_id"], _utc(event["millis"] // HOUR_MS * HOUR_MS))
            counts[key][event["event_type"]] += 1
            users[key].add(event["user_id"])
        return {
            key: (
                c["view"],
                c["click"],
                c["purchase"],
                len(users[key]),
                c["click"] / c["view"] if c["view"] else None,
            )
            for key, c in counts.items()
        }

    def campaign_windows_rows(self) -> list[dict]:
        return [
            {
                "campaign_id": campaign,
                "window_start": start,
                "window_end": start + timedelta(seconds=10),
                "views": views,
                "hour_start": _hour(start),
                "event_date": start.date(),
            }
            for (campaign, start), views in self.campaign_windows().items()
        ]

    def campaign_hourly_rows(self) -> list[dict]:
        columns = ("views", "clicks", "purchases", "distinct_users", "ctr")
        return [
            {
                "campaign_id": campaign,
                "hour_start": hour,
                **dict(zip(columns, values)),
                "event_date": hour.date(),
            }
            for (campaign, hour), values in self.campaign_hourly().items()
        ]

    def campaign_daily_rows(self) -> list[dict]:
        """Per campaign and UTC day: views, clicks, purchases, the day's distinct users, CTR."""
        counts: dict = defaultdict(Counter)
        users: dict = defaultdict(set)
        for event in self.events.values():
            key = (event["campaign_id"], _utc(event["millis"]).date())
            counts[key][event["event_type"]] += 1
            users[key].add(event["user_id"])
        return [
            {
                "campaign_id": campaign,
                "views": c["view"],
                "clicks": c["click"],
                "purchases": c["purchase"],
                "distinct_users": len(users[(campaign, day)]),
                "ctr": c["click"] / c["view"] if c["view"] else None,
                "event_date": day,
            }
            for (campaign, day), c in counts.items()
        ]

    def ad_type_hourly_rows(self) -> list[dict]:
        counts: dict = defaultdict(Counter)
        for event in self.events.values():
            counts[(event["ad_type"], _utc(event["millis"] // HOUR_MS * HOUR_MS))][
                event["event_type"]
            ] += 1
        return [
            {
                "ad_type": ad_type,
                "hour_start": hour,
                "views": c["view"],
                "clicks": c["click"],
                "purchases": c["purchase"],
                "ctr": c["click"] / c["view"] if c["view"] else None,
                "event_date": hour.date(),
            }
            for (ad_type, hour), c in counts.items()
        ]

    def ad_hourly_rows(self) -> list[dict]:
        counts: dict = defaultdict(Counter)
        for event in self.events.values():
            hour = _utc(event["millis"] // HOUR_MS * HOUR_MS)
            counts[(event["ad_id"], event["campaign_id"], hour)][event["event_type"]] += 1
        return [
            {
                "ad_id": ad_id,
                "campaign_id": campaign_id,
                "hour_start": hour,
                "views": c["view"],
                "clicks": c["click"],
                "purchases": c["purchase"],
                "ctr": c["click"] / c["view"] if c["view"] else None,
                "event_date": hour.date(),
            }
            for (ad_id, campaign_id, hour), c in counts.items()
        ]

    def sessions(self) -> list[dict]:
        """Every user's sessions, open or closed, each with ``closed`` and ``end_millis``.

        A user's events sorted by (millis, event_id) stay in one session while each follows the
        previous by less than the gap; a session is closed once its last event plus the gap is at
        or behind the watermark (the newest event time minus the delay).
        """
        by_user: dict[str, list[tuple[int, str, dict]]] = defaultdict(list)
        for event_id, event in self.events.items():
            by_user[event["user_id"]].append((event["millis"], event_id, event))
        if not by_user:
            return []
        watermark = max(event["millis"] for event in self.events.values()) - WATERMARK_DELAY_MS
        sessions = []
        for user_id, events in by_user.items():
            events.sort(key=lambda item: item[:2])
            run: list[dict] = []
            for index, (millis, _, event) in enumerate(events):
                run.append(event)
                if index + 1 == len(events) or events[index + 1][0] - millis >= SESSION_GAP_MS:
                    sessions.append(_session(user_id, run, watermark))
                    run = []
        return sessions

    def user_sessions_rows(self) -> list[dict]:
        return [_session_row(session) for session in self.sessions() if session["closed"]]

    def open_sessions_rows(self) -> list[dict]:
        return [
            {**_session_row(session), "closes_at": _utc(session["end_millis"] + SESSION_GAP_MS)}
            for session in self.sessions()
            if not session["closed"]
        ]

    def rows(self, table: str) -> list[dict]:
        """The expected rows of a gold table, each a dict of its columns."""
        if table not in GOLD:
            raise KeyError(f"The oracle has no expectation for {table}; add one to oracle.GOLD")
        return GOLD[table](self)


# The gold tables the oracle can compute, by table name.
GOLD = {
    "gold.campaign_windows": Expected.campaign_windows_rows,
    "gold.campaign_hourly": Expected.campaign_hourly_rows,
    "gold.campaign_daily": Expected.campaign_daily_rows,
    "gold.ad_type_hourly": Expected.ad_type_hourly_rows,
    "gold.ad_hourly": Expected.ad_hourly_rows,
    "gold.user_sessions": Expected.user_sessions_rows,
    "gold.open_sessions": Expected.open_sessions_rows,
}


def _session(user_id: str, events: list[dict], watermark: int) -> dict:
    """One session of ``user_id`` from its events, in (millis, event_id) order."""
    start, end = events[0]["millis"], events[-1]["millis"]
    kinds = Counter(event["event_type"] for event in events)
    return {
        "session_id": hashlib.md5(f"{user_id}/{start}".encode()).hexdigest(),
        "user_id": user_id,
        "start_millis": start,
        "end_millis": end,
        "events": len(events),
        "views": kinds["view"],
        "clicks": kinds["click"],
        "purchases": kinds["purchase"],
        "distinct_ads": len({event["ad_id"] for event in events}),
        "distinct_campaigns": len({event["campaign_id"] for event in events}),
        "first_campaign_id": events[0]["campaign_id"],
        "last_campaign_id": events[-1]["campaign_id"],
        "closed": end + SESSION_GAP_MS <= watermark,
    }


def _session_row(session: dict) -> dict:
    start, end = _utc(session["start_millis"]), _utc(session["end_millis"])
    return {
        "session_id": session["session_id"],
        "user_id": session["user_id"],
        "session_start": start,
        "session_end": end,
        "duration_seconds": (session["end_millis"] - session["start_millis"]) / 1000,
        **{
            name: session[name]
            for name in (
                "events",
                "views",
                "clicks",
                "purchases",
                "distinct_ads",
                "distinct_campaigns",
                "first_campaign_id",
                "last_campaign_id",
            )
        },
        "session_date": start.date(),
    }


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _utc(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC).replace(tzinfo=None)


# The event contract as silver enforces it (README, "Bad input"), restated here without its code.
def expected_from_landing(
    landing_root: str | Path, campaigns_csv: str | Path, ingested_at: datetime | None = None
) -> Expected:
    """Expected tables from every ``*.jsonl`` and ``*.jsonl.gz`` file under ``landing_root``, at
    any depth (hidden excluded).

    Lines are read as bytes, as Spark's line reader splits them (a ``.jsonl.gz`` file
    decompressed); ``ingested_at`` as in :func:`expected_from_lines`.
    """
    lines = (line for data in landed_contents(landing_root) for line in data)
    return expected_from_lines(lines, campaigns_csv, ingested_at)


def _files_under(root) -> list:
    """Every file under ``root``, through symlinked folders as Spark's listing goes (each real
    folder once: a link back up is not a loop here); on object storage, every object."""
    if not isinstance(root, Path):
        return [p for suffix in ("*.jsonl", "*.jsonl.gz") for p in root.rglob(suffix)]
    found, walked = [], set()
    for folder, folders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in walked:
            folders[:] = []
            continue
        walked.add(real)
        found += [Path(folder, name) for name in names]
    return found


def landed_contents(landing_root: str | Path) -> list[list[bytes]]:
    """The lines of each landing file bronze reads, in path order, each content once.

    The landing contract restated (README, "Bad input"): a ``.jsonl.gz`` file is read
    decompressed; a ``.jsonl`` file holding a gzip payload gives one line, its first; a file with
    the same bytes as an earlier one (renamed, moved, copied) gives none.
    """
    # Local or on object storage (the file access is shared with the jobs, no verdict is).
    root = lake_path(landing_root)  # as Spark's file source: no file or folder named .* or _*
    files = sorted(
        p
        for p in _files_under(root)
        if p.name.endswith((".jsonl", ".jsonl.gz"))
        and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    )
    contents, seen = [], set()
    for path in files:
        data = path.read_bytes()
        gzipped = path.name.endswith(".gz")
        identity = (gzipped, hashlib.sha256(data).hexdigest())
        if identity in seen:
            continue
        seen.add(identity)
        if gzipped:
            contents.append(file_lines(gzip.decompress(data)))
        elif data.startswith(b"\x1f\x8b"):
            contents.append(file_lines(data)[:1])
        else:
            contents.append(file_lines(data))
    return contents


def expected_from_lines(
    lines: Iterable[str | bytes | None],
    campaigns_csv: str | Path,
    ingested_at: datetime | None = None,
) -> Expected:
    """Expected tables from raw event lines, e.g. the records a producer sent to Kafka.

    A line is bytes (as read) or text; None is a record without a value. ``ingested_at`` (naive
    means UTC), when known, enables the check for events too far in the future.
    """
    with lake_path(campaigns_csv).open(newline="", encoding="utf-8") as handle:
        ads = {row["ad_id"]: row["campaign_id"] for row in csv.DictReader(handle)}
    expected = Expected()
    for line in lines:
        expected.lines += 1
        reason, event = line_verdict(line, ads, ingested_at)
        if reason:
            expected.quarantined[reason] += 1
            continue
        if event["event_id"] in expected.events:
            expected.duplicates += 1
            continue
        expected.events[event["event_id"]] = {
            "campaign_id": ads[event["ad_id"]],
            "ad_id": event["ad_id"],
            "ad_type": event["ad_type"],
            "millis": int(event["event_time"]),
            "event_type": event["event_type"],
            "user_id": event["user_id"],
        }
    return expected
