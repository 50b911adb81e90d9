"""The landing zone's contract checked from files: URIs as Spark logs them, changed files found."""

from __future__ import annotations

import json
import os
from pathlib import Path

from lakehouse.landing import changed_files, ingested_files, manifest_path, spark_uri


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
    assert set(json.loads(manifest_path(str(checkpoint)).read_text())) == set(
        ingested_files(str(checkpoint))
    )

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
