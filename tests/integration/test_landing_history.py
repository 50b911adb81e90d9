"""Bronze after a long landing history: its checks list the hour folders that can hold new files,
its source the date folders of the new files, and a file landed late in an old hour folder is read
once, by the next daily look at the whole landing folder."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

from helpers import run_job, table, view_line

from lakehouse.landing import LandedIndex, ingested_files
from lakehouse.landing.source_log import roll_over, roll_over_due
from lakehouse.landing.window import OLDER_PER_RUN, RECENT_HOURS, WHOLE_LOOK_EVERY

START = datetime(2026, 11, 1)
HOURS = RECENT_HOURS + OLDER_PER_RUN + 8  # some folders no check lists in the next run


def _folder(n: int) -> str:
    return f"{START + timedelta(hours=n):%Y-%m-%d/%H}"


def _land(root: Path, n: int, name: str, event_id: str) -> None:
    path = root / _folder(n) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    millis = int((START + timedelta(hours=n, minutes=1)).timestamp() * 1000)
    path.write_text(view_line(event_id, "ad-1", millis) + "\n")


def _bronze_files(spark, lakehouse) -> list[str]:
    root = Path(lakehouse.landing_events)
    rows = table(spark, lakehouse, "bronze.ad_events").select("source_file").collect()
    return sorted(
        Path(unquote(urlsplit(r.source_file).path)).relative_to(root).as_posix() for r in rows
    )


def test_a_late_file_in_an_old_hour_folder_is_read_once_by_the_next_whole_look(spark, lakehouse):
    root = Path(lakehouse.landing_events)
    for n in range(HOURS):
        _land(root, n, "part-0.jsonl", f"e-{n}")
    first = run_job("bronze_ad_events", lakehouse)  # a first run looks at everything
    assert first["late_files"] == []

    _land(root, HOURS, "part-0.jsonl", "e-new")  # the next hour
    _land(root, 0, "late.jsonl", "e-late")  # hour 0 again: neither recent nor this run's turn
    second = run_job("bronze_ad_events", lakehouse)
    assert second["late_files"] == []  # its date folder not listed: not read yet
    on_time = [f"{_folder(n)}/part-0.jsonl" for n in range(HOURS + 1)]
    assert _bronze_files(spark, lakehouse) == on_time

    _whole_look_a_day_ago(lakehouse)
    third = run_job("bronze_ad_events", lakehouse)  # the daily whole look: checked, then read
    assert (third["late_files"], third["copied_files"]) == ([], [])
    assert _bronze_files(spark, lakehouse) == sorted([*on_time, f"{_folder(0)}/late.jsonl"])
    _whole_look_a_day_ago(lakehouse)
    fourth = run_job("bronze_ad_events", lakehouse)  # nothing new: nothing read again
    assert fourth.get("late_files", []) == []
    assert len(_bronze_files(spark, lakehouse)) == HOURS + 2


def _whole_look_a_day_ago(lakehouse) -> None:
    """Move bronze's last whole look of the landing folder back by a day (as a day of runs would)."""
    index = LandedIndex(lakehouse.table("bronze.ad_events").checkpoint())
    last = datetime.fromisoformat(index.state["whole_look_at"])
    index.state["whole_look_at"] = (last - WHOLE_LOOK_EVERY).isoformat()
    index.save()


def test_after_a_roll_over_of_the_source_log_every_file_is_still_read_once(spark, lakehouse):
    """A new checkpoint generation starts the file source's log empty: it lists dates whose files
    it read before, and gives no line of them; a file new in them is read as usual."""
    root = Path(lakehouse.landing_events)
    for n in range(30):  # two dates: 2026-11-01 and 2026-11-02
        _land(root, n, "part-0.jsonl", f"e-{n}")
    run_job("bronze_ad_events", lakehouse)
    bronze = lakehouse.table("bronze.ad_events")
    assert roll_over_due(bronze.checkpoint(), limit=1 << 30) is None
    assert roll_over(bronze, str(root)) == 1
    assert LandedIndex(bronze.checkpoint()).state["carried_from"] == 0

    _land(root, 29, "part-1.jsonl", "e-29b")  # beside files of generation 0, in its date
    _land(root, 0, "late.jsonl", "e-late")  # an old date: read by the next whole look
    run_job("bronze_ad_events", lakehouse)
    _whole_look_a_day_ago(lakehouse)
    run_job("bronze_ad_events", lakehouse)
    on_time = [f"{_folder(n)}/part-0.jsonl" for n in range(30)]
    assert _bronze_files(spark, lakehouse) == sorted(
        [*on_time, f"{_folder(29)}/part-1.jsonl", f"{_folder(0)}/late.jsonl"]
    )
    # The new generation's log names what it listed: the two dates, each file once.
    logged = ingested_files(bronze.checkpoint())
    assert len(logged) == 32 and bronze.current_generation() == 1
