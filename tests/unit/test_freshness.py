"""A file-source query's "nothing new" check counts only the files of the batches it has committed."""

from __future__ import annotations

from pathlib import Path

from lakehouse.freshness import file_source_caught_up, file_source_new_bytes
from lakehouse.landing import spark_uri

PATTERN = "*/*.jsonl"


def _entry(path: Path, batch: int, *files: Path) -> None:
    """A source log entry as Spark's file source writes it: a version line, then one JSON line per file."""
    lines = [f'{{"path":"{spark_uri(file)}","timestamp":0,"batchId":{batch}}}' for file in files]
    path.write_text("v1\n" + "".join(line + "\n" for line in lines))


def _committed(checkpoint: Path, batch: int) -> None:
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"logOffset":{batch}}}\n')
    (checkpoint / "commits" / str(batch)).write_text("v1\n{}\n")


def test_a_file_listed_for_a_batch_whose_driver_died_before_planning_it_is_still_new(tmp_path):
    landing = tmp_path / "landing" / "ad_events"
    (landing / "ingest_date=2026-11-20").mkdir(parents=True)
    first, second = (
        landing / "ingest_date=2026-11-20" / "a.jsonl",
        landing / "ingest_date=2026-11-20" / "b.jsonl",
    )
    first.write_text("x" * 1000)
    checkpoint = tmp_path / "checkpoint"
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True)
    _entry(checkpoint / "sources" / "0" / "0", 0, first)
    _committed(checkpoint, 0)
    assert (
        file_source_caught_up(str(checkpoint), str(landing), PATTERN)
        == "no new file among the 1 landed"
    )

    # The next file lands; the source lists it for batch 1, and the driver dies before offsets/1.
    second.write_text("y" * 24)
    _entry(checkpoint / "sources" / "0" / "1", 1, second)
    assert file_source_caught_up(str(checkpoint), str(landing), PATTERN) is None
    assert file_source_new_bytes(str(checkpoint), str(landing), PATTERN) == 24

    # Batch 1 planned and committed: nothing new again.
    _committed(checkpoint, 1)
    assert (
        file_source_caught_up(str(checkpoint), str(landing), PATTERN)
        == "no new file among the 2 landed"
    )


def test_a_compacted_source_log_is_read_from_its_newest_compaction_up_to_the_committed_batch(
    tmp_path,
):
    landing = tmp_path / "landing" / "ad_events" / "ingest_date=2026-11-20"
    landing.mkdir(parents=True)
    files = [landing / f"{n}.jsonl" for n in range(3)]
    for file in files:
        file.write_text("z")
    checkpoint = tmp_path / "checkpoint"
    for folder in ("offsets", "commits", "sources/0"):
        (checkpoint / folder).mkdir(parents=True)
    _entry(
        checkpoint / "sources" / "0" / "9.compact", 9, *files[:2]
    )  # batches up to 9, older entries gone
    _entry(checkpoint / "sources" / "0" / "10", 10, files[2])
    _committed(checkpoint, 10)
    assert (
        file_source_caught_up(str(checkpoint), str(landing.parent), PATTERN)
        == "no new file among the 3 landed"
    )
    # The committed batch is 9 and entry 10 a listed, unplanned one: the third file is new.
    (checkpoint / "offsets" / "10").unlink()
    (checkpoint / "commits" / "10").unlink()
    _committed(checkpoint, 9)
    assert file_source_caught_up(str(checkpoint), str(landing.parent), PATTERN) is None
    # Compacted past the committed batch (entry 19 compacts 10-19, the entries before it gone): unsure.
    (checkpoint / "sources" / "0" / "9.compact").unlink()
    (checkpoint / "sources" / "0" / "10").unlink()
    _entry(checkpoint / "sources" / "0" / "19.compact", 19, *files)
    assert file_source_caught_up(str(checkpoint), str(landing.parent), PATTERN) is None


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
