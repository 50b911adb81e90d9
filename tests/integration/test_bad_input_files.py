"""Dirty landing files end to end (bronze -> silver): nothing silently dropped, the pipeline keeps going."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from helpers import assert_tables_match_oracle, run_job, run_pipeline, table
from pyspark.sql import functions as F

from lakehouse.errors import ConfigError
from lakehouse_tools.generator import campaign_dimension, write_campaigns

EVENT_MS = 1795168800000  # 2026-11-20T10:00:00Z


def event(event_id: str, ad_id: str, **extra) -> str:
    return json.dumps(
        {
            "event_id": event_id,
            "user_id": "u-1",
            "page_id": "p-1",
            "ad_id": ad_id,
            "ad_type": "banner",
            "event_type": "view",
            "event_time": str(EVENT_MS),
            "ip_address": "10.0.0.1",
            **extra,
        }
    )


def test_dirty_files_are_ingested_losslessly_and_classified(spark, lakehouse):
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    hour_dir = Path(lakehouse.landing_events, "2026-11-20", "10")
    hour_dir.mkdir(parents=True)
    (hour_dir / "bom-crlf.jsonl").write_bytes(
        b"\xef\xbb\xbf" + f"{event('e-1', ad)}\r\n{event('e-2', ad)}\r\n".encode()
    )
    (hour_dir / "empty.jsonl").write_bytes(b"")
    (hour_dir / "only-bad.jsonl").write_bytes(
        b'not json\n{"event_id": "e-9"}\n\n' + event("e-3", ad).encode()[:30] + b"\n"
    )
    (hour_dir / "invalid-utf8.jsonl").write_bytes(
        event("e-4", ad).encode().replace(b"u-1", b"u-\xc3\x28") + b"\n"
    )
    (hour_dir / "drift-and-dupes.jsonl").write_text(
        event("e-5", ad, experiment="b") + "\n" + event("e-1", ad) + "\n"  # e-1 again: a duplicate
    )
    # Two files joined with cat: the second one's byte-order mark now starts a line of the first.
    (hour_dir / "appended.jsonl").write_bytes(
        f"{event('e-8', ad)}\n\ufeff{event('e-9', ad)}\n".encode()
    )
    contract = [
        event("e-10", ad).replace(
            f'"{EVENT_MS}"', '"2026-11-20T00:00:05+01:00"'
        ),  # used to stop silver
        event("e-11", ad) + event("e-12", ad),  # two events on one line
        event("e-13", ad) + " x",
        event("", ad),  # an empty event id is no id
    ]
    (hour_dir / "contract.jsonl").write_text("\n".join(contract) + "\n")
    # A producer still writing: hidden until renamed, so it must be ignored, then picked up.
    half_written = hour_dir / ".late.jsonl.tmp"
    half_written.write_text(event("e-6", ad) + "\n" + event("e-7", ad)[:20])

    for job in ("dim_campaigns", "bronze_ad_events", "silver_ad_events"):
        run_job(job, lakehouse)

    bronze = table(spark, lakehouse, "bronze.ad_events")
    assert (
        bronze.count() == 2 + 4 + 1 + 2 + 2 + 4
    )  # every line of every visible file, empty line included
    assert bronze.filter(F.col("source_file").contains(".late")).count() == 0
    # Text columns are valid UTF-8; the exact bytes of a line that was not are in raw_bytes.
    not_utf8 = event("e-4", ad).encode().replace(b"u-1", b"u-\xc3\x28")
    raw = bronze.filter("raw_bytes IS NOT NULL").select(
        F.hex("raw_line").alias("line"), F.hex("raw_bytes").alias("b")
    )
    assert [(bytes.fromhex(r.line), bytes.fromhex(r.b)) for r in raw.collect()] == [
        (not_utf8.decode("utf-8", errors="replace").encode(), not_utf8)
    ]
    silver = {
        r.event_id: r.rescued_data for r in table(spark, lakehouse, "silver.ad_events").collect()
    }
    assert silver == {
        "e-1": None,
        "e-2": None,
        "e-5": '{"experiment":"b"}',
        "e-8": None,
        "e-9": None,
    }
    quarantine = table(spark, lakehouse, "silver.quarantine_ad_events")
    rows = quarantine.select(
        F.hex(F.col("raw_line").cast("binary")).alias("hex"),
        F.hex("raw_bytes").alias("b"),
        "reason",
        "source_file",
    ).collect()
    assert sorted(
        (bytes.fromhex(r.hex), r.b and bytes.fromhex(r.b), r.reason, Path(r.source_file).name)
        for r in rows
    ) == sorted(
        [
            (b"not json", None, "malformed_json", "only-bad.jsonl"),
            (b'{"event_id": "e-9"}', None, "missing_required_field", "only-bad.jsonl"),
            (b"", None, "empty_line", "only-bad.jsonl"),
            (event("e-3", ad).encode()[:30], None, "malformed_json", "only-bad.jsonl"),
            (
                not_utf8.decode("utf-8", errors="replace").encode(),
                not_utf8,
                "invalid_utf8",
                "invalid-utf8.jsonl",
            ),
            (contract[0].encode(), None, "invalid_event_time", "contract.jsonl"),
            (contract[1].encode(), None, "malformed_json", "contract.jsonl"),
            (contract[2].encode(), None, "malformed_json", "contract.jsonl"),
            (contract[3].encode(), None, "missing_required_field", "contract.jsonl"),
        ]
    )
    metrics = table(spark, lakehouse, "ops.silver_batch_metrics").collect()
    assert [
        (m.lines, m.valid_lines, m.duplicates_in_batch, m.inserted, m.quarantined) for m in metrics
    ] == [(15, 6, 1, 5, 9)]
    assert metrics[0].quarantined_by_reason == {
        "malformed_json": 4,
        "missing_required_field": 2,
        "empty_line": 1,
        "invalid_utf8": 1,
        "invalid_event_time": 1,
    }

    # The producer finishes: the renamed file is read by the next hourly run, once, and every task
    # of that run passes the hour that held the line which used to stop silver.
    half_written.write_text(event("e-6", ad) + "\n")
    half_written.rename(hour_dir / "late.jsonl")
    run_pipeline(lakehouse)
    assert table(spark, lakehouse, "bronze.ad_events").count() == 16
    assert table(spark, lakehouse, "silver.ad_events").filter("event_id = 'e-6'").count() == 1
    assert_tables_match_oracle(spark, lakehouse)


def test_a_bad_campaigns_file_is_refused_and_the_dimension_kept(spark, lakehouse):
    """A dimension file that would join wrongly never replaces the dimension; a BOM does not harm it."""
    campaigns = Path(lakehouse.landing_campaigns)
    campaigns.parent.mkdir(parents=True, exist_ok=True)
    campaigns.write_bytes(b"\xef\xbb\xbfad_id,campaign_id\r\nad-1, c-1\r\nad-2,c-2\r\n")
    run_job("dim_campaigns", lakehouse)
    loaded = {(r.ad_id, r.campaign_id) for r in table(spark, lakehouse, "dims.campaigns").collect()}
    assert loaded == {("ad-1", "c-1"), ("ad-2", "c-2")}

    refusals = {
        b"campaign_id,ad_id\nc-1,ad-1\n": "the header is 'campaign_id,ad_id'",
        b"ad_id,campaign_id\nad-1,c-1\nad-1,c-2\n": "lines 2 and 3: ad_id 'ad-1' has two different rows",
    }
    for content, problem in refusals.items():
        campaigns.write_bytes(content)
        with pytest.raises(ConfigError, match=re.escape(problem)):
            run_job("dim_campaigns", lakehouse)
        assert {
            (r.ad_id, r.campaign_id) for r in table(spark, lakehouse, "dims.campaigns").collect()
        } == loaded


def test_a_file_with_an_old_modification_time_is_still_read(spark, lakehouse):
    """A file copied in late with an mtime weeks older than the newest file (a restored backup, a
    re-delivered hour) is new data: the file source's default maxFileAge (7 days) would skip it forever."""
    write_campaigns(lakehouse, seed=51)
    ad = campaign_dimension(51)[0][0]
    hour_dir = Path(lakehouse.landing_events, "2026-11-20", "10")
    hour_dir.mkdir(parents=True)
    (hour_dir / "new.jsonl").write_text(event("e-1", ad) + "\n")
    for job in ("dim_campaigns", "bronze_ad_events", "silver_ad_events"):
        run_job(job, lakehouse)

    old = hour_dir / "restored.jsonl"
    old.write_text(event("e-2", ad) + "\n")
    month_ago = time.time() - 30 * 86_400
    os.utime(old, (month_ago, month_ago))
    for job in ("bronze_ad_events", "silver_ad_events"):
        run_job(job, lakehouse)

    assert sorted(r.event_id for r in table(spark, lakehouse, "silver.ad_events").collect()) == [
        "e-1",
        "e-2",
    ]
    assert table(spark, lakehouse, "bronze.ad_events").count() == 2


def land_ad_one_only_and_events_of_ads(lakehouse, *ads: int) -> Path:
    """A dimension that knows ad-1 alone, and one event ``e-N`` of each ``ad-N`` in hour 10:00;
    the dimension's file (for a test to fix)."""
    campaigns = Path(lakehouse.landing_campaigns)
    campaigns.parent.mkdir(parents=True, exist_ok=True)
    campaigns.write_text("ad_id,campaign_id\nad-1,c-1\n")
    hour_dir = Path(lakehouse.landing_events, "2026-11-20", "10")
    hour_dir.mkdir(parents=True)
    (hour_dir / "events.jsonl").write_text("".join(event(f"e-{n}", f"ad-{n}") + "\n" for n in ads))
    return campaigns


def test_a_backfill_after_a_dimension_fix_admits_the_quarantined_line_and_marks_it_resolved(
    spark, lakehouse
):
    campaigns = land_ad_one_only_and_events_of_ads(lakehouse, 1, 2)
    for job in ("dim_campaigns", "bronze_ad_events", "silver_ad_events"):
        run_job(job, lakehouse)
    quarantine = table(spark, lakehouse, "silver.quarantine_ad_events")
    assert [(r.reason, r.resolved_at, r.resolved_by) for r in quarantine.collect()] == [
        ("unknown_ad_id", None, None)
    ]

    # The dimension learns ad-2; the backfill of that hour admits e-2 and the quarantine says so.
    campaigns.write_text("ad_id,campaign_id\nad-1,c-1\nad-2,c-2\n")
    run_job("dim_campaigns", lakehouse)
    hour = ("--mode", "batch", "--start", "2026-11-20T10:00Z", "--end", "2026-11-20T11:00Z")
    assert run_job("silver_ad_events", lakehouse, *hour)["quarantine_resolved"] == 1
    silver = {
        (r.event_id, r.campaign_id) for r in table(spark, lakehouse, "silver.ad_events").collect()
    }
    assert silver == {("e-1", "c-1"), ("e-2", "c-2")}
    resolved = table(spark, lakehouse, "silver.quarantine_ad_events").collect()
    assert [(r.raw_line, r.reason, r.resolved_by) for r in resolved] == [
        (
            event("e-2", "ad-2"),
            "unknown_ad_id",
            "recompute of 1 hour(s) 2026-11-20T10:00Z",
        )
    ]
    assert resolved[0].resolved_at is not None

    # Idempotent: the same backfill again resolves nothing more and changes no row.
    assert run_job("silver_ad_events", lakehouse, *hour)["quarantine_resolved"] == 0
    assert table(spark, lakehouse, "silver.quarantine_ad_events").collect() == resolved


def test_the_next_hourly_run_after_a_dimension_fix_admits_the_quarantined_line_and_gold_counts_it(
    spark, lakehouse
):
    """No backfill needed: the hourly run after the dimension learns an ad classifies the lines
    quarantined for it again, with or without new events, and gold reads the admitted rows."""
    campaigns = land_ad_one_only_and_events_of_ads(lakehouse, 1, 2, 3)
    gold = ("gold.campaign_hourly",)
    run_pipeline(lakehouse, up_to=gold)
    assert_tables_match_oracle(spark, lakehouse, gold=gold)  # e-2 and e-3 quarantined

    campaigns.write_text("ad_id,campaign_id\nad-1,c-1\nad-2,c-2\n")
    run_job("dim_campaigns", lakehouse)
    run_job("bronze_ad_events", lakehouse)
    replayed = run_job("silver_ad_events", lakehouse)
    assert (replayed["not_started"] is not None, replayed["quarantine_replay"]) == (
        True,
        {"lines": 1, "periods": ["2026-11-20T10:00:00+00:00"]},
    )
    run_job("gold_aggregates", lakehouse)
    assert_tables_match_oracle(spark, lakehouse, gold=gold)  # e-2 in silver and gold, e-3 not
    resolved = table(spark, lakehouse, "silver.quarantine_ad_events").filter(
        "resolved_at IS NOT NULL"
    )
    assert [(r.raw_line, r.resolved_by) for r in resolved.collect()] == [
        (event("e-2", "ad-2"), "replay after upstream change")
    ]
    # The dimension unchanged since: the next run replays nothing.
    assert "quarantine_replay" not in run_job("silver_ad_events", lakehouse)
