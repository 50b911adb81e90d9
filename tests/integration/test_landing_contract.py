"""The landing zone's contract through the job runner: any file name is read once, implausible event
times are quarantined, files the source will not read are reported, changed files are refused by name,
gzip files are read (a gzip payload under .jsonl is one quarantine entry), renamed or moved files are
recognised by their bytes, a line cut mid-write is read whole after the printed fix."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import re
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

from helpers import (
    assert_silver_matches_oracle,
    assert_tables_match_oracle,
    run_job,
    run_pipeline,
    table,
)
from pyspark.testing import assertDataFrameEqual

from lakehouse.landing import landing_report
from lakehouse_tools import observe, status
from lakehouse_tools.generator import campaign_dimension, write_campaigns

EVENT_MS = 1795168800000  # 2026-11-20T10:00:00Z
SILVER = ("dim_campaigns", "bronze_ad_events", "silver_ad_events")
# Gold by event hour and sessions: where a 1970 event time would show.
GOLD_TASKS = ("gold.campaign_hourly", "gold.user_sessions")


def event(event_id: str, ad_id: str, event_time: str = str(EVENT_MS)) -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "user_id": "u-1",
            "page_id": "p-1",
            "ad_id": ad_id,
            "ad_type": "banner",
            "event_type": "view",
            "event_time": event_time,
            "ip_address": "10.0.0.1",
        }
    )


def _hour_dir(lakehouse, hour: str = "10") -> Path:
    folder = Path(lakehouse.landing_events, "2026-11-20", hour)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _file_name(uri: str) -> str:
    return Path(unquote(urlsplit(uri).path)).name


def _bronze_by_file(spark, lakehouse) -> list[tuple[str, str]]:
    rows = table(spark, lakehouse, "bronze.ad_events").select("raw_line", "source_file").collect()
    return sorted((_file_name(row.source_file), row.raw_line) for row in rows)


# Names the file system allows that Hadoop's glob and checksummed file system could not take: a
# colon halted bronze on every run; glob characters matched other files (read twice) or none.
ODD_NAMES = (
    "part-2026-11-20T01:00:00.jsonl",
    "b[x].jsonl",
    "bx.jsonl",
    "c?.jsonl",
    "cy.jsonl",
    "d*.jsonl",
    "e{x,y}.jsonl",
    "ex.jsonl",
    "f\\g.jsonl",
    "sp ace.jsonl",
    "ünï cödé.jsonl",
    "h%20.jsonl",
    "i#j.jsonl",
    "new\nline.jsonl",
)


def test_any_file_name_is_read_exactly_once(spark, lakehouse):
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    folder = _hour_dir(lakehouse)
    expected = []
    for index, name in enumerate(ODD_NAMES):
        line = event(f"e-{index}", ad)
        (folder / name).write_text(line + "\n")
        expected.append((name, line))

    for job in SILVER:
        run_job(job, lakehouse)
    assert _bronze_by_file(spark, lakehouse) == sorted(expected)
    assert_silver_matches_oracle(spark, lakehouse)

    # Nothing new: the check from files knows every odd name as the source logged it.
    assert "no new file" in run_job("bronze_ad_events", lakehouse)["not_started"]
    # A new file beside them is read, once, and nothing else again.
    (folder / "later: [1].jsonl").write_text(event("e-later", ad) + "\n")
    for job in SILVER[1:]:
        run_job(job, lakehouse)
    assert _bronze_by_file(spark, lakehouse) == sorted(
        [*expected, ("later: [1].jsonl", event("e-later", ad))]
    )
    assert_silver_matches_oracle(spark, lakehouse)


def test_event_times_before_the_floor_are_quarantined_with_a_hint_for_seconds(spark, lakehouse):
    """Digits that the contract admits but no producer means (1970) never reach silver or gold."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    too_old = {
        "1763596800": "1763596800 ms is before 2000-01-01; 10 digits: likely epoch seconds, "
        "the contract is milliseconds",
        "0": "0 ms is before 2000-01-01",
        "1000": "1000 ms is before 2000-01-01",
        "946684799999": "946684799999 ms is before 2000-01-01",
    }
    lines = [event(f"old-{index}", ad, millis) for index, millis in enumerate(too_old)]
    lines += [event("e-1", ad), event("e-2", ad)]  # the floor itself: tests/unit, silver
    (_hour_dir(lakehouse) / "part-0.jsonl").write_text("\n".join(lines) + "\n")

    run_pipeline(lakehouse, up_to=GOLD_TASKS)
    quarantine = table(spark, lakehouse, "silver.quarantine_ad_events")
    assertDataFrameEqual(
        quarantine.select("raw_line", "reason", "reason_detail"),
        spark.createDataFrame(
            [(line, "event_time_too_old", detail) for line, detail in zip(lines, too_old.values())],
            "raw_line string, reason string, reason_detail string",
        ),
    )
    assert sorted(r.event_id for r in table(spark, lakehouse, "silver.ad_events").collect()) == [
        "e-1",
        "e-2",
    ]
    assert_tables_match_oracle(spark, lakehouse, gold=(*GOLD_TASKS, "gold.open_sessions"))


def test_files_the_source_will_not_read_are_reported_with_what_to_do(spark, lakehouse):
    """Other suffixes and compressed files are listed, not read; .jsonl files at another depth are
    read and listed (status cannot place them in an hour); a gzip payload under .jsonl is named."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    folder = _hour_dir(lakehouse)
    (folder / "part-0.jsonl").write_text(event("e-0", ad) + "\n")
    (folder / "notes.txt").write_text(event("e-txt", ad) + "\n")
    (folder / "part-1.json").write_text(event("e-json", ad) + "\n")
    (folder / "part-2.jsonl.bz2").write_bytes(bz2.compress((event("e-bz2", ad) + "\n").encode()))
    # Many events packed: the payload's bytes hold newlines, which the source reads as "lines".
    packed = gzip.compress(
        "".join(
            event(hashlib.sha256(b"%d" % n).hexdigest(), ad) + "\n" for n in range(50)
        ).encode(),
        mtime=0,
    )
    assert packed.count(b"\n") > 1
    (folder / "packed.jsonl").write_bytes(packed)
    (folder.parent / "shallow.jsonl").write_text(event("e-shallow", ad) + "\n")
    (folder / "retry").mkdir()
    (folder / "retry" / "deep.jsonl").write_text(event("e-deep", ad) + "\n")
    (folder / ".in-progress.jsonl.tmp").write_text(event("e-hidden", ad))  # a producer writing

    summary = run_job("bronze_ad_events", lakehouse)
    reported = sorted((p["file"], p["reason"], p["read"]) for p in summary["ignored_files"])
    assert reported == [
        ("2026-11-20/10/notes.txt", "not_jsonl", False),
        ("2026-11-20/10/packed.jsonl", "gzip_payload_in_jsonl", True),
        ("2026-11-20/10/part-1.json", "not_jsonl", False),
        ("2026-11-20/10/part-2.jsonl.bz2", "compressed_file", False),
        ("2026-11-20/10/retry/deep.jsonl", "outside_layout", True),
        ("2026-11-20/shallow.jsonl", "outside_layout", True),
    ]
    fixes = {p["file"]: p["what_to_do"] for p in summary["ignored_files"]}
    assert (
        "bunzip2 -c part-2.jsonl.bz2 > .part.tmp && mv .part.tmp part-2.jsonl"
        in (fixes["2026-11-20/10/part-2.jsonl.bz2"])
    )
    assert "part-1.jsonl" in fixes["2026-11-20/10/part-1.json"]
    read = {name for name, _ in _bronze_by_file(spark, lakehouse)}
    assert read == {"part-0.jsonl", "packed.jsonl", "shallow.jsonl", "deep.jsonl"}
    # Counted as bronze's rows (the payload is one), not as the binary lines the source read.
    assert summary["rows_written"] == 4
    # The same report for lakehouse status, from files alone.
    assert landing_report(lakehouse)["ignored"] == summary["ignored_files"]


def test_a_file_changed_after_ingestion_is_refused_by_name_with_a_fix_that_works(spark, lakehouse):
    """Appended to, or rewritten in place: never read again (in part or twice), named in bronze's
    summary with the fix; after the fix the next run reads the new lines once, as the oracle does."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    folder = _hour_dir(lakehouse)
    appended, rewritten, touched = (
        folder / f"{n}.jsonl" for n in ("appended", "rewritten", "touched")
    )
    appended.write_text(event("a-1", ad) + "\n" + event("a-2", ad) + "\n")
    original = event("r-1", ad) + "\n" + event("r-2", ad) + "\n"
    rewritten.write_text(original)
    touched.write_text(event("t-1", ad) + "\n")
    for job in SILVER:
        run_job(job, lakehouse)
    ingested = _bronze_by_file(spark, lakehouse)
    size = appended.stat().st_size

    with appended.open("a") as handle:
        handle.write(event("a-3", ad) + "\n")
    rewritten.write_text(
        event("r-1", ad) + "\n" + event("r-3", ad) + "\n" + event("r-4", ad) + "\n"
    )
    touched.touch()  # a new modification time, the same bytes: not a change
    summary = run_job("bronze_ad_events", lakehouse)
    changed = {p["file"]: p for p in summary["changed_files"]}
    assert sorted((p["file"], p["reason"], p["read"]) for p in changed.values()) == [
        ("2026-11-20/10/appended.jsonl", "appended_after_ingestion", False),
        ("2026-11-20/10/rewritten.jsonl", "rewritten_after_ingestion", False),
    ]
    assert changed["2026-11-20/10/appended.jsonl"]["detail"].startswith(
        f"{len(event('a-3', ad)) + 1} byte(s) appended after bronze read its first {size} byte(s)"
    )
    assert _bronze_by_file(spark, lakehouse) == ingested  # nothing read again, in part or whole
    # lakehouse status says so, by file and hour, instead of promising the next run reads them.
    grid = status.grade(observe.observe(lakehouse))
    assert [(f["file"], f["reason"]) for f in grid.unread_files] == [
        ("2026-11-20/10/appended.jsonl", "appended_after_ingestion"),
        ("2026-11-20/10/rewritten.jsonl", "rewritten_after_ingestion"),
    ]
    assert [row.state for row in grid.rows] == ["mismatch"]
    assert not any("(the next run ingests them)" in reason for reason in grid.rows[0].reasons)

    # The printed fixes: the appended bytes moved to a new file; the rewritten file's original
    # content back, its new content landed under a new name.
    subprocess.run(["bash", "-c", changed["2026-11-20/10/appended.jsonl"]["command"]], check=True)
    new_content = rewritten.read_text()
    rewritten.write_text(original)
    (folder / "rewritten-v2.jsonl").write_text(new_content)
    summary = run_job("bronze_ad_events", lakehouse)
    assert summary["changed_files"] == []
    run_job("silver_ad_events", lakehouse)
    assert _bronze_by_file(spark, lakehouse) == sorted(
        [
            *ingested,
            ("appended-after-" + str(size) + ".jsonl", event("a-3", ad)),
            *[("rewritten-v2.jsonl", line) for line in new_content.splitlines()],
        ]
    )
    assert_silver_matches_oracle(spark, lakehouse)


def _quarantine(spark, lakehouse) -> list[tuple]:
    """(file name, reason, the line: its exact bytes when not UTF-8, else its text)."""
    rows = table(spark, lakehouse, "silver.quarantine_ad_events").collect()
    return sorted(
        (_file_name(r.source_file), r.reason, bytes(r.raw_bytes) if r.raw_bytes else r.raw_line)
        for r in rows
    )


def _silver_ids(spark, lakehouse) -> list[str]:
    return sorted(r.event_id for r in table(spark, lakehouse, "silver.ad_events").collect())


def test_gzip_is_read_by_its_suffix_and_a_gzip_payload_named_jsonl_is_one_quarantine_entry(
    spark, lakehouse
):
    """A .jsonl.gz file is read decompressed, once; gzip bytes under a .jsonl name are one bronze row
    (the file's first line), one quarantine entry naming the file, and the printed fix (land the
    bytes as .jsonl.gz) gets its events read."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    folder = _hour_dir(lakehouse)
    (folder / "part-0.jsonl").write_text(event("e-0", ad) + "\n")
    zipped = [event(f"g-{i}", ad) for i in range(3)]
    (folder / "part-1.jsonl.gz").write_bytes(
        gzip.compress("".join(f"{x}\n" for x in zipped).encode())
    )
    packed_events = [event(f"p-{i}", ad) for i in range(40)]
    packed = gzip.compress("".join(f"{x}\n" for x in packed_events).encode(), mtime=0)
    (folder / "packed.jsonl").write_bytes(packed)
    binary_lines = re.split(rb"\r\n|\r|\n", packed)
    assert len(binary_lines) > 2, "the payload must hold several 'lines' for the test to say much"

    run_pipeline(lakehouse, up_to=GOLD_TASKS)
    files = Counter(name for name, _ in _bronze_by_file(spark, lakehouse))
    assert files == {"part-0.jsonl": 1, "part-1.jsonl.gz": 3, "packed.jsonl": 1}
    first = binary_lines[0]
    assert _quarantine(spark, lakehouse) == [("packed.jsonl", "gzip_payload", first)]
    assert _silver_ids(spark, lakehouse) == ["e-0", "g-0", "g-1", "g-2"]
    assert_tables_match_oracle(spark, lakehouse, gold=GOLD_TASKS)
    [problem] = landing_report(lakehouse)["ignored"]
    assert (problem["file"], problem["reason"], problem["read"]) == (
        "2026-11-20/10/packed.jsonl",
        "gzip_payload_in_jsonl",
        True,
    )

    subprocess.run(["bash", "-c", problem["command"]], check=True)  # the printed fix
    run_pipeline(lakehouse, up_to=GOLD_TASKS)
    assert _silver_ids(spark, lakehouse) == sorted(
        ["e-0", "g-0", "g-1", "g-2", *(f"p-{i}" for i in range(40))]
    )
    assert len(_quarantine(spark, lakehouse)) == 1  # the payload's entry stays, as history
    assert_tables_match_oracle(spark, lakehouse, gold=(*GOLD_TASKS, "gold.open_sessions"))


def test_a_renamed_moved_or_copied_file_is_recognised_by_its_bytes_and_read_once(spark, lakehouse):
    """Renamed in its folder, moved to another hour, or landed twice in one run: the same bytes are
    read once; bronze's summary and lakehouse status name each copy with its original."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    folder = _hour_dir(lakehouse)
    (folder / "part-0.jsonl").write_text(
        event("m-1", ad) + "\n" + event("m-2", ad) + "\nnot json\n"
    )
    (folder / "part-1.jsonl").write_text(event("r-1", ad) + "\n")
    for job in SILVER:
        run_job(job, lakehouse)
    ingested = _bronze_by_file(spark, lakehouse)

    (folder / "part-0.jsonl").rename(folder / "renamed.jsonl")
    (folder / "part-1.jsonl").rename(_hour_dir(lakehouse, "11") / "part-1.jsonl")
    (folder / "new.jsonl").write_text(event("n-1", ad) + "\n")
    (folder / "new2.jsonl").write_text(event("n-1", ad) + "\n")
    summary = run_job("bronze_ad_events", lakehouse)
    assert _bronze_by_file(spark, lakehouse) == sorted([*ingested, ("new.jsonl", event("n-1", ad))])
    copies = [(p["file"], p["reason"], p["copy_of"]) for p in summary["copied_files"]]
    assert copies == [
        ("2026-11-20/10/new2.jsonl", "copy_of_ingested", "2026-11-20/10/new.jsonl"),
        ("2026-11-20/10/renamed.jsonl", "copy_of_ingested", "2026-11-20/10/part-0.jsonl"),
        ("2026-11-20/11/part-1.jsonl", "copy_of_ingested", "2026-11-20/10/part-1.jsonl"),
    ]
    assert "no new file" in run_job("bronze_ad_events", lakehouse)["not_started"]

    run_pipeline(lakehouse, up_to=GOLD_TASKS)
    assert _silver_ids(spark, lakehouse) == ["m-1", "m-2", "n-1", "r-1"]
    assert _quarantine(spark, lakehouse) == [("part-0.jsonl", "malformed_json", "not json")]
    assert_tables_match_oracle(spark, lakehouse, gold=(*GOLD_TASKS, "gold.open_sessions"))
    # lakehouse status: each copy known, with its original; landed lines and bronze agree by hour
    # (the moved file's in its original's), nothing to do (the gold tables not run are pending).
    grid = status.grade(observe.observe(lakehouse))
    assert [(f["file"], f["copy_of"]) for f in grid.landing_files] == [c[::2] for c in copies]
    assert [(row.counts["landed"], row.counts["bronze.ad_events"]) for row in grid.rows] == [(5, 5)]
    assert grid.needs_action == [] and grid.unread_files == []


def test_a_line_cut_mid_write_and_completed_by_an_append_is_read_whole_after_the_printed_fix(
    spark, lakehouse
):
    """The append rule (refused by name with the fix) for a cut line: the fix moves the whole line
    into the new file, so the completed event is read; its fragment stays quarantined as history."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    part = _hour_dir(lakehouse) / "part-0.jsonl"
    whole = event("c-2", ad)
    part.write_text(event("c-1", ad) + "\n" + whole[:30])
    for job in SILVER:
        run_job(job, lakehouse)
    assert _quarantine(spark, lakehouse) == [("part-0.jsonl", "malformed_json", whole[:30])]

    with part.open("a") as handle:
        handle.write(whole[30:] + "\n" + event("c-3", ad) + "\n")
    [changed] = run_job("bronze_ad_events", lakehouse)["changed_files"]
    assert (changed["file"], changed["reason"]) == (
        "2026-11-20/10/part-0.jsonl",
        "appended_after_ingestion",
    )
    subprocess.run(["bash", "-c", changed["command"]], check=True)
    run_pipeline(lakehouse, up_to=GOLD_TASKS)
    assert _silver_ids(spark, lakehouse) == ["c-1", "c-2", "c-3"]
    assert "30 byte(s) into a line cut mid-write" in changed["detail"]
    assert _quarantine(spark, lakehouse) == [("part-0.jsonl", "malformed_json", whole[:30])]
    assert_tables_match_oracle(spark, lakehouse, gold=(*GOLD_TASKS, "gold.open_sessions"))
