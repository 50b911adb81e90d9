"""The generator drips deterministically hour by hour and its users act in sessions; the oracle
agrees with its manifest and computes sessions."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from lakehouse.config import Lakehouse
from lakehouse_tools.generator import Disorder, write_campaigns, write_hours
from lakehouse_tools.oracle import (
    GOLD,
    HOUR_MS,
    SESSION_GAP_MS,
    WATERMARK_DELAY_MS,
    Expected,
    expected_from_landing,
    expected_from_lines,
)

START = datetime(2026, 11, 20, 0, tzinfo=UTC)


def landing_files(lakehouse: Lakehouse) -> dict[str, bytes]:
    root = Path(lakehouse.landing_events)
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("rate", [0.05, 2])  # at 2 events/s many users come back across the hour
def test_hourly_drip_equals_generating_all_hours_at_once(tmp_path, rate):
    at_once, drip = Lakehouse(str(tmp_path / "a")), Lakehouse(str(tmp_path / "b"))
    write_hours(at_once, START, 3, events_per_second=rate, seed=3)
    write_hours(drip, START, 2, events_per_second=rate, seed=3)
    write_hours(drip, START.replace(hour=2), 1, events_per_second=rate, seed=3)
    # Re-running an hour that exists writes nothing new (no duplicate files for bronze to ingest).
    write_hours(drip, START, 1, events_per_second=rate, seed=3)

    assert landing_files(at_once) == landing_files(drip)
    assert len(landing_files(drip)) == 3 * 4
    assert not [p for p in Path(drip.landing_events).rglob(".*")], "temporary files left behind"


def test_seed_changes_the_data(tmp_path):
    one, two = Lakehouse(str(tmp_path / "a")), Lakehouse(str(tmp_path / "b"))
    write_hours(one, START, 1, events_per_second=0.05, seed=1)
    write_hours(two, START, 1, events_per_second=0.05, seed=2)
    assert landing_files(one) != landing_files(two)


def test_oracle_agrees_with_the_generators_manifest(tmp_path):
    lakehouse = Lakehouse(str(tmp_path / "lh"))
    disorder = Disorder(
        jitter_seconds=5, late_fraction=0.05, duplicate_fraction=0.05, malformed_fraction=0.05
    )
    write_campaigns(lakehouse, seed=5)
    manifests = write_hours(lakehouse, START, 2, events_per_second=0.2, seed=5, disorder=disorder)

    expected = expected_from_landing(lakehouse.landing_events, lakehouse.landing_campaigns)
    assert expected.lines == sum(m.lines for m in manifests)
    assert len(expected.events) == sum(m.unique_events for m in manifests)
    assert expected.duplicates == sum(m.duplicates for m in manifests)
    assert sum(expected.quarantined.values()) == sum(m.malformed for m in manifests) > 0
    late = sum(m.late for m in manifests)
    assert late > 0
    stored = json.loads((Path(lakehouse.root) / "landing/manifests/2026-11-20T00.json").read_text())
    assert stored["lines"] == manifests[0].lines


# --------------------------------------------------------------------------------------------
# Users act in bursts: real sessions, from a generator that still drips hour by hour


def test_users_act_in_bursts_that_make_multi_event_single_event_and_cross_hour_sessions(tmp_path):
    lakehouse = Lakehouse(str(tmp_path / "lh"))
    write_campaigns(lakehouse, seed=7)
    manifests = write_hours(lakehouse, START, 3, events_per_second=2, seed=7)
    assert all(m.unique_events + m.malformed == 7200 for m in manifests), (
        "an hour holds exactly rate * 3600 events"
    )

    sessions = expected_from_landing(
        lakehouse.landing_events, lakehouse.landing_campaigns
    ).sessions()
    sizes = Counter(session["events"] for session in sessions)
    crossing = [s for s in sessions if s["start_millis"] // HOUR_MS != s["end_millis"] // HOUR_MS]
    # Figures of this sample: 1,598 sessions of 855 users, 211 of one event, median 8 events,
    # 218 across an hour boundary (181 of them closed).
    assert 400 * 3 <= len(sessions) <= 700 * 3
    assert 0.05 <= sizes[1] / len(sessions) <= 0.25, (
        "single-event sessions (one-event bursts, late events)"
    )
    assert sum(n for size, n in sizes.items() if size >= 5) / len(sessions) >= 0.5, (
        "most sessions are bursts"
    )
    assert 0.05 <= len(crossing) / len(sessions) <= 0.25 and any(s["closed"] for s in crossing)
    # A user's sessions are tens of minutes to hours apart, not a uniform drizzle.
    by_user: dict[str, list[dict]] = {}
    for session in sorted(sessions, key=lambda s: s["start_millis"]):
        by_user.setdefault(session["user_id"], []).append(session)
    gaps = sorted(
        b["start_millis"] - a["end_millis"]
        for user in by_user.values()
        for a, b in zip(user, user[1:])
    )
    assert gaps and SESSION_GAP_MS <= gaps[len(gaps) // 2] <= 3 * HOUR_MS


# --------------------------------------------------------------------------------------------
# The oracle's sessions, on hand-built lines

T0 = 1_763_596_800_000  # 2025-11-20T00:00Z
MINUTE = 60_000


def sessions_of(tmp_path: Path, events: list[tuple]) -> Expected:
    """The oracle over lines of (event_id, user_id, millis[, ad_id[, event_type]]); ad-N is in campaign c-N."""
    campaigns = tmp_path / "campaigns.csv"
    campaigns.write_text("ad_id,campaign_id\n" + "".join(f"ad-{n},c-{n}\n" for n in range(1, 6)))
    lines = []
    for event_id, user_id, millis, *rest in events:
        ad_id, event_type = (*rest, *("ad-1", "view")[len(rest) :])
        lines.append(
            json.dumps(
                {
                    "event_id": event_id,
                    "user_id": user_id,
                    "page_id": "p",
                    "ad_id": ad_id,
                    "ad_type": "banner",
                    "event_type": event_type,
                    "event_time": str(millis),
                    "ip_address": "10.0.0.1",
                }
            )
        )
    expected = expected_from_lines(lines, campaigns)
    assert not expected.quarantined, "a hand-built line is invalid"
    return expected


def spans(expected: Expected) -> list[tuple[str, int, int, int]]:
    return sorted(
        (s["user_id"], s["start_millis"] - T0, s["end_millis"] - T0, s["events"])
        for s in expected.sessions()
    )


def test_a_gap_of_exactly_thirty_minutes_starts_a_new_session_and_one_millisecond_less_does_not(
    tmp_path,
):
    split = sessions_of(tmp_path, [("a", "u", T0), ("b", "u", T0 + SESSION_GAP_MS)])
    kept = sessions_of(tmp_path, [("a", "u", T0), ("b", "u", T0 + 29 * MINUTE + 59_999)])
    assert spans(split) == [("u", 0, 0, 1), ("u", SESSION_GAP_MS, SESSION_GAP_MS, 1)]
    assert spans(kept) == [("u", 0, 29 * MINUTE + 59_999, 2)]


def test_lines_in_any_order_give_the_same_sessions(tmp_path):
    events = [
        (
            f"e{m:03d}",
            f"u{m % 2}",
            T0 + m * MINUTE,
            f"ad-{m % 5 + 1}",
            ("view", "click", "purchase")[m % 3],
        )
        for m in (0, 10, 25, 26, 60, 70, 71, 99, 128, 200, 229, 258)
    ]
    in_order = sessions_of(tmp_path, events)
    for seed in range(5):
        shuffled = sessions_of(tmp_path, random.Random(seed).sample(events, len(events)))
        assert sorted_rows(shuffled) == sorted_rows(in_order)
        assert sorted_rows(shuffled, "gold.open_sessions") == sorted_rows(
            in_order, "gold.open_sessions"
        )
    assert spans(in_order) == [
        ("u0", 0, 26 * MINUTE, 3),
        ("u0", 60 * MINUTE, 70 * MINUTE, 2),
        ("u0", 128 * MINUTE, 128 * MINUTE, 1),
        ("u0", 200 * MINUTE, 200 * MINUTE, 1),
        ("u0", 258 * MINUTE, 258 * MINUTE, 1),
        ("u1", 25 * MINUTE, 25 * MINUTE, 1),
        ("u1", 71 * MINUTE, 99 * MINUTE, 2),
        ("u1", 229 * MINUTE, 229 * MINUTE, 1),
    ]


def sorted_rows(expected: Expected, table: str = "gold.user_sessions") -> list[tuple]:
    return sorted(tuple(row.items()) for row in expected.rows(table))


def test_a_user_with_one_event_has_one_session_of_zero_duration_and_the_rows_columns(tmp_path):
    expected = sessions_of(
        tmp_path, [("only", "u", T0 + 5 * MINUTE, "ad-3", "click"), ("x", "v", T0 + 2 * HOUR_MS)]
    )
    (row,) = [row for row in expected.user_sessions_rows() if row["user_id"] == "u"]
    assert row == {
        "session_id": hashlib.md5(f"u/{T0 + 5 * MINUTE}".encode()).hexdigest(),
        "user_id": "u",
        "session_start": datetime(2025, 11, 20, 0, 5),
        "session_end": datetime(2025, 11, 20, 0, 5),
        "duration_seconds": 0.0,
        "events": 1,
        "views": 0,
        "clicks": 1,
        "purchases": 0,
        "distinct_ads": 1,
        "distinct_campaigns": 1,
        "first_campaign_id": "c-3",
        "last_campaign_id": "c-3",
        "session_date": date(2025, 11, 20),
    }
    assert isinstance(row["duration_seconds"], float)


def test_first_and_last_campaign_follow_event_time_then_event_id_and_distinct_counts_ignore_repeats(
    tmp_path,
):
    expected = sessions_of(
        tmp_path,
        [
            ("b", "u", T0, "ad-2"),
            ("a", "u", T0, "ad-1"),
            ("y", "u", T0 + 1500, "ad-3", "purchase"),
            ("z", "u", T0 + 1500, "ad-4", "click"),
            ("w", "u", T0 + 1000, "ad-1"),
            ("late", "v", T0 + 3 * HOUR_MS),
        ],
    )
    (row,) = [row for row in expected.user_sessions_rows() if row["user_id"] == "u"]
    assert (row["first_campaign_id"], row["last_campaign_id"]) == ("c-1", "c-4")
    assert (row["events"], row["views"], row["clicks"], row["purchases"]) == (5, 3, 1, 1)
    assert (row["distinct_ads"], row["distinct_campaigns"], row["duration_seconds"]) == (4, 4, 1.5)


def test_a_session_is_closed_when_its_end_plus_the_gap_reaches_the_watermark(tmp_path):
    # The watermark is the newest event time minus 10 minutes: here "u"'s end + 30 minutes exactly.
    at_boundary = T0 + SESSION_GAP_MS + WATERMARK_DELAY_MS
    closed = sessions_of(tmp_path, [("a", "u", T0), ("b", "newest", at_boundary)])
    assert [row["user_id"] for row in closed.user_sessions_rows()] == ["u"]
    (still_open,) = closed.open_sessions_rows()
    assert still_open["user_id"] == "newest"
    assert still_open["closes_at"] == datetime(2025, 11, 20, 1, 10)

    just_before = sessions_of(tmp_path, [("a", "u", T0), ("b", "newest", at_boundary - 1)])
    assert just_before.user_sessions_rows() == []
    assert sorted(row["user_id"] for row in just_before.open_sessions_rows()) == ["newest", "u"]
    assert {"gold.user_sessions", "gold.open_sessions"} <= set(GOLD)
    assert (
        sessions_of(tmp_path, []).rows("gold.user_sessions")
        == sessions_of(tmp_path, []).rows("gold.open_sessions")
        == []
    )


def test_the_oracle_reads_through_a_symlinked_hour_folder_as_bronze_does(tmp_path):
    from lakehouse_tools.oracle import landed_contents

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "part-0000.jsonl").write_bytes(b'{"a": 1}\n{"a": 2}\n')
    day = tmp_path / "events" / "2026-11-20"
    day.mkdir(parents=True)
    (day / "01").symlink_to(elsewhere)
    (day / "loop").symlink_to(tmp_path / "events")  # a link back up is read once, not forever
    assert landed_contents(tmp_path / "events") == [[b'{"a": 1}', b'{"a": 2}']]
