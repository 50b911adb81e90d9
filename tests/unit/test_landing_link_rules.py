"""Every shape a landing file can take, seen from files alone as Spark's file source sees it: a
plain file, a linked file, a linked hour folder, a linked day folder, a linked landing folder; a
link back to a folder it is in refused by name; a link to nothing reported."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from lakehouse.landing import (
    changed_files,
    ignored_files,
    plan_new_files,
    readable_files,
    spark_uri,
)


def _ingested(checkpoint: Path, *files: Path) -> None:
    """A checkpoint whose committed batch 0 read ``files``, as Spark's file source records it."""
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    entries = [
        json.dumps({"path": spark_uri(f), "timestamp": f.stat().st_mtime_ns // 10**6, "batchId": 0})
        for f in files
    ]
    (checkpoint / "sources" / "0" / "0").write_text("v1\n" + "\n".join(entries) + "\n")
    (checkpoint / "offsets" / "0").write_text('v1\n{}\n{"logOffset":0}\n')
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _relative(root: Path, files: dict) -> list[str]:
    return sorted(Path(path).relative_to(root).as_posix() for path in files.values())


def test_linked_files_hour_folders_and_day_folders_are_read_as_spark_lists_them(tmp_path):
    landing, elsewhere = tmp_path / "events", tmp_path / "elsewhere"
    plain = _write(landing / "2026-11-20" / "00" / "plain.jsonl", "p-1\n")
    _write(elsewhere / "file.jsonl", "f-1\n")
    linked = landing / "2026-11-20" / "00" / "linked.jsonl"
    linked.symlink_to(elsewhere / "file.jsonl")
    checkpoint = tmp_path / "gen=0"
    _ingested(checkpoint, plain, linked)
    assert changed_files(str(checkpoint), landing) == []
    assert plan_new_files(str(checkpoint), landing, write=False).new_files == 0

    # An hour folder and a day folder linked from elsewhere, and nothing else new: the regression
    # of issue 59 (no listing followed them, so the run said "no new file" and read nothing).
    _write(elsewhere / "hour" / "part.jsonl", "h-1\nh-2\n")
    (elsewhere / "hour" / "part-1.jsonl.gz").write_bytes(gzip.compress(b"g-1\n"))
    _write(elsewhere / "day" / "00" / "part.jsonl", "d-1\n")
    (landing / "2026-11-20" / "01").symlink_to(elsewhere / "hour", target_is_directory=True)
    (landing / "2026-11-21").symlink_to(elsewhere / "day", target_is_directory=True)

    readable = readable_files(landing)
    assert _relative(landing, readable) == [
        "2026-11-20/00/linked.jsonl",
        "2026-11-20/00/plain.jsonl",
        "2026-11-20/01/part-1.jsonl.gz",
        "2026-11-20/01/part.jsonl",
        "2026-11-21/00/part.jsonl",
    ]
    # Named by their path under the link, as Spark's source logs them (file:///.../01/part.jsonl).
    assert spark_uri(landing / "2026-11-20" / "01" / "part.jsonl") in readable
    assert ignored_files(landing) == []
    plan = plan_new_files(str(checkpoint), landing, write=False)
    assert (plan.new_files, plan.new_bytes) == (
        3,
        len("h-1\nh-2\n") + len("d-1\n") + len(gzip.compress(b"g-1\n")),
    )
    assert (plan.copies, plan.refusal(landing)) == ({}, None)

    # The landing folder itself a link: the same files, under the link's path.
    (tmp_path / "linked-root").symlink_to(landing, target_is_directory=True)
    assert _relative(tmp_path / "linked-root", readable_files(tmp_path / "linked-root")) == (
        _relative(landing, readable)
    )


def test_a_folder_linked_twice_gives_copies_read_once(tmp_path):
    landing, elsewhere = tmp_path / "events", tmp_path / "elsewhere"
    _write(elsewhere / "hour" / "part.jsonl", "h-1\n")
    for hour in ("01", "02"):
        (landing / "2026-11-20").mkdir(parents=True, exist_ok=True)
        (landing / "2026-11-20" / hour).symlink_to(elsewhere / "hour", target_is_directory=True)
    plan = plan_new_files(str(tmp_path / "gen=0"), landing, write=False)
    assert plan.copies == {
        spark_uri(landing / "2026-11-20" / "02" / "part.jsonl"): spark_uri(
            landing / "2026-11-20" / "01" / "part.jsonl"
        )
    }


def test_a_link_back_to_a_folder_it_is_in_refuses_the_run_by_name_with_the_fix(tmp_path):
    landing = tmp_path / "events"
    _write(landing / "2026-11-20" / "00" / "part.jsonl", "p-1\n")
    loop = landing / "2026-11-20" / "00" / "again"
    loop.symlink_to("..", target_is_directory=True)  # Spark would read part.jsonl ~40 times
    (landing / "2026-11-20" / "up").symlink_to(tmp_path, target_is_directory=True)

    assert _relative(landing, readable_files(landing)) == ["2026-11-20/00/part.jsonl"]
    assert [(p.file, p.reason, p.read, p.command) for p in ignored_files(landing)] == [
        ("2026-11-20/00/again", "symlink_loop", False, f"rm {loop}"),
        ("2026-11-20/up", "symlink_loop", False, f"rm {landing / '2026-11-20' / 'up'}"),
    ]
    refusal = plan_new_files(str(tmp_path / "gen=0"), landing).refusal(landing)
    assert refusal.startswith(
        "symbolic link(s) in the landing zone to a folder they are in: 2026-11-20/00/again -> ..; "
        f"2026-11-20/up -> {tmp_path}; "
    )
    assert f"rm {loop} && rm {landing / '2026-11-20' / 'up'}" in refusal
    assert refusal.endswith("Nothing was read; the next run reads the other files as usual.")

    os.system(f"rm {loop} && rm {landing / '2026-11-20' / 'up'}")  # the printed fix
    assert plan_new_files(str(tmp_path / "gen=0"), landing).refusal(landing) is None


def test_a_link_to_nothing_is_reported_and_its_files_read_once_it_resolves(tmp_path):
    landing, mount = tmp_path / "events", tmp_path / "mount" / "hour"
    _write(landing / "2026-11-20" / "00" / "part.jsonl", "p-1\n")
    (landing / "2026-11-20" / "01").symlink_to(mount, target_is_directory=True)
    (landing / "2026-11-20" / "00" / "gone.jsonl").symlink_to(tmp_path / "gone.jsonl")

    assert _relative(landing, readable_files(landing)) == ["2026-11-20/00/part.jsonl"]
    found = ignored_files(landing)
    assert [(p.file, p.reason, p.read) for p in found] == [
        ("2026-11-20/00/gone.jsonl", "broken_symlink", False),
        ("2026-11-20/01", "broken_symlink", False),
    ]
    assert found[1].detail.startswith(f"a symbolic link to {mount}, which does not exist")
    assert plan_new_files(str(tmp_path / "gen=0"), landing).refusal(landing) is None

    _write(mount / "part.jsonl", "h-1\n")  # mounted again
    assert _relative(landing, readable_files(landing)) == [
        "2026-11-20/00/part.jsonl",
        "2026-11-20/01/part.jsonl",
    ]
