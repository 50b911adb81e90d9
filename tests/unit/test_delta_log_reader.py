"""`lakehouse.delta_log` against tables written by delta-rs (no Spark): the log read straight from disk."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from lakehouse import delta_log


def append(
    path: Path, x: int, app: str | None = None, batch: int | None = None, tag: str | None = None
) -> None:
    properties = CommitProperties(
        app_transactions=[Transaction(app, batch)] if app is not None else None,
        custom_metadata={"userMetadata": tag} if tag is not None else None,
    )
    write_deltalake(str(path), pa.table({"x": [x]}), mode="append", commit_properties=properties)


def test_no_table_reads_as_nothing(tmp_path):
    path = str(tmp_path / "absent")
    assert delta_log.is_delta_table(path) is False
    assert (
        delta_log.committed_txns(path),
        delta_log.latest_version(path),
        delta_log.latest_commit_info(path),
    ) == ({}, None, {})
    assert (
        delta_log.tagged_commit_info(path, "t"),
        delta_log.table_id(path),
        delta_log.versions_of_txns(path, "a", {0}),
    ) == (None, None, {})
    assert delta_log.data_changed_since(path, 0) is True


def test_transactions_come_from_the_checkpoint_and_the_commits_after_it(tmp_path):
    table = tmp_path / "t"
    append(table, 0, "stream", 0)
    append(table, 1, "stream", 1)
    append(table, 2, "other", 7)
    DeltaTable(str(table)).create_checkpoint()  # version 2: txns now in Parquet
    append(table, 3, "stream", 2)
    append(table, 4)
    assert delta_log.is_delta_table(str(table))
    assert delta_log.committed_txns(str(table)) == {"stream": 2, "other": 7}
    assert delta_log.latest_version(str(table)) == 4
    assert delta_log.versions_of_txns(str(table), "stream", {1, 2, 9}) == {1: 1, 2: 3}


def test_commit_info_tags_times_and_the_table_id(tmp_path):
    table = tmp_path / "t"
    append(table, 0, tag="batch-a")
    append(table, 1, tag="batch-b")
    append(table, 2)
    history = {c["version"]: c for c in DeltaTable(str(table)).history()}
    assert (
        delta_log.tagged_commit_info(str(table), "batch-a")["timestamp"] == history[0]["timestamp"]
    )
    assert delta_log.tagged_commit_info(str(table), "batch-z") is None
    assert delta_log.latest_commit_info(str(table))["timestamp"] == history[2]["timestamp"]
    assert delta_log.commit_time(str(table), 1).timestamp() * 1000 == history[1]["timestamp"]
    assert delta_log.commit_time(str(table), 9) is None
    assert delta_log.table_id(str(table)) == DeltaTable(str(table)).metadata().id


def test_the_table_id_survives_log_clean_up(tmp_path):
    table = tmp_path / "t"
    for x in range(3):
        append(table, x)
    expected = DeltaTable(str(table)).metadata().id
    DeltaTable(str(table)).create_checkpoint()
    for commit in (table / "_delta_log").glob("*.json"):
        commit.unlink()  # what log clean-up does to commits older than the checkpoint
    assert delta_log.table_id(str(table)) == expected


def test_compaction_changes_no_data_but_an_append_does(tmp_path):
    table = tmp_path / "t"
    for x in range(3):
        append(table, x)
    DeltaTable(str(table)).optimize.compact()
    compacted = delta_log.latest_version(str(table))
    assert compacted == 3 and delta_log.data_changed_since(str(table), compacted) is False
    append(table, 3)
    assert delta_log.data_changed_since(str(table), compacted) is True
    assert delta_log.data_changed_since(str(table), 2) is True  # version 2 is an append


def test_nulls_are_ruled_out_only_by_every_live_files_statistics(tmp_path):
    table, x = str(tmp_path / "t"), pa.int64()
    assert delta_log.may_hold_nulls(table, "x") is True  # no table: unsure
    write_deltalake(table, pa.table({"x": pa.array([1, 2], x)}))
    assert delta_log.may_hold_nulls(table, "x") is False
    write_deltalake(table, pa.table({"x": pa.array([3, None], x)}), mode="append")
    assert delta_log.may_hold_nulls(table, "x") is True
    DeltaTable(table).create_checkpoint()  # the null's file is now in the checkpoint's add actions
    assert delta_log.may_hold_nulls(table, "x") is True
    write_deltalake(
        table, pa.table({"x": pa.array([4], x)}), mode="overwrite"
    )  # removes both files
    assert delta_log.may_hold_nulls(table, "x") is False
    unindexed = str(tmp_path / "no_stats")
    write_deltalake(
        unindexed,
        pa.table({"x": pa.array([1], x)}),
        configuration={"delta.dataSkippingNumIndexedCols": "0"},
    )
    assert delta_log.may_hold_nulls(unindexed, "x") is True  # no statistics for x: unsure


def test_data_bytes_are_the_live_files_sizes_through_checkpoints_overwrites_and_compaction(
    tmp_path,
):
    def on_disk(
        *tables: Path,
    ) -> int:  # delta-rs's own list of live files, sized by the file system
        return sum(
            Path(uri.removeprefix("file://")).stat().st_size
            for t in tables
            for uri in DeltaTable(str(t)).file_uris()
        )

    first, second = tmp_path / "a", tmp_path / "b"
    assert delta_log.data_bytes(str(first)) is None  # no table: unsure
    for x in range(3):
        append(first, x)
    DeltaTable(str(first)).create_checkpoint()
    append(first, 3)
    assert delta_log.data_bytes(str(first)) == on_disk(first)
    DeltaTable(str(first)).optimize.compact()  # 4 files removed, 1 added
    write_deltalake(str(second), pa.table({"x": list(range(100))}))
    assert delta_log.data_bytes(str(first), str(second)) == on_disk(first, second)
    write_deltalake(str(second), pa.table({"x": [1]}), mode="overwrite")
    assert delta_log.data_bytes(str(first), str(second)) == on_disk(first, second)
    assert delta_log.data_bytes(str(first), str(tmp_path / "absent")) is None
