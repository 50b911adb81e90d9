"""Which batches a streaming query's checkpoint records, read from its folder (no Spark, no JVM).

Spark writes ``offsets/N`` when it plans batch N (a version line, the batch's metadata such as
its watermark, then one end offset per source) and ``commits/N`` when the batch has finished
(a version line, then the next batch's watermark). A batch planned and not committed is replayed
by the next run. The checks before a query starts list these logs through here.
"""

from __future__ import annotations

import re
from pathlib import Path

from lakehouse.files import lake_path

# Spark writes a log file to a temp file beside it (".N.<uuid>.tmp", and its checksum
# "..N.<uuid>.tmp.crc"), then renames it: a driver killed in between leaves them behind.
_TEMP_FILE = re.compile(
    r"\.\.?\d+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp(\.crc)?"
)


def batches(checkpoint: str, log: str) -> tuple[int, ...]:
    """The batch ids in the checkpoint's ``log`` ("offsets" or "commits"), oldest first; () when it has none."""
    try:
        return tuple(
            sorted(int(p.name) for p in (lake_path(checkpoint) / log).iterdir() if p.name.isdigit())
        )
    except (FileNotFoundError, NotADirectoryError):
        return ()


def newest(checkpoint: str, log: str) -> int | None:
    """The newest batch id in the checkpoint's ``log`` (None: none yet)."""
    ids = batches(checkpoint, log)
    return ids[-1] if ids else None


def batch_to_replay(checkpoint: str) -> bool:
    """Has the query planned a batch it has not committed (the next run replays it)?"""
    planned = newest(checkpoint, "offsets")
    return planned is not None and planned != newest(checkpoint, "commits")


def log_files(checkpoint: str | Path, log: str, batch: int) -> tuple[Path, Path]:
    """Batch ``batch``'s file in the checkpoint's ``log``, and its hidden checksum file (Spark's rename
    of a file written again fails on a stale one)."""
    folder = lake_path(checkpoint) / log
    return folder / str(batch), folder / f".{batch}.crc"


def unfinished_writes(checkpoint: str, log: str) -> list[Path]:
    """The temp files of log files whose write never finished (their driver died), in the checkpoint's ``log``."""
    try:
        return sorted(
            p for p in (lake_path(checkpoint) / log).iterdir() if _TEMP_FILE.fullmatch(p.name)
        )
    except (FileNotFoundError, NotADirectoryError):
        return []
