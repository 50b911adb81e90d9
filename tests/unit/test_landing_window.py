"""Bronze's checks cost the same after a long history: what a run lists and reads is bounded.

A run's checks list the hour folders that can hold new files and a few older ones in turn
(``lakehouse.landing.window``), and read bronze's records by key (``LandedIndex``); a file landed
late in an old folder is read by the source all the same and named after the read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakehouse.flows.ingest import _caught_up, _new_bytes
from lakehouse.landing import (
    LandedIndex,
    changed_files,
    late_files,
    manifest_path,
    plan_new_files,
    record_ingested_files,
    spark_uri,
)
from lakehouse.landing.source_log import roll_over_due, source_log_bytes
from lakehouse.landing.window import OLDER_PER_RUN, RECENT_HOURS

START = datetime(2026, 1, 1)


def _hour(n: int) -> str:
    return f"{START + timedelta(hours=n):%Y-%m-%d/%H}"


def _land(landing: Path, hours: range, files: int = 2) -> list[Path]:
    landed = []
    for n in hours:
        folder = landing / _hour(n)
        folder.mkdir(parents=True, exist_ok=True)
        for part in range(files):
            path = folder / f"part-{part}.jsonl"
            path.write_text(f'{{"hour": {n}, "part": {part}}}\n')
            landed.append(path)
    return landed


def _read(checkpoint: Path, batch: int, files: list[Path]) -> None:
    """Batch ``batch`` of the source read ``files``, as Spark logs it (every tenth one compacted,
    holding every entry before it)."""
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    entries = [
        json.dumps(
            {"path": spark_uri(f), "timestamp": f.stat().st_mtime_ns // 10**6, "batchId": batch}
        )
        for f in files
    ]
    log = checkpoint / "sources" / "0"
    if (batch + 1) % 10 == 0:
        before = [
            line
            for n in range(batch)
            for line in (log / str(n)).read_text().splitlines()[1:]
            if (log / str(n)).exists()
        ]
        (log / f"{batch}.compact").write_text("v1\n" + "\n".join(before + entries) + "\n")
    else:
        (log / str(batch)).write_text("v1\n" + "\n".join(entries) + "\n")
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"logOffset":{batch}}}\n')
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def _history(tmp_path: Path, hours: int) -> tuple[Path, Path, list[Path]]:
    """A landing zone of ``hours`` hour folders, every file read by batch 0, recorded."""
    landing, checkpoint = tmp_path / "events", tmp_path / "gen=0"
    landed = _land(landing, range(hours))
    _read(checkpoint, 0, landed)
    record_ingested_files(str(checkpoint), root=landing)
    return landing, checkpoint, landed


def test_a_run_lists_new_and_recent_hour_folders_and_older_ones_in_turn(tmp_path):
    landing, checkpoint, _ = _history(tmp_path, 200)
    new = _land(landing, range(200, 202))  # the run's new hours

    first = plan_new_files(str(checkpoint), landing)
    recent = [_hour(n) for n in range(201, 201 - RECENT_HOURS, -1)]  # 2 new + 46 read
    older = [_hour(n) for n in range(201 - RECENT_HOURS, 201 - RECENT_HOURS - OLDER_PER_RUN, -1)]
    assert first.folders == (*recent, *older)
    assert sorted(first.listing.files) == sorted(
        p
        for p in landing.rglob("*.jsonl")
        if p.parent.relative_to(landing).as_posix() in first.folders
    )
    assert first.new_files == len(new)

    # The next run, nothing new: the same recent hours, the next older ones.
    second = plan_new_files(str(checkpoint), landing)
    after = [
        _hour(n)
        for n in range(
            201 - RECENT_HOURS - OLDER_PER_RUN, 201 - RECENT_HOURS - 2 * OLDER_PER_RUN, -1
        )
    ]
    assert second.folders == (*recent, *after)


def test_a_first_run_lists_every_folder(tmp_path):
    landing = tmp_path / "events"
    _land(landing, range(RECENT_HOURS + OLDER_PER_RUN + 10))
    plan = plan_new_files(str(tmp_path / "gen=0"), landing)
    assert plan.folders == tuple(_hour(n) for n in range(RECENT_HOURS + OLDER_PER_RUN + 9, -1, -1))


def test_a_catch_up_lists_every_folder_newer_than_the_newest_read(tmp_path):
    landing, checkpoint, _ = _history(tmp_path, 10)
    _land(landing, range(10, 100))  # a backlog of 90 hours
    plan = plan_new_files(str(checkpoint), landing)
    assert plan.folders[:91] == tuple(_hour(n) for n in range(99, 8, -1))
    assert plan.new_files == 180


def test_a_late_file_in_an_old_folder_is_named_after_the_source_read_it(tmp_path):
    landing, checkpoint, landed = _history(tmp_path, 200)
    new = _land(landing, range(200, 201))
    plan = plan_new_files(str(checkpoint), landing)
    late = landing / _hour(3) / "late.jsonl"  # after the plan: no check listed hour 3
    late.write_text('{"late": true}\n')
    copy = landing / _hour(4) / "again.jsonl"
    copy.write_bytes(landed[0].read_bytes())  # the same bytes as hour 0's first file
    _read(checkpoint, 1, [*new, late, copy])  # the source lists everything: it reads them

    index = record_ingested_files(str(checkpoint), root=landing)
    assert [
        (p.file, p.reason, p.read, p.copy_of) for p in late_files(index, landing, plan.folder_uris)
    ] == [
        (f"{_hour(3)}/late.jsonl", "late_in_old_folder", True, None),
        (f"{_hour(4)}/again.jsonl", "late_in_old_folder", True, f"{_hour(0)}/part-0.jsonl"),
    ]
    assert LandedIndex(str(checkpoint)).read(spark_uri(late))


def test_a_run_reads_the_records_of_the_folders_it_lists_only(tmp_path):
    landing, checkpoint, landed = _history(tmp_path, 300)
    shards = list((manifest_path(str(checkpoint)) / "folders").iterdir())
    assert len(shards) == 300
    plan = plan_new_files(str(checkpoint), landing)
    # One shard per folder listed, one size looked up (the new files'): not 300 shards.
    assert len(plan.index._folders) == RECENT_HOURS + OLDER_PER_RUN
    with landed[0].open("a") as handle:  # hour 0: outside this run's folders
        handle.write("more\n")
    assert changed_files(str(checkpoint), landing, folders=plan.folder_uris) == []
    assert [p.reason for p in changed_files(str(checkpoint), landing)] == [
        "appended_after_ingestion"
    ]


def test_the_source_log_is_read_from_the_batches_since_the_last_record(tmp_path):
    landing, checkpoint = tmp_path / "events", tmp_path / "gen=0"
    hours = [_land(landing, range(n, n + 1)) for n in range(12)]
    for batch, files in enumerate(hours):
        _read(checkpoint, batch, files)
        index = record_ingested_files(str(checkpoint), root=landing)
        assert sorted(index.recorded_now) == sorted(spark_uri(f) for f in files)
    # Batch 9's log is a compaction of batches 0-9: the record took its tail only.
    assert (checkpoint / "sources" / "0" / "9.compact").exists()
    assert index.state["recorded_batch"] == 11
    assert index.state["newest_read"] == _hour(11)


def _source_entry(checkpoint: Path, name: str, batch: int, *files: Path) -> None:
    """A source log file as Spark's file source writes it, without its offsets or commit."""
    lines = [f'{{"path":"{spark_uri(f)}","timestamp":0,"batchId":{batch}}}' for f in files]
    (checkpoint / "sources" / "0" / name).write_text(
        "v1\n" + "".join(f"{line}\n" for line in lines)
    )


def _commit(checkpoint: Path, batch: int) -> None:
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"logOffset":{batch}}}\n')
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def test_a_file_listed_for_a_batch_whose_driver_died_before_planning_it_is_still_new(tmp_path):
    landing, checkpoint = tmp_path / "events", tmp_path / "gen=0"
    folder = landing / "2026-11-20" / "10"
    folder.mkdir(parents=True)
    for log in ("offsets", "commits", "sources/0"):
        (checkpoint / log).mkdir(parents=True)
    first, second = folder / "a.jsonl", folder / "b.jsonl"
    first.write_text("x" * 1000)
    (folder / ".a.jsonl.crc").write_text("hidden")
    (folder / "_tmp.jsonl").write_text("hidden")
    # No batch planned yet: every landed file is new, and nothing is caught up.
    plan = plan_new_files(str(checkpoint), landing)
    assert (_new_bytes(str(checkpoint), plan), _caught_up(str(checkpoint), plan)) == (1000, None)
    _source_entry(checkpoint, "0", 0, first)
    _commit(checkpoint, 0)
    plan = plan_new_files(str(checkpoint), landing)
    assert _caught_up(str(checkpoint), plan) == (
        "no new file among the 1 landed in the 1 hour folder(s) listed"
    )
    # The next file lands; the source lists it for batch 1, and the driver dies before offsets/1.
    second.write_text("y" * 24)
    _source_entry(checkpoint, "1", 1, second)
    plan = plan_new_files(str(checkpoint), landing)
    assert (_new_bytes(str(checkpoint), plan), _caught_up(str(checkpoint), plan)) == (24, None)
    # Batch 1 planned, not committed: it must be replayed whatever it read, so the size is unknown.
    (checkpoint / "offsets" / "1").write_text('v1\n{}\n{"logOffset":1}\n')
    plan = plan_new_files(str(checkpoint), landing)
    assert (_new_bytes(str(checkpoint), plan), _caught_up(str(checkpoint), plan)) == (None, None)
    # Batch 1 committed: nothing new again.
    _commit(checkpoint, 1)
    plan = plan_new_files(str(checkpoint), landing)
    assert _caught_up(str(checkpoint), plan) == (
        "no new file among the 2 landed in the 1 hour folder(s) listed"
    )


def test_a_batch_in_no_log_file_leaves_its_files_new(tmp_path):
    landing, checkpoint = tmp_path / "events", tmp_path / "gen=0"
    folder = landing / "2026-11-20" / "10"
    folder.mkdir(parents=True)
    for log in ("offsets", "commits", "sources/0"):
        (checkpoint / log).mkdir(parents=True)
    files = [folder / f"{n}.jsonl" for n in range(3)]
    for file in files:
        file.write_text("z")
    # Compacted past the committed batch (19 compacts 10-19, the entries before it gone): batch 9
    # is in no file, so nothing is recorded and every file is new (the query decides).
    _source_entry(checkpoint, "19.compact", 19, *files)
    _commit(checkpoint, 9)
    plan = plan_new_files(str(checkpoint), landing)
    assert plan.new_files == 3 and _caught_up(str(checkpoint), plan) is None


def test_a_checkpoint_gone_back_is_recorded_anew(tmp_path):
    landing, checkpoint = tmp_path / "events", tmp_path / "gen=0"
    first, second = _land(landing, range(0, 1)), _land(landing, range(1, 2))
    _read(checkpoint, 0, first)
    _read(checkpoint, 1, second)
    record_ingested_files(str(checkpoint), root=landing)
    for log in ("offsets", "commits", "sources/0"):  # batch 1 forgotten: the source reads it again
        (checkpoint / log / "1").unlink()
    plan = plan_new_files(str(checkpoint), landing)
    assert plan.new_files == len(second)
    assert sorted(LandedIndex(str(checkpoint)).every_record()) == sorted(map(spark_uri, first))


def test_the_source_lists_the_date_folders_of_the_new_files_only(tmp_path):
    landing, checkpoint, _ = _history(tmp_path, 200)
    _land(landing, range(200, 202))  # two new hours: hour 200 is 2026-01-09 08:00
    plan = plan_new_files(str(checkpoint), landing)
    assert plan.read_dates == ("2026-01-09",)
    assert plan.source_path(str(landing)) == f"{landing}/{{2026-01-09}}"

    _land(landing, range(230, 231))  # the next day too
    (landing / "loose.jsonl").write_text('{"loose": true}\n')
    plan = plan_new_files(str(checkpoint), landing)
    assert plan.read_dates is None  # a new file above the date folders: the whole folder
    assert plan.source_path(str(landing)) == str(landing)


def test_a_date_name_a_glob_would_misread_has_the_source_list_everything(tmp_path):
    landing, checkpoint, _ = _history(tmp_path, 10)
    odd = landing / "2026-01-01 {x}" / "00" / "part-0.jsonl"
    odd.parent.mkdir(parents=True)
    odd.write_text('{"odd": true}\n')
    plan = plan_new_files(str(checkpoint), landing)
    assert plan.new_files == 1 and plan.read_dates is None


def test_a_run_looks_at_the_whole_landing_folder_once_a_day(tmp_path):
    landing, checkpoint, _ = _history(tmp_path, 200)
    _land(landing, range(200, 201))
    now, day = datetime(2026, 2, 1, tzinfo=UTC), timedelta(hours=24)

    first = plan_new_files(str(checkpoint), landing, whole_every=day, now=now)
    assert first.folders is None  # never looked: everything
    assert len(first.listing.files) == 2 * 201
    assert first.read_dates == ("2026-01-09",)  # where the new files are
    later = plan_new_files(str(checkpoint), landing, whole_every=day, now=now + day / 2)
    assert len(later.folders) == RECENT_HOURS + OLDER_PER_RUN
    assert later.read_dates == ("2026-01-09",)
    again = plan_new_files(str(checkpoint), landing, whole_every=day, now=now + day)
    assert (again.folders, again.read_dates) == (None, ("2026-01-09",))
    # A read-only look (status) is no run's whole look.
    plan_new_files(str(checkpoint), landing, write=False, whole=True, now=now + 3 * day)
    assert LandedIndex(str(checkpoint)).state["whole_look_at"] == (now + day).isoformat()


def test_the_source_log_rolls_over_once_its_compacted_file_is_large_and_no_batch_waits(tmp_path):
    landing, checkpoint = tmp_path / "events", tmp_path / "gen=0"
    for batch in range(10):  # batch 9 writes 9.compact, every entry before it
        _read(checkpoint, batch, _land(landing, range(batch, batch + 1)))
    size = (checkpoint / "sources" / "0" / "9.compact").stat().st_size
    assert source_log_bytes(str(checkpoint)) == size
    assert roll_over_due(str(checkpoint), limit=size + 1) is None
    assert roll_over_due(str(checkpoint), limit=size).startswith("its file-source log holds")
    (checkpoint / "offsets" / "10").write_text('v1\n{}\n{"logOffset":10}\n')  # planned, not done
    assert roll_over_due(str(checkpoint), limit=size) is None
