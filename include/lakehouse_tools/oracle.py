"""The independent oracle: expected silver and gold computed in plain Python from raw event lines.

It shares no code with the Spark transformations (only the published field names and codes of the
event contract), so a bug there cannot hide here: tests and the demo compare the Delta tables
with what this module computes straight from the bytes the producer wrote.

Every gold table has its expectation here, as whole rows (:meth:`Expected.rows`); adding a gold
table means adding its method to ``GOLD`` (a test checks that every gold table of the catalog has one).
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterable

REQUIRED = ("event_id", "user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time", "ip_address")
EVENT_TYPES = {"view", "click", "purchase"}
AD_TYPES = {"banner", "modal", "sponsored-search", "mail", "mobile"}
WINDOW_MS = 10_000
HOUR_MS = 3_600_000


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

    def campaign_hourly(self) -> dict[tuple[str, datetime], tuple[int, int, int, int, float | None]]:
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
                "campaign_id": campaign, "window_start": start, "window_end": start + timedelta(seconds=10),
                "views": views, "hour_start": _hour(start), "event_date": start.date(),
            }  # fmt: skip
            for (campaign, start), views in self.campaign_windows().items()
        ]

    def campaign_hourly_rows(self) -> list[dict]:
        columns = ("views", "clicks", "purchases", "distinct_users", "ctr")
        return [
            {"campaign_id": campaign, "hour_start": hour, **dict(zip(columns, values)), "event_date": hour.date()}
            for (campaign, hour), values in self.campaign_hourly().items()
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
}


def _hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def _utc(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).replace(tzinfo=None)


def _reason(line: str, ads: dict[str, str]) -> str | None:
    if not line.strip():
        return "empty_line"
    try:
        event = json.loads(line)
    except ValueError:
        return "malformed_json"
    if not isinstance(event, dict):
        return "malformed_json"
    if any(event.get(name) is None for name in REQUIRED):
        return "missing_required_field"
    if not re.fullmatch(r"[0-9]{1,15}", str(event["event_time"])):
        return "invalid_event_time"
    if event["event_type"] not in EVENT_TYPES:
        return "unknown_event_type"
    if event["ad_type"] not in AD_TYPES:
        return "unknown_ad_type"
    if event["ad_id"] not in ads:
        return "unknown_ad_id"
    return None


def expected_from_landing(landing_root: str | Path, campaigns_csv: str | Path) -> Expected:
    """Expected tables from every ``*.jsonl`` file under ``landing_root`` (hidden files excluded)."""
    files = sorted(p for p in Path(landing_root).rglob("*.jsonl") if not p.name.startswith("."))
    lines = (line for path in files for line in path.read_bytes().decode("utf-8", errors="replace").splitlines())
    return expected_from_lines(lines, campaigns_csv)


def expected_from_lines(lines: Iterable[str], campaigns_csv: str | Path) -> Expected:
    """Expected tables from raw event lines, e.g. the records a producer sent to Kafka."""
    with open(campaigns_csv, newline="", encoding="utf-8") as handle:
        ads = {row["ad_id"]: row["campaign_id"] for row in csv.DictReader(handle)}
    expected = Expected()
    for line in lines:
        expected.lines += 1
        reason = _reason(line, ads)
        if reason:
            expected.quarantined[reason] += 1
            continue
        event = json.loads(line)
        if event["event_id"] in expected.events:
            expected.duplicates += 1
            continue
        expected.events[event["event_id"]] = {
            "campaign_id": ads[event["ad_id"]],
            "millis": int(event["event_time"]),
            "event_type": event["event_type"],
            "user_id": event["user_id"],
        }
    return expected
