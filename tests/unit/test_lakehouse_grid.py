"""The `lakehouse` command's pure parts: the grid's states on hand-built counts, line counting,
backfill commands, the status page, text tables fitted to a width."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from lakehouse_tools import cli, observe, status, text_table
from lakehouse_tools.status import Observed, TableWrite

H0 = datetime(2026, 11, 20, 0)
H1 = H0 + timedelta(hours=1)
T = datetime(2026, 11, 24, 12)  # a moment; later writes are T + minutes


def minutes(n: int) -> datetime:
    return T + timedelta(minutes=n)


def observed(**changes) -> Observed:
    """Two healthy hours: every landed line ingested and classified, gold written after silver."""
    base = dict(
        landed={H0: 10, H1: 10},
        ingest_table="bronze.t",
        ingested={H0: 10, H1: 10},
        newest_ingest={H0: minutes(0), H1: minutes(0)},
        classified={"silver.t": {H0: 8, H1: 9}, "silver.q": {H0: 1, H1: 1}},
        hour_counts={"silver.t": {H0: 8, H1: 9}, "gold.t": {H0: 3, H1: 3}},
        hour_writes={
            "silver.t": {H0: minutes(1), H1: minutes(1)},
            "gold.t": {H0: minutes(2), H1: minutes(2)},
        },
        upstream={"silver.t": None, "gold.t": "silver.t"},
        writes={
            "bronze.t": TableWrite(0, minutes(0), "STREAMING UPDATE"),
            "silver.t": TableWrite(1, minutes(1), "MERGE"),
            "silver.q": TableWrite(1, minutes(1), "WRITE"),
            "gold.t": TableWrite(1, minutes(2), "WRITE"),
        },
    )
    base.update(changes)
    return Observed(**base)


def states(o: Observed, *window) -> dict[datetime, str]:
    return {row.hour: row.state for row in status.grade(o, *window).rows}


def test_healthy_hours_are_complete_with_their_counts():
    grid = status.grade(observed())
    assert grid.columns == ["landed", "bronze.t", "silver.q", "duplicates", "silver.t", "gold.t"]
    assert [row.counts for row in grid.rows] == [
        {"landed": 10, "bronze.t": 10, "silver.q": 1, "duplicates": 1, "silver.t": 8, "gold.t": 3},
        {"landed": 10, "bronze.t": 10, "silver.q": 1, "duplicates": 0, "silver.t": 9, "gold.t": 3},
    ]
    assert states(observed()) == {H0: "complete", H1: "complete"} and not grid.needs_action


def test_landed_lines_not_ingested_yet_are_pending():
    o = observed(landed={H0: 10, H1: 12})
    assert states(o) == {H0: "complete", H1: "pending"}
    assert not status.grade(o).needs_action


def landing_file(name: str, reason: str, read: bool, hour: datetime | None) -> dict:
    return {
        "file": name,
        "reason": reason,
        "detail": f"{reason} detail",
        "what_to_do": f"fix {name}",
        "read": read,
        "command": None,
        "hour": hour,
    }


def test_a_file_appended_to_after_ingestion_is_a_mismatch_not_a_promise_and_unread_files_need_action():
    appended = landing_file("2026-11-20/01/part.jsonl", "appended_after_ingestion", False, H1)
    ignored = landing_file("2026-11-20/00/notes.txt", "not_jsonl", False, H0)
    deep = landing_file("2026-11-20/00/retry/deep.jsonl", "outside_layout", True, None)
    o = observed(landed={H0: 10, H1: 12}, landing_files=[ignored, deep, appended])
    grid = status.grade(o)
    # The appended lines are counted as landed, but no later run reads them: not "pending".
    assert [(row.state, row.reasons) for row in grid.rows] == [
        ("complete", []),
        (
            "mismatch",
            [
                "2026-11-20/01/part.jsonl: appended_after_ingestion detail; fix 2026-11-20/01/part.jsonl"
            ],
        ),
    ]
    assert grid.unread_files == [ignored, appended]
    assert status.grid_json(grid)["landing_files"][2]["hour"] == "2026-11-20T01:00:00Z"
    assert status.grid_text(grid).splitlines()[-4:] == [
        "Landing files bronze does not read as they are:",
        "  2026-11-20/00/notes.txt (not_jsonl, NOT read): not_jsonl detail. fix 2026-11-20/00/notes.txt",
        "  2026-11-20/00/retry/deep.jsonl (outside_layout, read): outside_layout detail. fix 2026-11-20/00/retry/deep.jsonl",
        "  2026-11-20/01/part.jsonl (appended_after_ingestion, NOT read): appended_after_ingestion detail. fix 2026-11-20/01/part.jsonl",
    ]
    # Files read as they are (outside the layout, a gzip payload quarantined) need no action.
    assert status.grade(observed(landing_files=[deep])).unread_files == []


def test_more_rows_than_landed_lines_is_a_mismatch():
    assert states(observed(ingested={H0: 11, H1: 10})) == {H0: "mismatch", H1: "complete"}
    # more valid + quarantined rows than ingested lines
    assert (
        states(observed(classified={"silver.t": {H0: 10, H1: 9}, "silver.q": {H0: 1, H1: 1}}))[H0]
        == "mismatch"
    )


def test_rows_ingested_after_silver_last_wrote_are_pending():
    assert states(observed(newest_ingest={H0: minutes(0), H1: minutes(5)})) == {
        H0: "complete",
        H1: "pending",
    }


def test_rows_ingested_before_anything_classified_them_say_so():
    o = observed(
        classified={},
        hour_counts={},
        upstream={},
        writes={"bronze.t": TableWrite(0, minutes(0), "STREAMING UPDATE")},
    )
    assert [row.reasons for row in status.grade(o).rows] == [
        ["bronze.t rows not classified yet (the next run classifies them)"]
    ] * 2


def test_a_gold_hour_without_rows_is_missing_once_gold_wrote_since_else_pending():
    counts = {"silver.t": {H0: 8, H1: 9}, "gold.t": {H0: 3}}
    assert states(observed(hour_counts=counts)) == {H0: "complete", H1: "missing"}
    # silver wrote H1 after gold's last commit: gold has simply not run yet
    late = {"silver.t": {H0: minutes(1), H1: minutes(3)}, "gold.t": {H0: minutes(2)}}
    assert states(observed(hour_counts=counts, hour_writes=late)) == {H0: "complete", H1: "pending"}


def test_late_data_in_silver_is_pending_until_gold_runs_then_stale_if_gold_skipped_it():
    late = {
        "silver.t": {H0: minutes(5), H1: minutes(1)},
        "gold.t": {H0: minutes(2), H1: minutes(2)},
    }
    assert states(observed(hour_writes=late)) == {H0: "pending", H1: "complete"}
    writes = {**observed().writes, "gold.t": TableWrite(2, minutes(6), "WRITE")}
    assert states(observed(hour_writes=late, writes=writes)) == {H0: "stale", H1: "complete"}


def test_gold_rows_for_an_hour_silver_does_not_hold_are_stale():
    counts = {"silver.t": {H0: 8}, "gold.t": {H0: 3, H1: 3}}
    o = observed(
        hour_counts=counts, classified={"silver.t": {H0: 8, H1: 9}, "silver.q": {H0: 1, H1: 1}}
    )
    assert states(o) == {H0: "complete", H1: "stale"}


def test_a_window_lists_every_hour_and_empty_ones_say_so():
    assert states(observed(), H1, H1 + timedelta(hours=2)) == {
        H1: "complete",
        H1 + timedelta(hours=1): "empty",
    }


def test_lines_are_counted_as_spark_splits_them():
    assert [
        observe.count_lines(data) for data in (b"", b"a", b"a\n", b"a\r\nb", b"a\rb\n\n", b"\n")
    ] == [0, 1, 1, 2, 3, 1]


def test_folder_hours_and_the_landing_layout_match_the_source():
    from lakehouse.sources import LANDING_FILES

    assert observe.LANDING_FILES == LANDING_FILES
    assert observe.folder_hour("file:/x/landing/events/2026-11-20/07/part-0001.jsonl") == datetime(
        2026, 11, 20, 7
    )
    assert observe.folder_hour("kafka://topic/0/12") is None


def test_backfill_commands_cover_contiguous_hours_with_the_runs_that_own_them():
    hours = [H0, H1, H0 + timedelta(hours=5)]
    assert [c[-3::2] for c in cli.backfill_commands(hours)] == [
        ["2026-11-20T01:00:00+00:00", "2026-11-20T02:00:00+00:00"],
        ["2026-11-20T06:00:00+00:00", "2026-11-20T06:00:00+00:00"],
    ]


def test_the_status_page_shows_each_hours_state_and_the_top_campaigns_views():
    from lakehouse_tools.status_page import LINE_COLOURS, STATE_COLOURS, status_page

    grid = status.grade(observed(hour_counts={"silver.t": {H0: 8, H1: 9}, "gold.t": {H0: 3}}))
    views = {
        f"c{n}": {H0: n, H1: 2 * n} for n in range(1, 8)
    }  # c7 has the most views, c1 the fewest
    page = status_page(grid, views, T)
    assert [row.state for row in grid.rows] == ["complete", "missing"]
    assert f"<td class=state style='background:{STATE_COLOURS['missing']}'" in page
    assert "<b>2026-11-20 01:00 missing</b>: gold.t has no row" in page
    # One line per top campaign, the most viewed first; the two with the fewest views are left out.
    shown = [f"<title>c{n}</title>" in page for n in range(1, 8)]
    assert shown == [False, False, True, True, True, True, True] and page.count("<polyline") == len(
        LINE_COLOURS
    )
    assert "<script" not in page and "http" not in page.replace(
        "http://www.w3.org", ""
    )  # self-contained


def test_the_chart_labels_its_last_hour_inside_it_and_its_legend_reads_as_ranks_and_short_ids():
    from lakehouse_tools.status_page import LINE_COLOURS, label_positions, status_page, views_chart

    uuids = [f"{n:08x}-6f1e-4c1b-9b1e-2d3c4b5a6f70" for n in range(1, 4)]
    hours = [H0 + timedelta(hours=h) for h in range(10)]
    views = {campaign: {h: n + 1 for h in hours} for n, campaign in enumerate(uuids)}
    chart = views_chart(views)
    assert [(label["text"], label["anchor"]) for label in chart["labels"]] == [
        ("20 00:00", "middle"),
        ("20 02:00", "middle"),
        ("20 04:00", "middle"),
        ("20 06:00", "middle"),
        ("20 09:00", "end"),  # 08:00's label, a step short of it, would overlap it
    ]
    # The last hour always, never closer than a step to the label before it.
    assert [i for i, _ in label_positions(15)] == [0, 2, 4, 6, 8, 10, 12, 14]
    assert [i for i, _ in label_positions(16)] == [0, 2, 4, 6, 8, 10, 12, 15]
    assert [i for i, _ in label_positions(17)] == [0, 3, 6, 9, 12, 16]
    assert label_positions(1) == [(0, "middle")]
    assert chart["labels"][-1]["x"] == f"{chart['right']:.1f}"
    assert [line["legend"] for line in chart["lines"]] == [
        "#1 00000003…: 30 views",
        "#2 00000002…: 20 views",
        "#3 00000001…: 10 views",
    ]
    grid = status.grade(observed(hour_counts={"silver.t": {H0: 8}, "gold.t": {H0: 3}}))
    page = status_page(grid, views, T)
    assert (
        f"<span class=key style='border-color:{LINE_COLOURS[0]};border-width:0 0 3px'"
        f" title='{uuids[2]}'>#1 00000003…: 30 views</span>"
    ) in page
    assert "text-anchor=end>20 09:00</text>" in page


def test_an_hour_recomputed_without_rows_is_complete_and_one_deleted_since_is_missing():
    counts = {
        "silver.t": {H0: 8, H1: 9},
        "gold.t": {H0: 3},
    }  # gold has nothing in H1 (no views in it, say)
    recomputed = {"gold.t": {H0: minutes(2), H1: minutes(2)}}
    assert [
        r.state for r in status.grade(observed(hour_counts=counts, recomputed=recomputed)).rows
    ] == ["complete", "complete"]
    # Recomputed before silver changed the hour: gold owes it a recompute (it ran since, so: stale -> missing).
    older = {"gold.t": {H0: minutes(2), H1: minutes(0)}}
    assert [r.state for r in status.grade(observed(hour_counts=counts, recomputed=older)).rows] == [
        "complete",
        "missing",
    ]


def test_only_replaces_newer_than_any_delete_count_as_recomputes():
    class History:
        def __init__(self, commits):
            self.commits = commits

        def history(self, limit):
            return self.commits

    def replace(at: int, predicate: str) -> dict:
        return {
            "operation": "WRITE",
            "timestamp": at,
            "operationParameters": {"predicate": predicate},
        }

    def gold(*hours: str) -> str:
        stamps = ", ".join(f"TIMESTAMP'2026-11-20 {h}:00:00'" for h in hours)
        return f"event_date IN (DATE'2026-11-20') AND hour_start IN ({stamps})"

    delete = {
        "operation": "DELETE",
        "timestamp": 2_000,
        "operationParameters": {"predicate": "hour_start = TIMESTAMP'2026-11-20 01:00:00'"},
    }
    hours = {datetime(2026, 11, 20, h) for h in range(5)}
    newest_first = [replace(3_000, gold("02")), delete, replace(1_000, gold("00", "01"))]
    assert observe.hours_replaced(History(newest_first), hours) == {
        datetime(2026, 11, 20, 2): observe.utc(3_000)
    }
    # The predicate as Spark's commit keeps it (a JSON list), a silver-shaped one, one on columns an
    # hour has not: each selects what it says.
    commits = [
        replace(5_000, "[\"(event_date = DATE'2026-11-20' AND event_hour IN (3, 4))\"]"),
        replace(4_000, "session_end >= TIMESTAMP'2026-11-20 00:00:00'"),
        replace(3_000, f'["{gold("02")}"]'),
    ]
    assert observe.hours_replaced(History(commits), hours) == {
        datetime(2026, 11, 20, 2): observe.utc(3_000),
        datetime(2026, 11, 20, 3): observe.utc(5_000),
        datetime(2026, 11, 20, 4): observe.utc(5_000),
    }


def test_an_hour_whose_gating_rule_failed_is_failed_needs_action_and_is_repaired():
    o = observed(
        failed_rules={H1: ["silver.t: rule 'every event has a campaign' failed (measured 1)"]}
    )
    grid = status.grade(o)
    assert states(o) == {H0: "complete", H1: "failed"} and [
        row.hour for row in grid.needs_action
    ] == [H1]
    assert grid.rows[1].reasons == [
        "silver.t: rule 'every event has a campaign' failed (measured 1)"
    ]
    assert (
        "2026-11-20 01:00 failed: silver.t: rule 'every event has a campaign'"
        in status.grid_text(grid)
    )
    assert [row.hour for row in grid.rows if row.state in status.REPAIRABLE] == [
        H1
    ]  # a backfill recomputes it


def test_a_table_is_aligned_numbers_right_ids_and_text_left():
    rows = [
        ("c1", "007", 5, 1.5, None),
        ("campaign-22", "12", 1234, None, datetime(2026, 11, 20, 1)),
    ]
    assert text_table.table_text(["campaign", "id", "views", "ctr", "at"], rows).splitlines() == [
        "campaign     id      views    ctr  at",
        "-----------  ----  -------  -----  ----------------",
        "c1           007         5    1.5",
        "campaign-22  12       1234         2026-11-20 01:00",
    ]


@pytest.mark.parametrize("width", [200, 60, 40, 12])
def test_a_wide_table_is_cut_to_the_width_long_columns_first_then_the_last_columns_left_out(
    width,
):
    columns = ["n", "source_file", "raw_line", "event_type"]
    rows = [
        (i, f"file:/landing/events/2026-11-20/0{i}/part-0.jsonl", "x" * 90, "view")
        for i in range(3)
    ]
    text, hidden = text_table.fitted_table_text(columns, rows, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width and len(lines) == 2 + len(rows)
    shown = {200: columns, 60: columns, 40: columns, 12: columns[:1]}[width]
    assert hidden == columns[len(shown) :]
    if width == 200:  # everything fits: every value whole
        assert lines[2].split() == ["0", rows[0][1], rows[0][2], "view"]
    if width == 60:  # the two long columns are cut to the same width, the short ones kept
        assert lines[2] == "  0  file:/landing/even…  xxxxxxxxxxxxxxxxxx…  view"
    if width == 40:  # the long columns cut further, headers too; the short one kept whole
        assert lines[:3] == [
            "  n  source…    raw_li…    event_type",
            "---  ---------  ---------  ------------",
            "  0  file:/la…  xxxxxxxx…  view",
        ]


def test_the_status_page_marks_the_hours_older_code_wrote_and_says_what_recomputes_them():
    from lakehouse.code_versions import StalePeriod
    from lakehouse.periods import Grain
    from lakehouse_tools.status_page import status_page

    grid = status.grade(
        observed(
            hour_counts={"silver.ad_events": {H0: 8, H1: 9}, "gold.campaign_hourly": {H0: 3, H1: 4}}
        )
    )
    reason = "written by version aaaa; the code is bbbb now"
    old_code = {
        "gold.campaign_hourly": [StalePeriod("gold.campaign_hourly", H1, Grain.HOUR, reason)]
    }
    page = status_page(grid, {}, T, old_code)
    assert f"<td class='n old' title='older code: {reason}'>4 ‡</td>" in page
    assert page.count(" ‡</td>") == 1  # gold's 01:00 only: not 00:00, not silver
    assert "<h2>Written by older code</h2>" in page and "lakehouse repair --stale" in page
    assert "<li>gold.campaign_hourly: 1 hour(s) stale" in page
    assert "older code" not in status_page(grid, {}, T)  # nothing stale: no mark, no section
