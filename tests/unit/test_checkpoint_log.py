"""A checkpoint's logs read from its folder: batch ids, and the temp files of writes that never finished."""

from __future__ import annotations

from lakehouse import checkpoint_log


def test_the_temp_files_of_an_unfinished_write_are_told_from_the_log_files(tmp_path):
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    # As Spark leaves them: batch 0 written (and its checksum), batch 1's write cut off before its rename.
    kept = ["0", ".0.crc"]
    unfinished = [
        ".1.efd9e489-d652-4fb5-8dd2-b3e1ddc920ff.tmp",
        "..1.efd9e489-d652-4fb5-8dd2-b3e1ddc920ff.tmp.crc",
    ]
    for name in kept + unfinished:
        (offsets / name).touch()

    assert checkpoint_log.batches(str(tmp_path), "offsets") == (0,)
    assert [p.name for p in checkpoint_log.unfinished_writes(str(tmp_path), "offsets")] == sorted(
        unfinished
    )
    assert checkpoint_log.unfinished_writes(str(tmp_path), "commits") == []
