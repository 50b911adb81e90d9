"""Every shape a landing file can take, through the jobs and lakehouse status: a plain file, a
linked file, a linked hour folder, a linked day folder and a folder linked twice are read once and
counted in their hour; a link back to a folder it is in refuses the run by name; a link to nothing
is reported, and its files are read once it resolves (issue 59: a linked hour was silently lost)."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from helpers import run_job, table, view_line

from lakehouse.errors import ConfigError
from lakehouse.landing import landing_report
from lakehouse_tools import observe, status
from lakehouse_tools.generator import campaign_dimension, write_campaigns

SILVER = ("dim_campaigns", "bronze_ad_events", "silver_ad_events")
DAY_MS = {"2026-11-20": 1795132800000, "2026-11-21": 1795219200000}  # 00:00Z of each day


def event(event_id: str, ad_id: str, day: str, hour: int) -> str:
    """An event whose time is in its producer hour, so status's rows are the landing's hours."""
    return view_line(event_id, ad_id, DAY_MS[day] + hour * 3_600_000 + 60_000)


def _write(path: Path, *lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def _bronze_by_path(spark, lakehouse) -> list[tuple[str, str]]:
    """(the file's path under the landing folder, as bronze's source_file names it; the line)."""
    root = Path(lakehouse.landing_events)
    rows = table(spark, lakehouse, "bronze.ad_events").select("raw_line", "source_file").collect()
    return sorted(
        (Path(unquote(urlsplit(r.source_file).path)).relative_to(root).as_posix(), r.raw_line)
        for r in rows
    )


def _silver_ids(spark, lakehouse) -> list[str]:
    return sorted(r.event_id for r in table(spark, lakehouse, "silver.ad_events").collect())


def _arrivals(lakehouse) -> tuple[status.Grid, list[tuple[datetime, int, int, str]]]:
    """lakehouse status's grid, and its rows: hour, landed lines, bronze rows, state."""
    grid = status.grade(observe.observe(lakehouse))
    return grid, [
        (row.hour, row.counts["landed"], row.counts["bronze.ad_events"], row.state)
        for row in grid.rows
    ]


def test_linked_files_hours_and_days_are_read_once_and_counted_by_status(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    day = Path(lakehouse.landing_events, "2026-11-20")
    elsewhere = tmp_path / "elsewhere"  # outside the lakehouse: another disk, a mount
    plain, linked = event("plain", ad, "2026-11-20", 0), event("linked", ad, "2026-11-20", 0)
    _write(day / "00" / "plain.jsonl", plain)
    _write(elsewhere / "file.jsonl", linked)
    (day / "00" / "linked.jsonl").symlink_to(elsewhere / "file.jsonl")
    for job in SILVER:
        run_job(job, lakehouse)
    assert _bronze_by_path(spark, lakehouse) == [
        ("2026-11-20/00/linked.jsonl", linked),
        ("2026-11-20/00/plain.jsonl", plain),
    ]

    # Only linked folders land next: an hour folder, a day folder, and the hour's folder linked
    # again as another hour. Before the fix bronze said "no new file among the 2 landed".
    hour = [event(f"h-{n}", ad, "2026-11-20", 1) for n in range(3)]
    next_day = event("d-0", ad, "2026-11-21", 0)
    _write(elsewhere / "hour" / "part.jsonl", *hour)
    _write(elsewhere / "day" / "00" / "part.jsonl", next_day)
    (day / "01").symlink_to(elsewhere / "hour", target_is_directory=True)
    (day / "02").symlink_to(elsewhere / "hour", target_is_directory=True)
    day.with_name("2026-11-21").symlink_to(elsewhere / "day", target_is_directory=True)
    summary = run_job("bronze_ad_events", lakehouse)
    assert "not_started" not in summary
    assert _bronze_by_path(spark, lakehouse) == [
        ("2026-11-20/00/linked.jsonl", linked),
        ("2026-11-20/00/plain.jsonl", plain),
        *[("2026-11-20/01/part.jsonl", line) for line in hour],
        ("2026-11-21/00/part.jsonl", next_day),
    ]
    copies = [(p["file"], p["reason"], p["copy_of"]) for p in summary["copied_files"]]
    assert copies == [
        ("2026-11-20/02/part.jsonl", "copy_of_ingested", "2026-11-20/01/part.jsonl"),
    ]
    assert summary["ignored_files"] == [] and summary["changed_files"] == []
    assert "no new file among the 5 landed" in run_job("bronze_ad_events", lakehouse)["not_started"]
    run_job("silver_ad_events", lakehouse)
    assert _silver_ids(spark, lakehouse) == ["d-0", "h-0", "h-1", "h-2", "linked", "plain"]

    # lakehouse status, from files: each linked hour landed and ingested, the copy counted once.
    grid, arrivals = _arrivals(lakehouse)
    assert [row[:3] for row in arrivals] == [
        (datetime(2026, 11, 20, 0), 2, 2),
        (datetime(2026, 11, 20, 1), 3, 3),
        (datetime(2026, 11, 21, 0), 1, 1),
    ]
    assert grid.unread_files == [] and grid.needs_action == []
    assert [(f["file"], f["copy_of"]) for f in grid.landing_files] == [c[::2] for c in copies]


def test_a_link_loop_refuses_the_run_by_name_and_a_link_to_nothing_is_reported(
    spark, lakehouse, tmp_path
):
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    day = Path(lakehouse.landing_events, "2026-11-20")
    mount = tmp_path / "mount" / "hour"
    first = event("p-0", ad, "2026-11-20", 0)
    _write(day / "00" / "part.jsonl", first)
    (day / "01").symlink_to(mount, target_is_directory=True)  # not mounted yet
    run_job("dim_campaigns", lakehouse)
    summary = run_job("bronze_ad_events", lakehouse)
    run_job("silver_ad_events", lakehouse)
    assert [(p["file"], p["reason"], p["read"]) for p in summary["ignored_files"]] == [
        ("2026-11-20/01", "broken_symlink", False)
    ]
    grid, arrivals = _arrivals(lakehouse)
    assert [(f["file"], f["reason"]) for f in grid.unread_files] == [
        ("2026-11-20/01", "broken_symlink")
    ]

    # A link back to the day folder, and a new file: Spark would read the day ~40 times over.
    later = event("p-1", ad, "2026-11-20", 0)
    _write(day / "00" / "later.jsonl", later)
    (day / "00" / "again").symlink_to("..", target_is_directory=True)
    with pytest.raises(ConfigError, match=r"to a folder they are in: 2026-11-20/00/again -> \.\.;"):
        run_job("bronze_ad_events", lakehouse)
    assert _bronze_by_path(spark, lakehouse) == [("2026-11-20/00/part.jsonl", first)]
    [loop] = [p for p in landing_report(lakehouse)["ignored"] if p["reason"] == "symlink_loop"]
    assert (loop["file"], loop["read"]) == ("2026-11-20/00/again", False)

    # The printed fix, and the mount back: every file read once, status clean.
    subprocess.run(["bash", "-c", loop["command"]], check=True)
    mounted = event("m-0", ad, "2026-11-20", 1)
    _write(mount / "part.jsonl", mounted)
    summary = run_job("bronze_ad_events", lakehouse)
    assert summary["ignored_files"] == []
    run_job("silver_ad_events", lakehouse)
    assert _bronze_by_path(spark, lakehouse) == [
        ("2026-11-20/00/later.jsonl", later),
        ("2026-11-20/00/part.jsonl", first),
        ("2026-11-20/01/part.jsonl", mounted),
    ]
    assert _silver_ids(spark, lakehouse) == ["m-0", "p-0", "p-1"]
    grid, arrivals = _arrivals(lakehouse)
    assert [row[:3] for row in arrivals] == [
        (datetime(2026, 11, 20, 0), 2, 2),
        (datetime(2026, 11, 20, 1), 1, 1),
    ]
    assert grid.unread_files == [] and grid.needs_action == []
