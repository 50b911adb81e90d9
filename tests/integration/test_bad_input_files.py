"""Dirty landing files end to end (bronze -> silver): nothing silently dropped, the pipeline keeps going."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import functions as F

from helpers import run_job, table
from lakehouse_tools.generator import write_campaigns, campaign_dimension

EVENT_MS = 1795168800000  # 2026-11-20T10:00:00Z


def event(event_id: str, ad_id: str, **extra) -> str:
    return json.dumps(
        {
            "event_id": event_id, "user_id": "u-1", "page_id": "p-1", "ad_id": ad_id, "ad_type": "banner",
            "event_type": "view", "event_time": str(EVENT_MS), "ip_address": "10.0.0.1", **extra,
        }
    )  # fmt: skip


def test_dirty_files_are_ingested_losslessly_and_classified(spark, lakehouse):
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    hour_dir = Path(lakehouse.landing_events, "2026-11-20", "10")
    hour_dir.mkdir(parents=True)
    (hour_dir / "bom-crlf.jsonl").write_bytes(
        b"\xef\xbb\xbf" + f"{event('e-1', ad)}\r\n{event('e-2', ad)}\r\n".encode()
    )
    (hour_dir / "empty.jsonl").write_bytes(b"")
    (hour_dir / "only-bad.jsonl").write_bytes(b'not json\n{"event_id": "e-9"}\n\n' + event("e-3", ad).encode()[:30] + b"\n")
    (hour_dir / "invalid-utf8.jsonl").write_bytes(event("e-4", ad).encode().replace(b"u-1", b"u-\xc3\x28") + b"\n")
    (hour_dir / "drift-and-dupes.jsonl").write_text(
        event("e-5", ad, experiment="b") + "\n" + event("e-1", ad) + "\n"  # e-1 again: a duplicate
    )
    # A producer still writing: hidden until renamed, so it must be ignored, then picked up.
    half_written = hour_dir / ".late.jsonl.tmp"
    half_written.write_text(event("e-6", ad) + "\n" + event("e-7", ad)[:20])

    for job in ("dim_campaigns", "bronze_ad_events", "silver_ad_events"):
        run_job(job, lakehouse)

    bronze = table(spark, lakehouse, "bronze.ad_events")
    assert bronze.count() == 2 + 4 + 1 + 2  # every line of every visible file, empty line included
    assert bronze.filter(F.col("source_file").contains(".late")).count() == 0
    silver = {r.event_id: r.rescued_data for r in table(spark, lakehouse, "silver.ad_events").collect()}
    assert silver == {"e-1": None, "e-2": None, "e-5": '{"experiment":"b"}'}
    quarantine = table(spark, lakehouse, "silver.quarantine_ad_events")
    rows = quarantine.select(F.hex(F.col("raw_line").cast("binary")).alias("hex"), "reason", "source_file").collect()
    assert sorted((bytes.fromhex(r.hex), r.reason, Path(r.source_file).name) for r in rows) == sorted(
        [
            (b"not json", "malformed_json", "only-bad.jsonl"),
            (b'{"event_id": "e-9"}', "missing_required_field", "only-bad.jsonl"),
            (b"", "empty_line", "only-bad.jsonl"),
            (event("e-3", ad).encode()[:30], "malformed_json", "only-bad.jsonl"),
            (event("e-4", ad).encode().replace(b"u-1", b"u-\xc3\x28"), "invalid_utf8", "invalid-utf8.jsonl"),
        ]
    )
    metrics = table(spark, lakehouse, "ops.silver_batch_metrics").collect()
    assert [(m.lines, m.valid_lines, m.duplicates_in_batch, m.inserted, m.quarantined) for m in metrics] == [(9, 4, 1, 3, 5)]
    assert metrics[0].quarantined_by_reason == {"malformed_json": 2, "missing_required_field": 1, "empty_line": 1, "invalid_utf8": 1}

    # The producer finishes: the renamed file is read by the next run, once.
    half_written.write_text(event("e-6", ad) + "\n")
    half_written.rename(hour_dir / "late.jsonl")
    for job in ("bronze_ad_events", "silver_ad_events"):
        run_job(job, lakehouse)
    assert table(spark, lakehouse, "bronze.ad_events").count() == 10
    assert table(spark, lakehouse, "silver.ad_events").filter("event_id = 'e-6'").count() == 1
