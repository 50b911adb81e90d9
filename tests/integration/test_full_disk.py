"""A full disk: the job stops with one project sentence (the disk, what is free, what to free), and
the rerun once there is room is exact.

The lakehouse is on a small tmpfs of its own (mounting one needs root: skipped otherwise), filled
but for 100 KiB before bronze writes its Parquet files.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers import START, oracle, run_job, table

from lakehouse.config import Lakehouse
from lakehouse.errors import DiskFull
from lakehouse_tools.generator import write_campaigns, write_hours

SIZE_MIB = 6


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of SIZE_MIB MiB, unmounted at the end."""
    mount_point = tmp_path / "small_disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MIB}m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root needed): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(folder: Path, leave_bytes: int) -> Path:
    """A file that takes all of ``folder``'s disk but ``leave_bytes``."""
    import shutil

    filler = folder / "filler.bin"
    with filler.open("wb") as out:
        out.write(b"\0" * (shutil.disk_usage(folder).free - leave_bytes))
    return filler


def test_a_full_disk_is_one_sentence_with_what_to_free_and_the_rerun_is_exact(spark, small_disk):
    lakehouse = Lakehouse(root=str(small_disk / "lake"))
    write_campaigns(lakehouse, seed=3)
    write_hours(lakehouse, START, 1, events_per_second=1, seed=3)
    filler = fill(small_disk, leave_bytes=100 * 1024)

    with pytest.raises(DiskFull) as refused:
        run_job("bronze_ad_events", lakehouse)

    message = str(refused.value)
    assert "\n" not in message
    assert re.fullmatch(
        rf"bronze\.ad_events: no space left on the disk \(the lakehouse {re.escape(lakehouse.root)}:"
        rf" \d+(\.\d)? (B|KiB) free of {SIZE_MIB}\.0 MiB; the temp folder \S+: [^)]+\)\. Nothing of this"
        r" write was committed: rerun the task once there is room and it resumes exactly where it"
        r" stopped\. To free space: VACUUM old table versions \(the ysb_maintenance DAG, or"
        r" jobs/maintenance\.py --table <name>\), move away landed files bronze has read \(under"
        r" landing/\) and reports already delivered \(under outbox/\), and clear Spark's scratch"
        r" space \(spark\.local\.dir, the temp folder\)\.",
        message,
    ), message
    assert refused.value.__cause__ is None  # the Spark trace is not chained to the sentence

    filler.unlink()
    run_job("bronze_ad_events", lakehouse)
    assert table(spark, lakehouse, "bronze.ad_events").count() == oracle(lakehouse).lines
