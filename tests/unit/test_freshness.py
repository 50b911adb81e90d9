"""What the checks before a query say from files: a dimension's snapshot is unchanged after maintenance.

(Bronze's "nothing new" and new bytes: tests/unit/test_landing_window.py.)"""

from __future__ import annotations


def test_an_unchanged_dimension_file_is_not_reloaded_after_maintenance(tmp_path):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from lakehouse.freshness import snapshot_unchanged

    table = str(tmp_path / "campaigns")
    rows = pa.table({"ad_id": ["a1", "a2"], "campaign_id": ["c1", "c1"]})
    for mode in ("overwrite", "append"):  # two small files to compact
        write_deltalake(table, rows, mode=mode, commit_properties=_metadata("source sha256 f"))
    DeltaTable(table).optimize.compact()  # the newest commit is now OPTIMIZE's, without a source
    assert DeltaTable(table).history(1)[0]["operation"] == "OPTIMIZE"
    assert snapshot_unchanged(table, "f") == "its source file is unchanged since the last load"
    assert snapshot_unchanged(table, "g") is None


def _metadata(text: str):
    from deltalake import CommitProperties

    return CommitProperties(custom_metadata={"userMetadata": text})


def test_an_incremental_run_sizes_its_input_by_what_its_upstream_added_since_its_checkpoint(
    tmp_path,
):
    from pathlib import Path

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from lakehouse.config import Lakehouse
    from lakehouse.delta_log import data_bytes
    from lakehouse.freshness import job_input_bytes

    lakehouse = Lakehouse(str(tmp_path))
    gold = lakehouse.table("gold.ad_hourly")
    silver = gold.upstream_tables()[0].path
    for day in range(3):  # versions 0..2 of the upstream, one file each
        write_deltalake(silver, pa.table({"n": list(range(100 * (day + 1)))}), mode="append")
    write_deltalake(gold.path, pa.table({"n": [1]}))
    whole = data_bytes(silver, gold.path)
    newest = max(f.stat().st_size for f in Path(silver).glob("*.parquet"))  # version 2's

    checkpoint = tmp_path / "checkpoint"
    assert job_input_bytes(gold, str(checkpoint)) == whole  # no batch yet: the whole tables
    # Batch 0 read versions 0 and 1: Delta's offset names the version after, index -1.
    for folder, body in (
        ("offsets", '{"batchWatermarkMs":0}\n{"reservoirVersion":2,"index":-1}'),
        ("commits", "{}"),
    ):
        (checkpoint / folder).mkdir(parents=True)
        (checkpoint / folder / "0").write_text(f"v1\n{body}\n")
    assert job_input_bytes(gold, str(checkpoint)) == newest < whole
    DeltaTable(silver).optimize.compact()  # rewrites files, adds no data
    assert job_input_bytes(gold, str(checkpoint)) == newest
    assert job_input_bytes(gold) == data_bytes(silver, gold.path)  # a batch: the whole tables


def test_the_input_size_says_whether_it_counts_only_what_is_new(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakehouse.config import Lakehouse
    from lakehouse.freshness import job_input

    lakehouse = Lakehouse(str(tmp_path))
    gold = lakehouse.table("gold.ad_hourly")
    silver = gold.upstream_tables()[0].path
    write_deltalake(silver, pa.table({"n": [1, 2]}))
    write_deltalake(gold.path, pa.table({"n": [1]}))
    checkpoint = tmp_path / "checkpoint"
    assert job_input(gold, str(checkpoint))[1] is False  # no batch yet: the whole tables
    for folder, body in (
        ("offsets", '{"batchWatermarkMs":0}\n{"reservoirVersion":1,"index":-1}'),
        ("commits", "{}"),
    ):
        (checkpoint / folder).mkdir(parents=True)
        (checkpoint / folder / "0").write_text(f"v1\n{body}\n")
    assert job_input(gold, str(checkpoint)) == (0, True)  # version 0 read, nothing since
