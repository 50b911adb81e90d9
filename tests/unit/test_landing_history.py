"""Bronze's checks cost the same after a long history: what a run lists and reads is bounded.

A run's checks list the hour folders that can hold new files and a few older ones in turn
(``lakehouse.landing.window``), and read bronze's records by key (``LandedIndex``); a file landed
late in an old folder is read by the source all the same and named after the read.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from lakehouse.landing import (
    LandedIndex,
    changed_files,
    late_files,
    manifest_path,
    plan_new_files,
    record_ingested_files,
    spark_uri,
)
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
