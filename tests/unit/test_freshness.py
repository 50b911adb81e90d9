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
