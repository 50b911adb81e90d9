"""The landing zone's contract through the job runner: any file name is read once, implausible event
times are quarantined, files the source will not read are reported, changed files are refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlsplit

from helpers import assert_silver_matches_oracle, run_job, table

from lakehouse_tools.generator import campaign_dimension, write_campaigns

EVENT_MS = 1795168800000  # 2026-11-20T10:00:00Z
SILVER = ("dim_campaigns", "bronze_ad_events", "silver_ad_events")


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
