"""The landing zone's contract checked from files: URIs as Spark logs them, changed files found,
copies and gzip payloads planned, a cut line's fix."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from lakehouse.config import Lakehouse
from lakehouse.landing import (
    LandedIndex,
    changed_files,
    copied_files,
    ingested_files,
    landing_report,
    plan_new_files,
    spark_uri,
)


def test_a_uri_is_quoted_as_hadoop_quotes_it():
    # As Spark 4.2's file source logged these names (tests/integration/test_landing_contract.py).
    folder = Path("/l/2026-11-20/10")
    assert {
        name: spark_uri(folder / name).removeprefix("file:///l/2026-11-20/10/")
        for name in ("part-2026-11-20T01:00:00.jsonl", "b[x].jsonl", "c?.jsonl", "d*.jsonl")
    } == {
        "part-2026-11-20T01:00:00.jsonl": "part-2026-11-20T01:00:00.jsonl",
        "b[x].jsonl": "b%5Bx%5D.jsonl",
        "c?.jsonl": "c%3F.jsonl",
        "d*.jsonl": "d*.jsonl",
    }
    assert spark_uri(folder / "e{x}.jsonl").endswith("/e%7Bx%7D.jsonl")
    assert spark_uri(folder / "f\\g h%20ü#.jsonl").endswith("/f%5Cg%20h%2520ü%23.jsonl")
    assert spark_uri(Path("/l/ingest_date=2026-11-20/a.jsonl")) == (
        "file:///l/ingest_date=2026-11-20/a.jsonl"
    )


def _ingested(checkpoint: Path, *files: Path, batch: int = 0) -> None:
    """A checkpoint whose committed ``batch`` read ``files``, as Spark's file source records it."""
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    entries = [
        json.dumps(
            {"path": spark_uri(f), "timestamp": f.stat().st_mtime_ns // 10**6, "batchId": batch}
        )
        for f in files
    ]
    (checkpoint / "sources" / "0" / str(batch)).write_text("v1\n" + "\n".join(entries) + "\n")
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"logOffset":{batch}}}\n')
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def test_appended_rewritten_and_touched_files(tmp_path):
    landing = tmp_path / "events"
    (landing / "d" / "h").mkdir(parents=True)
    files = {name: landing / "d" / "h" / f"{name}.jsonl" for name in ("a", "r", "t", "gone")}
    for name, path in files.items():
        path.write_text(f"{name}-1\n")
    checkpoint = tmp_path / "gen=0"
    _ingested(checkpoint, *files.values())
    assert set(ingested_files(str(checkpoint))) == {spark_uri(p) for p in files.values()}
    assert changed_files(str(checkpoint), landing) == []
    assert set(LandedIndex(str(checkpoint)).every_record()) == set(ingested_files(str(checkpoint)))

    with files["a"].open("a") as handle:
        handle.write("a-2\n")
    files["r"].write_text("R-1\n")
    later = files["t"].stat().st_mtime + 60
    os.utime(files["t"], (later, later))
    files["gone"].unlink()
    found = changed_files(str(checkpoint), landing)
    assert [(p.file, p.reason, p.read) for p in found] == [
        ("d/h/a.jsonl", "appended_after_ingestion", False),
        ("d/h/r.jsonl", "rewritten_after_ingestion", False),
    ]
    assert found[0].detail.startswith("4 byte(s) appended after bronze read its first 4 byte(s)")

    os.system(found[0].command)  # the printed fix: the appended bytes to a file of their own
    assert files["a"].read_text() == "a-1\n"
    assert (landing / "d" / "h" / "a-after-4.jsonl").read_text() == "a-2\n"
    files["r"].write_text("r-1\n")  # its content as bronze read it
    assert changed_files(str(checkpoint), landing) == []


def test_copies_are_planned_by_their_bytes_and_a_committed_decision_stays(tmp_path):
    landing = tmp_path / "events"
    for hour in ("10", "11"):
        (landing / "d" / hour).mkdir(parents=True)
    read = landing / "d" / "10" / "a.jsonl"
    read.write_text("a-1\n")
    checkpoint = tmp_path / "gen=0"
    _ingested(checkpoint, read)
    assert changed_files(str(checkpoint), landing) == []  # as bronze's run records what it read
    read.rename(landing / "d" / "11" / "a.jsonl")  # moved to another hour
    (landing / "d" / "10" / "b.jsonl").write_text("b-1\n")  # new: the same size, other bytes
    (landing / "d" / "10" / "c.jsonl").write_text("c-1\n")
    (landing / "d" / "10" / "c2.jsonl").write_text("c-1\n")  # a copy of a new file
    (landing / "d" / "10" / "e.jsonl").write_bytes(b"")
    (landing / "d" / "10" / "e2.jsonl").write_bytes(b"")  # empty files are never copies
    packed = gzip.compress(b"p-1\n" * 50, mtime=0)
    (landing / "d" / "10" / "p.jsonl").write_bytes(packed)

    plan = plan_new_files(str(checkpoint), landing)
    uri = {p.relative_to(landing).as_posix(): spark_uri(p) for p in landing.rglob("*.jsonl")}
    uri["d/10/a.jsonl"] = spark_uri(read)
    assert plan.copies == {
        uri["d/11/a.jsonl"]: uri["d/10/a.jsonl"],
        uri["d/10/c2.jsonl"]: uri["d/10/c.jsonl"],
    }
    assert plan.gzip_payloads == {uri["d/10/p.jsonl"]: packed.replace(b"\r", b"\n").split(b"\n")[0]}
    assert [(p.file, p.reason, p.copy_of) for p in copied_files(landing, plan.manifest)] == [
        ("d/10/c2.jsonl", "copy_of_ingested", "d/10/c.jsonl"),
        ("d/11/a.jsonl", "copy_of_ingested", "d/10/a.jsonl"),
    ]
    # A retry after a crash in which the copy c2 was read (committed) and its original c was not:
    # c2's decision stays, and c, no longer matched by a committed original, is read.
    _ingested(checkpoint, landing / "d" / "10" / "c2.jsonl", batch=1)
    again = plan_new_files(str(checkpoint), landing)
    assert uri["d/10/c.jsonl"] not in again.copies
    assert again.manifest[uri["d/10/c2.jsonl"]]["copy_of"] == uri["d/10/c.jsonl"]


def test_the_fix_for_a_cut_line_completed_by_an_append_moves_the_whole_line(tmp_path):
    landing = tmp_path / "events"
    (landing / "d" / "h").mkdir(parents=True)
    part = landing / "d" / "h" / "p.jsonl"
    part.write_bytes(b"one\r\ntw")
    checkpoint = tmp_path / "gen=0"
    _ingested(checkpoint, part)
    assert changed_files(str(checkpoint), landing) == []
    with part.open("ab") as handle:
        handle.write(b"o\nthree\n")
    [found] = changed_files(str(checkpoint), landing)
    assert found.reason == "appended_after_ingestion"
    assert "which ended 2 byte(s) into a line cut mid-write" in found.detail
    os.system(found.command)
    assert part.read_bytes() == b"one\r\ntw"  # as bronze read it
    assert (landing / "d" / "h" / "p-after-7.jsonl").read_bytes() == b"two\nthree\n"
    assert changed_files(str(checkpoint), landing) == []


def test_a_new_jsonl_gz_that_does_not_decompress_refuses_the_run_by_name(tmp_path):
    landing = tmp_path / "events"
    (landing / "d" / "h").mkdir(parents=True)
    (landing / "d" / "h" / "good.jsonl.gz").write_bytes(gzip.compress(b"g-1\n"))
    (landing / "d" / "h" / "cut.jsonl.gz").write_bytes(gzip.compress(b"c-1\n" * 100)[:20])
    (landing / "d" / "h" / "plain.jsonl.gz").write_bytes(b"p-1\n")
    plan = plan_new_files(str(tmp_path / "gen=0"), landing)
    assert sorted(Path(uri).name for uri in plan.broken_gzip) == ["cut.jsonl.gz", "plain.jsonl.gz"]
    refusal = plan.refusal(landing)
    assert "d/h/cut.jsonl.gz (EOFError" in refusal and "d/h/plain.jsonl.gz (BadGzipFile" in refusal


def test_status_names_a_new_jsonl_gz_that_does_not_decompress(tmp_path):
    lakehouse = Lakehouse(root=str(tmp_path / "lakehouse"))
    folder = Path(lakehouse.landing("events"), "2026-11-20", "00")
    folder.mkdir(parents=True)
    (folder / "good.jsonl").write_text("g-1\n")
    (folder / "cut.jsonl.gz").write_bytes(gzip.compress(b"c-1\n" * 100)[:20])
    report = landing_report(lakehouse)
    assert [(p["file"], p["reason"], p["read"]) for p in report["ignored"]] == [
        ("2026-11-20/00/cut.jsonl.gz", "broken_gzip", False)
    ]
