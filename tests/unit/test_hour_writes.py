"""What `lakehouse status` reads as each hour's last write survives table maintenance: compaction
and VACUUM change no row, so they must not make an hour look newer than its downstream's (the
false `stale` after the maintenance DAG). Real Delta tables, written and compacted by delta-rs."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lakehouse import catalog
from lakehouse_tools import observe

SILVER = catalog.get("silver.ad_events")  # files by event_date / event_hour partition
GOLD = catalog.get("gold.campaign_hourly")  # files by event_date / hour_start partition
H23, H00 = datetime(2026, 11, 19, 23), datetime(2026, 11, 20, 0)


def append_silver(path: str, hour: datetime, value: int) -> None:
    rows = {
        "event_date": [hour.date().isoformat()],
        "event_hour": [hour.hour],
        "event_time": pa.array([hour.replace(tzinfo=UTC)], pa.timestamp("us", "UTC")),
        "value": [value],
    }
    write_deltalake(path, pa.table(rows), partition_by=["event_date", "event_hour"], mode="append")


def append_gold(path: str, *hours: datetime, partition_by=GOLD.partition_by) -> None:
    rows = {
        "event_date": [h.date().isoformat() for h in hours],
        "hour_start": pa.array([h.replace(tzinfo=UTC) for h in hours], pa.timestamp("us", "UTC")),
        "views": [1] * len(hours),
    }
    write_deltalake(path, pa.table(rows), partition_by=list(partition_by), mode="append")


def maintain(path: str) -> None:
    """What the maintenance DAG does to a table: OPTIMIZE, then VACUUM."""
    table = DeltaTable(path)
    assert table.optimize.compact()["numFilesAdded"] >= 1
    table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)


def newest_file_time(path: str) -> datetime:
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    return max(observe.utc(a["modification_time"]) for a in actions)


def facts(silver: str, gold: str) -> tuple:
    return (
        observe.hour_writes(DeltaTable(silver), SILVER),
        observe.hour_writes(DeltaTable(gold), GOLD),
        observe.last_write(DeltaTable(silver)),
        observe.last_write(DeltaTable(gold)),
    )


def test_compaction_and_vacuum_keep_each_hours_last_write_and_a_later_write_still_counts(tmp_path):
    silver, gold = str(tmp_path / "silver"), str(tmp_path / "gold")
    for value, hour in enumerate((H23, H23, H00, H00)):  # two small files per hour
        append_silver(silver, hour, value)
    append_gold(gold, H23)
    append_gold(gold, H23, H00)
    before = facts(silver, gold)
    assert sorted(before[0]) == sorted(before[1]) == [H23, H00]

    maintain(silver)
    maintain(gold)
    # The compacted files are newer than any write: read naively, every hour would look rewritten.
    assert newest_file_time(silver) > max(before[0].values())
    assert newest_file_time(gold) > max(before[1].values())
    assert facts(silver, gold) == before

    # Late rows for 00:00 after the maintenance: that hour's write moves on, 23:00's does not, and
    # compacting the new file with the compacted one keeps both.
    append_silver(silver, H00, 9)
    late = observe.hour_writes(DeltaTable(silver), SILVER)
    assert late[H23] == before[0][H23] and late[H00] > before[0][H00]
    maintain(silver)
    assert observe.hour_writes(DeltaTable(silver), SILVER) == late
    assert observe.last_write(DeltaTable(silver)).operation == "WRITE"


def test_an_hour_table_in_the_layout_before_hour_partitions_reads_its_hours_from_statistics(
    tmp_path,
):
    # Until its first run of the hour-partitioned declaration rewrites it: partitioned by
    # event_date alone, a file's hours are read from hour_start's statistics.
    by_hour, by_day = str(tmp_path / "by_hour"), str(tmp_path / "by_day")
    append_gold(by_hour, H23, H00)
    append_gold(by_day, H23, H00, partition_by=["event_date"])
    hours = sorted(observe.hour_writes(DeltaTable(by_hour), GOLD))
    assert hours == sorted(observe.hour_writes(DeltaTable(by_day), GOLD)) == [H23, H00]


class CountingHistory:
    """A real Delta table that counts how often its history is read."""

    def __init__(self, path: str) -> None:
        self.table, self.reads = DeltaTable(path), 0

    def __getattr__(self, name: str):
        return getattr(self.table, name)

    def history(self, limit: int) -> list[dict]:
        self.reads += 1
        return self.table.history(limit)


def test_status_reads_a_tables_history_once_for_its_hours_replaces_and_last_write(tmp_path):
    silver = str(tmp_path / "silver")
    for value, hour in enumerate((H23, H00, H23)):
        append_silver(silver, hour, value)
    maintain(silver)
    counted = CountingHistory(silver)
    delta = observe.HistoryReadOnce(counted)
    writes = observe.hour_writes(delta, SILVER)
    assert (observe.hours_replaced(delta, {H23}), observe.last_write(delta)) == (
        observe.hours_replaced(DeltaTable(silver), {H23}),
        observe.last_write(DeltaTable(silver)),
    )
    assert writes == observe.hour_writes(DeltaTable(silver), SILVER)
    assert counted.reads == 1
    assert delta.history(2) == DeltaTable(silver).history(2)
