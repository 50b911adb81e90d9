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


def test_a_partitions_fragments_merged_in_any_split_give_the_sessions_of_its_events():
    import pyarrow as pa

    from lakehouse.flows.sessions.fragments import (
        EVENT_FIELDS,
        FRAGMENT_COLUMNS,
        events_of,
        read_events,
        read_fragments,
        session_fragments,
    )
    from lakehouse.flows.sessions.processor import _from_fragment

    rng = random.Random(7)
    minutes = [0, 10, 25, 55, 56, 90, 119, 150, 180, 181, 240]
    events = [
        (
            "u1" if i % 3 else "u2",
            *event(m * MINUTE + i % 2, f"e:{i}:ü", rng.choice(["view", "click"])),
        )
        for i, m in enumerate(minutes)
    ] + [("u1", *event(30 * MINUTE + 10, "12:34", "purchase", "ad-9", "c:9"))]
    names = ["user_id", *EVENT_FIELDS]

    def fragments(part):
        batches = [
            pa.RecordBatch.from_pylist(
                [{"bucket": int(e[0][1]), **dict(zip(names, e, strict=True))}]
            )
            for e in part
        ]  # one Arrow batch per event: a user's events span the partition's batches
        rows = []
        for out in session_fragments(iter(batches)):  # a row per bucket: u1's 1, u2's 2
            for bucket, cell, events_cell in zip(*out.to_pydict().values(), strict=True):
                first_row = 0
                for fragment in read_fragments(cell):
                    assert int(fragment[0][1]) == bucket
                    row = dict(zip(FRAGMENT_COLUMNS, fragment, strict=True))
                    row["_events"] = events_of(read_events(events_cell), first_row, row["events"])
                    first_row += row["events"]
                    rows.append(row)
        return rows

    for user in ("u1", "u2"):
        whole = add_events([], [e[1:] for e in events if e[0] == user])
        for seed in range(10):
            shuffled = random.Random(seed).sample(events, len(events))
            cut = seed % len(events)
            rows = [
                r for part in (shuffled[:cut], shuffled[cut:]) for r in fragments(part)
            ]  # two input partitions
            mine = [r for r in rows if r["user_id"] == user]
            merged = add_events([], [])
            for row in mine:
                merged = add_events(merged + [_from_fragment(list(row.values())[1:-1])], [])
            assert merged == whole
            unpacked = sorted(e for r in mine for e in r["_events"])
            assert unpacked == sorted(e[1:] for e in events if e[0] == user)
        # one partition with all of them: its fragments are the sessions
        alone = sorted(
            (r["start_ms"] - T0, r["end_ms"] - T0, r["events"])
            for r in fragments(events)
            if r["user_id"] == user
        )
        assert alone == spans(whole)
    assert list(session_fragments(iter([]))) == []


def test_a_checkpoint_of_an_older_state_shape_is_refused_with_the_full_refresh_to_run(tmp_path):
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
                "state_version": 3,
                "user_buckets": 1024,
                "state_schema": "struct<users:array<...>,timer_ms:bigint>",
                "session_gap_ms": SESSION_GAP_MS,
                "watermark_delay": "10 minutes",
            }
        )
    )
    with pytest.raises(ConfigError, match=r"state_version 3 -> 4.*full_refresh=gold"):
        sessions.check_state_contract(str(checkpoint), "gold.user_sessions")


def test_the_batch_form_merges_a_buckets_fragments_into_closed_and_open_sessions():
    import pyarrow as pa

    from lakehouse.flows.sessions.fragments import EVENT_FIELDS, session_fragments
    from lakehouse.flows.sessions.processor import OUTPUT_COLUMNS, _sessions_of_fragments

    events = [
        ("u1", *event(0, "a")),
        ("u1", *event(10 * MINUTE, "b", "click")),
        ("u1", *event(90 * MINUTE, "c")),
        ("u2", *event(5 * MINUTE, "d", "purchase", "ad-2", "c-2")),
    ]
    names = ["user_id", *EVENT_FIELDS]
    # two input partitions, the same bucket: u1's first session is cut in two fragments
    parts = [events[:1] + events[3:], events[1:3]]
    cells = pa.Table.from_batches(
        [
            out
            for part in parts
            for out in session_fragments(
                iter(
                    [
                        pa.RecordBatch.from_pylist(
                            [{"bucket": 3, **dict(zip(names, e))} for e in part]
                        )
                    ]
                ),
                with_events=False,
            )
        ]
    )
    assert cells["fragment_events"].null_count == len(cells)
    watermark = T0 + 10 * MINUTE + SESSION_GAP_MS  # closes all but u1's second session
    out = _sessions_of_fragments(watermark)(cells).to_pylist()
    got = sorted(
        (r["kind"], r["user_id"], r["start_ms"] - T0, r["end_ms"] - T0, r["events"]) for r in out
    )
    assert got == [
        ("open", "u1", 90 * MINUTE, 90 * MINUTE, 1),
        ("session", "u1", 0, 10 * MINUTE, 2),
        ("session", "u2", 5 * MINUTE, 5 * MINUTE, 1),
    ]
    assert list(out[0]) == OUTPUT_COLUMNS
