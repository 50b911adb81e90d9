"""A file still being written when Spark listed it (issue 59): recorded by what bronze read of it,
from bronze's rows, so it raises no false "rewritten" alarm, a copy of it is known by its bytes,
bytes appended after the read are refused with a fix that reads each line once, and a real
rewrite is still refused by name."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest
from helpers import run_job, table, view_line

from lakehouse.landing import LandedIndex, spark_uri
from lakehouse.landing.manifest import sha256_of
from lakehouse_tools import observe, status
from lakehouse_tools.generator import campaign_dimension, write_campaigns

HOUR_MS = 1795168800000  # 2026-11-20T10:00:00Z: the events' hour is the folder's


def event(event_id: str, ad_id: str) -> str:
    return view_line(event_id, ad_id, HOUR_MS + 60_000)


@contextmanager
def once_spark_lists(lakehouse, act: Callable[[], None], then: str = "sources/0/0"):
    """Run ``act`` as soon as bronze's source has logged the files of its first batch (``then``:
    or a later step of it, ``commits/0`` once it is committed): the producer's write that lands
    after Spark listed the file, while the run goes on."""
    listed = Path(lakehouse.table("bronze.ad_events").checkpoint(0), then)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if listed.exists():
                act()
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
    assert listed.exists(), "bronze's source never listed the file"


def _bronze_lines(spark, lakehouse) -> list[str]:
    return sorted(r.raw_line for r in table(spark, lakehouse, "bronze.ad_events").collect())


def _grid(lakehouse):
    grid = status.grade(observe.observe(lakehouse))
    rows = [(row.hour, row.counts["landed"], row.counts["bronze.ad_events"]) for row in grid.rows]
    return grid, rows


def test_a_file_whose_last_write_lands_after_spark_listed_it_is_recorded_as_read(spark, lakehouse):
    """Its bytes unchanged since the read, its modification time newer than the one Spark logged:
    read whole, no alarm; its record holds its size and hash, so a copy of it is not read again."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    folder = Path(lakehouse.landing_events, "2026-11-20", "10")
    folder.mkdir(parents=True)
    part = folder / "part-0.jsonl"
    lines = [event(f"e-{n:02d}", ad) for n in range(40)]
    part.write_text("".join(f"{line}\n" for line in lines))
    later = time.time() + 5

    run_job("dim_campaigns", lakehouse)
    with once_spark_lists(lakehouse, lambda: os.utime(part, (later, later))):
        summary = run_job("bronze_ad_events", lakehouse)
    assert _bronze_lines(spark, lakehouse) == sorted(lines)
    assert summary["changed_files"] == []  # before: rewritten_after_ingestion, "not read"
    record = LandedIndex(lakehouse.table("bronze.ad_events").checkpoint(0)).every_record()
    assert record[spark_uri(part)]["size"] == part.stat().st_size
    assert record[spark_uri(part)]["sha256"] == sha256_of(part)
    run_job("silver_ad_events", lakehouse)
    grid, rows = _grid(lakehouse)
    assert rows == [(datetime(2026, 11, 20, 10), 40, 40)]
    assert grid.unread_files == [] and grid.needs_action == []

    # The same bytes landed again under a new name (what the false alarm's fix had one do): a copy.
    (folder / "part-0-again.jsonl").write_bytes(part.read_bytes())
    summary = run_job("bronze_ad_events", lakehouse)
    assert [(p["file"], p["copy_of"]) for p in summary["copied_files"]] == [
        ("2026-11-20/10/part-0-again.jsonl", "2026-11-20/10/part-0.jsonl")
    ]
    assert _bronze_lines(spark, lakehouse) == sorted(lines)  # 40 rows, not 80

    # A real rewrite after that is still refused by name, with what bronze read.
    size = part.stat().st_size
    part.write_text("".join(f"{event(f'r-{n:02d}', ad)}\n" for n in range(40)))
    [changed] = run_job("bronze_ad_events", lakehouse)["changed_files"]
    assert (changed["file"], changed["reason"], changed["read"]) == (
        "2026-11-20/10/part-0.jsonl",
        "rewritten_after_ingestion",
        False,
    )
    assert f"({size} byte(s), sha256 " in changed["detail"]
    assert _bronze_lines(spark, lakehouse) == sorted(lines)


@pytest.mark.parametrize("then", ["sources/0/0", "commits/0"], ids=["listed", "committed"])
def test_a_file_appended_to_while_bronze_reads_it_gets_each_line_read_once(spark, lakehouse, then):
    """The producer's last line lands after Spark listed the file: Spark reads it or not (a race;
    once the batch is committed, not); either way no "rewritten" alarm, and after the printed fix,
    if any, each line is in bronze once."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    folder = Path(lakehouse.landing_events, "2026-11-20", "10")
    folder.mkdir(parents=True)
    part = folder / "part-0.jsonl"
    lines = [event(f"e-{n:02d}", ad) for n in range(40)]
    part.write_text("".join(f"{line}\n" for line in lines[:39]))

    def last_write() -> None:
        with part.open("a") as handle:
            handle.write(lines[39] + "\n")

    run_job("dim_campaigns", lakehouse)
    with once_spark_lists(lakehouse, last_write, then):
        summary = run_job("bronze_ad_events", lakehouse)
    read = _bronze_lines(spark, lakehouse)
    assert read in (sorted(lines), sorted(lines[:39]))
    assert then == "sources/0/0" or read == sorted(lines[:39])
    if read == sorted(lines):  # read whole: nothing to say
        assert summary["changed_files"] == []
    else:  # read before the last line landed: that line alone is moved to a new file
        [changed] = summary["changed_files"]
        assert (changed["reason"], changed["read"]) == ("appended_after_ingestion", False)
        assert changed["detail"].startswith(f"{len(lines[39]) + 1} byte(s) appended after")
        subprocess.run(["bash", "-c", changed["command"]], check=True)
        assert run_job("bronze_ad_events", lakehouse)["changed_files"] == []
    assert _bronze_lines(spark, lakehouse) == sorted(lines)
    run_job("silver_ad_events", lakehouse)
    assert sorted(r.event_id for r in table(spark, lakehouse, "silver.ad_events").collect()) == [
        f"e-{n:02d}" for n in range(40)
    ]
    grid, rows = _grid(lakehouse)
    assert rows == [(datetime(2026, 11, 20, 10), 40, 40)]
    assert grid.unread_files == [] and grid.needs_action == []
