"""The session logic shared by the streaming processor and the batch form, on hand-built events."""

from __future__ import annotations

import random

from lakehouse.tables.gold_user_sessions import SESSION_GAP_MS, Session, add_events

MINUTE = 60_000
T0 = 1_763_596_800_000  # 2025-11-20T00:00Z


def event(
    offset_ms: int, event_id: str, event_type: str = "view", ad: str = "ad-1", campaign: str = "c-1"
) -> tuple:
    return (T0 + offset_ms, event_id, event_type, ad, campaign)


def spans(sessions: list[Session]) -> list[tuple[int, int, int]]:
    return [(s.start - T0, s.end - T0, s.events) for s in sessions]


def test_a_gap_of_exactly_thirty_minutes_starts_a_new_session_and_one_millisecond_less_does_not():
    split = add_events([], [event(0, "a"), event(SESSION_GAP_MS, "b")])
    kept = add_events([], [event(0, "a"), event(SESSION_GAP_MS - 1, "b")])
    assert spans(split) == [(0, 0, 1), (SESSION_GAP_MS, SESSION_GAP_MS, 1)]
    assert spans(kept) == [(0, SESSION_GAP_MS - 1, 2)]


def test_a_user_with_one_event_has_one_session_of_zero_duration():
    (session,) = add_events([], [event(5 * MINUTE, "only", "click", "ad-9", "c-9")])
    assert (session.start, session.end, session.events, session.clicks, session.views) == (
        T0 + 5 * MINUTE,
    ) * 2 + (1, 1, 0)
    assert (session.first[2], session.last[2], session.ads, session.campaigns) == (
        "c-9",
        "c-9",
        {"ad-9"},
        {"c-9"},
    )


def test_events_in_any_order_and_in_any_split_across_batches_give_the_same_sessions():
    events = [
        event(
            m * MINUTE,
            f"e{m:03d}",
            random.Random(m).choice(["view", "click", "purchase"]),
            f"ad-{m % 4}",
            f"c-{m % 3}",
        )
        for m in (0, 10, 25, 70, 71, 99, 128, 200, 229, 258)
    ]
    whole = add_events([], events)
    assert spans(whole) == [
        (0, 25 * MINUTE, 3),
        (70 * MINUTE, 128 * MINUTE, 4),
        (200 * MINUTE, 258 * MINUTE, 3),
    ]
    for seed in range(20):
        shuffled = random.Random(seed).sample(events, len(events))
        cut = seed % len(events)
        in_two_batches = add_events(add_events([], shuffled[:cut]), shuffled[cut:])
        assert in_two_batches == whole


def test_an_out_of_order_event_bridges_two_open_sessions_into_one():
    apart = add_events([], [event(0, "a"), event(50 * MINUTE, "c")])
    assert len(apart) == 2
    (bridged,) = add_events(apart, [event(25 * MINUTE, "b", "purchase")])
    assert (bridged.start - T0, bridged.end - T0, bridged.events, bridged.purchases) == (
        0,
        50 * MINUTE,
        3,
        1,
    )


def test_first_and_last_campaign_follow_event_time_then_event_id_and_distinct_counts_ignore_repeats():
    (session,) = add_events(
        [],
        [
            event(0, "b", campaign="c-second"),
            event(0, "a", campaign="c-first"),
            event(MINUTE, "y", ad="ad-2", campaign="c-last-but-one"),
            event(MINUTE, "z", ad="ad-2", campaign="c-last"),
        ],
    )
    assert (session.first[2], session.last[2]) == ("c-first", "c-last")
    assert (len(session.ads), len(session.campaigns), session.events, session.views) == (2, 4, 4, 4)


def test_a_session_is_closed_once_the_watermark_reaches_its_last_event_plus_the_gap():
    (session,) = add_events([], [event(0, "a"), event(MINUTE, "b")])
    assert not session.closed_at(T0 + MINUTE + SESSION_GAP_MS - 1)
    assert session.closed_at(T0 + MINUTE + SESSION_GAP_MS)


def test_a_state_change_the_checkpoint_cannot_take_is_refused_before_the_run_with_the_full_refresh_to_run(
    tmp_path,
):
    import json

    import pytest

    from lakehouse.errors import ConfigError
    from lakehouse.flows import sessions

    checkpoint = tmp_path / "gen=0"
    sessions.check_state_contract(
        str(checkpoint), "gold.user_sessions"
    )  # a new checkpoint: recorded
    record = tmp_path / "gen=0.state.json"
    assert json.loads(record.read_text())["state_version"] == sessions.STATE_VERSION
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1\n{}\n")
    sessions.check_state_contract(str(checkpoint), "gold.user_sessions")  # unchanged: runs

    record.write_text(json.dumps({**json.loads(record.read_text()), "session_gap_ms": 20 * MINUTE}))
    with pytest.raises(ConfigError, match=r"session_gap_ms 1200000 -> 1800000.*full_refresh=gold"):
        sessions.check_state_contract(str(checkpoint), "gold.user_sessions")


def test_a_partitions_events_reach_the_processor_as_one_row_per_user_with_the_fields_as_lists():
    import pyarrow as pa

    from lakehouse.flows.sessions.processor import EVENT_FIELDS, events_per_user

    rows = [
        (7, "u1", T0 + 2, "e2", "click", "ad-2", "c-2"),
        (3, "u2", T0 + 1, "e9", "view", "ad-1", "c-1"),
        (7, "u1", T0, "e1", "view", "ad-1", "c-1"),
    ]
    names = ["bucket", "user_id", *EVENT_FIELDS]
    batches = [
        pa.RecordBatch.from_pylist([dict(zip(names, row, strict=True))]) for row in rows
    ]  # a user's events across the partition's Arrow batches
    (out,) = list(events_per_user(iter(batches)))
    by_user = {row["user_id"]: row for row in out.to_pylist()}
    assert by_user["u1"] == {
        "bucket": 7,
        "user_id": "u1",
        "event_ms": [T0 + 2, T0],
        "event_id": ["e2", "e1"],
        "event_type": ["click", "view"],
        "ad_id": ["ad-2", "ad-1"],
        "campaign_id": ["c-2", "c-1"],
    }
    assert by_user["u2"]["event_id"] == ["e9"] and len(by_user) == 2
    assert list(events_per_user(iter([]))) == []


def test_a_checkpoint_of_the_per_user_state_is_refused_with_the_full_refresh_to_run(tmp_path):
    import json

    import pytest

    from lakehouse.errors import ConfigError
    from lakehouse.flows import sessions

    checkpoint = tmp_path / "gen=0"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("v1\n{}\n")
    record = tmp_path / "gen=0.state.json"
    record.write_text(
        json.dumps(
            {
                "state_version": 2,
                "state_schema": "struct<sessions:array<...>,timer_ms:bigint>",
                "session_gap_ms": SESSION_GAP_MS,
                "watermark_delay": "10 minutes",
            }
        )
    )
    with pytest.raises(ConfigError, match=r"state_version 2 -> 3.*full_refresh=gold"):
        sessions.check_state_contract(str(checkpoint), "gold.user_sessions")
