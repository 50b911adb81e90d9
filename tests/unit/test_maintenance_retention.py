"""The VACUUM retention is never below what a lagging streaming reader still needs (files only, no Spark)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from lakehouse.errors import ConfigError
from lakehouse.maintenance import NeededVersion, reader_position, safe_retention_hours

TABLE_ID = "8e1e4d3a-0000-4000-8000-000000000001"
OTHER_ID = "8e1e4d3a-0000-4000-8000-000000000002"
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def offsets_line(table_id: str, version: int, index: int = -1) -> str:
    return json.dumps(
        {
            "sourceVersion": 1,
            "reservoirId": table_id,
            "reservoirVersion": version,
            "index": index,
            "isStartingVersion": False,
        }
    )


def write_batch(checkpoint, batch: int, *sources: str, committed: bool) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    metadata = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(["v1", metadata, *sources]))
    if committed:
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_reader_reads_on_from_its_newest_committed_batch_not_from_a_planned_one(tmp_path):
    write_batch(tmp_path, 0, offsets_line(TABLE_ID, 3), committed=True)
    write_batch(tmp_path, 1, offsets_line(TABLE_ID, 7), committed=True)
    write_batch(
        tmp_path, 2, offsets_line(TABLE_ID, 9), committed=False
    )  # replayed from batch 1's end
    assert reader_position(str(tmp_path), TABLE_ID) == 7


def test_a_reader_with_only_a_planned_first_batch_needs_that_batchs_version(tmp_path):
    write_batch(tmp_path, 0, offsets_line(TABLE_ID, 4, index=12), committed=False)
    assert reader_position(str(tmp_path), TABLE_ID) == 4


def test_a_query_that_never_ran_or_reads_another_table_needs_nothing(tmp_path):
    assert reader_position(str(tmp_path / "never-ran"), TABLE_ID) is None
    write_batch(tmp_path, 0, offsets_line(OTHER_ID, 5), committed=True)
    assert reader_position(str(tmp_path), TABLE_ID) is None


def test_the_retention_covers_the_oldest_needed_version_with_a_margin():
    needed = NeededVersion(
        version=7, reader="silver.ad_events", committed_at=NOW - timedelta(hours=30, minutes=1)
    )
    assert safe_retention_hours(0, needed, NOW) == 32  # 30 h 1 min -> 31 whole hours, + 1 margin
    assert safe_retention_hours(168, needed, NOW) == 168  # asked for more: kept
    assert safe_retention_hours(0, None, NOW) == 0  # no reader lags: what was asked


def test_a_needed_version_gone_from_the_log_stops_the_vacuum_with_the_fix():
    needed = NeededVersion(version=2, reader="gold.campaign_hourly", committed_at=None)
    with pytest.raises(
        ConfigError, match="gold.campaign_hourly still reads from version 2.*Run that table's query"
    ):
        safe_retention_hours(0, needed, NOW)


def test_batch_notes_older_than_the_batches_spark_keeps_are_deleted(tmp_path):
    from lakehouse.maintenance import trim_batch_notes

    checkpoint = tmp_path / "gen=0"
    (checkpoint / "offsets").mkdir(parents=True)
    notes = tmp_path / "gen=0.batches"
    notes.mkdir()
    for batch in range(150):
        (notes / f"{batch}.json").write_text("{}")
    for batch in range(50, 150):  # Spark kept the newest 100 batches
        (checkpoint / "offsets" / str(batch)).write_text("v1\n{}\n")
    freed = trim_batch_notes(str(checkpoint))
    assert sorted(int(p.stem) for p in notes.iterdir()) == list(range(50, 150))
    assert (freed["files_before"], freed["files_after"], freed["files_deleted"]) == (150, 100, 50)
    assert (freed["bytes_before"], freed["bytes_after"]) == (300, 200)
    assert trim_batch_notes(str(tmp_path / "never-ran")) is None


def test_checkpoint_generations_a_refresh_retired_go_after_a_week(tmp_path):
    import os

    from lakehouse.config import Lakehouse
    from lakehouse.maintenance import trim_retired_generations

    table = Lakehouse(str(tmp_path)).table("bronze.ad_events")
    root = tmp_path / "checkpoints" / "bronze" / "ad_events"
    assert trim_retired_generations(table, NOW) is None  # never refreshed: nothing to look at
    for gen in (0, 1, 2):
        (root / f"gen={gen}" / "offsets").mkdir(parents=True)
        (root / f"gen={gen}" / "offsets" / "0").write_text("v1\n{}\n")
        (root / f"gen={gen}.state.json").write_text("{}")
        (root / "kafka" / "ads" / f"gen={gen}").mkdir(parents=True)
        (root / "kafka" / "ads" / f"gen={gen}" / "metadata").write_text("{}")
    table.start_new_generation(), table.start_new_generation()  # now at 2
    refreshed = (NOW - timedelta(days=3)).timestamp()
    os.utime(root / "CURRENT", (refreshed, refreshed))

    kept = trim_retired_generations(table, NOW)  # refreshed 3 days ago: kept for a look
    assert (kept["files_before"], kept["files_deleted"]) == (6, 0)
    assert sorted(p.name for p in root.iterdir()) == [
        "CURRENT", "gen=0", "gen=0.state.json", "gen=1", "gen=1.state.json",
        "gen=2", "gen=2.state.json", "kafka",
    ]  # fmt: skip

    freed = trim_retired_generations(table, NOW + timedelta(days=5))
    assert (freed["files_before"], freed["files_after"], freed["files_deleted"]) == (6, 0, 6)
    assert freed["bytes_after"] == 0 and freed["retention_hours"] == 7 * 24
    assert sorted(p.name for p in root.iterdir()) == [
        "CURRENT", "gen=2", "gen=2.state.json", "kafka",
    ]  # fmt: skip
    assert [p.name for p in (root / "kafka" / "ads").iterdir()] == ["gen=2"]
